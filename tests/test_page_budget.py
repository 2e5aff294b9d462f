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
# Every body that reaches parsing has its length appended to $GROWNUP_TEST_BODY_LOG.
SITECUSTOMIZE = '''
import os
import signal
import time

import scrapy_grownup.page.dom as dom

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
    reaches) and a 3 MB page, GROWNUP_PAGE_TIMEOUT = 1 and GROWNUP_MAX_PAGE_BYTES = 200,000:
    every story arrives, the two hanging pages are counted ``timeout`` drops (before, the first
    one stalled the crawl forever), and no body over the cap reached a worker (before, the
    whole 3 MB were pickled to it and cut there)."""
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
                                        ("hang-blocked", "HANG-SIGNAL-BLOCKED"))):
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
    assert dropped.get("timeout") == 2, (dropped, sorted(by_name))
    assert set(dropped) <= {"timeout", "no_content"}, dropped  # no_content: the link index
    assert "hang-python.html" not in by_name and "hang-blocked.html" not in by_name
    assert stats["grownup/worker_restarts"] == 1  # the worker no signal reached was killed
    assert stats["finish_reason"] == "finished"
    # The huge page: cut before it left the reactor, still an article, flagged.
    assert stats["grownup/responses/truncated"] == 1
    assert "bytes" in by_name["big.html"]["truncated"]
    lengths = [int(line) for line in body_log.read_text().split()]
    assert lengths and max(lengths) <= CAP + 1, max(lengths)
    assert seconds < 120, seconds
