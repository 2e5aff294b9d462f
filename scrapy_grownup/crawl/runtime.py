"""``GrownupRuntime``: the state the add-on's components share within one crawler.

The downloader middleware starts parsing a response in the worker pool, the spider middleware
ties the resulting page to the item that should carry its article, and the item pipeline waits
for the page, sends it through the batcher and fills the item. They meet here: one runtime per
crawler, created by whichever component is built first.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import weakref
from dataclasses import dataclass

from scrapy.exceptions import NotConfigured

from scrapy_grownup.crawl.model_process import WARMUP_PAGE
from scrapy_grownup.crawl.settings import GrownupSettings
from scrapy_grownup.crawl.workers import FeaturizerPool, ParsedPage, ProcessPool

logger = logging.getLogger(__name__)
STATS_PREFIX = "grownup"


@dataclass
class Claim:
    """An item waiting for the article of the page it was yielded for (``options``: its
    request's ``meta["grownup"]`` overrides, ``request_options.RequestOptions``)."""

    item: object
    page: "asyncio.Task[ParsedPage]"
    url: str
    started: float
    options: object = None


class GrownupRuntime:
    """Worker pool, model batcher and the page-to-item bookkeeping of one crawler."""

    def __init__(self, crawler):
        self.crawler = crawler
        self.settings = GrownupSettings.from_settings(crawler.settings)
        if not self.settings.enabled:
            raise NotConfigured("GROWNUP_ENABLED is off")
        from scrapy.utils.reactor import is_asyncio_reactor_installed

        if not is_asyncio_reactor_installed():
            raise NotConfigured(
                "scrapy_grownup needs the asyncio reactor (TWISTED_REACTOR = "
                "'twisted.internet.asyncioreactor.AsyncioSelectorReactor', Scrapy's default)")
        self.pool = FeaturizerPool(self.settings.workers, self.settings.limits,
                                   self.settings.max_pending_pages,
                                   page_timeout=self.settings.page_timeout)
        self.pages: "weakref.WeakKeyDictionary[object, asyncio.Task[ParsedPage]]" = \
            weakref.WeakKeyDictionary()
        # each request's checked ``meta["grownup"]`` overrides (``RequestOptions``), if any
        self.request_options: "weakref.WeakKeyDictionary[object, object]" = \
            weakref.WeakKeyDictionary()
        self._page_types: set[str] | None = None
        self.claims: dict[int, Claim] = {}
        # items a callback passed to ``with_article``, until the spider middleware sees them
        self.asked: dict[int, tuple[object, object]] = {}
        self.model: ProcessPool | None = None
        self.model_info: dict = {}
        self.batcher = None
        self.in_workers = False  # set at open: whether the page workers extract whole pages
        self._worker_articles, self._worker_article_ms = 0, 0.0
        self._opened: asyncio.Task | None = None
        self._closed = False

    @classmethod
    def of(cls, crawler) -> "GrownupRuntime":
        runtime = getattr(crawler, "_grownup_runtime", None)
        if runtime is None:
            runtime = cls(crawler)
            crawler._grownup_runtime = runtime
        return runtime

    # -- stats ----------------------------------------------------------------------------------
    def inc(self, key: str, count: int = 1) -> None:
        self.crawler.stats.inc_value(f"{STATS_PREFIX}/{key}", count)

    def set_stat(self, key: str, value) -> None:
        self.crawler.stats.set_value(f"{STATS_PREFIX}/{key}", value)

    def max_stat(self, key: str, value) -> None:
        self.crawler.stats.max_value(f"{STATS_PREFIX}/{key}", value)

    # -- model ----------------------------------------------------------------------------------
    async def open(self) -> None:
        """Start the model process and wait for its model to load; a bad model fails here."""
        if self._opened is None:
            self._opened = asyncio.get_running_loop().create_task(self._load())
        await self._opened

    async def _load(self) -> None:
        from scrapy_grownup.crawl.batcher import ArticleBatcher
        from scrapy_grownup.errors import ModelLoadError
        from scrapy_grownup.crawl.model_process import describe, load_extractor, score_articles

        s = self.settings
        start = time.perf_counter()
        self.in_workers = extract_in_workers(s)
        if self.in_workers:
            await self._load_into_workers(start)
            return
        self.model = ProcessPool(1 if s.model_process else 0, "model",
                                 initializer=load_extractor,
                                 initargs=(s.model, s.device, s.limits, s.batch_nodes,
                                           s.model_threads, s.threshold, s.refine,
                                           s.rescorer, s.page_timeout))
        self.model_info = await self.model.call(describe, what=f"loading {s.model!r}")
        if s.page_types and not self.model_info["num_genres"]:
            raise ModelLoadError(f"GROWNUP_PAGE_TYPES is set, but model {s.model!r} has no "
                                 "page-type head: it cannot tell page types apart")

        async def infer(pages):
            return await self.model.call(score_articles, pages,
                                         what=f"a batch of {len(pages)} pages")

        self.batcher = ArticleBatcher(infer, max_pages=s.batch_pages, max_nodes=s.batch_nodes,
                                      max_wait_ms=s.batch_wait_ms, max_queue=s.queue_size,
                                      more_coming=self.more_coming,
                                      in_flight=s.batches_in_flight)
        # the workers compute what the model reads of a page alone, beside the parse
        self.pool.derive = tuple(self.model_info.get("page_features", ()))
        await self.pool.structure(WARMUP_PAGE, "about:warmup", "text/html")  # start the workers
        info = self.model_info
        logger.info("scrapy_grownup: model %s (version %s%s) on %s, threshold %s%s%s, "
                    "refine %s, %s: ready in %.1f s", info["loaded"], info["version"] or "unknown",
                    "" if info["loaded"] == s.model else f"; GROWNUP_MODEL = {s.model!r}",
                    info["device"], info["threshold"],
                    " (adapted per page)" if info.get("adaptive") else "",
                    " on rescored blocks" if info.get("rescorer") else "",
                    "on" if info["refine"] else "off",
                    "in a model process" if s.model_process else "on a thread of the crawl",
                    time.perf_counter() - start)

    async def _load_into_workers(self, start: float) -> None:
        """The page workers load the model and extract whole pages; no model process."""
        from scrapy_grownup.crawl.model_process import describe
        from scrapy_grownup.crawl.page_worker import extract_in_worker, extraction_worker

        s = self.settings
        if str(self.crawler.settings.get("GROWNUP_WORKERS", "auto")).strip().lower() == "auto":
            # no model process to leave a core to: a page worker per core (workers run at a
            # lower priority, so the reactor still gets the CPU first)
            self.pool.processes.workers = max(1, os.cpu_count() or 1)
        self.pool.extract_whole_pages(
            extraction_worker, (s.page_timeout, s.model, s.device, s.limits, s.batch_nodes,
                                s.model_threads, s.threshold, s.refine, s.rescorer),
            extract_in_worker)
        self.model_info = await self.pool.processes.call(describe,
                                                         what=f"loading {s.model!r}")
        if s.page_types and not self.model_info["num_genres"]:
            from scrapy_grownup.errors import ModelLoadError

            raise ModelLoadError(f"GROWNUP_PAGE_TYPES is set, but model {s.model!r} has no "
                                 "page-type head: it cannot tell page types apart")
        await self.pool.structure(WARMUP_PAGE, "about:warmup", "text/html")
        info = self.model_info
        logger.info("scrapy_grownup: model %s (version %s%s) on %s, threshold %s%s%s, "
                    "refine %s, in each of %d page workers: ready in %.1f s", info["loaded"],
                    info["version"] or "unknown",
                    "" if info["loaded"] == s.model else f"; GROWNUP_MODEL = {s.model!r}",
                    info["device"], info["threshold"],
                    " (adapted per page)" if info.get("adaptive") else "",
                    " on rescored blocks" if info.get("rescorer") else "",
                    "on" if info["refine"] else "off", max(s.workers, 1),
                    time.perf_counter() - start)

    # -- pages ----------------------------------------------------------------------------------
    async def start_page(self, request, body: bytes, url: str, content_type: str | None,
                         options=None) -> None:
        """Start parsing a response's body; waits while the pool has too many pages in flight.
        ``options``: the request's ``meta["grownup"]`` overrides (``RequestOptions``); where the
        page workers build whole articles its extraction overrides go with the body."""
        if options is not None:
            self.request_options[request] = options
        extraction = options.extraction if options is not None and self.in_workers else None
        self.pages[request] = await self.pool.submit(body, url, content_type,
                                                     **({"options": extraction}
                                                        if extraction else {}))
        self.max_stat("featurize_pending_max", self.pool.pending)

    def fail_page(self, request, error: BaseException) -> None:
        """The page of ``request`` gives no article: its item is dropped with ``error``'s
        reason (``pipelines.drop_reason``)."""
        future = asyncio.get_running_loop().create_future()
        future.set_exception(error)
        future.exception()  # retrieved: a page no item claims is no "never retrieved" log
        self.pages[request] = future

    def known_page_types(self) -> set[str]:
        """The page types the crawl's model tells apart (none without a page-type head)."""
        if self._page_types is None:
            from scrapy_grownup.crawl.settings import model_page_types

            self._page_types = model_page_types(self.settings.model, self.settings.device) \
                or set()
        return self._page_types

    def more_coming(self) -> bool:
        """Whether another page may reach the batcher soon: parsing, or awaiting its item."""
        return bool(self.pool.pending or self.pages or self.claims)

    def take_page(self, request) -> "asyncio.Task[ParsedPage] | None":
        return self.pages.pop(request, None)

    def ask(self, item, response) -> None:
        """``with_article(item, response)``: ``item`` should get ``response``'s article."""
        self.asked[id(item)] = (item, response)

    def asked_for(self, item):
        """The response ``item`` was passed to ``with_article`` with (once), else None."""
        entry = self.asked.pop(id(item), None)
        return entry[1] if entry is not None and entry[0] is item else None

    def claim(self, item, page: "asyncio.Task[ParsedPage]", url: str, request=None) -> None:
        """``item`` gets the article of ``page`` (of ``request``, whose ``meta["grownup"]``
        overrides go with it)."""
        options = self.request_options.get(request) if request is not None else None
        self.claims[id(item)] = Claim(item, page, url, time.perf_counter(), options)
        self.inc("claimed")

    def release(self, item) -> Claim | None:
        return self.claims.pop(id(item), None)

    async def close(self) -> None:
        """Flush the last partial batch, then stop the workers and record the totals."""
        if self._closed:
            return
        self._closed = True
        if self.batcher is not None:
            await self.batcher.flush()
            self.record_batch_stats()
        for name, pool in (("worker_restarts", self.pool), ("model_restarts", self.model)):
            if pool is not None:
                await asyncio.to_thread(pool.close)
                if pool.restarts:
                    self.set_stat(name, pool.restarts)
        if self.claims:  # items another pipeline dropped before ours saw them
            logger.info("%d items with a pending article never reached the pipeline",
                        len(self.claims))
            self.claims.clear()
        self.asked.clear()  # with_article items no callback yielded (or scrapy parse's)

    def count_worker_article(self, article_ms: float) -> None:
        """One article a page worker built (``article_ms``: its part after the parse)."""
        self._worker_articles += 1
        self._worker_article_ms += article_ms
        self.set_stat("extracted_in_workers", self._worker_articles)
        self.set_stat("article_ms_per_page",
                      round(self._worker_article_ms / self._worker_articles, 2))

    def record_batch_stats(self) -> None:
        if self.batcher is None:  # the page workers extract whole pages: no batches
            return
        stats = self.batcher.stats
        self.set_stat("batches", stats.batches)
        self.set_stat("batch_size_mean", round(stats.mean_batch_size, 2))
        self.set_stat("model_ms_per_page", round(stats.model_ms_per_page, 2))
        self.set_stat("queue_depth_max", stats.max_queue)
        if stats.oom_splits:
            self.set_stat("oom_splits", stats.oom_splits)


def extract_in_workers(settings: GrownupSettings) -> bool:
    """Whether the page workers extract whole pages (``page_worker``): with
    ``GROWNUP_MODEL_PROCESS = "auto"``, where the model runs on a CPU with the numpy runtime
    and a text encoder without torch; read from the model's ``config.json`` (no model loads)."""
    if settings.model_process != "auto":
        return False
    from scrapy_grownup.errors import GrownupError
    from scrapy_grownup.extractor import auto_model, choose_runtime, resolve_model_dir
    from scrapy_grownup.model.files import read_model_config

    try:
        name = auto_model(settings.device, warn=False) if settings.model == "auto" \
            else settings.model
        config, _ = read_model_config(resolve_model_dir(name))
    except GrownupError:  # the model process's load reports it, as before
        return False
    return config.encoder == "static" and choose_runtime("auto", config, settings.device) == \
        "numpy"


class RuntimeComponent:
    """Base of the add-on's Scrapy components: built from the crawler, sharing its runtime."""

    def __init__(self, runtime: GrownupRuntime):
        self.runtime = runtime

    @classmethod
    def from_crawler(cls, crawler):
        return cls(GrownupRuntime.of(crawler))
