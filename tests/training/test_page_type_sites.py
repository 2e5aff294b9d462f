"""Page type on unseen sites: page signals, and the page-type-sites protocol end to end on a
slice."""

import json

import numpy as np
import pytest

from scrapy_grownup.data import datasets
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.graph.signals import SIGNAL_DIM, SIGNAL_GROUPS, page_signals, url_tokens
from tests.data_support import skip_missing_data

PRODUCT = b"""<html><head><title>Blue kettle</title>
<script type="application/ld+json">{"@context": "https://schema.org", "@type": "Product",
 "offers": {"@type": "Offer", "price": "19.99"}}</script>
<meta property="og:type" content="product"></head><body>
<div class="product-detail"><h1>Blue kettle</h1><span class="price">$19.99</span>
<form><input name="qty"><button>Add to cart</button></form></div>
<ul class="grid">""" + b"".join(
    b'<li class="card"><a href="/p/%d">Related kettle number %d with a lid</a></li>' % (i, i)
    for i in range(6)) + b"</ul></body></html>"


def test_scores_with_confusion_adds_recall_and_the_confusion_to_page_type_scores():
    from scrapy_grownup.training.page_type_cv import PAGE_TYPES, scores
    from scrapy_grownup.training.page_type_sites import scores_with_confusion

    gold, pred = np.array([0, 0, 1, 2, 2]), np.array([0, 1, 1, 2, 0])
    base, full = scores(gold, pred), scores_with_confusion(gold, pred)
    assert list(full) == ["accuracy", "macro_f1", "per_type_f1", "per_type_recall", "confusion"]
    assert (full["accuracy"], full["macro_f1"]) == (base["accuracy"], base["macro_f1"])
    assert full["per_type_f1"] == base["per_class_f1"]
    assert full["per_type_recall"][PAGE_TYPES[0]] == 0.5
    assert full["per_type_recall"][PAGE_TYPES[1]] == 1
    assert full["confusion"][0][:3] == [1, 1, 0] and len(full["confusion"]) == len(PAGE_TYPES)


def test_page_signals_read_url_schema_dom_and_attributes():
    assert SIGNAL_DIM == sum(SIGNAL_GROUPS.values())
    assert url_tokens("https://shop.test/products/blue-kettle-2?x=1") == [
        "products", "blue", "kettle"]
    assert url_tokens(None) == [] and url_tokens("http://[bad") == []
    page = parse_page(PRODUCT, url="https://shop.test/products/blue-kettle")
    v = page_signals(page)
    assert v.shape == (SIGNAL_DIM,) and v.dtype == np.float32 and np.isfinite(v).all()
    other = page_signals(page, url="https://shop.test/forum/thread/1")
    assert not np.array_equal(v[:SIGNAL_GROUPS["url"]], other[:SIGNAL_GROUPS["url"]])
    assert np.array_equal(v[SIGNAL_GROUPS["url"]:], other[SIGNAL_GROUPS["url"]:])
    from scrapy_grownup.graph import signals as S

    schema = v[SIGNAL_GROUPS["url"]:SIGNAL_GROUPS["url"] + SIGNAL_GROUPS["schema"]]
    assert schema[S.SCHEMA_TYPES.index("product")] == 1
    assert schema[S.SCHEMA_TYPES.index("offer")] == 1
    assert schema[len(S.SCHEMA_TYPES) + S.OG_TYPES.index("product")] == 1
    assert schema[S.SCHEMA_TYPES.index("article")] == 0
    dom = v[SIGNAL_GROUPS["url"] + SIGNAL_GROUPS["schema"]:-SIGNAL_GROUPS["attrs"]]
    named = dict(zip(S.DOM_COUNTS + S.DOM_SHAPE, dom))
    assert named["form"] > 0 and named["button"] > 0
    assert named["prices"] > 0 and named["cart_words"] > 0
    assert named["max_repeat"] == pytest.approx(np.log1p(6))  # the six cards
    assert 0.5 < named["link_text_share"] < 1
    attrs = dict(zip(S.ATTR_WORDS, v[-SIGNAL_GROUPS["attrs"]:]))
    assert attrs["product"] > 0 and attrs["price"] > 0 and attrs["card"] > 0
    assert attrs["thread"] == 0
    # deterministic (hashing is crc32, not Python's salted hash)
    assert np.array_equal(v, page_signals(parse_page(PRODUCT, url=page.url)))


