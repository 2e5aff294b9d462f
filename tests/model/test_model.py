"""The GROWN+UP model: layer maths against hand/naive computations, batching, heads, persistence."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data

from scrapy_grownup.errors import ModelLoadError
from scrapy_grownup.model import (
    PRESETS, ArcFaceHead, GraphConvGated, GrownUpBackbone, GrownUpModel, ModelConfig,
    count_parameters, masked_cross_entropy, plan_attention_groups, random_flip_positions,
    weighted_bce_with_smoothing,
)

BLOCKS = [("x_text", 8), ("x_class", 8), ("x_id", 8), ("x_struct", 135), ("x_pos", 32)]


def tiny_config(**overrides):
    return ModelConfig.preset("tiny", encoder="static", input_blocks=BLOCKS, feature_version="1",
                              **overrides)


def tree_page(n, seed, blocks=BLOCKS):
    """Random tree with the featurizer's edge layout (parent->child 0, child->parent 1, self 2)."""
    g = torch.Generator().manual_seed(seed)
    parent = torch.tensor([-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, n)],
                          dtype=torch.long)
    child, nodes = torch.arange(1, n), torch.arange(n)
    edge_index = torch.stack([torch.cat([parent[1:], child, nodes]),
                              torch.cat([child, parent[1:], nodes])])
    edge_type = torch.cat([torch.zeros(n - 1, dtype=torch.long),
                           torch.ones(n - 1, dtype=torch.long), torch.full((n,), 2)])
    feats = {name: torch.randn(n, size, generator=g) for name, size in blocks}
    return Data(edge_index=edge_index, edge_type=edge_type, num_nodes=n, **feats)


def tiny_model(seed=0, **overrides):
    torch.manual_seed(seed)
    return GrownUpModel(tiny_config(**overrides))


# -- GraphConvGated -----------------------------------------------------------------------------

def naive_conv(conv, x, edge_index, edge_type):
    """Per-edge loop straight from the paper's equation, reading the per-type weight blocks."""
    k, t = conv.out_dim, conv.num_types
    w = conv.lin_msg.weight.view(t, k, -1)
    b = conv.lin_msg.bias.view(t, k)
    c = conv.lin_gate_src.weight.view(t, k, -1)
    bd = conv.lin_gate_dst.weight.view(-1, k, x.shape[1])
    out = torch.zeros(x.shape[0], k, dtype=torch.float64)
    for e in range(edge_index.shape[1]):
        j, i, typ = (int(v) for v in (edge_index[0, e], edge_index[1, e], edge_type[e]))
        bt = bd[0] if conv.shared_target_gate else bd[typ]
        gate = torch.sigmoid(bt.double() @ x[i].double() + c[typ].double() @ x[j].double())
        out[i] += gate * (w[typ].double() @ x[j].double() + b[typ].double())
    return out


def test_graph_conv_gated_hand_computed():
    conv = GraphConvGated(1, 1)
    with torch.no_grad():
        conv.lin_msg.weight.copy_(torch.tensor([[1.0], [2.0], [3.0]]))   # W_parent, W_child, W_self
        conv.lin_msg.bias.copy_(torch.tensor([0.5, 0.0, -1.0]))
        conv.lin_gate_dst.weight.copy_(torch.tensor([[1.0], [-1.0], [0.0]]))  # B_k (x_i)
        conv.lin_gate_src.weight.copy_(torch.tensor([[0.0], [1.0], [2.0]]))   # C_k (x_j)
    x = torch.tensor([[1.0], [2.0]])  # node 0 is the parent of node 1
    edge_index = torch.tensor([[0, 1, 0, 1], [1, 0, 0, 1]])
    edge_type = torch.tensor([0, 1, 2, 2])
    sig = lambda v: 1.0 / (1.0 + math.exp(-v))  # noqa: E731
    # node 0 hears its child (type 1: gate s(-1*1 + 1*2), msg 2*2) and itself (s(2*1), 3*1-1)
    h0 = sig(1.0) * 4.0 + sig(2.0) * 2.0
    # node 1 hears its parent (type 0: gate s(1*2 + 0*1), msg 1*1+0.5) and itself (s(2*2), 3*2-1)
    h1 = sig(2.0) * 1.5 + sig(4.0) * 5.0
    out = conv(x, edge_index, edge_type)
    assert out.squeeze(1).tolist() == pytest.approx([h0, h1], abs=1e-6)
    assert h0 == pytest.approx(4.685828, abs=1e-6) and h1 == pytest.approx(6.231265, abs=1e-6)


@pytest.mark.parametrize("shared", [False, True])
def test_graph_conv_gated_matches_naive_loop(shared):
    torch.manual_seed(0)
    conv = GraphConvGated(5, 4, shared_target_gate=shared)
    with torch.no_grad():
        conv.lin_msg.bias.normal_()
    page = tree_page(7, seed=1, blocks=[("x", 5)])
    out = conv(page.x, page.edge_index, page.edge_type)
    ref = naive_conv(conv, page.x, page.edge_index, page.edge_type)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)
    # target-gate weights: one block per type (paper) or one shared block (reference code)
    assert conv.lin_gate_dst.weight.shape == ((4 if shared else 12), 5)


