"""One bad page costs exactly one page: parse, model, metadata, text and Markdown failures stay
with their page, in the API, the CLI and the model process, and are counted as what they are.

Faults are injected by patching a step to fail on pages whose URL holds ``poison``; the real
hostile inputs that used to fail these steps are in ``test_hostile_inputs.py``.
"""

from __future__ import annotations

import json
import pickle

import pytest

from example_project.news_site import STORIES, article_page
from scrapy_grownup.errors import (ArticleError, GrownupError, ModelError, NotHTMLError,
                                   ParseError)


@pytest.fixture(scope="module")
def extractor():
    from scrapy_grownup import ArticleExtractor

    return ArticleExtractor.from_pretrained("fast", device="cpu")


def pages(count: int, bad: dict[int, str]) -> list[tuple[bytes, str]]:
    """``count`` story pages; index ``k`` in ``bad`` gets the URL marker ``bad[k]``."""
    out = []
    for k in range(count):
        html, _ = article_page(k, variant=k % 3)
        out.append((html.encode(), f"http://site.test/{bad.get(k, 'story')}-{k}.html"))
    return out


def poison_step(monkeypatch, module, name: str, marker: str = "poison") -> None:
    """Make ``module.name(page, ...)`` raise on pages whose URL contains ``marker``."""
    real = getattr(module, name)

    def step(page, *args, **kwargs):
        url = page.url if hasattr(page, "url") else None
        if url and marker in url:
            raise RuntimeError(f"injected failure in {name}")
        return real(page, *args, **kwargs)

    monkeypatch.setattr(module, name, step)


def first_paragraph(k: int) -> str:
    return STORIES[k % len(STORIES)][1][0]


def test_a_page_whose_markdown_fails_costs_only_itself(extractor, monkeypatch):
    import scrapy_grownup.output.markdown as markdown

    poison_step(monkeypatch, markdown, "to_markdown")
    items = pages(61, {30: "poison"})
    out = extractor.extract_batch(items, errors="skip")
    assert all(a is not None for a in out)  # Markdown is built on first read...
    with pytest.raises(ArticleError, match="injected failure"):
        out[30].to_dict()  # ...and its failure is this page's, a GrownupError
    with pytest.raises(ArticleError):
        out[30].markdown  # noqa: B018 - again on each read, never a silent ""
    for k, article in enumerate(out):
        if k != 30:
            assert first_paragraph(k) in article.to_dict()["markdown"]


def test_a_page_whose_metadata_fails_is_skipped_alone(extractor, monkeypatch):
    import scrapy_grownup.output.metadata as metadata

    poison_step(monkeypatch, metadata, "extract_metadata")
    items = pages(61, {7: "poison"}) + [(b"%PDF-1.4", "http://site.test/doc.pdf")]
    out = extractor.extract_batch(items, errors="skip")
    assert [k for k, a in enumerate(out) if a is None] == [7, 61]
    assert all(first_paragraph(k) in a.text for k, a in enumerate(out) if a is not None)
    with pytest.raises(ArticleError, match="RuntimeError: injected failure in extract_meta"):
        extractor.extract_batch(items[:61])  # errors="raise": the failing page's own error
    with pytest.raises(ArticleError):
        extractor.extract(*items[7])


def test_a_parse_failure_is_a_parse_error(extractor, monkeypatch):
    import scrapy_grownup.page.dom as dom

    monkeypatch.setattr(dom, "_walk", lambda root, *a: (_ for _ in ()).throw(
        RuntimeError("injected parse failure")))
    with pytest.raises(ParseError, match="RuntimeError: injected parse failure"):
        extractor.extract(*pages(1, {0: "poison"})[0])
    assert extractor.extract_batch(pages(3, {}), errors="skip") == [None, None, None]


def test_a_page_the_model_fails_on_is_a_model_error_alone(extractor, monkeypatch):
    real = extractor.featurizer.batch_arrays  # what both runtimes batch pages with

    def batch(parsed):
        if any("poison" in p.url for p in parsed):
            raise RuntimeError("injected model failure")
        return real(parsed)

    monkeypatch.setattr(extractor.featurizer, "batch_arrays", batch)
    out = extractor.extract_batch(pages(12, {4: "poison"}), errors="skip")
    assert [k for k, a in enumerate(out) if a is None] == [4]
    with pytest.raises(ModelError, match="injected model failure"):
        extractor.extract(*pages(1, {0: "poison"})[0])


def test_articles_from_the_model_servers_outputs_are_per_page_and_pickle(extractor,
                                                                         monkeypatch):
    """What a page worker builds from the outputs the model server sent back
    (``articles_from_outputs``): one result per page, the Markdown already built, so pickling
    an article back to the crawl's process cannot fail."""
    import scrapy_grownup.output.markdown as markdown
    from scrapy_grownup.page.dom import parse_page

    poison_step(monkeypatch, markdown, "to_markdown")
    batch = [parse_page(html, url=url) for html, url in pages(20, {3: "poison", 11: "poison"})]
    outputs = extractor.batch_outputs([extractor.page_inputs(page) for page in batch])
    results = extractor.articles_from_outputs(batch, outputs, build_markdown=True)
    back = pickle.loads(pickle.dumps(results))
    assert len(back) == 20
    assert [k for k, r in enumerate(back) if isinstance(r, GrownupError)] == [3, 11]
    assert all(isinstance(back[k], ArticleError) for k in (3, 11))
    assert all(first_paragraph(k) in r.markdown for k, r in enumerate(back)
               if not isinstance(r, GrownupError))


