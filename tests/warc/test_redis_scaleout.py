"""Scale-out: two WARC spider processes share a scrapy-redis queue of archives.

A real ``redis-server`` (the Debian package) runs on loopback, on a free port, without
persistence. Two ``grownup warc --redis`` workers consume a queue of archives into one corpus
directory: every archive is read exactly once, none is skipped, and the final pairs join pages
that different workers read.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scrapy_grownup.data.datasets import DatasetNotAvailable
from scrapy_grownup.warc.sources import Source
from scrapy_grownup.warc.synthetic import dataset_pages, write_warc
from tests.crawl_support import child_env
from tests.data_support import skip_missing_data

ROOT = Path(__file__).resolve().parents[2]
REDIS_SERVER = shutil.which("redis-server") or (
    "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(REDIS_SERVER is None,
                       reason="redis-server is not installed (Debian package redis-server)"),
    pytest.mark.skipif(importlib.util.find_spec("scrapy_redis") is None
                       or importlib.util.find_spec("redis") is None,
                       reason="scrapy-redis is not installed (pip install scrapy-redis)"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_url(tmp_path):
    import redis

    port = free_port()
    process = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path), "--protected-mode", "yes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("redis-server did not start")
                time.sleep(0.05)
        yield url
    finally:
        client.close()
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_two_workers_share_a_queue_of_archives(tmp_path, redis_url):
    import redis

    try:
        pages = dataset_pages(16)
    except DatasetNotAvailable:
        skip_missing_data("dragnet pages")
    # 8 archives of 2 pages; each of the 4 sites has pages in 2 archives (k and k + 4), and
    # its URL sub-paths match across the two archives, not within one.
    archives = []
    for k in range(8):
        site = f"site{k % 4}.example"
        records = [(f"http://{site}/section{j}/story{k}.html", pages[2 * k + j][1],
                    "text/html") for j in range(2)]
        archives.append(write_warc(tmp_path / "in" / f"part-{k}.warc.gz", records, noise=True))
    out, key = tmp_path / "corpus", "grownup_warc_redis:start_urls"
    client = redis.Redis.from_url(redis_url, decode_responses=True)

    command = [sys.executable, "-m", "scrapy_grownup.cli.main", "warc", "--redis", redis_url,
               "--output", str(out), "--workers", "0", "--shard-pages", "4",
               "-s", "GROWNUP_WARC_REDIS_POLL=0.05", "-s", "GROWNUP_WARC_REDIS_IDLE_CLOSE=1",
               "-s", "GROWNUP_WARC_REDIS_START_WAIT=60"]
    logs = [open(tmp_path / f"worker-{i}.log", "w") for i in range(2)]
    workers = [subprocess.Popen(command, stdout=logs[i], stderr=subprocess.STDOUT, env=child_env())
               for i in range(2)]
    try:
        deadline = time.monotonic() + 120
        while client.scard(f"{key}:workers") < 2:
            assert all(w.poll() is None for w in workers), _logs(tmp_path)
            assert time.monotonic() < deadline, "the workers did not register"
            time.sleep(0.05)
        # The producer side: `grownup warc --push` expands the paths into the queue.
        push = subprocess.run([sys.executable, "-m", "scrapy_grownup.cli.main", "warc", "--redis",
                               redis_url, "--push", str(tmp_path / "in")],
                              capture_output=True, text=True, env=child_env(), timeout=120)
        assert push.returncode == 0, push.stderr[-2000:]
        assert json.loads(push.stdout)["pushed"] == 8
        client.rpush(key, str(archives[0]))  # pushed twice: must not be read twice
        for worker in workers:
            worker.wait(timeout=240)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        for log in logs:
            log.close()
    text = _logs(tmp_path)
    assert [w.returncode for w in workers] == [0, 0], text[-4000:]

    assert client.llen(key) == 0 and client.scard(f"{key}:workers") == 0
    assert client.hlen(f"{key}:active") == 0
    assert client.smembers(f"{key}:done") == {str(p) for p in archives}  # none skipped
    markers = [json.loads(p.read_text()) for p in sorted((out / "files").glob("*.json"))]
    assert sorted(m["source"] for m in markers) == sorted(str(p) for p in archives)
    readers = {m["source"]: m["worker"] for m in markers}
    assert len(set(readers.values())) == 2, readers  # both workers read archives
    # Each archive was read once: the workers' own stats add up to 8 archives, 16 pages.
    runs = [json.loads(line)["this_run"] for line in text.splitlines()
            if line.startswith("{") and '"this_run"' in line]
    assert len(runs) == 2
    assert sum(r.get("files", 0) for r in runs) == 8
    assert sum(r.get("pages", 0) for r in runs) == 16
    assert sum(r.get("files_already_done", 0) for r in runs) == 1  # the duplicate entry

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pages"] == 16 and manifest["files"]["read"] == 8
    assert sorted(manifest["workers"]) == sorted(set(readers.values()))
    assert manifest["sites"] == 4 and manifest["pairs"] == 8
    # The merged pairs join pages of archives that different workers read.
    from scrapy_grownup.warc.corpus import load_corpus
    from scrapy_grownup.warc.shards import read_header

    corpus = load_corpus(out)
    source_of = {}
    for shard in corpus.shards:
        for row in range(shard.pages):
            source_of[shard.first_page + row] = read_header(shard.path)["source"]
    pairs = corpus.pairs()["pairs"].tolist()
    assert len(pairs) == 8 and all(source_of[a] != source_of[b] for a, b in pairs)
    across = sum(readers[source_of[a]] != readers[source_of[b]] for a, b in pairs)
    assert across == sum(2 for k in range(4)
                         if readers[str(archives[k])] != readers[str(archives[k + 4])])
    assert Source(str(archives[0])).key in {m["key"] for m in markers}


def _logs(tmp_path: Path) -> str:
    return "\n".join((tmp_path / f"worker-{i}.log").read_text() for i in range(2)
                     if (tmp_path / f"worker-{i}.log").exists())
