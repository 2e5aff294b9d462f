"""Per-node and graph layers of the GROWN+UP backbone (paper section 2.3, reference section 3).

``GraphConvGated`` is the paper's typed, gated graph convolution::

    h_i = sum_k sum_{j in N_k(i)} sigmoid(B_k x_i + C_k x_j) * (W_k x_j + b_k)

with k in {0: from parent, 1: from child, 2: self loop} and a plain sum (no degree
normalisation). Decision on the target gate: by default every edge type has its own ``B_k``, as
in the paper's equation. The authors' code shares one target matrix ``A`` across the types
(``shared_target_gate=True`` reproduces it, 2*K_in*K fewer parameters per layer). Only ``W`` has
a bias, as in the reference; a bias on ``B``/``C`` would be redundant with ``b_k`` for the gate.

Efficiency: the three projections are computed once per node as ``[N, 3*K]`` (one Linear each),
viewed as ``[N*3, K]`` and gathered per edge with ``node * 3 + type``: one ``index_select``
per projection, no loop over edges or types.

Inference (``forward_typed``, used by the backbone in eval mode without autograd): edges are
split by type (``EdgePlan``); self loops need no gather and no scatter and their two gate
projections merge into one; the projections only parents use (parent -> child messages,
child -> parent target gates) are computed for internal nodes only; the rest is one matmul per
node set with weights concatenated once and cached. Messages are summed per target in the same
order as ``forward`` (edge types 0, 1, 2, edges in order within a type).
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import torch
from torch import Tensor, nn

NUM_EDGE_TYPES = 3  # parent -> child, child -> parent, self loop (scrapy_grownup.page.dom)


def glorot_(weight: Tensor, chunks: int = 1) -> Tensor:
    """Glorot-uniform init of a ``[out, in]`` weight, each of ``chunks`` row blocks on its own."""
    rows = weight.shape[0] // chunks
    with torch.no_grad():
        for k in range(chunks):
            nn.init.xavier_uniform_(weight[k * rows:(k + 1) * rows])
    return weight


def make_linear(in_dim: int, out_dim: int, bias: bool = True, chunks: int = 1) -> nn.Linear:
    """``nn.Linear`` initialised like the reference (Glorot-uniform kernel, zero bias)."""
    layer = nn.Linear(in_dim, out_dim, bias=bias)
    glorot_(layer.weight, chunks)
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


# Inference weights derived from a module's parameters, per module: kept out of the module
# itself so that copying, pickling or saving a model never carries them.
_FUSED: "weakref.WeakKeyDictionary[nn.Module, dict]" = weakref.WeakKeyDictionary()


def cached_weights(module: nn.Module, name: str, params: list[Tensor], build):
    """``build()`` cached on ``module`` until one of ``params`` is replaced or updated in place.

    For inference-time fused weights: an optimizer step or ``load_state_dict`` bumps a
    parameter's version counter, which invalidates the cache.
    """
    key = tuple((p.data_ptr(), p._version, p.dtype, p.device) for p in params)
    cache = _FUSED.get(module)
    if cache is None:
        cache = _FUSED[module] = {}
    hit = cache.get(name)
    if hit is not None and hit[0] == key:
        return hit[1]
    with torch.no_grad():
        value = build()
    cache[name] = (key, value)
    return value


class EdgePlan(NamedTuple):
    """How ``GraphConvGated.forward_typed`` computes a batch's messages (built once per batch).

    ``row_sets[s]``: the nodes whose projections set ``s`` computes (``None``: all nodes; set 0
    is always all nodes). ``types[t]``: ``None`` when type t's edges are exactly the self loops
    ``i -> i`` in order (no gather, no scatter; the two gate projections of a node on itself
    add up to one), else ``(src_set, src_rows, dst_set, dst_rows, dst)``: the projections of
    the edges' sources are rows ``src_rows`` of set ``src_set``'s output, and so on. In a tree
    only internal nodes send parent -> child messages and receive child -> parent ones, so
    those projections are computed for them only.
    """

    row_sets: list
    types: list

    @property
    def signature(self) -> tuple:
        return tuple(None if t is None else (t[0], t[2]) for t in self.types)


def typed_edge_plan(edge_index: Tensor, edge_type: Tensor, num_nodes: int,
                    num_types: int = NUM_EDGE_TYPES, subset_ratio: float = 0.75) -> EdgePlan:
    """The ``EdgePlan`` of a graph; edges keep their order within each type."""
    row_sets: list = [None]
    arange = None

    def rows_of(nodes: Tensor) -> tuple[int, Tensor]:
        if nodes.numel() == 0:
            return 0, nodes
        unique, inverse = torch.unique(nodes, return_inverse=True)
        if unique.numel() > subset_ratio * num_nodes:
            return 0, nodes
        for i, rows in enumerate(row_sets):
            if rows is not None and rows.numel() == unique.numel() and torch.equal(rows, unique):
                return i, inverse
        row_sets.append(unique)
        return len(row_sets) - 1, inverse

    types = []
    for t in range(num_types):
        sel = (edge_type == t).nonzero().view(-1)
        src, dst = edge_index[0].index_select(0, sel), edge_index[1].index_select(0, sel)
        if sel.numel() == num_nodes:
            if arange is None:
                arange = torch.arange(num_nodes, device=edge_index.device)
            if torch.equal(src, arange) and torch.equal(dst, arange):
                types.append(None)
                continue
        src_set, src_rows = rows_of(src)
        dst_set, dst_rows = rows_of(dst)
        types.append((src_set, src_rows, dst_set, dst_rows, dst))
    return EdgePlan(row_sets, types)


def edge_gather_index(edge_index: Tensor, edge_type: Tensor,
                      num_types: int = NUM_EDGE_TYPES) -> tuple[Tensor, Tensor]:
    """Flat row indices ``(src*T + type, dst*T + type)`` into a ``[N*T, K]`` view.

    The caller must have checked ``0 <= edge_type < num_types``: an out-of-range type would
    silently address another node's row.
    """
    src, dst = edge_index[0], edge_index[1]
    return src * num_types + edge_type, dst * num_types + edge_type


class GraphConvGated(nn.Module):
    """Typed gated graph convolution (see the module docstring).

    ``forward(x [N, in], edge_index [2, E] source->target, edge_type [E])`` -> ``[N, out]``.
    Messages flow along the edges: node ``i`` sums over the edges ``j -> i``, as a
    torch_geometric ``MessagePassing`` layer with ``aggr="add"`` and this ``message`` computes
    it (``tests/model/test_model.py`` checks the two against each other); the sum is one
    ``index_add_`` here, so that serving never imports torch_geometric (see ``pooling``).
    """

    def __init__(self, in_dim: int, out_dim: int, num_types: int = NUM_EDGE_TYPES,
                 shared_target_gate: bool = False):
        super().__init__()
        self.in_dim, self.out_dim, self.num_types = in_dim, out_dim, num_types
        self.shared_target_gate = shared_target_gate
        # Rows [k*out, (k+1)*out) of each weight belong to edge type k.
        self.lin_msg = make_linear(in_dim, num_types * out_dim, bias=True, chunks=num_types)
        target_types = 1 if shared_target_gate else num_types
        self.lin_gate_dst = make_linear(in_dim, target_types * out_dim, bias=False,
                                        chunks=target_types)
        self.lin_gate_src = make_linear(in_dim, num_types * out_dim, bias=False,
                                        chunks=num_types)

    def forward(self, x: Tensor, edge_index: Tensor, edge_type: Tensor,
                gather_index: tuple[Tensor, Tensor] | None = None) -> Tensor:
        n, k, t = x.shape[0], self.out_dim, self.num_types
        if gather_index is None:
            gather_index = edge_gather_index(edge_index, edge_type, t)
        src_rows, dst_rows = gather_index
        msg = self.lin_msg(x).view(n * t, k).index_select(0, src_rows)
        gate_src = self.lin_gate_src(x).view(n * t, k).index_select(0, src_rows)
        if self.shared_target_gate:
            gate_dst = self.lin_gate_dst(x).index_select(0, edge_index[1])
        else:
            gate_dst = self.lin_gate_dst(x).view(n * t, k).index_select(0, dst_rows)
        messages = self.message(msg, gate_src + gate_dst)
        return msg.new_zeros(n, k).index_add_(0, edge_index[1], messages)

    @staticmethod
    def message(msg: Tensor, gate: Tensor) -> Tensor:
        """Each edge's message: its projection of the source, gated by source and target."""
        return torch.sigmoid(gate) * msg

    def _plan_weights(self, plan: EdgePlan) -> tuple[list, dict]:
        """Per row set of ``plan``, ``(weight, bias)`` of one Linear computing its projections
        (or ``None``), and the column of each part: ``("ms", t)`` message and source gate of
        type t (2K columns), ``("gd", t)`` target gate (K), ``("self", t)`` message and summed
        gates of a self-loop type (2K)."""
        k = self.out_dim
        wm, bm, ws = self.lin_msg.weight, self.lin_msg.bias, self.lin_gate_src.weight
        wd = self.lin_gate_dst.weight

        def rows(w: Tensor, t: int) -> Tensor:
            return w[t * k:(t + 1) * k]

        def gate_dst(t: int) -> Tensor:
            return wd[:k] if self.shared_target_gate else rows(wd, t)

        def build():
            zeros = bm.new_zeros(k)
            parts: list[list] = [[] for _ in plan.row_sets]
            for t, spec in enumerate(plan.types):
                if spec is None:
                    parts[0].append((("self", t), torch.cat([rows(wm, t), rows(ws, t)
                                                             + gate_dst(t)]),
                                     torch.cat([rows(bm, t), zeros])))
                else:
                    parts[spec[0]].append((("ms", t), torch.cat([rows(wm, t), rows(ws, t)]),
                                           torch.cat([rows(bm, t), zeros])))
                    parts[spec[2]].append((("gd", t), gate_dst(t), zeros))
            fused, columns = [], {}
            for set_parts in parts:
                if not set_parts:
                    fused.append(None)
                    continue
                start = 0
                for key, weight, _ in set_parts:
                    columns[key] = start
                    start += weight.shape[0]
                fused.append((torch.cat([w for _, w, _ in set_parts]).contiguous(),
                              torch.cat([b for _, _, b in set_parts]).contiguous()))
            return fused, columns

        return cached_weights(self, ("plan", plan.signature), [wm, bm, ws, wd], build)

    def forward_typed(self, x: Tensor, plan: EdgePlan) -> Tensor:
        """Inference form of ``forward`` following ``plan`` (``typed_edge_plan``): the same
        sums, with each projection computed only for the nodes that use it."""
        n, k = x.shape[0], self.out_dim
        fused, columns = self._plan_weights(plan)
        outputs = []
        for rows, weights in zip(plan.row_sets, fused):
            if weights is None:
                outputs.append(None)
                continue
            xs = x if rows is None else x.index_select(0, rows)
            outputs.append(torch.nn.functional.linear(xs, weights[0], weights[1]))
        out = None
        for t, spec in enumerate(plan.types):
            if spec is None:
                col = columns["self", t]
                y = outputs[0]
                msg = torch.sigmoid(y[:, col + k:col + 2 * k]).mul_(y[:, col:col + k])
                out = msg if out is None else out.add_(msg)
                continue
            src_set, src_rows, dst_set, dst_rows, dst = spec
            if out is None:
                out = x.new_zeros(n, k)
            if dst.numel() == 0:
                continue
            col = columns["ms", t]
            src_part = outputs[src_set][:, col:col + 2 * k].index_select(0, src_rows)
            col = columns["gd", t]
            gate = src_part[:, k:] + outputs[dst_set][:, col:col + k].index_select(0, dst_rows)
            out.index_add_(0, dst, torch.sigmoid_(gate).mul_(src_part[:, :k]))
        return out if out is not None else x.new_zeros(n, k)

    def extra_repr(self) -> str:
        return (f"{self.in_dim}, {self.out_dim}, types={self.num_types}, "
                f"shared_target_gate={self.shared_target_gate}")


