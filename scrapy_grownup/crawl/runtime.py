"""``GrownupRuntime``: the state the add-on's components share within one crawler.

The downloader middleware sends a response's body to the page worker pool, the spider
middleware ties the page's future article to the item that should carry it, and the item
pipeline waits for the article and fills the item. They meet here: one runtime per crawler,
created by whichever component is built first.

Either way the crawl's process sends bytes and gets an ``Article`` back (``page_worker``): the
page workers hold the whole model where it runs on a CPU with the numpy runtime, else they
share a model server (``model_server``: its own process, or a thread of this one where
``GROWNUP_MODEL_PROCESS`` is off) that runs their pages' forward passes in batches.
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
from scrapy_grownup.crawl.page_worker import ExtractedPage
from scrapy_grownup.crawl.settings import GrownupSettings
from scrapy_grownup.crawl.workers import FeaturizerPool

logger = logging.getLogger(__name__)
STATS_PREFIX = "grownup"


@dataclass
class Claim:
    """An item waiting for the article of the page it was yielded for (``options``: its
    request's ``meta["grownup"]`` overrides, ``request_options.RequestOptions``)."""

    item: object
    page: "asyncio.Task[ExtractedPage]"
    url: str
    started: float
    options: object = None


class GrownupRuntime:
    """Page worker pool, model server and the page-to-item bookkeeping of one crawler."""

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
        self.pages: "weakref.WeakKeyDictionary[object, asyncio.Task[ExtractedPage]]" = \
            weakref.WeakKeyDictionary()
        # each request's checked ``meta["grownup"]`` overrides (``RequestOptions``), if any
        self.request_options: "weakref.WeakKeyDictionary[object, object]" = \
            weakref.WeakKeyDictionary()
        self._page_types: set[str] | None = None
        self.claims: dict[int, Claim] = {}
        # items a callback passed to ``with_article``, until the spider middleware sees them
        self.asked: dict[int, tuple[object, object]] = {}
        self.model = None  # model_server.ModelService, where the workers share one
        self.model_info: dict = {}
        self.in_workers = False  # set at open: whether the page workers hold the whole model
        self._worker_articles, self._worker_article_ms, self._worker_cpu_ms = 0, 0.0, 0.0
        # the model server's batches, summed from the pages' shares (pages, seconds, splits)
        self._batches, self._batched_pages, self._model_seconds, self._oom_splits = \
            0.0, 0, 0.0, 0
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
        from scrapy_grownup.crawl import page_worker
        from scrapy_grownup.crawl.model_process import describe
        from scrapy_grownup.crawl.model_server import MODEL_WAIT_SECONDS, ModelService
        from scrapy_grownup.errors import ModelLoadError

        s = self.settings
        start = time.perf_counter()
        self.in_workers = extract_in_workers(s)
        auto = str(self.crawler.settings.get("GROWNUP_WORKERS", "auto")).strip().lower() == \
            "auto"
        if auto:
            self.pool.processes.workers = default_workers(self.in_workers)
        if self.in_workers:  # each page worker loads the whole model
            self.pool.extract_whole_pages(
                page_worker.extraction_worker,
                (s.page_timeout, s.model, s.device, s.limits, s.batch_nodes, s.model_threads,
                 s.threshold, s.refine, s.rescorer),
                page_worker.extract_in_worker)
            self.model_info = await self.pool.processes.call(describe,
                                                             what=f"loading {s.model!r}")
            where = f"in each of {max(self.pool.processes.workers, 1)} page workers"
        else:  # one model server runs the forward passes of every worker's pages
            self.model = ModelService(
                (s.model, s.device, s.limits, s.batch_nodes, s.model_threads, s.threshold,
                 s.refine, s.rescorer, s.page_timeout),
                s.batch_pages, s.batch_nodes, s.batch_wait_ms, in_process=bool(s.model_process))
            self.model_info = await self.model.start()
            self.pool.extract_whole_pages(
                page_worker.model_server_worker,
                (s.page_timeout, self.model.address, self.model.authkey,
                 self.model_info["loaded"], s.limits, s.threshold, s.refine, s.rescorer),
                page_worker.extract_with_model_server, wait_seconds=MODEL_WAIT_SECONDS)
            where = "in a model process" if s.model_process else "on a thread of the crawl"
        if s.page_types and not self.model_info["num_page_types"]:
            raise ModelLoadError(f"GROWNUP_PAGE_TYPES is set, but model {s.model!r} has no "
                                 "page-type head: it cannot tell page types apart")
        # start the workers: where they share a model server, all of them now (each loads
        # little), rather than one by one at their first page while the crawl waits
        starts = max(1, self.pool.processes.workers) if self.model is not None else 1
        await asyncio.gather(*(self.pool.structure(WARMUP_PAGE, "about:warmup", "text/html")
                               for _ in range(starts)))
        info = self.model_info
        logger.info("scrapy_grownup: model %s (version %s%s) on %s, threshold %s%s%s, "
                    "refine %s, %s: ready in %.1f s", info["loaded"], info["version"] or "unknown",
                    "" if info["loaded"] == s.model else f"; GROWNUP_MODEL = {s.model!r}",
                    info["device"], info["threshold"],
                    " (adapted per page)" if info.get("adaptive") else "",
                    " on rescored blocks" if info.get("rescorer") else "",
                    "on" if info["refine"] else "off", where, time.perf_counter() - start)

    # -- pages ----------------------------------------------------------------------------------
    async def start_page(self, request, body: bytes, url: str, content_type: str | None,
                         options=None) -> None:
        """Start extracting a response's body; waits while the pool has too many pages in
        flight. ``options``: the request's ``meta["grownup"]`` overrides (``RequestOptions``);
        its extraction overrides go with the body to the page worker."""
        if options is not None:
            self.request_options[request] = options
        extraction = options.extraction if options is not None else None
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

    def take_page(self, request) -> "asyncio.Task[ExtractedPage] | None":
        return self.pages.pop(request, None)

    def ask(self, item, response) -> None:
        """``with_article(item, response)``: ``item`` should get ``response``'s article."""
        self.asked[id(item)] = (item, response)

    def asked_for(self, item):
        """The response ``item`` was passed to ``with_article`` with (once), else None."""
        entry = self.asked.pop(id(item), None)
        return entry[1] if entry is not None and entry[0] is item else None

    def claim(self, item, page: "asyncio.Task[ExtractedPage]", url: str, request=None) -> None:
        """``item`` gets the article of ``page`` (of ``request``, whose ``meta["grownup"]``
        overrides go with it)."""
        options = self.request_options.get(request) if request is not None else None
        self.claims[id(item)] = Claim(item, page, url, time.perf_counter(), options)
        self.inc("claimed")

    def release(self, item) -> Claim | None:
        return self.claims.pop(id(item), None)

    async def close(self) -> None:
        """Stop the workers and the model server, and record the totals."""
        if self._closed:
            return
        self._closed = True
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

    def count_article(self, page: ExtractedPage) -> None:
        """One article a page worker built: its time there after the parse and, where the
        model server ran its forward pass, its share of that batch."""
        self._worker_articles += 1
        self._worker_article_ms += 1000.0 * page.article_seconds
        self._worker_cpu_ms += 1000.0 * page.cpu_seconds
        if self.in_workers:
            self.set_stat("extracted_in_workers", self._worker_articles)
        self.set_stat("article_ms_per_page",
                      round(self._worker_article_ms / self._worker_articles, 2))
        self.set_stat("worker_cpu_ms_per_page",
                      round(self._worker_cpu_ms / self._worker_articles, 2))
        if page.batch is None:
            return
        pages, seconds, splits = page.batch
        self._batches += 1.0 / pages
        self._batched_pages += 1
        self._model_seconds += seconds / pages
        self._oom_splits += splits / pages
        self.set_stat("batches", round(self._batches))
        self.set_stat("batch_size_mean", round(self._batched_pages / self._batches, 2))
        self.set_stat("model_ms_per_page",
                      round(1000.0 * self._model_seconds / self._batched_pages, 2))
        if self._oom_splits:
            self.set_stat("oom_splits", round(self._oom_splits))


def default_workers(in_workers: bool) -> int:
    """``GROWNUP_WORKERS = "auto"``: where the page workers hold the whole model, one per core
    (there is no model process to leave a core to; workers run at a lower priority, so the
    reactor still gets the CPU first). Where they share a model server, each spends part of
    every page waiting for its forward pass, a wait in which its core would idle: a worker
    per core and as many again, so that the cores stay busy while half of them wait."""
    cores = max(1, os.cpu_count() or 1)
    return cores if in_workers else 2 * cores


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
