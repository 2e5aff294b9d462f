"""The training loop (``training/loop.py``): page-type and node weights, forward precision and
bf16."""

import numpy as np
import pytest

from scrapy_grownup.page.dom import parse_page
from tests.data_support import available
from tests.data_support import skip_missing_data


def test_page_type_weights_lift_rare_page_types_and_average_one():
    from scrapy_grownup.training.loop import AuxLabels, page_type_weights

    types = ["article"] * 80 + ["listing"] * 5 + ["product"] * 15
    weights = page_type_weights(types, 0.5)
    assert weights.shape == (100,) and weights.dtype == np.float32
    assert weights.mean() == pytest.approx(1.0, abs=1e-6)
    article, listing, product = weights[0], weights[80], weights[85]
    assert listing > product > 1.0 > article
    # frequency ** -0.5 (with the add-one of class_weights): 16 / 6 pages -> sqrt(81 / 6)
    assert listing / article == pytest.approx((81 / 6) ** 0.5, rel=1e-5)
    assert (page_type_weights(types, 0.0) == 1.0).all()

    class Store:  # what node_weights reads of a GraphStore
        num_pages = 3
        page_ptr = np.array([0, 2, 5, 6])

        def num_nodes(self, i):
            return int(self.page_ptr[i + 1] - self.page_ptr[i])

    aux = AuxLabels(np.full(3, -1), np.full(6, -1, dtype=np.int8))
    assert aux.node_weights(Store(), [2, 0]) is None
    aux.page_weights = np.array([0.5, 1.0, 4.0], dtype=np.float32)
    assert aux.node_weights(Store(), [2, 0]).tolist() == [4.0, 0.5, 0.5]
    joined = AuxLabels.concat([aux, AuxLabels(np.full(2, -1), np.full(3, -1, dtype=np.int8))])
    assert joined.page_weights.tolist() == [0.5, 1.0, 4.0, 1.0, 1.0]


def test_node_weights_follow_each_nodes_characters_and_page():
    """``--node-weight``: a node's content-loss weight ~ log(1 + its characters)
    (``log-chars``), or each page's nodes summing to the same total (``page``), or both,
    averaging 1 over the batch's labelled nodes, in ``collate``'s node order; the nodes that
    own no text (label -1) are outside the loss whatever their weight."""
    from scrapy_grownup.training.loop import node_weights

    class Store:  # what node_weights reads of a GraphStore
        page_ptr = np.array([0, 3, 5])
        arrays = {"text_len": np.array([0, 400, 5, 0, 60]),
                  "labels": np.array([-1, 1, 0, -1, 0], dtype=np.int8)}

        def num_nodes(self, i):
            return int(self.page_ptr[i + 1] - self.page_ptr[i])

    labelled = [1, 3, 4]  # batch [page 1, page 0]: nodes 3, 4 and 0, 1, 2 of the store
    assert node_weights(Store(), [1, 0], "none") is None
    weights = node_weights(Store(), [1, 0], "log-chars").numpy()
    raw = np.log1p([0, 60, 0, 400, 5])
    np.testing.assert_allclose(weights, raw / raw[labelled].mean(), rtol=1e-6)
    assert weights[3] > weights[1] > weights[4]  # the paragraph, the caption, "Share"
    # page: page 1's one labelled node weighs what page 0's two weigh together
    per_page = node_weights(Store(), [1, 0], "page").numpy()
    np.testing.assert_allclose(per_page[labelled], [1.5, 0.75, 0.75], rtol=1e-6)
    both = node_weights(Store(), [1, 0], "page-log-chars").numpy()
    assert both[1] == pytest.approx(both[3] + both[4], rel=1e-6)
    assert both[3] / both[4] == pytest.approx(raw[3] / raw[4], rel=1e-6)
    for mode in ("log-chars", "page", "page-log-chars"):
        assert node_weights(Store(), [1, 0], mode).numpy()[labelled].mean() == \
            pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="unknown node weight 'chars'"):
        node_weights(Store(), [0], "chars")