def pyg_gated_conv(conv):
    """The same convolution as a torch_geometric ``MessagePassing`` layer reading ``conv``'s
    weights: the reference the layer's own sum (``index_add_``) is checked against."""
    from torch_geometric.nn import MessagePassing

    class Reference(MessagePassing):
        def __init__(self):
            super().__init__(aggr="add", node_dim=0)

        def forward(self, x, edge_index, edge_type):
            n, k, t = x.shape[0], conv.out_dim, conv.num_types
            src = edge_index[0] * t + edge_type
            msg = conv.lin_msg(x).view(n * t, k).index_select(0, src)
            gate = conv.lin_gate_src(x).view(n * t, k).index_select(0, src)
            if conv.shared_target_gate:
                gate = gate + conv.lin_gate_dst(x).index_select(0, edge_index[1])
            else:
                dst = edge_index[1] * t + edge_type
                gate = gate + conv.lin_gate_dst(x).view(n * t, k).index_select(0, dst)
            return self.propagate(edge_index, msg=msg, gate=gate, size=(n, n))

        def message(self, msg, gate):
            return torch.sigmoid(gate) * msg

    return Reference()


@pytest.mark.parametrize("shared", [False, True])
def test_graph_conv_gated_sums_as_torch_geometric_propagate(shared):
    """Values and gradients equal to a ``MessagePassing`` layer with ``aggr="add"``."""
    torch.manual_seed(3)
    conv = GraphConvGated(6, 5, shared_target_gate=shared)
    page = Batch.from_data_list([tree_page(n, seed=n, blocks=[("x", 6)]) for n in (1, 9, 4)])
    x = page.x.clone().requires_grad_(True)
    ours = conv(x, page.edge_index, page.edge_type)
    (g_ours,) = torch.autograd.grad(ours.square().sum(), x)
    reference = pyg_gated_conv(conv)(x, page.edge_index, page.edge_type)
    (g_ref,) = torch.autograd.grad(reference.square().sum(), x)
    torch.testing.assert_close(ours, reference)
    torch.testing.assert_close(g_ours, g_ref)


def test_pooling_matches_torch_geometric():
    """``pooling``'s mean, max and padding against torch_geometric's, a page without rows and
    gradients included."""
    from torch_geometric.nn import global_max_pool, global_mean_pool
    from torch_geometric.utils import to_dense_batch

    from scrapy_grownup.model.pooling import dense_batch, max_pool, mean_pool

    torch.manual_seed(5)
    batch = torch.tensor([0, 0, 0, 2, 2, 3, 3, 3, 3, 5])  # pages 1 and 4 have no rows
    x = torch.randn(len(batch), 4, requires_grad=True)
    for ours, theirs in ((mean_pool(x, batch, 6), global_mean_pool(x, batch, size=6)),
                         (max_pool(x, batch, 6), global_max_pool(x, batch, size=6))):
        torch.testing.assert_close(ours, theirs)
        torch.testing.assert_close(torch.autograd.grad(ours.sum(), x)[0],
                                   torch.autograd.grad(theirs.sum(), x)[0])
    assert not mean_pool(x, batch, 6)[[1, 4]].any() and not max_pool(x, batch, 6)[[1, 4]].any()
    for length in (4, 2):  # every row, and pages cut to their first two rows
        dense, mask = dense_batch(x, batch, 6, length)
        ref_dense, ref_mask = to_dense_batch(x, batch, batch_size=6, max_num_nodes=length)
        torch.testing.assert_close(dense, ref_dense)
        assert torch.equal(mask, ref_mask)
    dense, mask = dense_batch(x, batch, 6, 4)
    torch.testing.assert_close(torch.autograd.grad(dense.square().sum(), x)[0], 2 * x.detach())


