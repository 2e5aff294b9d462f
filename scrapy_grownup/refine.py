"""Hausner & Gertz's refinement without rendering: keep the largest contiguous content group.

Their version groups content elements by vertical distance on the rendered page. We have no
layout, so the distance between two consecutive content runs is the number of boilerplate words
between them in reading order; a group ends where that gap exceeds ``max_gap_words``. The group
with the most words is the article; comments and stray teasers far from it are dropped.
"""

from __future__ import annotations

import numpy as np

from .dom import PageStructure


def content_mask(page: PageStructure, probs: np.ndarray, threshold: float = 0.5,
                 refine: bool = False) -> np.ndarray:
    """Nodes whose content probability reaches ``threshold``, optionally refined."""
    keep = probs >= threshold
    return largest_content_group(page, keep) if refine else keep


def largest_content_group(page: PageStructure, keep: np.ndarray,
                          max_gap_words: int = 40) -> np.ndarray:
    """Return a copy of the node mask ``keep`` restricted to the largest content group."""
    keep = np.asarray(keep, dtype=bool)
    if not keep.any() or not len(page.seg_text):
        return keep.copy()
    words = np.fromiter((t.count(" ") + 1 for t in page.seg_text), dtype=np.int64,
                        count=len(page.seg_text))
    content = keep[page.seg_owner]
    if not content.any():  # the kept nodes own no text: nothing to group
        return keep.copy()
    group = np.full(len(words), -1)
    current, gap, started = 0, 0, False
    for i in range(len(words)):
        if content[i]:
            if started and gap > max_gap_words:
                current += 1
            group[i], gap, started = current, 0, True
        elif started:
            gap += words[i]
    sizes = np.bincount(group[group >= 0], weights=words[group >= 0])
    best = int(np.argmax(sizes))
    owners = np.unique(page.seg_owner[group == best])
    refined = np.zeros_like(keep)
    refined[owners] = True  # kept wrappers that own no text do not affect the text
    return refined
