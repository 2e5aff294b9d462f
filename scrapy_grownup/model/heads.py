"""Task heads on the backbone features and the losses they are trained with."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .layers import make_linear


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
        nn.init.xavier_uniform_(self.weight)

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
                                mask: Tensor | None = None, reduction: str = "mean") -> Tensor:
    """Class-weighted binary cross-entropy on logits with Keras-style label smoothing.

    Targets are 1 (content), 0 (boilerplate) or -1 (not a candidate: ignored), as are nodes
    where ``mask`` is False. Smoothed target ``y (1 - s) + s / 2``; each node's loss is scaled
    by ``pos_weight`` or ``neg_weight`` by its label; ``"mean"`` divides the weighted sum by the
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
    losses = F.binary_cross_entropy_with_logits(logits, smoothed, reduction="none") * weight
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction != "mean":
        raise ValueError(f"unknown reduction {reduction!r}")
    return losses.sum() / valid.sum().clamp(min=1).to(logits.dtype)


__all__ = ["NodeHead", "ArcFaceHead", "PageBatchNorm", "masked_cross_entropy",
           "weighted_bce_with_smoothing"]
