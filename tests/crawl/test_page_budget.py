"""A page that hangs the parser costs that page, and a huge body is cut before it leaves the
reactor: real crawls of a local HTTP server (the worker-pool mechanics are unit-tested in
``test_scrapy_components.py``)."""

from __future__ import annotations

import time

import pytest

from example_project.news_site import article_page

pytestmark = pytest.mark.slow

# Loaded by every Python process of the crawl through PYTHONPATH. Inside ``parse_page`` (so
# within the worker's budget): a body holding "HANG-IN-PYTHON" loops forever in Python, one
# holding "HANG-SIGNAL-BLOCKED" sleeps with SIGALRM blocked, like C code that never returns to the interpreter.
# Every body that reaches parsing has its length appended to $GROWNUP_TEST_BODY_LOG. In the
# model's process, the Markdown of a page holding "HANG-IN-MARKDOWN" loops forever in Python.
SITECUSTOMIZE = '''
import os
import signal
import time

import scrapy_grownup.output.markdown as markdown
import scrapy_grownup.page.dom as dom

_to_markdown = markdown.to_markdown


def to_markdown(page, *args, **kwargs):
    if any("HANG-IN-MARKDOWN" in text for text in page.seg_text):
        while True:
            pass
    return _to_markdown(page, *args, **kwargs)


markdown.to_markdown = to_markdown

_parse_tree = dom.parse_tree


def parse_tree(body, *args, **kwargs):
    data = body if isinstance(body, bytes) else body.encode()
    with open(os.environ["GROWNUP_TEST_BODY_LOG"], "a") as log:
        log.write(f"{len(data)}\\n")
    if b"HANG-IN-PYTHON" in data:
        while True:
            pass
    if b"HANG-SIGNAL-BLOCKED" in data:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(3600)
    return _parse_tree(body, *args, **kwargs)


dom.parse_tree = parse_tree
'''
CAP = 200_000