def test_type_balance_trains_another_model_from_the_same_pages(tmp_path, monkeypatch, capsys):
    """``grownup lab evaluate --type-balance``: the same pages and seed, rare page types weigh
    more, so the weights differ; training without the pages' types is refused."""
    if not available("wcxb_dev"):
        skip_missing_data("dataset wcxb_dev")
    from safetensors.numpy import load_file

    from scrapy_grownup.cli.main import main
    from scrapy_grownup.training import crosssite
    from scrapy_grownup.training.corpus import corpus_encoder

    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path / "cache"))
    records = crosssite.load_records(["wcxb_dev"], limit=30)
    types = crosssite.page_types_of(records)
    assert len(set(types.values())) >= 2 and set(types) == {crosssite.record_key(r)
                                                             for r in records}
    plan = crosssite.FoldPlan("all", [], set(types))
    encoder = corpus_encoder("static")
    store, keys = crosssite.training_store(records, encoder)
    cfg = {"preset": "small", "epochs": 1, "lr": 2e-3, "threads": 1, "device": "cpu",
           "overrides": {"num_layers": 2, "num_transformer_layers": 0, "readout": "mean"}}
    crosssite.train_plan_model(store, keys, plan, encoder, cfg, tmp_path / "plain", types)
    balanced = {**cfg, "type_balance": 0.5}
    crosssite.train_plan_model(store, keys, plan, encoder, balanced, tmp_path / "bal", types)
    a = load_file(str(tmp_path / "plain" / "model.safetensors"))
    b = load_file(str(tmp_path / "bal" / "model.safetensors"))
    assert max(float(np.abs(a[n] - b[n]).max()) for n in a) > 1e-3
    with pytest.raises(ValueError, match="page types"):
        crosssite.train_plan_model(store, keys, plan, encoder, balanced, tmp_path / "x")
    by_node = {**cfg, "node_weight": "page"}
    crosssite.train_plan_model(store, keys, plan, encoder, by_node, tmp_path / "page")
    c = load_file(str(tmp_path / "page" / "model.safetensors"))
    assert max(float(np.abs(a[n] - c[n]).max()) for n in a) > 1e-3
    with pytest.raises(SystemExit):
        main(["lab", "evaluate", "--protocol", "site-cv", "--node-weight", "chars"])
    assert "invalid choice: 'chars'" in capsys.readouterr().err
    assert main(["lab", "evaluate", "--protocol", "site-cv", "--type-balance", "-1"]) == 2
    assert "--type-balance -1" in capsys.readouterr().err
    assert main(["lab", "evaluate", "--protocol", "site-cv", "--workers", "0"]) == 2
    assert "--workers 0: at least 1" in capsys.readouterr().err


def test_forward_precision_autocasts_only_for_bf16():
    import torch

    from scrapy_grownup.training.loop import TrainConfig, forward_precision

    layer = torch.nn.Linear(8, 4)
    x = torch.ones(3, 8)
    with forward_precision(TrainConfig(out="x")):
        assert layer(x).dtype == torch.float32
    with forward_precision(TrainConfig(out="x", precision="bf16")):
        assert layer(x).dtype == torch.bfloat16
    assert layer(x).dtype == torch.float32  # the context ends with the forward pass
    with pytest.raises(ValueError, match="unknown precision 'fp16'"):
        forward_precision(TrainConfig(out="x", precision="fp16"))


