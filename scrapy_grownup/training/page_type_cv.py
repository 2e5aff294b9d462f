"""Page type: labels of the page-type set and 10-fold cross-validation of the page-type head.

The page-type head is a Li-ArcFace cosine classifier (scale 5, margin 0.3, as in the paper) on
the page readout (the CLS token when the model has Transformer blocks, else the mean of the node
features) or, with ``page_type_readout="content_pooled"`` (what ships), on node features, text
and structure pooled separately over content and boilerplate (``heads.ContentPooledReadout``). Its
classes are the page-type set's types; the set's two "blog" pages are articles.

``python -m scrapy_grownup.training.page_type_cv --folds 10`` (``grownup lab page-type-cv``)
featurizes every page of the page-type set once (cached), then for each of the stratified
folds (sites never straddle two folds) trains a small model on the other folds and classifies the fold's pages;
a text-only baseline (TF-IDF of the visible text + logistic regression) runs on the same folds
in the same run. It prints a table and one JSON line. ``--init DIR`` starts every fold from a
content model's backbone (one never trained on page-type pages, so no fold sees its test pages);
``--state FILE`` keeps finished folds so an interrupted run resumes. ``--init DIR --frozen``
keeps that model's backbone and content head and fits only a content-pooled page-type head per
fold, as ``grownup lab fit-heads`` builds the shipped one. ``--model DIR`` instead
scores a trained model's page-type head on the page-type hold-out, next to the baseline trained
on the other pages.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from scrapy_grownup.data import datasets
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.extractor import resolve_model_dir
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.data.store import GraphStore
from scrapy_grownup.training.command import (add_model_shape_arguments, add_run_arguments, fold_list, report,
                      standalone)
from scrapy_grownup.training.corpus import DEFAULT_MIN_COVERAGE, cache_root, corpus_encoder, prepare_pages, store_key
from scrapy_grownup.training.evaluate import store_predictions
from scrapy_grownup.training.heads import (HeadFitConfig, fit_page_type_head, frozen_features,
                                            predict_page_type)
from scrapy_grownup.training.holdout import heldout_ids, page_host
from scrapy_grownup.training.loop import AuxLabels, TrainConfig, fit_epochs

logger = logging.getLogger(__name__)

PAGE_TYPES = ("article", "forum", "service", "product", "documentation", "listing", "collection")
PAGE_TYPE_ALIASES = {"blog": "article"}
PAGE_TYPE_INDEX = {name: i for i, name in enumerate(PAGE_TYPES)}


def page_type_index(name: str | None) -> int:
    """Class index of a page type (-1 for None or an unknown type)."""
    if not name:
        return -1
    name = str(name).strip().lower()
    return PAGE_TYPE_INDEX.get(PAGE_TYPE_ALIASES.get(name, name), -1)


def page_types(dataset: str = "pagetype", split: str | None = None) -> dict[str, str | None]:
    """Page id -> page type of a dataset's pages (reads the ground-truth files only)."""
    if dataset != "pagetype":
        return {}
    root = datasets.ensure_unpacked(dataset)
    out: dict[str, str | None] = {}
    for page_id, _ in datasets.list_ids(dataset, split):
        doc = json.loads((root / "ground-truth" / f"{page_id}.json").read_text(encoding="utf-8"))
        raw = ((doc.get("_internal") or {}).get("page_type") or {}).get("primary")
        out[page_id] = PAGE_TYPE_ALIASES.get(raw, raw) if raw else None
    return out


# ----------------------------------------------------------------------------------------------
# Corpus: every page of the page-type set, featurized once


def page_type_corpus(encoder, limits: PageLimits | None = None, workers: int = 2,
                 min_coverage: float | None = None, refresh: bool = False):
    """``(store, info)`` for all pages of the page-type set with a known page type.

    Unlike the content-training store no page is dropped for a poorly aligning gold text (its
    content labels are -1 instead). ``info`` holds per page ``page_types`` (indices), ``hosts`` and
    the visible ``texts`` (for the text baseline). Both are cached in the feature cache.
    """
    limits = limits or PageLimits()
    min_coverage = DEFAULT_MIN_COVERAGE if min_coverage is None else min_coverage
    key = "page-type-corpus-" + store_key(encoder, limits, min_coverage)
    path = cache_root() / f"{key}.safetensors"
    info_path = cache_root() / f"{key}.json"
    if path.exists() and info_path.exists() and not refresh:
        return GraphStore.load(path), json.loads(info_path.read_text(encoding="utf-8"))
    records = [r for r in datasets.load("pagetype")
               if page_type_index(r.extra.get("page_type")) >= 0]
    prepared = prepare_pages(records, limits, workers)
    pages, ids, labels, info = [], [], [], {"page_types": [], "hosts": [], "texts": []}
    for record, prep in zip(records, prepared):
        if prep.page is None:
            logger.warning("%s: %s", record.id, prep.error)
            continue
        good = prep.labels is not None and prep.coverage >= min_coverage and \
            (prep.labels == 1).any()
        pages.append(prep.page)
        ids.append(record.id)
        labels.append(prep.labels if good else np.full(prep.page.num_nodes, -1, np.int8))
        info["page_types"].append(page_type_index(record.extra.get("page_type")))
        info["hosts"].append(page_host(record.url))
        info["texts"].append(" ".join(prep.page.seg_text))
    store = GraphStore.build(pages, encoder, ids=ids, labels=labels,
                             meta={"dataset": "page-type-corpus", "split": "all"})
    store.save(path)
    info["ids"] = ids
    tmp = info_path.with_name(info_path.name + ".tmp")
    tmp.write_text(json.dumps(info), encoding="utf-8")
    tmp.replace(info_path)
    return store, info


