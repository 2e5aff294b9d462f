"""The block rescorer: its block features on hand-made pages, its numpy trees against
scikit-learn's, its file, and how the extractor uses the one ``fast`` ships."""

from __future__ import annotations

import argparse
import shutil

import numpy as np
import pytest

from scrapy_grownup.graph.attribute_cues import CUE_NAMES, attribute_cues
from scrapy_grownup.decisions.rescorer import (BLOCK_FEATURE_NAMES, BLOCK_FEATURE_VERSION,
                                           RESCORER_FILE, BlockRescorer, block_features,
                                           spread_to_nodes)
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.errors import ModelLoadError
from scrapy_grownup.extractor import MODELS_DIR
from scrapy_grownup.graph.signals import SIGNAL_VERSION
from scrapy_grownup.decisions.refine import ADAPTIVE_BAND, block_of

PARAGRAPH = ("The council met on Tuesday to decide the future of the old bridge, which has "
             "carried traffic over the river for more than a century.")
PAGE = f"""<html><body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/news">News</a></li></ul></nav>
<article>
  <h1>Bridge to close</h1>
  <p>{PARAGRAPH} Read the <a href="/report">engineers' report</a> for details.</p>
  <p>Subscribe to our daily newsletter for more stories like this one.</p>
  <p>{PARAGRAPH}</p>
  <p>Subscribe to our daily newsletter for more stories like this one.</p>
</article>
<footer><p>All rights reserved.</p></footer>
</body></html>"""
COLUMN = {name: k for k, name in enumerate(BLOCK_FEATURE_NAMES)}


def noise_columns(rows: int) -> np.ndarray:
    """A rescorer table of random columns on a grid of 100 values, ``score`` in 0.05-1.0.

    On the grid scikit-learn bins each column by its distinct values; continuous columns
    with block weights take its weighted-quantile binning, ~0.1 s a column (318 of them) in
    scikit-learn 1.9, which made each of these fits half a minute."""
    rng = np.random.default_rng(0)
    X = (rng.integers(0, 100, (rows, len(BLOCK_FEATURE_NAMES))) / 100).astype(np.float32)
    X[:, COLUMN["score"]] = 0.05 + 0.95 * X[:, COLUMN["score"]]
    return X


@pytest.fixture(scope="module")
def page():
    return parse_page(PAGE, url="https://news.test/bridge")


def node_of(page, tag, text):
    return next(i for i, (t, own) in enumerate(zip(page.tags, page.node_text))
                if t == tag and text in own)


def test_block_features_describe_each_text_block_once(page):
    probs = np.linspace(0.0, 1.0, page.num_nodes)
    roots, X = block_features(page, probs)
    lengths = page.text_lengths()
    block = block_of(page)
    assert list(roots) == sorted(set(block[lengths > 0].tolist()))  # reading order
    assert X.shape == (len(roots), len(BLOCK_FEATURE_NAMES)) and np.isfinite(X).all()
    link = node_of(page, "a", "engineers' report")
    paragraph = node_of(page, "p", "Read the")
    assert link not in roots and block[link] == paragraph  # the link is judged with its sentence
    row = list(roots).index(paragraph)
    owners = [i for i in range(page.num_nodes) if block[i] == paragraph and lengths[i] > 0]
    expected = sum(probs[i] * lengths[i] for i in owners) / sum(lengths[i] for i in owners)
    assert X[row, COLUMN["score"]] == pytest.approx(expected, rel=1e-6)
    assert X[row, COLUMN["max_score"]] == pytest.approx(max(probs[i] for i in owners), rel=1e-6)
    # the newsletter box repeats, the paragraph does not; a tag column is one-hot
    newsletter = [list(roots).index(i) for i in roots if "Subscribe" in page.node_text[i]]
    assert len(newsletter) == 2 and (X[newsletter, COLUMN["log_repeats"]] > 0).all()
    assert X[row, COLUMN["log_repeats"]] == 0
    tags = X[:, COLUMN["tag_p"]:COLUMN["tag_other"] + 1]
    assert X[row, COLUMN["tag_p"]] == 1 and tags.sum(axis=1).tolist() == [1.0] * len(roots)
    # the page's signals, the same on every row
    signals = X[:, COLUMN["page_signal_0"]:COLUMN["page_signal_0"] + len(page.signals)]
    np.testing.assert_array_equal(signals, np.broadcast_to(page.signals, signals.shape))


