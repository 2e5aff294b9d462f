"""From node scores to the kept nodes: whole blocks, the main container, no repeated blocks,
and optionally the largest content group.

A reader sees blocks (paragraphs, list items, cells), not elements: ``whole_blocks`` decides each
block with its inline elements (``a``, ``span``, ``em``...) together, by their text-weighted mean
score, so a kept sentence never loses its link text and a dropped teaser never leaves a stray
link behind.

Two page-level decisions follow, each measured across sites (README, "Decisions"):

- ``main_container``: most of a page's content sits in one element (the article, the thread,
  the product). Kept blocks outside the deepest element that holds most of the kept text are
  dropped unless the model is sure of them: teaser rails, consent boxes and footers that scored
  just above the threshold.
- ``drop_repeated_blocks``: a block whose text repeats an earlier kept block (a consent
  placeholder for every embed, a "video needs JavaScript" notice, a headline shown twice) is
  kept once.

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
from .tree import depth_levels, subtree_sum

# Measured on the site-grouped cross-validation (README, "Decisions").
CONTAINER_SHARE = 0.7  # the main container holds at least this share of the kept text
CONTAINER_SURE = 0.9   # blocks outside it stay only with at least this score
REPEAT_MIN_WORDS = 3   # shorter repeated blocks ("Share", "Photo") are left alone


def content_mask(page: PageStructure, probs: np.ndarray, threshold: float = 0.5,
                 refine: bool = False, blocks: bool = True, container: bool = True,
                 repeats: bool = True) -> np.ndarray:
    """Nodes whose content probability reaches ``threshold`` (judged per block when
    ``blocks``), restricted to the main container (``container``), each repeated block kept once
    (``repeats``), and optionally refined to the largest content group (``refine``)."""
    probs = np.asarray(probs, dtype=np.float64)
    scores = block_scores(page, probs) if blocks else probs
    keep = scores >= threshold
    if container:
        keep = main_container(page, keep, scores)
    if repeats:
        keep = drop_repeated_blocks(page, keep)
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


def block_scores(page: PageStructure, probs: np.ndarray) -> np.ndarray:
    """Each text-owning node's score replaced by its block's text-length-weighted mean score;
    nodes that own no text keep their own."""
    scores = np.asarray(probs, dtype=np.float64).copy()
    lengths = page.text_lengths().astype(np.float64)
    owners = lengths > 0
    if not owners.any():
        return scores
    block = block_of(page)
    n = page.num_nodes
    weight = np.bincount(block[owners], weights=lengths[owners], minlength=n)
    mass = np.bincount(block[owners], weights=(lengths * scores)[owners], minlength=n)
    mean = np.divide(mass, weight, out=np.zeros(n), where=weight > 0)
    scores[owners] = mean[block[owners]]
    return scores


def whole_blocks(page: PageStructure, probs: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """The node mask with every block's text-owning nodes kept or dropped together, by the
    text-length-weighted mean probability of those nodes. Nodes that own no text keep their own
    decision."""
    return block_scores(page, probs) >= threshold


def main_container(page: PageStructure, keep: np.ndarray, scores: np.ndarray,
                   share: float = CONTAINER_SHARE, sure: float = CONTAINER_SURE) -> np.ndarray:
    """``keep`` without the text-owning nodes outside the deepest element whose subtree holds
    at least ``share`` of the kept text, unless their score reaches ``sure``."""
    keep = np.asarray(keep, dtype=bool)
    lengths = page.text_lengths().astype(np.float64)
    kept_text = np.where(keep, lengths, 0.0)
    total = kept_text.sum()
    if total <= 0:
        return keep.copy()
    parent = page.parent.astype(np.int64)
    levels = depth_levels(page.depth)
    held = subtree_sum(kept_text, parent, levels)
    candidates = np.flatnonzero(held >= share * total - 1e-9)
    top = int(candidates[np.argmax(page.depth[candidates])])
    # Pre-order: a subtree is a contiguous run of node ids starting at its root.
    size = int(subtree_sum(np.ones(page.num_nodes), parent, levels)[top])
    inside = np.zeros(page.num_nodes, dtype=bool)
    inside[top:top + size] = True
    outside_text = (lengths > 0) & ~inside & (np.asarray(scores) < sure)
    return keep & ~outside_text


def drop_repeated_blocks(page: PageStructure, keep: np.ndarray,
                         min_words: int = REPEAT_MIN_WORDS) -> np.ndarray:
    """``keep`` with every kept block whose text (``min_words`` words or more) repeats an
    earlier kept block's dropped; the first one stays."""
    keep = np.asarray(keep, dtype=bool).copy()
    if not len(page.seg_text):
        return keep
    block = block_of(page)
    owners = page.seg_owner
    texts: dict[int, list[str]] = {}
    for owner, text in zip(owners.tolist(), page.seg_text):
        if keep[owner]:
            texts.setdefault(int(block[owner]), []).append(text)
    seen: set[str] = set()
    repeated: list[int] = []
    for b in sorted(texts):  # block roots in reading order
        text = " ".join(" ".join(texts[b]).split()).casefold()
        if text.count(" ") + 1 < min_words:
            continue
        if text in seen:
            repeated.append(b)
        else:
            seen.add(text)
    if repeated:
        keep[np.isin(block, repeated) & (page.text_lengths() > 0)] = False
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
