"""``scrapy_grownup.Addon``: one line in ``ADDONS`` turns a crawl into article items.

It checks every ``GROWNUP_*`` setting when the crawler starts (``settings.GrownupSettings``:
a bad value stops the crawl with one error line, before the spider opens and before any model
loads), registers the three components at add-on priority and leaves every ``GROWNUP_*``
setting to its default unless the project set it. Component order matters: the downloader middleware sits
after decompression and redirects (it must see the final, decoded body), the spider middleware
sits next to the spider (it must see ``with_article`` before other middlewares do), and the
pipeline runs before the project's own pipelines (they see the filled item).
"""

from __future__ import annotations

import asyncio
import logging

from scrapy.exceptions import NotConfigured
from scrapy.logformatter import LogFormatter

from scrapy_grownup.crawl.items import ArticleLogFormatter
from scrapy_grownup.errors import DeviceError, SettingsError
from scrapy_grownup.crawl.middlewares import ArticleSpiderMiddleware, FeaturizeMiddleware
from scrapy_grownup.crawl.pipelines import ArticlePipeline
from scrapy_grownup.crawl.settings import DEFAULTS, GrownupSettings, check, unknown_names

logger = logging.getLogger(__name__)
PRIORITIES = {
    # HttpCompression is 590; scrapy-poet's InjectionMiddleware, 543, must find the page
    # already parsing when it builds a callback's zyte_common_items.Article (``zyte``)
    "DOWNLOADER_MIDDLEWARES": (FeaturizeMiddleware, 545),
    "SPIDER_MIDDLEWARES": (ArticleSpiderMiddleware, 975),  # Depth is 900; nearest the spider
    "ITEM_PIPELINES": (ArticlePipeline, 100),
}
WARC_ARCHIVE_PRIORITY = 950
ARCHIVE_SETTINGS = ("GROWNUP_WARC_OUTPUT", "GROWNUP_WARC_OUTPUT_MAX_BYTES",
                    "GROWNUP_WARC_OUTPUT_PREFIX", "GROWNUP_WARC_OUTPUT_REQUESTS")
DEFAULT_LOG_FORMATTER = "scrapy.logformatter.LogFormatter"


class Addon:
    """The Scrapy add-on: ``ADDONS = {"scrapy_grownup.Addon": 500}`` turns a crawl's HTML
    responses into article items.

    When the crawler starts, it checks every ``GROWNUP_*`` setting (a bad value stops the crawl
    with one error line, before the spider opens and before any model loads) and installs,
    unless the project already has them: ``FeaturizeMiddleware`` (downloader middleware, 545:
    parses HTML responses in worker processes), ``ArticleSpiderMiddleware`` (spider
    middleware, 975: sees ``with_article`` items and makes an ``ArticleItem`` for pages
    that yield none), ``ArticlePipeline`` (item pipeline, 100: fills the items), a log
    formatter that shortens items, and ``WarcArchiveMiddleware`` when ``GROWNUP_WARC_OUTPUT``
    is set. ``GROWNUP_ENABLED = False`` turns it off.

    Settings: the ``GROWNUP_*`` prefix, each left to its default unless the project sets it;
    see the docs' settings reference (``docs/settings.md``) and Scrapy add-on page
    (``docs/scrapy.md``).
    """

    def __init__(self, crawler=None):
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler) -> "Addon":
        return cls(crawler)

    def update_settings(self, settings) -> None:
        """Register the components and check every ``GROWNUP_*`` setting, when the crawler
        starts: before the spider opens and before any model loads. A bad value stops the
        crawl with one error line naming the setting and the values it may take."""
        try:
            enabled = check(settings, "GROWNUP_ENABLED")
            if enabled:
                from scrapy_grownup.model.cuda import check_device

                check_device(GrownupSettings.from_settings(settings).device)
                if settings.get("GROWNUP_WARC_OUTPUT"):  # WarcArchiveMiddleware's, checked now
                    for name in ARCHIVE_SETTINGS:
                        check(settings, name)
        except (SettingsError, DeviceError) as exc:
            stop_crawl(exc)
        if not enabled:
            raise NotConfigured("GROWNUP_ENABLED is off")
        for name in unknown_names(settings):
            logger.warning("%s is not a scrapy_grownup setting; it is ignored", name)
        for name, value in DEFAULTS.items():
            settings.setdefault(name, value, "addon")
        for setting, (component, priority) in PRIORITIES.items():
            settings.setdefault_in_component_priority_dict(setting, component, priority)
        if settings.get("LOG_FORMATTER") in (DEFAULT_LOG_FORMATTER, LogFormatter):
            settings.set("LOG_FORMATTER", ArticleLogFormatter, "addon")
        meta_refresh = "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware"
        base = settings.getdict("DOWNLOADER_MIDDLEWARES_BASE")
        own = settings.getdict("DOWNLOADER_MIDDLEWARES")
        if meta_refresh in base and meta_refresh not in own:
            # Scrapy's own would lose a page whose <base href> or charset w3lib cannot read.
            from scrapy_grownup.crawl.middlewares import guarded_meta_refresh

            settings.setdefault_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", meta_refresh, None)
            settings.setdefault_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", guarded_meta_refresh(), base[meta_refresh])
        if uses_scrapy_poet(settings):
            zyte_settings(settings)
        if settings.get("GROWNUP_WARC_OUTPUT"):
            from scrapy_grownup.warc.archive import WarcArchiveMiddleware

            # Next to the downloader: the archive keeps the bytes as they came off the wire.
            settings.setdefault_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", WarcArchiveMiddleware, WARC_ARCHIVE_PRIORITY)


