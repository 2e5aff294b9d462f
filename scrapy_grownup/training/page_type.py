"""``grownup fit-page-type``: fit the linear page-type classifier (``page_type_classifier``) on
every page of a page-type set and add it to a model.

It reads the model's own pooled genre inputs (``GrownUpModel.genre_inputs``, the backbone
frozen), so a classifier belongs to the weights it was fitted with. ``grownup genre-sites``
measures the same recipe across sites (its ``linear`` arm: fitted on each fold's training
sites with that fold's backbone); this command fits it on all pages for shipping.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from ..page_signals import SIGNAL_DIM
from ..page_type_classifier import (PAGE_TYPE_FILE, PageTypeClassifier, TfidfVocabulary,
                                    page_words, url_words)
from .command import add_run_arguments, report, standalone

TEXT_TERMS = 20_000  # as good as 200,000 across sites (87.2 both), a tenth of the file
C_GRID = (0.1, 1.0, 10.0)


def fit_page_type(texts: Sequence[str], urls: Sequence[str], signals: np.ndarray,
                  pooled: np.ndarray, y: np.ndarray, names: Sequence[str],
                  groups: Sequence[str] | None = None, seed: int = 0,
                  text_terms: int = TEXT_TERMS) -> PageTypeClassifier:
    """A linear SVM on the pages' ``[text, URL, signals, pooled]`` rows; its C is chosen by a
    3-fold cross-validation over ``groups`` (sites: a page's neighbours from its own site would
    flatter a C that memorises templates), or over pages when none are given."""
    from sklearn.model_selection import GridSearchCV, GroupKFold, StratifiedKFold
    from sklearn.svm import LinearSVC

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
    # liblinear visits the pages in a random order: seeded, a refit gives the same weights
    svm_args = {"random_state": seed, "max_iter": 5000}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # liblinear's convergence notes on tiny sets
        if len(present) < 2:
            weights = np.zeros((len(names), X.shape[1]))
            bias = np.where(np.arange(len(names)) == present[0], 1.0, 0.0)
            return PageTypeClassifier(names, text, url, mean, std, signal_dim, weights, bias)
        smallest = int(np.bincount(y)[present].min())
        if groups is not None and len(set(groups)) >= 3:
            search = GridSearchCV(LinearSVC(**svm_args), {"C": list(C_GRID)},
                                  cv=GroupKFold(3))
            search.fit(X, y, groups=list(groups))
            svm = search.best_estimator_
        elif smallest >= 3:
            search = GridSearchCV(LinearSVC(**svm_args), {"C": list(C_GRID)},
                                  cv=StratifiedKFold(3, shuffle=True, random_state=seed))
            svm = search.fit(X, y).best_estimator_
        else:
            svm = LinearSVC(C=1.0, **svm_args).fit(X, y)
    weights = np.zeros((len(names), X.shape[1]))
    bias = np.full(len(names), -1e3)  # a type never seen in training is never predicted
    coef, intercept = svm.coef_, svm.intercept_
    if len(svm.classes_) == 2:  # liblinear's one row: the second class against the first
        coef = np.vstack([-coef[0], coef[0]])
        intercept = np.r_[-intercept[0], intercept[0]]
    weights[svm.classes_] = coef
    bias[svm.classes_] = intercept
    return PageTypeClassifier(names, text, url, mean, std, signal_dim, weights, bias)


def pooled_inputs(model_dir: Path, store, batch_nodes: int = 16_000) -> np.ndarray:
    """The model's parameter-free pooled genre inputs (without the page signals) of every
    store page."""
    from ..model import GrownUpModel
    from .genre_sites import genre_model
    from .heads import frozen_features

    model = genre_model(GrownUpModel.from_pretrained(model_dir))
    pooled, _ = frozen_features(model, store, range(store.num_pages), batch_nodes=batch_nodes)
    return pooled.numpy()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="the model to add the classifier to "
                                                  "(a directory or a shipped name)")
    p.add_argument("--out", required=True, help="write the model with its classifier here")
    p.add_argument("--dataset", default="wcxb_dev",
                   help="the page-type set it learns from (default: wcxb_dev)")
    p.add_argument("--limit", type=int, default=None, help="pages (a quick check)")
    add_run_arguments(p)


def fit_command(args) -> dict:
    from ..extractor import resolve_model_dir
    from ..model import GrownUpModel
    from ..splits import site_groups
    from .corpus import corpus_encoder
    from .crosssite import load_records, record_key
    from .genre import GENRES
    from .genre_sites import site_corpus

    source, out = resolve_model_dir(args.model), Path(args.out)
    model = GrownUpModel.from_pretrained(source)
    names = list(model.genre_names or GENRES)
    if names != list(GENRES):
        raise SystemExit(f"grownup fit-page-type: the model's page types {names} are not "
                         f"the set's {list(GENRES)}")
    records = load_records([args.dataset], limit=args.limit)
    store, info = site_corpus(records, corpus_encoder(model.config.encoder),
                              workers=args.workers)
    group_of = dict(zip((record_key(r) for r in records), site_groups(records)))
    classifier = fit_page_type(
        info["texts"], info["urls"], np.asarray(info["signals"], np.float32),
        pooled_inputs(source, store), np.asarray(info["genres"]), names,
        groups=[group_of[k] for k in info["keys"]], seed=args.seed)
    if out.resolve() != source.resolve():
        shutil.copytree(source, out, dirs_exist_ok=True)
    classifier.save(out / PAGE_TYPE_FILE)
    return {"saved": str(out / PAGE_TYPE_FILE), "pages": len(info["keys"]),
            "text_terms": len(classifier.text), "url_terms": len(classifier.url),
            "signal_dim": SIGNAL_DIM, "pooled_dim": classifier.pooled_dim}


def run(args) -> int:
    return report(args, fit_command, lambda result: "\n".join(
        f"{k}: {v}" for k, v in result.items()))


def main(argv: list[str] | None = None) -> int:
    return standalone("grownup fit-page-type", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
