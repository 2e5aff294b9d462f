"""``Article.confidence``: the extractor's estimate that a page's text is its main content.

Per page, a handful of numbers the extractor has in hand when it builds the article
(``confidence_features``): how much text it kept and what share of the page that is, how many
text-owning elements and runs of them, how sure the scores the text was cut from are (the mean
and spread of the kept and the dropped text's scores, how much text sits near the cut-off, how
far the kept and dropped text lie from it), whether the content model's own scores agree with
the rescorer's, and which path chose the text (``text_source``). A logistic model maps them to
a score, and a monotone map (knots, interpolated) turns the score into the expected bag-of-words
F1 of the page's text against human gold (``evaluation.metrics.bag_of_words_scores``): a page of
confidence 0.6 is, on average, a page whose text scores 0.6.

It is fitted by ``grownup lab fit-confidence`` (``training.confidence_fit``) on pages of sites
that neither the content model nor the rescorer nor the confidence model saw (site-grouped
folds, nested), and stored as plain arrays in ``confidence.npz`` beside the model: serving is
numpy only, a few dozen array operations a page (well under a millisecond).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scrapy_grownup.page.dom import PageStructure

__all__ = [
    "CONFIDENCE_FEATURE_NAMES",
    "CONFIDENCE_FILE",
    "CONFIDENCE_VERSION",
    "TEXT_SOURCE_NAMES",
    "ConfidenceModel",
    "confidence_features",
    "load_confidence",
]

CONFIDENCE_FILE = "confidence.npz"
CONFIDENCE_VERSION = "1"
# ``assembly.TEXT_SOURCES``, in that order (kept here: the features are fixed by the file)
TEXT_SOURCE_NAMES = ("rescorer", "content_model", "prose", "none")
NEAR_CUT = 0.15  # text scored within this of the cut-off is "near" it
CONFIDENCE_FEATURE_NAMES: tuple[str, ...] = (
    "log_kept_chars", "log_page_chars", "kept_share", "log_kept_nodes", "log_kept_runs",
    "kept_mean", "kept_min", "dropped_mean", "dropped_max", "kept_margin", "dropped_margin",
    "near_cut_share", "uncertainty", "kept_uncertainty", "model_kept_mean",
    "model_dropped_mean", "model_above_share", "model_agreement", "log_nodes", "truncated",
    *(f"source_{name}" for name in TEXT_SOURCE_NAMES),
)

_KEPT_CHARS = CONFIDENCE_FEATURE_NAMES.index("log_kept_chars")


def _mean(values: np.ndarray, weights: np.ndarray, empty: float = 0.0) -> float:
    total = float(weights.sum())
    return float(values @ weights) / total if total > 0 else empty


def confidence_features(page: PageStructure, keep: np.ndarray, scores: np.ndarray,
                        probs: np.ndarray, threshold: float, source: str) -> np.ndarray:
    """float64 ``[len(CONFIDENCE_FEATURE_NAMES)]`` of one page's article: ``keep`` the kept
    nodes, ``scores`` the probabilities they were cut from at ``threshold`` (the rescorer's,
    or the content model's: ``assembly.ArticleChoice``), ``probs`` the content model's own
    node probabilities, ``source`` the ``text_source``. Text is weighed by its characters."""
    lengths = page.text_lengths()
    owners = np.flatnonzero(lengths > 0)
    chars = lengths[owners].astype(np.float64)
    kept = np.asarray(keep, dtype=bool)[owners]
    s = np.asarray(scores, dtype=np.float64)[owners]
    p = np.asarray(probs, dtype=np.float64)[owners]
    dropped = ~kept
    kept_chars = chars * kept
    dropped_chars = chars * dropped
    total = float(chars.sum())
    kept_total = float(kept_chars.sum())
    threshold = float(threshold)
    kept_mean = _mean(s, kept_chars)
    dropped_mean = _mean(s, dropped_chars)
    kept_min = float(s[kept].min()) if kept.any() else 0.0
    dropped_max = float(s[dropped].max()) if dropped.any() else 0.0
    # runs of kept text-owning nodes in reading order: one for a contiguous article
    runs = int(kept[0]) + int(np.count_nonzero(kept[1:] & ~kept[:-1])) if len(kept) else 0
    source_column = [float(source == name) for name in TEXT_SOURCE_NAMES]
    return np.array([
        np.log1p(kept_total) / 10,
        np.log1p(total) / 10,
        kept_total / total if total > 0 else 0.0,
        np.log1p(int(kept.sum())) / 5,
        np.log1p(runs) / 5,
        kept_mean,
        kept_min,
        dropped_mean,
        dropped_max,
        kept_mean - threshold if kept_total > 0 else 0.0,
        threshold - dropped_max if dropped.any() else 1.0,
        _mean((np.abs(s - threshold) < NEAR_CUT).astype(np.float64), chars),
        _mean(4.0 * s * (1.0 - s), chars),
        _mean(4.0 * s * (1.0 - s), kept_chars),
        _mean(p, kept_chars),
        _mean(p, dropped_chars),
        _mean((p >= 0.5).astype(np.float64), chars),
        _mean((p >= 0.5).astype(np.float64), kept_chars),
        np.log1p(page.num_nodes) / 10,
        float(bool(page.truncated)),
        *source_column,
    ], dtype=np.float64)


class ConfidenceModel:
    """``predict(X)``: ``interp(intercept + X_std @ coef, knots_x, knots_y)`` clipped to [0, 1],
    where ``X_std = (X - center) / scale``. The knots map the linear score (``score``, the
    logistic model's log-odds) to the measured F1, fitted on out-of-fold scores
    (``training.confidence_fit.fit_model``)."""

    def __init__(self, center, scale, coef, intercept: float, knots_x, knots_y,
                 feature_names: tuple[str, ...] = CONFIDENCE_FEATURE_NAMES,
                 info: str = ""):
        self.center = np.asarray(center, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        self.coef = np.asarray(coef, dtype=np.float64)
        self.intercept = float(intercept)
        self.knots_x = np.asarray(knots_x, dtype=np.float64)
        self.knots_y = np.asarray(knots_y, dtype=np.float64)
        self.feature_names = tuple(feature_names)
        self.info = str(info)  # how it was fitted (a JSON line), for people
        width = len(self.feature_names)
        if not (self.center.shape == self.scale.shape == self.coef.shape == (width,)):
            raise ValueError(f"a confidence model of {width} features needs center, scale and "
                             "coef of that length")
        if len(self.knots_x) < 1 or self.knots_x.shape != self.knots_y.shape \
                or np.any(np.diff(self.knots_x) < 0):
            raise ValueError("a confidence model needs increasing knots_x and as many knots_y")
        if np.any(self.scale <= 0):
            raise ValueError("a confidence model's scale must be positive")

    def score(self, X: np.ndarray) -> np.ndarray:
        """The linear score (log-odds) of each row of ``X`` ``[rows, features]``."""
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        return self.intercept + ((X - self.center) / self.scale) @ self.coef

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The calibrated confidence in [0, 1] of each row of ``X``; 0 where the article kept
        no text (an empty text is never a page's main content: its F1 is 0)."""
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        out = np.clip(np.interp(self.score(X), self.knots_x, self.knots_y), 0.0, 1.0)
        return np.where(X[:, _KEPT_CHARS] > 0, out, 0.0)

    def page_confidence(self, page: PageStructure, choice, probs: np.ndarray) -> float:
        """The confidence of one page's article: ``choice`` an ``assembly.ArticleChoice``,
        ``probs`` the content model's node probabilities."""
        x = confidence_features(page, choice.keep, choice.scores, probs, choice.threshold,
                                choice.source)
        if x[_KEPT_CHARS] <= 0:
            return 0.0
        value = float(np.interp(self.intercept + float(((x - self.center) / self.scale)
                                                       @ self.coef),
                                self.knots_x, self.knots_y))
        return round(min(1.0, max(0.0, value)), 4)

    def save(self, path: str | Path) -> None:
        np.savez(path, version=np.array(CONFIDENCE_VERSION),
                 feature_names=np.array(self.feature_names), center=self.center,
                 scale=self.scale, coef=self.coef, intercept=np.array(self.intercept),
                 knots_x=self.knots_x, knots_y=self.knots_y, info=np.array(self.info))

    @classmethod
    def load(cls, path: str | Path) -> ConfidenceModel:
        """Raises ``ValueError`` when the file was made for other features."""
        with np.load(path, allow_pickle=False) as f:
            version = str(f["version"])
            names = tuple(str(x) for x in f["feature_names"])
            if version != CONFIDENCE_VERSION or names != CONFIDENCE_FEATURE_NAMES:
                raise ValueError(f"{path}: confidence model version {version!r} of "
                                 f"{len(names)} features; this package computes version "
                                 f"{CONFIDENCE_VERSION!r} of {len(CONFIDENCE_FEATURE_NAMES)}: "
                                 "refit it with grownup lab fit-confidence")
            return cls(f["center"], f["scale"], f["coef"], float(f["intercept"]),
                       f["knots_x"], f["knots_y"], names,
                       str(f["info"]) if "info" in f.files else "")


def load_confidence(directory: str | Path) -> ConfidenceModel | None:
    """The model directory's ``ConfidenceModel``, or ``None`` where it has none; a file that
    cannot be read, or was made for other features, is a ``ModelLoadError``."""
    from scrapy_grownup.model.files import read_side_file

    path = Path(directory) / CONFIDENCE_FILE
    if not path.is_file():
        return None
    return read_side_file(path, ConfidenceModel.load)
