"""``zyte_common_items.Article`` from the extractor, through scrapy-poet: no Zyte API involved.

With scrapy-poet and zyte-common-items installed (``pip install 'scrapy-grownup[zyte]'``), a
callback that asks for a ``zyte_common_items.Article`` gets one built from the add-on's
article of the response::

    ADDONS = {"scrapy_poet.Addon": 300, "scrapy_grownup.Addon": 500}

    def parse(self, response, article: Article):
        yield article

The pieces, in scrapy-poet's terms:

- ``GrownupArticle``, a page input: the add-on's ``scrapy_grownup.Article`` of the response
  (``None`` where the response gives none) and when it was downloaded;
- ``GrownupArticleProvider`` provides it: it takes the page the add-on's downloader middleware
  started parsing when the response came in, and waits for its article as the item pipeline
  would (the page workers or the model process, in micro-batches);
- ``GrownupArticlePage``, a page object registered with ``@handle_urls("")`` at priority
  ``GROWNUP_RULE_PRIORITY`` for ``zyte_common_items.Article``: every URL, below any rule of the
  project's own, maps the fields.

The add-on registers the provider (``SCRAPY_POET_PROVIDERS``) and this module
(``SCRAPY_POET_DISCOVER``) when scrapy-poet is in the crawl; nothing imports this module, nor
scrapy-poet or zyte-common-items, from ``import scrapy_grownup``. Importing it keeps
tldextract's Public Suffix List offline (``_offline_suffix_list``): no request leaves the
crawl but its own.

A response without an article (not HTML, a status other than 200, ``meta["grownup"] = False``,
a page that fails to parse) gives an ``Article`` with only ``url`` and ``metadata``, whose
``probability`` is 0 (zyte-common-items' ``no_item_found``).
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timezone
from typing import Any, Callable, Set

import attrs
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy_poet import PageObjectInputProvider
from web_poet import field, handle_urls
from zyte_common_items import Article, ArticleMetadata, Author, Image
from zyte_common_items.pages import BaseArticlePage

from scrapy_grownup.output.article import Article as GrownupArticleFields

__all__ = ["GrownupArticle", "GrownupArticlePage", "GrownupArticleProvider",
           "GROWNUP_RULE_PRIORITY", "PROVIDER_PRIORITY"]

logger = logging.getLogger(__name__)
# The rule's priority: below web-poet's default (500), so a project's own page object for
# ``Article`` on its sites wins.
GROWNUP_RULE_PRIORITY = 100
# Where the add-on puts the provider in ``SCRAPY_POET_PROVIDERS``.
PROVIDER_PRIORITY = 1100
_warned_not_featurized = False


def _offline_suffix_list() -> None:
    """Keep web-poet's URL rules off the network. url-matcher splits host names with
    tldextract, whose default extractor downloads the Public Suffix List when first used: a
    request to publicsuffix.org from every fresh crawl. Unless the environment names a list
    (``TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS``), it reads its cache or the snapshot it ships with
    instead (the rule here matches every URL, so no domain is read from it)."""
    if "TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS" in os.environ:
        return
    try:
        from tldextract import tldextract
    except ImportError:  # a url-matcher without it
        return
    extractor = getattr(tldextract, "TLD_EXTRACTOR", None)
    if extractor is not None and getattr(extractor, "_extractor", None) is None:
        extractor.suffix_list_urls = ()


_offline_suffix_list()


@attrs.define
class GrownupArticle:
    """A page input: the add-on's article of the response (``None`` where it has none) and
    when the response was downloaded (``YYYY-MM-DDThh:mm:ssZ``)."""

    article: GrownupArticleFields | None
    date_downloaded: str
    url: str = ""


def _now() -> str:
    return datetime.now(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


class GrownupArticleProvider(PageObjectInputProvider):
    """Provides ``GrownupArticle``: the article of the response from the add-on's runtime."""

    provided_classes = {GrownupArticle}
    name = "scrapy_grownup_article"

    async def __call__(self, to_provide: Set[Callable], request: Request, response: Response,
                       crawler: Crawler) -> list[Any]:
        downloaded = _now()
        from scrapy_grownup.crawl.runtime import GrownupRuntime

        runtime = GrownupRuntime.of(crawler)  # NotConfigured where the add-on is off
        await runtime.open()
        page = runtime.take_page(request)
        if page is None:
            runtime.inc("zyte/not_featurized")
            _warn_not_featurized(request, response)
            return [GrownupArticle(None, downloaded, response.url)]
        try:
            article = await _article(runtime, request, page)
        except Exception as exc:  # noqa: BLE001 - each page's failure is its own
            from scrapy_grownup.crawl.pipelines import drop_reason

            reason = drop_reason(exc)
            runtime.inc(f"zyte/no_article/{reason}")
            log = logger.info if reason in ("not_html", "empty_page") else logger.warning
            log("no article for %s: %s: %s", response.url, reason, exc)
            return [GrownupArticle(None, downloaded, response.url)]
        runtime.inc("zyte/articles")
        return [GrownupArticle(article, downloaded, response.url)]