def test_serving_a_model_does_not_import_torch_geometric():
    """Loading ``fast`` and extracting a page needs torch alone: torch_geometric's import (its
    datasets, LLM tools and ``torch._dynamo``) would add seconds to every start."""
    code = (
        "import sys\n"
        "from scrapy_grownup import ArticleExtractor\n"
        "ex = ArticleExtractor.from_pretrained('fast')\n"
        "page = b'<html><body><article><h1>A title</h1>' + b'<p>A sentence of the story.</p>' * 20"
        " + b'</article></body></html>'\n"
        "assert 'sentence of the story' in ex.extract(page).text\n"
        "bad = sorted(m for m in ('torch_geometric', 'transformers', 'torch._dynamo') "
        "if m in sys.modules)\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_edge_types_use_different_weights():
    torch.manual_seed(0)
    conv = GraphConvGated(5, 4)
    page = tree_page(6, seed=2, blocks=[("x", 5)])
    out = conv(page.x, page.edge_index, page.edge_type)
    swapped = page.edge_type.clone()
    swapped[page.edge_type == 0], swapped[page.edge_type == 1] = 1, 0
    assert not torch.allclose(out, conv(page.x, page.edge_index, swapped), atol=1e-4)
    # an edge type's weights only affect edges of that type: zeroing the parent weights leaves
    # the root (which has no parent) unchanged and changes its children
    with torch.no_grad():
        conv.lin_msg.weight[:4] = 0
        conv.lin_msg.bias[:4] = 1.0
    out2 = conv(page.x, page.edge_index, page.edge_type)
    torch.testing.assert_close(out2[0], out[0])
    assert not torch.allclose(out2[1:], out[1:])


# -- backbone / model ---------------------------------------------------------------------------

def test_shapes_for_a_batch_of_pages():
    model = tiny_model(num_page_types=3, num_roles=5).eval()
    sizes = [5, 17, 1]
    batch = Batch.from_data_list([tree_page(n, seed=i) for i, n in enumerate(sizes)])
    with torch.no_grad():
        out = model(batch)
    n, k = sum(sizes), model.config.hidden_size
    assert out.node_logits.shape == (n,)
    assert out.node_features.shape == (n, k)
    assert out.page_features.shape == (3, k)
    assert out.page_type_logits.shape == (3, 3)
    assert out.role_logits.shape == (n, 5)
    assert torch.isfinite(out.node_logits).all() and torch.isfinite(out.page_features).all()
    # a single Data (no batch vector) works too
    with torch.no_grad():
        single = model(tree_page(4, seed=9))
    assert single.page_features.shape == (1, k) and single.node_logits.shape == (4,)


@pytest.mark.parametrize("overrides", [{}, {"num_transformer_layers": 0, "readout": "mean"},
                                       {"readout": "max"}])
def test_padding_invariance(overrides):
    model = tiny_model(**overrides).eval()
    pages = [tree_page(n, seed=10 + n) for n in (3, 25, 9)]
    with torch.no_grad():
        together = model(Batch.from_data_list(pages))
        offset = 0
        for i, page in enumerate(pages):
            alone = model(Batch.from_data_list([page]))
            n = page.num_nodes
            torch.testing.assert_close(together.node_logits[offset:offset + n], alone.node_logits,
                                       atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(together.page_features[i], alone.page_features[0],
                                       atol=1e-5, rtol=1e-4)
            offset += n


def test_node_context_reads_the_page_and_nothing_of_other_pages():
    """``node_context``: a node's content logit reads ``[node, its own page's readout]``, and
    batching with other pages does not move it."""
    model = tiny_model(num_transformer_layers=0, readout="mean", node_context=True,
                       node_head_hidden=8).eval()
    k = model.config.hidden_size
    assert model.node_head.net[0].in_features == 2 * k
    pages = [tree_page(n, seed=40 + n) for n in (6, 30, 2)]
    with torch.no_grad():
        together = model(Batch.from_data_list(pages))
        alone = model(Batch.from_data_list([pages[1]]))
        torch.testing.assert_close(together.node_logits[6:36], alone.node_logits,
                                   atol=1e-5, rtol=1e-4)
        nodes, page = model.backbone(Batch.from_data_list([pages[1]]))
        by_hand = model.node_head(torch.cat([nodes, page.expand(len(nodes), -1)], dim=1))
        torch.testing.assert_close(alone.node_logits, by_hand)


def test_attention_grouping_and_query_chunks_do_not_change_results():
    model = tiny_model().eval()
    batch = Batch.from_data_list([tree_page(n, seed=n) for n in (40, 3, 12, 7)])
    with torch.no_grad():
        ref = model(batch)
        model.backbone.max_attention_cells = 200  # forces groups and query chunking
        small = model(batch)
    torch.testing.assert_close(small.node_logits, ref.node_logits, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(small.page_features, ref.page_features, atol=1e-5, rtol=1e-4)


def test_plan_attention_groups():
    assert plan_attention_groups([3, 4, 5], 10_000) == [[0, 1, 2]]
    groups = plan_attention_groups([100, 2, 3, 99, 1], 2 * 101 * 101)
    assert sorted(p for g in groups for p in g) == [0, 1, 2, 3, 4]
    assert groups[0] == [0, 3]  # the two long pages together, the short ones apart
    assert all(g == sorted(g) for g in groups)
    assert plan_attention_groups([50], 10) == [[0]]  # an oversized page still runs alone


def test_gradients_reach_every_parameter():
    model = tiny_model(num_page_types=3, num_roles=4, node_head_hidden=8).train()
    batch = Batch.from_data_list([tree_page(n, seed=n) for n in (6, 11)])
    out = model(batch, page_type_labels=torch.tensor([0, 2]))
    targets = (torch.arange(batch.num_nodes) % 3 - 1).float()  # includes -1 (ignored)
    loss = (weighted_bce_with_smoothing(out.node_logits, targets, 1.2, 0.8)
            + torch.nn.functional.cross_entropy(out.page_type_logits, torch.tensor([0, 2]))
            + torch.nn.functional.cross_entropy(out.role_logits, torch.arange(17) % 4))
    loss.backward()
    no_grad = [name for name, p in model.named_parameters()
               if p.grad is None or not torch.isfinite(p.grad).all() or not p.grad.abs().sum() > 0]
    assert no_grad == []


def test_lstm_is_shared_and_replaces_features():
    model = tiny_model(num_layers=3)
    lstm_params = [n for n, _ in model.named_parameters() if "lstm" in n]
    assert sorted(lstm_params) == ["backbone.lstm.bias_hh", "backbone.lstm.bias_ih",
                                   "backbone.lstm.weight_hh", "backbone.lstm.weight_ih"]
    calls = []
    model.backbone.lstm.register_forward_hook(lambda m, inp, out: calls.append((inp, out)))
    model.eval()(tree_page(5, seed=0))
    assert len(calls) == 3
    (x0, (h0, c0)), _ = calls[0]
    assert not h0.any() and not c0.any()        # zero state per node before layer 1
    assert calls[1][0][1][0] is calls[0][1][0]  # state carried over layers


def test_input_blocks_are_checked():
    model = tiny_model().eval()
    page = tree_page(4, seed=0)
    page.x_text = torch.zeros(4, 384)
    with pytest.raises(ValueError, match="x_text"):
        model(page)
    del page.x_text
    with pytest.raises(ValueError, match="missing"):
        model(page)
    page = tree_page(4, seed=0)
    page.edge_type[0] = 3
    with pytest.raises(ValueError, match="edge_type"):
        model(page)


def test_random_flip_positions():
    pages = [tree_page(n, seed=n) for n in (4, 6, 5)]
    batch = Batch.from_data_list(pages)
    before = batch.x_pos.clone()
    random_flip_positions(batch, torch.Generator().manual_seed(0))
    ratio = batch.x_pos / before
    assert set(ratio.round().unique().tolist()) == {-1.0, 1.0}
    for g in range(3):
        rows = ratio[batch.batch == g]
        assert (rows == rows[0]).all()  # one sign per graph and column
    assert not (ratio[batch.batch == 0][0] == ratio[batch.batch == 1][0]).all() or \
        not (ratio[batch.batch == 1][0] == ratio[batch.batch == 2][0]).all()
    # reproducible with the same seed
    again = Batch.from_data_list(pages)
    random_flip_positions(again, torch.Generator().manual_seed(0))
    torch.testing.assert_close(again.x_pos, batch.x_pos)


def test_drop_attributes_zeroes_whole_pages_and_nothing_else():
    from scrapy_grownup.training.loop import drop_attributes

    pages = [tree_page(5, seed=n) for n in range(40)]
    batch = Batch.from_data_list(pages)
    assert batch.x_class.abs().sum(1).gt(0).all() and batch.x_id.abs().sum(1).gt(0).all()
    before = batch.clone()
    drop_attributes(batch, 0.5, torch.Generator().manual_seed(0))
    dropped = [bool((batch.x_class[batch.batch == g] == 0).all()) for g in range(40)]
    for g, gone in enumerate(dropped):
        rows = batch.batch == g
        if gone:  # a page loses its class and its id vectors together
            assert (batch.x_id[rows] == 0).all()
        else:
            torch.testing.assert_close(batch.x_class[rows], before.x_class[rows])
            torch.testing.assert_close(batch.x_id[rows], before.x_id[rows])
    assert 8 <= sum(dropped) <= 32
    for name in ("x_text", "x_struct", "x_pos"):  # only class and id are touched
        torch.testing.assert_close(getattr(batch, name), getattr(before, name))
    untouched = before.clone()
    drop_attributes(untouched, 0.0, torch.Generator().manual_seed(0))
    torch.testing.assert_close(untouched.x_class, before.x_class)


def test_attribute_dropout_outside_0_1_is_one_line(capsys):
    from scrapy_grownup.cli.main import main

    assert main(["lab", "evaluate", "--protocol", "site-cv", "--attribute-dropout", "1.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["grownup lab evaluate: error: --attribute-dropout 1.5: a share between 0 and 1"]


def test_average_last_keeps_the_mean_of_the_last_epochs_steps(monkeypatch):
    """fit_epochs with average_last=k ends with the mean of the weights after every step of
    the last k epochs (here each fake step sets every weight to 10 * epoch + step)."""
    from scrapy_grownup.training import loop

    class Store:
        def num_nodes(self, i):
            return 5

    def fake_epoch(model, store, indices, aux, cfg, optimizer, epoch, role_weights, scheduler,
                   after_step=None):
        for step in (1, 2):
            with torch.no_grad():
                for p in model.parameters():
                    p.fill_(10.0 * epoch + step)
            if after_step is not None:
                after_step()
        return {"loss": 0.0}

    monkeypatch.setattr(loop, "train_epoch", fake_epoch)
    for average_last, expected in ((0, 32.0), (1, 31.5), (2, 26.5), (3, 21.5)):
        model = tiny_model()
        cfg = loop.TrainConfig(out="unused", epochs=3, average_last=average_last)
        loop.fit_epochs(model, Store(), [0, 1], None, cfg)  # no role loss: no labels read
        assert all(torch.allclose(p, torch.full_like(p, expected)) for p in model.parameters())
    with pytest.raises(ValueError, match="average_last 4"):
        loop.fit_epochs(tiny_model(), Store(), [0], None,
                        loop.TrainConfig(out="unused", epochs=3, average_last=4))


def test_average_last_beyond_the_epochs_is_one_line(capsys):
    from scrapy_grownup.cli.main import main

    assert main(["lab", "evaluate", "--protocol", "site-cv", "--epochs", "4",
                 "--average-last", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["grownup lab evaluate: error: --average-last 5: between 0 and --epochs (4)"]


# -- heads and loss -----------------------------------------------------------------------------

def test_li_arcface_logits_by_hand():
    head = ArcFaceHead(2, 3, scale=5.0, margin=0.3)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 1.0], [0.0, 2.0], [-1.0, 1.0]]))
    feats = torch.tensor([[3.0, 0.0]])  # angles pi/4, pi/2, 3pi/4 to the three class vectors
    plain = head(feats)
    torch.testing.assert_close(plain, torch.tensor([[2.5, 0.0, -2.5]]), atol=1e-5, rtol=0)
    margin = head(feats, torch.tensor([1]))
    torch.testing.assert_close(margin, torch.tensor([[2.5, -5 * 2 * 0.3 / math.pi, -2.5]]),
                               atol=1e-5, rtol=0)
    assert head(feats, torch.tensor([-1])).tolist() == plain.tolist()  # -1: no margin
    expected = -torch.log_softmax(margin, -1)[0, 1]
    torch.testing.assert_close(head.loss(feats, torch.tensor([1])), expected)


def test_arcface_margin_behaviour():
    torch.manual_seed(0)
    head = ArcFaceHead(6, 4, scale=5.0, margin=0.3)
    feats = torch.randn(5, 6)
    labels = torch.tensor([0, 3, -1, 2, 1])
    plain, margin = head(feats), head(feats, labels)
    # only the true class's logit moves, by exactly s * 2m / pi; unlabelled rows are untouched
    diff = plain - margin
    expected = torch.zeros_like(diff)
    rows = labels >= 0
    expected[rows.nonzero().squeeze(1), labels[rows]] = 5.0 * 2 * 0.3 / math.pi
    torch.testing.assert_close(diff, expected, atol=1e-5, rtol=0)
    # logits live in [-s, s]; scaling a feature vector changes nothing (cosine classifier)
    assert plain.abs().max() <= 5.0 + 1e-5
    torch.testing.assert_close(head(3.7 * feats), plain, atol=1e-5, rtol=1e-5)
    # the margin makes the training loss harder than the plain cross-entropy
    assert head.loss(feats, labels) > torch.nn.functional.cross_entropy(plain, labels,
                                                                        ignore_index=-1)
    probs = head.probabilities(feats)
    torch.testing.assert_close(probs, torch.softmax(plain, -1))
    torch.testing.assert_close(probs.sum(-1), torch.ones(5))
    # no labelled row: a zero loss that still backpropagates (no NaN)
    feats.requires_grad_(True)
    empty = head.loss(feats, torch.full((5,), -1))
    empty.backward()
    assert empty.item() == 0.0 and torch.isfinite(feats.grad).all()


def test_arcface_training_separates_classes():
    torch.manual_seed(0)
    centers = torch.randn(3, 8)
    labels = torch.arange(60) % 3
    feats = centers[labels] + 0.3 * torch.randn(60, 8)
    head = ArcFaceHead(8, 3)
    opt = torch.optim.Adam(head.parameters(), lr=0.05)
    for _ in range(60):
        opt.zero_grad()
        head.loss(feats, labels).backward()
        opt.step()
    assert (head(feats).argmax(1) == labels).float().mean() == 1.0


def test_page_type_and_role_heads_shapes_and_gradients():
    model = tiny_model(num_page_types=7, num_roles=6,
                       page_type_names=[f"g{i}" for i in range(7)]).train()
    assert model.page_type_names[3] == "g3" and model.role_names == [f"role_{i}" for i in range(6)]
    batch = Batch.from_data_list([tree_page(n, seed=n) for n in (4, 9, 6)])
    page_type_y = torch.tensor([2, -1, 6])
    out = model(batch, page_type_labels=page_type_y)
    assert out.page_type_logits.shape == (3, 7) and out.role_logits.shape == (19, 6)
    role_y = torch.full((19,), -1)
    role_y[:5] = torch.tensor([0, 1, 2, 5, 5])
    loss = masked_cross_entropy(out.page_type_logits, page_type_y) + \
        masked_cross_entropy(out.role_logits, role_y, torch.tensor([0.5, 1, 1, 1, 1, 2.0]))
    loss.backward()
    for name in ("page_type_head.weight", "role_head.net.weight",
                 "backbone.prelim.0.op.lin.weight"):
        grad = dict(model.named_parameters())[name].grad
        assert grad is not None and grad.abs().sum() > 0, name
    roles, page_type = model.eval().head_probabilities(model(batch))
    assert roles.shape == (19, 6) and page_type.shape == (3, 7)
    assert np.allclose(roles.sum(1), 1, atol=1e-5) and np.allclose(page_type.sum(1), 1, atol=1e-5)
    # without heads: no outputs
    plain = tiny_model().eval()
    out = plain(batch)
    assert out.page_type_logits is None and out.role_logits is None
    assert plain.head_probabilities(out) == (None, None)


def test_masked_cross_entropy():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [5.0, -5.0]], requires_grad=True)
    targets = torch.tensor([0, -1, 1])
    expected = torch.nn.functional.cross_entropy(logits[[0, 2]], targets[[0, 2]])
    torch.testing.assert_close(masked_cross_entropy(logits, targets), expected)
    masked_cross_entropy(logits, targets).backward()
    assert (logits.grad[1] == 0).all()
    assert masked_cross_entropy(logits, torch.tensor([-1, -1, -1])).item() == 0.0


def test_head_names_are_validated():
    with pytest.raises(ValueError, match="page_type_names"):
        tiny_config(num_page_types=3, page_type_names=["a", "b"])
    with pytest.raises(ValueError, match="duplicate role_names"):
        tiny_config(num_roles=2, role_names=["a", "a"])
    cfg = tiny_config(num_page_types=2, page_type_names=["x", "y"])
    assert ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    # a config written before the name fields existed still reads
    old = cfg.to_dict()
    del old["genre_names"], old["role_names"]
    assert ModelConfig.from_dict(old).page_type_names == []


def test_page_type_fields_keep_their_saved_names_in_files():
    """``ModelConfig`` says "page type"; saved configs keep their keys (``SAVED_CONFIG_KEYS``)
    and saved weights their tensor names (``saved_tensor_name``), read either way."""
    from scrapy_grownup.model.config import (SAVED_CONFIG_KEYS, model_tensor_name,
                                             saved_config_keys, saved_tensor_name)

    cfg = tiny_config(num_page_types=2, page_type_names=["x", "y"], page_type_hidden=8)
    saved = cfg.to_dict()
    assert saved["num_genres"] == 2 and saved["genre_names"] == ["x", "y"]
    assert saved["genre_hidden"] == 8 and not set(saved) & set(SAVED_CONFIG_KEYS)
    assert ModelConfig.from_dict(saved) == cfg
    assert ModelConfig.from_dict(saved_config_keys(saved)) == cfg  # the code's spelling too
    with pytest.raises(ValueError, match="given twice"):
        ModelConfig.from_dict({**saved, "num_page_types": 2})
    # --model-overrides written with the saved keys still apply
    assert ModelConfig.preset("tiny", input_blocks=BLOCKS, feature_version="1",
                              num_genres=3).num_page_types == 3
    for name, on_disk in (("page_type_head.weight", "genre_head.weight"),
                          ("page_type_readout.net.1.bias", "genre_readout.net.1.bias"),
                          ("page_type_norm.running_mean", "genre_norm.running_mean"),
                          ("page_type_head", "genre_head"),
                          ("role_head.net.weight", "role_head.net.weight")):
        assert saved_tensor_name(name) == on_disk
        assert model_tensor_name(on_disk) == model_tensor_name(name) == name
    model = tiny_model(num_page_types=2)
    assert {saved_tensor_name(n) for n in model.state_dict()} >= {"genre_head.weight"}


def test_weighted_bce_ignores_unlabelled_nodes():
    logits = torch.tensor([2.0, -1.0, 0.5, 3.0])
    targets = torch.tensor([1.0, 0.0, -1.0, 1.0])
    loss = weighted_bce_with_smoothing(logits, targets, pos_weight=1.2, neg_weight=0.8,
                                       smoothing=0.01)

    def bce(z, y):
        p = 1 / (1 + math.exp(-z))
        return -(y * math.log(p) + (1 - y) * math.log(1 - p))

    hi, lo = 1 - 0.005, 0.005
    expected = (1.2 * bce(2.0, hi) + 0.8 * bce(-1.0, lo) + 1.2 * bce(3.0, hi)) / 3
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    # the ignored node's logit gets no gradient, whatever its value
    logits.requires_grad_(True)
    weighted_bce_with_smoothing(logits, targets).backward()
    assert logits.grad[2] == 0 and (logits.grad[[0, 1, 3]] != 0).all()
    # a mask removes nodes too; nothing left -> 0, not NaN
    masked = weighted_bce_with_smoothing(logits, targets, mask=torch.tensor([0, 0, 1, 0]))
    assert masked.item() == 0.0



def test_weighted_bce_scales_each_node_by_its_pages_weight():
    logits = torch.tensor([2.0, -1.0, 0.5, 3.0])
    targets = torch.tensor([1.0, 0.0, -1.0, 1.0])
    plain = weighted_bce_with_smoothing(logits, targets, reduction="none")
    weight = torch.tensor([3.0, 0.5, 7.0, 1.0])
    weighted = weighted_bce_with_smoothing(logits, targets, reduction="none", node_weight=weight)
    assert torch.allclose(weighted, plain * torch.tensor([3.0, 0.5, 0.0, 1.0]))
    # the mean still divides by the counted nodes: weights that average 1 keep the loss's scale
    mean = weighted_bce_with_smoothing(logits, targets, node_weight=weight)
    assert mean.item() == pytest.approx(float((plain * torch.tensor([3.0, 0.5, 0, 1])).sum()) / 3)
    ones = weighted_bce_with_smoothing(logits, targets, node_weight=torch.ones(4))
    assert ones.item() == pytest.approx(weighted_bce_with_smoothing(logits, targets).item())


# -- config -------------------------------------------------------------------------------------

def test_config_round_trip_and_presets():
    from scrapy_grownup.graph.layout import LAYOUT_DIM

    for name in PRESETS:
        cfg = ModelConfig.preset(name, encoder="minilm", feature_version="1")
        assert cfg.input_dim == 3 * 384 + 135 + 32 + LAYOUT_DIM
        again = ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
        assert again == cfg
    assert ModelConfig.preset("tiny", encoder="static").input_dim == 3 * 256 + 135 + 32 + LAYOUT_DIM
    with pytest.raises(ValueError, match="unknown model config keys"):
        ModelConfig.from_dict({**tiny_config().to_dict(), "bogus": 1})
    with pytest.raises(ValueError, match="readout 'cls'"):
        tiny_config(num_transformer_layers=0)
    with pytest.raises(ValueError, match="unknown preset"):
        ModelConfig.preset("huge")


def test_reference_parameter_count():
    """The reference backbone for F=1703 has 11,508,480 parameters; PyTorch's LSTMCell has two
    bias vectors (Keras one), +4K = +1,024."""
    cfg = ModelConfig.preset("paper_s5_t5_k256", input_blocks=[("x", 1703)], feature_version="1",
                             shared_target_gate=True)
    assert count_parameters(GrownUpBackbone(cfg)) == 11_508_480 + 1_024


def test_import_package_does_not_import_torch():
    code = "import sys, scrapy_grownup; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- persistence --------------------------------------------------------------------------------

def test_save_load_round_trip(tmp_path):
    model = tiny_model(num_page_types=2).eval()
    batch = Batch.from_data_list([tree_page(n, seed=n) for n in (5, 9)])
    with torch.no_grad():
        ref = model(batch)
    model.save_pretrained(tmp_path / "m", encoder_version="v7", metadata={"data": "cleaneval"})
    doc = json.loads((tmp_path / "m" / "config.json").read_text())
    assert doc["format_version"] == 1 and doc["encoder"] == "static"
    assert doc["encoder_version"] == "v7" and doc["feature_version"] == "1"
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["config.json",
                                                                  "model.safetensors"]
    loaded = GrownUpModel.from_pretrained(tmp_path / "m", expected_encoder="static",
                                          expected_feature_version="1",
                                          expected_input_blocks=BLOCKS)
    assert not loaded.training and loaded.config == model.config
    with torch.no_grad():
        out = loaded(batch)
    assert torch.equal(out.node_logits, ref.node_logits)
    assert torch.equal(out.page_type_logits, ref.page_type_logits)

    model.save_pretrained(tmp_path / "half", fp16=True)
    assert (tmp_path / "half" / "model.safetensors").stat().st_size < \
        0.6 * (tmp_path / "m" / "model.safetensors").stat().st_size
    half = GrownUpModel.from_pretrained(tmp_path / "half")
    assert next(half.parameters()).dtype == torch.float32
    with torch.no_grad():
        torch.testing.assert_close(half(batch).node_logits, ref.node_logits, atol=2e-2, rtol=2e-2)


def edited_copy(source: Path, target: Path, config: dict | None = None, **top) -> Path:
    """A copy of the model directory ``source`` at ``target``, its ``config.json``'s model
    config updated by ``config`` and its top-level entries by ``top``."""
    target.mkdir()
    for f in source.iterdir():
        (target / f.name).write_bytes(f.read_bytes())
    if config or top:
        doc = json.loads((target / "config.json").read_text())
        doc["config"].update(config or {})
        doc.update(top)
        (target / "config.json").write_text(json.dumps(doc))
    return target


def test_save_load_round_trip_with_page_type_and_role_heads(tmp_path):
    model = tiny_model(num_page_types=7, num_roles=6, page_type_names=list("abcdefg"),
                       role_names=["n", "h", "m", "s", "r", "c"]).eval()
    batch = Batch.from_data_list([tree_page(n, seed=n) for n in (5, 8)])
    with torch.no_grad():
        ref = model(batch)
    model.save_pretrained(tmp_path / "m", fp16=True)
    doc = json.loads((tmp_path / "m" / "config.json").read_text())
    assert doc["tensors"]["genre_head.weight"] == [7, 16]
    assert doc["config"]["role_names"][5] == "c"
    loaded = GrownUpModel.from_pretrained(tmp_path / "m")
    assert loaded.page_type_names == list("abcdefg") and loaded.role_names[1] == "h"
    with torch.no_grad():
        out = loaded(batch)
    torch.testing.assert_close(out.page_type_logits, ref.page_type_logits, atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(out.role_logits, ref.role_logits, atol=3e-2, rtol=3e-2)
    assert (out.role_logits.argmax(1) == ref.role_logits.argmax(1)).float().mean() > 0.9

    # weights and config.json that disagree about the heads are refused, saying why
    def with_config(name, **changes):
        return edited_copy(tmp_path / "m", tmp_path / name, changes)

    with pytest.raises(ModelLoadError, match="unexpected tensors.*genre_head"):
        GrownUpModel.from_pretrained(with_config("nogenre", num_genres=0, genre_names=[]))
    with pytest.raises(ModelLoadError, match="wrong shapes.*role_head"):
        GrownUpModel.from_pretrained(with_config("roles5", num_roles=5, role_names=[]))
    tiny_model().save_pretrained(tmp_path / "plain")
    doc = json.loads((tmp_path / "plain" / "config.json").read_text())
    doc["config"]["num_roles"] = 6
    (tmp_path / "plain" / "config.json").write_text(json.dumps(doc))
    with pytest.raises(ModelLoadError, match="missing tensors.*role_head"):
        GrownUpModel.from_pretrained(tmp_path / "plain")
    with pytest.raises(ModelLoadError, match="invalid model config.*page_type_names"):
        GrownUpModel.from_pretrained(with_config("names", genre_names=["a"]))
    with pytest.raises(ModelLoadError, match="unknown model config keys"):
        GrownUpModel.from_pretrained(with_config("future", page_heads=2))


def test_load_errors(tmp_path):
    model = tiny_model()
    good = tmp_path / "good"
    model.save_pretrained(good)

    def copy(name):
        return edited_copy(good, tmp_path / name)

    with pytest.raises(ModelLoadError, match="missing"):
        GrownUpModel.from_pretrained(tmp_path / "nowhere")

    # a config that builds a different model than the weights
    with pytest.raises(ModelLoadError, match="wrong shapes"):
        GrownUpModel.from_pretrained(edited_copy(good, tmp_path / "wrong_shape",
                                                 {"hidden_size": 32}))
    with pytest.raises(ModelLoadError, match="missing tensors"):
        GrownUpModel.from_pretrained(edited_copy(good, tmp_path / "more_layers",
                                                 {"num_layers": 3}))
    with pytest.raises(ModelLoadError, match="format_version"):
        GrownUpModel.from_pretrained(edited_copy(good, tmp_path / "version",
                                                 format_version=99))
    with pytest.raises(ModelLoadError, match="readout"):
        GrownUpModel.from_pretrained(edited_copy(good, tmp_path / "bad_config",
                                                 {"readout": "sideways"}))

    d = copy("not_json")
    (d / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="not JSON"):
        GrownUpModel.from_pretrained(d)

    d = copy("truncated")
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="checksum"):
        GrownUpModel.from_pretrained(d)
    with pytest.raises(ModelLoadError, match="unreadable safetensors"):
        GrownUpModel.from_pretrained(d, verify_checksum=False)
    (d / "model.safetensors").write_bytes(data[:5])
    with pytest.raises(ModelLoadError, match="unreadable safetensors"):
        GrownUpModel.from_pretrained(d, verify_checksum=False)

    d = copy("no_weights")
    (d / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match="missing"):
        GrownUpModel.from_pretrained(d)

    with pytest.raises(ModelLoadError, match="encoder 'static' != expected 'minilm'"):
        GrownUpModel.from_pretrained(good, expected_encoder="minilm")
    with pytest.raises(ModelLoadError, match="feature version"):
        GrownUpModel.from_pretrained(good, expected_feature_version="2")
    with pytest.raises(ModelLoadError, match="input blocks"):
        GrownUpModel.from_pretrained(good, expected_input_blocks=[("x_text", 384)])


def test_presets_command_reports_the_papers_parameter_count(capsys):
    from scrapy_grownup.cli.main import main

    assert main(["lab", "presets"]) == 0
    rows = {line.split("|")[1].strip(" `"): line.split("|")
            for line in capsys.readouterr().out.splitlines()[2:]}
    assert set(rows) == set(PRESETS)
    paper = rows["paper_s5_t5_k256"]
    assert [c.strip() for c in paper[2:5]] == ["5", "5", "256"]
    # The paper reports ~11M parameters; with our 384-d MiniLM blocks the count lands there too.
    assert 10_000_000 < int(paper[7].strip().replace(",", "")) < 13_000_000


def test_a_config_with_edited_sizes_is_refused_before_anything_is_built(tmp_path):
    """A hostile config.json (hidden_size raised, its checksum removed) built the whole model
    (4.8 GB in the probe) before the shapes were compared. The shapes are now checked against
    the weights' safetensors header on a model built on the meta device: the load fails at
    once, with a few MB of memory, in a fresh process."""
    import shutil
    import subprocess
    import sys

    from tests.crawl_support import PEAK_RSS_KB, ROOT, child_env

    directory = tmp_path / "hostile"
    shutil.copytree(ROOT / "scrapy_grownup" / "assets" / "models" / "fast", directory)
    doc = json.loads((directory / "config.json").read_text())
    doc["config"]["hidden_size"] = 2304  # about 250 million parameters: 1 GB in float32
    doc.pop("weights_sha256", None)
    (directory / "config.json").write_text(json.dumps(doc))
    script = (
        "import sys, time\n"
        "from scrapy_grownup import ArticleExtractor\n"
        "from scrapy_grownup.errors import ModelLoadError\n"
        "import torch\n"
        # the text encoder and the rest of a load that passes: what grows past them is the
        # hostile model's own
        "plain = ArticleExtractor.from_pretrained('fast', device='cpu')\n"
        f"before = {PEAK_RSS_KB}\n"
        "start = time.perf_counter()\n"
        "try:\n"
        "    ArticleExtractor.from_pretrained(sys.argv[1], device='cpu')\n"
        "except ModelLoadError as exc:\n"
        "    print('refused:', exc)\n"
        f"grown = {PEAK_RSS_KB} - before\n"
        "print(f'grown_kb={grown} seconds={time.perf_counter() - start:.2f}')\n")
    done = subprocess.run([sys.executable, "-c", script, str(directory)], capture_output=True,
                          text=True, env=child_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused:" in done.stdout and "does not match config.json" in done.stdout
    assert "wrong shapes" in done.stdout
    grown_kb = int(done.stdout.split("grown_kb=")[1].split()[0])
    assert grown_kb < 200_000, done.stdout  # not the gigabyte of parameters
