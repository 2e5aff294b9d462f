"""``scrapy_grownup.Addon``: one line in ``ADDONS`` turns a crawl into article items.

It registers the three components at add-on priority and leaves every ``GROWNUP_*`` setting to
its default unless the project set it. Component order matters: the downloader middleware sits
after decompression and redirects (it must see the final, decoded body), the spider middleware
sits next to the spider (it must see ``with_article`` before other middlewares do), and the
pipeline runs before the project's own pipelines (they see the filled item).
"""

from __future__ import annotations

from scrapy.exceptions import NotConfigured

from .middlewares import ArticleSpiderMiddleware, FeaturizeMiddleware
from .pipelines import ArticlePipeline
from .settings import DEFAULTS

PRIORITIES = {
    "DOWNLOADER_MIDDLEWARES": (FeaturizeMiddleware, 540),  # HttpCompression is 590
    "SPIDER_MIDDLEWARES": (ArticleSpiderMiddleware, 975),  # Depth is 900; nearest the spider
    "ITEM_PIPELINES": (ArticlePipeline, 100),
}
WARC_ARCHIVE_PRIORITY = 950


class Addon:
    """``ADDONS = {"scrapy_grownup.Addon": 500}``."""

    def update_settings(self, settings) -> None:
        if not settings.getbool("GROWNUP_ENABLED", DEFAULTS["GROWNUP_ENABLED"]):
            raise NotConfigured("GROWNUP_ENABLED is off")
        for name, value in DEFAULTS.items():
            settings.setdefault(name, value, "addon")
        for setting, (component, priority) in PRIORITIES.items():
            settings.setdefault_in_component_priority_dict(setting, component, priority)
        if settings.get("GROWNUP_WARC_OUTPUT"):
            from .warc.archive import WarcArchiveMiddleware

            # Next to the downloader: the archive keeps the bytes as they came off the wire.
            settings.setdefault_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", WarcArchiveMiddleware, WARC_ARCHIVE_PRIORITY)
