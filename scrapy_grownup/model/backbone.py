"""``GrownUpBackbone``: input blocks -> node features ``[N, K]`` and page features ``[B, K]``.

Layout (paper 2.3, reference section 3)::

    concat(input blocks) -> prelim LinearOnly blocks (in -> prelim_sizes... )
    S x [GraphConvGated block (K), LinearOnly block (K)] -> shared LSTMCell(K, K)
    (T > 0) per-node Linear(K, K) -> T pre-LN Transformer blocks over each page + a CLS token

The LSTM runs over depth: one ``LSTMCell`` is shared by the S layers, its state ``(h, c)`` starts
at zero for every node and ``h`` replaces the node features after each layer.

Attention is dense per page: ``pooling.dense_batch`` pads the pages of a batch to a common length
and a key mask hides the padding (the CLS token is always attendable, so no row is fully
masked). Memory is O(pages * L^2) for the longest page L: a batch mixing one huge page with
many small ones is split into groups of similar size when the padded size would exceed
``max_attention_cells``, and a single huge page chunks its queries (see ``SelfAttention``),
so memory stays bounded while compute stays O(L^2) per page.

Inference (eval mode with autograd off and no autocast, as ``ArticleExtractor`` runs it) takes
a faster path computing the same function (to float rounding): each conv block's projections
are computed only for the nodes that need them (see ``layers.EdgePlan``) and self loops need no
gather or scatter; the first LSTM step skips the recurrent matmul of its all-zero state, and
tanh goes through the (much faster) sigmoid; and when the batch carries the text blocks as
indices into tables of distinct strings (``Featurizer.batch``), the first prelim block projects each
distinct string once and gathers, instead of multiplying the dense ``[N, 3*D]`` embeddings.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from scrapy_grownup.model.config import ModelConfig
from scrapy_grownup.model.layers import (NUM_EDGE_TYPES, GraphBlock, TransformerBlock, cls_init_, edge_gather_index,
                     cached_weights, make_linear, typed_edge_plan)
from scrapy_grownup.model.pooling import dense_batch, max_pool, mean_pool

# A batch may give an input block ``name`` as ``{name}_index`` [N] (long) rows into
# ``{name}_table`` [U, D] instead of a dense [N, D] ``name``: the strings of pages repeat.
TABLE_SUFFIX = "_table"
INDEX_SUFFIX = "_index"


def graph_inputs(batch: Any) -> tuple[Tensor, int, int]:
    """``(batch vector [N], node count, page count)`` of a ``Data`` (one page) or ``Batch``.

    The batch vector must be sorted (as ``Batch.from_data_list`` makes it).
    """
    vec = getattr(batch, "batch", None)
    num_nodes = batch.num_nodes
    if vec is None:
        device = batch.edge_index.device
        return torch.zeros(num_nodes, dtype=torch.long, device=device), num_nodes, 1
    num_graphs = getattr(batch, "num_graphs", None)
    if num_graphs is None:
        num_graphs = int(vec.max()) + 1 if vec.numel() else 0
    return vec, num_nodes, int(num_graphs)


def plan_attention_groups(counts: list[int], max_cells: int) -> list[list[int]]:
    """Split pages into groups whose padded attention size ``len * (L+1)^2`` fits ``max_cells``.

    One group of all pages when everything fits (the common case). Otherwise pages are taken
    longest first, so the padding inside a group stays small; a page that alone exceeds the
    budget gets a group of its own. Page ids inside a group are ascending (``dense_batch``
    needs a sorted batch vector).
    """
    if not counts:
        return []
    longest = max(counts) + 1
    if len(counts) * longest * longest <= max_cells:
        return [list(range(len(counts)))]
    order = sorted(range(len(counts)), key=lambda i: -counts[i])
    groups, current, length = [], [], 0
    for page in order:
        if current and (len(current) + 1) * length * length > max_cells:
            groups.append(sorted(current))
            current = []
        if not current:
            length = counts[page] + 1
        current.append(page)
    groups.append(sorted(current))
    return groups


class GrownUpBackbone(nn.Module):
    """The GROWN+UP feature extractor; ``forward(batch) -> (node_features, page_features)``."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        k = config.hidden_size
        dims = [config.input_dim, *config.prelim_sizes]
        self.prelim = nn.ModuleList(
            GraphBlock(a, b, "linear", config.dropout) for a, b in zip(dims[:-1], dims[1:]))
        width = dims[-1]
        self.layers = nn.ModuleList()
        for _ in range(config.num_layers):
            self.layers.append(nn.ModuleList([
                GraphBlock(width, k, "conv", config.dropout, config.shared_target_gate),
                GraphBlock(k, k, "linear", config.dropout),
            ]))
            width = k
        self.lstm = nn.LSTMCell(k, k) if config.use_lstm and config.num_layers else None
        if self.lstm is not None:
            _init_lstm_(self.lstm)
        self.transformer_in: nn.Module | None = None
        self.cls_token: nn.Parameter | None = None
        self.transformer = nn.ModuleList(
            TransformerBlock(k, config.num_heads, config.mlp_ratio, config.transformer_activation,
                             config.attention_dropout)
            for _ in range(config.num_transformer_layers))
        if config.num_transformer_layers:
            self.transformer_in = make_linear(k, k)
            self.cls_token = nn.Parameter(cls_init_(torch.empty(k)))
        self.max_attention_cells = 1 << 24

    @property
    def max_attention_cells(self) -> int:
        return self._max_attention_cells

    @max_attention_cells.setter
    def max_attention_cells(self, value: int) -> None:
        """Padded attention cells (pages * L * L) per group and per query chunk."""
        self._max_attention_cells = int(value)
        for block in self.transformer:
            block.attn.max_cells = int(value)

    # -- inputs ---------------------------------------------------------------------------------
    def assemble_inputs(self, batch: Any) -> Tensor:
        """Concatenate the input blocks in config order, checking each block's presence/width."""
        parts, n = [], batch.num_nodes
        dtype = next(self.parameters()).dtype
        for name, size in self.config.input_blocks:
            block = self._input_block(batch, name)
            if block is None:
                raise self._missing_block(name)
            self._check_dense_block(name, block, n, size)
            parts.append(block.to(dtype))
        return torch.cat(parts, dim=-1)

    def _missing_block(self, name: str) -> ValueError:
        return ValueError(f"input block {name!r} is missing from the graph; the model expects "
                          f"blocks {self.config.input_blocks}")

    def _check_dense_block(self, name: str, block: Tensor, n: int, size: int) -> None:
        """A dense input block must be ``[n, size]``; the error names the model's inputs."""
        if block.dim() != 2 or block.shape[0] != n or block.shape[1] != size:
            raise ValueError(
                f"input block {name!r} has shape {tuple(block.shape)}, the model expects "
                f"[{n}, {size}] (model encoder {self.config.encoder!r}, feature version "
                f"{self.config.feature_version!r}; blocks {self.config.input_blocks})")

    @staticmethod
    def _input_block(batch: Any, name: str) -> Tensor | None:
        """Dense input block ``name``, materialised from its index form if that is what the
        batch holds."""
        block = getattr(batch, name, None)
        if block is None:
            index = getattr(batch, name + INDEX_SUFFIX, None)
            table = getattr(batch, name + TABLE_SUFFIX, None)
            if index is not None and table is not None:
                block = table.index_select(0, index)
        return block

    @staticmethod
    def check_edges(edge_index: Tensor, edge_type: Tensor, num_nodes: int) -> None:
        if edge_index.dim() != 2 or edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must be [2, E], got {tuple(edge_index.shape)}")
        if edge_type.shape != (edge_index.shape[1],):
            raise ValueError(f"edge_type must be [E={edge_index.shape[1]}], "
                             f"got {tuple(edge_type.shape)}")
        if edge_type.numel():
            lo, hi = torch.aminmax(edge_type)
            if int(lo) < 0 or int(hi) >= NUM_EDGE_TYPES:
                raise ValueError(f"edge_type values must be in [0, {NUM_EDGE_TYPES})")
            lo, hi = torch.aminmax(edge_index)
            if int(lo) < 0 or int(hi) >= num_nodes:
                raise ValueError(f"edge_index refers to nodes outside [0, {num_nodes})")

    # -- forward --------------------------------------------------------------------------------
    def forward(self, batch: Any) -> tuple[Tensor, Tensor]:
        if not self.training and not torch.is_grad_enabled() and not _autocast_active():
            return self._forward_inference(batch)
        vec, n, num_graphs = graph_inputs(batch)
        x = self.assemble_inputs(batch)
        edge_index, edge_type = batch.edge_index, batch.edge_type
        self.check_edges(edge_index, edge_type, n)
        gather = edge_gather_index(edge_index, edge_type)

        for block in self.prelim:
            x = block(x)
        state = None
        for conv_block, linear_block in self.layers:
            x = conv_block(x, edge_index, edge_type, gather)
            x = linear_block(x)
            if self.lstm is not None:
                if state is None:
                    zeros = x.new_zeros(n, self.config.hidden_size)
                    state = (zeros, zeros)
                state = self.lstm(x, state)
                x = state[0]

        return self._readout(x, vec, num_graphs)

    def _readout(self, x: Tensor, vec: Tensor, num_graphs: int) -> tuple[Tensor, Tensor]:
        """``(node features, page features)`` after the graph layers: the Transformer blocks
        (if any) and the CLS token or pooled readout."""
        if self.transformer_in is None:
            return x, self._pool(x, vec, num_graphs)
        x, cls = self._attend(self.transformer_in(x), vec, num_graphs)
        page = cls if self.config.readout == "cls" else self._pool(x, vec, num_graphs)
        return x, page

    def _forward_inference(self, batch: Any) -> tuple[Tensor, Tensor]:
        """``forward`` in eval mode without autograd (see the module docstring)."""
        vec, n, num_graphs = graph_inputs(batch)
        edge_index, edge_type = batch.edge_index, batch.edge_type
        self.check_edges(edge_index, edge_type, n)
        prelim = list(self.prelim)
        x = self._first_block_inference(batch, n) if prelim else None
        if x is None:
            x = self.assemble_inputs(batch)
        else:
            prelim = prelim[1:]
        for block in prelim:
            x = block.forward_inference(x)
        plan = typed_edge_plan(edge_index, edge_type, n) if self.layers else None
        state = None
        for conv_block, linear_block in self.layers:
            x = conv_block.forward_inference(x, plan)
            x = linear_block.forward_inference(x)
            if self.lstm is not None:
                state = _lstm_step(self.lstm, x, state)
                x = state[0]

        return self._readout(x, vec, num_graphs)

    def _first_block_inference(self, batch: Any, n: int) -> Tensor | None:
        """The first prelim block from the index form of the text blocks: each block's slice of
        the (op, residual) weights multiplies the distinct strings once, rows are gathered per
        node. ``None`` when the batch or the block does not allow it."""
        if not any(getattr(batch, name, None) is None
                   and getattr(batch, name + INDEX_SUFFIX, None) is not None
                   for name, _ in self.config.input_blocks):
            return None  # all blocks dense: nothing to gain over assemble_inputs
        first = self.prelim[0]
        fused = first.fused_input_weights()
        if fused is None:
            return None
        weight, bias = fused
        dtype = weight.dtype
        gathered, dense, columns, start = [], [], [], 0
        for name, size in self.config.input_blocks:
            cols = slice(start, start + size)
            start += size
            block = getattr(batch, name, None)
            index = table = None
            if block is None:
                index = getattr(batch, name + INDEX_SUFFIX, None)
                table = getattr(batch, name + TABLE_SUFFIX, None)
                if index is None or table is None:
                    raise self._missing_block(name)
            if index is not None:
                if index.shape != (n,) or table.dim() != 2 or table.shape[1] != size:
                    raise ValueError(
                        f"input block {name!r}: index {tuple(index.shape)} into a table "
                        f"{tuple(table.shape)}, the model expects [{n}] rows of width {size}")
                gathered.append((index, table, cols))
            else:
                self._check_dense_block(name, block, n, size)
                dense.append(block.to(dtype))
                columns.append(cols)
        if dense:
            w_dense = torch.cat([weight[:, c] for c in columns], dim=1)
            x_dense = dense[0] if len(dense) == 1 else torch.cat(dense, dim=1)
            y = torch.nn.functional.linear(x_dense, w_dense, bias)
        else:
            y = bias.expand(n, -1).clone()
        for index, table, cols in gathered:
            projected = torch.nn.functional.linear(table.to(dtype), weight[:, cols])
            y.add_(projected.index_select(0, index))
        out = first.op.lin.out_features
        return first.finish(y[:, :out], first.residual[1](y[:, out:]))

    def _pool(self, x: Tensor, vec: Tensor, num_graphs: int) -> Tensor:
        if self.config.readout == "max":
            return max_pool(x, vec, num_graphs)
        return mean_pool(x, vec, num_graphs)

    def _attend(self, x: Tensor, vec: Tensor, num_graphs: int) -> tuple[Tensor, Tensor]:
        if num_graphs == 0:
            return x, x.new_zeros(0, x.shape[1])
        counts = torch.bincount(vec, minlength=num_graphs).tolist()
        groups = plan_attention_groups(counts, self.max_attention_cells)
        if len(groups) == 1:
            return self._attend_dense(x, vec, num_graphs, max(counts))
        nodes_out = torch.empty_like(x)
        cls_out = x.new_empty(num_graphs, x.shape[1])
        slot = torch.full((num_graphs,), -1, dtype=torch.long, device=x.device)
        for group in groups:
            ids = torch.tensor(group, dtype=torch.long, device=x.device)
            slot[ids] = torch.arange(len(group), device=x.device)
            select = slot[vec] >= 0
            out, cls = self._attend_dense(x[select], slot[vec[select]], len(group),
                                          max(counts[i] for i in group))
            nodes_out[select] = out
            cls_out[ids] = cls
            slot[ids] = -1
        return nodes_out, cls_out

    def _attend_dense(self, x: Tensor, vec: Tensor, num_graphs: int,
                      longest: int) -> tuple[Tensor, Tensor]:
        dense, mask = dense_batch(x, vec, num_graphs, longest)
        cls = self.cls_token.to(x.dtype).expand(num_graphs, 1, -1)
        seq = torch.cat([cls, dense], dim=1)
        key_mask = torch.cat([mask.new_ones(num_graphs, 1), mask], dim=1)
        for block in self.transformer:
            seq = block(seq, key_mask)
        return seq[:, 1:][mask], seq[:, 0]


