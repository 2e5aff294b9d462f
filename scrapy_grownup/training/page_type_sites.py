"""Page type on sites never seen: the page-type head on the cross-site folds, next to text
baselines.

``grownup lab page-type-sites --fold-models runs/cv/layout_pw2`` takes the site-grouped folds of
``grownup lab evaluate --protocol site-cv`` (``crosssite.site_cv_plan`` over the modern sets, with
Dragnet and CleanEval as extra training pages) and, for each fold:

- loads that fold's content model (``FOLD_MODELS/foldK/model``, trained without the fold's
  sites), keeps its backbone frozen and fits a content-pooled page-type head
  (``heads.fit_page_type_head``, what ``grownup lab fit-heads`` ships) on the ``--dataset`` pages
  (``wcxb_dev``: 1,129 pages of 7 page types) of the training side; it classifies the fold's
  pages;
- runs every other arm on the very same split: the TF-IDF + logistic-regression text
  baseline, and the same with the URL's path tokens and/or the page signals of
  ``page_signals`` (URL shape, JSON-LD types, forms, prices, repeated siblings, class words),
  the head with the page signals, ``linear``: the page-type classifier ``fast`` ships
  (``training.page_type_fit.fit_page_type`` on the fold's training pages and backbone), and
  ``stacked``: the same with boosted trees over its out-of-fold margins and the signals where
  the training side's inner folds choose them (``grownup lab fit-page-type --stack``).

It reports accuracy and macro-F1 overall, per fold and per page type, a confusion matrix per arm,
and writes the JSON result (``--json``). Every page is featurized once (cached in the feature
cache); no page of a fold's sites is ever on its training side (checked).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.graph.signals import SIGNAL_DIM, SIGNAL_VERSION, page_signals, url_tokens
from scrapy_grownup.decisions.page_type import page_text
from scrapy_grownup.data.splits import site_groups
from scrapy_grownup.data.store import GraphStore
from scrapy_grownup.crawl.workers import parent_bound_pool
from scrapy_grownup.training.command import add_run_arguments, report, standalone
from scrapy_grownup.training.corpus import cache_root, corpus_encoder, store_key
from scrapy_grownup.training.crosssite import EVAL_DATASETS, check_disjoint, load_records, record_key, site_cv_plan
from scrapy_grownup.training.page_type_cv import PAGE_TYPES, page_type_index, scores, text_baseline
from scrapy_grownup.training.heads import (HeadFitConfig, fit_page_type_head, frozen_features,
                                            predict_page_type)
from scrapy_grownup.training.page_type_fit import fit_linear_svm

# Arms: how each classifies a page. "head": the page-type head on the fold backbone's pooled
# features; the others are logistic regressions on the named blocks.
ARMS = {
    "head": ("pooled",),
    "head+signals": ("pooled", "signals"),
    "text": ("text",),  # page_type_cv.text_baseline, page-type-cv's (logistic regression)
    "text-svm": ("text",),
    "text+url": ("text", "url"),
    "text+signals": ("text", "signals"),
    "text+url+signals": ("text", "url", "signals"),
    "signals": ("signals",),
    "url+signals": ("url", "signals"),
    "pooled+text+url+signals": ("pooled", "text", "url", "signals"),  # a linear SVM on all
    # page_type_classifier: that SVM with our vectoriser, C chosen over sites
    "linear": ("pooled", "text", "url", "signals"),
    # and boosted trees on its out-of-fold margins and the signals, where inner folds over
    # sites say they beat it (fit-page-type --stack)
    "stacked": ("pooled", "text", "url", "signals"),
}
DEFAULT_ARMS = tuple(ARMS)


# ----------------------------------------------------------------------------------------------
# Corpus: every page of the set, parsed once, with its signals


def _prepare(job):
    page_id, html, url, content_type, limits = job
    try:
        page = parse_page(html, url=url, content_type=content_type, limits=limits)
    except GrownupError:
        return None, None
    return page, page_signals(page, url)


def _signals_job(job):
    html, url, content_type, limits = job
    try:
        page = parse_page(html, url=url, content_type=content_type, limits=limits,
                          positions=False)
    except GrownupError:
        return np.zeros(SIGNAL_DIM, dtype=np.float32)
    return page_signals(page, url)


def record_signals(records, workers: int = 2, limits: PageLimits | None = None) -> np.ndarray:
    """``[len(records), SIGNAL_DIM]`` page signals, each record parsed as serving parses it
    (an unparsable page: zeros)."""
    limits = limits or PageLimits()
    jobs = [(r.html, r.url, r.extra.get("content_type"), limits) for r in records]
    if workers > 1 and len(jobs) >= 16:
        with parent_bound_pool(workers) as pool:
            rows = list(pool.map(_signals_job, jobs, chunksize=8))
    else:
        rows = [_signals_job(job) for job in jobs]
    return np.stack(rows) if rows else np.zeros((0, SIGNAL_DIM), dtype=np.float32)


def site_corpus(records, encoder, workers: int = 2, limits: PageLimits | None = None,
                cache: bool = True):
    """``(store, info)`` of every parsable record with a known page type: the graph store (no
    content labels needed) and per page ``keys``, ``page_types``, ``texts``, ``urls``,
    ``og_types`` (the declared OpenGraph type, "" for none) and ``signals``. Cached by the
    records' keys."""
    limits = limits or PageLimits()
    records = [r for r in records if page_type_index(r.extra.get("page_type")) >= 0]
    digest = hashlib.sha1(json.dumps([record_key(r) for r in records]).encode()).hexdigest()[:12]
    key = (f"page-type-sites-{digest}-" + store_key(encoder, limits, 0.0)
           + f"-s{SIGNAL_VERSION}-og")
    path, info_path = cache_root() / f"{key}.safetensors", cache_root() / f"{key}.json"
    if cache and path.exists() and info_path.exists():
        return GraphStore.load(path), json.loads(info_path.read_text(encoding="utf-8"))
    jobs = [(r.id, r.html, r.url, r.extra.get("content_type"), limits) for r in records]
    if workers > 1 and len(jobs) >= 16:
        with parent_bound_pool(workers) as pool:
            prepared = list(pool.map(_prepare, jobs, chunksize=4))
    else:
        prepared = [_prepare(job) for job in jobs]
    pages, info = [], {"keys": [], "page_types": [], "texts": [], "urls": [], "og_types": [],
                       "signals": []}
    for record, (page, signals) in zip(records, prepared):
        if page is None:
            continue
        pages.append(page)
        info["keys"].append(record_key(record))
        info["page_types"].append(page_type_index(record.extra.get("page_type")))
        info["texts"].append(page_text(page))
        info["urls"].append(record.url or "")
        info["og_types"].append(page.meta.get("og:type", ""))
        info["signals"].append([round(float(v), 5) for v in signals])
    store = GraphStore.build(pages, encoder, ids=info["keys"],
                             meta={"dataset": "page-type-sites", "split": "all"})
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        store.save(path)
        tmp = info_path.with_name(info_path.name + ".tmp")
        tmp.write_text(json.dumps(info), encoding="utf-8")
        tmp.replace(info_path)
    return store, info


