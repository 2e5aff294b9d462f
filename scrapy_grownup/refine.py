"""From node scores to the kept nodes: whole blocks, and optionally the largest content group.

A reader sees blocks (paragraphs, list items, cells), not elements: ``whole_blocks`` decides each
block with its inline elements (``a``, ``span``, ``em``...) together, by their text-weighted mean
score, so a kept sentence never loses its link text and a dropped teaser never leaves a stray
link behind.

Hausner & Gertz's refinement without rendering: keep the largest contiguous content group.

Their version groups content elements by vertical distance on the rendered page. We have no
layout, so the distance between two consecutive content runs is the number of boilerplate words
between them in reading order; a group ends where that gap exceeds ``max_gap_words``. The group
with the most words is the article; comments and stray teasers far from it are dropped.
"""

from __future__ import annotations

import numpy as np

from .dom import PageStructure
from .tags import BLOCK_TAGS


def content_mask(page: PageStructure, probs: np.ndarray, threshold: float = 0.5,
                 refine: bool = False, blocks: bool = True) -> np.ndarray:
    """Nodes whose content probability reaches ``threshold`` (judged per block when
    ``blocks``), optionally refined to the largest content group."""
    keep = whole_blocks(page, probs, threshold) if blocks else probs >= threshold
    return largest_content_group(page, keep) if refine else keep


def block_of(page: PageStructure) -> np.ndarray:
    """Each node's block: itself when its tag is a block element, else its parent's block
    (the root is a block). Parents precede children, so one pass in node order suffices."""
    parent = page.parent.tolist()
    out = list(range(page.num_nodes))
    for i, tag in enumerate(page.tags):
        if tag not in BLOCK_TAGS and parent[i] >= 0:
            out[i] = out[parent[i]]
    return np.asarray(out, dtype=np.int64)


def whole_blocks(page: PageStructure, probs: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """The node mask with every block's text-owning nodes kept or dropped together, by the
    text-length-weighted mean probability of those nodes. Nodes that own no text keep their own
    decision."""
    probs = np.asarray(probs, dtype=np.float64)
    keep = probs >= threshold
    lengths = page.text_lengths().astype(np.float64)
    owners = lengths > 0
    if not owners.any():
        return keep
    block = block_of(page)
    n = page.num_nodes
    weight = np.bincount(block[owners], weights=lengths[owners], minlength=n)
    mass = np.bincount(block[owners], weights=(lengths * probs)[owners], minlength=n)
    score = np.divide(mass, weight, out=np.zeros(n), where=weight > 0)
    keep[owners] = score[block[owners]] >= threshold
    return keep


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
