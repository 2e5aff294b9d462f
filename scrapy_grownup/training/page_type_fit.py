"""Fit the page-type classifier (``page_type_classifier``) from pages' text, URLs, signals and
pooled page-type inputs: what ``grownup lab fit-page-type`` ships and ``grownup lab
page-type-sites``' ``linear`` and ``stacked`` arms measure across sites, one function for
both."""

from __future__ import annotations

import logging
import warnings
from typing import Sequence

import numpy as np

from scrapy_grownup.decisions.boosted_trees import BoostedTrees
from scrapy_grownup.decisions.page_type import PageTypeClassifier, TfidfVocabulary, page_words

logger = logging.getLogger(__name__)

TEXT_TERMS = 20_000  # 200,000 measured no better across sites, at ten times the file
C_GRID = (0.1, 1.0, 10.0)
STACK_FOLDS = 5  # inner folds (over sites) that give the trees out-of-fold margins
# the stacked trees' settings, one chosen (or none: the linear model alone) by the inner folds
STACK_GRID = ({"max_iter": 200, "max_leaf_nodes": 15, "learning_rate": 0.1},
              {"max_iter": 100, "max_leaf_nodes": 7, "learning_rate": 0.05,
               "l2_regularization": 1.0})


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
                  text_terms: int = TEXT_TERMS, stack: bool = False,
                  og_types: Sequence[str | None] | None = None) -> PageTypeClassifier:
    """A linear SVM on the pages' ``[text, URL, signals, pooled]`` rows (``fit_linear_svm``:
    C chosen over ``groups``, the pages' sites; the URL block with each page's declared
    ``og_types``) and, with ``stack``, boosted trees over its out-of-fold margins and the
    signals where they beat it out of fold (``fit_stack``)."""
    classifier = fit_linear_page_type(texts, urls, signals, pooled, y, names, groups, seed,
                                      text_terms, og_types)
    if stack:
        fit_stack(classifier, texts, urls, signals, pooled, y, groups, seed, text_terms,
                  og_types)
    return classifier


def fit_stack(classifier: PageTypeClassifier, texts, urls, signals, pooled, y,
              groups: Sequence[str] | None, seed: int = 0,
              text_terms: int = TEXT_TERMS,
              og_types: Sequence[str | None] | None = None) -> dict:
    """Give ``classifier`` (the linear model of these pages) its stacked trees where they beat
    it on sites they did not see; returns what the choice measured.

    Each page's margins come from a linear model fitted without its site (``STACK_FOLDS``
    folds over ``groups``; over stratified pages without groups): margins of pages the linear
    model was fitted on are near-perfect, and trees fitted on those would learn to trust it
    blindly. On the same folds, each ``STACK_GRID`` setting of a multi-class
    ``HistGradientBoostingClassifier`` on ``[margins, signals]`` is scored out of fold against
    the linear model's own out-of-fold accuracy; the best setting is fitted on every page, or
    the classifier stays linear where no setting beats it (or the pages are too few to fold).
    """
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import GroupKFold, StratifiedKFold

    y = np.asarray(y, dtype=np.int64)
    signals = np.asarray(signals, np.float32)
    pooled = np.asarray(pooled)
    og_types = [None] * len(y) if og_types is None else og_types  # None: no declared type
    if len(np.unique(y)) < 3:  # a binary model has one output, not one per type
        logger.warning("page type: fewer than three page types; the classifier stays linear")
        return {"stacked": False, "why": "fewer than three page types"}
    if groups is not None and len(set(groups)) >= STACK_FOLDS:
        folds = list(GroupKFold(STACK_FOLDS).split(y, y, list(groups)))
    elif np.bincount(y)[np.unique(y)].min() >= STACK_FOLDS:
        folds = list(StratifiedKFold(STACK_FOLDS, shuffle=True, random_state=seed).split(y, y))
    else:
        logger.warning("page type: %d pages are too few for %d folds; the classifier stays "
                       "linear", len(y), STACK_FOLDS)
        return {"stacked": False, "why": "too few pages to fold"}
    if any(len(np.unique(y[train])) < 3 for train, _ in folds):
        logger.warning("page type: an inner fold holds under three page types; the classifier "
                       "stays linear")
        return {"stacked": False, "why": "an inner fold holds under three page types"}
    margins = np.zeros((len(y), len(classifier.names)))
    for train, test in folds:
        inner = fit_linear_page_type(
            [texts[i] for i in train], [urls[i] for i in train], signals[train], pooled[train],
            y[train], classifier.names,
            None if groups is None else [groups[i] for i in train], seed, text_terms,
            [og_types[i] for i in train])
        margins[test] = inner.decision([texts[i] for i in test], [urls[i] for i in test],
                                       signals[test], pooled[test], [og_types[i] for i in test])
    X = PageTypeClassifier.stack_inputs(margins, signals)

    def trees(setting):
        # a fixed number of trees: early stopping would hold out random pages, not sites
        return HistGradientBoostingClassifier(**setting, early_stopping=False,
                                              random_state=seed)

    measured = {"linear": float((margins.argmax(1) == y).mean()), "trees": []}
    for setting in STACK_GRID:
        pred = np.zeros(len(y), dtype=np.int64)
        for train, test in folds:
            pred[test] = trees(setting).fit(X[train], y[train]).predict(X[test])
        measured["trees"].append({**setting, "accuracy": float((pred == y).mean())})
    best = max(range(len(STACK_GRID)), key=lambda k: measured["trees"][k]["accuracy"])
    if measured["trees"][best]["accuracy"] <= measured["linear"]:
        logger.info("page type: no stacked trees beat the linear model out of fold (%s); the "
                    "classifier stays linear", measured)
        return {"stacked": False, "why": "the linear model was as good out of fold", **measured}
    fitted = trees(STACK_GRID[best]).fit(X, y)
    classifier.stack = BoostedTrees.from_sklearn(fitted)
    classifier.stack_types = np.asarray(fitted.classes_, dtype=np.int64)
    return {"stacked": True, "setting": STACK_GRID[best], **measured}


def fit_linear_page_type(texts: Sequence[str], urls: Sequence[str], signals: np.ndarray,
                         pooled: np.ndarray, y: np.ndarray, names: Sequence[str],
                         groups: Sequence[str] | None = None, seed: int = 0,
                         text_terms: int = TEXT_TERMS,
                         og_types: Sequence[str | None] | None = None) -> PageTypeClassifier:
    """The linear SVM alone (``fit_page_type`` without its stack)."""
    y = np.asarray(y, dtype=np.int64)
    text = TfidfVocabulary.fit([page_words(t) for t in texts], min_df=2, max_terms=text_terms)
    url = TfidfVocabulary.fit(PageTypeClassifier.url_documents(urls, og_types), min_df=2)
    dense = np.hstack([np.asarray(signals, np.float64), np.asarray(pooled, np.float64)])
    mean, std = dense.mean(0), dense.std(0) + 1e-6
    signal_dim = np.asarray(signals).shape[1]
    blank = PageTypeClassifier(names, text, url, mean, std, signal_dim,
                               np.zeros((len(names), 1)), np.zeros(len(names)))
    X = blank.features(texts, urls, signals, pooled, og_types)
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