def corpus_groups(records, keys) -> list[str]:
    """The site group (``splits.site_groups`` over ``records``) of each corpus page ``keys``."""
    group_of = dict(zip((record_key(r) for r in records), site_groups(records)))
    return [group_of[k] for k in keys]


# ----------------------------------------------------------------------------------------------
# Classifiers


def _url_text(url: str) -> str:
    return " ".join(url_tokens(url))


def block_classifier(blocks: dict, train: np.ndarray, test: np.ndarray, y: np.ndarray,
                     names, seed: int = 0, groups=None) -> np.ndarray:
    """A linear SVM on the named feature blocks (TF-IDF of the visible text, word 1-2-grams
    as the text baseline's, and of the URL's path tokens; standardised dense page signals /
    pooled head inputs), C chosen by an inner 3-fold CV over the training pages' sites
    (``groups``, one per page; by pages only where there are none); predicted classes of
    ``test``. (The baseline's logistic regression takes minutes per fit on these pages;
    the ``text-svm`` arm shows what the classifier alone changes.)"""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    if len(np.unique(y[train])) < 2:  # a tiny slice: nothing to tell apart
        return np.full(len(test), y[train][0] if len(train) else 0)
    parts_train, parts_test = [], []
    for name in names:
        values = blocks[name]
        if name in ("text", "url"):
            vectorizer = (TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2,
                                          max_features=200_000) if name == "text" else
                          TfidfVectorizer(sublinear_tf=True, token_pattern=r"\S+", min_df=2))
            try:
                parts_train.append(vectorizer.fit_transform([values[i] for i in train]))
            except ValueError:  # no term in two training pages (a tiny slice)
                continue
            parts_test.append(vectorizer.transform([values[i] for i in test]))
        else:
            x = np.asarray(values, dtype=np.float64)
            mean, std = x[train].mean(0), x[train].std(0) + 1e-6
            # a dense block weighs about as much as a unit-norm TF-IDF row
            scale = 1.0 / np.sqrt(x.shape[1])
            parts_train.append(sparse.csr_matrix((x[train] - mean) / std * scale))
            parts_test.append(sparse.csr_matrix((x[test] - mean) / std * scale))
    if not parts_train:
        return np.full(len(test), np.bincount(y[train]).argmax())
    x_train, x_test = sparse.hstack(parts_train).tocsr(), sparse.hstack(parts_test).tocsr()
    train_groups = None if groups is None else [groups[i] for i in train]
    return fit_linear_svm(x_train, y[train], train_groups, seed).predict(x_test)


