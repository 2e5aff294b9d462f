"""Scrapy middlewares: start featurization at download time, tie pages to items.

``FeaturizeMiddleware`` (downloader) hands the body of every HTML response with status 200 to
the worker pool as soon as it arrives, so parsing overlaps the spider callback and the rest of
the crawl. ``ArticleSpiderMiddleware`` then decides which item carries that page's article:
the items a callback wraps in ``with_article(item, response)``, or else, when the callback
yields no item for the page, a new ``ArticleItem`` (``GROWNUP_AUTO_ITEMS``).
"""

from __future__ import annotations

import logging
from typing import Any, AsyncIterator

from .decoding import is_html
from .runtime import RuntimeComponent

logger = logging.getLogger(__name__)


class PendingArticle:
    """What ``with_article`` returns: an item that should get a response's article."""

    __slots__ = ("item", "response")

    def __init__(self, item: Any, response: Any):
        self.item = item
        self.response = response


def with_article(item: Any, response: Any) -> PendingArticle:
    """Yield this from a callback to have ``item`` filled with the article of ``response``.

    The item keeps its own fields; the pipeline adds the article fields it can hold.
    """
    return PendingArticle(item, response)


def _content_type(response) -> str | None:
    value = response.headers.get(b"Content-Type")
    return value.decode("latin-1") if value else None


class FeaturizeMiddleware(RuntimeComponent):
    """Downloader middleware: parse HTML responses in worker processes, off the reactor."""

    async def process_response(self, request, response):
        runtime = self.runtime
        body = response.body
        if not is_html(_content_type(response), body):
            runtime.inc("responses/not_html")
            return response
        if response.status != 200:
            runtime.inc(f"skipped/http_{response.status}")
            return response
        runtime.inc("responses/html")
        await runtime.start_page(request, body, response.url, _content_type(response))
        return response


class ArticleSpiderMiddleware(RuntimeComponent):
    """Spider middleware: which item carries the article of each featurized page."""

    async def process_spider_output(self, response, result) -> AsyncIterator[Any]:
        from scrapy import Request

        runtime = self.runtime
        page = runtime.take_page(response.request) if response.request is not None else None
        wanted = False
        async for element in result:
            if isinstance(element, PendingArticle):
                element_page = page if element.response is response else \
                    runtime.take_page(element.response.request)
                if element_page is None:
                    logger.warning("with_article(): %s was not featurized (not an HTML page "
                                   "with status 200); the item passes without an article",
                                   element.response.url)
                    runtime.inc("skipped/not_featurized")
                else:
                    runtime.claim(element.item, element_page, element.response.url)
                    wanted = True
                yield element.item
                continue
            if not isinstance(element, Request):
                wanted = True  # the callback makes its own items; no automatic one
            yield element
        if page is None:
            return
        if runtime.settings.auto_items and not wanted:
            from .items import ArticleItem

            item = ArticleItem(url=response.url)
            runtime.claim(item, page, response.url)
            yield item
        elif not any(c.page is page for c in runtime.claims.values()):
            page.cancel()
            runtime.inc("skipped/no_item")

    def process_spider_exception(self, response, exception):
        """A callback that raised gets no article item; its page is counted, not kept."""
        page = self.runtime.take_page(response.request) if response.request is not None \
            else None
        if page is not None:
            page.cancel()
            self.runtime.inc("skipped/callback_error")
        return None
