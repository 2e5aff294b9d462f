"""Task heads on the backbone features and the losses they are trained with."""

from __future__ import annotations

import math
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scrapy_grownup.model.layers import make_linear
from scrapy_grownup.model.pooling import max_pool, mean_pool

TextRows = Callable[[Tensor], Tensor]
Block = tuple[Tensor, Optional[Tensor]]  # (rows or distinct strings' vectors, row per node)


class NodeHead(nn.Module):
    """Per-node classifier: ``Linear(K, out)`` or ``Linear(K, h) -> ReLU -> Linear(h, out)``.

    ``num_outputs == 1`` (content vs boilerplate) returns logits ``[N]``; more outputs (block
    roles) return ``[N, num_outputs]``.
    """

    def __init__(self, in_dim: int, hidden: int = 0, num_outputs: int = 1):
        super().__init__()
        self.num_outputs = num_outputs
        if hidden:
            self.net: nn.Module = nn.Sequential(make_linear(in_dim, hidden), nn.ReLU(),
                                                make_linear(hidden, num_outputs))
        else:
            self.net = make_linear(in_dim, num_outputs)

    def forward(self, x: Tensor) -> Tensor:
        out = self.net(x)
        return out.squeeze(-1) if self.num_outputs == 1 else out


class ArcFaceHead(nn.Module):
    """Li-ArcFace cosine classifier (reference ``DenseL2Norm`` + ``LinearArcLoss``).

    ``cos = normalize(f) . normalize(w_c)``; the angle is mapped linearly to ``[-1, 1]``::

        logits = s * ((pi - 2 acos(cos)) / pi - [c == y] * 2m / pi)

    ``forward(features)`` gives the plain (inference) logits, ``forward(features, labels)`` the
    margin logits to train with (labels -1: no margin on that row).
    """

    def __init__(self, in_dim: int, num_classes: int, scale: float = 5.0, margin: float = 0.3):
        super().__init__()
        self.scale, self.margin = float(scale), float(margin)
        self.weight = nn.Parameter(torch.empty(num_classes, in_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.weight)  # the class centres

    def cosine(self, features: Tensor) -> Tensor:
        # float32 even under autocast: the clamp below and acos need the precision.
        with torch.autocast(features.device.type, enabled=False):
            return (F.normalize(features.float(), dim=-1)
                    @ F.normalize(self.weight.float(), dim=-1).t())

    def forward(self, features: Tensor, labels: Tensor | None = None) -> Tensor:
        # Clamp away from +-1: acos has an infinite derivative there.
        cos = self.cosine(features).clamp(-1.0 + 1e-6, 1.0 - 1e-6)
        linear = (math.pi - 2.0 * torch.acos(cos)) / math.pi
        if labels is not None:
            valid = labels >= 0
            onehot = F.one_hot(labels.clamp(min=0), linear.shape[-1]).to(linear.dtype)
            onehot = onehot * valid[:, None].to(linear.dtype)
            linear = linear - onehot * (2.0 * self.margin / math.pi)
        return self.scale * linear

    def loss(self, features: Tensor, labels: Tensor) -> Tensor:
        """Softmax cross-entropy on the margin logits (rows with label -1 ignored; with no
        labelled row the result is a zero that keeps the graph)."""
        return masked_cross_entropy(self(features, labels), labels)

    def probabilities(self, features: Tensor) -> Tensor:
        """Class probabilities: softmax of the un-margined logits ``s (pi - 2 theta) / pi``."""
        return torch.softmax(self(features), dim=-1)

    def extra_repr(self) -> str:
        return (f"{self.weight.shape[1]}, classes={self.weight.shape[0]}, s={self.scale}, "
                f"m={self.margin}")


class ContentPooledReadout(nn.Module):
    """Page features for the page-type head, pooled by where the page's content is.

    A page's type shows in what its main content talks about, in what surrounds it, and in
    its shape; a plain mean over all nodes blurs the three. ``pool`` (no parameters) gives per
    page: the mean and content-weighted mean of the node features, their maximum, the
    content-weighted and boilerplate-weighted means of the text embeddings (each node weighted
    by ``log(1 + own text length)``), the mean and content-weighted mean of the structural
    block, and four scalars (log node count, mean content probability, content fraction, log
    content text length). ``forward`` standardises them (batch norm, no affine) and projects
    them to ``out_dim`` (dropout, Linear, LayerNorm, ReLU). Content probabilities come from
    the content head, detached: the page-type loss does not move the content decision.
    """

    def __init__(self, hidden_size: int, text_dim: int, struct_dim: int, text_length_column: int,
                 out_dim: int, dropout: float = 0.5, extra_dim: int = 0):
        super().__init__()
        self.text_length_column = int(text_length_column)
        # extra_dim: page-level inputs appended after ``pool`` (``page_signals``)
        self.extra_dim = int(extra_dim)
        self.in_dim = 3 * hidden_size + 2 * text_dim + 2 * struct_dim + 4 + self.extra_dim
        self.norm = PageBatchNorm(self.in_dim)
        self.net = nn.Sequential(nn.Dropout(dropout), make_linear(self.in_dim, out_dim),
                                 nn.LayerNorm(out_dim), nn.ReLU(), nn.Dropout(dropout))

    def pool(self, nodes: Tensor, content: Tensor, text: "TextRows", struct: Tensor,
             vec: Tensor, num_pages: int) -> Tensor:
        """``[B, in_dim]`` pooled features. ``text(rows)`` gives the text embeddings of the
        chosen node rows (batches may hold them as indices into a string table)."""
        nodes, content, struct = nodes.float(), content.float(), struct.float()
        ones = torch.ones_like(content)
        # log(1 + own text length): the structural block stores it divided by 8
        length = struct[:, self.text_length_column] * 8.0
        has_text = torch.nonzero(length > 0).squeeze(1)
        text_rows = text(has_text).float()
        text_vec = vec[has_text]

        def mean(values: Tensor, weights: Tensor, index: Tensor) -> Tensor:
            total = values.new_zeros(num_pages, values.shape[1]).index_add_(
                0, index, values * weights[:, None])
            norm = weights.new_zeros(num_pages).index_add_(0, index, weights)
            return total / norm.clamp(min=1e-6)[:, None]

        count = ones.new_zeros(num_pages).index_add_(0, vec, ones)
        scalars = torch.stack([
            count.clamp(min=1).log(),
            mean(content[:, None], ones, vec)[:, 0],
            mean((content > 0.5).float()[:, None], ones, vec)[:, 0],
            ones.new_zeros(num_pages).index_add_(0, vec, length.expm1()
                                                 * (content > 0.5).float()).log1p(),
        ], dim=1)
        text_content = length[has_text] * content[has_text]
        return torch.cat([
            mean_pool(nodes, vec, num_pages), mean(nodes, content, vec),
            max_pool(nodes, vec, num_pages),
            mean(text_rows, text_content, text_vec),
            mean(text_rows, length[has_text] - text_content, text_vec),
            mean_pool(struct, vec, num_pages), mean(struct, content, vec), scalars,
        ], dim=1)

    def forward(self, pooled: Tensor) -> Tensor:
        return self.net(self.norm(pooled))

    def extra_repr(self) -> str:
        return (f"in={self.in_dim}, text_length_column={self.text_length_column}, "
                f"extra={self.extra_dim}")


class ContextRoleHead(nn.Module):
    """Per-node block-role classifier that also reads the node's own inputs and its ancestors'.

    A frozen content backbone's node features say "content or not" but little about *which*
    kind: a comment looks like article text, a caption like a short paragraph. What tells them
    apart is in the markup: the node's own class / id words and text, and those of the
    containers above it (``comments``, ``related``...). ``inputs`` (no parameters) concatenates
    the node features, the content probability, the node's text, class, id and structural
    blocks, and a decaying sum of its ancestors' class + id embeddings
    (``a(v) = e(parent) + decay * a(parent)``); ``forward`` standardises them (batch norm, no
    affine) and classifies with a one-hidden-layer MLP.
    """

    def __init__(self, hidden_size: int, text_dim: int, attr_dim: int, struct_dim: int,
                 hidden: int, num_roles: int, decay: float = 0.7, dropout: float = 0.2):
        super().__init__()
        self.decay = float(decay)
        self.widths = (hidden_size, 1, text_dim, attr_dim, attr_dim, struct_dim, attr_dim)
        self.in_dim = sum(self.widths)
        self.norm = nn.BatchNorm1d(self.in_dim, affine=False)
        self.net = nn.Sequential(nn.Dropout(dropout), make_linear(self.in_dim, hidden), nn.ReLU(),
                                 nn.Dropout(dropout), make_linear(hidden, num_roles))

    def inputs(self, nodes: Tensor, content: Tensor, text: Tensor, klass: Tensor, ident: Tensor,
               struct: Tensor, parent: Tensor) -> Tensor:
        """``[N, in_dim]``; ``parent`` [N] is each node's parent row (a root: itself)."""
        attrs = (klass + ident).float()
        return torch.cat([nodes.float(), content.float()[:, None], text.float(), klass.float(),
                          ident.float(), struct.float(),
                          ancestor_sum(attrs, parent, self.decay)], dim=1)

    def forward(self, inputs: Tensor) -> Tensor:
        return self.net(self.norm(inputs))

    def infer(self, nodes: Tensor, content: Tensor, text: "Block", klass: "Block",
              ident: "Block", struct: Tensor, parent: Tensor) -> Tensor:
        """``forward(inputs(...))`` in eval mode without building the wide inputs.

        The batch norm folds into the first linear layer; the text, class and id blocks
        (``(table, index)``: distinct strings' vectors and a row per node, index None for a
        dense block) are projected once per distinct string; and as the ancestor sum is
        linear it runs over the projections (hidden width) instead of the embeddings.
        """
        first, last = self.net[1], self.net[4]
        scale = (self.norm.running_var + self.norm.eps).rsqrt()
        weight = first.weight * scale
        bias = first.bias - weight @ self.norm.running_mean
        w_nodes, w_content, w_text, w_class, w_id, w_struct, w_anc = torch.split(
            weight, list(self.widths), dim=1)

        def project(block: "Block", w: Tensor) -> Tensor:
            table, index = block
            out = table.float() @ w.t()
            return out if index is None else out.index_select(0, index)

        hidden = torch.addmm(bias, nodes.float(), w_nodes.t())
        hidden += content.float()[:, None] * w_content[:, 0]
        hidden += project(text, w_text) + project(klass, w_class) + project(ident, w_id)
        hidden += struct.float() @ w_struct.t()
        hidden += ancestor_sum(project(klass, w_anc) + project(ident, w_anc), parent, self.decay)
        return last(torch.relu(hidden))

    def extra_repr(self) -> str:
        return f"in={self.in_dim}, decay={self.decay}"


def tree_depths(parent: Tensor) -> Tensor:
    """Depth of every node of a forest given as parent rows (roots point at themselves)."""
    rows = torch.arange(len(parent), device=parent.device)
    root = parent == rows
    depth = torch.zeros_like(parent)
    while True:  # one round per level
        deeper = torch.where(root, depth, depth[parent] + 1)
        if torch.equal(deeper, depth):
            return depth
        depth = deeper


def ancestor_sum(values: Tensor, parent: Tensor, decay: float) -> Tensor:
    """``a(v) = values(parent(v)) + decay * a(parent(v))`` (0 at roots), level by level."""
    out = torch.zeros_like(values)
    if not len(parent):
        return out
    depth = tree_depths(parent)
    order = torch.argsort(depth, stable=True)
    counts = torch.bincount(depth).tolist()
    start = counts[0]
    for count in counts[1:]:
        rows = order[start:start + count]
        up = parent[rows]
        out[rows] = values[up] + decay * out[up]
        start += count
    return out


def parent_rows(edge_index: Tensor, edge_type: Tensor, num_nodes: int,
                parent_type: int = 0) -> Tensor:
    """Each node's parent row from a batch's typed edges (type ``parent_type``: parent ->
    child); roots get their own row."""
    parent = torch.arange(num_nodes, device=edge_index.device)
    mask = edge_type == parent_type
    parent[edge_index[1, mask]] = edge_index[0, mask]
    return parent


class PageBatchNorm(nn.BatchNorm1d):
    """``BatchNorm1d`` without affine parameters over page features ``[B, K]``.

    A training batch of a single page (a page over the node budget trains alone) is normalised
    with the running statistics instead of failing.
    """

    def __init__(self, num_features: int, momentum: float = 0.1):
        super().__init__(num_features, affine=False, momentum=momentum)

    def forward(self, x: Tensor) -> Tensor:
        if self.training and x.shape[0] < 2:
            return F.batch_norm(x, self.running_mean, self.running_var, None, None, False, 0.0,
                                self.eps)
        return super().forward(x)


def masked_cross_entropy(logits: Tensor, targets: Tensor, weight: Tensor | None = None) -> Tensor:
    """Mean softmax cross-entropy over rows whose target is >= 0 (``weight``: per class).

    Unlike ``F.cross_entropy(ignore_index=-1)`` it gives 0 (keeping the graph), not NaN, when
    no row is labelled: a batch without pages of the head's dataset simply adds nothing.
    """
    valid = targets >= 0
    if not bool(valid.any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits[valid].float(), targets[valid],
                           weight=None if weight is None else weight.to(logits.device).float())


def weighted_bce_with_smoothing(logits: Tensor, targets: Tensor, pos_weight: float = 1.0,
                                neg_weight: float = 1.0, smoothing: float = 0.01,
                                mask: Tensor | None = None, reduction: str = "mean",
                                node_weight: Tensor | None = None) -> Tensor:
    """Class-weighted binary cross-entropy on logits with Keras-style label smoothing.

    Targets are 1 (content), 0 (boilerplate) or -1 (not a candidate: ignored), as are nodes
    where ``mask`` is False. Smoothed target ``y (1 - s) + s / 2``; each node's loss is scaled
    by ``pos_weight`` or ``neg_weight`` by its label and by ``node_weight`` where given (a
    page's weight on each of its nodes); ``"mean"`` divides the weighted sum by the
    number of counted nodes (the reference normalises its class weights to average 1, e.g.
    CleanEval 1.2 / 0.8). With no counted node the result is a zero that keeps the graph.
    """
    valid = targets >= 0
    if mask is not None:
        valid = valid & mask.bool()
    y = targets.to(logits.dtype).clamp(min=0.0)
    smoothed = y * (1.0 - smoothing) + 0.5 * smoothing
    weight = torch.where(y > 0.5, torch.full_like(y, pos_weight), torch.full_like(y, neg_weight))
    weight = weight * valid.to(logits.dtype)
    if node_weight is not None:
        weight = weight * node_weight.to(logits.dtype)
    losses = F.binary_cross_entropy_with_logits(logits, smoothed, reduction="none") * weight
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction != "mean":
        raise ValueError(f"unknown reduction {reduction!r}")
    return losses.sum() / valid.sum().clamp(min=1).to(logits.dtype)


__all__ = ["NodeHead", "ArcFaceHead", "ContentPooledReadout", "ContextRoleHead", "ancestor_sum",
           "PageBatchNorm", "masked_cross_entropy",
           "weighted_bce_with_smoothing"]
