"""Worker processes awaited from the asyncio loop: HTML parsing and the model.

Scrapy's reactor is one thread. lxml parsing, the tree walk and the Laplacian are CPU-bound, and
even model inference on a thread next to the reactor starves it: every socket call the reactor
makes gives up the interpreter lock and waits to get it back from the busy thread. So both run in
spawned processes (no fork of a process that holds threads or CUDA state).

``ProcessPool`` is the shared mechanism: calls go to its processes through
``pipe_executor.PipeExecutor`` (pipes the asyncio loop reads itself, no thread hand-offs). A
crashed process costs the call it held, which is tried once more and then fails with
``WorkerCrashedError``; a new process takes its place and the others go on with their calls.

Stopping is the main process's business: a worker ignores SIGINT (Ctrl-C in a terminal reaches
the whole process group; a worker raising ``KeyboardInterrupt`` used to hang the crawl), and
exits by itself when its parent is gone (``kill -9`` of the crawl used to leave the model
process and a worker running).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import pickle
import signal
import threading
import time
from contextlib import contextmanager
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

from scrapy_grownup.page.dom import PageStructure, parse_page
from scrapy_grownup.errors import PageTimeoutError, WorkerCrashedError  # noqa: F401 - also imported from here
from scrapy_grownup.page.limits import PageLimits

logger = logging.getLogger(__name__)


class _BudgetExceeded(BaseException):
    """Raised by the alarm of ``time_budget`` inside the work it bounds: a ``BaseException``,
    so that no ``except Exception`` on the way (``own_error`` included) can swallow it."""


def _budget_exceeded(signum, frame):
    raise _BudgetExceeded()


@contextmanager
def time_budget(seconds: float, message: str):
    """Raise ``PageTimeoutError(message)`` where the block runs past ``seconds``.

    On a process's main thread an interval timer interrupts the block at the budget (its
    signal reaches Python code, regular expressions and sleeps; code that never returns to
    the interpreter is ``ProcessPool.call``'s business). Elsewhere (a thread: no signal is
    delivered there) the block runs to its end and raises if it took longer, so the page is
    the same counted ``timeout`` either way.
    """
    if threading.current_thread() is not threading.main_thread():
        start = time.perf_counter()
        yield
        if time.perf_counter() - start > seconds:
            raise PageTimeoutError(message)
        return
    previous = signal.signal(signal.SIGALRM, _budget_exceeded)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _BudgetExceeded:
        raise PageTimeoutError(message) from None
    finally:
        signal.signal(signal.SIGALRM, previous)


# Worker processes run at a lower scheduling priority than the crawl: when the cores are
# contended, the reactor (mostly idle, but latency-bound) gets the CPU first.
WORKER_NICENESS = 5


# Extra seconds a call's time budget gets while its executor has not yet returned any result:
# the clock starts when the executor takes the call, which for a fresh pool includes starting
# the worker processes (imports), seconds on a busy machine.
START_ALLOWANCE = 60.0

# How often a worker checks that its parent is still there.
PARENT_CHECK_SECONDS = 1.0


def background_process(lower_priority: bool = True) -> None:
    """Set up a spawned worker (never the crawl's own process, nor a thread of it): lower
    priority (a crawl's reactor comes first; ``lower_priority=False`` where the parent waits
    on its workers, as ``grownup extract --jobs``), SIGINT ignored (the main process decides
    how to stop: the first Ctrl-C flushes, a second one forces), and an exit of its own when
    the parent dies."""
    if multiprocessing.parent_process() is None:
        return
    if lower_priority and hasattr(os, "nice"):
        try:
            os.nice(WORKER_NICENESS)
        except OSError:  # pragma: no cover - not permitted here: keep the default priority
            pass
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent()


def exit_with_parent(interval: float = PARENT_CHECK_SECONDS) -> None:
    """Exit this process within ``interval`` seconds of its parent's death (a daemon thread
    watching for the parent pid to change: an orphan is adopted by init or a subreaper). Works
    on any POSIX system and whichever thread started the process, which Linux's
    ``PR_SET_PDEATHSIG`` does not (it fires when that thread ends)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="grownup-exit-with-parent", daemon=True).start()


def parent_bound_pool(workers: int, start_method: str | None = None) -> ProcessPoolExecutor:
    """A ``ProcessPoolExecutor`` of ``workers`` processes (``start_method``: the platform's
    default, or "spawn" / "fork"), each ending when the process that opened it is gone: the
    training commands' parsing and training pools, so that a killed ``grownup`` run leaves no
    worker parsing or training on."""
    context = multiprocessing.get_context(start_method) if start_method else None
    return ProcessPoolExecutor(max_workers=max(1, workers), mp_context=context,
                               initializer=exit_with_parent)