@pytest.mark.parametrize("text, prices, carts, dates", [
    ("Posted Jan 5, 2024 and on 2023-01-02. ADD TO CART for $19.99 or 5 EUR.", 2, 1, 2),
    ("Order 12023-01-02 and x2023-01-02 are ids; myjan 5, 2024 is a handle.", 0, 0, 0),
    ("September 30 2025: In Stock, Free shipping, quantity 3; 10 usd", 1, 3, 1),
    ("A bag of flour: no cart phrase here, just 42 apples.", 0, 0, 0),
])
def test_page_signals_count_price_cart_and_date_cues_whole_words_any_case(text, prices, carts,
                                                                          dates):
    from scrapy_grownup.graph import signals as S

    page = parse_page(f"<html><body><p>{text}</p></body></html>".encode())
    dom = page_signals(page)[SIGNAL_GROUPS["url"] + SIGNAL_GROUPS["schema"]:
                             -SIGNAL_GROUPS["attrs"]]
    named = dict(zip(S.DOM_COUNTS + S.DOM_SHAPE, dom))
    assert named["prices"] == pytest.approx(np.log1p(prices))
    assert named["cart_words"] == pytest.approx(np.log1p(carts))
    assert named["date_strings"] == pytest.approx(np.log1p(dates))


def _fold_models(root, plans):
    import torch

    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.graph.featurizer import feature_blocks
    from scrapy_grownup.model import GrownUpModel, ModelConfig

    encoder = get_encoder("static")
    for k in plans:
        torch.manual_seed(k)
        config = ModelConfig.preset("tiny", encoder="static", text_dim=encoder.dim,
                                    encoder_version=encoder.version,
                                    input_blocks=feature_blocks(encoder.dim))
        GrownUpModel(config).save_pretrained(root / f"fold{k}" / "model", encoder="static",
                                             encoder_version=encoder.version,
                                             metadata={"plan": f"fold{k}"})


@pytest.mark.slow
def test_page_type_sites_protocol_end_to_end(tmp_path, monkeypatch, capsys):
    try:
        datasets.ensure_unpacked("wcxb_dev")
    except datasets.DatasetNotAvailable:
        skip_missing_data("wcxb_dev")
    from scrapy_grownup.cli.main import main

    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path / "cache"))
    _fold_models(tmp_path / "folds", range(2))
    out = tmp_path / "result.json"
    argv = ["lab", "page-type-sites", "--fold-models", str(tmp_path / "folds"), "--eval-datasets",
            "wcxb_dev", "--train-datasets", "", "--folds", "2", "--limit", "40",
            "--arms", "head,head+signals,text,text+url+signals,signals", "--workers", "1",
            "--json", str(out)]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "accuracy" in table and "confusion (head;" in table
    result = json.loads(out.read_text())
    assert result["pages"] == 40 and result["protocol"] == "site-cv"
    assert set(result["arms"]) == {"head", "head+signals", "text", "text+url+signals",
                                   "signals"}
    assert sum(f["test_pages"] for f in result["per_fold"]) == 40
    for arm in result["arms"].values():
        assert 0 <= arm["accuracy"] <= 1
        assert sum(map(sum, arm["confusion"])) == 40
        assert set(arm["per_type_f1"]) == set(result["classes"])
    # a fold model of another plan is refused (its backbone may have seen the fold's sites)
    (tmp_path / "folds" / "fold1").rename(tmp_path / "folds" / "x")
    (tmp_path / "folds" / "fold0").rename(tmp_path / "folds" / "fold1")
    (tmp_path / "folds" / "x").rename(tmp_path / "folds" / "fold0")
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("grownup lab page-type-sites: error: ") and "a model of plan" in err


def _signals_model(tmp_path):
    import torch

    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.graph.featurizer import feature_blocks
    from scrapy_grownup.model import GrownUpModel, ModelConfig
    from scrapy_grownup.graph.signals import SIGNAL_VERSION
    from scrapy_grownup.training.page_type_cv import PAGE_TYPES

    encoder = get_encoder("static")
    torch.manual_seed(0)
    config = ModelConfig.preset("tiny", encoder="static", text_dim=encoder.dim,
                                encoder_version=encoder.version,
                                input_blocks=feature_blocks(encoder.dim),
                                num_page_types=len(PAGE_TYPES), page_type_names=list(PAGE_TYPES),
                                page_type_readout="content_pooled",
                                page_type_signals=SIGNAL_VERSION)
    model = GrownUpModel(config).eval()
    model.save_pretrained(tmp_path / "m", encoder="static", encoder_version=encoder.version)
    return model


