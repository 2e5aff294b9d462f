"""Shared helpers for the benchmarks: single-core pinning, the page sets, served sites and
crawls."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path


def pin_single_core() -> None:
    """Make BLAS, OpenMP, the tokenizer (Rust, rayon) and torch use one thread, so figures are
    per core."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "RAYON_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def best_ms(fn, items, rounds: int = 3) -> float:
    """Minimum over ``rounds`` of the mean ms per item: the least disturbed round."""
    import time

    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, (time.perf_counter() - start) / len(items) * 1000)
    return round(best, 3)


def dragnet_test_pages(limit: int | None = None) -> list[tuple[str, bytes]]:
    """``(id, html bytes)`` of the Dragnet test split, unpacked into the cache if needed."""
    return dataset_pages("dragnet", "test", limit)


def dataset_pages(name: str, split: str | None = None,
                  limit: int | None = None) -> list[tuple[str, bytes]]:
    """``(id, html bytes)`` of a labelled set (``scrapy_grownup.data.datasets.load``), unpacked
    into the cache if needed; raises ``DatasetNotAvailable`` where it is not there."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from scrapy_grownup.data.datasets import load

    return [(r.id, r.html) for r in load(name, split=split, limit=limit or None)]


def write_story_site(root: Path, pages: int, story=None) -> None:
    """``pages`` generated story pages (the example project's three layouts) and an index
    linking them all; ``story(i, html)`` may rewrite each story page."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from example_project.news_site import article_page

    links = []
    for i in range(pages):
        page, _ = article_page(i, variant=i % 3)
        if story is not None:
            page = story(i, page)
        (root / f"story-{i}.html").write_text(page, encoding="utf-8")
        links.append(f'<li><a href="/story-{i}.html">story {i}</a></li>')
    (root / "index.html").write_text(f"<html><body><ul>{''.join(links)}</ul></body></html>",
                                     encoding="utf-8")


def write_site(root: Path, pages: list[tuple[str, bytes]]) -> None:
    """Ready pages, ``(name, html bytes)``, as ``page-N.html`` files and an index linking
    them all."""
    links = []
    for i, (name, body) in enumerate(pages):
        (root / f"page-{i}.html").write_bytes(body)
        links.append(f'<li><a href="/page-{i}.html">{i}</a></li>')
    (root / "index.html").write_text(f"<html><body><ul>{''.join(links)}</ul></body></html>",
                                     encoding="utf-8")


@contextmanager
def served_site(pages: int | list[tuple[str, bytes]], story=None):
    """A site served by ``http.server`` on loopback in its own process, so the crawl under
    test does not share its process: ``pages`` generated story pages (``write_story_site``)
    or a ready list of ``(name, html bytes)`` pages (``write_site``); yields ``(temporary
    directory, start URL of index.html)``."""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        site = tmp / "site"
        site.mkdir()
        if isinstance(pages, int):
            write_story_site(site, pages, story)
        else:
            write_site(site, pages)
        server = subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind",
                                   "127.0.0.1", "--directory", str(site)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N ..."
            port = int(line.split(" port ")[1].split()[0])
            yield tmp, f"http://127.0.0.1:{port}/index.html"
        finally:
            server.terminate()
            server.wait()


class ChildCPU:
    """CPU seconds (user + system) of this process's children, summed by process name, from
    ``start`` to ``stop``: a background thread samples them every ``interval`` seconds and
    keeps each one's last value, so children that exit before ``stop`` still count. A child
    running at ``start`` counts from there, one started later from its start. ``own_seconds``
    is the sampling thread's own CPU time, to take off this process's figure."""

    def __init__(self, interval: float = 0.1):
        self.interval = interval
        self.base: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self.own_seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        import psutil

        for child in psutil.Process().children(recursive=True):
            try:
                with child.oneshot():
                    times = child.cpu_times()
                    self.last[child.pid] = (child.name(), times.user + times.system)
            except psutil.Error:  # exited between the listing and the reading
                pass

    def _run(self) -> None:
        self._sample()
        self.base = {pid: seconds for pid, (_name, seconds) in self.last.items()}
        while not self._stop.wait(self.interval):
            self._sample()
        self._sample()
        self.own_seconds = time.thread_time()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()

    def by_name(self) -> dict[str, float]:
        by_name: dict[str, float] = {}
        for pid, (name, seconds) in self.last.items():
            by_name[name] = by_name.get(name, 0.0) + seconds - self.base.get(pid, 0.0)
        return by_name


def crawl_index(start_url: str, settings: dict, child_cpu: bool = False) -> dict:
    """Crawl the index page's links and nothing else, in this process; returns the stats.
    Many requests at a time (32), no robots.txt, warnings only. ``child_cpu``: also the CPU
    seconds of the child processes by name (``ChildCPU``), spider open to close, as
    ``bench/child_cpu_seconds/<name>``, the sampling taken off this process's own figure."""
    import scrapy
    from scrapy.crawler import CrawlerProcess

    class IndexSpider(scrapy.Spider):
        name = "bench"
        start_urls = [start_url]

        def parse(self, response):
            if response.url == self.start_urls[0]:
                yield from response.follow_all(css="a")

    process = CrawlerProcess({"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False,
                              "ROBOTSTXT_OBEY": False, "CONCURRENT_REQUESTS": 32,
                              "CONCURRENT_REQUESTS_PER_DOMAIN": 32, **settings})
    crawler = process.create_crawler(IndexSpider)
    cpu = {}  # this process's CPU seconds (all its threads) from spider open to close
    children = ChildCPU() if child_cpu else None
    crawler.signals.connect(lambda: cpu.setdefault("open", time.process_time()),
                            signal=scrapy.signals.spider_opened, weak=False)
    if children is not None:  # sampling starts after "open" and ends before "closed"
        crawler.signals.connect(children.start, signal=scrapy.signals.spider_opened, weak=False)
        crawler.signals.connect(children.stop, signal=scrapy.signals.spider_closed, weak=False)
    crawler.signals.connect(lambda: cpu.setdefault("closed", time.process_time()),
                            signal=scrapy.signals.spider_closed, weak=False)
    process.crawl(crawler)
    process.start()
    stats = dict(crawler.stats.get_stats())
    if children is not None and "open" in cpu:
        for name, seconds in children.by_name().items():
            stats[f"bench/child_cpu_seconds/{name}"] = seconds
        cpu["open"] += children.own_seconds
    if {"open", "closed"} <= set(cpu):
        stats["bench/crawl_process_cpu_seconds"] = cpu["closed"] - cpu["open"]
    return stats
