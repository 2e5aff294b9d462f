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
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch_geometric.nn import MessagePassing

NUM_EDGE_TYPES = 3  # parent -> child, child -> parent, self loop (scrapy_grownup.dom)


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


def edge_gather_index(edge_index: Tensor, edge_type: Tensor,
                      num_types: int = NUM_EDGE_TYPES) -> tuple[Tensor, Tensor]:
    """Flat row indices ``(src*T + type, dst*T + type)`` into a ``[N*T, K]`` view.

    The caller must have checked ``0 <= edge_type < num_types``: an out-of-range type would
    silently address another node's row.
    """
    src, dst = edge_index[0], edge_index[1]
    return src * num_types + edge_type, dst * num_types + edge_type


class GraphConvGated(MessagePassing):
    """Typed gated graph convolution (see the module docstring).

    ``forward(x [N, in], edge_index [2, E] source->target, edge_type [E])`` -> ``[N, out]``.
    Messages flow along the edges: node ``i`` sums over the edges ``j -> i``.
    """

    def __init__(self, in_dim: int, out_dim: int, num_types: int = NUM_EDGE_TYPES,
                 shared_target_gate: bool = False):
        super().__init__(aggr="add", node_dim=0)
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
        return self.propagate(edge_index, msg=msg, gate=gate_src + gate_dst, size=(n, n))

    def message(self, msg: Tensor, gate: Tensor) -> Tensor:  # noqa: D102 - PyG hook
        return torch.sigmoid(gate) * msg

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
]
