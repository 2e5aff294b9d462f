"""Page type from the page's words, its URL, its signals and the backbone's pooled view: a
linear classifier, and boosted trees stacked on it, next to the page-type head.

The page-type head reads only the backbone's content-pooled features and the page signals; across
sites it confuses listings, collections and services, whose words and URLs tell them apart
("category", "/collections/", "pricing"). A linear model over TF-IDF word 1-2-grams of the
page's text, TF-IDF of its URL's path tokens and declared ``og:type``, the page signals and the
pooled features (``GrownUpModel.page_type_inputs``) does better on sites never seen (research
log, "Page type on unseen sites"). A linear model cannot say "a price on a page with forty
repeated cards is a collection, one price beside a long description is a product": boosted
trees (the stack) read
the linear model's margins with the page signals and make such calls. It is fitted by
``grownup lab fit-page-type`` (scikit-learn's linear SVM and gradient-boosted trees, ``eval``
extra; the trees learn from out-of-fold margins, so from how the linear model errs on sites it
has not seen) and evaluated here in numpy: the vectoriser is ours, the same at fit and at
serving.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cached_property
from itertools import chain, pairwise
from pathlib import Path
from typing import Sequence

import numpy as np

from scrapy_grownup.decisions.boosted_trees import BoostedTrees
from scrapy_grownup.graph.signals import SIGNAL_VERSION, url_tokens

__all__ = ["PAGE_TYPE_FILE", "RELIABLE_SCORE", "PageTypeClassifier", "TfidfVocabulary",
           "page_text", "page_unigrams", "page_words", "reliable_page_type", "url_words"]

PAGE_TYPE_FILE = "page_type.npz"
PAGE_TYPE_VERSION = "1"  # the vectoriser: PAGE_CHARS, terms, idf
# Words of two or more word characters: the matches of \b\w\w+\b (a match takes a whole run of
# word characters, and a scan only enters a run at its start), without the boundary tests.
_WORD = re.compile(r"\w\w+")
PAGE_CHARS = 6_000
# The score (the softmax of the classifier's margins) below which its page type is not reported:
# ``Article.page_type`` is None there, ``page_type_score`` kept. Chosen out of fold over sites on
# wcxb_dev: below it a page's type is about as often wrong as right (docs/research/
# page-type-classifier.md, "How far the score can be trusted";
# ``python benchmarks/page_type_reliability.py``).
RELIABLE_SCORE = 0.28


def reliable_page_type(name: str | None, score: float | None,
                       cut: float | None = RELIABLE_SCORE) -> str | None:
    """``name``, or None where its ``score`` is below ``cut`` (the classifier's reliable range,
    ``RELIABLE_SCORE``; None: every score is kept)."""
    if name is None or score is None or cut is None:
        return name
    return name if score >= cut else None


def page_text(page) -> str:
    """The text a page's type is read from: its segments' text, as the training corpus
    (``page_type_sites.site_corpus``) keeps it."""
    return " ".join(page.seg_text)


def page_words(text: str) -> list[str]:
    """Lower-cased word 1- and 2-grams of a page's text (words of two characters or more),
    its first ``PAGE_CHARS`` characters: what kind of page it is shows early, and the time
    stays bounded on long pages."""
    words = page_unigrams(text)
    return words + [f"{a} {b}" for a, b in zip(words, words[1:])]


def page_unigrams(text: str) -> list[str]:
    """The word 1-grams of ``page_words``, in order (its 2-grams are their adjacent pairs)."""
    return _WORD.findall(text[:PAGE_CHARS].lower())


def url_words(url: str, og_type: str | None = None) -> list[str]:
    """The URL's path tokens (``page_signals.url_tokens``), lower-cased, and the OpenGraph
    type the page declares, whole (``og:product.group``: a shop's category, where the page
    signals' prefix match reads ``product``)."""
    words = [token.lower() for token in url_tokens(url or "")]
    declared = (og_type or "").strip().lower()
    return words + [f"og:{declared}"] if declared else words


class TfidfVocabulary:
    """Terms, their inverse document frequencies and the vectors they give: sublinear term
    frequency (1 + log tf) times smoothed idf, L2-normalised."""

    def __init__(self, terms: Sequence[str], idf: np.ndarray):
        self.terms = list(terms)
        self.index = {term: k for k, term in enumerate(self.terms)}
        self.idf = np.asarray(idf, dtype=np.float64)

    @classmethod
    def fit(cls, documents: Sequence[list[str]], min_df: int = 2,
            max_terms: int | None = None) -> "TfidfVocabulary":
        """The terms in at least ``min_df`` documents (the ``max_terms`` most frequent by
        document count, ties by term)."""
        df = Counter(term for doc in documents for term in set(doc))
        kept = sorted((t for t, c in df.items() if c >= min_df), key=lambda t: (-df[t], t))
        if max_terms is not None:
            kept = kept[:max_terms]
        n = len(documents)
        idf = np.array([math.log((1 + n) / (1 + df[t])) + 1.0 for t in kept])
        return cls(kept, idf)

    def __len__(self) -> int:
        return len(self.terms)

    @cached_property
    def pairs(self) -> dict[tuple[str, str], int]:
        """The 2-gram terms (``"a b"``) by their word pair: ``("a", "b") -> column``."""
        return {tuple(term.split(" ")): k for k, term in enumerate(self.terms)
                if term.count(" ") == 1}

    def vector(self, document: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(columns, values)``: one document's non-zero entries."""
        return self._vector([k for k in map(self.index.get, document) if k is not None])

    def ngram_vector(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``vector`` of ``words`` and their adjacent pairs as 2-grams (``page_words`` of
        ``page_unigrams``), without building the pairs' strings: a pair is looked up as a
        tuple (most are no term)."""
        found = chain(map(self.index.get, words), map(self.pairs.get, pairwise(words)))
        return self._vector([k for k in found if k is not None])

    def _vector(self, found: list[int]) -> tuple[np.ndarray, np.ndarray]:
        if not found:
            return np.zeros(0, np.int64), np.zeros(0)
        cols, counts = np.unique(np.asarray(found, dtype=np.int64), return_counts=True)
        values = (1.0 + np.log(counts)) * self.idf[cols]
        return cols, values / np.linalg.norm(values)

    def transform(self, documents: Sequence[list[str]]) -> np.ndarray:
        """``float32 [len(documents), len(self)]``, dense (what the fit reads)."""
        out = np.zeros((len(documents), len(self.terms)), dtype=np.float32)
        for row, doc in enumerate(documents):
            cols, values = self.vector(doc)
            out[row, cols] = values
        return out


class PageTypeClassifier:
    """A linear page-type model over ``[text TF-IDF, URL TF-IDF, signals, pooled]``; the dense
    blocks are standardised and scaled by ``1/sqrt(width)`` so each weighs about as much as a
    unit-norm TF-IDF row. With a ``stack`` (multi-class ``BoostedTrees`` over ``[margins,
    signals]``, one output per type of ``stack_types``), the page type is the trees'.
    ``reliable_score``: the score under which the extractor reports no page type
    (``RELIABLE_SCORE``; set it to 0 to have every page's best type)."""

    def __init__(self, names: Sequence[str], text: TfidfVocabulary, url: TfidfVocabulary,
                 mean: np.ndarray, std: np.ndarray, signal_dim: int, weights: np.ndarray,
                 bias: np.ndarray, stack: BoostedTrees | None = None,
                 stack_types: Sequence[int] | None = None):
        self.names = tuple(names)
        self.text, self.url = text, url
        self.mean = np.asarray(mean, dtype=np.float64)
        self.std = np.asarray(std, dtype=np.float64)
        self.signal_dim = int(signal_dim)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.bias = np.asarray(bias, dtype=np.float64)
        self.stack = stack
        self.stack_types = (np.arange(len(self.names)) if stack_types is None
                            else np.asarray(stack_types, dtype=np.int64))
        if stack is not None and stack.num_outputs != len(self.stack_types):
            raise ValueError(f"the stacked trees have {stack.num_outputs} outputs for "
                             f"{len(self.stack_types)} page types")
        self.reliable_score = RELIABLE_SCORE

    @property
    def pooled_dim(self) -> int:
        return len(self.mean) - self.signal_dim

    @staticmethod
    def dense_scale(signal_dim: int, pooled_dim: int) -> np.ndarray:
        return np.r_[np.full(signal_dim, 1 / math.sqrt(max(signal_dim, 1))),
                     np.full(pooled_dim, 1 / math.sqrt(max(pooled_dim, 1)))]

    def _dense(self, signals: np.ndarray, pooled: np.ndarray, pages: int) -> np.ndarray:
        """The standardised, scaled ``[signals, pooled]`` block of ``pages`` rows."""
        dense = np.hstack([np.asarray(signals, np.float64).reshape(pages, -1),
                           np.asarray(pooled, np.float64).reshape(pages, -1)])
        return (dense - self.mean) / self.std * self.dense_scale(self.signal_dim,
                                                                 self.pooled_dim)

    def features(self, texts: Sequence[str], urls: Sequence[str], signals: np.ndarray,
                 pooled: np.ndarray, og_types: Sequence[str | None] | None = None
                 ) -> np.ndarray:
        """The model's input rows of pages (their text, URL and declared ``og:type``, page
        signals and pooled page-type inputs without the signals)."""
        return np.hstack([self.text.transform([page_words(t) for t in texts]),
                          self.url.transform(self.url_documents(urls, og_types)),
                          self._dense(signals, pooled, len(texts))])

    @staticmethod
    def url_documents(urls: Sequence[str], og_types: Sequence[str | None] | None = None
                      ) -> list[list[str]]:
        """The URL block's words of each page (``url_words``; no declared type where
        ``og_types`` is None)."""
        og_types = [None] * len(urls) if og_types is None else og_types
        return [url_words(u, o) for u, o in zip(urls, og_types)]

    def decision(self, texts, urls, signals, pooled, og_types=None) -> np.ndarray:
        """``[pages, types]`` linear scores (the SVM's margins), from the pages' non-zero
        terms only (what ``features`` @ weights gives, without its dense rows). A classifier
        fitted without ``og_types`` has no such words and reads none."""
        n_text, n_url = len(self.text), len(self.url)
        scores = (self._dense(signals, pooled, len(texts)) @ self.weights[:, n_text + n_url:].T
                  + self.bias)
        for row, (text, words) in enumerate(zip(texts, self.url_documents(urls, og_types))):
            cols, values = self.text.ngram_vector(page_unigrams(text))
            scores[row] += self.weights[:, cols] @ values
            cols, values = self.url.vector(words)
            scores[row] += self.weights[:, n_text + cols] @ values
        return scores

    @staticmethod
    def stack_inputs(margins: np.ndarray, signals: np.ndarray) -> np.ndarray:
        """The stacked trees' rows: the linear margins, then the raw page signals."""
        margins = np.asarray(margins, np.float64)
        return np.hstack([margins, np.asarray(signals, np.float64).reshape(len(margins), -1)])

    def scores(self, texts, urls, signals, pooled, og_types=None) -> np.ndarray:
        """``[pages, types]``: the stacked trees' logits (``-inf`` for a type they were not
        fitted on), or the linear margins without a stack."""
        margins = self.decision(texts, urls, signals, pooled, og_types)
        if self.stack is None:
            return margins
        out = np.full_like(margins, -np.inf)
        out[:, self.stack_types] = self.stack.raw(self.stack_inputs(margins, signals))
        return out

    def probabilities(self, texts, urls, signals, pooled, og_types=None) -> np.ndarray:
        """``[pages, types]`` softmax of ``scores``: the trees' class probabilities with a
        stack; without one a ranking score that sums to one, not a calibrated probability."""
        scores = self.scores(texts, urls, signals, pooled, og_types)
        scores = np.exp(scores - scores.max(1, keepdims=True))
        return scores / scores.sum(1, keepdims=True)

    def predict(self, texts, urls, signals, pooled, og_types=None) -> np.ndarray:
        """The index (in ``names``) of each page's type."""
        return self.scores(texts, urls, signals, pooled, og_types).argmax(1)

    def save(self, path: str | Path) -> None:
        stack = {} if self.stack is None else {**self.stack.arrays("stack_"),
                                               "stack_types": self.stack_types}
        np.savez_compressed(
            path, names=np.array(self.names), text_terms=np.array(self.text.terms),
            text_idf=self.text.idf, url_terms=np.array(self.url.terms, dtype=str),
            url_idf=self.url.idf, mean=self.mean, std=self.std,
            signal_dim=np.array(self.signal_dim), weights=self.weights.astype(np.float32),
            bias=self.bias, version=np.array(f"{PAGE_TYPE_VERSION}/{SIGNAL_VERSION}"), **stack)

    @classmethod
    def load(cls, path: str | Path) -> "PageTypeClassifier":
        with np.load(path, allow_pickle=False) as f:
            version = str(f["version"])
            if version != f"{PAGE_TYPE_VERSION}/{SIGNAL_VERSION}":
                raise ValueError(f"{path}: page-type features version {version!r}, this "
                                 f"release reads {PAGE_TYPE_VERSION}/{SIGNAL_VERSION}; refit "
                                 "it with grownup lab fit-page-type")
            stacked = "stack_roots" in f.files  # files without one: the linear model alone
            return cls([str(n) for n in f["names"]],
                       TfidfVocabulary([str(t) for t in f["text_terms"]], f["text_idf"]),
                       TfidfVocabulary([str(t) for t in f["url_terms"]], f["url_idf"]),
                       f["mean"], f["std"], int(f["signal_dim"]), f["weights"], f["bias"],
                       BoostedTrees.from_arrays(f, "stack_") if stacked else None,
                       f["stack_types"] if stacked else None)
