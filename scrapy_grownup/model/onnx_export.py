"""A saved model's backbone and content head as an ONNX graph, for ONNX Runtime on a CPU.

``export_onnx(directory)`` (torch and ``onnxscript`` needed: the ``[train]`` extra) writes
``backbone.onnx`` beside ``model.safetensors``; ``NumpyModel`` runs it with ONNX Runtime when
that is installed, and its numpy backbone otherwise (the same function; ONNX Runtime's kernels
are faster on the element-wise steps). The graph records the checksum of the weights it was
exported from, so a retrained model never runs a stale graph.

The graph takes the batch as ``Featurizer.batch_arrays`` gives it (the text blocks as tables of
distinct strings and a row per node, the dense blocks, the ``parent`` array) and returns the
content logits ``[N]`` and the node features ``[N, K]`` the heads read. It is laid out for ONNX
Runtime: one matmul per projection (a slice of a wide activation becomes a copy there), the
parent's features gathered before they are projected, the children's messages summed with one
``index_add``. Only models ``exportable`` accepts (what ``NumpyModel`` runs, with prelim
blocks and a first block that widens its input) have a graph; the others run on numpy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scrapy_grownup.model.config import ModelConfig
from scrapy_grownup.model.numpy_model import ONNX_NAME, TEXT_BLOCKS, supports

OPSET = 18
# a page with several distinct strings in each text block: the example the export traces
EXAMPLE_PAGE = (b"<html><head><title>Example</title></head><body class='page home'>"
                b"<div id='main' class='content wide'><h1 class='title'>A headline</h1>"
                b"<p class='lead' id='p1'>The first paragraph of the example.</p>"
                b"<p id='p2'>A second paragraph.</p></div><ul class='nav'><li><a href='/a'>A"
                b"</a></li><li><a href='/b'>B</a></li></ul></body></html>")


def exportable(config: ModelConfig) -> bool:
    """Whether ``export_onnx`` writes a graph for a model of ``config``."""
    names = [name for name, _ in config.input_blocks]
    return (supports(config) and len(config.prelim_sizes) >= 1
            and config.input_dim != config.prelim_sizes[0]
            and all(name in names for name in TEXT_BLOCKS))


def input_names(config: ModelConfig) -> list[str]:
    """The graph's inputs: each text block's table and index, the dense blocks, ``parent``."""
    names = [f"{name}_{part}" for name in TEXT_BLOCKS for part in ("table", "index")]
    return names + [name for name, _ in config.input_blocks if name not in TEXT_BLOCKS] \
        + ["parent"]


def export_onnx(directory: str | Path) -> Path:
    """Write ``backbone.onnx`` for the saved model in ``directory``; returns its path.
    Raises ``ValueError`` for a model ``exportable`` refuses."""
    import onnx
    import torch

    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.graph.featurizer import Featurizer
    from scrapy_grownup.model.grownup import GrownUpModel
    from scrapy_grownup.page.dom import parse_page

    directory = Path(directory)
    config, doc = GrownUpModel.read_config(directory)
    if not exportable(config):
        raise ValueError(f"{directory}: this model has no ONNX form (it runs on numpy or torch)")
    model = GrownUpModel.from_pretrained(directory)
    featurizer = Featurizer.for_blocks(get_encoder(config.encoder), config.input_blocks)
    arrays = featurizer.batch_arrays([parse_page(EXAMPLE_PAGE, url="https://example.com/")])
    names = input_names(config)
    graph = _BackboneGraph(model).eval()
    example = tuple(torch.from_numpy(np.ascontiguousarray(arrays[name])) for name in names)
    nodes = torch.export.Dim("nodes", min=2)
    shapes = {name: {0: torch.export.Dim(f"{name}_rows", min=2) if name.endswith("_table")
                     else nodes} for name in names}
    path = directory / ONNX_NAME
    tmp = directory / f".tmp-{ONNX_NAME}"
    with torch.inference_mode():
        torch.onnx.export(graph, example, str(tmp), dynamo=True, input_names=names,
                          output_names=["logits", "nodes"],
                          dynamic_shapes={"inputs": tuple(shapes[name] for name in names)},
                          opset_version=OPSET, external_data=False, verbose=False)
    proto = onnx.load(str(tmp))
    entry = proto.metadata_props.add()
    entry.key, entry.value = "weights_sha256", doc.get("weights_sha256") or ""
    onnx.save(proto, str(tmp))
    tmp.replace(path)
    return path


def _backbone_graph_class():
    import torch
    from torch import nn

    class BackboneGraph(nn.Module):
        """``GrownUpBackbone`` + content head in inference form, on plain tensors."""

        def __init__(self, model):
            super().__init__()
            cfg, bb = model.config, model.backbone
            self.k = k = cfg.hidden_size
            self.dense_names = [n for n, _ in cfg.input_blocks if n not in TEXT_BLOCKS]
            cols, start = {}, 0
            for name, size in cfg.input_blocks:
                cols[name] = (start, start + size)
                start += size

            def p(t):
                return nn.Parameter(t.detach().contiguous(), requires_grad=False)

            def split(w):
                sub = lambda n: w[:, cols[n][0]:cols[n][1]].t()  # noqa: E731
                return [p(sub(n)) for n in TEXT_BLOCKS] + \
                    [p(torch.cat([sub(n) for n in self.dense_names]))]

            self.first = bb.prelim[0]
            self.w_op = nn.ParameterList(split(self.first.op.lin.weight))
            self.w_res = nn.ParameterList(split(self.first.residual[0].weight))
            self.b_op, self.b_res = p(self.first.op.lin.bias), p(self.first.residual[0].bias)
            self.prelim = nn.ModuleList(list(bb.prelim)[1:])
            self.blocks = bb.layers
            self.conv = nn.ModuleList()
            for conv, _ in bb.layers:
                op = conv.op
                rows = lambda m, t: m[t * k:(t + 1) * k]  # noqa: E731
                wm, bm = op.lin_msg.weight, op.lin_msg.bias
                ws, wd = op.lin_gate_src.weight, op.lin_gate_dst.weight
                dst = (lambda t: wd[:k]) if op.shared_target_gate else (lambda t: rows(wd, t))
                m = nn.Module()
                # read at a node: its gate from its parent (B_0), its gate and message to its
                # parent (C_1, W_1), its self loop (B_2 + C_2, W_2)
                m.b0, m.c1 = p(dst(0).t()), p(rows(ws, 1).t())
                m.w1, m.bw1 = p(rows(wm, 1).t()), p(rows(bm, 1))
                m.s, m.w2, m.bw2 = p((rows(ws, 2) + dst(2)).t()), p(rows(wm, 2).t()), \
                    p(rows(bm, 2))
                # read at its parent: C_0, W_0, and the parent's gate on its children, B_1
                m.c0, m.w0, m.bw0, m.b1 = p(rows(ws, 0).t()), p(rows(wm, 0).t()), \
                    p(rows(bm, 0)), p(dst(1).t())
                self.conv.append(m)
            cell = bb.lstm
            self.lstm = cell is not None
            if self.lstm:
                wi, wh, b = cell.weight_ih, cell.weight_hh, cell.bias_ih + cell.bias_hh
                self.wi = nn.ParameterList([p(wi[g * k:(g + 1) * k].t()) for g in range(4)])
                self.wh = nn.ParameterList([p(wh[g * k:(g + 1) * k].t()) for g in range(4)])
                self.bl = nn.ParameterList([p(b[g * k:(g + 1) * k]) for g in range(4)])
            self.w_head = p(model.node_head.net.weight.t())
            self.b_head = p(model.node_head.net.bias)

        @staticmethod
        def _finish(block, op_out, residual):
            h = torch.relu(block.norm1(op_out))
            return torch.relu(block.norm2(block.lin2(h)) + residual)

        def forward(self, *inputs):
            tables = [(inputs[2 * i], inputs[2 * i + 1]) for i in range(len(TEXT_BLOCKS))]
            dense = torch.cat(list(inputs[2 * len(TEXT_BLOCKS):-1]), dim=1)
            parent = inputs[-1]

            def first_linear(ws, b):
                y = torch.addmm(b, dense, ws[-1])
                for (table, index), w in zip(tables, ws):
                    y = y + torch.index_select(table @ w, 0, index)
                return y

            x = self._finish(self.first, first_linear(self.w_op, self.b_op),
                             self.first.residual[1](first_linear(self.w_res, self.b_res)))
            for block in self.prelim:
                x = block.forward_inference(x)
            n = parent.shape[0]
            has_parent = parent >= 0
            up = torch.where(has_parent, parent, torch.arange(n, dtype=parent.dtype))
            mask = has_parent.to(x.dtype).unsqueeze(1)
            h = c = None
            for m, (conv, lin) in zip(self.conv, self.blocks):
                xu = torch.index_select(x, 0, up)
                out = torch.sigmoid(x @ m.s) * torch.addmm(m.bw2, x, m.w2)
                out = out + mask * torch.sigmoid(x @ m.b0 + xu @ m.c0) \
                    * torch.addmm(m.bw0, xu, m.w0)
                msg = mask * torch.sigmoid(xu @ m.b1 + x @ m.c1) * torch.addmm(m.bw1, x, m.w1)
                out = out.index_add(0, up, msg)
                x = self._finish(conv, out, x)
                x = self._finish(lin, lin.op.lin(x), x)
                if self.lstm:
                    g = [torch.addmm(self.bl[j], x, self.wi[j]) for j in range(4)]
                    if h is not None:
                        g = [g[j] + h @ self.wh[j] for j in range(4)]
                    gi, gf, go = torch.sigmoid(g[0]), torch.sigmoid(g[1]), torch.sigmoid(g[3])
                    gg = torch.tanh(g[2])
                    c = gi * gg if c is None else gf * c + gi * gg
                    h = go * torch.tanh(c)
                    x = h
            return (x @ self.w_head + self.b_head).squeeze(1), x

    return BackboneGraph


def _BackboneGraph(model):  # noqa: N802 - builds the torch module (torch imported on call)
    return _backbone_graph_class()(model)


__all__ = ["export_onnx", "exportable", "input_names"]