def test_page_type_head_reads_page_signals_at_serving_time(tmp_path):
    """A head with ``page_type_signals`` gets them from the parsed pages when serving and from
    ``x_signals`` when fitted on a store; both give the same probabilities."""
    import torch

    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.model import ModelConfig

    model = _signals_model(tmp_path)
    assert model.page_type_readout.extra_dim == SIGNAL_DIM
    extractor = ArticleExtractor.from_pretrained(str(tmp_path / "m"), device="cpu")
    assert extractor.model.config.page_type_signals == model.config.page_type_signals
    article = extractor.extract(PRODUCT, url="https://shop.test/products/blue-kettle")
    assert article.page_type in model.page_type_names and 0 < article.page_type_score <= 1
    page = parse_page(PRODUCT, url="https://shop.test/products/blue-kettle")
    served = extractor.predict([page])[0]["page_type"]
    batch = extractor.featurizer.batch([page])
    batch.pages = None
    batch.x_signals = torch.from_numpy(page_signals(page)[None])
    with torch.no_grad():
        _, given = model.head_probabilities(model(batch))
    assert np.allclose(served, given[0], atol=1e-5)
    # the URL is one of the signals: another URL, other probabilities
    other = parse_page(PRODUCT, url="https://shop.test/forum/thread/1")
    assert not np.allclose(served, extractor.predict([other])[0]["page_type"])
    batch.x_signals = None
    with pytest.raises(ValueError, match="page signals"):
        model(batch)
    with pytest.raises(ValueError, match="content_pooled"):
        ModelConfig.preset("tiny", encoder="static", text_dim=256, num_page_types=7,
                           page_type_signals="1")
    with pytest.raises(ValueError, match="page signals version"):
        _signals_model_config_version(model, "0")


def _signals_model_config_version(model, version):
    from scrapy_grownup.model import GrownUpModel

    return GrownUpModel(model.config.replace(page_type_signals=version))


def test_fit_heads_extra_page_type_pages_never_share_a_site_with_the_hold_out():
    for name in ("pagetype", "wcxb_dev"):
        try:
            datasets.ensure_unpacked(name)
        except datasets.DatasetNotAvailable:
            skip_missing_data(f"{name}")
    from scrapy_grownup.data.splits import site_of
    from scrapy_grownup.training.fit_heads import extra_page_type_records
    from scrapy_grownup.training.holdout import heldout_ids

    pagetype = datasets.load("pagetype")
    held = set(heldout_ids("pagetype"))
    assert extra_page_type_records([], pagetype, held) == []
    extra = extra_page_type_records(["wcxb_dev"], pagetype, held)
    held_sites = {site_of(r) for r in pagetype if r.id in held}
    assert extra and not {site_of(r) for r in extra} & held_sites
    assert {r.dataset for r in extra} == {"wcxb_dev"}
    # pages both sets hold train with wcxb_dev's reviewed label; the hold-out keeps its own
    train_urls = {r.url for r in pagetype if r.id not in held}
    assert {r.url for r in extra} & train_urls
    assert not {r.url for r in extra} & {r.url for r in pagetype if r.id in held}
    wcxb_off_held = [r for r in datasets.load("wcxb_dev") if site_of(r) not in held_sites]
    assert len(extra) == len(wcxb_off_held)


@pytest.mark.parametrize("arm", ["text+url", "text"])
def test_page_type_sites_inner_model_selection_never_splits_a_site(arm, group_folds):
    """The C of every SVM / logistic arm is chosen by an inner CV whose folds keep each site
    on one side: a site's other pages would reward a C that memorises its template."""
    from scrapy_grownup.training import page_type_sites

    seen = group_folds
    rng = np.random.default_rng(0)
    words = [["price", "cart", "buy"], ["posted", "reply", "thread"], ["story", "said", "news"]]
    texts, y, groups = [], [], []
    for site in range(12):
        for page in range(4):
            label = (site + page) % 3
            texts.append(" ".join(rng.choice(words[label], 20)) + f" site{site}template")
            y.append(label)
            groups.append(f"site{site}.example")
    y = np.asarray(y)
    blocks = {"text": texts, "url": [f"/s{g}/p" for g in groups]}
    info = {"texts": texts, "groups": groups}
    train, test = np.arange(36), np.arange(36, 48)
    pred = page_type_sites._predict(arm, blocks, info, None, None, None, train, test, y, 0)
    assert len(pred) == 12 and (pred == y[test]).mean() > 0.8
    assert len(seen) == 3
    for train_sites, test_sites in seen:
        assert not train_sites & test_sites