# ----------------------------------------------------------------------------------------------
# Cross-validation


def stratified_group_folds(labels, groups, folds: int, seed: int) -> list[np.ndarray]:
    """Test positions of each fold: class proportions kept, a group never split."""
    from sklearn.model_selection import StratifiedGroupKFold

    splitter = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
    dummy = np.zeros(len(labels))
    return [test for _, test in splitter.split(dummy, labels, groups)]


def text_baseline(train_texts, train_y, test_texts, seed: int = 0,
                  groups=None) -> np.ndarray:
    """TF-IDF (word 1-2-grams, sublinear tf) + logistic regression, C chosen by inner 3-fold CV
    (over the training pages' sites where ``groups`` names them)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import GroupKFold

    vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2,
                                 max_features=200_000)
    x_train = vectorizer.fit_transform(train_texts)
    cv = 3
    if groups is not None and len(set(groups)) >= 3:
        cv = list(GroupKFold(3).split(x_train, train_y, groups=list(groups)))
    classifier = LogisticRegressionCV(Cs=[1.0, 10.0, 100.0], cv=cv, max_iter=3000,
                                      random_state=seed)
    with warnings.catch_warnings():  # scikit-learn's notices of changing defaults
        warnings.simplefilter("ignore", FutureWarning)
        classifier.fit(x_train, train_y)
    return classifier.predict(vectorizer.transform(test_texts))


def scores(gold: np.ndarray, pred: np.ndarray, num_classes: int = len(PAGE_TYPES)) -> dict:
    """Accuracy, macro F1 and each page type's F1 of predicted page type indices."""
    from sklearn.metrics import f1_score

    labels = list(range(num_classes))
    per_class = f1_score(gold, pred, labels=labels, average=None, zero_division=0)
    return {"accuracy": float((gold == pred).mean()) if len(gold) else 0.0,
            "macro_f1": float(np.mean(per_class)),
            "per_class_f1": {PAGE_TYPES[i]: float(f) for i, f in enumerate(per_class)}}


# Backbone fields copied from an --init model (its weights must fit the fold models).
_SHAPE = ("hidden_size", "num_layers", "num_transformer_layers", "num_heads", "mlp_ratio",
          "prelim_sizes", "readout", "use_lstm", "shared_target_gate", "node_head_hidden",
          "transformer_activation")


