"""Text-extraction metrics: the GROWN+UP paper's LCS F1 and the article-extraction-benchmark's
word-shingle F1.

LCS (``boilerplate-removal/eval_lcs.py`` of the reference implementation):
    tokens are ``text.split()``; the number of matched tokens ``m`` is the sum of the block sizes
    of ``difflib.SequenceMatcher(None, pred, gold, autojunk=False).get_matching_blocks()`` (an
    approximate longest common subsequence); per page ``P = m / |pred|`` (1.0 for an empty
    prediction) and ``R = m / |gold|`` (1.0 for an empty gold); P and R are averaged over pages and
    F1 is the harmonic mean of the two averages -- not the mean of per-page F1.

Shingles (``evaluate.py`` of scrapinghub/article-extraction-benchmark):
    tokens are ``re.findall(r"\\w+", text)`` -- case kept, punctuation dropped (the upstream
    regex carries ``re.IGNORECASE`` but that does not change what ``\\w+`` matches); shingles are
    the word n-grams (n = 4), and a text with fewer than n tokens (but at least one) is a single
    shorter shingle. Both texts are bags (multisets) of shingles: ``tp = sum(min(c_gold, c_pred))``,
    ``fp = sum(max(0, c_pred - c_gold))``, ``fn = sum(max(0, c_gold - c_pred))``, normalised by
    ``tp + fp + fn`` so long pages weigh no more than short ones. Per page, precision is 1 when
    ``fp == fn == 0``, 0 when ``tp == fp == 0``, else ``tp / (tp + fp)``; recall likewise. The
    aggregate precision is the mean over pages with ``tp + fp > 0`` (a page with no predicted
    shingle does not count towards precision), recall the mean over pages with ``tp + fn > 0``,
    and F1 the harmonic mean of those two means -- the same aggregation as the LCS metric.
    ``shingle_f1`` also reports ``mean_page_f1`` (mean of per-page F1) for reference.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from difflib import SequenceMatcher

__all__ = [
    "tokens",
    "word_tokens",
    "matched_tokens",
    "lcs_scores",
    "lcs_f1",
    "shingles",
    "shingle_counts",
    "shingle_scores",
    "shingle_f1",
    "harmonic_mean",
    "bag_of_words_scores",
    "bag_of_words_f1",
]

_WORD_RE = re.compile(r"\w+", re.UNICODE)


def tokens(text: str | None) -> list[str]:
    """Whitespace tokens, as ``str.split()`` (the LCS metric and label alignment)."""
    return text.split() if text else []


def word_tokens(text: str | None, lowercase: bool = False) -> list[str]:
    """``\\w+`` tokens (the shingle metric); ``lowercase`` is an opt-in deviation from upstream."""
    if not text:
        return []
    found = _WORD_RE.findall(text)
    return [t.lower() for t in found] if lowercase else found


def harmonic_mean(p: float, r: float) -> float:
    return 2.0 * p * r / (p + r) if p + r > 0 else 0.0


def matched_tokens(a: Sequence, b: Sequence) -> int:
    """Sum of difflib's matching-block sizes between two token sequences (autojunk off).

    Exact difflib semantics, so figures match the paper's. difflib is roughly quadratic on long,
    repetitive sequences: a 20k-token page against a 5k-token gold takes about a second.
    """
    if not a or not b:
        return 0
    sm = SequenceMatcher(None, a, b, autojunk=False)
    return sum(block.size for block in sm.get_matching_blocks())


def lcs_scores(pred: str, gold: str) -> tuple[float, float]:
    """Per-page ``(precision, recall)`` of the LCS metric on whitespace tokens."""
    p_toks, g_toks = tokens(pred), tokens(gold)
    m = matched_tokens(p_toks, g_toks)
    precision = m / len(p_toks) if p_toks else 1.0
    recall = m / len(g_toks) if g_toks else 1.0
    return precision, recall


def lcs_f1(pairs: Iterable[tuple[str, str]]) -> dict:
    """Aggregate LCS metric over ``(pred, gold)`` pairs.

    Returns ``{"precision", "recall", "f1", "pages"}``: P and R averaged over pages, F1 their
    harmonic mean (the paper's definition). With no pages everything is 0.
    """
    ps: list[float] = []
    rs: list[float] = []
    for pred, gold in pairs:
        p, r = lcs_scores(pred, gold)
        ps.append(p)
        rs.append(r)
    return aggregate_pr(ps, rs)


def aggregate_pr(precisions: Sequence[float], recalls: Sequence[float]) -> dict:
    """Macro-average per-page P and R, F1 = harmonic mean of the averages."""
    n = len(precisions)
    if n == 0:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0, "pages": 0}
    p = sum(precisions) / n
    r = sum(recalls) / len(recalls)
    return {"precision": p, "recall": r, "f1": harmonic_mean(p, r), "pages": n}


def shingles(text: str | None, n: int = 4, lowercase: bool = False) -> Counter:
    """Bag of word n-gram shingles (tuples); fewer than ``n`` tokens give one short shingle."""
    toks = word_tokens(text, lowercase)
    if not toks:
        return Counter()
    if len(toks) < n:
        return Counter([tuple(toks)])
    return Counter(tuple(toks[i: i + n]) for i in range(len(toks) - n + 1))


def shingle_counts(
    pred: str | None, gold: str | None, n: int = 4, lowercase: bool = False
) -> tuple[float, float, float]:
    """Normalised ``(tp, fp, fn)`` over shingle multisets (summing to 1 unless all are 0)."""
    p_sh, g_sh = shingles(pred, n, lowercase), shingles(gold, n, lowercase)
    tp = float(sum((p_sh & g_sh).values()))
    fp = float(sum((p_sh - g_sh).values()))
    fn = float(sum((g_sh - p_sh).values()))
    s = tp + fp + fn
    if s > 0:
        tp, fp, fn = tp / s, fp / s, fn / s
    return tp, fp, fn


def _precision(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    if tp == fp == 0:
        return 0.0
    return tp / (tp + fp)


def _recall(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    if tp == fn == 0:
        return 0.0
    return tp / (tp + fn)


def shingle_scores(
    pred: str | None, gold: str | None, n: int = 4, lowercase: bool = False
) -> tuple[float, float, float]:
    """Per-page ``(precision, recall, f1)`` of the shingle metric (upstream edge cases)."""
    tp, fp, fn = shingle_counts(pred, gold, n, lowercase)
    p, r = _precision(tp, fp, fn), _recall(tp, fp, fn)
    return p, r, harmonic_mean(p, r)


def shingle_f1(
    pairs: Iterable[tuple[str | None, str | None]], n: int = 4, lowercase: bool = False
) -> dict:
    """Aggregate shingle metric over ``(pred, gold)`` pairs, as the article-extraction-benchmark.

    Returns ``{"precision", "recall", "f1", "mean_page_f1", "pages"}``; see the module docstring
    for which pages count towards precision and recall.
    """
    ps: list[float] = []
    rs: list[float] = []
    f1s: list[float] = []
    for pred, gold in pairs:
        tp, fp, fn = shingle_counts(pred, gold, n, lowercase)
        p, r = _precision(tp, fp, fn), _recall(tp, fp, fn)
        if tp + fp > 0:
            ps.append(p)
        if tp + fn > 0:
            rs.append(r)
        f1s.append(harmonic_mean(p, r))
    p = sum(ps) / len(ps) if ps else 0.0
    r = sum(rs) / len(rs) if rs else 0.0
    return {
        "precision": p,
        "recall": r,
        "f1": harmonic_mean(p, r),
        "mean_page_f1": sum(f1s) / len(f1s) if f1s else 0.0,
        "pages": len(f1s),
    }


def bag_of_words_scores(pred: str | None, gold: str | None) -> tuple[float, float, float]:
    """Per-page ``(precision, recall, f1)`` of the WCXB benchmark's metric: bags of lower-cased
    ``\\w+`` tokens, overlap counted with multiplicity. Both empty is a perfect 1; one empty
    scores 0."""
    p_bag = Counter(word_tokens(pred, lowercase=True))
    g_bag = Counter(word_tokens(gold, lowercase=True))
    if not p_bag and not g_bag:
        return 1.0, 1.0, 1.0
    if not p_bag or not g_bag:
        return 0.0, 0.0, 0.0
    common = float(sum((p_bag & g_bag).values()))
    p = common / sum(p_bag.values())
    r = common / sum(g_bag.values())
    return p, r, harmonic_mean(p, r)


def bag_of_words_f1(pairs: Iterable[tuple[str | None, str | None]]) -> dict:
    """The WCXB aggregate: per-page bag-of-words P, R and F1 each averaged over pages (F1 is
    the mean of per-page F1, unlike the LCS and shingle aggregates)."""
    scores = [bag_of_words_scores(pred, gold) for pred, gold in pairs]
    n = len(scores)
    if not n:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0, "pages": 0}
    return {"precision": sum(s[0] for s in scores) / n, "recall": sum(s[1] for s in scores) / n,
            "f1": sum(s[2] for s in scores) / n, "pages": n}
