"""Page-type readout, context role head and fitting heads on a frozen backbone."""

import numpy as np
import pytest
import torch

from scrapy_grownup.page.dom import STRUCT_DIM, tree_edges
from scrapy_grownup.model import GrownUpModel, ModelConfig
from scrapy_grownup.model.files import text_length_column as _text_length_column
from scrapy_grownup.model.heads import (ContentPooledReadout, ContextRoleHead, ancestor_sum,
                                        parent_rows, tree_depths)


def test_tree_depths_and_ancestor_sum_by_hand():
    #      0          5
    #    1   2        6
    #    3
    #    4
    parent = torch.tensor([0, 0, 0, 1, 3, 5, 5])
    assert tree_depths(parent).tolist() == [0, 1, 1, 2, 3, 0, 1]
    values = torch.tensor([[1.0], [10.0], [100.0], [1000.0], [0.0], [7.0], [0.0]])
    out = ancestor_sum(values, parent, decay=0.5)[:, 0].tolist()
    assert out == [0.0, 1.0, 1.0, 10.0 + 0.5 * 1.0, 1000.0 + 0.5 * (10.0 + 0.5), 0.0, 7.0]


def test_parent_rows_from_tree_edges():
    parent = np.array([-1, 0, 0, 1, -1, 4])  # two pages in one batch
    edge_index, edge_type = tree_edges(parent)
    rows = parent_rows(torch.from_numpy(edge_index), torch.from_numpy(edge_type), len(parent))
    assert rows.tolist() == [0, 0, 0, 1, 4, 4]


def test_content_pooled_readout_by_hand():
    col = _text_length_column()
    readout = ContentPooledReadout(hidden_size=2, text_dim=2, struct_dim=STRUCT_DIM,
                                   text_length_column=col, out_dim=4, dropout=0.0)
    nodes = torch.tensor([[1.0, 0.0], [3.0, 2.0], [0.0, 4.0], [5.0, 5.0]])
    content = torch.tensor([1.0, 0.0, 0.5, 0.25])
    text = torch.tensor([[1.0, 1.0], [2.0, 0.0], [0.0, 0.0], [4.0, 2.0]])
    struct = torch.zeros(4, STRUCT_DIM)
    lengths = torch.tensor([9.0, 99.0, 0.0, 3.0])  # node 2 owns no text
    struct[:, col] = torch.log1p(lengths) / 8.0
    vec = torch.tensor([0, 0, 0, 1])
    rows_seen = []

    def text_rows(rows):
        rows_seen.append(rows.tolist())
        return text[rows]

    pooled = readout.pool(nodes, content, text_rows, struct, vec, 2)
    assert pooled.shape == (2, readout.in_dim)
    assert rows_seen == [[0, 1, 3]]  # only nodes that own text are looked up
    k, d = 2, 2
    mean_nodes, content_nodes = pooled[:, :k], pooled[:, k:2 * k]
    max_nodes = pooled[:, 2 * k:3 * k]
    assert torch.allclose(mean_nodes[0], torch.tensor([4 / 3, 2.0]))
    assert torch.allclose(content_nodes[0], (nodes[0] * 1.0 + nodes[2] * 0.5) / 1.5)
    assert torch.allclose(max_nodes[0], torch.tensor([3.0, 4.0]))
    text_content = pooled[:, 3 * k:3 * k + d]
    text_boiler = pooled[:, 3 * k + d:3 * k + 2 * d]
    assert torch.allclose(text_content[0], text[0], atol=1e-6)  # node 1 has content 0
    assert torch.allclose(text_boiler[0], text[1], atol=1e-6)   # node 0 has content 1
    assert torch.allclose(text_content[1], text[3])
    scalars = pooled[:, -4:]
    expected = [float(np.log(3.0)), 1.5 / 3, 1 / 3, float(np.log1p(9.0))]
    assert torch.allclose(scalars[0], torch.tensor(expected), atol=1e-5)
    assert torch.allclose(scalars[1], torch.tensor([0.0, 0.25, 0.0, 0.0]), atol=1e-6)
    assert torch.isfinite(readout.eval()(pooled)).all()


def _heads_config(**changes):
    config = ModelConfig.preset("tiny", encoder="static", num_page_types=3,
                                page_type_names=["a", "b", "c"],
                                page_type_readout="content_pooled",
                                page_type_hidden=8, num_roles=2, role_names=["x", "y"],
                                role_features="context", role_head_hidden=8)
    return config.replace(**changes) if changes else config


def _graph(seed: int, nodes: int = 12):
    from torch_geometric.data import Data

    rng = np.random.default_rng(seed)
    parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, nodes)])
    edge_index, edge_type = tree_edges(parent)
    config = _heads_config()
    blocks = {name: torch.from_numpy(rng.normal(size=(nodes, width)).astype(np.float32))
              for name, width in config.input_blocks}
    col = _text_length_column()
    blocks["x_struct"][:, col] = torch.from_numpy(rng.uniform(0, 1, nodes).astype(np.float32))
    return Data(edge_index=torch.from_numpy(edge_index), edge_type=torch.from_numpy(edge_type),
                num_nodes=nodes, **blocks)


