"""``PipeExecutor``: the crawl's worker processes, driven by the asyncio loop without threads.

What ``ProcessPool`` relies on (results and exceptions back, ``running()`` while a worker holds
a call, a dead worker replaced at the cost of its own call, a set-up that kills its worker
breaking the executor, ``kill_holder`` and ``kill_workers``, ``shutdown`` from the loop's
thread, another thread or after the loop stopped) against real spawned processes.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import CancelledError
from concurrent.futures.process import BrokenProcessPool

import pytest

from scrapy_grownup.crawl.pipe_executor import PipeExecutor, _RemoteTraceback


def call(executor: PipeExecutor, fn, *args):
    """``fn(*args)`` in a worker, awaitable."""
    return asyncio.wrap_future(executor.submit(fn, *args))


def with_executor(test, workers: int = 1, set_up: bool = True, **options):
    """Run ``await test(executor)`` on a new executor (``set_up``: once all its workers said
    they are set up) in a new loop, and shut the executor down after; ``test``'s result."""
    async def main():
        executor = PipeExecutor(workers, **options)
        try:
            if set_up:
                await call(executor, os.getpid)
                while not all(worker.ready for worker in executor._workers):
                    await asyncio.sleep(0.05)
            return await test(executor)
        finally:
            executor.shutdown(wait=not executor.broken, cancel_futures=True)

    return asyncio.run(main())


def test_results_and_exceptions_come_back_in_the_callers_futures_without_a_thread():
    threads = set(threading.enumerate())  # threads other tests left may end meanwhile

    async def test(executor):
        pids = await asyncio.gather(*(call(executor, os.getpid) for _ in range(20)))
        assert not set(threading.enumerate()) - threads  # no manager, feeder or waiter thread
        assert os.getpid() not in pids
        assert await call(executor, divmod, 17, 5) == (3, 2)
        with pytest.raises(ValueError, match="invalid literal") as raised:
            await call(executor, int, "not a number")
        # the worker's traceback travels as the exception's cause
        assert isinstance(raised.value.__cause__, _RemoteTraceback)
        assert "ValueError" in str(raised.value.__cause__)
        # a big argument and a big result cross the pipes whole
        blob = os.urandom(3_000_000)
        assert await call(executor, bytes, blob) == blob

    with_executor(test, workers=2)


def test_a_call_is_running_only_while_a_worker_holds_it():
    async def test(executor):
        held = executor.submit(time.sleep, 1.0)
        queued = executor.submit(os.getpid)
        assert held.running() and not queued.running() and not queued.done()
        await asyncio.wrap_future(held)
        assert isinstance(await asyncio.wrap_future(queued), int)

    with_executor(test)


def test_arguments_or_a_result_that_do_not_pickle_fail_that_call_alone():
    async def test(executor):
        with pytest.raises(Exception, match="pickle|lambda"):
            await call(executor, len, lambda: None)
        with pytest.raises(RuntimeError, match="could not be sent back"):
            await call(executor, threading.Lock)
        assert await call(executor, len, "four") == 4

    with_executor(test)


def test_a_worker_that_dies_costs_its_own_call_and_a_new_one_takes_its_place():
    replaced = []

    async def test(executor):
        pids = {worker.process.pid for worker in executor._workers}
        other = executor.submit(time.sleep, 1.0)  # the other worker's call goes on
        dying = executor.submit(os._exit, 3)
        queued = [executor.submit(os.getpid) for _ in range(4)]
        with pytest.raises(BrokenProcessPool, match="exit code 3"):
            await asyncio.wrap_future(dying)
        after = set(await asyncio.gather(*map(asyncio.wrap_future, queued)))
        assert await asyncio.wrap_future(other) is None
        assert not executor.broken and executor.replacements == 1
        return pids, after

    pids, after = with_executor(test, workers=2, on_replace=replaced.append)
    assert len(pids) == 2 and after and len(after - pids) <= 1  # the old one, and one new
    assert len(replaced) == 1 and "exit code 3" in replaced[0]


def test_a_call_that_always_kills_its_worker_leaves_the_other_workers_calls_alone():
    async def test(executor):
        busy = executor.submit(time.sleep, 1.0)
        for _ in range(2):  # the call and its retry, each on a new worker
            with pytest.raises(BrokenProcessPool):
                await call(executor, os._exit, 3)
        assert await asyncio.wrap_future(busy) is None
        assert not executor.broken and executor.replacements == 2

    with_executor(test, workers=2)