def page_type_model(content_model, signals: bool = False):
    """A copy of ``content_model`` with a fresh content-pooled page-type head (backbone and content
    head kept); ``signals``: the head also reads the page signals (what would ship)."""
    from scrapy_grownup.model import GrownUpModel

    model = GrownUpModel(content_model.config.replace(
        num_page_types=len(PAGE_TYPES), page_type_names=list(PAGE_TYPES),
        page_type_readout="content_pooled", page_type_signals=SIGNAL_VERSION if signals else ""))
    model.backbone.load_state_dict(content_model.backbone.state_dict())
    model.node_head.load_state_dict(content_model.node_head.state_dict())
    return model.eval()


def head_with_signals(model, pooled, signals, train, test, y, cfg: HeadFitConfig) -> np.ndarray:
    """The page-type head that also reads the page signals (``ModelConfig.page_type_signals``:
    its readout is wider by ``SIGNAL_DIM``), fitted as ``fit_page_type_head`` does on
    ``[pooled, signals]`` (what ``page_type_inputs`` gives such a model); predicted classes of
    ``test``."""
    import torch

    wide = page_type_model(model, signals=True)
    features = torch.cat([pooled.float(), torch.from_numpy(np.asarray(signals, np.float32))],
                         dim=1)
    fit_page_type_head(wide, features[train], y[train], cfg)
    return predict_page_type(wide, features[test]).argmax(1)


# ----------------------------------------------------------------------------------------------
# Scores


def scores_with_confusion(gold: np.ndarray, pred: np.ndarray) -> dict:
    """``page_type_cv.scores`` (its ``per_class_f1`` named ``per_type_f1`` here), plus each page
    type's recall and the confusion matrix: the site-held-out report shows where types mix."""
    from sklearn.metrics import confusion_matrix

    labels = list(range(len(PAGE_TYPES)))
    base = scores(gold, pred)
    recall = [float(((pred == k) & (gold == k)).sum() / max(1, (gold == k).sum()))
              for k in labels]
    return {"accuracy": base["accuracy"], "macro_f1": base["macro_f1"],
            "per_type_f1": base["per_class_f1"],
            "per_type_recall": {PAGE_TYPES[k]: r for k, r in enumerate(recall)},
            "confusion": confusion_matrix(gold, pred, labels=labels).tolist()}