ZYTE_MODULE = "scrapy_grownup.zyte"
ZYTE_PROVIDER = "scrapy_grownup.zyte.GrownupArticleProvider"


def uses_scrapy_poet(settings) -> bool:
    """Whether the crawl has scrapy-poet: its add-on in ``ADDONS`` or its
    ``InjectionMiddleware`` in ``DOWNLOADER_MIDDLEWARES`` (read by name: nothing is imported)."""
    def named(entry) -> str:
        return entry if isinstance(entry, str) else \
            f"{getattr(entry, '__module__', '')}.{getattr(entry, '__qualname__', '')}"

    addons = [named(k) for k, v in settings.getdict("ADDONS").items() if v is not None]
    middlewares = [named(k) for k, v in settings.getdict("DOWNLOADER_MIDDLEWARES").items()
                   if v is not None]
    return any(name.startswith("scrapy_poet.") and name.endswith("Addon") for name in addons) \
        or any(name.startswith("scrapy_poet.") and name.endswith("InjectionMiddleware")
               for name in middlewares)


def zyte_settings(settings) -> None:
    """With scrapy-poet in the crawl and zyte-common-items installed: the provider of
    ``zyte.GrownupArticle`` in ``SCRAPY_POET_PROVIDERS`` and ``zyte`` (its page object for
    ``zyte_common_items.Article``) in ``SCRAPY_POET_DISCOVER``, unless the project has them."""
    from importlib.util import find_spec

    if find_spec("zyte_common_items") is None or find_spec("scrapy_poet") is None:
        logger.warning("scrapy-poet is in the crawl but zyte-common-items is not installed: "
                       "no zyte_common_items.Article from scrapy_grownup (pip install "
                       "'scrapy-grownup[zyte]')")
        return
    providers = settings.getdict("SCRAPY_POET_PROVIDERS")
    if not any(key == ZYTE_PROVIDER or getattr(key, "__module__", None) == ZYTE_MODULE
               for key in providers):
        providers[ZYTE_PROVIDER] = 1100  # zyte.PROVIDER_PRIORITY
        # as Scrapy's set_in_component_priority_dict: whatever the setting's priority
        settings.set("SCRAPY_POET_PROVIDERS", providers,
                     settings.getpriority("SCRAPY_POET_PROVIDERS") or 0)
    discover = settings.getlist("SCRAPY_POET_DISCOVER")
    if ZYTE_MODULE not in discover:
        settings.set("SCRAPY_POET_DISCOVER", [*discover, ZYTE_MODULE],
                     settings.getpriority("SCRAPY_POET_DISCOVER") or 0)


def stop_crawl(error: SettingsError | DeviceError):
    """Stop a crawl whose settings are bad: one error line, then ``SystemExit(1)`` where the
    crawl runs in an asyncio task (``scrapy crawl`` / ``runspider`` / ``parse`` and
    ``AsyncCrawlerProcess``: Scrapy exits with status 1 and prints no traceback), else the
    ``SettingsError`` itself (a ``CrawlerProcess`` or a direct call: the caller gets the
    exception; Scrapy's ``CrawlerProcess`` logs it with its traceback)."""
    logger.error("%s", error)
    try:
        in_task = asyncio.current_task() is not None
    except RuntimeError:  # no running event loop
        in_task = False
    if in_task:
        raise SystemExit(1) from None
    raise error
