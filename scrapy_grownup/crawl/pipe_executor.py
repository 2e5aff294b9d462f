"""``PipeExecutor``: worker processes whose results the asyncio loop reads itself.

``concurrent.futures.ProcessPoolExecutor`` moves every call through two threads of the calling
process (a manager thread and a queue feeder) and one more in each worker (its result feeder):
every page crosses three thread hand-offs, each one a wait for the interpreter lock that the
reactor holds. Here each worker has one duplex pipe; a call is written to an idle worker's pipe
on the loop's thread, and the loop reads the result when its selector sees the pipe readable,
as it reads a socket. No thread is started in either process.

What the crawl's ``ProcessPool`` relies on is kept: ``submit`` returns a
``concurrent.futures.Future`` that is ``running()`` once a worker holds its call, and
``shutdown`` takes ``wait`` and ``cancel_futures``, from the loop's thread, another thread or
after the loop stopped. A worker says when it is set up; only then is a call written to its
pipe, so a write never waits on a worker's set-up. A worker that dies costs only the call it
held (``BrokenProcessPool``) and a new worker takes its place; the others go on with theirs.
Only a worker that dies before it was set up breaks the whole executor, as it breaks a
``ProcessPoolExecutor`` (a new worker would die the same way): every call fails and the pool
starts a new executor.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import multiprocessing
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import wait as wait_ready
from typing import Any

logger = logging.getLogger(__name__)

# Seconds a worker told to stop (or killed) gets to exit before it is killed (or given up).
EXIT_SECONDS = 5.0


class _RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker, as text: its ``__cause__`` there."""

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


def _rebuild(exc: BaseException, text: str) -> BaseException:
    exc.__cause__ = _RemoteTraceback(text)
    return exc


class _Raised:
    """An exception a call raised, pickled with its traceback as text."""

    def __init__(self, exc: BaseException):
        self.exc = exc
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))

    def __reduce__(self):
        return _rebuild, (self.exc, f'\n"""\n{self.text}"""')


