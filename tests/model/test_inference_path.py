"""The inference fast paths compute what the training path computes.

The backbone in eval mode without autograd (``_forward_inference``), the index form of the text
blocks (``Featurizer.batch``), the static encoder's word-level tokenization and the deferred
``Article.markdown`` are all speed-ups that must not change a result.
"""

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data

from scrapy_grownup.model import GrownUpModel, ModelConfig
from scrapy_grownup.model.layers import typed_edge_plan

GOLDEN = Path(__file__).parents[1] / "golden"
BLOCKS = [("x_text", 8), ("x_class", 8), ("x_id", 8), ("x_struct", 135), ("x_pos", 32)]
TEXT_BLOCKS = ("x_text", "x_class", "x_id")


def model_for(seed=0, **overrides):
    torch.manual_seed(seed)
    config = ModelConfig.preset("tiny", encoder="static", input_blocks=BLOCKS,
                                feature_version="1", **overrides)
    model = GrownUpModel(config).eval()
    with torch.no_grad():  # non-zero biases, so that every bias is exercised
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.3)
    return model


def tree_page(n, seed, strings=5):
    """A random tree with the featurizer's edge layout; text blocks drawn from a few distinct
    vectors (with repeats and zero rows, as real pages have)."""
    g = torch.Generator().manual_seed(seed)
    parent = [-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, n)]
    parent = torch.tensor(parent, dtype=torch.long)
    child, nodes = torch.arange(1, n), torch.arange(n)
    edge_index = torch.stack([torch.cat([parent[1:], child, nodes]),
                              torch.cat([child, parent[1:], nodes])])
    edge_type = torch.cat([torch.zeros(n - 1, dtype=torch.long),
                           torch.ones(n - 1, dtype=torch.long), torch.full((n,), 2)])
    feats = {}
    for name, size in BLOCKS:
        if name in TEXT_BLOCKS:
            table = torch.cat([torch.zeros(1, size), torch.randn(strings, size, generator=g)])
            index = torch.randint(0, strings + 1, (n,), generator=g)
            feats[name] = table[index]
            feats[name + "_table"], feats[name + "_index"] = table, index
        else:
            feats[name] = torch.randn(n, size, generator=g)
    return Data(edge_index=edge_index, edge_type=edge_type, num_nodes=n, **feats)


def reference(model, batch):
    """The training path's output (eval mode, autograd on)."""
    assert not model.training
    with torch.enable_grad():
        out = model(batch)
    return out.node_logits.detach(), out.page_features.detach()


def fast(model, batch):
    with torch.inference_mode():
        out = model(batch)
    return out.node_logits, out.page_features


def dense_only(batch):
    batch = batch.clone()
    for name in TEXT_BLOCKS:
        del batch[name + "_table"], batch[name + "_index"]
    return batch


def index_only(batch):
    batch = batch.clone()
    for name in TEXT_BLOCKS:
        del batch[name]
    return batch


def collate(pages):
    # Tables are per page: shift each page's indices past the previous pages' tables.
    out = Batch.from_data_list([dense_only(p) for p in pages])
    for name in TEXT_BLOCKS:
        tables, indices, offset = [], [], 0
        for p in pages:
            tables.append(p[name + "_table"])
            indices.append(p[name + "_index"] + offset)
            offset += len(p[name + "_table"])
        out[name + "_table"], out[name + "_index"] = torch.cat(tables), torch.cat(indices)
    return out


