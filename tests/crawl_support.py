"""Real crawls for the add-on's tests: a test site, spiders, a reactor heartbeat, a runner.

Each crawl runs in its own process (``python -m tests.crawl_support CONFIG.json``) because a
Twisted reactor starts once per process. The runner writes the crawl's stats as JSON.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from example_project.news_site import article_page, index_page

ROOT = Path(__file__).resolve().parents[1]
# A valid 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
NUM_STORIES = 30


def write_test_site(root: Path, stories: int = NUM_STORIES) -> dict[str, list[str]]:
    """Dozens of real-looking pages plus every kind of bad input; returns paths by kind."""
    root.mkdir(parents=True, exist_ok=True)
    kinds: dict[str, list[str]] = {"story": [], "bad_html": [], "not_html": [], "missing": []}
    for i in range(stories):
        page, _ = article_page(i, variant=i % 3)
        (root / f"story-{i}.html").write_text(page, encoding="utf-8")
        kinds["story"].append(f"story-{i}.html")
    (root / "empty.html").write_bytes(b"")
    (root / "png-named.html").write_bytes(PNG)  # served as text/html, bytes are a PNG
    (root / "image.png").write_bytes(PNG)
    filler = "".join(f"<p>Filler paragraph {k} of a very long page.</p>"
                     for k in range(10_000_000 // 40))
    big, _ = article_page(0, variant=1)
    (root / "big.html").write_text(big.replace("</main>", filler + "</main>"), encoding="utf-8")
    (root / "broken.html").write_bytes(
        b"<html><head><title>Broken</title><body><div class=story><h1>Broken markup story"
        b"<p>This page never closes its tags <b>and nests <i>them badly</b></i><table><tr>"
        b"<td>cells without rows<p>Still, a reader can follow the text of this story, which "
        b"goes on for a while to look like an article.</div></span></p>\xff\xfe stray bytes")
    # served as text/html, bytes that are not HTML: plain text, JSON, random bytes
    (root / "plain-text.html").write_bytes(b"Just a few words of plain text, no tag at all.\n")
    (root / "json-named.html").write_bytes(b'{"title": "x", "body": "<p>HTML in JSON</p>"}')
    (root / "noise.html").write_bytes(bytes(range(256)) * 16)
    kinds["bad_html"] += ["empty.html", "png-named.html", "big.html", "broken.html",
                          "plain-text.html", "json-named.html", "noise.html"]
    kinds["not_html"].append("image.png")
    kinds["missing"].append("missing.html")
    links = "".join(f'<li><a href="/{name}">{name}</a></li>'
                    for name in kinds["bad_html"] + kinds["not_html"] + kinds["missing"])
    index = index_page(stories).replace("</main>", f"<ul>{links}</ul></main>")
    (root / "index.html").write_text(index, encoding="utf-8")
    return kinds


class Heartbeat:
    """Extension: a 10 ms timer on the reactor; the longest gap between ticks goes in stats."""

    interval = 0.01

    def __init__(self, crawler):
        from scrapy import signals

        self.crawler = crawler
        self.max_gap = 0.0
        self.last = None
        self.call = None
        crawler.signals.connect(self.start, signals.engine_started)
        crawler.signals.connect(self.stop, signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def start(self):
        from twisted.internet import task

        self.last = time.perf_counter()
        self.call = task.LoopingCall(self.tick)
        self.call.start(self.interval, now=False)

    def tick(self):
        now = time.perf_counter()
        self.max_gap = max(self.max_gap, now - self.last)
        self.last = now

    def stop(self):
        if self.call is not None and self.call.running:
            self.call.stop()
        self.crawler.stats.set_value("heartbeat/max_gap_ms", round(1000 * self.max_gap, 1))


@dataclasses.dataclass
class StoryItem:
    """A user's dataclass item: its own field plus some article fields."""

    section: str = ""
    url: str | None = None
    title: str | None = None
    text: str | None = None


