"""``Article.confidence`` (issue 54): the shipped confidence models load (numpy arrays, no
pickle) and give a number in [0, 1] that ranks a real article above a page of boilerplate, at a
tiny cost per page and without changing the text; ``grownup lab fit-confidence`` runs end to end
on a few pages; ``GROWNUP_MIN_CONFIDENCE`` is checked, and drops pages in a crawl as counted
``low_confidence`` drops."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from scrapy_grownup.decisions.confidence import (
    CONFIDENCE_FEATURE_NAMES,
    CONFIDENCE_FILE,
    ConfidenceModel,
    confidence_features,
    load_confidence,
)
from tests.data_support import skip_missing_data

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "scrapy_grownup" / "assets" / "models"
GOLDEN = ROOT / "tests" / "golden"
# a page of nothing but a site's chrome: menu, consent banner, footer
BOILERPLATE = b"""<html><head><title>Example Shop</title></head><body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/about">About us</a></li>
<li><a href="/contact">Contact</a></li><li><a href="/shop">Shop</a></li></ul></nav>
<div class="cookie-banner">We use cookies to improve your experience on our site.
<button>Accept all</button> <button>Settings</button></div>
<footer><p>Copyright 2025 Example Ltd. All rights reserved.</p><ul>
<li><a href="/privacy">Privacy policy</a></li><li><a href="/terms">Terms of use</a></li>
<li><a href="/imprint">Imprint</a></li></ul></footer></body></html>"""


@pytest.fixture(scope="module")
def fast():
    from scrapy_grownup import ArticleExtractor

    return ArticleExtractor.from_pretrained("fast", device="cpu")


def shipped():
    return [d for d in sorted(MODELS.iterdir()) if (d / CONFIDENCE_FILE).is_file()]


def test_fast_ships_a_confidence_model_of_plain_arrays():
    assert (MODELS / "fast" / CONFIDENCE_FILE).is_file()
    for directory in shipped():
        with np.load(directory / CONFIDENCE_FILE, allow_pickle=False) as f:
            assert all(f[name].dtype != object for name in f.files)
        model = load_confidence(directory)
        assert model.feature_names == CONFIDENCE_FEATURE_NAMES
        assert np.all(np.diff(model.knots_x) >= 0) and np.all(np.diff(model.knots_y) >= 0)
        assert 0 <= model.knots_y.min() and model.knots_y.max() <= 1
        # fitted on out-of-fold pages of the site-grouped folds (hundreds of pages)
        assert json.loads(model.info)["pages"] > 500


def test_confidence_is_in_0_1_and_ranks_an_article_above_boilerplate(fast):
    assert fast.confidence is not None
    confidences = {}
    for path in sorted(GOLDEN.glob("*.html")):
        article = fast.extract(path.read_bytes(), url=f"https://example.com/{path.stem}")
        assert isinstance(article.confidence, float) and 0.0 <= article.confidence <= 1.0
        assert article.to_dict()["confidence"] == article.confidence
        confidences[path.stem] = article.confidence
    chrome = fast.extract(BOILERPLATE, url="https://shop.example.com/")
    empty = fast.extract(b"<html><body><div></div></body></html>", url="https://example.com/")
    assert empty.text == "" and empty.confidence == 0.0  # no text is never the main content
    assert 0.0 <= chrome.confidence < 0.5
    # a short real news story (headline, byline, four paragraphs) reads as one
    assert confidences["news_jsonld"] > 0.6
    assert confidences["news_jsonld"] > chrome.confidence + 0.3


def test_confidence_costs_well_under_a_millisecond_and_leaves_the_text(fast):
    from scrapy_grownup.output.assembly import rescored_article
    from scrapy_grownup.page.dom import parse_page

    pages = [parse_page(p.read_bytes(), url="https://example.com/")
             for p in sorted(GOLDEN.glob("*.html"))]
    outputs = fast.predict(pages)
    times = []
    for page, o in zip(pages, outputs):
        choice = rescored_article(page, o["content"], fast.rescorer, fast.threshold,
                                  refine=fast.refine, adaptive=fast.adaptive)
        start = time.perf_counter()
        for _ in range(20):
            fast.confidence.page_confidence(page, choice, o["content"])
        times.append((time.perf_counter() - start) / 20)
        with_it = fast.article(page, o["content"], outputs=o)
        model, fast.confidence = fast.confidence, None
        try:
            without = fast.article(page, o["content"], outputs=o)
        finally:
            fast.confidence = model
        assert without.confidence is None
        assert (with_it.text, with_it.markdown) == (without.text, without.markdown)
    assert float(np.median(times)) < 0.001


def test_a_model_without_a_confidence_file_gives_none_and_a_bad_file_is_a_load_error(tmp_path):
    from scrapy_grownup.errors import ModelLoadError

    assert load_confidence(tmp_path) is None
    width = len(CONFIDENCE_FEATURE_NAMES)
    model = ConfidenceModel(np.zeros(width), np.ones(width), np.r_[1.0, np.zeros(width - 1)],
                            0.0, [-1.0, 0.0, 1.0], [0.1, 0.5, 0.9], info="{}")
    model.save(tmp_path / CONFIDENCE_FILE)
    loaded = load_confidence(tmp_path)
    X = np.zeros((3, width))
    X[:, 0] = [0.0, 0.5, 2.0]  # log_kept_chars: nothing kept, some, much
    assert loaded.predict(X).tolist() == [0.0, pytest.approx(0.7), 0.9]
    with np.load(tmp_path / CONFIDENCE_FILE, allow_pickle=False) as f:
        arrays = dict(f)
    arrays["feature_names"] = np.array(list(CONFIDENCE_FEATURE_NAMES[:-1]) + ["other"])
    np.savez(tmp_path / CONFIDENCE_FILE, **arrays)
    with pytest.raises(ModelLoadError, match="refit it with grownup lab fit-confidence"):
        load_confidence(tmp_path)


def test_features_of_an_article_that_keeps_everything_or_nothing():
    from scrapy_grownup.page.dom import parse_page

    page = parse_page((GOLDEN / "news_jsonld.html").read_bytes(), url="https://example.com/")
    owners = page.text_lengths() > 0
    probs = np.where(owners, 0.9, 0.0)
    names = CONFIDENCE_FEATURE_NAMES
    everything = dict(zip(names, confidence_features(page, owners, probs, probs, 0.5,
                                                     "rescorer")))
    assert everything["kept_share"] == pytest.approx(1.0)
    assert everything["log_kept_runs"] == pytest.approx(np.log1p(1) / 5)  # one run
    assert everything["kept_mean"] == pytest.approx(0.9)
    assert everything["source_rescorer"] == 1.0 and everything["source_none"] == 0.0
    nothing = dict(zip(names, confidence_features(page, np.zeros_like(owners), probs, probs,
                                                  0.5, "none")))
    assert nothing["log_kept_chars"] == 0.0 and nothing["kept_share"] == 0.0
    assert nothing["dropped_mean"] == pytest.approx(0.9) and nothing["source_none"] == 1.0


def test_fit_confidence_runs_end_to_end_on_a_few_pages(tmp_path, capsys):
    """Two folds of a few pages each, the shipped model standing in for both fold models (a
    plumbing check: its figures mean nothing), a nested rescorer of a few trees per fold."""
    from scrapy_grownup.cli.main import main
    from scrapy_grownup.data import datasets
    from scrapy_grownup.training.crosssite import EVAL_DATASETS

    try:
        datasets.load("fundus", limit=1)
    except datasets.DatasetNotAvailable:
        skip_missing_data("modern datasets")
    for fold in ("fold0", "fold1"):
        (tmp_path / "cv" / fold).mkdir(parents=True)
        (tmp_path / "cv" / fold / "model").symlink_to(MODELS / "fast")
    out = tmp_path / "model"
    assert main(["lab", "fit-confidence", "--cv-dir", str(tmp_path / "cv"), "--folds", "2",
                 "--limit", "6", "--train-datasets", "", "--rescorer-trees", "5",
                 "--cache", str(tmp_path / "cache"), "--model", "fast", "--out", str(out),
                 "--pages", str(tmp_path / "pages.jsonl"),
                 "--json", str(tmp_path / "result.json")]) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    oof = result["out_of_fold"]
    assert oof["pages"] >= 20 and sum(d["pages"] for d in oof["deciles"]) == oof["pages"]
    assert all(0 <= d["predicted"] <= 1 and 0 <= d["measured"] <= 1 for d in oof["deciles"])
    assert "mean F1" in capsys.readouterr().out
    rows = [json.loads(line) for line in (tmp_path / "pages.jsonl").read_text().splitlines()]
    assert {r["dataset"] for r in rows} <= set(EVAL_DATASETS)
    assert all(0 <= r["confidence"] <= 1 and set(r["features"]) == set(CONFIDENCE_FEATURE_NAMES)
               for r in rows)
    assert load_confidence(out).feature_names == CONFIDENCE_FEATURE_NAMES
    assert (out / "config.json").is_file()  # a copy of the model with the file added


# -- GROWNUP_MIN_CONFIDENCE -------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [(None, None), ("none", None), ("", None),
                                             (0, None), ("0", None), (0.5, 0.5), ("0.25", 0.25),
                                             (1, 1.0)])
def test_min_confidence_setting_values(value, expected):
    from scrapy_grownup.crawl.settings import GrownupSettings

    assert GrownupSettings.from_settings({"GROWNUP_MIN_CONFIDENCE": value}).min_confidence \
        == expected


@pytest.mark.parametrize("value, problem", [("high", "not a number"), (1.5, "out of range"),
                                            (-0.1, "out of range"), (True, "not a number"),
                                            (float("nan"), "not a number")])
def test_min_confidence_setting_refuses_other_values(value, problem):
    from scrapy_grownup.crawl.settings import GrownupSettings
    from scrapy_grownup.errors import SettingsError

    with pytest.raises(SettingsError, match=f"GROWNUP_MIN_CONFIDENCE = .*: {problem}; allowed: "
                                            "a number between 0 and 1"):
        GrownupSettings.from_settings({"GROWNUP_MIN_CONFIDENCE": value})


@pytest.mark.slow
def test_min_confidence_drops_pages_below_it_in_a_crawl(tmp_path, fast):
    """A site of stories, a chrome-only page and a listing: the pages whose confidence (as the
    same model computes it here) is below the setting are ``low_confidence`` drops, the others
    items carrying their confidence."""
    from example_project.news_site import article_page, index_page, serve
    from tests.crawl_support import run_crawl

    root = tmp_path / "site"
    root.mkdir()
    pages = {f"story-{i}.html": article_page(i, variant=i % 3)[0].encode() for i in range(4)}
    pages["shop.html"] = BOILERPLATE
    pages["list.html"] = index_page(4).encode()
    for name, html in pages.items():
        (root / name).write_bytes(html)
    links = " ".join(f'<a href="{name}">{name}</a>' for name in pages)
    pages["index.html"] = f"<html><body>{links}</body></html>".encode()
    (root / "index.html").write_bytes(pages["index.html"])
    server, base = serve(root)
    confidence = {}
    for name, html in pages.items():
        article = fast.extract(html, url=f"{base}/{name}", content_type="text/html")
        if article.text.strip():  # an empty article is a no_content drop first
            confidence[f"{base}/{name}"] = article.confidence
    values = sorted(set(confidence.values()))
    assert len(values) >= 2, confidence
    cut = round((values[0] + values[-1]) / 2, 4)
    try:
        stats, items = run_crawl(tmp_path, f"{base}/index.html", spider="index",
                                 settings={"GROWNUP_MIN_CONFIDENCE": cut})
    finally:
        server.shutdown()
    kept = {item["url"]: item["confidence"] for item in items}
    assert kept == pytest.approx({url: c for url, c in confidence.items() if c >= cut})
    low = sum(c < cut for c in confidence.values())
    assert stats.get("grownup/dropped/low_confidence", 0) == low > 0