def site_cv(args) -> dict:
    from scrapy_grownup.extractor import resolve_model_dir
    from scrapy_grownup.model import GrownUpModel

    start = time.perf_counter()
    eval_names = [n for n in args.eval_datasets.split(",") if n]
    train_names = [n for n in args.train_datasets.split(",") if n and n not in eval_names]
    eval_records = load_records(eval_names, limit=args.limit)
    extra = load_records(train_names, limit=args.limit)
    plans = site_cv_plan(eval_records, extra, args.folds)
    for plan in plans:
        check_disjoint(plan, eval_records + extra)
    records = [r for r in eval_records if r.dataset == args.dataset]
    arms = [a for a in args.arms.split(",") if a]
    unknown = set(arms) - set(ARMS)
    if unknown:
        raise GrownupError(f"unknown arms {sorted(unknown)}; choose from {list(ARMS)}")
    fold_dirs = [Path(args.fold_models) / plan.name / "model" for plan in plans]
    first = GrownUpModel.from_pretrained(resolve_model_dir(str(fold_dirs[0])))
    encoder = corpus_encoder(first.config.encoder)
    store, info = site_corpus(records, encoder, workers=args.workers)
    keys = info["keys"]
    info["groups"] = corpus_groups(records, keys)
    y = np.asarray(info["page_types"], dtype=np.int64)
    signals = np.asarray(info["signals"], dtype=np.float32)
    blocks = {"text": info["texts"], "url": [_url_text(u) for u in info["urls"]],
              "signals": signals}
    preds = {arm: np.full(len(y), -1) for arm in arms}
    state_dir = Path(args.state) if args.state else None
    setting = {"pages": keys, "folds": args.folds, "fold_models": str(args.fold_models),
               "seed": args.seed, "signals": SIGNAL_VERSION}
    digest = hashlib.sha1(json.dumps(setting).encode()).hexdigest()[:12]
    per_fold = []
    for plan, fold_dir in zip(plans, fold_dirs):
        test_keys = {record_key(r) for r in plan.test}
        test = np.array([i for i, k in enumerate(keys) if k in test_keys], dtype=np.int64)
        train = np.array([i for i, k in enumerate(keys) if k in plan.train_keys],
                         dtype=np.int64)
        assert not set(test) & set(train)
        fold = {"fold": plan.name, "test_pages": int(len(test)), "train_pages": int(len(train)),
                "model": str(fold_dir)}
        per_fold.append(fold)
        if not len(test) or not len(train):
            continue
        pooled = model = None
        for arm in arms:
            saved = _load_state(state_dir, arm, digest, plan.name)
            if saved is not None:
                preds[arm][test] = saved
            else:
                if "pooled" in ARMS[arm] and pooled is None:
                    model, pooled = _fold_backbone(fold_dir, plan.name, store, args.batch_nodes)
                    blocks["pooled"] = pooled.numpy()
                preds[arm][test] = _predict(arm, blocks, info, model, pooled, signals, train,
                                            test, y, args.seed)
                _save_state(state_dir, arm, digest, plan.name, preds[arm][test])
            fold[arm] = float((preds[arm][test] == y[test]).mean())
        print(json.dumps(fold), file=sys.stderr, flush=True)
    done = preds[arms[0]] >= 0
    result = {
        "task": "page-type-sites", "dataset": args.dataset, "protocol": "site-cv",
        "folds": args.folds, "eval_datasets": eval_names, "train_datasets": train_names,
        "fold_models": str(args.fold_models), "pages": int(done.sum()),
        "classes": list(PAGE_TYPES), "signal_dim": SIGNAL_DIM, "seed": args.seed,
        "arms": {arm: scores_with_confusion(y[done], preds[arm][done]) for arm in arms},
        "per_fold": per_fold,
        "class_counts": {PAGE_TYPES[k]: int((y[done] == k).sum())
                         for k in range(len(PAGE_TYPES))},
        "seconds": round(time.perf_counter() - start, 1),
    }
    return result


def _fold_backbone(fold_dir: Path, plan_name: str, store, batch_nodes: int):
    """``(page-type model, pooled page-type inputs of every store page)`` of one fold's content
    model (the pooled features are cached by the model's weights and the pages)."""
    import torch

    from scrapy_grownup.extractor import resolve_model_dir
    from scrapy_grownup.model import GrownUpModel

    directory = resolve_model_dir(str(fold_dir))
    doc = GrownUpModel.read_config(directory)[1]
    trained_for = (doc.get("metadata") or {}).get("plan")
    if trained_for not in (None, plan_name):
        raise GrownupError(f"{fold_dir}: a model of plan {trained_for}, not {plan_name}")
    model = page_type_model(GrownUpModel.from_pretrained(directory))
    key = hashlib.sha1(json.dumps([doc.get("weights_sha256"), store.ids,
                                   store.page_ptr[-1].item()]).encode()).hexdigest()[:16]
    path = cache_root() / f"page-type-sites-pooled-{key}.npy"
    if path.is_file():
        return model, torch.from_numpy(np.load(path))
    pooled, _ = frozen_features(model, store, range(store.num_pages), batch_nodes=batch_nodes)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npy")
    np.save(tmp, pooled.numpy())
    tmp.replace(path)
    return model, pooled


