"""Shared helpers for the benchmarks: single-core pinning and the Dragnet page set."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
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
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from scrapy_grownup.data.datasets import load

    records = load("dragnet", split="test")
    pages = [(r.id, r.html) for r in records]
    return pages[:limit] if limit else pages


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


@contextmanager
def served_site(pages: int, story=None):
    """The story site (``write_story_site``) served by ``http.server`` on loopback in its own
    process, so the crawl under test does not share its process; yields ``(temporary
    directory, start URL of index.html)``."""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        site = tmp / "site"
        site.mkdir()
        write_story_site(site, pages, story)
        server = subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind",
                                   "127.0.0.1", "--directory", str(site)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N ..."
            port = int(line.split(" port ")[1].split()[0])
            yield tmp, f"http://127.0.0.1:{port}/index.html"
        finally:
            server.terminate()


def crawl_index(start_url: str, settings: dict) -> dict:
    """Crawl the index page's links and nothing else, in this process; returns the stats.
    Many requests at a time (32), no robots.txt, warnings only."""
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
    crawler.signals.connect(lambda: cpu.setdefault("open", time.process_time()),
                            signal=scrapy.signals.spider_opened, weak=False)
    crawler.signals.connect(lambda: cpu.setdefault("closed", time.process_time()),
                            signal=scrapy.signals.spider_closed, weak=False)
    process.crawl(crawler)
    process.start()
    stats = dict(crawler.stats.get_stats())
    if {"open", "closed"} <= set(cpu):
        stats["bench/crawl_process_cpu_seconds"] = cpu["closed"] - cpu["open"]
    return stats
