"""Pre-training: masking, the losses on a tiny real corpus, negatives, resume, ``--init``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from scrapy_grownup.data.datasets import DatasetNotAvailable
from scrapy_grownup.errors import ModelLoadError
from scrapy_grownup.model import GrownUpModel
from scrapy_grownup.pretraining.data import PretrainData, Unit, batch_layout
from scrapy_grownup.pretraining.heads import PAPER_WEIGHTS, PretrainHeads, check_weights
from scrapy_grownup.pretraining.init import load_pretrained
from scrapy_grownup.pretraining.masking import make_targets, mask_inputs, select_nodes
from scrapy_grownup.pretraining.trainer import (PretrainConfig, batch_losses, build_model,
                                                pretrain, site_objective)
from scrapy_grownup.warc.corpus import load_corpus
from scrapy_grownup.warc.pairs import site_hash
from tests.data_support import skip_missing_data

torch.set_num_threads(1)
BLOCKS = ("x_text", "x_class", "x_id", "x_struct", "x_pos")
SITES = ("a.example", "b.example")
NUM_PAGES = 8


@pytest.fixture(scope="module")
def pages():
    from scrapy_grownup.warc.synthetic import dataset_pages

    try:
        found = dataset_pages(NUM_PAGES)
    except DatasetNotAvailable:
        skip_missing_data("dragnet pages")
    return found


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory, pages) -> Path:
    """Eight real Dragnet pages served by two sites, read by the WARC corpus writer."""
    from scrapy_grownup.warc.settings import WarcSettings
    from scrapy_grownup.warc.sources import expand
    from scrapy_grownup.warc.synthetic import write_warc
    from scrapy_grownup.warc.writer import CorpusWriter

    root = tmp_path_factory.mktemp("pretrain")
    records = [(f"http://{SITES[i % 2]}/news/p{i}.html", html, "text/html")
               for i, (_, html) in enumerate(pages)]
    write_warc(root / "in" / "pages.warc.gz", records, requests=False)
    settings = dataclasses.replace(WarcSettings.from_settings(None), workers=0, shard_pages=3)
    writer = CorpusWriter(root / "corpus", settings)

    async def main():
        sources, _ = expand([str(root / "in")])
        for source in sources:
            async for _ in writer.read(source):
                pass

    try:
        asyncio.run(main())
        writer.finalize()
    finally:
        writer.close()
    return root / "corpus"


@pytest.fixture(scope="module")
def data(corpus_dir) -> PretrainData:
    return PretrainData(load_corpus(corpus_dir), dev_fraction=0.0)


def config(tmp_path: Path | str, corpus_dir: Path, **changes) -> PretrainConfig:
    values = dict(data=str(corpus_dir), out=str(tmp_path), preset="tiny", epochs=2,
                  batch_pages=4, mask_nodes=8, dev_fraction=0.0, progress=False, lr=3e-3)
    values.update(changes)
    return PretrainConfig(**values)


def test_corpus_units_cover_every_page(data):
    pairs = [u for u in data.train_units if u.second >= 0]
    assert len(pairs) == NUM_PAGES // 2  # 4 pages per site -> 2 pairs each
    pages = sorted(p for u in data.train_units for p in u.pages)
    assert pages == list(range(NUM_PAGES))
    assert {u.site for u in pairs} == {site_hash(s) for s in SITES}
    # pairs and single pages never share a batch; every unit is batched once
    batches = data.batches(data.train_units, 4, 10**9, np.random.default_rng(0))
    assert sorted(u.first for b in batches for u in b) == sorted(u.first for u in data.train_units)
    assert all(len({u.second >= 0 for u in b}) == 1 for b in batches)


def test_collate_across_shards_keeps_the_asked_order(data):
    corpus = data.corpus
    order = [7, 0, 4, 2]  # shards of 3 pages: 2, 0, 1, 0
    batch = data.collate(order)
    for k, page in enumerate(order):
        shard, row = corpus.locate(page)
        alone = corpus.load_shard(shard).collate([row])
        lo, hi = int(batch.batch.ptr[k]), int(batch.batch.ptr[k + 1])
        assert hi - lo == alone.num_nodes
        for name in BLOCKS:
            assert torch.equal(getattr(batch.batch, name)[lo:hi], getattr(alone, name))
        assert np.array_equal(batch.raw["tag_ids"][lo:hi],
                              corpus.load_shard(shard).page_arrays(row)["tag_ids"])
        # edges stay inside the page and keep its structure
        inside = (batch.batch.edge_index >= lo) & (batch.batch.edge_index < hi)
        edges = batch.batch.edge_index[:, inside.all(0)] - lo
        assert sorted(map(tuple, edges.t().tolist())) == \
            sorted(map(tuple, alone.edge_index.t().tolist()))
    assert batch.batch.edge_index.shape[1] == sum(
        corpus.load_shard(corpus.locate(p)[0]).collate([corpus.locate(p)[1]]).edge_index.shape[1]
        for p in order)


def test_masking_shapes_and_zeroing(data):
    pages = [0, 1, 2]
    batch = data.collate(pages)
    graph = batch.batch
    sizes = np.diff(graph.ptr.numpy())
    nodes = select_nodes(graph.ptr, 16, torch.Generator().manual_seed(0))
    assert len(nodes) == sum(min(16, n) for n in sizes)
    per_graph = np.bincount(graph.batch[nodes].numpy(), minlength=len(pages))
    assert list(per_graph) == [min(16, n) for n in sizes]
    assert len(set(nodes.tolist())) == len(nodes)
    tiny = select_nodes(torch.tensor([0, 3, 10]), 5, torch.Generator().manual_seed(0))
    assert tiny.tolist()[:3] == [0, 1, 2] and len(tiny) == 8  # a 3-node graph: all of it

    before = {name: getattr(graph, name).clone() for name in BLOCKS}
    targets = make_targets(graph, batch.raw, nodes)
    assert targets.tag.shape == targets.child_index.shape == targets.child_count.shape == \
        (len(nodes),)
    assert targets.embeddings["text"].shape == (len(nodes), graph.x_text.shape[1])
    assert targets.tag.tolist() == batch.raw["tag_ids"][nodes.numpy()].tolist()
    assert torch.equal(targets.present["text"],
                       torch.from_numpy(batch.raw["text_idx"][nodes.numpy()] > 0))
    masked = mask_inputs(graph, targets, BLOCKS, 0.85, torch.Generator().manual_seed(1))
    assert masked.shape == (len(nodes),) and 0 < int(masked.sum()) < len(nodes)
    zeroed = nodes[masked]
    kept = torch.ones(graph.num_nodes, dtype=torch.bool)
    kept[zeroed] = False
    for name in BLOCKS:
        after = getattr(graph, name)
        assert (after[zeroed] == 0).all()
        assert torch.equal(after[kept], before[name][kept])  # unmasked chosen nodes too
        assert not torch.equal(after, before[name])
    # the targets are the inputs before masking
    assert torch.equal(targets.embeddings["text"], before["x_text"][nodes])


def test_site_loss_uses_in_batch_permutation_negatives():
    a, b = site_hash("a.example"), site_hash("b.example")
    sites = np.array([a, b, a, b])
    positions = np.array([[0, 4], [1, 5], [2, 6], [3, 7]])
    torch.manual_seed(0)
    heads = PretrainHeads(8, 4)
    features = torch.randn(8, 8)
    loss, stats = site_objective(heads, features, positions, sites, ratio=0.5)
    # the second pages of the first half are reversed: (0, 5), (1, 4) are cross-site negatives
    order = np.array([1, 0, 2, 3])
    labels = torch.tensor([0.0, 0.0, 1.0, 1.0])
    expected = heads.site_loss(features[[0, 1, 2, 3]], features[positions[order, 1]], labels)
    assert torch.allclose(loss, expected)
    assert stats["negatives"] == 2 and stats["pairs"] == 4
    # a permutation that lands on the same site stays a positive
    same = np.array([a, a, b, b])
    _, stats = site_objective(heads, features, positions, same, ratio=0.5)
    assert stats["negatives"] == 0
    # ReLU(cos) with BCE: a pair predicted orthogonal is a confident "different sites"
    z = heads.site_probability(features[:4], features[4:])
    assert (z >= 0).all() and (z <= 1).all()


def test_each_loss_decreases_on_a_tiny_real_corpus(tmp_path, corpus_dir, data):
    cfg = config(tmp_path, corpus_dir, mask_nodes=400, mask_rate=0.85, permute_ratio=2 / 3,
                 overrides={"num_transformer_layers": 0, "readout": "mean"})
    pm = build_model(cfg, data.corpus)
    weights = check_weights({})
    assert weights == PAPER_WEIGHTS
    optimizer = torch.optim.Adam(pm.parameters(), lr=3e-3)
    units = sorted((u for u in data.train_units if u.second >= 0), key=lambda u: u.site)
    units = [units[0], units[2], units[1]]  # sites A, B, A: the first two swap partners
    pages, _, sites = batch_layout(units)
    assert len(set(sites[:2].tolist())) == 2
    history = []
    for _ in range(8):
        generator = torch.Generator().manual_seed(0)  # the same nodes and masks every step
        loss, parts, stats = batch_losses(pm, data, units, cfg, weights, generator)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append({k: float(v.detach()) for k, v in parts.items()})
        assert stats["negatives"] == 2
    first, last = history[0], history[-1]
    assert set(first) == {"tag", "child_index", "child_count", "text", "class", "id", "site"}
    for name in first:
        assert last[name] < first[name], (name, first[name], last[name])


def test_checkpoint_resume_gives_the_same_state(tmp_path, corpus_dir):
    straight = pretrain(config(tmp_path / "a", corpus_dir, epochs=2, dev_fraction=0.3))
    pretrain(config(tmp_path / "b", corpus_dir, epochs=1, dev_fraction=0.3))
    resumed = pretrain(config(tmp_path / "b", corpus_dir, epochs=2, dev_fraction=0.3))
    assert straight["epochs"] == resumed["epochs"] == 2
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)
    assert a["model"].keys() == b["model"].keys()
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name
    sa, sb = json.loads(a["state"]), json.loads(b["state"])
    for ra, rb in zip(sa["history"], sb["history"]):
        ra.pop("seconds"), rb.pop("seconds")
        assert ra == rb
    assert torch.equal(a["torch_rng"], b["torch_rng"])
    for directory in ("best", "last"):
        assert (tmp_path / "a" / directory / "model.safetensors").is_file()
        assert (tmp_path / "a" / directory / "pretrain_heads.safetensors").is_file()
    # a checkpoint of another model is refused
    with pytest.raises(ValueError, match="another model configuration"):
        pretrain(config(tmp_path / "a", corpus_dir, epochs=3, dev_fraction=0.3,
                        overrides={"hidden_size": 8}))


def test_train_init_loads_the_pretrained_backbone(tmp_path, corpus_dir, pages):
    from scrapy_grownup.data import datasets
    from scrapy_grownup.training.loop import TrainConfig
    from scrapy_grownup.training.trainer import train

    pre = tmp_path / "pre"
    pretrain(config(pre, corpus_dir, epochs=1))
    saved = GrownUpModel.from_pretrained(pre / "best")
    _, doc = GrownUpModel.read_config(pre / "best")
    assert doc["metadata"]["untrained_heads"] == ["node_head"]

    # load_pretrained: the backbone is copied; the untrained content head is not
    fresh = GrownUpModel(saved.config)
    report = load_pretrained(fresh, pre / "best")
    assert report["heads_skipped"] == ["node_head"] and not report["heads_loaded"]
    for name, tensor in saved.backbone.state_dict().items():
        assert torch.equal(fresh.backbone.state_dict()[name], tensor)
    # a backbone of another shape is refused with a clear message
    other = GrownUpModel(saved.config.replace(hidden_size=8))
    with pytest.raises(ModelLoadError, match="does not fit"):
        load_pretrained(other, pre / "best")

    # `grownup train --init`: with lr 0 the fine-tuned backbone is the pre-trained one
    records = datasets.load("dragnet", split="train", limit=6)
    result = train(TrainConfig(out=str(tmp_path / "ft"), preset="tiny", epochs=1, lr=0.0,
                               weight_decay=0.0, init=str(pre / "best"), workers=0,
                               dev_fraction=0.3), records={"dragnet": records})
    tuned = GrownUpModel.from_pretrained(result["model_dir"])
    for name, tensor in saved.backbone.state_dict().items():
        assert torch.equal(tuned.backbone.state_dict()[name], tensor), name


def test_cli_has_pretrain():
    from scrapy_grownup.cli.main import build_parser

    args = build_parser().parse_args(["pretrain", "--data", "c", "--out", "o", "--weights",
                                      '{"site": 0.1}'])
    assert args.data == "c" and args.mask_nodes == 16 and args.mask_rate == 0.85
    with pytest.raises(ValueError, match="unknown loss weights"):
        check_weights({"nope": 1.0})
    assert Unit(1, -1, 0).pages == (1,) and Unit(1, 2, 5).pages == (1, 2)


def test_cross_site_protocols_refuse_a_backbone_pretrained_on_a_test_site(tmp_path, corpus_dir,
                                                                          caplog):
    """`grownup lab evaluate --protocol site-cv / leave-out --init`: a backbone that read pages of a
    test site (labels or not) cannot stand behind a figure on sites the model never saw."""
    import shutil
    from types import SimpleNamespace

    from scrapy_grownup.errors import GrownupError
    from scrapy_grownup.training.crosssite import (FoldPlan, check_init_disjoint,
                                                   pretraining_sites)

    pre = tmp_path / "pre"
    pretrain(config(pre, corpus_dir, epochs=1))
    assert pretraining_sites(pre / "best") == {site_hash(s) for s in SITES}

    def plan(*urls):
        return FoldPlan("fold0", [SimpleNamespace(url=u) for u in urls], set())

    with pytest.raises(GrownupError, match=r"1 of fold0's test sites \(e.g. b.example\)"):
        check_init_disjoint(plan("https://c.example/x", "http://www.b.example/y"), pre / "best")
    check_init_disjoint(plan("https://c.example/x", "https://a.example.org/"), pre / "best")
    check_init_disjoint(FoldPlan("all", [], set()), pre / "best")  # the final model: no test
    # a model whose corpus is gone is used, with a warning that says so
    moved = tmp_path / "moved"
    shutil.copytree(pre / "best", moved)
    doc = json.loads((moved / "config.json").read_text())
    doc["metadata"]["pretrain"]["data"] = str(tmp_path / "gone")
    (moved / "config.json").write_text(json.dumps(doc))
    with caplog.at_level("WARNING"):
        check_init_disjoint(plan("http://b.example/y"), moved)
    assert "cannot be checked" in caplog.text
