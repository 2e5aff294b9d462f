"""Scrapy middlewares: start featurization at download time, tie pages to items.

``FeaturizeMiddleware`` (downloader) hands the body of every HTML response with status 200 to
the worker pool as soon as it arrives, so parsing overlaps the spider callback and the rest of
the crawl. ``ArticleSpiderMiddleware`` then decides which item carries that page's article:
the items a callback passed through ``with_article(item, response)``, or else, when the callback
yields no item for the page, a new ``ArticleItem`` (``GROWNUP_AUTO_ITEMS``).

``with_article`` returns the item itself, so an item is never lost where the add-on does not
see it: with the add-on off (``GROWNUP_ENABLED = False``, or not in ``ADDONS``) it is the
spider's plain item, and so it is in ``scrapy parse``'s printout.

``request.meta["grownup"]`` controls one page (``request_options``): ``False`` leaves it out
(no extraction, its items pass untouched, ``grownup/skipped/meta``), a dict overrides settings
for it; a bad one is one error line and its item is dropped as ``bad_meta``.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, AsyncIterator

from scrapy_grownup.page.decoding import is_html
from scrapy_grownup.crawl.request_options import RequestMetaError, request_options
from scrapy_grownup.crawl.runtime import GrownupRuntime, RuntimeComponent

logger = logging.getLogger(__name__)
# Requests whose response came through an active add-on, and its runtime: with_article tells
# by it whether anything will fill the item.
_RUNTIMES: "weakref.WeakKeyDictionary[Any, GrownupRuntime]" = weakref.WeakKeyDictionary()
_warned_inactive = False


def with_article(item: Any, response: Any) -> Any:
    """Ask for ``item`` to be filled with the article of ``response``.

    Yield ``with_article(item, response)`` from a callback. The item keeps its own fields;
    the add-on's pipeline adds the article fields it can hold (all of them for an
    ``ArticleItem`` or a dict). Where the add-on did not see ``response`` (it is off) the item
    passes as it is, and a warning says so once, so an item is never lost.

    Args:
        item: any item type itemadapter supports (dict, ``scrapy.Item``, dataclass, attrs).
        response: the response the callback got.

    Returns:
        ``item`` itself, so the callback yields it as usual.
    """
    request = getattr(response, "request", None)
    runtime = _RUNTIMES.get(request) if request is not None else None
    if runtime is None:
        global _warned_inactive
        if not _warned_inactive:
            _warned_inactive = True
            logger.warning("with_article(): the scrapy_grownup add-on did not see %s (it is off:"
                           " GROWNUP_ENABLED = False, or not in ADDONS); items pass without an "
                           "article (said once)", getattr(response, "url", response))
        return item
    runtime.ask(item, response)
    return item


def _content_type(response) -> str | None:
    value = response.headers.get(b"Content-Type")
    return value.decode("latin-1") if value else None


class FeaturizeMiddleware(RuntimeComponent):
    """Downloader middleware: parse HTML responses in worker processes, off the reactor."""

    async def process_response(self, request, response):
        runtime = self.runtime
        _RUNTIMES[request] = runtime
        try:
            options = request_options(request, runtime.known_page_types)
        except RequestMetaError as exc:
            logger.error("scrapy_grownup: %s: %s", response.url, exc)
            runtime.fail_page(request, exc)  # its item is dropped as bad_meta
            return response
        if options is False:  # meta["grownup"] = False: this page is left alone
            runtime.inc("skipped/meta")
            return response
        body = response.body
        if not is_html(_content_type(response), body):
            runtime.inc("responses/not_html")
            return response
        if response.status != 200:
            runtime.inc(f"skipped/http_{response.status}")
            return response
        runtime.inc("responses/html")
        cap = runtime.settings.limits.max_bytes
        if len(body) > cap:
            # Cut here, before the body is pickled to a worker: parse_page keeps the first
            # GROWNUP_MAX_PAGE_BYTES and flags the page, so one byte more is all it needs.
            body = body[: cap + 1]
            runtime.inc("responses/truncated")
        if options is not None:
            runtime.inc("meta_overrides")
        await runtime.start_page(request, body, response.url, _content_type(response), options)
        return response


class ArticleSpiderMiddleware(RuntimeComponent):
    """Spider middleware: which item carries the article of each featurized page."""

    async def process_spider_output(self, response, result) -> AsyncIterator[Any]:
        from scrapy import Request

        runtime = self.runtime
        page = runtime.take_page(response.request) if response.request is not None else None
        wanted = False
        async for element in result:
            if isinstance(element, Request):
                yield element
                continue
            wanted = True  # the callback makes its own items; no automatic one
            asked = runtime.asked_for(element)
            if asked is not None:
                element_page = page if asked is response else \
                    runtime.take_page(asked.request)
                if element_page is None:
                    if (getattr(asked.request, "meta", None) or {}).get("grownup") is not \
                            False:  # left out on purpose: counted as skipped/meta
                        logger.warning("with_article(): %s was not featurized (not an HTML "
                                       "page with status 200); the item passes without an "
                                       "article", asked.url)
                        runtime.inc("skipped/not_featurized")
                else:
                    runtime.claim(element, element_page, asked.url, asked.request)
            yield element
        if page is None:
            return
        if runtime.settings.auto_items and not wanted:
            from scrapy_grownup.crawl.items import ArticleItem

            item = ArticleItem(url=response.url)
            runtime.claim(item, page, response.url, response.request)
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


def guarded_meta_refresh():
    """Scrapy's ``MetaRefreshMiddleware`` that lets a page it cannot read through.

    It runs on every HTML response before the add-on (priority 580) and reads the page's
    ``<base href>`` and text with w3lib, which raises on a ``<base href="A://[">`` or a header
    charset no codec knows: Scrapy then logs "Error downloading" and the page is lost before the
    add-on sees it. This subclass returns such a response unchanged (no meta refresh can be read
    from it) and counts it in ``grownup/meta_refresh_unreadable``. Built on first use so that
    importing this module does not import Scrapy's redirect middleware."""
    from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware

    class GuardedMetaRefreshMiddleware(MetaRefreshMiddleware):
        def process_response(self, request, response, spider=None):
            try:
                if spider is None:
                    return super().process_response(request, response)
                return super().process_response(request, response, spider)
            except (ValueError, LookupError, UnicodeError) as exc:
                logger.warning("meta refresh not read from %s: %s: %s", response.url,
                               type(exc).__name__, exc)
                crawler = getattr(self, "crawler", None)
                if crawler is not None and crawler.stats is not None:
                    crawler.stats.inc_value("grownup/meta_refresh_unreadable")
                return response

    return GuardedMetaRefreshMiddleware
