"""Training, saving, loading and extracting with a tiny model on the sample news site."""

import json
import shutil

import numpy as np
import pytest

from example_project.news_site import STORIES, article_page
from scrapy_grownup.data.datasets import PageRecord
from scrapy_grownup.errors import GrownupError, ModelLoadError
from scrapy_grownup.training.loop import TrainConfig
from scrapy_grownup.training.trainer import train

TRAIN = [(i, v) for i in range(len(STORIES)) for v in range(3) if (i, v) != (5, 2)]


def records():
    out = []
    for i, v in TRAIN:
        html, gold = article_page(i, variant=v)
        out.append(PageRecord("sample", f"{i}-{v}", html.encode(), gold, None, "given"))
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    cfg = TrainConfig(out=str(out), preset="tiny", encoder="static", epochs=25, lr=1e-2,
                      batch_nodes=2000, patience=25, dev_fraction=0.2, workers=1, threads=1,
                      label_smoothing=0.0)
    result = train(cfg, records={"sample": records()})
    return out, result


def test_training_learns_and_logs(trained):
    out, result = trained
    history = [json.loads(line) for line in (out / "train.log").read_text().splitlines()]
    assert len(history) == 25 and history[-1]["loss"] < history[0]["loss"]
    assert result["best_dev_lcs_f1"] > 0.9
    assert (out / "best" / "model.safetensors").is_file()


def test_resume_continues_from_checkpoint(trained, tmp_path):
    out, _ = trained
    run = tmp_path / "run"
    shutil.copytree(out, run)
    cfg = TrainConfig(out=str(run), preset="tiny", encoder="static", epochs=27, lr=1e-2,
                      batch_nodes=2000, patience=25, dev_fraction=0.2, workers=1, threads=1,
                      label_smoothing=0.0)
    train(cfg, records={"sample": records()})
    epochs = [json.loads(line)["epoch"] for line in (run / "train.log").read_text().splitlines()]
    assert epochs == list(range(1, 28))  # 25 earlier epochs kept, two more appended


def test_extracts_unseen_page(trained):
    from scrapy_grownup import ArticleExtractor

    extractor = ArticleExtractor.from_pretrained(trained[0] / "best")
    html, gold = article_page(5, variant=2)  # a story/layout pair never trained on
    article = extractor.extract(html.encode(), url="http://example.test/story-5.html")
    assert article.title == STORIES[5][0]
    for paragraph in STORIES[5][1]:
        assert paragraph in article.text
    for boilerplate in ("All rights reserved", "We use cookies", "Most read"):
        assert boilerplate not in article.text
    assert article.url == "http://example.test/story-5.html" and article.page_type is None


def test_extract_batch_skips_bad_pages_in_place(trained):
    from scrapy_grownup import ArticleExtractor

    extractor = ArticleExtractor.from_pretrained(trained[0] / "best")
    html, _ = article_page(1, variant=0)
    items = [(html.encode(), "a"), (b"\x89PNG\r\n\x1a\n\x00\x00", "b"), (b"", "c"),
             (html, "d")]
    out = extractor.extract_batch(items, errors="skip")
    assert [a is None for a in out] == [False, True, True, False]
    assert out[0].text == out[3].text and out[0].url == "a"
    with pytest.raises(GrownupError):
        extractor.extract_batch(items)


def test_extract_batch_takes_bare_html(trained):
    """A list of HTML strings or bytes is a list of pages, not of tuples of characters."""
    from scrapy_grownup import ArticleExtractor

    extractor = ArticleExtractor.from_pretrained(trained[0] / "best")
    html, _ = article_page(1, variant=0)
    tupled = extractor.extract_batch([(html, None), (html.encode(), None)])
    bare = extractor.extract_batch([html, html.encode(), bytearray(html.encode())])
    assert len(bare) == 3 and tupled[0].text
    assert [a.text for a in bare] == [tupled[0].text, tupled[1].text, tupled[1].text]
    assert all(a.url is None for a in bare)


def test_loading_checks_files_and_versions(trained, tmp_path):
    from scrapy_grownup import ArticleExtractor

    model_dir = tmp_path / "model"
    shutil.copytree(trained[0] / "best", model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    config["config"]["encoder_version"] = "0000deadbeef"
    (model_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="encoder"):
        ArticleExtractor.from_pretrained(model_dir)
    shutil.copytree(trained[0] / "best", model_dir, dirs_exist_ok=True)
    weights = model_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ModelLoadError):
        ArticleExtractor.from_pretrained(model_dir)
    with pytest.raises(ModelLoadError, match="no model"):
        ArticleExtractor.from_pretrained(tmp_path / "missing")


def test_cli_extract(trained, tmp_path, capsys):
    from scrapy_grownup.cli.main import main

    pages = tmp_path / "pages"
    pages.mkdir()
    for i in range(3):
        (pages / f"p{i}.html").write_text(article_page(i, variant=1)[0])
    (pages / "broken.html").write_bytes(b"%PDF-1.4 not html")
    out = tmp_path / "out.jsonl"
    assert main(["extract", str(pages), "-o", str(out), "--model",
                 str(trained[0] / "best")]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["path"].rsplit("/", 1)[1] for r in rows) == ["p0.html", "p1.html", "p2.html"]
    assert STORIES[0][1][0] in rows[0]["text"]
    assert json.loads(capsys.readouterr().err.strip().splitlines()[-1]) == \
        {"read": 4, "extracted": 3, "skipped": {"not_html": 1},
         "skipped_pages": {str(pages / "broken.html"): "not_html"}}


def test_refine_keeps_largest_group():
    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.decisions.refine import largest_content_group

    filler = " ".join(["menu"] * 50)
    page = parse_page(f"<html><body><div><p>{'word ' * 30}</p><p>{'more ' * 20}</p></div>"
                      f"<div>{filler}</div><p>teaser text</p></body></html>".encode(),
                      positions=False)
    keep = np.array([t == "p" for t in page.tags])
    refined = largest_content_group(page, keep, max_gap_words=40)
    kept = [page.node_text[i][:4] for i in np.nonzero(refined)[0]]
    assert kept == ["word", "more"]


def test_refine_with_textless_content_nodes():
    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.decisions.refine import largest_content_group

    page = parse_page(b"<html><body><div><p>text</p></div></body></html>", positions=False)
    keep = np.array([t == "div" for t in page.tags])  # kept, but owns no text
    assert (largest_content_group(page, keep) == keep).all()
    empty = np.zeros(page.num_nodes, dtype=bool)
    assert not largest_content_group(page, empty).any()


@pytest.mark.parametrize("model,options", [("fast", {}), ("fast", {"rescore": False}),
                                           ("tiny", {})])
def test_page_features_are_exactly_the_page_features_the_extractor_reads(trained, model,
                                                                          options):
    """A crawl's workers compute ``page_features`` beside the parse: one the extractor reads
    but does not name would be computed again in the model's process, one it names but does
    not read would cost the workers for nothing."""
    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.page.dom import parse_page

    extractor = ArticleExtractor.from_pretrained(trained[0] / "best" if model == "tiny"
                                                 else model, device="cpu", **options)
    html, _ = article_page(5, variant=2)
    page = parse_page(html.encode(), url="http://site.test/story.html")
    extractor.articles([page])
    assert set(extractor.page_features) == {"layout", "signals"} & set(vars(page))
    if model == "fast":
        assert extractor.page_features == ("layout", "signals")