def test_drop_reasons_name_the_step():
    from scrapy_grownup.crawl.pipelines import drop_reason
    from scrapy_grownup.crawl.workers import WorkerCrashedError

    assert drop_reason(ParseError("x")) == "parse_error"
    assert drop_reason(ArticleError("x")) == "article_error"
    assert drop_reason(ModelError("x")) == "model_error"
    assert drop_reason(NotHTMLError("x")) == "not_html"
    assert drop_reason(WorkerCrashedError("x")) == "worker_crashed"


def test_cli_extract_writes_every_good_page(tmp_path, monkeypatch, capsys):
    """60 good pages and 1 whose Markdown fails: 60 articles written, 1 counted failure."""
    import scrapy_grownup.output.markdown as markdown
    from scrapy_grownup.cli.main import main

    poison_step(monkeypatch, markdown, "to_markdown")
    folder = tmp_path / "pages"
    folder.mkdir()
    for k in range(61):
        name = "poison.html" if k == 60 else f"p{k:02d}.html"
        (folder / name).write_text(article_page(k, variant=k % 3)[0])
    out = tmp_path / "out.jsonl"
    assert main(["extract", str(folder), "-o", str(out), "--model", "fast",
                 "--device", "cpu"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 60 and not any("poison" in r["path"] for r in rows)
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert summary["extracted"] == 60
    assert summary.get("failed", sum(summary.get("skipped", {}).values())) == 1


# -- a real crawl ------------------------------------------------------------------------------
# Loaded by every Python process of the crawl (the crawl, its workers, the model process) through
# PYTHONPATH: pages whose body holds "poison-parse" fail inside parse_page, pages whose URL holds
# "poison-markdown" fail while their Markdown is built.
SITECUSTOMIZE = '''
import scrapy_grownup.page.dom as dom
import scrapy_grownup.output.markdown as markdown

_parse_tree, _to_markdown = dom.parse_tree, markdown.to_markdown


def parse_tree(body, *args, **kwargs):
    if b"poison-parse" in (body if isinstance(body, bytes) else body.encode()):
        raise RuntimeError("injected parse failure")
    return _parse_tree(body, *args, **kwargs)


def to_markdown(page, *args, **kwargs):
    if "poison-markdown" in (page.url or ""):
        raise RuntimeError("injected Markdown failure")
    return _to_markdown(page, *args, **kwargs)


dom.parse_tree, markdown.to_markdown = parse_tree, to_markdown
'''


@pytest.mark.slow
@pytest.mark.parametrize("model_process", [True, False])
def test_in_a_crawl_bad_pages_are_counted_drops_and_their_batch_mates_arrive(
        tmp_path, monkeypatch, model_process):
    """40 stories and 5 pages that fail (2 in parsing, 3 in their Markdown, both in their page
    workers) among pages whose forward passes share batches: 40 story items, 2
    ``parse_error`` and 3 ``article_error`` drops."""
    from example_project.news_site import serve
    from tests.crawl_support import run_crawl

    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(hooks))
    root = tmp_path / "site"
    root.mkdir()
    names = []
    for k in range(40):
        (root / f"story-{k}.html").write_text(article_page(k, variant=k % 3)[0])
        names.append(f"story-{k}.html")
    for k in range(3):
        (root / f"poison-markdown-{k}.html").write_text(article_page(k, variant=1)[0])
        names.insert(10 * k + 5, f"poison-markdown-{k}.html")
    for k in range(2):
        html = article_page(k, variant=2)[0].replace("</main>", "<p>poison-parse</p></main>")
        (root / f"bad-{k}.html").write_text(html)
        names.insert(15 * k + 8, f"bad-{k}.html")
    links = "".join(f'<a href="{name}">{name}</a> ' for name in names)
    (root / "index.html").write_text(f"<html><body><p>{links}</p></body></html>")
    server, base = serve(root)
    try:
        stats, items = run_crawl(tmp_path, f"{base}/index.html", spider="index", settings={
            "GROWNUP_MODEL_PROCESS": model_process, "GROWNUP_BATCH_WAIT_MS": 3000,
            "GROWNUP_OUTPUT_FORMAT": "markdown", "GROWNUP_WORKERS": 4})
    finally:
        server.shutdown()
    dropped = {k.split("/", 2)[2]: v for k, v in stats.items()
               if k.startswith("grownup/dropped/")}
    stories = {item["url"].rsplit("/", 1)[1] for item in items if "/story-" in item["url"]}
    assert stories == {f"story-{k}.html" for k in range(40)}, (dropped, stats)
    assert dropped.get("parse_error") == 2 and dropped.get("article_error") == 3, dropped
    assert "model_error" not in dropped
    assert stats["grownup/claimed"] == stats["grownup/items"] + sum(dropped.values()) == 46
    # the model server batched the pages of the four workers: the bad pages had batch-mates
    assert stats["grownup/batch_size_mean"] > 1
    for item in items:
        if "/story-" in item["url"]:
            number = int(item["url"].rsplit("-", 1)[1].split(".")[0])
            assert first_paragraph(number) in item["text"]
