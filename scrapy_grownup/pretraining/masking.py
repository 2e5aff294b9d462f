"""Masked node-feature prediction: choosing the nodes, zeroing their inputs, their targets.

GROWN+UP 2.4.1: for each graph, M nodes are chosen (M = 16 in the paper); each chosen node
has ALL of its input features zeroed with probability 0.85 and is left unchanged otherwise
(BERT-style; like the reference, no random replacement). Every chosen node,
masked or not, is a prediction target: its tag, child index and child count (classes) and its
text, class and id embeddings (cosine loss).

Differences from the reference, on purpose: nodes are drawn without replacement (a graph with
fewer than M nodes has all of them chosen); the reference draws with replacement from its
sampled seed nodes (8 per graph in its config; the paper says M=16). The empty string embeds
to the zero vector here (row 0 of the store's string table), so a node without text (class,
id) has no text (class, id) target: a cosine against a zero vector is undefined. The
reference instead predicts the encoder's (non-zero) embedding of "" with a lower weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from scrapy_grownup.page.dom import NUM_CHILD_POSITIONS
from scrapy_grownup.pretraining.defaults import MASK_NODES, MASK_RATE

NUM_CHILD_COUNT_CLASSES = 32  # child count one-hot: 0..30 and ">30" (like the child index)
TEXT_TARGETS = ("text", "class", "id")
# batch attribute holding each embedding target, and the raw string-index array it comes from
TARGET_BLOCKS = {"text": ("x_text", "text_idx"), "class": ("x_class", "class_idx"),
                 "id": ("x_id", "id_idx")}


@dataclass
class MaskTargets:
    """What the chosen nodes of a batch must be predicted as (taken before masking)."""

    nodes: Tensor        # long [T]: batch node indices of the chosen nodes
    masked: Tensor       # bool [T]: whose inputs were zeroed
    tag: Tensor          # long [T]: tag class
    child_index: Tensor  # long [T]: position among element siblings (clamped to 31)
    child_count: Tensor  # long [T]: number of element children (clamped to 31)
    embeddings: dict[str, Tensor]  # "text"/"class"/"id" -> float [T, D]
    present: dict[str, Tensor]     # "text"/"class"/"id" -> bool [T]: non-empty string

    def __len__(self) -> int:
        return int(self.nodes.numel())


def select_nodes(ptr: Tensor | np.ndarray | Sequence[int], per_graph: int,
                 generator: torch.Generator | None = None) -> Tensor:
    """Up to ``per_graph`` distinct nodes of each graph, uniformly at random (sorted)."""
    ptr = torch.as_tensor(ptr, dtype=torch.long).cpu()
    chosen = []
    for start, end in zip(ptr[:-1].tolist(), ptr[1:].tolist()):
        n = end - start
        if n <= 0 or per_graph <= 0:
            continue
        take = torch.randperm(n, generator=generator)[:per_graph]
        chosen.append(take.sort().values + start)
    if not chosen:
        return torch.zeros(0, dtype=torch.long)
    return torch.cat(chosen)


def make_targets(batch: Any, raw: dict[str, np.ndarray], nodes: Tensor) -> MaskTargets:
    """Targets of the chosen ``nodes`` from the (still unmasked) ``batch`` and the raw per-node
    arrays ``raw`` (``tag_ids``, ``num_children``, ``child_index``, ``*_idx``, aligned with the
    batch's nodes)."""
    idx = nodes.numpy()
    last = NUM_CHILD_POSITIONS - 1

    def long(values) -> Tensor:
        return torch.from_numpy(np.asarray(values).astype(np.int64))

    embeddings, present = {}, {}
    for name, (attr, index_name) in TARGET_BLOCKS.items():
        embeddings[name] = getattr(batch, attr)[nodes].clone()
        present[name] = torch.from_numpy(raw[index_name][idx] > 0)
    return MaskTargets(
        nodes=nodes,
        masked=torch.zeros(len(idx), dtype=torch.bool),
        tag=long(raw["tag_ids"][idx]),
        child_index=long(np.minimum(raw["child_index"][idx], last)),
        child_count=long(np.minimum(raw["num_children"][idx], NUM_CHILD_COUNT_CLASSES - 1)),
        embeddings=embeddings,
        present=present,
    )


def mask_inputs(batch: Any, targets: MaskTargets, blocks: Sequence[str], rate: float = MASK_RATE,
                generator: torch.Generator | None = None) -> Tensor:
    """Zero every input block (``blocks``: batch attribute names) of a random ``rate`` share of
    the chosen nodes, in new tensors (the old ones are left as they were). Sets and returns
    ``targets.masked``."""
    draw = torch.rand(len(targets), generator=generator) < rate
    rows = targets.nodes[draw]
    for name in blocks:
        block = getattr(batch, name)
        if rows.numel():
            block = block.clone()
            block[rows.to(block.device)] = 0
        setattr(batch, name, block)
    targets.masked = draw
    return draw


__all__ = ["MASK_NODES", "MASK_RATE", "NUM_CHILD_COUNT_CLASSES", "MaskTargets", "make_targets",
           "mask_inputs", "select_nodes"]
