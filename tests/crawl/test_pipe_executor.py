"""``PipeExecutor``: the crawl's worker processes, driven by the asyncio loop without threads.

What ``ProcessPool`` relies on (results and exceptions back, ``running()`` while a worker holds
a call, a dead worker breaking the executor, ``kill_workers``, ``shutdown`` from the loop's
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


def run(coroutine_function):
    return asyncio.run(coroutine_function())


async def set_up(executor: PipeExecutor) -> PipeExecutor:
    """``executor`` once every worker has said it is set up (calls wait for that)."""
    await asyncio.wrap_future(executor.submit(os.getpid))
    while not all(worker.ready for worker in executor._workers):
        await asyncio.sleep(0.05)
    return executor


def test_results_and_exceptions_come_back_in_the_callers_futures_without_a_thread():
    async def main():
        executor = PipeExecutor(2)
        try:
            threads = threading.active_count()
            await set_up(executor)
            pids = await asyncio.gather(*(asyncio.wrap_future(executor.submit(time.sleep, 0.05))
                                          for _ in range(4)))
            pids = await asyncio.gather(*(asyncio.wrap_future(executor.submit(os.getpid))
                                          for _ in range(20)))
            assert threading.active_count() == threads  # no manager, feeder or waiter thread
            assert os.getpid() not in pids
            assert await asyncio.wrap_future(executor.submit(divmod, 17, 5)) == (3, 2)
            with pytest.raises(ValueError, match="invalid literal") as raised:
                await asyncio.wrap_future(executor.submit(int, "not a number"))
            # the worker's traceback travels as the exception's cause
            assert isinstance(raised.value.__cause__, _RemoteTraceback)
            assert "ValueError" in str(raised.value.__cause__)
            # a big argument and a big result cross the pipes whole
            blob = os.urandom(3_000_000)
            assert await asyncio.wrap_future(executor.submit(bytes, blob)) == blob
        finally:
            executor.shutdown()

    run(main)


def test_a_call_is_running_only_while_a_worker_holds_it():
    async def main():
        executor = await set_up(PipeExecutor(1))
        try:
            held = executor.submit(time.sleep, 1.0)
            queued = executor.submit(os.getpid)
            assert held.running() and not queued.running() and not queued.done()
            await asyncio.wrap_future(held)
            assert isinstance(await asyncio.wrap_future(queued), int)
        finally:
            executor.shutdown()

    run(main)


def test_arguments_or_a_result_that_do_not_pickle_fail_that_call_alone():
    async def main():
        executor = PipeExecutor(1)
        try:
            with pytest.raises(Exception, match="pickle|lambda"):
                await asyncio.wrap_future(executor.submit(len, lambda: None))
            with pytest.raises(RuntimeError, match="could not be sent back"):
                await asyncio.wrap_future(executor.submit(threading.Lock))
            assert await asyncio.wrap_future(executor.submit(len, "four")) == 4
        finally:
            executor.shutdown()

    run(main)


def test_a_worker_that_dies_costs_its_own_call_and_a_new_one_takes_its_place():
    replaced = []

    async def main():
        executor = await set_up(PipeExecutor(2, on_replace=replaced.append))
        try:
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
        finally:
            executor.shutdown()

    pids, after = run(main)
    assert len(pids) == 2 and after and len(after - pids) <= 1  # the old one, and one new
    assert len(replaced) == 1 and "exit code 3" in replaced[0]


def test_a_worker_that_dies_before_it_is_set_up_breaks_the_executor():
    """A set-up that kills its process (every new worker would die the same way) breaks the
    executor instead of starting one worker after another."""
    async def main():
        executor = PipeExecutor(1, initializer=os._exit, initargs=(4,))
        try:
            futures = [executor.submit(os.getpid) for _ in range(3)]
            for future in futures:
                with pytest.raises(BrokenProcessPool, match="exit code 4"):
                    await asyncio.wrap_future(future)
            assert executor.broken and executor.replacements == 0
            with pytest.raises(BrokenProcessPool):
                executor.submit(os.getpid)
        finally:
            executor.shutdown(wait=False, cancel_futures=True)

    run(main)


def test_kill_holder_stops_the_worker_of_a_stuck_call_only():
    async def main():
        executor = await set_up(PipeExecutor(2))
        try:
            await asyncio.gather(*(asyncio.wrap_future(executor.submit(time.sleep, 0.05))
                                   for _ in range(2)))
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
            assert isinstance(await asyncio.wrap_future(executor.submit(os.getpid)), int)
            assert executor.replacements == 1 and not executor.kill_holder(stuck)
        finally:
            executor.shutdown()

    run(main)


def test_kill_workers_fails_the_calls_they_hold():
    async def main():
        executor = PipeExecutor(2)
        try:
            stuck = [executor.submit(time.sleep, 60) for _ in range(2)]
            await asyncio.sleep(0.5)
            started = time.monotonic()
            executor.kill_workers()
            for future in stuck:
                with pytest.raises(BrokenProcessPool):
                    await asyncio.wrap_future(future)
            assert time.monotonic() - started < 10
        finally:
            executor.shutdown(wait=False, cancel_futures=True)

    run(main)


def test_shutdown_from_another_thread_finishes_the_held_call_and_cancels_the_queued_ones():
    async def main():
        executor = await set_up(PipeExecutor(1))
        held = executor.submit(time.sleep, 0.5)
        queued = executor.submit(os.getpid)
        await asyncio.to_thread(executor.shutdown, True, True)
        assert held.done() and held.exception() is None
        with pytest.raises(CancelledError):
            queued.result()
        assert all(w.process.exitcode is not None for w in executor._workers)
        with pytest.raises(RuntimeError, match="after shutdown"):
            executor.submit(os.getpid)

    run(main)


def test_shutdown_after_the_loop_stopped_completes_what_was_submitted():
    """``grownup extract --jobs``: the loop runs only while it waits on a batch; the pool is
    closed after it stopped."""
    loop = asyncio.new_event_loop()
    try:
        async def submit():
            return [executor.submit(divmod, k, 3) for k in range(6)]

        executor = PipeExecutor(2)
        futures = loop.run_until_complete(submit())
        executor.shutdown(wait=True)
        assert [f.result() for f in futures] == [divmod(k, 3) for k in range(6)]
        assert all(w.process.exitcode == 0 for w in executor._workers)
    finally:
        loop.close()


def test_a_call_that_always_kills_its_worker_leaves_the_other_workers_calls_alone():
    async def main():
        executor = await set_up(PipeExecutor(2))
        try:
            busy = executor.submit(time.sleep, 1.0)
            for _ in range(2):  # the call and its retry, each on a new worker
                with pytest.raises(BrokenProcessPool):
                    await asyncio.wrap_future(executor.submit(os._exit, 3))
            assert await asyncio.wrap_future(busy) is None
            assert not executor.broken and executor.replacements == 2
        finally:
            executor.shutdown()

    run(main)


def test_a_big_call_is_not_written_to_a_worker_still_setting_up():
    """The pipe holds about 200 KiB: writing a bigger call to a worker busy setting up would
    stop the event loop until the set-up ends. The call waits in the queue instead."""
    async def main():
        executor = PipeExecutor(1, initializer=time.sleep, initargs=(2.0,))
        try:
            blob = os.urandom(2_000_000)
            started = time.monotonic()
            future = executor.submit(bytes, blob)
            assert time.monotonic() - started < 1.0 and not future.running()
            assert await asyncio.wrap_future(future) == blob
        finally:
            executor.shutdown()

    run(main)


def test_shutdown_after_the_loop_stopped_survives_a_worker_dying_meanwhile():
    loop = asyncio.new_event_loop()
    try:
        async def submit():
            executor = PipeExecutor(1)
            await asyncio.wrap_future(executor.submit(os.getpid))
            return executor, executor.submit(os._exit, 3), executor.submit(os.getpid)

        executor, dying, after = loop.run_until_complete(submit())
        started = time.monotonic()
        executor.shutdown(wait=True)  # no loop runs: the executor reads the pipes itself
        assert time.monotonic() - started < 15
        with pytest.raises(BrokenProcessPool):
            dying.result(0)
        assert after.done()
        assert all(w.process.exitcode is not None for w in executor._workers)
    finally:
        loop.close()
