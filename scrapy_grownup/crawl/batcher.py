"""``ArticleBatcher``: pages from many responses, one model call per micro-batch.

A GPU (and, less so, a CPU) runs the model far faster on many pages at once than on one. Pages
arrive one at a time from the item pipeline; a batch is closed when it reaches ``max_pages`` or
``max_nodes``, or when its first page has waited ``max_wait_ms``. It is also closed at once when
``more_coming()`` says no other page is on its way (none parsing, none waiting for its item):
waiting would only add latency, and at the end of a crawl this flushes the last partial batch
without a timer. ``in_flight`` batches may be handed to the model at once (default 2): the
model process runs one at a time, and the next waits in its queue instead of in the reactor, so
the model never idles between batches while the crawl's process gets round to sending one.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

from scrapy_grownup.output.article import Article
from scrapy_grownup.page.dom import PageStructure
from scrapy_grownup.crawl.workers import ParsedPage

# What is batched: a page, or a crawl's worker result carrying one (read for ``num_nodes``).
Page = PageStructure | ParsedPage

# What one model call returns: an article or an exception per page, and the OOM splits it made.
InferResult = tuple[list["Article | BaseException"], int]


@dataclass
class BatchStats:
    """Running totals the pipeline copies into Scrapy's stats collector."""

    pages: int = 0
    batches: int = 0
    model_seconds: float = 0.0
    oom_splits: int = 0
    max_queue: int = 0

    @property
    def mean_batch_size(self) -> float:
        return self.pages / self.batches if self.batches else 0.0

    @property
    def model_ms_per_page(self) -> float:
        return 1000.0 * self.model_seconds / self.pages if self.pages else 0.0


class ArticleBatcher:
    """Awaitable ``article(page)`` over micro-batched calls of ``infer(pages)``.

    ``max_queue`` bounds the pages waiting here: past it, ``article()`` waits for room, which
    holds the item pipeline and, through Scrapy's scraper slot, the downloads.
    """

    def __init__(self, infer: Callable[[list[Page]], Awaitable[InferResult]],
                 max_pages: int = 32, max_nodes: int = 40_000, max_wait_ms: float = 50.0,
                 max_queue: int = 256, more_coming: Callable[[], bool] = lambda: True,
                 in_flight: int = 2):
        if in_flight < 1:
            raise ValueError("in_flight must be >= 1")
        self.infer = infer
        self.max_pages = max_pages
        self.max_nodes = max_nodes
        self.max_wait = max_wait_ms / 1000.0
        self.max_queue = max(max_queue, max_pages)
        self.more_coming = more_coming
        self.in_flight = in_flight
        self.stats = BatchStats()
        self._queue: list[tuple[Page, asyncio.Future]] = []
        self._queued_nodes = 0
        self._timer: asyncio.TimerHandle | None = None
        self._slots: asyncio.Semaphore | None = None  # batches handed to the model
        self._last_done = 0.0  # when the model last returned a batch (perf_counter)
        self._room: asyncio.Condition | None = None
        self._running: set[asyncio.Task] = set()

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    async def article(self, page: Page) -> Article:
        loop = asyncio.get_running_loop()
        if self._room is None:
            self._room, self._slots = asyncio.Condition(), asyncio.Semaphore(self.in_flight)
        async with self._room:
            await self._room.wait_for(lambda: len(self._queue) < self.max_queue)
        future: asyncio.Future = loop.create_future()
        self._queue.append((page, future))
        self._queued_nodes += page.num_nodes
        self.stats.max_queue = max(self.stats.max_queue, len(self._queue))
        if (len(self._queue) >= self.max_pages or self._queued_nodes >= self.max_nodes
                or not self.more_coming()):
            self._dispatch()
        elif self._timer is None:
            self._timer = loop.call_later(self.max_wait, self._dispatch)
        return await future

    def _dispatch(self) -> None:
        """Close the current batch (at most ``max_pages`` / ``max_nodes``) and start it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._queue:
            return
        take, nodes = 0, 0
        while take < len(self._queue) and take < self.max_pages:
            size = self._queue[take][0].num_nodes
            if take and nodes + size > self.max_nodes:
                break
            take, nodes = take + 1, nodes + size
        batch, self._queue = self._queue[:take], self._queue[take:]
        self._queued_nodes -= nodes
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        if self._queue:  # what is left starts its own wait
            self._timer = asyncio.get_running_loop().call_later(self.max_wait, self._dispatch)
        self._notify_room()

    def _notify_room(self) -> None:
        async def notify():
            async with self._room:
                self._room.notify_all()

        if self._room is not None:
            task = asyncio.get_running_loop().create_task(notify())
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _run(self, batch: list[tuple[Page, asyncio.Future]]) -> None:
        pages = [page for page, _ in batch]
        async with self._slots:
            start = time.perf_counter()
            try:
                results, splits = await self.infer(pages)
            except Exception as exc:  # noqa: BLE001 - the whole call failed: every page gets it
                results, splits = [exc] * len(pages), 0
            done = time.perf_counter()
        # the model runs its batches one after another, in order: a batch handed over while
        # the one before ran started when that one returned
        self.stats.model_seconds += done - max(start, self._last_done)
        self._last_done = max(done, self._last_done)
        self.stats.batches += 1
        self.stats.pages += len(pages)
        self.stats.oom_splits += splits
        for (_, future), result in zip(batch, results):
            if future.done():  # cancelled by the waiter
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def flush(self) -> None:
        """Run what is queued now and wait for every batch in flight (spider close)."""
        while self._queue or self._running:
            self._dispatch()
            if self._running:
                await asyncio.gather(*list(self._running), return_exceptions=True)
