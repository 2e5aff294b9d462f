"""Fit the linear page-type classifier (``page_type_classifier``) from pages' text, URLs,
signals and pooled genre inputs: what ``grownup fit-page-type`` ships and ``grownup
genre-sites``' ``linear`` arm measures across sites, one function for both."""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

from ..page_type_classifier import PageTypeClassifier, TfidfVocabulary, page_words, url_words

TEXT_TERMS = 20_000  # 200,000 measured no better across sites, at ten times the file
C_GRID = (0.1, 1.0, 10.0)


def fit_linear_svm(X, y: np.ndarray, groups: Sequence[str] | None = None, seed: int = 0):
    """A linear SVM fitted on ``X``, its C chosen from ``C_GRID`` by a 3-fold cross-validation
    over ``groups`` (sites: a page's neighbours from its own site would flatter a C that
    memorises templates), over stratified pages where there are no groups, C=1 where a class
    has under three pages; ``y`` holds at least two classes."""
    from sklearn.model_selection import GridSearchCV, GroupKFold, StratifiedKFold
    from sklearn.svm import LinearSVC

    # liblinear visits the pages in a random order: seeded, a refit gives the same weights
    svm = LinearSVC(random_state=seed, max_iter=5000)
    smallest = int(np.bincount(y)[np.unique(y)].min())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # liblinear's convergence notes on tiny sets
        if groups is not None and len(set(groups)) >= 3:
            search = GridSearchCV(svm, {"C": list(C_GRID)}, cv=GroupKFold(3))
            return search.fit(X, y, groups=list(groups)).best_estimator_
        if smallest >= 3:
            search = GridSearchCV(svm, {"C": list(C_GRID)},
                                  cv=StratifiedKFold(3, shuffle=True, random_state=seed))
            return search.fit(X, y).best_estimator_
        return svm.set_params(C=1.0).fit(X, y)


def fit_page_type(texts: Sequence[str], urls: Sequence[str], signals: np.ndarray,
                  pooled: np.ndarray, y: np.ndarray, names: Sequence[str],
                  groups: Sequence[str] | None = None, seed: int = 0,
                  text_terms: int = TEXT_TERMS) -> PageTypeClassifier:
    """A linear SVM on the pages' ``[text, URL, signals, pooled]`` rows (``fit_linear_svm``:
    C chosen over ``groups``, the pages' sites)."""
    y = np.asarray(y, dtype=np.int64)
    text = TfidfVocabulary.fit([page_words(t) for t in texts], min_df=2, max_terms=text_terms)
    url = TfidfVocabulary.fit([url_words(u) for u in urls], min_df=2)
    dense = np.hstack([np.asarray(signals, np.float64), np.asarray(pooled, np.float64)])
    mean, std = dense.mean(0), dense.std(0) + 1e-6
    signal_dim = np.asarray(signals).shape[1]
    blank = PageTypeClassifier(names, text, url, mean, std, signal_dim,
                               np.zeros((len(names), 1)), np.zeros(len(names)))
    X = blank.features(texts, urls, signals, pooled)
    present = np.unique(y)
    if len(present) < 2:
        weights = np.zeros((len(names), X.shape[1]))
        bias = np.where(np.arange(len(names)) == present[0], 1.0, 0.0)
        return PageTypeClassifier(names, text, url, mean, std, signal_dim, weights, bias)
    svm = fit_linear_svm(X, y, groups, seed)
    weights = np.zeros((len(names), X.shape[1]))
    bias = np.full(len(names), -1e3)  # a type never seen in training is never predicted
    coef, intercept = svm.coef_, svm.intercept_
    if len(svm.classes_) == 2:  # liblinear's one row: the second class against the first
        coef = np.vstack([-coef[0], coef[0]])
        intercept = np.r_[-intercept[0], intercept[0]]
    weights[svm.classes_] = coef
    bias[svm.classes_] = intercept
    return PageTypeClassifier(names, text, url, mean, std, signal_dim, weights, bias)
