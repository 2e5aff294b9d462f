"""Gold text to per-node labels (GROWN+UP label alignment): the training side of a page.

Alignment follows the reference implementation (``ktf/datasets/web/cleaneval/parser.py``):

1. Page tokens: the page's text runs in reading order, split on whitespace. A run glued to the
   previous one (``SEP_NONE``: no whitespace and no block boundary between them, as in
   ``wor<b>ld</b>``) continues the previous token, which then belongs to both owner nodes.
2. Gold tokens: ``gold_text.split()`` (gold cleaned beforehand, see ``clean_cleaneval_gold`` and
   ``split_dragnet_gold``).
3. ``difflib.SequenceMatcher(None, page, gold, autojunk=False).get_matching_blocks()``.
4. Nodes that own at least one token are classified: 1 (content) if any of their tokens is
   matched, else 0 (boilerplate). Nodes without their own text get -1 (never classified).

``coverage`` (matched gold tokens / gold tokens) measures how well the gold fits the page; the
reference drops pages with coverage <= 0.75 (``MIN_COVERAGE``); here that choice is the caller's.

difflib is roughly quadratic on long pages (a 47k-token Dragnet page against its 46k-token gold
takes ~7 s), so above ``max_cells`` (|page| x |gold|) the alignment first anchors on tokens that
occur exactly once in both sequences (patience diff: longest increasing chain of such anchors)
and runs difflib only between consecutive anchors. Below the threshold -- nearly every page --
the result is exactly the reference's.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np

from scrapy_grownup.output.assembly import assemble_text
from scrapy_grownup.page.dom import SEP_NONE, PageStructure

__all__ = [
    "MIN_COVERAGE",
    "AlignmentResult",
    "align_labels",
    "page_tokens",
    "match_blocks",
    "perfect_filter_text",
    "clean_cleaneval_gold",
    "split_dragnet_gold",
    "DRAGNET_COMMENTS_RE",
]

MIN_COVERAGE = 0.75  # the reference keeps a page only when coverage > 0.75
DEFAULT_MAX_CELLS = 50_000_000  # |page tokens| x |gold tokens| above which anchoring is used

LABEL_NONE, LABEL_BOILERPLATE, LABEL_CONTENT = -1, 0, 1


@dataclass
class AlignmentResult:
    """Per-node labels of one page and how well the gold text matched it."""

    labels: np.ndarray  # int8 [num_nodes]: 1 content, 0 boilerplate, -1 owns no text
    coverage: float  # matched gold tokens / gold tokens (0.0 for an empty gold)
    page_tokens: int
    gold_tokens: int
    matched: int  # tokens in the matching blocks (same count on both sides)
    token_matched: np.ndarray  # bool [page_tokens]
    anchored: bool = False  # True when the long-page anchoring path was used

    @property
    def ok(self) -> bool:
        """Whether the reference implementation would keep this page for training."""
        return self.coverage > MIN_COVERAGE

    @property
    def num_content(self) -> int:
        return int((self.labels == LABEL_CONTENT).sum())

    @property
    def num_boilerplate(self) -> int:
        return int((self.labels == LABEL_BOILERPLATE).sum())


def page_tokens(page: PageStructure) -> tuple[list[str], list[tuple[int, ...]]]:
    """Whitespace tokens of the page and, per token, the node(s) owning it.

    A ``SEP_NONE`` run is glued onto the previous token, which then has several owners.
    """
    toks: list[str] = []
    owners: list[tuple[int, ...]] = []
    for owner, sep, text in zip(page.seg_owner.tolist(), page.seg_sep.tolist(), page.seg_text):
        words = text.split(" ")
        if sep == SEP_NONE and toks:
            toks[-1] += words[0]
            if owner not in owners[-1]:
                owners[-1] = owners[-1] + (owner,)
            words = words[1:]
        for w in words:
            if w:
                toks.append(w)
                owners.append((owner,))
    return toks, owners


def align_labels(
    page: PageStructure, gold_text: str, max_cells: int = DEFAULT_MAX_CELLS
) -> AlignmentResult:
    """Label each node of ``page`` against the (already cleaned) gold text."""
    toks, owners = page_tokens(page)
    gold = gold_text.split() if gold_text else []
    blocks, anchored = match_blocks(toks, gold, max_cells)
    token_matched = np.zeros(len(toks), dtype=bool)
    matched = 0
    for i, _j, size in blocks:
        token_matched[i: i + size] = True
        matched += size
    labels = np.full(page.num_nodes, LABEL_NONE, dtype=np.int8)
    for node_set, hit in zip(owners, token_matched.tolist()):
        for node in node_set:
            if hit:
                labels[node] = LABEL_CONTENT
            elif labels[node] == LABEL_NONE:
                labels[node] = LABEL_BOILERPLATE
    coverage = matched / len(gold) if gold else 0.0
    return AlignmentResult(
        labels=labels,
        coverage=coverage,
        page_tokens=len(toks),
        gold_tokens=len(gold),
        matched=matched,
        token_matched=token_matched,
        anchored=anchored,
    )


# ----------------------------------------------------------------------------------------------
# Matching


def match_blocks(
    a: Sequence[str], b: Sequence[str], max_cells: int = DEFAULT_MAX_CELLS
) -> tuple[list[tuple[int, int, int]], bool]:
    """Matching blocks ``(i, j, size)`` between ``a`` and ``b`` (no zero-size sentinel).

    Exactly difflib's (autojunk off) when ``len(a) * len(b) <= max_cells``; otherwise difflib
    between unique-token anchors. The second value says whether anchoring was used.
    """
    if not a or not b:
        return [], False
    if len(a) * len(b) <= max_cells:
        return _difflib_blocks(a, b, 0, len(a), 0, len(b)), False
    out: list[tuple[int, int, int]] = []
    _anchored_blocks(a, b, 0, len(a), 0, len(b), max_cells, out, depth=0)
    return _merge_adjacent(out), True


def _difflib_blocks(a, b, alo, ahi, blo, bhi) -> list[tuple[int, int, int]]:
    if alo >= ahi or blo >= bhi:
        return []
    sm = SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
    return [(alo + i, blo + j, n) for i, j, n in sm.get_matching_blocks() if n]


def _anchors(a, b, alo, ahi, blo, bhi) -> list[tuple[int, int]]:
    """Longest increasing chain of (i, j) pairs of tokens unique in both ranges."""
    ca = Counter(a[alo:ahi])
    cb = Counter(b[blo:bhi])
    pos_b = {b[j]: j for j in range(blo, bhi) if cb[b[j]] == 1}
    pairs = [(i, pos_b[a[i]]) for i in range(alo, ahi) if ca[a[i]] == 1 and a[i] in pos_b]
    if not pairs:
        return []
    # Longest increasing subsequence on j (pairs are sorted by i), O(k log k).
    tails: list[int] = []  # smallest j ending a chain of each length
    tails_idx: list[int] = []
    prev = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        pos = bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            tails_idx.append(k)
        else:
            tails[pos] = j
            tails_idx[pos] = k
        prev[k] = tails_idx[pos - 1] if pos > 0 else -1
    chain = []
    k = tails_idx[-1]
    while k >= 0:
        chain.append(pairs[k])
        k = prev[k]
    chain.reverse()
    return chain


def _anchored_blocks(a, b, alo, ahi, blo, bhi, max_cells, out, depth) -> None:
    if alo >= ahi or blo >= bhi:
        return
    if (ahi - alo) * (bhi - blo) <= max_cells or depth >= 4:
        out.extend(_difflib_blocks(a, b, alo, ahi, blo, bhi))
        return
    chain = _anchors(a, b, alo, ahi, blo, bhi)
    if not chain:
        out.extend(_difflib_blocks(a, b, alo, ahi, blo, bhi))
        return
    i0, j0 = alo, blo
    for i, j in chain:
        _anchored_blocks(a, b, i0, i, j0, j, max_cells, out, depth + 1)
        out.append((i, j, 1))
        i0, j0 = i + 1, j + 1
    _anchored_blocks(a, b, i0, ahi, j0, bhi, max_cells, out, depth + 1)


def _merge_adjacent(blocks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    merged: list[tuple[int, int, int]] = []
    for i, j, n in blocks:
        if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
            pi, pj, pn = merged[-1]
            merged[-1] = (pi, pj, pn + n)
        else:
            merged.append((i, j, n))
    return merged


def perfect_filter_text(page: PageStructure, labels) -> str:
    """The text kept by a classifier that predicts the aligned labels exactly (the ceiling)."""
    return assemble_text(page, np.asarray(labels) == LABEL_CONTENT)


# ----------------------------------------------------------------------------------------------
# Gold text cleaning

_URL_LINE_RE = re.compile(r"(^|\n)(URL:[^\n]*)")
_LINE_TAG_RE = re.compile(r"(^|\n)[ \t]*(<[^\n]*?>)")

DRAGNET_COMMENTS_RE = re.compile(
    r"^[ \t]*[!@#$%^&*()][!@#$%^&*() \t]{3,}COMMENTS[ \t]*$", re.MULTILINE
)


def clean_cleaneval_gold(text: str) -> str:
    """CleanEval gold text without the ``URL:`` line and the line-initial markers.

    As the reference: the ``URL: ...`` line is removed and a tag at the start of a line
    (``<p>``, ``<h>``, ``<l>``, possibly indented) becomes a line break.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _URL_LINE_RE.sub(r"\1", text, count=1)
    return _LINE_TAG_RE.sub("\n", text)


def split_dragnet_gold(text: str) -> tuple[str, str]:
    """``(article, comments)`` of a Dragnet gold file.

    The comments follow a marker line, normally ``!@#$%^&*()  COMMENTS``; about 5% of the files
    have a mistyped marker (``!@ $%^&*()``, ``!@#$%^&**()``, one space, a tab...), which the
    pattern tolerates. Without a marker the whole text is the article.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    match = DRAGNET_COMMENTS_RE.search(text)
    if not match:
        return text, ""
    return text[: match.start()], text[match.end():].lstrip("\n")