def _predict(arm, blocks, info, model, pooled, signals, train, test, y, seed) -> np.ndarray:
    cfg = HeadFitConfig(seed=seed)
    if arm == "head":
        fit_page_type_head(model, pooled[train], y[train], cfg)
        return predict_page_type(model, pooled[test]).argmax(1)
    if arm == "head+signals":
        return head_with_signals(model, pooled, signals, train, test, y, cfg)
    if arm in ("linear", "stacked"):
        from scrapy_grownup.training.page_type_fit import fit_page_type

        classifier = fit_page_type(
            [info["texts"][i] for i in train], [info["urls"][i] for i in train],
            signals[train], blocks["pooled"][train], y[train], PAGE_TYPES,
            groups=[info["groups"][i] for i in train], seed=seed, stack=arm == "stacked",
            og_types=[info["og_types"][i] for i in train])
        return classifier.predict([info["texts"][i] for i in test],
                                  [info["urls"][i] for i in test], signals[test],
                                  blocks["pooled"][test], [info["og_types"][i] for i in test])
    if arm == "text":  # page-type-cv's baseline, its C chosen over sites
        return text_baseline([info["texts"][i] for i in train], y[train],
                             [info["texts"][i] for i in test], seed,
                             groups=[info["groups"][i] for i in train])
    return block_classifier(blocks, train, test, y, ARMS[arm], seed, groups=info["groups"])


def _load_state(state_dir: Path | None, arm: str, digest: str, fold: str):
    path = state_dir / f"{arm}.json" if state_dir else None
    if path is None or not path.is_file():
        return None
    doc = json.loads(path.read_text())
    if doc.get("setting") != digest:
        return None
    found = doc["folds"].get(fold)
    return np.asarray(found) if found is not None else None


def _save_state(state_dir: Path | None, arm: str, digest: str, fold: str, pred) -> None:
    """Keep one arm's finished folds (``--state DIR``: one file per arm, so runs of different
    arms can go side by side; a re-run resumes)."""
    if state_dir is None:
        return
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / f"{arm}.json"
    doc = json.loads(path.read_text()) if path.is_file() else {}
    if doc.get("setting") != digest:
        doc = {"setting": digest, "folds": {}}
    doc["folds"][fold] = [int(v) for v in pred]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)


def format_table(result: dict) -> str:
    arms = list(result["arms"])
    width = max(10, *(len(a) for a in arms))
    head = f"{'':<24}" + "".join(f"{a:>{width + 1}}" for a in arms)
    lines = [head, "-" * len(head)]

    def row(label, values):
        lines.append(f"{label:<24}" + "".join(f"{100 * v:>{width + 1}.1f}" for v in values))

    row("accuracy", [result["arms"][a]["accuracy"] for a in arms])
    row("macro-F1", [result["arms"][a]["macro_f1"] for a in arms])
    for name in PAGE_TYPES:
        row(f"F1 {name} ({result['class_counts'][name]})",
            [result["arms"][a]["per_type_f1"][name] for a in arms])
    for arm in arms:
        lines += ["", f"confusion ({arm}; rows gold, columns predicted): "
                  + " ".join(g[:5] for g in PAGE_TYPES)]
        for name, counts in zip(PAGE_TYPES, result["arms"][arm]["confusion"]):
            lines.append(f"  {name:<14}" + "".join(f"{c:>6}" for c in counts))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fold-models", default="runs/cv/layout_pw2",
                        help="per-fold content models of grownup lab evaluate --protocol site-cv "
                             "(DIR/foldK/model; default: runs/cv/layout_pw2)")
    parser.add_argument("--dataset", default="wcxb_dev",
                        help="the page-type set scored (default: wcxb_dev)")
    parser.add_argument("--eval-datasets", default=",".join(EVAL_DATASETS),
                        help="the sets the folds are drawn over (as the fold models were)")
    parser.add_argument("--train-datasets", default="dragnet,cleaneval",
                        help="extra training sets of the fold models (their test-side sites out)")
    parser.add_argument("--folds", type=int, default=5, help="site-grouped folds (default: 5)")
    parser.add_argument("--arms", default=",".join(DEFAULT_ARMS),
                        help=f"comma-separated arms (default: all: {', '.join(ARMS)})")
    parser.add_argument("--limit", type=int, default=None,
                        help="pages per dataset (a quick check; the folds change)")
    parser.add_argument("--batch-nodes", type=int, default=16_000,
                        help="DOM nodes per backbone batch (default: 16000)")
    parser.add_argument("--state", default=None,
                        help="directory keeping each arm's finished folds (rerun to resume)")
    add_run_arguments(parser)


def run(args) -> int:
    return report(args, site_cv, format_table)


def main(argv: list[str] | None = None) -> int:
    return standalone("grownup lab page-type-sites", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