CUED = """<html><body>
<header id="siteHeader"><p class="headline-kicker">Local news from the valley</p></header>
<div class="article__body"><p>The ferry runs again from Monday after a month of repairs.</p>
  <div class="related-posts"><p>Bus lines change in spring as the new timetable starts.</p></div>
  <p class="add-text">Tickets are sold on board and at the harbour office.</p></div>
<div id="cookieConsent"><p>We use cookies to improve the site you are reading now.</p></div>
</body></html>"""


def test_class_and_id_words_flag_a_block_and_everything_inside_it():
    page = parse_page(CUED)
    cues = attribute_cues(page)
    assert cues.shape == (page.num_nodes, len(CUE_NAMES))

    def own(text):
        return {n for n, on in zip(CUE_NAMES, cues[node_of(page, "p", text)]) if on}

    assert own("Local news") == {"metadata"}  # "headline" is not "header": whole words only
    assert own("Tickets") == {"body"}  # "add" is not an advert
    assert own("The ferry") == set()  # its class is on the parent
    roots, X = block_features(page, np.full(page.num_nodes, 0.5))
    row = {page.node_text[r][:8]: k for k, r in enumerate(roots.tolist())}

    def inside(start, name):
        return X[row[start], COLUMN[f"inside_cue_{name}"]] == 1

    assert inside("The ferr", "body") and not inside("The ferr", "related")
    assert inside("Bus line", "related") and inside("Bus line", "body")  # nested boxes add up
    assert inside("We use c", "consent") and inside("Local ne", "navigation")
    assert X[row["Tickets "], COLUMN["has_class_or_id"]] == 1
    assert X[row["The ferr"], COLUMN["has_class_or_id"]] == 0
    assert X[row["Bus line"], COLUMN["cue_related"]] == 0  # the box, not the paragraph, is named


def test_block_cue_columns_are_attribute_cues_of_the_root_and_its_ancestors():
    # the rescorer reads the cues of the roots and their ancestors only, as bits
    from scrapy_grownup.decisions import page_memo
    from scrapy_grownup.page.tree import inherit

    for html in (CUED, PAGE):
        page = parse_page(html)
        roots, X = block_features(page, np.full(page.num_nodes, 0.5))
        cues = attribute_cues(page)
        inside = inherit(cues, page_memo.parent64(page), page_memo.levels(page))
        first = COLUMN[f"cue_{CUE_NAMES[0]}"]
        k = len(CUE_NAMES)
        assert np.array_equal(X[:, first:first + k], cues[roots])
        assert np.array_equal(X[:, first + k:first + 2 * k], inside[roots])


def test_block_features_place_blocks_against_the_main_container(page):
    probs = np.zeros(page.num_nodes)
    article = page.tags.index("article")
    inside = [i for i in range(page.num_nodes) if page.depth[i] > page.depth[article]
              and i > article and page.tags[i] in ("p", "a", "h1")
              and i < page.tags.index("footer")]
    probs[inside] = 0.9
    roots, X = block_features(page, probs)
    for row, root in enumerate(roots.tolist()):
        assert X[row, COLUMN["in_container"]] == (1.0 if root in inside else 0.0), \
            page.node_text[root]
    footer = list(roots).index(node_of(page, "p", "All rights reserved"))
    assert X[footer, COLUMN["score_minus_cut"]] < 0


def test_spread_to_nodes_gives_every_text_node_its_block_probability(page):
    probs = np.full(page.num_nodes, 0.3)
    roots, _ = block_features(page, probs)
    block_probs = np.linspace(0.1, 0.9, len(roots))
    out = spread_to_nodes(page, probs, roots, block_probs)
    lengths = page.text_lengths()
    block = block_of(page)
    by_root = dict(zip(roots.tolist(), block_probs))
    for i in range(page.num_nodes):
        assert out[i] == pytest.approx(by_root[block[i]] if lengths[i] > 0 else 0.3)