def _warn_not_featurized(request: Request, response: Response) -> None:
    """Say once when an HTML page with status 200 was not started by the add-on: its
    downloader middleware is not there, or runs after scrapy-poet's."""
    global _warned_not_featurized
    from scrapy_grownup.page.decoding import is_html

    content_type = response.headers.get(b"Content-Type")
    content_type = content_type.decode("latin-1") if content_type else None
    if _warned_not_featurized or response.status != 200 or (request.meta or {}).get(
            "grownup") is False or not is_html(content_type, response.body):
        return
    _warned_not_featurized = True
    logger.warning("scrapy_grownup: %s was not parsed by the add-on, so its Article is empty: "
                   "FeaturizeMiddleware must run before scrapy-poet's InjectionMiddleware "
                   "(a higher priority in DOWNLOADER_MIDDLEWARES; said once)", response.url)


async def _article(runtime, request: Request, page) -> GrownupArticleFields:
    """The article of a started page, as ``ArticlePipeline`` gets it from its page worker
    (which got the request's ``meta["grownup"]`` extraction overrides with the body)."""
    extracted = await page
    runtime.inc("pages_featurized")
    runtime.count_article(extracted)
    article = extracted.article
    if article.text_source:
        runtime.inc(f"text_source/{article.text_source}")
    return article


def _language(code: str | None) -> str | None:
    """``en`` of ``en-US``: zyte-common-items' ``inLanguage`` is an ISO 639-1 code."""
    return code.split("-")[0].lower() if code else None


@handle_urls("", priority=GROWNUP_RULE_PRIORITY)
@attrs.define
class GrownupArticlePage(BaseArticlePage):
    """``zyte_common_items.Article`` from the add-on's article (``GrownupArticle``)."""

    grownup: GrownupArticle

    @property
    def _article(self) -> GrownupArticleFields | None:
        return self.grownup.article

    async def to_item(self) -> Article:
        if self._article is None:
            item = self.no_item_found()
            item.metadata.dateDownloaded = self.grownup.date_downloaded
            return item
        return await super().to_item()

    @field
    def url(self) -> str:
        article = self._article
        return (article.url if article is not None and article.url else None) \
            or self.grownup.url or str(self.request_url)

    @field
    def headline(self) -> str | None:
        return self._article.title or None

    @field
    def articleBody(self) -> str | None:
        return self._article.text or None

    @field
    def articleBodyHtml(self) -> str | None:
        html = self._article.html
        return f"<article>\n\n{html}\n\n</article>" if html else None

    @field
    def authors(self) -> list[Author] | None:
        return [Author(name=name) for name in self._article.authors] or None

    @field
    def datePublished(self) -> str | None:
        return self._article.published

    @field
    def dateModified(self) -> str | None:
        return getattr(self._article, "date_modified", None)

    @field
    def mainImage(self) -> Image | None:
        url = getattr(self._article, "image", None)
        return Image(url=url) if url else None

    @field
    def images(self) -> list[Image] | None:
        return [Image(url=image["url"]) for image in getattr(self._article, "images", None)
                or ()] or None

    @field
    def description(self) -> str | None:
        return getattr(self._article, "description", None)

    @field
    def inLanguage(self) -> str | None:
        return _language(self._article.language)

    @field
    def canonicalUrl(self) -> str | None:
        return self._article.canonical_url

    @field
    def breadcrumbs(self) -> None:
        return None

    @field
    def metadata(self) -> ArticleMetadata:
        return ArticleMetadata(dateDownloaded=self.grownup.date_downloaded,
                               probability=getattr(self._article, "confidence", None))