@pytest.mark.parametrize("overrides", [
    {},
    {"shared_target_gate": True},
    {"use_lstm": False},
    {"num_transformer_layers": 0, "readout": "mean"},
    {"prelim_sizes": [16]},  # first prelim block without a residual projection
    {"prelim_sizes": [], "num_layers": 3},  # no prelim block
])
def test_inference_path_matches_training_path(overrides):
    model = model_for(**overrides)
    batch = collate([tree_page(n, seed) for seed, n in enumerate([1, 2, 7, 40, 13])])
    want = reference(model, dense_only(batch))
    for form in (dense_only(batch), index_only(batch), batch):
        got = fast(model, form)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_inference_path_on_graphs_that_are_not_trees():
    """Arbitrary typed edges (repeated, missing and shuffled self loops) take the general
    gather / scatter route and still agree."""
    model = model_for()
    g = torch.Generator().manual_seed(3)
    n, e = 30, 120
    page = tree_page(n, 0)
    page.edge_index = torch.randint(0, n, (2, e), generator=g)
    page.edge_type = torch.randint(0, 3, (e,), generator=g)
    want = reference(model, dense_only(page))
    for form in (dense_only(page), index_only(page)):
        for a, b in zip(fast(model, form), want):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    shuffled = dense_only(tree_page(n, 1))
    order = torch.randperm(shuffled.edge_index.shape[1], generator=g)
    shuffled.edge_index, shuffled.edge_type = shuffled.edge_index[:, order], \
        shuffled.edge_type[order]
    for a, b in zip(fast(model, shuffled), reference(model, shuffled)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_autocast_and_other_dtypes():
    """Autocast takes the plain path (its in-place ops are not autocast); a float64 model runs
    the inference path in float64."""
    model = model_for()
    batch = dense_only(collate([tree_page(30, 0), tree_page(12, 1)]))
    want = reference(model, batch)[0]
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        got = model(batch).node_logits
    torch.testing.assert_close(got.float(), want, atol=0.1, rtol=0.05)
    model = model.double()
    batch = batch.clone()
    for name, _ in BLOCKS:
        batch[name] = batch[name].double()
    got = fast(model, batch)[0]
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, reference(model, batch)[0], atol=1e-9, rtol=1e-9)


def test_edge_plan_of_a_tree():
    page = tree_page(20, 0)
    plan = typed_edge_plan(page.edge_index, page.edge_type, 20)
    assert plan.types[2] is None  # self loops: no gather, no scatter
    internal = torch.unique(page.edge_index[0, page.edge_type == 0])
    # parent -> child sources and child -> parent targets: internal nodes only, one shared set
    assert plan.types[0][0] == plan.types[1][2] != 0
    assert torch.equal(plan.row_sets[plan.types[0][0]], internal)


def test_inference_weights_follow_parameter_updates():
    """Fused weights are cached; an in-place update (optimizer step, load_state_dict) must
    invalidate them."""
    model = model_for()
    batch = collate([tree_page(9, 0), tree_page(5, 1)])
    fast(model, batch)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.9)
    for a, b in zip(fast(model, batch), reference(model, dense_only(batch))):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_index_form_is_checked():
    model = model_for()
    page = index_only(tree_page(6, 0))
    page.x_text_table = torch.zeros(3, 5)
    with pytest.raises(ValueError, match="x_text"):
        fast(model, page)
    del page.x_text_table
    with pytest.raises(ValueError, match="missing"):
        fast(model, page)


# -- featurizer: Featurizer.batch is Batch.from_data_list(Featurizer.graphs) --------------------

@pytest.fixture(scope="module")
def golden_pages():
    from scrapy_grownup.page.dom import parse_page

    return [parse_page(p.read_bytes(), url="https://example.com/" + p.name)
            for p in sorted(GOLDEN.glob("*.html"))]


