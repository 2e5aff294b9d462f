"""Page type: labels, folds, the text baseline, and a multi-task training run on real pages."""

import json

import numpy as np
import pytest
import torch

from scrapy_grownup.data import datasets
from scrapy_grownup.training.page_type_cv import (
    PAGE_TYPES, page_type_index, page_types, scores, stratified_group_folds, text_baseline,
)
from tests.data_support import skip_missing_data


def test_page_type_index():
    assert [page_type_index(g) for g in PAGE_TYPES] == list(range(7))
    assert page_type_index("blog") == page_type_index("article") == 0
    assert page_type_index(" Forum ") == 1
    assert page_type_index(None) == page_type_index("") == page_type_index("recipe") == -1


def test_page_types_of_the_page_type_set():
    try:
        types = page_types("pagetype")
    except datasets.DatasetNotAvailable:
        skip_missing_data("page-type data")
    assert len(types) == 806
    assert set(types.values()) == set(PAGE_TYPES)  # the two "blog" pages count as articles
    assert sum(t == "article" for t in types.values()) == 353
    assert page_types("dragnet") == {}


def test_stratified_group_folds():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 200)
    groups = [f"h{i // 2}" for i in range(200)]  # pairs of pages share a site
    folds = stratified_group_folds(labels, groups, 5, seed=0)
    assert sorted(np.concatenate(folds).tolist()) == list(range(200))
    for test in folds:
        inside = {groups[i] for i in test}
        outside = {groups[i] for i in range(200) if i not in set(test.tolist())}
        assert not inside & outside
    again = stratified_group_folds(labels, groups, 5, seed=0)
    assert all((a == b).all() for a, b in zip(folds, again))


def test_text_baseline_and_scores():
    train = ["buy now price cart shipping"] * 5 + ["posted reply thread forum member"] * 5
    y = np.array([0] * 5 + [1] * 5)
    pred = text_baseline(train, y, ["cart price", "reply to thread"])
    assert pred.tolist() == [0, 1]
    s = scores(np.array([0, 0, 1, 2]), np.array([0, 1, 1, 2]), num_classes=3)
    assert s["accuracy"] == 0.75
    assert s["per_class_f1"]["article"] == pytest.approx(2 / 3)
    assert s["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)


def small_real_pages():
    """Two short pages of each of four page types and four short L3S-GN1 pages."""
    try:
        pagetype = datasets.load("pagetype")
        l3s = datasets.load("l3s_gn1", limit=40)
    except datasets.DatasetNotAvailable:
        skip_missing_data("page-type / L3S-GN1 data")
    chosen = []
    for page_type in ("article", "forum", "product", "listing"):
        pages = sorted((r for r in pagetype if r.extra["page_type"] == page_type),
                       key=lambda r: len(r.html))
        chosen.extend(pages[:2])
    return chosen, sorted(l3s, key=lambda r: len(r.html))[:4]


def test_multitask_training_on_real_pages(tmp_path):
    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.training.loop import TrainConfig
    from scrapy_grownup.training.trainer import train

    pagetype, l3s = small_real_pages()
    cfg = TrainConfig(out=str(tmp_path), preset="tiny", encoder="static", epochs=3, lr=1e-2,
                      batch_nodes=6000, patience=5, dev_fraction=0.25, workers=1, threads=1,
                      page_type_weight=1.0, role_weight=1.0)
    result = train(cfg, records={"pagetype": pagetype, "l3s_gn1": l3s})
    history = [json.loads(line) for line in (tmp_path / "train.log").read_text().splitlines()]
    assert len(history) == 3
    # the heads were refit on the best model's frozen features (kept only if dev improved)
    refit = result["refit"]
    assert set(refit) <= {"page_type", "roles"}
    assert all("kept" in part for part in refit.values())
    assert json.loads((tmp_path / "best" / "config.json").read_text())["metadata"]["refit"] \
        == refit
    for record in history:
        assert {"loss_content", "loss_page_type", "loss_role"} <= set(record)
        assert all(np.isfinite(record[k])
                   for k in ("loss_content", "loss_page_type", "loss_role"))
    doc = json.loads((tmp_path / "best" / "config.json").read_text())
    # saved files keep the page type's saved names (``model.config.SAVED_CONFIG_KEYS``)
    assert doc["config"]["genre_names"] == list(PAGE_TYPES)
    assert doc["config"]["role_names"][5] == "comments"
    assert "model.genre_head.weight" not in doc["tensors"]  # names are the model's own
    assert "genre_head.weight" in doc["tensors"] and "role_head.net.weight" in doc["tensors"]

    extractor = ArticleExtractor.from_pretrained(result["model_dir"])
    record = l3s[0]
    article = extractor.extract(record.html, url=record.url,
                                content_type=record.extra["content_type"])
    assert article.page_type in PAGE_TYPES and 0 < article.page_type_score <= 1
    assert isinstance(article.comments, str) and isinstance(article.related_links, list)
    assert all(set(link) == {"text", "url"} for link in article.related_links)
    # the score is the softmax of the un-margined ArcFace logits
    graph = extractor.featurizer.featurize(record.html, url=record.url,
                                           content_type=record.extra["content_type"])
    with torch.no_grad():
        out = extractor.model(graph.to(extractor.device))
        features = extractor.model.page_type_norm(out.page_features)  # running statistics
        probs = torch.softmax(extractor.model.page_type_head(features), -1)[0]
    assert article.page_type == PAGE_TYPES[int(probs.argmax())]
    assert article.page_type_score == pytest.approx(float(probs.max()), abs=1e-5)


def test_model_without_heads_leaves_fields_empty(tmp_path):
    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.model import GrownUpModel, ModelConfig

    encoder = get_encoder("static")
    torch.manual_seed(0)
    model = GrownUpModel(ModelConfig.preset("tiny", encoder="static"))
    model.save_pretrained(tmp_path / "plain", encoder_version=encoder.version)
    extractor = ArticleExtractor.from_pretrained(tmp_path / "plain")
    article = extractor.extract(b"<html><body><h1>Hi</h1><p>Some text here.</p></body></html>")
    assert article.page_type is None and article.page_type_score is None
    assert article.comments is None and article.related_links is None
    assert article.to_dict()["related_links"] is None
