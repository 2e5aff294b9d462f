"""The models shipped inside the package load offline and extract real articles."""

import json

import pytest

from example_project.news_site import STORIES, article_page
from scrapy_grownup.errors import ModelLoadError
from scrapy_grownup.extractor import DEFAULT_MODEL, MODELS_DIR, shipped_models
from tests.data_support import skip_missing_data


@pytest.mark.parametrize("name,encoder", [("fast", "static"), ("minilm", "minilm")])
def test_models_are_shipped_small_and_safetensors_only(name, encoder):
    assert name in shipped_models() and DEFAULT_MODEL in shipped_models()
    files = sorted(p.name for p in (MODELS_DIR / name).iterdir())
    # each also ships its block rescorer (decisions/rescorer.py) and its page-type classifier
    # (decisions/page_type.py): numpy arrays, no pickle; a model ONNX Runtime can run ships
    # its backbone as an ONNX graph of the same weights (model/onnx_export.py)
    from scrapy_grownup.model.onnx_export import exportable
    from scrapy_grownup.model.files import read_model_config

    graph = ["backbone.onnx"] if exportable(read_model_config(MODELS_DIR / name)[0]) else []
    # fast ships its confidence model (decisions/confidence.py), fitted across sites
    confidence = ["confidence.npz"] if name == "fast" else []
    assert files == sorted(graph + confidence + ["block_rescorer.npz", "config.json",
                                                 "model.safetensors", "page_type.npz"])
    assert all((MODELS_DIR / name / f).stat().st_size < 30_000_000 for f in files)
    config = json.loads((MODELS_DIR / name / "config.json").read_text())
    assert config["config"]["encoder"] == encoder
    # both heads ride along: page type and block roles
    assert config["config"]["num_genres"] > 0 and config["config"]["num_roles"] > 0
    # both page-type classifiers read the page's declared og:type (a shop's product.group
    # is its category page: page_type_classifier.url_words)
    from scrapy_grownup.decisions.page_type import PageTypeClassifier

    terms = PageTypeClassifier.load(MODELS_DIR / name / "page_type.npz").url.terms
    assert {"og:product", "og:product.group", "og:article"} <= set(terms)


@pytest.mark.parametrize("name", [None, pytest.param("minilm", marks=pytest.mark.minilm)])
def test_shipped_models_extract_a_page_they_never_saw(name):
    from scrapy_grownup import ArticleExtractor

    extractor = ArticleExtractor.from_pretrained() if name is None else \
        ArticleExtractor.from_pretrained(name)
    assert extractor.name == (name or "fast")  # no name: auto, fast on a CPU
    html, _ = article_page(2, variant=1)
    article = extractor.extract(html.encode(), url="http://news.test/owls")
    assert article.title == STORIES[2][0]
    found = sum(p in article.text for p in STORIES[2][1])
    assert found >= 3, article.text
    assert "All rights reserved" not in article.text and "We use cookies" not in article.text


def test_auto_is_default_on_a_gpu_and_fast_on_a_cpu(monkeypatch, caplog):
    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.encoders import minilm
    from scrapy_grownup.extractor import auto_model, resolve_model_dir

    assert auto_model("cpu") == "fast"
    assert resolve_model_dir("default") == MODELS_DIR / DEFAULT_MODEL == MODELS_DIR / "minilm"
    extractor = ArticleExtractor.from_pretrained("auto", device="cpu")
    assert extractor.name == "fast" and extractor.featurizer.encoder.name == "static"
    monkeypatch.setattr(minilm, "minilm_installed", lambda: True)
    assert auto_model("cuda:0") == "default"
    # a GPU without the [minilm] extra: fast, and a warning that says what to install
    monkeypatch.setattr(minilm, "minilm_installed", lambda: False)
    with caplog.at_level("WARNING", logger="scrapy_grownup.extractor"):
        assert auto_model("cuda:0") == "fast"
    assert "pip install 'scrapy-grownup[minilm]'" in caplog.text
    # checking GROWNUP_PAGE_TYPES asks what auto would load on either device: no warning
    from scrapy_grownup.crawl.settings import model_page_types

    caplog.clear()
    with caplog.at_level("WARNING", logger="scrapy_grownup.extractor"):
        assert "article" in model_page_types("auto", None)
    assert caplog.text == ""


