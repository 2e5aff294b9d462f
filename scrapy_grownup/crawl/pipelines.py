"""``ArticlePipeline``: waits for the article of an item's page and fills the item.

Items without a pending page (the spider's own, not passed to ``with_article``) pass
untouched. Every page that cannot become an article is a ``DropItem`` with its reason, counted
under ``grownup/dropped/<reason>``. A page's ``request.meta["grownup"]`` overrides
(``request_options``) apply here, but for its extraction overrides, which its page worker got
with the body: they replace the crawl's settings for its item.
"""

from __future__ import annotations

import asyncio
import logging
import time

from scrapy.exceptions import DropItem

from scrapy_grownup.errors import (ArticleError, EmptyPageError, GrownupError, ModelError, NotHTMLError,
                     ParseError)
from scrapy_grownup.crawl.items import article_values, fill_item
from scrapy_grownup.crawl.request_options import RequestMetaError
from scrapy_grownup.crawl.runtime import RuntimeComponent
from scrapy_grownup.crawl.workers import PageTimeoutError, WorkerCrashedError

logger = logging.getLogger(__name__)
_REASONS = ((RequestMetaError, "bad_meta"), (NotHTMLError, "not_html"),
            (EmptyPageError, "empty_page"),
            (ParseError, "parse_error"), (WorkerCrashedError, "worker_crashed"),
            (PageTimeoutError, "timeout"),
            (ModelError, "model_error"), (ArticleError, "article_error"))


def drop_reason(exc: BaseException) -> str:
    for kind, reason in _REASONS:
        if isinstance(exc, kind):
            return reason
    return "bad_page" if isinstance(exc, GrownupError) else "model_error"


class ArticlePipeline(RuntimeComponent):
    """Fills ``url``, ``title``, ``text``, ``page_type``... on items that asked for an article."""

    async def open_spider(self) -> None:
        await self.runtime.open()

    async def close_spider(self) -> None:
        await self.runtime.close()

    def _drop(self, reason: str, url: str, detail: str) -> DropItem:
        self.runtime.inc(f"dropped/{reason}")
        return DropItem(f"scrapy_grownup: {reason}: {url}: {detail}", log_level="INFO")

    async def process_item(self, item):
        runtime = self.runtime
        claim = runtime.release(item)
        if claim is None:
            return item
        try:
            parsed = await claim.page
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - each page's failure is its own drop
            raise self._drop(drop_reason(exc), claim.url, str(exc)) from exc
        runtime.inc("pages_featurized")
        runtime.count_article(parsed)
        article = parsed.article
        if article.text_source:  # "prose": pages of a site the model cannot read
            runtime.inc(f"text_source/{article.text_source}")
        settings = runtime.settings if claim.options is None else \
            claim.options.settings(runtime.settings)  # meta["grownup"]'s, for this page
        if settings.page_types and article.page_type not in settings.page_types:
            raise self._drop("page_type", claim.url,
                             f"{article.page_type} is not in GROWNUP_PAGE_TYPES")
        if len(article.text.strip()) < settings.min_text_length:
            reason = "short_text" if article.text.strip() else "no_content"
            raise self._drop(reason, claim.url, f"{len(article.text.strip())} characters < "
                             f"GROWNUP_MIN_TEXT_LENGTH = {settings.min_text_length}")
        if settings.min_confidence and article.confidence is not None \
                and article.confidence < settings.min_confidence:
            raise self._drop("low_confidence", claim.url, f"confidence {article.confidence} < "
                             f"GROWNUP_MIN_CONFIDENCE = {settings.min_confidence}")
        try:
            values = article_values(article, settings.output_format)
        except GrownupError as exc:  # a Markdown built only now that fails (ArticleError)
            raise self._drop(drop_reason(exc), claim.url, str(exc)) from exc
        if claim.options is not None:  # comments off, fields left out
            values = claim.options.item_values(values)
        values["model_version"] = runtime.model_info["version"]
        values["timing"] = {"parse_ms": round(1000.0 * parsed.parse_seconds, 2),
                            "batch_ms": round(1000.0 * parsed.article_seconds, 2),
                            "total_ms": round(1000.0 * (time.perf_counter() - claim.started), 2)}
        fill_item(item, values)
        runtime.inc("items")
        return item
