"""``grownup lab fit-confidence``: fit ``Article.confidence`` on pages of unseen sites, measure
its calibration, and add it to a model.

The confidence (``decisions.confidence``) must predict how good the text is on a site the model
never saw, so it learns from the articles the site-cv fold models make of their own test pages
(``grownup lab evaluate --protocol site-cv`` leaves them in ``OUT/site-cv/foldK/model``), each
page's blocks rescored by a rescorer fitted on the other folds' pages (``fit-rescorer``'s
nested measurement): the content model, the rescorer and the decisions are those of a page whose
site none of them saw. The target is each article text's bag-of-words F1 against the page's
human gold (the WCXB benchmark's per-page metric).

Measured nested once more: each fold's confidences come from a model fitted on the other folds'
pages only (the same site-grouped folds), so no figure comes from a page whose site the
confidence model saw. Reported: the confidence deciles against the measured mean F1 per decile,
the Spearman correlation, the mean F1 of the most and least confident fifths, the Brier score,
and what a minimum confidence would drop. ``--out``: the model fitted on every fold's pages,
saved as ``confidence.npz`` in a copy of ``--model``. scikit-learn fits it (the ``eval`` extra);
serving needs numpy only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import sys
from pathlib import Path

import numpy as np

from scrapy_grownup.decisions.confidence import (
    CONFIDENCE_FEATURE_NAMES,
    CONFIDENCE_FILE,
    ConfidenceModel,
    confidence_features,
)
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.evaluation.metrics import bag_of_words_scores
from scrapy_grownup.training.command import add_run_arguments, fold_list, report, standalone
from scrapy_grownup.training.crosssite import EVAL_DATASETS, load_records, record_key, site_cv_plan

logger = logging.getLogger(__name__)
C = 1.0  # the logistic model's inverse L2 strength, on standardised features
INNER_FOLDS = 5  # site-grouped folds whose out-of-fold scores the calibration is fitted on
CALIBRATIONS = ("platt", "isotonic", "sigmoid")
SCORE_RANGE, GRID_KNOTS = 12.0, 481  # a smooth map's knots: every 0.05 of the score
MIN_CONFIDENCES = (0.3, 0.5, 0.7)  # the cut-offs the report shows the drops of


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cv-dir", required=True,
                   help="the site-cv fold models: DIR/fold0/model ... (grownup lab evaluate "
                        "--protocol site-cv --out OUT leaves them in OUT/site-cv)")
    p.add_argument("--folds", type=int, default=5, help="site-cv folds (default: 5)")
    p.add_argument("--only-folds", default=None, metavar="0,1",
                   help="use only these folds (at least two; each fold's rescorer and "
                        "confidence are fitted on the others' pages)")
    p.add_argument("--eval-datasets", default=",".join(EVAL_DATASETS),
                   help="the human-gold sets the folds test on (default: the site-cv "
                        "protocol's)")
    p.add_argument("--train-datasets", default="dragnet,cleaneval",
                   help="the extra training sets of the folds' plan (default: dragnet,cleaneval)")
    p.add_argument("--calibration", choices=CALIBRATIONS, default="platt",
                   help="the map from the logistic score to F1, fitted on the scores of pages "
                        "of sites the model did not see: platt (a logistic curve, the "
                        "default), isotonic (a step function) or sigmoid (none: the model's "
                        "own probability)")
    p.add_argument("--limit", type=int, default=None,
                   help="at most this many pages per dataset (a quick run; the folds then "
                        "differ from the fold models')")
    p.add_argument("--rescorer-trees", type=int, default=None,
                   help="boosting iterations of each fold's nested rescorer (default: "
                        "fit-rescorer's)")
    p.add_argument("--cache", default="runs/confidence",
                   help="where the folds' scores and nested rescorers are kept for a re-run "
                        "(default: runs/confidence)")
    p.add_argument("--device", default="cpu",
                   help="where the fold models score their pages (default: cpu)")
    p.add_argument("--model", default=None,
                   help="the model to add the confidence to (with --out; e.g. fast)")
    p.add_argument("--out", default=None, help="write the model with its confidence here")
    p.add_argument("--pages", default=None,
                   help="also write every page's features, F1 and out-of-fold confidence "
                        "here (one JSON line per page)")
    add_run_arguments(p)


def rescorer_args(trees: int | None, seed: int) -> argparse.Namespace:
    """``grownup lab fit-rescorer``'s defaults (the shipped rescorers' settings)."""
    from scrapy_grownup.training import rescorer as R

    parser = argparse.ArgumentParser()
    R.add_arguments(parser)
    args = parser.parse_args(["--cv-dir", "unused", "--seed", str(seed)])
    if trees is not None:
        args.trees = trees
    return args


def nested_rescorer(name: str, others: list, args, cache: Path):
    """The rescorer fitted on ``others`` (the other folds' ``ScoredPage``s), cached in
    ``cache`` by the pages it learns from and its settings."""
    from scrapy_grownup.decisions.rescorer import BlockRescorer
    from scrapy_grownup.training import rescorer as R

    settings = {k: getattr(args, k) for k in (
        "threshold", "cut", "band", "cut_weight", "container", "floor", "block_weight", "trees",
        "depth", "leaves", "learning_rate", "min_leaf", "max_features", "without", "seed")}
    digest = hashlib.sha1(json.dumps([sorted(record_key(p.record) for p in others),
                                      settings], sort_keys=True, default=str).encode())
    path = cache / f"rescorer-{name}-{digest.hexdigest()[:12]}.npz"
    if path.is_file():
        return BlockRescorer.load(path)
    rescorer = R.fit(others, args)
    cache.mkdir(parents=True, exist_ok=True)
    rescorer.save(path)
    return rescorer


def page_rows(pages: list, rescorer) -> list[dict]:
    """Per page that parses and has gold: the extractor's article (``rescored_article`` with
    the extractor's default decisions), its confidence features and its text's F1."""
    from scrapy_grownup.output.assembly import assemble_text, rescored_article

    rows = []
    for p in pages:
        if p.page is None or p.probs is None or not (p.record.gold or "").strip():
            continue
        choice = rescored_article(p.page, p.probs, rescorer, rescorer.cut,
                                  refine=False, adaptive=True)
        text = assemble_text(p.page, choice.keep)
        rows.append({"key": record_key(p.record), "dataset": p.record.dataset,
                     "page_type": p.record.extra.get("page_type") or "article",
                     "source": choice.source,
                     "x": confidence_features(p.page, choice.keep, choice.scores, p.probs,
                                              choice.threshold, choice.source),
                     "f1": bag_of_words_scores(text, p.record.gold)[2]})
    return rows


def soft_logistic(Z: np.ndarray, y: np.ndarray, c: float = C, seed: int = 0):
    """A logistic regression of the fraction ``y`` on ``Z`` (a Bernoulli likelihood on the
    fraction: each row once as a positive with weight ``y`` and once as a negative with weight
    ``1 - y``), L2 strength ``1 / c``."""
    from sklearn.linear_model import LogisticRegression

    rows = np.concatenate([Z, Z])
    labels = np.r_[np.ones(len(y)), np.zeros(len(y))]
    weights = np.r_[y, 1.0 - y]
    return LogisticRegression(C=c, max_iter=2000, random_state=seed).fit(
        rows, labels, sample_weight=weights)


def fit_model(X: np.ndarray, y: np.ndarray, groups: list[str], seed: int = 0,
              calibration: str = "platt") -> ConfidenceModel:
    """A logistic model of the F1 ``y`` on the standardised features (``soft_logistic``), and
    a monotone map from its score to F1 fitted on the scores it gives pages of sites it did not
    see (``INNER_FOLDS`` folds over ``groups``): ``platt``, a logistic curve of the score (two
    parameters: a smooth map that can only stretch or shift the model's own); ``isotonic``, a
    step function; ``sigmoid``, the model's own probability. Each is stored as knots that
    serving interpolates between."""
    from scipy.special import expit
    from sklearn.isotonic import IsotonicRegression
    from sklearn.model_selection import GroupKFold

    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, not {calibration!r}")
    # an article that kept no text scores 0 by rule (``ConfidenceModel.predict``)
    some = X[:, CONFIDENCE_FEATURE_NAMES.index("log_kept_chars")] > 0
    X, y, groups = X[some], y[some], [g for g, s in zip(groups, some) if s]
    center = X.mean(axis=0)
    scale = X.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    Z = (X - center) / scale
    model = soft_logistic(Z, y, seed=seed)
    grid = np.linspace(-SCORE_RANGE, SCORE_RANGE, GRID_KNOTS)
    if calibration == "sigmoid":
        knots_x, knots_y = grid, expit(grid)
    else:
        scores = np.zeros(len(y))
        distinct = len(set(groups))
        if distinct >= 2:
            for train, test in GroupKFold(min(INNER_FOLDS, distinct)).split(Z, y, groups):
                scores[test] = soft_logistic(Z[train], y[train], seed=seed).decision_function(
                    Z[test])
        else:
            scores = model.decision_function(Z)
        if calibration == "isotonic":
            iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(scores, y)
            knots_x, knots_y = iso.X_thresholds_, iso.y_thresholds_
        else:
            platt = soft_logistic(scores[:, None], y, c=1e6, seed=seed)
            knots_x = grid
            knots_y = expit(platt.coef_[0, 0] * grid + platt.intercept_[0])
    return ConfidenceModel(center, scale, model.coef_[0], float(model.intercept_[0]),
                           knots_x, knots_y)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(spearmanr(a, b)[0])


def calibration(pred: np.ndarray, f1: np.ndarray, bins: int = 10) -> dict:
    """Deciles of ``pred`` (equal page counts, lowest first) with their mean prediction and
    mean measured F1; ranking figures; what each ``MIN_CONFIDENCES`` cut-off drops."""
    order = np.argsort(pred, kind="stable")
    deciles = []
    for k, idx in enumerate(np.array_split(order, bins)):
        if len(idx):
            deciles.append({"decile": k + 1, "pages": len(idx),
                            "min": float(pred[idx].min()), "max": float(pred[idx].max()),
                            "predicted": float(pred[idx].mean()),
                            "measured": float(f1[idx].mean())})
    n = len(pred)
    fifth = max(1, n // 5)
    ece = sum(d["pages"] * abs(d["predicted"] - d["measured"]) for d in deciles) / max(n, 1)
    drops = []
    for cut in MIN_CONFIDENCES:
        low = pred < cut
        drops.append({"min_confidence": cut, "dropped": int(low.sum()),
                      "dropped_share": float(low.mean()) if n else 0.0,
                      "dropped_mean_f1": float(f1[low].mean()) if low.any() else None,
                      "kept_mean_f1": float(f1[~low].mean()) if (~low).any() else None,
                      "bad_pages_caught": float(((f1 < 0.5) & low).sum() / max((f1 < 0.5).sum(),
                                                                             1))})
    return {"pages": n, "mean_f1": float(f1.mean()) if n else 0.0,
            "mean_confidence": float(pred.mean()) if n else 0.0,
            "spearman": spearman(pred, f1),
            "top_fifth_f1": float(f1[order[-fifth:]].mean()) if n else 0.0,
            "bottom_fifth_f1": float(f1[order[:fifth]].mean()) if n else 0.0,
            "brier": float(np.mean((pred - f1) ** 2)) if n else 0.0,
            "brier_constant": float(np.mean((f1.mean() - f1) ** 2)) if n else 0.0,
            "ece_deciles": float(ece), "deciles": deciles, "min_confidence": drops}


def run_confidence(args) -> dict:
    from scrapy_grownup.training.rescorer import fold_pages

    only = fold_list(args.only_folds, args.folds)
    if only is not None and len(only) < 2:
        raise GrownupError(f"--only-folds {args.only_folds}: at least two folds, each fitted "
                           "on the others")
    cv_dir = Path(args.cv_dir)
    if not cv_dir.is_dir():
        raise GrownupError(f"--cv-dir {cv_dir}: no such directory")
    if args.out and not args.model:
        raise GrownupError("--out needs --model")
    cache = Path(args.cache)
    eval_names = [n for n in args.eval_datasets.split(",") if n]
    extra = [n for n in args.train_datasets.split(",") if n and n not in eval_names]
    eval_records = load_records(eval_names, limit=args.limit)
    extra_records = load_records(extra, limit=args.limit) if extra else []
    plans = site_cv_plan(eval_records, extra_records, args.folds, only)
    r_args = rescorer_args(args.rescorer_trees, args.seed)
    r_args.device = args.device
    folds = fold_pages(cv_dir, plans, cache, r_args)
    rows_by_fold: dict[str, list[dict]] = {}
    for plan in plans:
        others = [p for name, pages in folds.items() if name != plan.name for p in pages]
        rescorer = nested_rescorer(plan.name, others, r_args, cache)
        rows_by_fold[plan.name] = page_rows(folds[plan.name], rescorer)
        logger.info("%s: %d pages, mean F1 %.4f", plan.name, len(rows_by_fold[plan.name]),
                    np.mean([r["f1"] for r in rows_by_fold[plan.name]] or [0.0]))
    from scrapy_grownup.data.splits import site_groups

    everything = [r for rows in rows_by_fold.values() for r in rows]
    group_of = dict(zip((record_key(r) for r in eval_records), site_groups(eval_records)))
    for name, rows in rows_by_fold.items():
        train = [r for other, rs in rows_by_fold.items() if other != name for r in rs]
        if not rows or not train:
            continue
        model = fit_model(np.stack([r["x"] for r in train]), np.array([r["f1"] for r in train]),
                          [group_of[r["key"]] for r in train], args.seed, args.calibration)
        for r, c in zip(rows, model.predict(np.stack([r["x"] for r in rows]))):
            r["confidence"] = float(c)
    scored = [r for r in everything if "confidence" in r]
    pred = np.array([r["confidence"] for r in scored])
    f1 = np.array([r["f1"] for r in scored])
    result: dict = {"out_of_fold": calibration(pred, f1), "by_dataset": {}, "by_source": {}}
    for key, table in (("dataset", "by_dataset"), ("source", "by_source")):
        for value in sorted({r[key] for r in scored}):
            idx = np.array([r[key] == value for r in scored])
            c = calibration(pred[idx], f1[idx])
            result[table][value] = {k: c[k] for k in ("pages", "mean_f1", "mean_confidence",
                                                      "spearman", "brier")}
    if args.pages:
        with open(args.pages, "w", encoding="utf-8") as out:
            for r in everything:
                out.write(json.dumps({**{k: v for k, v in r.items() if k != "x"},
                                      "features": dict(zip(CONFIDENCE_FEATURE_NAMES,
                                                           r["x"].tolist()))}) + "\n")
    if args.out:
        from scrapy_grownup.extractor import resolve_model_dir

        source, out = resolve_model_dir(args.model), Path(args.out)
        if out.resolve() != source.resolve():
            shutil.copytree(source, out, dirs_exist_ok=True)
        model = fit_model(np.stack([r["x"] for r in everything]),
                          np.array([r["f1"] for r in everything]),
                          [group_of[r["key"]] for r in everything], args.seed,
                          args.calibration)
        model.info = json.dumps({"pages": len(everything), "datasets": eval_names,
                                 "calibration": args.calibration,
                                 "folds": args.folds, "cv_dir": str(cv_dir),
                                 "oof_spearman": round(result["out_of_fold"]["spearman"], 4),
                                 "oof_brier": round(result["out_of_fold"]["brier"], 5)})
        model.save(out / CONFIDENCE_FILE)
        result["saved"] = {"path": str(out / CONFIDENCE_FILE), "pages": len(everything),
                           "coefficients": dict(zip(CONFIDENCE_FEATURE_NAMES,
                                                    np.round(model.coef, 4).tolist())),
                           "knots": len(model.knots_x)}
    result["settings"] = {k: getattr(args, k) for k in (
        "folds", "only_folds", "eval_datasets", "train_datasets", "limit", "rescorer_trees",
        "calibration", "seed")}
    return result


def tables(result: dict) -> str:
    oof = result["out_of_fold"]
    lines = [f"out of fold: {oof['pages']} pages, mean F1 {oof['mean_f1']:.3f}, mean "
             f"confidence {oof['mean_confidence']:.3f}",
             "decile  pages  confidence range  mean confidence  mean F1"]
    for d in oof["deciles"]:
        lines.append(f"{d['decile']:>6}  {d['pages']:>5}  {d['min']:.3f} - {d['max']:.3f}"
                     f"     {d['predicted']:>13.3f}  {d['measured']:>7.3f}")
    lines.append(f"Spearman {oof['spearman']:.3f}; mean F1 of the most confident fifth "
                 f"{oof['top_fifth_f1']:.3f}, least confident fifth {oof['bottom_fifth_f1']:.3f}; "
                 f"Brier {oof['brier']:.4f} (constant: {oof['brier_constant']:.4f}); "
                 f"ECE {oof['ece_deciles']:.4f}")
    for d in oof["min_confidence"]:
        lines.append(f"min confidence {d['min_confidence']}: drops {d['dropped']} pages "
                     f"({100 * d['dropped_share']:.1f}%), their mean F1 "
                     f"{d['dropped_mean_f1'] if d['dropped_mean_f1'] is None else round(d['dropped_mean_f1'], 3)}"
                     f", {100 * d['bad_pages_caught']:.0f}% of the pages under F1 0.5")
    for table in ("by_dataset", "by_source"):
        for value, c in result[table].items():
            lines.append(f"{table[3:]} {value}: {c['pages']} pages, mean F1 {c['mean_f1']:.3f}, "
                         f"mean confidence {c['mean_confidence']:.3f}, Spearman "
                         f"{c['spearman']:.3f}")
    return "\n".join(lines)


def run(args) -> int:
    return report(args, run_confidence, tables)


def main(argv: list[str] | None = None) -> int:
    return standalone("grownup lab fit-confidence", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