@pytest.mark.parametrize("name", ["fast", "minilm"])
def test_a_shipped_model_saved_again_keeps_its_file_names(name, tmp_path):
    """The code says "page type" where saved files say "genre" (``model.config``'s
    ``SAVED_CONFIG_KEYS`` and ``SAVED_MODULE_NAMES``): a shipped model loaded and saved again
    writes the config keys and tensor names it was read from, and loads again to the same
    weights and the same outputs, in both runtimes."""
    import numpy as np
    import torch
    from safetensors.numpy import load_file

    from scrapy_grownup.model import GrownUpModel, NumpyModel
    from scrapy_grownup.model.config import SAVED_CONFIG_KEYS

    source, copy = MODELS_DIR / name, tmp_path / name
    doc = json.loads((source / "config.json").read_text())
    model = GrownUpModel.from_pretrained(source)
    assert model.config.num_page_types == doc["config"]["num_genres"] > 0
    assert model.page_type_head is not None and model.page_type_readout is not None
    model.save_pretrained(copy, fp16=doc["dtype"] == "float16", metadata=doc["metadata"])
    again = json.loads((copy / "config.json").read_text())
    assert set(again) == set(doc) and again["tensors"] == doc["tensors"]
    # every key of the shipped config, with its value; a field newer than the shipped file
    # may join them, never a key in the code's spelling
    assert {key: again["config"][key] for key in doc["config"]} == doc["config"]
    assert not set(again["config"]) & set(SAVED_CONFIG_KEYS)
    before, after = load_file(source / "model.safetensors"), load_file(copy / "model.safetensors")
    assert set(before) == set(after) == set(doc["tensors"])
    assert all(np.array_equal(before[key], after[key]) for key in before)

    reloaded = GrownUpModel.from_pretrained(copy)
    assert reloaded.config == model.config
    state = reloaded.state_dict()
    assert all(torch.equal(t, state[key]) for key, t in model.state_dict().items())
    if name != "fast":  # featurizing for minilm needs its encoder: same weights, same outputs
        return
    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.page.dom import parse_page

    extractor = ArticleExtractor.from_pretrained(name, device="cpu")
    page = parse_page(article_page(2, variant=1)[0].encode(), url="http://news.test/owls")
    runs = []
    for runtime in (model, reloaded, NumpyModel.from_pretrained(source, onnx=False),
                    NumpyModel.from_pretrained(copy, onnx=False)):
        extractor.model = runtime
        runs.append(extractor.predict([page])[0])
    for first, second in (runs[:2], runs[2:]):
        assert set(first) == set(second) >= {"content", "roles", "page_type", "page_type_inputs"}
        assert all(np.array_equal(first[key], second[key]) for key in first)


def test_unknown_name_is_a_clear_error():
    from scrapy_grownup import ArticleExtractor

    with pytest.raises(ModelLoadError, match="not a shipped model"):
        ArticleExtractor.from_pretrained("no-such-model")


@pytest.mark.parametrize("name", ["fast", pytest.param("minilm", marks=pytest.mark.minilm)])
def test_real_dragnet_page_when_data_is_available(name):
    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.data import datasets
    from scrapy_grownup.evaluation.metrics import lcs_scores

    try:
        records = datasets.load("dragnet", split="test", limit=5)
    except datasets.DatasetNotAvailable:
        skip_missing_data("Dragnet data")
    extractor = ArticleExtractor.from_pretrained(name)
    recalls = [lcs_scores(a.text, r.gold)[1]
               for r, a in zip(records, extractor.extract_batch([(r.html, r.id)
                                                                  for r in records]))]
    assert sum(recalls) / len(recalls) > 0.8
