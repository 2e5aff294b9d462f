"""Repeated sibling structures: the cards of a listing, the posts of a forum, the rows of a
table, the items of a related-stories box.

Which of them is the page's content depends on the page (a listing's cards are, an article's
"more stories" cards are not), but that a node is one of many alike is the same on every site,
and a node's own text, class and tag do not say it. Siblings are alike when they share their
tag and class words and each holds some text below it (``MIN_GROUP_TEXT`` characters); the
page signals count such groups for the page type, these features tell each node about its own.
"""

from __future__ import annotations

import numpy as np

from scrapy_grownup.page.tree import depth_levels, range_sum

__all__ = ["MIN_GROUP_TEXT", "REPETITION_BLOCKS", "REPETITION_DIM", "own_text",
           "repetition_features", "sibling_groups"]

MIN_GROUP_TEXT = 20  # characters below a node for it to count as a card of a group
_SATURATE = np.log(64.0)  # a group of 64 alike siblings reads 1.0
REPETITION_BLOCKS: tuple[tuple[str, int], ...] = (
    ("group_size", 1), ("largest_child_group", 1), ("inside_group", 1), ("group_text_share", 1),
)
REPETITION_DIM = sum(size for _, size in REPETITION_BLOCKS)


def own_text(page) -> np.ndarray:
    """float64 [n]: the characters of text each node owns (its text segments)."""
    if not len(page.seg_text):
        return np.zeros(page.num_nodes, dtype=np.float64)
    lengths = np.fromiter(map(len, page.seg_text), dtype=np.float64, count=len(page.seg_text))
    return np.bincount(np.asarray(page.seg_owner, dtype=np.int64), weights=lengths,
                       minlength=page.num_nodes)


def sibling_groups(page, parent: np.ndarray, subtree_text: np.ndarray,
                   min_text: int = MIN_GROUP_TEXT) -> tuple[np.ndarray, np.ndarray]:
    """``(group, size)``: each node's group of alike siblings (int64 [n], -1 for a node with
    less than ``min_text`` characters below it, and for the root) and each group's number of
    nodes (int64 [groups])."""
    n = page.num_nodes
    group = np.full(n, -1, dtype=np.int64)
    chosen = np.flatnonzero(subtree_text[1:] >= min_text) + 1
    if not len(chosen):
        return group, np.zeros(0, dtype=np.int64)
    words = list(map(page.class_words.__getitem__, chosen.tolist()))
    interned = {value: k for k, value in enumerate(dict.fromkeys(words))}  # first seen first
    klass = np.fromiter(map(interned.__getitem__, words), dtype=np.int64, count=len(chosen))
    tag_ids = np.asarray(page.tag_ids, dtype=np.int64)[chosen]
    keys = (parent[chosen] << 40) | (tag_ids << 24) | klass
    _, inverse, sizes = np.unique(keys, return_inverse=True, return_counts=True)
    group[chosen] = inverse.reshape(-1)
    return group, sizes


def repetition_features(page) -> np.ndarray:
    """float32 [n, REPETITION_DIM] for a ``PageStructure``, all in [0, 1]:

    - ``group_size``: how many alike siblings the node has (log, 0 for none);
    - ``largest_child_group``: the same for the largest group among its children (a list's
      container);
    - ``inside_group``: the largest ``group_size`` of its strict ancestors (inside a card);
    - ``group_text_share``: the share of the page's text its group holds, or its nearest
      ancestor's group's (a listing's cards hold most of a page, a teaser box little)."""
    n = page.num_nodes
    out = np.zeros((n, REPETITION_DIM), dtype=np.float32)
    if n == 0:
        return out
    parent = np.asarray(page.parent, dtype=np.int64)
    levels = depth_levels(np.asarray(page.depth, dtype=np.int64))
    subtree_text = range_sum(own_text(page), page.subtree_end_array)
    group, sizes = sibling_groups(page, parent, subtree_text)
    member = group >= 0
    alike = np.zeros(n)
    share = np.zeros(n)
    if member.any():
        alike[member] = np.minimum(np.log(sizes[group[member]]) / _SATURATE, 1.0)
        total = float(subtree_text[0]) or 1.0
        group_text = np.bincount(group[member], weights=subtree_text[member],
                                 minlength=len(sizes))
        repeated = member & (alike > 0)
        share[repeated] = group_text[group[repeated]] / total
    children = np.zeros(n)
    has_parent = parent >= 0
    np.maximum.at(children, parent[has_parent], alike[has_parent])
    inside = np.zeros(n)
    inherited_share = share.copy()
    for nodes in levels[1:]:
        up = parent[nodes]
        inside[nodes] = np.maximum(inside[up], alike[up])
        inherited_share[nodes] = np.where(share[nodes] > 0, share[nodes], inherited_share[up])
    out[:, 0] = alike
    out[:, 1] = children
    out[:, 2] = inside
    out[:, 3] = np.minimum(inherited_share, 1.0)
    return out