def fitted_trees(seed=0):
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(seed)
    X = rng.integers(0, 5, size=(3000, 6)).astype(np.float32)  # ties sit on the thresholds
    X[:, 5] = rng.random(3000)
    y = (X[:, 0] + X[:, 1] * X[:, 5] + rng.normal(0, 0.5, 3000)) > 3
    model = HistGradientBoostingClassifier(max_iter=40, max_depth=5, max_leaf_nodes=15,
                                           random_state=0).fit(X, y)
    return model, X


def test_numpy_trees_give_scikit_learns_probabilities():
    model, X = fitted_trees()
    rescorer = BlockRescorer.from_sklearn(model)
    assert rescorer.num_trees == 40 and rescorer.trees.depth <= 5
    np.testing.assert_allclose(rescorer.predict(X), model.predict_proba(X)[:, 1], atol=1e-12)
    assert rescorer.predict(np.zeros((0, 6))).shape == (0,)


def test_the_file_round_trips_and_refuses_other_features(tmp_path):
    model, X = fitted_trees(1)
    rescorer = BlockRescorer.from_sklearn(model, cut=0.55, feature_threshold=0.35,
                                          container=False, band=0.3, cut_weight="block-chars")
    path = tmp_path / RESCORER_FILE
    rescorer.save(path)
    loaded = BlockRescorer.load(path)
    assert (loaded.cut, loaded.feature_threshold) == (0.55, 0.35)
    assert loaded.decisions == {"container": False, "band": 0.3, "cut_weight": "block-chars"}
    np.testing.assert_allclose(loaded.predict(X), rescorer.predict(X), atol=1e-6)
    with np.load(path) as f:
        fields = dict(f)
    # a file from before the decisions were stored keeps the content model's
    older = {k: v for k, v in fields.items() if k not in ("container", "band", "cut_weight")}
    np.savez(path, **older)
    assert BlockRescorer.load(path).decisions == {"container": True, "band": ADAPTIVE_BAND,
                                                  "cut_weight": "log-nodes"}
    with pytest.raises(ValueError, match="cut_weight"):
        BlockRescorer.from_sklearn(model, cut_weight="characters")
    fields["version"] = np.array("0")
    np.savez(path, **fields)
    with pytest.raises(ValueError, match="block features version '0'"):
        BlockRescorer.load(path)


def test_fast_ships_a_rescorer_and_uses_it_unless_told_not_to(monkeypatch):
    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.output import assembly as assembly_module

    html = PAGE.replace("<p>All", "<p>Copyright 2026. All")
    plain = ArticleExtractor.from_pretrained("fast", rescore=False)
    assert plain.rescorer is None and plain.threshold == 0.4 and plain.adaptive
    rescored = ArticleExtractor.from_pretrained("fast")
    assert rescored.rescorer is not None and rescored.adaptive
    assert rescored.threshold == rescored.rescorer.cut
    assert rescored.rescorer.feature_threshold == plain.threshold
    decided = []
    real_mask = assembly_module.content_mask  # what article_mask calls
    monkeypatch.setattr(assembly_module, "content_mask",
                        lambda *a, **kw: decided.append(kw) or real_mask(*a, **kw))
    article = rescored.extract(html, url="https://news.test/bridge")
    assert PARAGRAPH in article.text and "engineers' report for details" in article.text
    # the decisions measured for rescored probabilities, not the content model's
    assert {k: decided[-1][k] for k in ("container", "band", "cut_weight")} \
        == rescored.rescorer.decisions
    assert "All rights reserved" not in article.text
    given = ArticleExtractor.from_pretrained("fast", threshold=0.7)
    assert given.threshold == 0.7 and not given.adaptive and given.rescorer is not None


