"""Stopping: workers leave Ctrl-C to the main process and die with it (issue 15).

Ctrl-C in a terminal sends SIGINT to the whole process group; workers used to raise
``KeyboardInterrupt`` and the crawl hung. ``kill -9`` of the crawl used to leave the model
process, a worker and the resource tracker running.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from scrapy_grownup.crawl.workers import ProcessPool
from tests.crawl_support import ROOT, child_env, read_results, serve_slowly, write_test_site

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_a_worker_ignores_sigint():
    async def main():
        pool = ProcessPool(1, "test")
        try:
            return await pool.call(signal.getsignal, signal.SIGINT)
        finally:
            pool.close()

    assert asyncio.run(main()) == signal.SIG_IGN


ORPHAN = """
import asyncio, os, sys, time
from multiprocessing import resource_tracker
from scrapy_grownup.crawl.workers import ProcessPool

async def main():
    pool = ProcessPool(1, "test")
    worker = await pool.call(os.getpid)
    print(worker, resource_tracker._resource_tracker._pid, flush=True)
    time.sleep(600)

asyncio.run(main())
"""


def kill_parent_and_wait(script: str) -> None:
    """Run ``script`` in a new process group; once it prints the pids of its children (one
    line), ``kill -9`` it and assert that the whole group is gone within 15 seconds."""
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=child_env(),
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        children = {int(pid) for pid in parent.stdout.readline().split()}
        assert set(group_members(parent.pid)) >= {parent.pid, *children}
        parent.kill()
        parent.wait(10)
        assert wait_until(lambda: not group_members(parent.pid), 15), \
            group_members(parent.pid)
    finally:
        for pid in group_members(parent.pid):
            os.kill(pid, signal.SIGKILL)


@linux_only
def test_workers_and_the_resource_tracker_exit_when_the_parent_is_killed():
    kill_parent_and_wait(ORPHAN)


POOL_ORPHAN = """
import os, time
from {module} import {pool}

if __name__ == "__main__":
    pool = {pool}(1)
    print(pool.submit(os.getpid).result(), flush=True)
    pool.submit(time.sleep, 600)
    time.sleep(600)
"""


@linux_only
def test_a_training_process_ends_when_grownup_evaluate_is_killed():
    """``evaluate --jobs`` trains in ``training_pool``: a killed run (``kill``, a scheduler's
    time limit) leaves no training running on."""
    kill_parent_and_wait(POOL_ORPHAN.format(module="scrapy_grownup.training.crosssite",
                                            pool="training_pool"))


@linux_only
def test_a_parsing_worker_of_a_training_command_ends_when_the_command_is_killed():
    """The stores, page-type corpora and role labels are parsed in ``parent_bound_pool``'s
    workers, forked (the platform's default start method on Linux): a killed ``grownup``
    command leaves none parsing on."""
    kill_parent_and_wait(POOL_ORPHAN.format(module="scrapy_grownup.crawl.workers",
                                            pool="parent_bound_pool"))


def start_crawl(tmp_path: Path, start_url: str) -> subprocess.Popen:
    """A crawl in a new session (its own process group, as in a terminal)."""
    config = {"start_url": start_url, "spider": "follow", "feed": str(tmp_path / "items.jsonl"),
              "stats": str(tmp_path / "stats.json"), "settings": {"CONCURRENT_REQUESTS": 4}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return subprocess.Popen([sys.executable, "-m", "tests.crawl_support",
                             str(tmp_path / "config.json")], cwd=ROOT, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def wait_for_items(tmp_path: Path, process: subprocess.Popen, timeout: float = 120) -> None:
    feed = tmp_path / "items.jsonl"
    assert wait_until(lambda: process.poll() is not None or (
        feed.exists() and feed.stat().st_size > 0), timeout)
    assert process.poll() is None, process.communicate()[0][-3000:]


@contextmanager
def crawl_under_way(tmp_path: Path):
    """A crawl (its own process group) of a 40-story site served slowly, once it has written
    items; after the block, whatever is left of the group is killed and the server stopped."""
    root = tmp_path / "site"
    write_test_site(root, stories=40)
    server, base = serve_slowly(root, delay=0.3)
    try:
        process = start_crawl(tmp_path, f"{base}/index.html")
        try:
            wait_for_items(tmp_path, process)
            yield process
        finally:
            for pid in group_members(process.pid):
                os.kill(pid, signal.SIGKILL)
    finally:
        server.shutdown()


@linux_only
@pytest.mark.slow
def test_ctrl_c_to_the_process_group_stops_the_crawl_cleanly(tmp_path):
    """SIGINT to the crawl, its workers and its model process at once, as Ctrl-C in a
    terminal does: the crawl flushes, writes its stats and exits; no page is uncounted."""
    with crawl_under_way(tmp_path) as process:
        members = group_members(process.pid)
        assert len(members) >= 3  # the crawl, a worker, the model process (+ tracker)
        os.killpg(process.pid, signal.SIGINT)
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output[-4000:]
        assert wait_until(lambda: not group_members(process.pid), 15)
    assert "KeyboardInterrupt" not in output
    stats, items = read_results(tmp_path / "items.jsonl", tmp_path / "stats.json")
    assert stats["finish_reason"] == "shutdown"
    dropped = sum(v for k, v in stats.items() if k.startswith("grownup/dropped/"))
    assert stats["grownup/claimed"] == stats.get("grownup/items", 0) + dropped
    assert len(items) == stats.get("grownup/items", 0)


@linux_only
@pytest.mark.slow
def test_kill_9_of_the_crawl_leaves_no_process_behind(tmp_path):
    with crawl_under_way(tmp_path) as process:
        assert len(group_members(process.pid)) >= 3
        process.kill()
        process.communicate(timeout=30)
        assert wait_until(lambda: not group_members(process.pid), 15), \
            group_members(process.pid)
