"""Whole-subtree arithmetic over a page's ``parent`` array, one depth level at a time.

Pages hold tens of thousands of nodes; a Python walk per node is the slow part of every
per-page rule. Grouping nodes by depth turns "sum over my subtree" and "does any ancestor have
this flag" into one ``numpy`` call per level.

A page's nodes are in document (pre-)order, so a subtree is also a range of nodes,
``range(i, end[i])`` (``subtree_ends``): for counts, a subtree's total is a difference of prefix
sums and a flag covers its node's range, a few ``numpy`` calls whatever the depth.
"""

from __future__ import annotations

import numpy as np

__all__ = ["depth_levels", "inherit", "range_inherit", "range_sum", "subtree_ends", "subtree_sum"]


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
    """Ancestor-or-self OR of the rows ``flags`` ([n] or [n, k]; bool, or integer bit masks)."""
    out = flags.copy()
    for nodes in levels[1:]:
        out[nodes] |= out[parent[nodes]]
    return out


def subtree_ends(parent) -> np.ndarray:
    """int64 [n]: one past each node's last descendant, for nodes in pre-order (``parent[i] <
    i``): node ``i``'s subtree is ``range(i, end[i])``. Its last descendant is its last
    child's last descendant: last-child pointers followed by pointer doubling, a few whole-array
    steps (as many as the depth has bits)."""
    parent = np.asarray(parent, dtype=np.int64)
    last = np.arange(len(parent), dtype=np.int64)
    if len(parent) > 1:
        np.maximum.at(last, parent[1:], last[1:])
        while True:
            further = last[last]
            if np.array_equal(further, last):
                break
            last = further
    return last + 1


def range_sum(counts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``subtree_sum`` for whole-number values (lengths, counts) of a pre-order tree with
    ``end = subtree_ends(parent)``: prefix sums, exact for such values, so equal."""
    prefix = np.zeros(len(end) + 1)
    np.cumsum(counts, dtype=np.float64, out=prefix[1:])
    return prefix[end] - prefix[:-1]


def range_inherit(flags: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``inherit`` for a pre-order tree with ``end = subtree_ends(parent)``: a node's flag
    covers its range, counted up at its start and down at its end."""
    n = len(end)
    flat = flags.reshape(n, -1)
    k = flat.shape[1]
    rows, columns = np.nonzero(flat)
    delta = np.bincount(rows * k + columns, minlength=(n + 1) * k) - \
        np.bincount(end[rows] * k + columns, minlength=(n + 1) * k)
    covered = np.cumsum(delta.reshape(n + 1, k), axis=0)[:n] > 0
    return covered.reshape(flags.shape)