def cross_validate(args) -> dict:
    import torch

    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.model import GrownUpModel, ModelConfig

    only = fold_list(args.only_folds, args.folds)  # before the corpus: a typo costs nothing
    encoder = get_encoder("static")
    store, info = page_type_corpus(encoder, workers=args.workers)
    y = np.asarray(info["page_types"], dtype=np.int64)
    hosts = info["hosts"]
    folds = stratified_group_folds(y, hosts, args.folds, args.seed)
    folds_run = [(k, f) for k, f in enumerate(folds) if only is None or k in only]
    overrides = json.loads(args.model_overrides) if args.model_overrides else {}
    init = None
    if args.init:
        init = GrownUpModel.from_pretrained(resolve_model_dir(args.init),
                                            expected_encoder="static")
        overrides = {**overrides, **{key: getattr(init.config, key) for key in _SHAPE}}
    cfg = TrainConfig(out="", preset=args.preset, epochs=args.epochs, lr=args.lr,
                      batch_nodes=args.batch_nodes, seed=args.seed,
                      content_weight=args.content_weight, page_type_weight=1.0,
                      overrides=overrides)
    aux = AuxLabels(y.copy(), np.full(int(store.page_ptr[-1]), -1, dtype=np.int8))
    gnn_pred = np.full(len(y), -1)
    text_pred = np.full(len(y), -1)
    per_fold = []
    texts = info["texts"]
    start = time.perf_counter()
    # Finished folds are kept in --state, so an interrupted run resumes with the next fold.
    setting = json.dumps({"folds": args.folds, "init": args.init, "seed": args.seed,
                          "frozen": bool(args.frozen),
                          "preset": args.preset,
                          "overrides": overrides, "epochs": args.epochs, "lr": args.lr,
                          "content_weight": args.content_weight,
                          "batch_nodes": args.batch_nodes, "pages": store.ids}, sort_keys=True)
    state_path = Path(args.state) if args.state else None
    state = json.loads(state_path.read_text()) if state_path and state_path.exists() else {}
    if state.get("setting") != setting:
        state = {"setting": setting, "folds": {}}
    frozen = None
    if args.frozen:
        # Fit only the page-type head on the --init model's frozen features (what `grownup
        # fit-heads` ships): one backbone pass over every page, then seconds per fold.
        if init is None:
            raise GrownupError("--frozen needs --init (the content model whose backbone is kept)")
        frozen = GrownUpModel(init.config.replace(num_page_types=len(PAGE_TYPES),
                                                  page_type_names=list(PAGE_TYPES),
                                                  page_type_readout="content_pooled"))
        frozen.backbone.load_state_dict(init.backbone.state_dict())
        frozen.node_head.load_state_dict(init.node_head.state_dict())
        pooled, _ = frozen_features(frozen, store, range(len(y)), batch_nodes=args.batch_nodes)
    for k, test in folds_run:
        if str(k) in state["folds"]:
            done_fold = state["folds"][str(k)]
            gnn_pred[test], text_pred[test] = done_fold["grownup"], done_fold["text"]
            per_fold.append(done_fold["record"])
            logger.info("fold %d: from %s", k, state_path)
            continue
        test_set = set(test.tolist())
        train = [i for i in range(len(y)) if i not in test_set]
        fold_start = time.perf_counter()
        history: list[dict] = []
        if frozen is not None:
            fit_page_type_head(frozen, pooled[train], y[train],
                           HeadFitConfig(seed=args.seed * 1000 + k))
            gnn_pred[test] = predict_page_type(frozen, pooled[test]).argmax(1)
        else:
            torch.manual_seed(args.seed * 1000 + k)
            config = ModelConfig.preset(cfg.preset, encoder="static", text_dim=encoder.dim,
                                        encoder_version=encoder.version,
                                        num_page_types=len(PAGE_TYPES),
                                        page_type_names=list(PAGE_TYPES), **overrides)
            model = GrownUpModel(config)
            if init is not None:
                model.backbone.load_state_dict(init.backbone.state_dict())
                model.node_head.load_state_dict(init.node_head.state_dict())
            history = fit_epochs(model, store, train, aux, cfg,
                                 log=lambda r, k=k: logger.info("fold %d %s", k, json.dumps(r)))
            preds = store_predictions(model, store, test.tolist(), args.batch_nodes)
            gnn_pred[test] = [int(np.argmax(p["page_type"])) for p in preds]
        gnn_seconds = time.perf_counter() - fold_start
        text_pred[test] = text_baseline([texts[i] for i in train], y[train],
                                        [texts[i] for i in test], args.seed)
        fold = {"fold": k, "pages": len(test),
                "grownup_accuracy": float((gnn_pred[test] == y[test]).mean()),
                "text_accuracy": float((text_pred[test] == y[test]).mean()),
                "grownup_seconds": round(gnn_seconds, 1),
                "final_loss": history[-1].get("page_type") if history else None}
        per_fold.append(fold)
        logger.info("fold %d: %s", k, json.dumps(fold))
        if state_path is not None:
            state["folds"][str(k)] = {"grownup": gnn_pred[test].tolist(),
                                      "text": text_pred[test].tolist(), "record": fold}
            tmp = state_path.with_name(state_path.name + ".tmp")
            tmp.write_text(json.dumps(state))
            tmp.replace(state_path)
    done = np.concatenate([test for _, test in folds_run])
    result = {
        "task": "page-type-cv", "dataset": "pagetype", "pages": int(len(done)),
        "classes": list(PAGE_TYPES), "folds": args.folds,
        "folds_run": [k for k, _ in folds_run],
        "seed": args.seed, "preset": args.preset, "overrides": overrides,
        "epochs": args.epochs, "lr": args.lr, "content_weight": args.content_weight,
        "init": args.init, "frozen": bool(args.frozen),
        "grownup": scores(y[done], gnn_pred[done]),
        "text_tfidf_logreg": scores(y[done], text_pred[done]),
        "fold_accuracy": {
            "grownup_mean": float(np.mean([f["grownup_accuracy"] for f in per_fold])),
            "grownup_std": float(np.std([f["grownup_accuracy"] for f in per_fold])),
            "text_mean": float(np.mean([f["text_accuracy"] for f in per_fold])),
            "text_std": float(np.std([f["text_accuracy"] for f in per_fold])),
        },
        "per_fold": per_fold,
        "class_counts": {PAGE_TYPES[i]: int((y[done] == i).sum())
                         for i in range(len(PAGE_TYPES))},
        "seconds": round(time.perf_counter() - start, 1),
    }
    return result


