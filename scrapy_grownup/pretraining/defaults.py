"""Pre-training defaults (no torch import: the CLI reads them to build its help)."""

from __future__ import annotations

# GROWN+UP 2.4.1: M nodes chosen per graph, 85% of them zeroed (the reference config draws
# 8 per graph; the paper says M = 16).
MASK_NODES = 16
MASK_RATE = 0.85
# The paper's loss coefficients (2.4). "child_index" has no coefficient in the paper (its
# "number of child tags" is the child-position one-hot in the reference code): it gets the
# child-count one. See ``heads`` for how they combine.
PAPER_WEIGHTS: dict[str, float] = {
    "site": 0.05, "tag": 0.2, "text": 0.5, "class": 0.1, "id": 0.05,
    "child_count": 0.1, "child_index": 0.1,
}

__all__ = ["MASK_NODES", "MASK_RATE", "PAPER_WEIGHTS"]