def _serve(conn, initializer: Callable[..., Any] | None, initargs: tuple) -> None:
    """A worker's life: set up and say so (``None``), then one call at a time until told to
    stop (``None``) or the parent is gone (the pipe closes). A failing initializer ends the
    process before it says it is set up, which breaks the executor."""
    if initializer is not None:
        try:
            initializer(*initargs)
        except BaseException:  # said, then the process ends
            logger.critical("exception in a worker's initializer", exc_info=True)
            raise SystemExit(1) from None
    try:
        conn.send(None)
    except (EOFError, OSError):
        return
    while True:
        try:
            call = conn.recv()
        except (EOFError, OSError):
            return
        if call is None:
            return
        fn, args = call
        try:
            reply = (True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - the caller's to handle, as with a pool
            reply = (False, _Raised(exc))
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return
        except Exception as exc:  # noqa: BLE001 - a result that does not pickle
            conn.send((False, _Raised(RuntimeError(
                f"the result of {getattr(fn, '__name__', fn)!r} could not be sent back: "
                f"{type(exc).__name__}: {exc}"))))
        del call, fn, args, reply  # nothing of this page is kept while waiting for the next


class _Worker:
    __slots__ = ("conn", "future", "killed", "process", "ready", "retired", "served")

    def __init__(self, process, conn):
        self.process = process
        self.conn = conn
        self.future: Future | None = None  # the call it holds
        self.ready = False  # said it is set up: calls may be written to it
        self.retired = False  # told to stop: its exit is no crash
        self.served = False  # has answered a call
        self.killed = False  # stopped by ``kill_holder``


class PipeExecutor:
    """``workers`` processes of ``context`` set up by ``initializer(*initargs)``, started at the
    first ``submit`` from a running asyncio loop, which then drives them (see the module).
    ``on_replace(reason)`` is called each time a new worker takes the place of one that died
    on its own (one stopped by ``kill_holder`` is its caller's to count)."""

    def __init__(self, workers: int, context=None, initializer: Callable[..., Any] | None = None,
                 initargs: tuple = (), on_replace: Callable[[str], None] | None = None):
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self._count = workers
        self._context = context or multiprocessing.get_context("spawn")
        self._initializer, self._initargs = initializer, initargs
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: list[_Worker] = []
        self._idle: collections.deque[_Worker] = collections.deque()
        self._queue: collections.deque[tuple[Future, Callable, tuple]] = collections.deque()
        self._broken: str | None = None
        self._shutdown = False
        self._on_replace = on_replace
        self.replacements = 0
        self._lock = threading.Lock()  # the queue and the flags, for submit and shutdown

    # -- the caller's side ------------------------------------------------------------------
    def submit(self, fn: Callable[..., Any], *args) -> Future:
        """Queue ``fn(*args)`` for the next idle worker; its ``Future``."""
        with self._lock:
            if self._broken is not None:
                raise BrokenProcessPool(self._broken)
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            future: Future = Future()
            self._queue.append((future, fn, args))
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
            self._start()
        if _on_loop_thread(loop):
            self._dispatch()
        else:
            loop.call_soon_threadsafe(self._dispatch)
        return future

    @property
    def broken(self) -> bool:
        """Whether a worker's death broke the executor (no call can run on it any more)."""
        return self._broken is not None

    def kill_holder(self, future: Future) -> bool:
        """Kill the worker that holds ``future``'s call (a call stuck where no signal reaches):
        the call fails with ``BrokenProcessPool`` and a new worker takes its place. False
        where no worker holds it (queued, or done meanwhile)."""
        for worker in list(self._workers):
            if worker.future is future and worker.process.exitcode is None:
                worker.killed = True
                _kill(worker.process)
                return True
        return False

    def holder_is_new(self, future: Future) -> bool:
        """Whether the worker holding ``future``'s call has not answered a call yet (its
        first call may pay for imports its set-up left)."""
        return any(w.future is future and not w.served for w in list(self._workers))

    def kill_workers(self) -> None:
        """Kill every worker: the executor breaks, every call held or queued fails with
        ``BrokenProcessPool``."""
        self._break("its workers were killed")

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        """No new calls; ``cancel_futures`` cancels the queued ones. With ``wait`` the calls
        held (and, without ``cancel_futures``, the queued ones) finish and the workers exit
        before it returns; without it they are told to stop once their calls are done."""
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                while self._queue:
                    self._queue.popleft()[0].cancel()
        loop = self._loop
        if loop is None:
            return
        if not (loop.is_running() and not _on_loop_thread(loop)):
            if wait:
                self._finish()
            else:
                self._retire_idle()
            return
        # Another thread, the loop running: the loop goes on reading results and lists what
        # is pending and which workers there are; this thread only waits.
        if not wait:
            self._on_loop(self._retire_idle, wait=False)
            return
        pending = self._on_loop(lambda: [w.future for w in self._workers if w.future] +
                                [future for future, _fn, _args in self._queue])
        if pending is None:  # the loop stopped meanwhile
            self._finish()
            return
        wait_futures(pending)

        def retire() -> list[_Worker]:
            self._retire_idle()
            return list(self._workers)

        workers = self._on_loop(retire)
        if workers is None:
            self._finish()
            return
        for worker in workers:
            _join(worker.process)
        self._on_loop(lambda: [self._forget(w) for w in workers])

    def _on_loop(self, fn: Callable[[], Any], wait: bool = True):
        """``fn()`` run on the running loop's thread, for a caller on another thread (its
        result, with ``wait``); None when the loop stops (or closes) before it ran."""
        done: Future = Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                done.set_exception(exc)

        try:
            self._loop.call_soon_threadsafe(run)
        except RuntimeError:  # the loop was closed meanwhile
            return None
        if not wait:
            return None
        while True:
            try:
                return done.result(timeout=0.5)
            except TimeoutError:
                if not self._loop.is_running():
                    return None

    # -- the loop's side ----------------------------------------------------------------------
    def _start(self) -> None:
        for _ in range(self._count):
            self._spawn()

    def _spawn(self) -> None:
        parent_end, child_end = self._context.Pipe(duplex=True)
        try:
            process = self._context.Process(target=_serve, daemon=True,
                                            args=(child_end, self._initializer,
                                                  self._initargs),
                                            name="grownup-pipe-worker")
            process.start()
        except BaseException:
            parent_end.close()
            raise
        finally:
            child_end.close()
        worker = _Worker(process, parent_end)
        self._workers.append(worker)
        self._loop.add_reader(parent_end.fileno(), self._readable, worker)
        self._loop.add_reader(process.sentinel, self._exited, worker)

    def _dispatch(self) -> None:
        """Hand queued calls to idle workers (on the loop's thread)."""
        while self._idle and self._broken is None:
            with self._lock:
                if not self._queue:
                    break
                future, fn, args = self._queue.popleft()
                if not future.set_running_or_notify_cancel():
                    continue  # cancelled while queued
                worker = self._idle.popleft()
                worker.future = future  # held: never neither queued nor held
            try:
                worker.conn.send((fn, args))
            except (OSError, EOFError):  # the worker is gone: its sentinel says so next
                continue
            except Exception as exc:  # noqa: BLE001 - arguments that do not pickle: this call's
                worker.future = None
                self._idle.appendleft(worker)
                future.set_exception(exc)
        if self._shutdown:
            self._retire_idle()

    def _readable(self, worker: _Worker) -> bool:
        """Read what ``worker`` sent (set up, or a call's result); False at the pipe's end
        (the worker is gone: ``_exited`` handles it)."""
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):
            self._stop_reading(worker.conn)
            return False
        except Exception as exc:  # noqa: BLE001 - a result that does not unpickle here
            message = (False, exc)
        if message is None:  # set up
            worker.ready = True
            if worker.retired:  # told to stop while setting up: it is reading that now
                return True
        else:
            future, worker.future = worker.future, None
            worker.served = True
            if future is not None and not future.done():
                ok, value = message
                (future.set_result if ok else future.set_exception)(value)
        if not worker.killed and worker.process.is_alive():
            self._idle.append(worker)
        self._dispatch()
        return True

    def _exited(self, worker: _Worker) -> None:
        worker.process.join(1.0)  # its pipes are closed: it is exiting, if not yet reapable
        code = worker.process.exitcode
        self._forget(worker)
        if (worker.retired and worker.future is None) or self._broken is not None:
            return
        reason = (f"a worker process ended (exit code {code}) with a call in hand"
                  if worker.future is not None else
                  f"a worker process ended (exit code {code})")
        if self._shutdown or not worker.ready:
            self._break(reason)  # at shutdown, or its set-up failed: as ProcessPoolExecutor
            return
        # one worker gone: the call it held fails, a new worker takes its place
        self._workers.remove(worker)
        if worker in self._idle:
            self._idle.remove(worker)
        future, worker.future = worker.future, None
        if future is not None and not future.done():
            future.set_exception(BrokenProcessPool(reason))
        try:
            self._spawn()
        except Exception as exc:  # noqa: BLE001 - no new process (no memory, no descriptors)
            self._break(f"{reason}, and no new one could be started: {exc}")
            return
        self.replacements += 1
        if self._on_replace is not None and not worker.killed:
            self._on_replace(reason)
        self._dispatch()

    def _break(self, reason: str) -> None:
        """A worker died: every call held or queued fails and the other workers stop."""
        with self._lock:
            if self._broken is not None:
                return
            self._broken = reason
            queued = list(self._queue)
            self._queue.clear()
        error = BrokenProcessPool(f"{reason}; the worker pool is not usable anymore")
        for worker in list(self._workers):
            future, worker.future = worker.future, None
            if future is not None and not future.done():
                future.set_exception(error)
            if worker.process.exitcode is None:
                _kill(worker.process)
        for future, _fn, _args in queued:
            if future.set_running_or_notify_cancel():
                future.set_exception(error)

    def _retire_idle(self) -> None:
        """After shutdown, with nothing queued: the workers that hold no call (idle, or still
        setting up: they read it once set up) are told to stop."""
        if self._queue:
            return
        self._idle.clear()
        for worker in self._workers:
            if worker.future is None and not worker.retired and not worker.conn.closed:
                worker.retired = True
                try:
                    worker.conn.send(None)
                except (OSError, EOFError):
                    pass

    def _finish(self) -> None:
        """``shutdown(wait=True)`` where no loop callback can run meanwhile: the held and
        queued calls are completed here, then the workers are stopped and joined."""
        while self._broken is None and (self._queue or any(w.future for w in self._workers)):
            self._dispatch()
            watched = {}
            for worker in self._workers:
                if not worker.conn.closed:
                    watched[worker.conn] = worker
                watched[worker.process.sentinel] = worker
            if not watched:
                break
            for handle in wait_ready(list(watched), timeout=1.0):
                worker = watched[handle]
                if worker not in self._workers:
                    continue  # gone already, through its other handle
                if handle is worker.conn and not worker.conn.closed and \
                        self._readable(worker):
                    continue
                _join(worker.process)
                self._exited(worker)
        self._retire_idle()
        for worker in list(self._workers):
            _join(worker.process)
            self._forget(worker)

    def _stop_reading(self, conn) -> None:
        try:
            self._loop.remove_reader(conn.fileno())
        except (RuntimeError, AttributeError, ValueError, OSError):  # closed loop or pipe
            pass

    def _forget(self, worker: _Worker) -> None:
        """Stop watching ``worker`` and close its pipe (once)."""
        if worker.conn.closed:
            return
        for fd in (worker.conn.fileno(), worker.process.sentinel):
            try:
                self._loop.remove_reader(fd)
            except (RuntimeError, AttributeError, ValueError):  # the loop is closed
                pass
        worker.conn.close()


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _join(process) -> None:
    """Wait for a worker told to stop; kill it if it does not."""
    process.join(EXIT_SECONDS)
    if process.exitcode is None:
        _kill(process)
        process.join(EXIT_SECONDS)


def _kill(process) -> None:
    try:
        process.kill()
    except (OSError, ValueError, AttributeError):  # already reaped or never started
        pass


__all__ = ["PipeExecutor"]