def test_featurizer_batch_matches_graphs(golden_pages):
    from scrapy_grownup.graph.featurizer import Featurizer

    featurizer = Featurizer("static")
    pages = golden_pages[:4]
    want = Batch.from_data_list(featurizer.graphs(pages), exclude_keys=["page"])
    got = featurizer.batch(pages)
    assert got.num_nodes == want.num_nodes and got.num_graphs == want.num_graphs
    for name in TEXT_BLOCKS:
        dense = getattr(got, name + "_table")[getattr(got, name + "_index")]
        assert torch.equal(dense, getattr(want, name))
        # each distinct vector once
        assert len(torch.unique(getattr(got, name + "_table"), dim=0)) == \
            len(getattr(got, name + "_table"))
    for name in ("x_struct", "x_pos", "batch", "ptr", "truncated"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    edges = lambda b: sorted(zip(*b.edge_index.tolist(), b.edge_type.tolist()))  # noqa: E731
    assert edges(got) == edges(want)


def test_shipped_model_scores_do_not_depend_on_the_batch_form(golden_pages):
    from scrapy_grownup.extractor import ArticleExtractor

    extractor = ArticleExtractor.from_pretrained("fast", device="cpu", runtime="torch")
    pages = golden_pages
    dense = Batch.from_data_list(extractor.featurizer.graphs(pages), exclude_keys=["page"])
    if extractor.model.config.page_type_signals:  # its page-type head reads them (x_signals)
        from scrapy_grownup.graph.signals import page_signals

        dense.x_signals = torch.from_numpy(np.stack([page_signals(p) for p in pages]))
    want = reference(extractor.model, dense)[0]
    got = fast(extractor.model, extractor.featurizer.batch(pages))[0]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    scores = np.concatenate(extractor.score(pages))
    np.testing.assert_allclose(scores, torch.sigmoid(want).numpy(), atol=1e-5)


# -- encoders ------------------------------------------------------------------------------------

TRICKY = ["Hello, World!", "don't stop-me now!!", "caf\u00e9 na\u00efve \u00c9COLE",
          "\u4e2d\u6587abc \u65e5\u672c\u8a9e", "a\u00a0b\u2003c", "x" * 150 + " y",
          "\u200bzero width", "ab\x1ccd ef", "x\x1fy", "tab\tnew\nline", "e\u0301 combining",
          "emoji \U0001F600 ok", "<b>tags</b> & amp;", "nav menu item 2", "42", "...", "\x07bell"]


def test_static_word_tokenization_matches_the_tokenizer():
    from scrapy_grownup.encoders.static import StaticEncoder

    encoder = StaticEncoder(cache_size=0)
    for texts in (TRICKY, TRICKY[::-1], TRICKY[:3]):  # later calls reuse cached words
        ids, lengths = encoder._token_ids(texts)
        want = [e.ids for e in encoder.tokenizer.encode_batch_fast(texts,
                                                                   add_special_tokens=False)]
        assert lengths.tolist() == [len(w) for w in want]
        assert ids.tolist() == [i for w in want for i in w]
    encoder.clear_cache()
    assert encoder._token_ids(TRICKY)[1].sum() == sum(
        len(e.ids) for e in encoder.tokenizer.encode_batch_fast(TRICKY, add_special_tokens=False))


def test_encode_indexed_is_encode():
    from scrapy_grownup.encoders import get_encoder

    encoder = get_encoder("static")
    texts = ["", "a b", "  a b ", "c", "a b", "   ", "c"]
    table, index = encoder.encode_indexed(texts)
    assert table.shape[0] == 3 and not table[0].any()
    np.testing.assert_array_equal(table[index], encoder.encode(texts))
    assert index.tolist() == [0, 1, 1, 2, 1, 0, 2]


# -- deferred markdown ---------------------------------------------------------------------------

def test_deferred_markdown():
    from scrapy_grownup.output.article import Article

    calls = []
    article = Article(url=None, title="t", text="x")
    article.defer_markdown(lambda: calls.append(1) or "# md")
    assert calls == []
    assert article.markdown == "# md" and article.markdown == "# md" and calls == [1]
    other = Article(url=None, title="t", text="x")
    other.defer_markdown(lambda: "# md")
    assert other == article and other.to_dict()["markdown"] == "# md"
    pickled = Article(url=None, title="t", text="x")
    pickled.defer_markdown(lambda: "lazy")  # a lambda does not pickle: the value is sent
    assert pickle.loads(pickle.dumps(pickled)).markdown == "lazy"
    overridden = Article(url=None, title="t", text="x")
    overridden.defer_markdown(lambda: "lazy")
    overridden.markdown = "set"
    assert overridden.markdown == "set"


def test_extractor_markdown_is_the_same_deferred_or_not(golden_pages):
    from scrapy_grownup.page.dom import PageStructure
    from scrapy_grownup.extractor import ArticleExtractor, markdown_builder
    from scrapy_grownup.output.markdown import to_markdown

    extractor = ArticleExtractor.from_pretrained("fast", device="cpu")
    body = (GOLDEN / "article_lists.html").read_bytes()
    article = extractor.extract(body, url="https://example.com/a")
    assert "_markdown_build" in article.__dict__  # not built yet
    assert article.markdown and "_markdown_build" not in article.__dict__
    eager = ArticleExtractor.from_pretrained("fast", device="cpu", output_format="markdown")
    assert eager.extract(body, url="https://example.com/a").markdown == article.markdown
    for page in golden_pages:
        keep = np.random.default_rng(0).random(page.num_nodes) < 0.6
        build = markdown_builder(page, keep)
        held = [cell.cell_contents for cell in build.__closure__]
        slim = next(c for c in held if isinstance(c, PageStructure))
        assert slim is not page and slim.positions is None
        pre = slim.tags.index("pre") if "pre" in slim.tags else slim.num_nodes
        assert not any(slim.class_words[:pre])  # only inside <pre> (its code lines)
        assert build() == to_markdown(page, keep)
