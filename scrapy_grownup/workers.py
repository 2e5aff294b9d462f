"""``FeaturizerPool``: HTML parsing in worker processes, awaited from the asyncio loop.

lxml parsing, the tree walk and the Laplacian are CPU-bound; on Scrapy's reactor thread they
would stall every download. Here they run in a pool of spawned processes (no fork of a process
that holds threads and CUDA state), and the crawl awaits a ``PageStructure``. A bounded number of
pages is in flight: past it, ``structure()`` waits, so a slow pool slows the crawl instead of
growing memory. A crashed worker breaks the whole pool; the pool is rebuilt and each page it held
is tried once more, then reported as ``WorkerCrashedError``.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from .dom import PageStructure, parse_page
from .errors import GrownupError
from .limits import PageLimits

logger = logging.getLogger(__name__)


class WorkerCrashedError(GrownupError):
    """A worker process died twice while parsing this page."""


@dataclass
class ParsedPage:
    """A parsed page and the wall time its parsing took inside the worker."""

    page: PageStructure
    parse_seconds: float


def parse_in_worker(body: bytes, url: str | None, content_type: str | None,
                    limits: PageLimits) -> ParsedPage:
    """The worker side: one ``parse_page`` call, timed (module-level so it pickles)."""
    start = time.perf_counter()
    page = parse_page(body, url=url, content_type=content_type, limits=limits)
    return ParsedPage(page, time.perf_counter() - start)


def _init_worker() -> None:
    # One BLAS thread per worker: the workers already use the cores.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except Exception:  # pragma: no cover - threadpoolctl is a dependency, this is defensive
        pass


class FeaturizerPool:
    """Parses pages off the event loop; ``workers=0`` parses in a thread (tests, tiny crawls)."""

    def __init__(self, workers: int = 2, limits: PageLimits | None = None,
                 max_pending: int = 64, start_method: str = "spawn"):
        if workers < 0:
            raise ValueError("workers must be >= 0")
        if max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        self.workers = workers
        self.limits = limits or PageLimits()
        self.max_pending = max_pending
        self.start_method = start_method
        self.pending = 0
        self.restarts = 0
        self._executor: Executor | None = None
        self._generation = 0
        self._slots: asyncio.Semaphore | None = None

    def _pool(self) -> Executor:
        if self._executor is None:
            if self.workers == 0:
                from concurrent.futures import ThreadPoolExecutor

                self._executor = ThreadPoolExecutor(1, thread_name_prefix="grownup-parse")
            else:
                self._executor = ProcessPoolExecutor(
                    self.workers, mp_context=multiprocessing.get_context(self.start_method),
                    initializer=_init_worker)
        return self._executor

    def _restart(self, generation: int) -> None:
        """Replace a broken pool once, however many of its pages notice the breakage."""
        if generation != self._generation:
            return
        self._generation += 1
        self.restarts += 1
        broken, self._executor = self._executor, None
        if broken is not None:
            broken.shutdown(wait=False, cancel_futures=True)
        logger.warning("a featurization worker died; restarted the pool (%d restarts)",
                       self.restarts)

    async def submit(self, body: bytes, url: str | None = None,
                     content_type: str | None = None) -> "asyncio.Task[ParsedPage]":
        """Start parsing one page; waits first while ``max_pending`` pages are in flight.

        The task's result is a ``ParsedPage``; it raises ``GrownupError`` for pages that are not
        HTML or empty, and ``WorkerCrashedError`` as said above.
        """
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_pending)
        await self._slots.acquire()
        self.pending += 1

        async def run() -> ParsedPage:
            try:
                return await self._run(body, url, content_type)
            finally:
                self.pending -= 1
                self._slots.release()

        return asyncio.get_running_loop().create_task(run())

    async def structure(self, body: bytes, url: str | None = None,
                        content_type: str | None = None) -> ParsedPage:
        """Parse one page in a worker and wait for it."""
        return await (await self.submit(body, url, content_type))

    async def _run(self, body, url, content_type) -> ParsedPage:
        loop = asyncio.get_running_loop()
        for attempt in (1, 2):
            generation = self._generation
            try:
                future = self._pool().submit(parse_in_worker, body, url, content_type,
                                             self.limits)
                return await asyncio.wrap_future(future, loop=loop)
            except BrokenProcessPool:
                self._restart(generation)
                if attempt == 2:
                    raise WorkerCrashedError(
                        f"worker died twice while parsing {url or 'a page'}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Stop the workers; pages still queued are cancelled."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