class LinearOnly(nn.Module):
    """Per-node linear map (paper 2.3.2); same call signature as ``GraphConvGated``."""

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.lin = make_linear(in_dim, out_dim)

    def forward(self, x: Tensor, edge_index: Tensor | None = None, edge_type: Tensor | None = None,
                gather_index: tuple[Tensor, Tensor] | None = None) -> Tensor:
        return self.lin(x)


class GraphBlock(nn.Module):
    """ResNet-basic-block of the reference (``ConvGraphNetBlock``)::

        op(x) -> LayerNorm -> ReLU -> Linear -> LayerNorm -> + r(x) -> ReLU -> Dropout

    ``op`` is ``GraphConvGated`` (``kind="conv"``) or a per-node Linear (``kind="linear"``, a
    "LinearOnly block"); ``r(x) = x`` when the widths match, else ``LayerNorm(Linear(x))``.
    """

    def __init__(self, in_dim: int, out_dim: int, kind: str = "linear", dropout: float = 0.0,
                 shared_target_gate: bool = False):
        super().__init__()
        if kind == "conv":
            self.op: nn.Module = GraphConvGated(in_dim, out_dim,
                                                shared_target_gate=shared_target_gate)
        elif kind == "linear":
            self.op = LinearOnly(in_dim, out_dim)
        else:
            raise ValueError(f"unknown block kind {kind!r} (expected 'conv' or 'linear')")
        self.kind = kind
        self.norm1 = nn.LayerNorm(out_dim)
        self.lin2 = make_linear(out_dim, out_dim)
        self.norm2 = nn.LayerNorm(out_dim)
        self.residual: nn.Module
        if in_dim == out_dim:
            self.residual = nn.Identity()
        else:
            self.residual = nn.Sequential(make_linear(in_dim, out_dim), nn.LayerNorm(out_dim))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, edge_index: Tensor | None = None, edge_type: Tensor | None = None,
                gather_index: tuple[Tensor, Tensor] | None = None) -> Tensor:
        h = torch.relu(self.norm1(self.op(x, edge_index, edge_type, gather_index)))
        h = self.norm2(self.lin2(h)) + self.residual(x)
        return self.dropout(torch.relu(h))

    # -- inference (eval mode, no autograd): the same function, fewer temporaries ---------------
    def finish(self, op_out: Tensor, residual: Tensor) -> Tensor:
        """The block's output from ``op(x)`` and ``r(x)`` (inference; dropout is a no-op)."""
        h = torch.relu_(self.norm1(op_out))
        h = self.norm2(self.lin2(h)).add_(residual)
        return torch.relu_(h)

    def forward_inference(self, x: Tensor, plan: EdgePlan | None = None) -> Tensor:
        """Inference form of ``forward`` (``plan``: the conv block's ``typed_edge_plan``)."""
        if self.kind == "conv":
            op_out = self.op.forward_typed(x, plan)
        else:
            op_out = self.op.lin(x)
        return self.finish(op_out, self.residual(x))

    def fused_input_weights(self) -> tuple[Tensor, Tensor] | None:
        """``(weight, bias)`` of ``[op(x), Linear_r(x)]`` as one Linear, for a "linear" block
        with a Linear+LayerNorm residual (the first prelim block); ``None`` otherwise."""
        if self.kind != "linear" or not isinstance(self.residual, nn.Sequential):
            return None
        lin, res = self.op.lin, self.residual[0]
        return cached_weights(
            self, "input", [lin.weight, lin.bias, res.weight, res.bias],
            lambda: (torch.cat([lin.weight, res.weight]).contiguous(),
                     torch.cat([lin.bias, res.bias]).contiguous()))