def test_a_rescorer_that_would_empty_a_page_gives_way_to_the_content_model(monkeypatch):
    """Where the rescored blocks keep no text but the content model found some, the article is
    the content model's own (its threshold and decisions), never an empty one; where the
    rescorer keeps something, its article stands."""
    from scrapy_grownup import ArticleExtractor

    plain = ArticleExtractor.from_pretrained("fast", rescore=False)
    rescored = ArticleExtractor.from_pretrained("fast")
    own = plain.extract(PAGE, url="https://news.test/bridge").text
    assert PARAGRAPH in own
    monkeypatch.setattr(rescored.rescorer, "rescore",
                        lambda page, probs, layout=None: np.zeros_like(probs))
    assert rescored.extract(PAGE, url="https://news.test/bridge").text == own
    # one block left above the cut: the rescorer's article, not the fallback
    def one_block(page, probs, layout=None):
        out = np.zeros_like(probs)
        out[[i for i, t in enumerate(page.node_text) if "Read the" in t]] = 0.99
        return out

    monkeypatch.setattr(rescored.rescorer, "rescore", one_block)
    text = rescored.extract(PAGE, url="https://news.test/bridge").text
    assert "engineers' report for details" in text and text != own


def test_a_model_without_a_rescorer_loads_plain_and_refuses_rescore_true(tmp_path):
    from scrapy_grownup import ArticleExtractor

    model = tmp_path / "plain"
    shutil.copytree(MODELS_DIR / "fast", model)
    (model / RESCORER_FILE).unlink()
    assert ArticleExtractor.from_pretrained(model).rescorer is None
    with pytest.raises(ModelLoadError, match="no block rescorer"):
        ArticleExtractor.from_pretrained(model, rescore=True)
    (model / RESCORER_FILE).write_bytes(b"not a numpy file")
    with pytest.raises(ModelLoadError, match=RESCORER_FILE):
        ArticleExtractor.from_pretrained(model)


def test_fit_rescorer_without_a_feature_group_never_splits_on_it():
    """``grownup lab fit-rescorer --without cues``: the ablation's trees cannot read the group."""
    from types import SimpleNamespace

    from scrapy_grownup.training.rescorer import ablated_columns, add_arguments, fit

    X = noise_columns(2000)
    related = np.random.default_rng(1).random(2000) < 0.3
    X[:, COLUMN["cue_related"]] = related
    labels = ((X[:, COLUMN["score"]] > 0.5) & ~related).astype(np.float64)
    pages = [SimpleNamespace(page=object(), roots=np.arange(200), features=X[k:k + 200],
                             labels=labels[k:k + 200], record=None)
             for k in range(0, 2000, 200)]
    parser = argparse.ArgumentParser()
    add_arguments(parser)  # the command's own defaults, so a new option cannot be missed
    args = parser.parse_args(["--cv-dir", "unused", "--trees", "20", "--learning-rate", "0.1",
                              "--leaves", "15", "--depth", "4"])

    def split_columns(rescorer):
        return set(rescorer.trees.feature[np.isfinite(rescorer.trees.threshold)].tolist())

    cues = set(ablated_columns(["cues"]).tolist())
    assert COLUMN["cue_related"] in cues and COLUMN["score"] not in cues
    assert COLUMN["cue_related"] in split_columns(fit(pages, args))
    args.without = ["cues"]
    assert not split_columns(fit(pages, args)) & cues
    assert len(ablated_columns(["signals"])) == sum(
        name.startswith("page_signal_") for name in BLOCK_FEATURE_NAMES)


def test_fit_rescorer_max_features_lets_each_split_choose_from_a_share_of_the_columns(capsys):
    """``--max-features 0.02``: each split draws about six of the 318 columns, so most trees'
    first split cannot use the one column that decides the label; with all columns every tree
    splits on it first. A share outside (0, 1] is one line."""
    from types import SimpleNamespace

    from scrapy_grownup.cli.main import main
    from scrapy_grownup.training.rescorer import add_arguments, fit

    X = noise_columns(2000)
    labels = (X[:, COLUMN["score"]] > 0.5).astype(np.float64)
    pages = [SimpleNamespace(page=object(), roots=np.arange(200), features=X[k:k + 200],
                             labels=labels[k:k + 200], record=None)
             for k in range(0, 2000, 200)]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--cv-dir", "unused", "--trees", "30", "--depth", "3"])
    assert args.max_features == 1.0

    def first_splits(rescorer):
        return rescorer.trees.feature[rescorer.trees.roots]

    assert (first_splits(fit(pages, args)) == COLUMN["score"]).all()
    args.max_features = 0.02
    subsampled = fit(pages, args)
    assert (first_splits(subsampled) == COLUMN["score"]).mean() < 0.5
    # the numpy trees still separate the classes: later splits reach the column
    assert ((subsampled.predict(X) > 0.5) == (labels > 0.5)).mean() > 0.9
    for bad in ("0", "1.5", "half"):
        with pytest.raises(SystemExit) as exit_info:
            main(["lab", "fit-rescorer", "--cv-dir", "unused", "--max-features", bad])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.endswith(f"argument --max-features: must be a number above 0 and at most 1, "
                            f"not {bad!r}")


