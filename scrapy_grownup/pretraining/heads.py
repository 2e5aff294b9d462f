"""Pre-training heads and losses on top of the GROWN+UP backbone (paper 2.4).

Masked node-feature prediction (2.4.1): one reprojection per target on the node features,
``X W_t + b_t``: logits for the tag, the child index and the child count (cross-entropy), and
``tanh(X W_t + b_t)`` for the text, class and id embeddings (cosine loss ``1 - cos``).

Same website (2.4.2): each page's features (the backbone's page readout: the CLS token, or the
mean / max of the node features without Transformer) are projected, ``tanh(p W + b)``;
``z = ReLU(cos(x1, x2))`` is the probability that the two pages are from one site, trained with
binary cross-entropy on ``z`` (clamped to ``[1e-7, 1 - 1e-7]`` like Keras). Negatives are made
inside each batch by permuting the second pages of the pairs (``warc.pairs.batch_negatives``:
the second pages of the first half are reversed, as in the reference code) and labelled by
comparing site hashes.

Loss weights (``PAPER_WEIGHTS``) are the paper's coefficients: 0.05 same-website, 0.2 tag,
0.5 text, 0.1 class, 0.05 id, 0.1 child count. The paper writes each masked term as the sum
over the two pages of a pair, ``w_t [L_t(page 1) + L_t(page 2)]``; here each masked term is
``2 * w_t * mean_t``, the mean over all chosen nodes of the batch times the two pages of a pair,
so that the balance against the same-website term is the paper's. Per node the losses are
means (as in the reference code), not the sum over the M nodes the paper's formula shows. The
child index has no weight in the paper (its "number of child tags" is a child-position one-hot
in the reference code): it gets the child-count weight, 0.1.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scrapy_grownup.page.dom import NUM_CHILD_POSITIONS
from scrapy_grownup.model.layers import make_linear
from scrapy_grownup.page.tags import NUM_TAG_CLASSES
from scrapy_grownup.pretraining.defaults import PAPER_WEIGHTS
from scrapy_grownup.pretraining.masking import NUM_CHILD_COUNT_CLASSES, TEXT_TARGETS, MaskTargets

MASK_LOSSES = ("tag", "child_index", "child_count", *TEXT_TARGETS)
PAGES_PER_PAIR = 2.0
BCE_EPSILON = 1e-7  # Keras clamps probabilities to [eps, 1 - eps] before the log


class PretrainHeads(nn.Module):
    """The reprojections of both objectives, for a backbone of width ``hidden_size``."""

    def __init__(self, hidden_size: int, text_dim: int, site_dim: int | None = None):
        super().__init__()
        self.hidden_size, self.text_dim = int(hidden_size), int(text_dim)
        self.site_dim = int(site_dim or hidden_size)
        self.tag = make_linear(hidden_size, NUM_TAG_CLASSES)
        self.child_index = make_linear(hidden_size, NUM_CHILD_POSITIONS)
        self.child_count = make_linear(hidden_size, NUM_CHILD_COUNT_CLASSES)
        self.embed = nn.ModuleDict({name: make_linear(hidden_size, text_dim)
                                    for name in TEXT_TARGETS})
        self.site = make_linear(hidden_size, self.site_dim)

    def shape_config(self) -> dict[str, int]:
        return {"hidden_size": self.hidden_size, "text_dim": self.text_dim,
                "site_dim": self.site_dim}

    # -- masked node features -------------------------------------------------------------------
    def mask_losses(self, node_features: Tensor, targets: MaskTargets) -> dict[str, Tensor]:
        """Mean loss per target over the chosen nodes (embedding targets: over the nodes whose
        string is not empty; a target without any such node gives a zero keeping the graph)."""
        x = node_features[targets.nodes.to(node_features.device)]
        device = x.device
        out = {
            "tag": _cross_entropy(self.tag(x), targets.tag.to(device)),
            "child_index": _cross_entropy(self.child_index(x), targets.child_index.to(device)),
            "child_count": _cross_entropy(self.child_count(x), targets.child_count.to(device)),
        }
        for name in TEXT_TARGETS:
            keep = targets.present[name].to(device)
            if not bool(keep.any()):
                out[name] = x.sum() * 0.0
                continue
            pred = torch.tanh(self.embed[name](x[keep]))
            gold = targets.embeddings[name].to(device)[keep]
            out[name] = (1.0 - F.cosine_similarity(pred.float(), gold.float(), dim=-1)).mean()
        return out

    def mask_accuracy(self, node_features: Tensor, targets: MaskTargets) -> dict[str, float]:
        """Accuracy of the class targets (for logs)."""
        x = node_features[targets.nodes.to(node_features.device)]
        out = {}
        for name in ("tag", "child_index", "child_count"):
            gold = getattr(targets, name).to(x.device)
            pred = getattr(self, name)(x).argmax(-1)
            out[name] = float((pred == gold).float().mean()) if gold.numel() else 0.0
        return out

    # -- same website ---------------------------------------------------------------------------
    def site_probability(self, page_a: Tensor, page_b: Tensor) -> Tensor:
        """``ReLU(cos(tanh(a W + b), tanh(b W + b)))`` per row: P(same website)."""
        xa = torch.tanh(self.site(page_a)).float()
        xb = torch.tanh(self.site(page_b)).float()
        return torch.relu(F.cosine_similarity(xa, xb, dim=-1))

    def site_loss(self, page_a: Tensor, page_b: Tensor, labels: Tensor) -> Tensor:
        """Binary cross-entropy of ``site_probability`` against ``labels`` (1: same site)."""
        if page_a.shape[0] == 0:
            return self.site.weight.sum() * 0.0
        z = self.site_probability(page_a, page_b).clamp(BCE_EPSILON, 1.0 - BCE_EPSILON)
        y = labels.to(z.device, z.dtype)
        return -(y * torch.log(z) + (1.0 - y) * torch.log(1.0 - z)).mean()


def pair_negatives(site_a: np.ndarray, site_b: np.ndarray, ratio: float = 0.5
                   ) -> tuple[np.ndarray, np.ndarray]:
    """In-batch negatives: ``(order, labels)`` for a batch of positive pairs (see
    ``warc.pairs.batch_negatives``): pair ``i`` becomes (first ``i``, second ``order[i]``)."""
    from scrapy_grownup.warc.pairs import batch_negatives

    return batch_negatives(site_a, site_b, ratio)


def total_loss(parts: Mapping[str, Tensor], weights: Mapping[str, float]) -> Tensor:
    """``w_site * L_site + sum_t 2 * w_t * L_t`` (see the module docstring)."""
    total = None
    for name, value in parts.items():
        w = float(weights.get(name, 0.0))
        if not w:
            continue
        term = w * value * (1.0 if name == "site" else PAGES_PER_PAIR)
        total = term if total is None else total + term
    if total is None:
        raise ValueError(f"no loss with a non-zero weight among {sorted(parts)}")
    return total


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """``PAPER_WEIGHTS`` updated with ``weights``; unknown names or negative values raise."""
    unknown = sorted(set(weights) - set(PAPER_WEIGHTS))
    if unknown:
        raise ValueError(f"unknown loss weights {unknown}; known: {sorted(PAPER_WEIGHTS)}")
    out = dict(PAPER_WEIGHTS)
    out.update({k: float(v) for k, v in weights.items()})
    if any(v < 0 for v in out.values()):
        raise ValueError(f"loss weights must be >= 0: {out}")
    if not any(out.values()):
        raise ValueError("every loss weight is 0")
    return out


def _cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    if targets.numel() == 0:
        return logits.sum() * 0.0
    return F.cross_entropy(logits.float(), targets)


__all__ = ["PAPER_WEIGHTS", "MASK_LOSSES", "PretrainHeads", "check_weights", "pair_negatives",
           "total_loss"]