def name_process(name: str) -> None:
    """Give this worker process a name that ``top``, ``ps -o comm`` and psutil show
    (``grownup-worker``, ``grownup-model``): Linux only, at most 15 characters."""
    if multiprocessing.parent_process() is None:
        return
    try:
        with open("/proc/self/comm", "w", encoding="ascii") as comm:
            comm.write(name[:15])
    except OSError:  # not Linux: the interpreter's name stays
        pass


def limit_threads() -> None:
    """Worker set-up: background priority and one BLAS / OpenMP thread (the processes already
    share the cores)."""
    background_process()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except Exception:  # pragma: no cover - threadpoolctl is a dependency, this is defensive
        pass


class ProcessPool:
    """``await pool.call(fn, *args)`` in spawned processes, surviving crashed workers.

    ``workers=0`` runs calls on one thread of this process instead (tests, tiny crawls).
    """

    def __init__(self, workers: int, name: str, initializer: Callable[..., None] = limit_threads,
                 initargs: tuple = (), start_method: str = "spawn"):
        if workers < 0:
            raise ValueError("workers must be >= 0")
        self.workers = workers
        self.name = name
        self.initializer = initializer
        self.initargs = initargs
        self.start_method = start_method
        self.restarts = 0
        self._executor: Executor | None = None
        self._generation = 0
        self._warm = -1  # the last generation (executor) that returned a result
        # per generation, the calls waited on with a timeout, in submission order
        self._order: dict[int, dict[Any, None]] = {}

    def _pool(self) -> Executor:
        if self._executor is None:
            if self.workers == 0:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"grownup-{self.name}",
                                                    initializer=self.initializer,
                                                    initargs=self.initargs)
            else:
                from scrapy_grownup.crawl.pipe_executor import PipeExecutor

                self._executor = PipeExecutor(
                    self.workers, multiprocessing.get_context(self.start_method),
                    initializer=self.initializer, initargs=self.initargs,
                    on_replace=self._replaced)
        return self._executor

    def _replaced(self, reason: str) -> None:
        """The executor started a new process in the place of one that died on its own."""
        self.restarts += 1
        logger.warning("a %s worker process died (%s); a new one took its place (%d restarts)",
                       self.name, reason, self.restarts)

    def _restart(self, generation: int) -> None:
        """Replace a broken executor once, however many of its calls notice the breakage (an
        executor that replaced its dead worker itself is not broken, and stays)."""
        if generation != self._generation or not getattr(self._executor, "broken", True):
            return
        self._generation += 1
        self.restarts += 1
        broken, self._executor = self._executor, None
        if broken is not None:
            broken.shutdown(wait=False, cancel_futures=True)
        logger.warning("a %s worker process died; restarted it (%d restarts)", self.name,
                       self.restarts)

    async def call(self, fn: Callable[..., Any], *args, what: str = "a page",
                   timeout: float | None = None) -> Any:
        """``fn(*args)`` in a worker. With ``timeout`` (seconds), a call still running that
        long after a worker took it raises ``PageTimeoutError``, and its worker is stopped
        (killed; on a thread, abandoned) so the calls behind it go on."""
        loop = asyncio.get_running_loop()
        for attempt in (1, 2):
            generation = self._generation
            try:
                future = self._pool().submit(fn, *args)
                if timeout is None:
                    return await asyncio.wrap_future(future, loop=loop)
                return await self._bounded(future, fn, args, generation, timeout, what)
            except BrokenProcessPool:
                self._restart(generation)
                if attempt == 2:
                    raise WorkerCrashedError(
                        f"{self.name} worker died twice while working on {what}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _bounded(self, future, fn, args, generation: int, timeout: float,
                       what: str) -> Any:
        """Wait for ``future``, at most ``timeout`` seconds from when a worker started it.

        Calls are looked at every ``tick`` (a second at most). A call's clock starts when it is
        among the first ``workers`` unfinished calls of its executor in submission order (what
        the executor's FIFO queue hands to its free workers), so a page queued behind a stuck
        one is not charged for its wait. A call queued on a thread executor that was given up
        is taken back and submitted to the new one.
        """
        loop = asyncio.get_running_loop()
        tick = min(1.0, max(0.05, timeout / 4))
        wrapped = asyncio.wrap_future(future, loop=loop)
        order = self._order.setdefault(generation, {})
        order[future] = None
        started = None
        new_holder = False  # its worker has not answered a call yet: it may be setting up
        try:
            while True:
                if started is None and self._executing(future, order):
                    started = loop.time()
                    new_holder = bool(getattr(self._executor, "holder_is_new",
                                              lambda _future: False)(future))
                if started is None and not self.workers and generation != self._generation \
                        and future.cancel():
                    order.pop(future, None)
                    generation = self._generation
                    future = self._pool().submit(fn, *args)
                    wrapped = asyncio.wrap_future(future, loop=loop)
                    order = self._order.setdefault(generation, {})
                    order[future] = None
                    continue
                limit = timeout if self._warm == generation and not new_holder \
                    else timeout + START_ALLOWANCE
                wait = tick if started is None else started + limit - loop.time()
                if wait > 0:
                    done, _ = await asyncio.wait({wrapped}, timeout=min(wait, tick))
                    if not done:
                        continue
                    self._warm = max(self._warm, generation)
                    try:
                        return wrapped.result()
                    except BrokenProcessPool:
                        self._restart(generation)  # the executor this call last went to
                        raise
                # Its result (or the pool's breakage) will never be read: not an error to log.
                wrapped.add_done_callback(lambda f: f.cancelled() or f.exception())
                self._stop_stuck(generation, what, future)
                raise PageTimeoutError(f"{what} was still being parsed {limit:g} s after a "
                                       f"worker started it; the worker was stopped")
        except asyncio.CancelledError:
            wrapped.cancel()
            raise
        finally:
            order.pop(future, None)
            if not order and generation != self._generation:
                self._order.pop(generation, None)

    def _executing(self, future, order: dict) -> bool:
        """Whether a worker has (most likely) started ``future``: it is done, or (processes:
        the executor says which call a worker holds) running, or (a thread) among the first
        ``workers`` unfinished calls of its executor."""
        if future.done():
            return True
        if not future.running():  # still in the executor's own queue
            return False
        if self.workers:
            return True
        ahead = 0
        for other in order:
            if other is future:
                return True
            if not other.done():
                ahead += 1
                if ahead >= max(1, self.workers):
                    return False
        return True

    def _stop_stuck(self, generation: int, what: str, future) -> None:
        """Stop the worker stuck on ``future``'s call.

        A process is killed and a new one takes its place (``PipeExecutor.kill_holder``); the
        other workers' calls go on. A thread cannot be killed: it is left to finish on its
        own, and the executor is replaced, the calls queued behind it moving to the new one.
        """
        if generation != self._generation:
            return
        if self.workers:
            if self._executor is not None and self._executor.kill_holder(future):
                self.restarts += 1  # counted now: a crawl may close before the new one starts
                logger.warning("a %s worker was stuck on %s; it was stopped and a new one "
                               "started (%d restarts)", self.name, what, self.restarts)
            return
        executor, self._executor = self._executor, None
        self._order.pop(generation, None)  # a stuck thread's call never ends: not ahead of any
        self._generation += 1
        self.restarts += 1
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=False)
        logger.warning("a %s worker was stuck on %s; it was stopped and a new one started "
                       "(%d restarts)", self.name, what, self.restarts)

    def close(self) -> None:
        """Stop the processes; calls still queued are cancelled."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)


class ParsedPage:
    """A parsed page and the wall time its parsing took inside the worker.

    Pickled, it carries the page as the bytes the worker pickled it to, and ``page`` unpickles
    them where it is first read (a WARC archive's parsed pages: ``warc.writer``), not on
    arrival on the reactor's thread.
    """

    __slots__ = ("parse_seconds", "num_nodes", "_page", "_pickled")

    def __init__(self, page: PageStructure, parse_seconds: float):
        self.parse_seconds = parse_seconds
        self.num_nodes = page.num_nodes
        self._page: PageStructure | None = page
        self._pickled: bytes | None = None

    @property
    def page(self) -> PageStructure:
        if self._page is None:
            self._page = pickle.loads(self._pickled)
            self._pickled = None
        return self._page

    def __getstate__(self):
        pickled = self._pickled if self._page is None else \
            pickle.dumps(self._page, protocol=pickle.HIGHEST_PROTOCOL)
        return self.parse_seconds, self.num_nodes, pickled

    def __setstate__(self, state) -> None:
        self.parse_seconds, self.num_nodes, self._pickled = state
        self._page = None


# Seconds one page may take in a featurization worker process (set by its initializer).
_page_budget: float | None = None


def featurization_worker(page_budget: float | None = None) -> None:
    """Initializer of a featurization worker: ``limit_threads`` and the per-page budget."""
    global _page_budget
    limit_threads()
    name_process("grownup-worker")
    _page_budget = page_budget or None


def parse_in_worker(body: bytes, url: str | None, content_type: str | None,
                    limits: PageLimits, derive: tuple[str, ...] = ()) -> ParsedPage:
    """The worker side: one ``parse_page`` call, timed (module-level so it pickles), and the
    page-only features named in ``derive`` (``ArticleExtractor.page_features``: cached
    properties of ``PageStructure``) computed with it, so they travel with the page.

    In a worker process a page gets ``_page_budget`` seconds (``time_budget``): past it the
    page raises ``PageTimeoutError`` and the worker takes the next one. Code that never
    returns to the interpreter is the pool's business (``ProcessPool.call``'s ``timeout``).
    """
    budget = _page_budget if multiprocessing.parent_process() is not None and \
        threading.current_thread() is threading.main_thread() else None
    start = time.perf_counter()
    if budget is None:
        page = _parse_and_derive(body, url, content_type, limits, derive)
        return ParsedPage(page, time.perf_counter() - start)
    with time_budget(budget, f"parsing took longer than {budget:g} s (GROWNUP_PAGE_TIMEOUT)"):
        page = _parse_and_derive(body, url, content_type, limits, derive)
    return ParsedPage(page, time.perf_counter() - start)


def _parse_and_derive(body: bytes, url: str | None, content_type: str | None,
                      limits: PageLimits, derive: tuple[str, ...]) -> PageStructure:
    page = parse_page(body, url=url, content_type=content_type, limits=limits)
    for name in derive:
        try:
            getattr(page, name)  # a cached property: stored on the page, pickled with it
        except Exception:  # noqa: BLE001 - left to the model's process, which computes it
            pass           # again and fails that page alone, as it always has
    return page


class FeaturizerPool:
    """Parses pages in worker processes with at most ``max_pending`` pages in flight.

    Past that bound ``submit()`` waits, so a slow pool slows the crawl instead of growing memory.
    ``derive``: the page-only features to compute beside each parse (``parse_in_worker``); the
    crawl sets it to what its model reads once the model has loaded.
    """

    def __init__(self, workers: int = 2, limits: PageLimits | None = None,
                 max_pending: int = 64, parse: Callable[..., ParsedPage] = parse_in_worker,
                 page_timeout: float | None = None):
        if max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        self.processes = ProcessPool(workers, "featurization", initializer=featurization_worker,
                                     initargs=(page_timeout,))
        self.limits = limits or PageLimits()
        self.max_pending = max_pending
        self.parse = parse
        self.page_timeout = page_timeout or None
        # The worker's own alarm fires at ``page_timeout``; a page still out after this long
        # is stuck where no signal reaches (or on a thread), and its worker is stopped.
        self.hard_timeout = None if self.page_timeout is None else \
            self.page_timeout + max(2.0, self.page_timeout)
        self.pending = 0
        self.derive: tuple[str, ...] = ()
        self._slots: asyncio.Semaphore | None = None

    @property
    def restarts(self) -> int:
        return self.processes.restarts

    def extract_whole_pages(self, initializer: Callable[..., None], initargs: tuple,
                            extract: Callable[..., Any], wait_seconds: float = 0.0) -> None:
        """Before the first page: workers set up by ``initializer(*initargs)`` (which loads the
        model, or connects to the model server), each page through ``extract``
        (``page_worker``) instead of a parse. ``wait_seconds``: the longest a page may wait
        in its worker on something else than its own work (the model server's answer),
        added to the time after which a worker is taken to be stuck."""
        self.processes.initializer, self.processes.initargs = initializer, initargs
        self.parse = extract
        if self.hard_timeout is not None:
            self.hard_timeout += wait_seconds

    async def submit(self, body: bytes, url: str | None = None,
                     content_type: str | None = None,
                     options: dict | None = None) -> "asyncio.Task[ParsedPage]":
        """Start parsing one page; waits first while ``max_pending`` pages are in flight.

        The task's result is a ``ParsedPage``; it raises ``GrownupError`` for pages that are not
        HTML or empty, and ``WorkerCrashedError`` as said above. ``options`` (a page's
        extraction overrides) go to a ``parse`` that extracts whole pages
        (``page_worker.extract_in_worker``), as its last argument.
        """
        extra = (options,) if options else ()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_pending)
        await self._slots.acquire()
        self.pending += 1

        async def run() -> ParsedPage:
            try:
                return await self.processes.call(self.parse, body, url, content_type,
                                                 self.limits, self.derive, *extra,
                                                 what=url or "a page",
                                                 timeout=self.hard_timeout)
            finally:
                self.pending -= 1
                self._slots.release()

        return asyncio.get_running_loop().create_task(run())

    async def structure(self, body: bytes, url: str | None = None,
                        content_type: str | None = None) -> ParsedPage:
        """Parse one page in a worker and wait for it."""
        return await (await self.submit(body, url, content_type))

    def close(self) -> None:
        self.processes.close()