def _autocast_active() -> bool:
    """Autocast does not cover the inference path's in-place ops: it takes the plain path."""
    try:
        return any(torch.is_autocast_enabled(device) for device in ("cpu", "cuda"))
    except TypeError:  # pragma: no cover - torch without the device argument
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()


def _lstm_inference_weights(cell: nn.LSTMCell) -> tuple[Tensor, Tensor, Tensor]:
    """``(W_ih, W_hh, b_ih + b_hh)`` with the cell-gate rows doubled (exact in floating point),
    so one sigmoid over all gates gives ``sigmoid(2 g)``, from which ``tanh(g)`` follows."""
    k = cell.hidden_size
    params = [p for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
              if p is not None]

    def build():
        scale = cell.weight_ih.new_ones(4 * k, 1)
        scale[2 * k:3 * k] = 2.0
        bias = cell.weight_ih.new_zeros(4 * k)
        for b in (cell.bias_ih, cell.bias_hh):
            if b is not None:
                bias = bias + b
        return ((cell.weight_ih * scale).contiguous(), (cell.weight_hh * scale).contiguous(),
                (bias * scale[:, 0]).contiguous())

    return cached_weights(cell, "inference", params, build)


def _lstm_step(cell: nn.LSTMCell, x: Tensor,
               state: tuple[Tensor, Tensor] | None) -> tuple[Tensor, Tensor]:
    """``cell(x, state)`` for inference (``state=None``: zeros, whose recurrent matmul is
    skipped). ``tanh(z)`` is computed as ``2 sigmoid(2z) - 1``: the CPU's tanh kernel is several
    times slower than its sigmoid; the results agree to ~1e-7."""
    w_ih, w_hh, bias = _lstm_inference_weights(cell)
    gates = torch.addmm(bias, x, w_ih.t())
    if state is not None:
        gates.addmm_(state[0], w_hh.t())
    if gates.dtype in (torch.float16, torch.bfloat16):  # 2 sigmoid(2z) - 1 is too coarse there
        i, f, g, o = gates.chunk(4, 1)
        i, f, o, g = torch.sigmoid(i), torch.sigmoid(f), torch.sigmoid(o), torch.tanh(g * 0.5)
        c = i * g if state is None else torch.addcmul(f * state[1], i, g)
        return o * torch.tanh(c), c
    i, f, g, o = torch.sigmoid_(gates).chunk(4, 1)
    g = g.mul(2.0).sub_(1.0)  # tanh of the cell gate
    c = i * g if state is None else torch.addcmul(f * state[1], i, g)
    h = torch.sigmoid_(c * 2.0).mul_(2.0).sub_(1.0).mul_(o)
    return h, c


def _init_lstm_(cell: nn.LSTMCell) -> None:
    """Keras defaults: Glorot input kernel, orthogonal recurrent kernel, forget-gate bias 1."""
    k = cell.hidden_size
    with torch.no_grad():
        for g in range(4):
            nn.init.xavier_uniform_(cell.weight_ih[g * k:(g + 1) * k])
        nn.init.orthogonal_(cell.weight_hh)
        cell.bias_ih.zero_()
        cell.bias_hh.zero_()
        cell.bias_ih[k:2 * k] = 1.0  # PyTorch gate order: input, forget, cell, output


__all__ = ["GrownUpBackbone", "plan_attention_groups"]