def test_fit_rescorer_block_weights_balance_pages_and_respect_the_floor():
    """``--block-weight page-log-chars``: every page's blocks weigh the same in total, so a page of
    many short blocks does not outweigh an article; ``--floor``: blocks under it are not fitted
    and the rescorer stores the floor it was fitted with."""
    from types import SimpleNamespace

    from scrapy_grownup.training.rescorer import add_arguments, block_weights, fit

    def page(chars, scores):
        X = np.zeros((len(chars), len(BLOCK_FEATURE_NAMES)), np.float32)
        X[:, COLUMN["log_chars"]] = np.log1p(chars) / 10
        X[:, COLUMN["score"]] = scores
        return SimpleNamespace(page=object(), roots=np.arange(len(chars)), features=X,
                               labels=(np.asarray(scores) > 0.5).astype(float), record=None)

    menu = page([12.0] * 400, [0.2] * 400)
    article = page([600.0] * 20, [0.9] * 20)
    log = block_weights([menu, article], "log-chars")
    assert log[:400].sum() > 5 * log[400:].sum()  # the menu page outweighs the article
    balanced = block_weights([menu, article], "page-log-chars")
    assert balanced[:400].sum() == pytest.approx(balanced[400:].sum())
    chars = block_weights([page([100.0, 300.0], [0.9, 0.9])], "page-chars")
    assert chars[1] == pytest.approx(3 * chars[0], rel=0.01)
    with pytest.raises(ValueError, match="block weight 'chars'"):
        block_weights([menu], "chars")

    rng = np.random.default_rng(0)
    pages = [page(rng.uniform(5, 500, 50), rng.uniform(0.0, 1.0, 50)) for _ in range(20)]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--cv-dir", "unused", "--trees", "5", "--floor", "0.3",
                              "--block-weight", "page-log-chars"])
    rescorer = fit(pages, args)
    assert rescorer.floor == 0.3
    # what the trees were fitted on: no block under the floor, so no split below it on "score"
    score_splits = rescorer.trees.threshold[(rescorer.trees.feature == COLUMN["score"])
                                            & np.isfinite(rescorer.trees.threshold)]
    assert len(score_splits) and score_splits.min() >= 0.3


def test_a_rescorer_of_older_block_features_is_refused_with_one_line_saying_to_refit(tmp_path):
    from scrapy_grownup import ArticleExtractor

    model = tmp_path / "fast"
    shutil.copytree(MODELS_DIR / "fast", model)
    with np.load(model / "block_rescorer.npz", allow_pickle=False) as f:
        fields = {k: f[k] for k in f.files}
    fields["version"] = np.array("2/1")   # what the previous release wrote
    np.savez(model / "block_rescorer.npz", **fields)
    with pytest.raises(ModelLoadError) as info:
        ArticleExtractor.from_pretrained(model)
    message = str(info.value)
    assert "\n" not in message and message.count(str(model / "block_rescorer.npz")) == 1
    assert "version '2/1'" in message and "refit it with grownup lab fit-rescorer" in message
    # without the rescorer the model still loads
    assert ArticleExtractor.from_pretrained(model, rescore=False) is not None
    # same version, other columns (a development build's file): the line says where
    fields["version"] = np.array(f"{BLOCK_FEATURE_VERSION}/{SIGNAL_VERSION}")
    for names, where in ((list(BLOCK_FEATURE_NAMES) + ["repeat_group_size"],
                          f"the first {len(BLOCK_FEATURE_NAMES)} the same, then "
                          "'repeat_group_size' on one side only"),
                         (["scores"] + list(BLOCK_FEATURE_NAMES[1:]),
                          "column 0 'scores' where this package has 'score'")):
        fields["feature_names"] = np.array(names)
        np.savez(model / "block_rescorer.npz", **fields)
        with pytest.raises(ModelLoadError) as info:
            ArticleExtractor.from_pretrained(model)
        message = str(info.value)
        assert "\n" not in message and where in message, message
        assert f"fitted on {len(names)} block features" in message
        assert "refit it with grownup lab fit-rescorer" in message


