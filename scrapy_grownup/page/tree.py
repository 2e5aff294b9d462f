"""Whole-subtree arithmetic over a page's ``parent`` array, one depth level at a time.

Pages hold tens of thousands of nodes; a Python walk per node is the slow part of every
per-page rule. Grouping nodes by depth turns "sum over my subtree" and "does any ancestor have
this flag" into one ``numpy`` call per level.
"""

from __future__ import annotations

import numpy as np

__all__ = ["depth_levels", "inherit", "subtree_sum"]


def depth_levels(depth: np.ndarray) -> list[np.ndarray]:
    """Node indices grouped by depth, shallowest first."""
    depth = np.asarray(depth, dtype=np.int64)
    if not len(depth):
        return []
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    return [order[bounds[d]:bounds[d + 1]] for d in range(len(bounds) - 1)]


def subtree_sum(values: np.ndarray, parent: np.ndarray, levels) -> np.ndarray:
    """float64 [n]: each node's value plus its descendants' values."""
    out = np.asarray(values, dtype=np.float64).copy()
    n = len(out)
    for nodes in reversed(levels[1:]):
        out += np.bincount(parent[nodes], weights=out[nodes], minlength=n)
    return out


def inherit(flags: np.ndarray, parent: np.ndarray, levels) -> np.ndarray:
    """Ancestor-or-self OR of the boolean rows ``flags`` ([n] or [n, k])."""
    out = flags.copy()
    for nodes in levels[1:]:
        out[nodes] |= out[parent[nodes]]
    return out