def crashing_parse(body: bytes, url: str, content_type, limits, derive=()):
    """A worker ``parse`` for crash tests: ``crash-once:MARKER`` kills the worker process the
    first time (it creates MARKER), ``crash-always:`` every time; ``count-slow:FILE`` adds a
    line to FILE and takes a second; other URLs parse normally."""
    from scrapy_grownup.crawl.workers import parse_in_worker

    if url.startswith("count-slow:"):
        with open(url.split(":", 1)[1], "a", encoding="utf-8") as runs:
            runs.write("run\n")
        time.sleep(1.0)
    elif url.startswith("crash-once:"):
        marker = Path(url.split(":", 1)[1])
        if not marker.exists():
            marker.touch()
            os._exit(3)
    elif url.startswith("crash-always:"):
        os._exit(3)
    return parse_in_worker(body, url, content_type, limits, derive)


SLOW_MARK = "SLOW-IN-THE-ARTICLE-STAGE"


def slow_on_the_marked_page(original, seconds: float):
    """``original`` (a stage reading a page), sleeping ``seconds`` first on a page holding
    ``SLOW_MARK``."""
    def stage(page, *args, **kwargs):
        if any(SLOW_MARK in text for text in page.seg_text):
            time.sleep(seconds)
        return original(page, *args, **kwargs)
    return stage


def slow_stage_worker(stage: str, seconds: float, *args) -> None:
    """Initializer of a page worker (``page_worker.model_server_worker(*args)``) in which the
    ``stage`` of a page holding ``SLOW_MARK`` sleeps ``seconds``: "markdown", "metadata",
    "parse+markdown" (each of the two), or "none"."""
    import scrapy_grownup.output.markdown as markdown
    import scrapy_grownup.output.metadata as metadata
    from scrapy_grownup.crawl import page_worker

    page_worker.model_server_worker(*args)
    if "markdown" in stage:
        markdown.to_markdown = slow_on_the_marked_page(markdown.to_markdown, seconds)
    if stage == "metadata":
        metadata.extract_metadata = slow_on_the_marked_page(metadata.extract_metadata, seconds)
    if "parse" in stage:
        parse = page_worker.parse_page

        def slow_parse(body, *a, **kw):
            if SLOW_MARK.encode() in body:
                time.sleep(seconds)
            return parse(body, *a, **kw)
        page_worker.parse_page = slow_parse


def hanging_parse(body: bytes, url: str, content_type, limits, derive=()):
    """A worker ``parse`` for time-budget tests: inside the budgeted ``parse_page`` call,
    ``hang-python:`` loops in Python forever (the worker's alarm ends it), ``hang-blocked:``
    sleeps with the alarm signal blocked (like C code that never returns to the interpreter:
    only stopping the worker ends it), ``sleep:SECONDS`` sleeps that long; other URLs parse
    normally."""
    import scrapy_grownup.crawl.workers as workers

    if not getattr(workers.parse_page, "hangs", False):  # patched once per process
        workers.parse_page = _hanging(workers.parse_page)
    return workers.parse_in_worker(body, url, content_type, limits, derive)


def _hanging(real):
    def parse_page(body, url=None, **kwargs):
        url = url or ""
        if url.startswith("hang-python:"):
            while True:
                pass
        if url.startswith("hang-blocked:"):
            import signal

            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(3600)
        if url.startswith("sleep:"):
            time.sleep(float(url.split(":", 1)[1]))
        return real(body, url=url, **kwargs)

    parse_page.hangs = True
    return parse_page


def spiders():
    """Spider classes by name (built lazily: importing scrapy is for the crawl process)."""
    import scrapy
    from scrapy.linkextractors import LinkExtractor
    from scrapy.spiders import CrawlSpider, Rule

    from scrapy_grownup import with_article

    class FollowSpider(CrawlSpider):
        """A plain CrawlSpider: no items of its own."""

        name = "follow"
        rules = (Rule(LinkExtractor(deny_extensions=[]), follow=True),)

    class IndexSpider(scrapy.Spider):
        """Follows the start page's links and does nothing else: the crawl's own CPU work is
        tiny, so a heartbeat sees what the add-on costs the reactor."""

        name = "index"

        def parse(self, response):
            if response.url == self.start_urls[0]:
                yield from response.follow_all(css="a")

    class OwnItemsSpider(scrapy.Spider):
        """Yields its own items: stories ask for their article, the index does not."""

        name = "own_items"

        def parse(self, response):
            if response.url.endswith("/index.html"):
                yield {"kind": "index", "links": len(response.css("a"))}
                for href in response.css("a::attr(href)").getall():
                    if "story-" in href:
                        yield response.follow(href)
                return
            number = int(response.url.rsplit("-", 1)[1].split(".")[0])
            if number % 2:
                yield with_article(StoryItem(section="odd"), response)
            else:
                yield with_article({"section": "even", "title": "kept title"}, response)

    class MetaSpider(scrapy.Spider):
        """Asks for each story with its own ``meta["grownup"]`` (``META_CASES``, by story
        number) and yields an item of its own for it through ``with_article``."""

        name = "meta"

        def parse(self, response):
            for href in response.css("a::attr(href)").getall():
                if "story-" in href:
                    number = int(href.rsplit("-", 1)[1].split(".")[0])
                    case = META_CASES[number % len(META_CASES)]
                    yield response.follow(href, callback=self.story, meta={"grownup": case},
                                          cb_kwargs={"number": number})

        def story(self, response, number):
            yield with_article({"story": number}, response)

    return {cls.name: cls for cls in (FollowSpider, IndexSpider, OwnItemsSpider, MetaSpider)}