def test_heads_train_and_infer_alike_and_round_trip(tmp_path):
    from torch_geometric.data import Batch

    torch.manual_seed(0)
    model = GrownUpModel(_heads_config())
    assert isinstance(model.page_type_readout, ContentPooledReadout)
    assert model.page_type_norm is None
    assert isinstance(model.role_head, ContextRoleHead)
    batch = Batch.from_data_list([_graph(1), _graph(2), _graph(3, 5)])
    out = model(batch, page_type_labels=torch.tensor([0, 1, -1]))
    (out.page_type_logits.sum() + out.role_logits.sum()).backward()
    assert model.page_type_head.weight.grad is not None
    assert model.role_head.net[1].weight.grad is not None
    # the heads do not move the content decision
    assert all(p.grad is None or not p.grad.any() for p in model.node_head.parameters())
    model.eval()
    with torch.enable_grad():  # the training path, in eval mode
        slow = model(batch)
    with torch.inference_mode():  # the inference path (role head: ContextRoleHead.infer)
        fast = model(batch)
    assert torch.allclose(slow.page_type_logits, fast.page_type_logits, atol=1e-4)
    assert torch.allclose(slow.role_logits, fast.role_logits, atol=1e-4)
    # the same through the extractor's batch form (text blocks as distinct-string tables)
    tables = _as_tables(batch)
    with torch.inference_mode():
        indexed = model(tables)
    assert torch.allclose(indexed.role_logits, fast.role_logits, atol=1e-4)
    assert torch.allclose(indexed.page_type_logits, fast.page_type_logits, atol=1e-4)
    model.save_pretrained(tmp_path / "m")
    loaded = GrownUpModel.from_pretrained(tmp_path / "m")
    with torch.inference_mode():
        again = loaded(batch)
    assert torch.allclose(again.page_type_logits, fast.page_type_logits, atol=1e-5)
    assert torch.allclose(again.role_logits, fast.role_logits, atol=1e-5)


def _as_tables(batch):
    from scrapy_grownup.graph.featurizer import GraphBatch

    tensors = {key: getattr(batch, key) for key in ("edge_index", "edge_type", "batch", "ptr",
                                                     "x_struct", "x_pos", "x_layout")}
    for name in ("x_text", "x_class", "x_id"):
        table, index = torch.unique(getattr(batch, name), dim=0, return_inverse=True)
        tensors[name + "_table"], tensors[name + "_index"] = table, index
    return GraphBatch(batch.num_nodes, batch.num_graphs, tensors)


def test_config_rejects_context_roles_without_hidden_layer():
    with pytest.raises(ValueError, match="role_head_hidden"):
        _heads_config(role_head_hidden=0)
    with pytest.raises(ValueError, match="page_type_readout"):
        _heads_config(page_type_readout="cls_token")


def test_fitted_heads_learn_separable_classes():
    from scrapy_grownup.training.heads import (HeadFitConfig, fit_page_type_head, fit_role_head,
                                               predict_page_type)

    torch.manual_seed(0)
    model = GrownUpModel(_heads_config(page_type_hidden=32, page_type_dropout=0.1))
    rng = np.random.default_rng(0)
    # page_type: the class shows as a bump in one of three blocks of 20 features
    dim = model.page_type_readout.in_dim
    y = rng.integers(0, 3, 300)
    x = rng.normal(size=(300, dim)).astype(np.float32)
    for k in range(3):
        x[np.ix_(y == k, range(20 * k, 20 * k + 20))] += 1.5
    x = torch.from_numpy(x)
    before = model.state_dict()["node_head.net.weight"].clone()
    fit_page_type_head(model, x[:200], y[:200],
                       HeadFitConfig(page_type_steps=300, page_type_lr=1e-2))
    accuracy = (predict_page_type(model, x[200:]).argmax(1) == y[200:]).mean()
    assert accuracy > 0.8
    probs = predict_page_type(model, x[200:])
    assert np.allclose(probs.sum(1), 1.0, atol=1e-5)
    # roles: the class shifts twenty inputs up or down
    dim = model.role_head.in_dim
    yr = rng.integers(0, 2, 3000)
    xr = rng.normal(size=(3000, dim)).astype(np.float32)
    xr[:, :20] += np.where(yr == 1, 1.0, -1.0)[:, None]
    xr, yr = torch.from_numpy(xr), torch.from_numpy(yr)
    fit_role_head(model, xr[:2000], yr[:2000], HeadFitConfig(role_steps=300, role_batch=256))
    with torch.no_grad():
        pred = model.role_head(xr[2000:]).argmax(1)
    assert (pred == yr[2000:]).float().mean() > 0.9
    assert torch.equal(model.state_dict()["node_head.net.weight"], before)