def test_bf16_on_a_cpu_that_would_emulate_it_warns(tmp_path, monkeypatch, caplog):
    """bfloat16 on a CPU without AVX512-BF16 or AMX is emulated (an epoch took 8x fp32's
    time on an AVX2-only core): the run says so before it trains; fp32, a GPU or a CPU with
    the instructions say nothing."""
    import logging

    import torch

    from scrapy_grownup.training import loop

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert loop.emulated_bf16("cpu") and not loop.emulated_bf16("cuda")
    warning = loop.precision_warning("bf16", "cpu")
    assert warning.startswith("--precision bf16: this CPU has no AVX512-BF16 or AMX")
    assert loop.precision_warning("fp32", "cpu") is None
    assert loop.precision_warning("bf16", "cuda:0") is None
    # grownup train's run says it first thing, before any data is read
    from scrapy_grownup.training import trainer

    monkeypatch.setattr(trainer, "corpus_encoder", lambda name: 1 / 0)
    with caplog.at_level(logging.WARNING, logger="scrapy_grownup.training.loop"), \
            pytest.raises(ZeroDivisionError):
        trainer.train(loop.TrainConfig(out=str(tmp_path / "run"), precision="bf16"))
    assert [r.getMessage() for r in caplog.records] == [warning]
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert loop.precision_warning("bf16", "cpu") is None


def test_bf16_training_keeps_float32_weights_and_the_recipes_losses(tmp_path, monkeypatch,
                                                                    capsys):
    """``grownup lab evaluate --precision bf16``: the same pages, seed and recipe trained with
    bfloat16 matrix products; the saved weights are float32, the losses follow fp32's
    closely without being fp32's, and the model scores pages as any other."""
    if not available("wcxb_dev"):
        skip_missing_data("dataset wcxb_dev")
    import json

    from safetensors.numpy import load_file

    from scrapy_grownup.cli.main import main
    from scrapy_grownup.extractor import ArticleExtractor
    from scrapy_grownup.training import crosssite
    from scrapy_grownup.training.corpus import corpus_encoder

    monkeypatch.setenv("GROWNUP_CACHE_DIR", str(tmp_path / "cache"))
    records = crosssite.load_records(["wcxb_dev"], limit=20)
    plan = crosssite.FoldPlan("all", [], {crosssite.record_key(r) for r in records})
    encoder = corpus_encoder("static")
    store, keys = crosssite.training_store(records, encoder)
    cfg = {"preset": "small", "epochs": 2, "lr": 2e-3, "threads": 1, "device": "cpu",
           "overrides": {"num_layers": 2, "num_transformer_layers": 0, "readout": "mean"}}
    fp32 = crosssite.train_plan_model(store, keys, plan, encoder, cfg, tmp_path / "fp32")
    bf16 = crosssite.train_plan_model(store, keys, plan, encoder, {**cfg, "precision": "bf16"},
                                      tmp_path / "bf16")
    a = load_file(str(tmp_path / "fp32" / "model.safetensors"))
    b = load_file(str(tmp_path / "bf16" / "model.safetensors"))
    assert {str(v.dtype) for v in b.values()} == {"float32"}
    assert max(float(np.abs(a[n] - b[n]).max()) for n in a) > 1e-4
    assert {str(p.dtype) for p in bf16.parameters()} == {"torch.float32"}
    del fp32
    history = {}
    for name in ("fp32", "bf16"):
        meta = json.loads((tmp_path / name / "config.json").read_text())["metadata"]
        history[name] = [epoch["content"] for epoch in meta["history"]]
    assert history["fp32"] != history["bf16"]
    for x, y in zip(history["fp32"], history["bf16"]):
        assert abs(x - y) < 0.05 * x
    extractor = ArticleExtractor.from_pretrained(tmp_path / "bf16")
    probs = extractor.score([parse_page(records[0].html, url=records[0].url)])[0]
    assert np.isfinite(probs).all() and 0 <= probs.min() <= probs.max() <= 1
    with pytest.raises(SystemExit):
        main(["lab", "evaluate", "--protocol", "site-cv", "--precision", "fp16"])
    assert "invalid choice: 'fp16'" in capsys.readouterr().err
    seen = []  # grownup train hands it to its TrainConfig
    monkeypatch.setattr("scrapy_grownup.training.trainer.train",
                        lambda cfg: seen.append(cfg) or {"ok": True})
    assert main(["train", "--out", str(tmp_path / "run"), "--precision", "bf16"]) == 0
    assert seen[0].precision == "bf16"
