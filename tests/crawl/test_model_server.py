"""The crawl's model server (``crawl.model_server``): page workers send a page's model inputs,
the server batches the forward passes of all workers' pages and answers each; the workers build
the articles. Unit tests over real sockets, then real crawls of a local HTTP server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import tempfile
import threading
import time

import numpy as np
import pytest

from example_project.news_site import STORIES, article_page, serve
from scrapy_grownup.crawl import model_process
from scrapy_grownup.crawl.model_server import ModelClient, serve as serve_model
from scrapy_grownup.errors import ModelError
from scrapy_grownup.extractor import ArticleExtractor
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.page.limits import PageLimits
from tests.crawl_support import run_crawl, serve_slowly

NUM = 12


def story(k: int) -> tuple[bytes, str]:
    return article_page(k, variant=k % 3)[0].encode(), f"http://news.test/story-{k}.html"


def first_paragraph(k: int) -> str:
    return STORIES[k % len(STORIES)][1][0]


@pytest.fixture
def start_server():
    """``start(model="fast", runtime=None, wait_ms=...)``: a model server on a thread of this
    process; returns ``(address, authkey)``. Stopped at the end."""
    servers = []

    def start(model: str = "fast", wait_ms: float = 0.0, max_pages: int = 32):
        address = os.path.join(tempfile.mkdtemp(prefix="grownup-test-"), "model.sock")
        authkey, started = os.urandom(16), threading.Event()
        threading.Thread(target=serve_model, daemon=True, args=(
            address, authkey, (model, "cpu", PageLimits(), None, 1), max_pages, 40_000,
            wait_ms, started, servers)).start()
        assert started.wait(120)
        return address, authkey

    yield start
    for server in servers:
        server.stop()
    model_process._state.clear()


def test_pages_of_many_workers_share_batches_and_each_gets_its_own_outputs(start_server):
    """Four connections each send pages one at a time: the server batches pages of several
    connections, and each page's outputs are what the extractor gives that page alone."""
    address, authkey = start_server(wait_ms=2000)
    full = ArticleExtractor.from_pretrained("fast", device="cpu")
    worker = ArticleExtractor.for_articles("fast")
    pages = [parse_page(*story(k)) for k in range(NUM)]
    inputs = [worker.page_inputs(page) for page in pages]
    got: list = [None] * NUM

    def send(first: int) -> None:
        client = ModelClient(address, authkey)
        for k in range(first, NUM, 4):
            got[k] = client.score(inputs[k])

    threads = [threading.Thread(target=send, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(batch[0] for _, batch in got) > 1
    for page, (outputs, _) in zip(pages, got):
        alone = full.batch_outputs([full.page_inputs(page)])[0]
        assert np.array_equal(outputs["content"], alone["content"])
        assert np.array_equal(outputs["page_type_inputs"], alone["page_type_inputs"])


def test_a_page_the_model_fails_on_is_its_own_model_error(start_server, monkeypatch):
    real = ArticleExtractor.batch_outputs

    def batch_outputs(self, inputs):
        if any("POISON" in text for page in inputs for text in page.strings[0]):
            raise RuntimeError("injected model failure")
        return real(self, inputs)

    worker = ArticleExtractor.for_articles("fast")
    bodies = [story(k) for k in range(3)]
    bodies[1] = (bodies[1][0].replace(b"</main>", b"<p>POISON</p></main>"), bodies[1][1])
    inputs = [worker.page_inputs(parse_page(*body)) for body in bodies]
    monkeypatch.setattr(ArticleExtractor, "batch_outputs", batch_outputs)
    client = ModelClient(*start_server())
    assert client.score(inputs[0])[0]["content"].shape == (inputs[0].num_nodes,)
    with pytest.raises(ModelError, match="injected model failure"):
        client.score(inputs[1])
    assert client.score(inputs[2])[0]["content"].shape == (inputs[2].num_nodes,)


def test_the_torch_runtime_serves_the_same_outputs(start_server, monkeypatch):
    """A torch model (``fast`` on the torch runtime here) in the server: each page's scores
    as the numpy runtime's, batched with other pages."""
    import scrapy_grownup.extractor as extractor_module

    real = extractor_module.choose_runtime
    monkeypatch.setattr(extractor_module, "choose_runtime",
                        lambda runtime, config, device: real("torch", config, device))
    address, authkey = start_server()
    assert getattr(model_process.loaded_extractor().model, "runtime", "torch") == "torch"
    numpy = ArticleExtractor.from_pretrained("fast", device="cpu", runtime="numpy")
    pages = [parse_page(*story(k)) for k in range(4)]
    client = ModelClient(address, authkey)
    for page in pages:
        outputs, _ = client.score(numpy.page_inputs(page))
        alone = numpy.batch_outputs([numpy.page_inputs(page)])[0]
        assert np.abs(outputs["content"] - alone["content"]).max() < 1e-4


def test_workers_build_the_articles_extract_would_and_the_server_builds_none(start_server,
                                                                              monkeypatch):
    """Page workers (spawned processes) with the server on a thread here, where building an
    article fails: every page's article is the one ``extract`` gives it."""
    from scrapy_grownup.crawl.page_worker import extract_with_model_server, model_server_worker
    from scrapy_grownup.crawl.workers import ProcessPool

    full = ArticleExtractor.from_pretrained("fast", device="cpu")
    expected = [full.extract(*story(k)) for k in range(NUM)]
    address, authkey = start_server(wait_ms=1000)

    def no_article(*args, **kwargs):
        raise AssertionError("the model server built an article")

    for name in ("article", "articles_from_outputs", "article_results"):
        monkeypatch.setattr(ArticleExtractor, name, no_article)
    pool = ProcessPool(2, "featurization", initializer=model_server_worker,
                       initargs=(10.0, address, authkey, "fast", PageLimits()))

    async def main():
        return await asyncio.gather(*(pool.call(extract_with_model_server, *story(k),
                                                "text/html", PageLimits())
                                      for k in range(NUM)))

    try:
        got = asyncio.run(main())
    finally:
        pool.close()
    for page, article in zip(got, expected):
        assert page.article.to_dict() == article.to_dict()
        assert page.article.markdown == article.markdown
        assert page.batch[0] >= 1


# -- real crawls --------------------------------------------------------------------------------
def write_stories(root, count: int) -> None:
    root.mkdir()
    for k in range(count):
        (root / f"story-{k}.html").write_text(article_page(k, variant=k % 3)[0])
    links = "".join(f'<a href="story-{k}.html">story {k}</a> ' for k in range(count))
    (root / "index.html").write_text(f"<html><body><p>{links}</p></body></html>")


def stories_of(items: list[dict]) -> dict[str, dict]:
    return {item["url"]: item for item in items if "/story-" in item["url"]}


def dropped(stats: dict) -> dict[str, int]:
    return {k.split("/", 2)[2]: v for k, v in stats.items() if k.startswith("grownup/dropped/")}


@pytest.mark.slow
def test_a_model_process_crawl_gives_the_in_worker_crawls_items_and_extracts(tmp_path):
    """The same site crawled with the page workers holding the model and with a model
    process: the same items, each with the article ``ArticleExtractor.extract`` gives."""
    from scrapy.utils.serialize import ScrapyJSONEncoder

    from scrapy_grownup.crawl.items import article_values

    root = tmp_path / "site"
    write_stories(root, 20)
    server, base = serve(root)
    try:
        runs = {}
        for name, settings in (("in_workers", {}),
                               ("model_process", {"GROWNUP_MODEL_PROCESS": True,
                                                  "GROWNUP_WORKERS": 2})):
            (tmp_path / name).mkdir()
            stats, items = run_crawl(tmp_path / name, f"{base}/index.html", spider="index",
                                     settings=settings)
            runs[name] = (stats, stories_of(items))
    finally:
        server.shutdown()
    (worker_stats, in_workers), (model_stats, served) = runs["in_workers"], runs["model_process"]
    assert len(served) == 20 and served.keys() == in_workers.keys()
    assert model_stats["grownup/batches"] >= 1 and "grownup/batches" not in worker_stats
    extractor = ArticleExtractor.from_pretrained("fast", device="cpu")
    encoder = ScrapyJSONEncoder()
    for url, item in served.items():
        item = {k: v for k, v in item.items() if k != "timing"}
        assert item == {k: v for k, v in in_workers[url].items() if k != "timing"}
        body = (root / url.rsplit("/", 1)[1]).read_bytes()
        article = extractor.extract(body, url, "text/html")
        values = json.loads(encoder.encode(article_values(article, "text")))
        assert {k: item[k] for k in values} == values


def crawl_in_background(tmp_path, base: str, count: int, settings: dict):
    config_dir = tmp_path / "crawl"
    config_dir.mkdir()
    process = run_crawl(config_dir, f"{base}/index.html", spider="index", background=True,
                        settings={"GROWNUP_MODEL_PROCESS": True, "GROWNUP_WORKERS": 2,
                                  "CONCURRENT_REQUESTS": 4, **settings})
    return process, config_dir / "index-items.jsonl", config_dir / "index-stats.json"


def kill_mid_crawl(process, feed, name: str) -> int:
    """Once the crawl has items, SIGKILL one of its processes called ``name``; its pid."""
    import psutil

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if feed.exists() and feed.read_text().count("\n") >= 3:
            victims = [child for child in psutil.Process(process.pid).children(recursive=True)
                       if child.name() == name]
            if victims:
                os.kill(victims[0].pid, signal.SIGKILL)
                return victims[0].pid
        time.sleep(0.05)
    raise AssertionError(f"no {name} process to kill mid-crawl: "
                         f"{process.communicate()[0][-3000:] if process.poll() is not None else ''}")


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["grownup-model", "grownup-worker"])
def test_a_process_killed_mid_crawl_costs_at_most_the_pages_it_held(tmp_path, victim):
    """SIGKILL of the model process mid-crawl: the pages it held are counted ``model_error``
    drops (at most one per worker), a new model process serves the rest. SIGKILL of a page
    worker mid-page: its page is tried again on a new worker (or dropped as
    ``worker_crashed``); no other page is lost."""

    count = 40
    root = tmp_path / "site"
    write_stories(root, count)
    server, base = serve_slowly(root, delay=0.15)
    try:
        process, feed, stats_path = crawl_in_background(tmp_path, base, count, {})
        try:
            kill_mid_crawl(process, feed, victim)
            output, _ = process.communicate(timeout=240)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 0, output[-3000:]
    finally:
        server.shutdown()
    stats = json.loads(stats_path.read_text())
    items = [json.loads(line) for line in feed.read_text().splitlines()]
    stories = stories_of(items)
    drops = dropped(stats)
    reason = "model_error" if victim == "grownup-model" else "worker_crashed"
    assert drops.pop("no_content", 0) <= 1  # the index page: links, no article
    assert set(drops) <= {reason}, drops
    assert len(stories) + drops.get(reason, 0) == count, (len(stories), drops)
    assert drops.get(reason, 0) <= (2 if victim == "grownup-model" else 1), drops
    assert stats["grownup/" + ("model_restarts" if victim == "grownup-model"
                               else "worker_restarts")] >= 1
    for url, item in stories.items():
        k = int(url.rsplit("-", 1)[1].split(".")[0])
        assert first_paragraph(k) in item["text"]