def model_holdout(args) -> dict:
    """A trained model's page-type head on the page-type hold-out (pages no trainer run uses),
    next to the text baseline trained on the other pages, in the same run."""
    from scrapy_grownup.model import GrownUpModel

    directory = resolve_model_dir(args.model)
    model = GrownUpModel.from_pretrained(directory)
    if model.page_type_head is None:
        raise GrownupError(f"{directory}: the model has no page-type head")
    names = model.page_type_names
    store, info = page_type_corpus(corpus_encoder(model.config.encoder), workers=args.workers)
    y = np.asarray(info["page_types"], dtype=np.int64)
    held = set(heldout_ids("pagetype"))
    test = [i for i, page_id in enumerate(store.ids) if page_id in held]
    train = [i for i, page_id in enumerate(store.ids) if page_id not in held]
    start = time.perf_counter()
    preds = store_predictions(model, store, test, args.batch_nodes)
    index = {name: page_type_index(name) for name in names}
    gnn = np.array([index[names[int(np.argmax(p["page_type"]))]] for p in preds])
    texts = info["texts"]
    text = text_baseline([texts[i] for i in train], y[train], [texts[i] for i in test],
                         args.seed)
    gold = y[test]
    return {"task": "page-type-holdout", "dataset": "pagetype", "model": str(args.model),
            "pages": len(test), "classes": list(PAGE_TYPES), "grownup": scores(gold, gnn),
            "text_tfidf_logreg": scores(gold, text),
            "class_counts": {PAGE_TYPES[i]: int((gold == i).sum())
                             for i in range(len(PAGE_TYPES))},
            "seconds": round(time.perf_counter() - start, 1)}


def format_table(result: dict) -> str:
    g, t = result["grownup"], result["text_tfidf_logreg"]
    lines = [f"{'':<22} {'grownup':>9} {'TF-IDF+LR':>10}", "-" * 43,
             f"{'accuracy':<22} {100 * g['accuracy']:9.1f} {100 * t['accuracy']:10.1f}",
             f"{'macro-F1':<22} {100 * g['macro_f1']:9.1f} {100 * t['macro_f1']:10.1f}"]
    fa = result.get("fold_accuracy")
    if fa:
        lines += [f"{'fold accuracy (mean)':<22} {100 * fa['grownup_mean']:9.1f} "
                  f"{100 * fa['text_mean']:10.1f}",
                  f"{'fold accuracy (std)':<22} {100 * fa['grownup_std']:9.1f} "
                  f"{100 * fa['text_std']:10.1f}"]
    for name in PAGE_TYPES:
        lines.append(f"{'F1 ' + name + ' (' + str(result['class_counts'][name]) + ')':<22} "
                     f"{100 * g['per_class_f1'][name]:9.1f} "
                     f"{100 * t['per_class_f1'][name]:10.1f}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None,
                        help="instead of cross-validating, score this trained model's page-type "
                             "head on the page-type hold-out")
    parser.add_argument("--folds", type=int, default=10,
                        help="cross-validation folds (default: 10)")
    parser.add_argument("--only-folds", default=None,
                        help="comma-separated fold numbers to run (quick checks)")
    add_model_shape_arguments(parser)
    parser.add_argument("--init", default=None,
                        help="model directory whose backbone and content head start every fold "
                             "(it must not have been trained on page-type pages)")
    parser.add_argument("--frozen", action="store_true",
                        help="with --init: keep its backbone and content head, fit only the "
                             "page-type head (content-pooled readout) per fold, as fit-heads "
                             "does")
    parser.add_argument("--epochs", type=int, default=5, help="epochs per fold (default: 5)")
    parser.add_argument("--lr", type=float, default=2e-3, help="learning rate (default: 0.002)")
    parser.add_argument("--content-weight", type=float, default=1.0,
                        help="also train the content head on the fold's pages (0: page type "
                             "only)")
    parser.add_argument("--batch-nodes", type=int, default=8_000,
                        help="DOM nodes per training batch (default: 8000)")
    parser.add_argument("--state", default=None,
                        help="JSON file keeping finished folds (rerun to resume)")
    add_run_arguments(parser)


def run(args) -> int:
    return report(args, lambda a: model_holdout(a) if a.model else cross_validate(a),
                  format_table)


def main(argv: list[str] | None = None) -> int:
    return standalone("grownup lab page-type-cv", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