def test_a_worker_that_dies_before_it_is_set_up_breaks_the_executor():
    """A set-up that kills its process (every new worker would die the same way) breaks the
    executor instead of starting one worker after another."""
    async def test(executor):
        futures = [executor.submit(os.getpid) for _ in range(3)]
        for future in futures:
            with pytest.raises(BrokenProcessPool, match="exit code 4"):
                await asyncio.wrap_future(future)
        assert executor.broken and executor.replacements == 0
        with pytest.raises(BrokenProcessPool):
            executor.submit(os.getpid)

    with_executor(test, set_up=False, initializer=os._exit, initargs=(4,))


def test_a_big_call_is_not_written_to_a_worker_still_setting_up():
    """The pipe holds about 200 KiB: writing a bigger call to a worker busy setting up would
    stop the event loop until the set-up ends. The call waits in the queue instead."""
    async def test(executor):
        blob = os.urandom(2_000_000)
        started = time.monotonic()
        future = executor.submit(bytes, blob)
        assert time.monotonic() - started < 1.0 and not future.running()
        assert await asyncio.wrap_future(future) == blob

    with_executor(test, set_up=False, initializer=time.sleep, initargs=(2.0,))


def test_kill_holder_stops_the_worker_of_a_stuck_call_only():
    async def test(executor):
        await asyncio.gather(*(call(executor, time.sleep, 0.05) for _ in range(2)))
        stuck = executor.submit(time.sleep, 60)
        other = executor.submit(time.sleep, 1.0)
        await asyncio.sleep(0.3)
        assert not executor.holder_is_new(stuck)
        started = time.monotonic()
        assert executor.kill_holder(stuck)
        with pytest.raises(BrokenProcessPool):
            await asyncio.wrap_future(stuck)
        assert time.monotonic() - started < 10
        assert await asyncio.wrap_future(other) is None
        assert isinstance(await call(executor, os.getpid), int)
        assert executor.replacements == 1 and not executor.kill_holder(stuck)

    with_executor(test, workers=2)


def test_kill_workers_fails_the_calls_they_hold():
    async def test(executor):
        stuck = [executor.submit(time.sleep, 60) for _ in range(2)]
        started = time.monotonic()
        executor.kill_workers()
        for future in stuck:
            with pytest.raises(BrokenProcessPool):
                await asyncio.wrap_future(future)
        assert time.monotonic() - started < 10 and executor.broken

    with_executor(test, workers=2)


def test_shutdown_from_another_thread_finishes_the_held_call_and_cancels_the_queued_ones():
    async def test(executor):
        held = executor.submit(time.sleep, 0.5)
        queued = executor.submit(os.getpid)
        await asyncio.to_thread(executor.shutdown, True, True)
        assert held.done() and held.exception() is None
        with pytest.raises(CancelledError):
            queued.result()
        assert all(w.process.exitcode is not None for w in executor._workers)
        with pytest.raises(RuntimeError, match="after shutdown"):
            executor.submit(os.getpid)

    with_executor(test)


def stopped_loop_executor(submit):
    """``grownup extract --jobs``: the loop runs only while it waits on a batch; the pool is
    closed after it stopped. A new executor, ``submit(executor)``'s futures from inside a loop
    that then stops, and the seconds ``shutdown(wait=True)`` took after it."""
    loop = asyncio.new_event_loop()
    try:
        async def start():
            executor = PipeExecutor(2)
            return executor, await submit(executor)

        executor, futures = loop.run_until_complete(start())
        started = time.monotonic()
        executor.shutdown(wait=True)  # no loop runs: the executor reads the pipes itself
        return executor, futures, time.monotonic() - started
    finally:
        loop.close()


def test_shutdown_after_the_loop_stopped_completes_what_was_submitted():
    async def submit(executor):
        return [executor.submit(divmod, k, 3) for k in range(6)]

    executor, futures, _seconds = stopped_loop_executor(submit)
    assert [f.result() for f in futures] == [divmod(k, 3) for k in range(6)]
    assert all(w.process.exitcode == 0 for w in executor._workers)


def test_shutdown_after_the_loop_stopped_survives_a_worker_dying_meanwhile():
    async def submit(executor):
        await call(executor, os.getpid)
        return executor.submit(os._exit, 3), executor.submit(os.getpid)

    executor, (dying, after), seconds = stopped_loop_executor(submit)
    assert seconds < 15
    with pytest.raises(BrokenProcessPool):
        dying.result(0)
    assert after.done()
    assert all(w.process.exitcode is not None for w in executor._workers)