def test_hanging_pages_are_timeout_drops_and_huge_bodies_are_cut_in_the_reactor(
        tmp_path, monkeypatch):
    """20 stories, two pages that hang the parser (one in Python, one where no signal
    reaches), one whose Markdown hangs in the model's process, and a 3 MB page,
    GROWNUP_PAGE_TIMEOUT = 1 and GROWNUP_MAX_PAGE_BYTES = 200,000: every story arrives, the
    three hanging pages are counted ``timeout`` drops (before, the first one stalled the crawl
    forever, and the budget did not reach the model's process, which the third stalled), and
    no body over the cap reached a worker (before, the whole 3 MB were pickled to it and cut
    there)."""
    from example_project.news_site import serve
    from tests.crawl_support import run_crawl

    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    body_log = tmp_path / "bodies.txt"
    monkeypatch.setenv("PYTHONPATH", str(hooks))
    monkeypatch.setenv("GROWNUP_TEST_BODY_LOG", str(body_log))
    root = tmp_path / "site"
    root.mkdir()
    names = []
    for k in range(20):
        (root / f"story-{k}.html").write_text(article_page(k, variant=k % 3)[0])
        names.append(f"story-{k}.html")
    for k, (name, marker) in enumerate((("hang-python", "HANG-IN-PYTHON"),
                                        ("hang-blocked", "HANG-SIGNAL-BLOCKED"),
                                        ("hang-markdown", "HANG-IN-MARKDOWN"))):
        html = article_page(k, variant=1)[0].replace("</main>", f"<p>{marker}</p></main>")
        (root / f"{name}.html").write_text(html)
        names.insert(6 + 7 * k, f"{name}.html")
    filler = "".join(f"<p>Filler paragraph {k} of a very long page.</p>"
                     for k in range(3_000_000 // 45))
    big = article_page(3, variant=0)[0].replace("</main>", filler + "</main>")
    (root / "big.html").write_text(big)
    names.append("big.html")
    links = "".join(f'<a href="{name}">{name}</a> ' for name in names)
    (root / "index.html").write_text(f"<html><body><p>{links}</p></body></html>")
    server, base = serve(root)
    start = time.perf_counter()
    try:
        stats, items = run_crawl(tmp_path, f"{base}/index.html", spider="index", timeout=150,
                                 settings={"GROWNUP_PAGE_TIMEOUT": 1,
                                           "GROWNUP_MAX_PAGE_BYTES": CAP})
    finally:
        server.shutdown()
    seconds = time.perf_counter() - start
    dropped = {k.split("/", 2)[2]: v for k, v in stats.items()
               if k.startswith("grownup/dropped/")}
    by_name = {item["url"].rsplit("/", 1)[1]: item for item in items}
    assert {f"story-{k}.html" for k in range(20)} <= set(by_name), (dropped, stats)
    assert dropped.get("timeout") == 3, (dropped, sorted(by_name))
    assert set(dropped) <= {"timeout", "no_content"}, dropped  # no_content: the link index
    assert not {"hang-python.html", "hang-blocked.html", "hang-markdown.html"} & set(by_name)
    assert stats["grownup/worker_restarts"] == 1  # the worker no signal reached was killed
    assert "grownup/model_restarts" not in stats  # the model's process stopped its own page
    assert stats["finish_reason"] == "finished"
    # The huge page: cut before it left the reactor, still an article, flagged.
    assert stats["grownup/responses/truncated"] == 1
    assert "bytes" in by_name["big.html"]["truncated"]
    lengths = [int(line) for line in body_log.read_text().split()]
    assert lengths and max(lengths) <= CAP + 1, max(lengths)
    assert seconds < 120, seconds


# -- the budget covers the page's article too (issue 55) -----------------------------------------
# Unit-level: a page worker whose forward passes run in a model server (``page_worker.
# extract_with_model_server``), the server on a thread here. A stage that sleeps far longer than
# the budget on one marked page stands for a pathological page (before, only the parse had a
# budget: the article's metadata, text and Markdown ran for as long as they took).
BUDGET = 2.0   # the story pages' own article takes a small fraction of it, even on a loaded box
SLEEP = 30.0   # what the marked page's stage would take without the budget


@pytest.fixture
def model_server():
    """A model server (``fast``) on a thread of this process: ``(address, authkey)``."""
    import os
    import tempfile
    import threading

    from scrapy_grownup.crawl import model_process
    from scrapy_grownup.crawl.model_server import serve
    from scrapy_grownup.page.limits import PageLimits

    address = os.path.join(tempfile.mkdtemp(prefix="grownup-test-"), "model.sock")
    authkey, started, servers = os.urandom(16), threading.Event(), []
    threading.Thread(target=serve, args=(address, authkey, ("fast", "cpu", PageLimits(), None, 1),
                                         32, 40_000, 0.0, started, servers), daemon=True).start()
    assert started.wait(120)
    yield address, authkey
    servers[0].stop()
    model_process._state.clear()


def _pages() -> list[tuple[str, bytes]]:
    from tests.crawl_support import SLOW_MARK

    ok = article_page(1, variant=0)[0]
    slow = article_page(2, variant=1)[0].replace("</main>", f"<p>{SLOW_MARK}</p></main>")
    return [(f"http://news.test/{k}.html", html.encode()) for k, html in enumerate((ok, slow))]


def _extract_in_a_worker(model_server, stage: str, seconds: float, budget: float = BUDGET):
    """Both pages through ``extract_with_model_server`` in a spawned page worker whose
    ``stage`` sleeps ``seconds`` on the marked page: per page its result or error, and the
    seconds the marked one took."""
    import asyncio

    from scrapy_grownup.crawl.page_worker import extract_with_model_server
    from scrapy_grownup.crawl.workers import ProcessPool
    from scrapy_grownup.page.limits import PageLimits
    from tests.crawl_support import slow_stage_worker

    pool = ProcessPool(1, "featurization", initializer=slow_stage_worker,
                       initargs=(stage, seconds, budget, *model_server, "fast", PageLimits()))

    async def extract(url, body):
        start = time.perf_counter()
        try:
            result = await pool.call(extract_with_model_server, body, url, "text/html",
                                     PageLimits())
        except Exception as exc:  # noqa: BLE001 - the page's error is the result
            result = exc
        return result, time.perf_counter() - start

    async def main():
        await extract(*_pages()[0])  # the worker starts (imports, set-up): not timed
        return [await extract(url, body) for url, body in _pages()]

    try:
        return asyncio.run(main())
    finally:
        pool.close()


@pytest.mark.parametrize("stage", ["markdown", "metadata"])
def test_a_page_whose_article_runs_past_its_budget_is_a_timeout(model_server, stage):
    """The marked page's Markdown (or metadata) would take 30 s: with a 2 s budget it is a
    ``PageTimeoutError`` (the crawl's counted ``timeout`` drop) after about 2 s, and the other
    page is an article."""
    from scrapy_grownup.crawl.pipelines import drop_reason
    from scrapy_grownup.crawl.workers import PageTimeoutError

    (ok, _), (slow, seconds) = _extract_in_a_worker(model_server, stage, SLEEP)
    assert ok.article.markdown and ok.batch is not None
    assert isinstance(slow, PageTimeoutError), slow
    assert "GROWNUP_PAGE_TIMEOUT" in str(slow) and drop_reason(slow) == "timeout"
    assert seconds < SLEEP / 2, seconds  # interrupted at the budget, not slept through


def test_the_parse_time_counts_against_the_same_budget(model_server):
    """A parse and an article that each take 60% of the budget make a page past it."""
    from scrapy_grownup.crawl.workers import PageTimeoutError

    (ok, _), (slow, _) = _extract_in_a_worker(model_server, "parse+markdown", 0.6 * BUDGET)
    assert ok.article.text and isinstance(slow, PageTimeoutError), slow
    (ok, _), (slow, _) = _extract_in_a_worker(model_server, "markdown", 0.6 * BUDGET)
    assert ok.article.text and slow.article.text  # one stage alone fits


def test_the_wait_for_the_forward_pass_counts_for_no_page(model_server, monkeypatch):
    """The model server's batch, shared by pages, takes longer than the budget: no page is
    past its own."""
    from scrapy_grownup.extractor import ArticleExtractor

    real = ArticleExtractor.batch_outputs

    def slow_batch(self, inputs):
        time.sleep(BUDGET + 0.5)
        return real(self, inputs)

    monkeypatch.setattr(ArticleExtractor, "batch_outputs", slow_batch)  # the server's, here
    (ok, _), (other, _) = _extract_in_a_worker(model_server, "none", 0.0)
    assert ok.article.text and other.article.text


def test_on_a_thread_the_budget_is_checked_when_the_article_is_done(model_server, monkeypatch):
    """With ``GROWNUP_WORKERS = 0`` a page's work runs on a thread, where no signal arrives: a
    page past its budget is still the same ``timeout``, found once its article is built."""
    from concurrent.futures import ThreadPoolExecutor

    import scrapy_grownup.output.markdown as markdown
    from scrapy_grownup.crawl import page_worker
    from scrapy_grownup.crawl.workers import PageTimeoutError
    from scrapy_grownup.page.limits import PageLimits
    from tests.crawl_support import slow_on_the_marked_page

    monkeypatch.setattr(markdown, "to_markdown",
                        slow_on_the_marked_page(markdown.to_markdown, 3.0))
    monkeypatch.setattr(page_worker, "featurization_worker", lambda budget: None)
    monkeypatch.setattr(page_worker, "name_process", lambda name: None)
    page_worker.model_server_worker(1.5, *model_server, "fast", PageLimits())
    with ThreadPoolExecutor(1) as pool:
        results = [pool.submit(page_worker.extract_with_model_server, body, url, "text/html",
                               PageLimits()) for url, body in _pages()]
        assert results[0].result().article.text
        with pytest.raises(PageTimeoutError):
            results[1].result()