# -- fit-rescorer's score cache (issue 55) -------------------------------------------------------
class _RunsCodeWhenUnpickled:
    """What a pickle cache could hold: unpickling it calls ``Path.touch(marker)``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        from pathlib import Path

        return (Path.touch, (Path(self.marker),))


def test_fit_rescorer_caches_scores_as_arrays_it_reads_without_pickle(tmp_path, monkeypatch):
    """The fold scores were cached with ``pickle``, which runs whatever code a cache file
    names: now an ``.npz`` of arrays, read with ``allow_pickle=False``, reused on the next run,
    and a file holding anything else is ignored (the pages are scored again) and runs nothing."""
    import pickle
    from pathlib import Path

    from scrapy_grownup.data import datasets as D
    from scrapy_grownup.extractor import ArticleExtractor
    from scrapy_grownup.training.crosssite import FoldPlan, record_key
    from scrapy_grownup.training.rescorer import load_score_cache, scored_pages

    golden = Path(__file__).parents[1] / "golden"
    records = [D.PageRecord("golden", p.stem, p.read_bytes(), None, None, "all")
               for p in sorted(golden.glob("article_*.html"))[:2]]
    plan = FoldPlan("fold9", records, set())
    cache = tmp_path / "scores"
    first = scored_pages(plan, MODELS_DIR / "fast", cache, 0.4, "cpu")
    files = sorted(cache.iterdir())
    assert [f.suffix for f in files] == [".npz"], files
    with np.load(files[0], allow_pickle=False) as data:  # arrays only
        assert sorted(data["keys"].tolist()) == sorted(record_key(r) for r in records)
    cached = load_score_cache(files[0])
    for page in first:
        np.testing.assert_array_equal(cached[record_key(page.record)], page.probs)

    def no_scoring(self, pages):
        raise AssertionError("the cached scores were not used")

    monkeypatch.setattr(ArticleExtractor, "score", no_scoring)
    again = scored_pages(plan, MODELS_DIR / "fast", cache, 0.4, "cpu")
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.probs, b.probs)

    marker = tmp_path / "code-ran"
    files[0].write_bytes(pickle.dumps({"x": _RunsCodeWhenUnpickled(marker)}))
    assert load_score_cache(files[0]) == {} and not marker.exists()


def test_fit_rescorer_zero_positions_arm_scores_pages_without_their_positions(tmp_path):
    """``--zero-positions`` (what dropping the Laplacian positions costs): the model reads
    all-zero positions, and the arm's scores are cached apart from the full model's."""
    from pathlib import Path

    from scrapy_grownup.data import datasets as D
    from scrapy_grownup.extractor import ArticleExtractor
    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.training.crosssite import FoldPlan
    from scrapy_grownup.training.rescorer import scored_pages

    golden = Path(__file__).parents[1] / "golden"
    records = [D.PageRecord("golden", p.stem, p.read_bytes(), None, None, "all")
               for p in sorted(golden.glob("article_*.html"))[:2]]
    plan = FoldPlan("fold9", records, set())
    cache = tmp_path / "scores"
    full = scored_pages(plan, MODELS_DIR / "fast", cache, 0.4, "cpu")
    zero = scored_pages(plan, MODELS_DIR / "fast", cache, 0.4, "cpu", zero_positions=True)
    assert len(list(cache.iterdir())) == 2  # one file per arm
    extractor = ArticleExtractor.from_pretrained(MODELS_DIR / "fast", device="cpu")
    for record, page_full, page_zero in zip(records, full, zero):
        page = parse_page(record.html)
        page.positions = np.zeros((page.num_nodes, 32), np.float32)
        np.testing.assert_allclose(page_zero.probs, extractor.score([page])[0], atol=1e-6)
        assert not np.all(page_full.probs == page_zero.probs)