# ``meta["grownup"]`` of the ``meta`` spider's stories, by story number modulo their count.
META_CASES = [
    False,                                                   # left alone: the item passes
    {"output_format": "markdown"},                           # Markdown in text
    {"threshold": 0.01},                                     # keeps more (the comments too)
    {"comments": False, "exclude": ["markdown", "related_links"]},
    {"threshold": 2},                                        # a bad value: dropped, bad_meta
    {"treshold": 0.5},                                       # an unknown key: the same
    None,                                                    # the crawl's settings
]


# An expression for a child process's own peak resident memory in kB. ``ru_maxrss`` will
# not do: Linux carries the parent's high-water mark across fork and exec, so a child of a
# pytest process that has loaded models reports the parent's peak (1-2 GB), not its own.
PEAK_RSS_KB = ("int(next(line for line in open('/proc/self/status') "
               "if line.startswith('VmHWM:')).split()[1])")


def child_env() -> dict:
    """Environment of a test's child process: one thread per library, offline, the repository
    importable."""
    out = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), out.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    return out


def run_crawl(tmp_path: Path, start_url: str, spider: str = "follow", settings: dict | None = None,
              timeout: float = 180, background: bool = False):
    """Crawl in a child process; returns ``(stats, items)`` (or the ``Popen`` if background)."""
    feed = tmp_path / f"{spider}-items.jsonl"
    stats = tmp_path / f"{spider}-stats.json"
    config = {"start_url": start_url, "spider": spider, "feed": str(feed), "stats": str(stats),
              "settings": settings or {}}
    config_path = tmp_path / f"{spider}-config.json"
    config_path.write_text(json.dumps(config))
    env = child_env()
    command = [sys.executable, "-m", "tests.crawl_support", str(config_path)]
    if background:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return read_results(feed, stats)


def read_results(feed: Path, stats: Path) -> tuple[dict, list[dict]]:
    items = [json.loads(line) for line in feed.read_text(encoding="utf-8").splitlines()] \
        if feed.exists() else []
    return json.loads(stats.read_text()), items


def serve_slowly(root: Path, delay: float):
    """Like ``news_site.serve`` but each response waits ``delay`` seconds (a slow site)."""
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class SlowHandler(SimpleHTTPRequestHandler):
        def do_GET(self):
            time.sleep(delay)
            super().do_GET()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SlowHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def main(config_path: str) -> int:
    from scrapy.crawler import CrawlerProcess

    config = json.loads(Path(config_path).read_text())
    settings = {
        "ADDONS": {"scrapy_grownup.Addon": 500},
        "EXTENSIONS": {"tests.crawl_support.Heartbeat": 0},
        "FEEDS": {config["feed"]: {"format": "jsonlines", "overwrite": True}},
        "LOG_LEVEL": "INFO",
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "GROWNUP_MODEL": "fast",
        "GROWNUP_WORKERS": 1,
        **config["settings"],
    }
    process = CrawlerProcess(settings, install_root_handler=True)
    spider_cls = spiders()[config["spider"]]
    crawler = process.create_crawler(spider_cls)
    process.crawl(crawler, start_urls=[config["start_url"]])
    process.start()
    stats = {k: (v.isoformat() if hasattr(v, "isoformat") else v)
             for k, v in crawler.stats.get_stats().items()}
    Path(config["stats"]).write_text(json.dumps(stats, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