class QuickGELU(nn.Module):
    """``x * sigmoid(1.702 x)`` (CLIP / the reference's GPT-2 blocks)."""

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.sigmoid(1.702 * x)


def make_activation(name: str) -> nn.Module:
    if name == "quick_gelu":
        return QuickGELU()
    if name == "gelu":
        return nn.GELU()
    raise ValueError(f"unknown transformer activation {name!r} (expected 'quick_gelu' or 'gelu')")


class SelfAttention(nn.Module):
    """Multi-head self-attention over padded sequences with a key mask (True = attend).

    Packed ``in_proj`` (q, k, v) like ``nn.MultiheadAttention``; uses
    ``scaled_dot_product_attention``. When ``batch * L * L`` exceeds ``max_cells`` the queries
    are processed in chunks so that a huge page needs O(chunk * L) attention memory instead of
    O(L^2) on the math path (compute stays O(L^2)).
    """

    def __init__(self, dim: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"hidden size {dim} is not divisible by {num_heads} heads")
        self.dim, self.num_heads, self.dropout = dim, num_heads, dropout
        self.in_proj = make_linear(dim, 3 * dim, chunks=3)
        self.out_proj = make_linear(dim, dim)  # zero bias (the reference's glorot bias is a quirk)
        self.max_cells = 1 << 24

    def forward(self, x: Tensor, key_mask: Tensor) -> Tensor:
        b, length, _ = x.shape
        h, d = self.num_heads, self.dim // self.num_heads
        q, k, v = self.in_proj(x).view(b, length, 3, h, d).permute(2, 0, 3, 1, 4).unbind(0)
        mask = key_mask[:, None, None, :]  # [B, 1, 1, L] broadcast over heads and queries
        p = self.dropout if self.training else 0.0
        sdpa = torch.nn.functional.scaled_dot_product_attention
        chunk = max(1, self.max_cells // max(1, b * length))
        if chunk >= length:
            out = sdpa(q, k, v, attn_mask=mask, dropout_p=p)
        else:
            out = torch.cat([sdpa(q[:, :, i:i + chunk], k, v, attn_mask=mask, dropout_p=p)
                             for i in range(0, length, chunk)], dim=2)
        return self.out_proj(out.transpose(1, 2).reshape(b, length, self.dim))


class TransformerBlock(nn.Module):
    """Pre-LN block: ``x += MHA(LN1(x)); x += MLP(LN2(x))`` (CLIP / GPT-2 style)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: int = 4,
                 activation: str = "quick_gelu", attention_dropout: float = 0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, num_heads, attention_dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(make_linear(dim, mlp_ratio * dim), make_activation(activation),
                                 make_linear(mlp_ratio * dim, dim))

    def forward(self, x: Tensor, key_mask: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x), key_mask)
        return x + self.mlp(self.norm2(x))


def cls_init_(param: Tensor) -> Tensor:
    """Glorot-uniform init of a single ``[dim]`` vector (as the reference's CLS token)."""
    bound = math.sqrt(6.0 / (1 + param.numel()))
    with torch.no_grad():
        return param.uniform_(-bound, bound)


__all__ = [
    "NUM_EDGE_TYPES", "GraphConvGated", "LinearOnly", "GraphBlock", "QuickGELU",
    "SelfAttention", "TransformerBlock", "edge_gather_index", "make_linear", "glorot_",
    "typed_edge_plan", "EdgePlan", "cached_weights",
]
