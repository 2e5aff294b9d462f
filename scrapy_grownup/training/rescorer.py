"""``grownup lab fit-rescorer``: fit the block rescorer on out-of-fold scores, measure it across
sites, and add it to a model.

The rescorer (``block_rescorer``) must learn how the content model errs on sites it has never
seen, so it trains on scores the model gave pages of unseen sites: each site-cv fold model's
scores of its own test pages (``grownup lab evaluate --protocol site-cv`` leaves the fold models in
``OUT/site-cv/foldK/model``). Measured nested, so no figure comes from a page whose site the
rescorer or the model trained on:

- site-cv: for each fold, a rescorer fitted on the other folds' pages rescores the fold's pages;
- ``--hold``: the held-out model's pages (``OUT/leave-out/without-.../model``), rescored by a
  rescorer fitted on the folds' pages that the leave-out plan lets train.

Each next to the model without the rescorer, trafilatura and readability on the same pages in
the same run. ``--out``: the rescorer fitted on every fold's pages, saved in a copy of
``--model`` (``block_rescorer.npz``). scikit-learn fits it (the ``eval`` extra); serving
evaluates the trees in numpy.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from scrapy_grownup.data.labels import align_labels

from scrapy_grownup.output.assembly import assemble_text
from scrapy_grownup.cli.argtypes import share
from scrapy_grownup.output.assembly import article_mask, rescored_article_mask
from scrapy_grownup.decisions.rescorer import (BLOCK_FEATURE_NAMES, FLOOR, RESCORER_FILE, BlockRescorer,
                              block_features)
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.decisions.refine import CUT_WEIGHTS, RECALL_THRESHOLD, block_of
from scrapy_grownup.training.command import add_run_arguments, fold_list, report, standalone
from scrapy_grownup.training.crosssite import (EVAL_DATASETS, LEAVE_OUT, baseline_scores, format_summary,
                        leave_out_plan, load_records, record_key, score_page, site_cv_plan,
                        summary, write_scores)

logger = logging.getLogger(__name__)
BASE, RESCORED = "grownup", "grownup+rescorer"
# --without: the block features each ablation holds constant, by name prefix
FEATURE_GROUPS = {
    "context": ("ancestor_", "previous_", "next_"),
    "page": ("page_cut", "page_share_above", "page_mean_score", "page_log_blocks",
             "page_max_score", "score_minus_cut", "in_container", "container_depth"),
    "layout": ("layout_",),
    "tags": ("tag_",),
    "signals": ("page_signal_",),
    "cues": ("cue_", "inside_cue_", "has_class_or_id"),
}


def ablated_columns(groups) -> np.ndarray:
    """Indices of ``BLOCK_FEATURE_NAMES`` that belong to the feature ``groups``."""
    prefixes = tuple(prefix for group in groups for prefix in FEATURE_GROUPS[group])
    return np.array([k for k, name in enumerate(BLOCK_FEATURE_NAMES)
                     if prefixes and name.startswith(prefixes)], dtype=np.int64)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cv-dir", required=True,
                   help="the site-cv fold models: DIR/fold0/model ... (grownup lab evaluate "
                        "--protocol site-cv --out OUT leaves them in OUT/site-cv)")
    p.add_argument("--also-cv-dir", action="append", default=[], metavar="DIR",
                   help="site-cv fold models of another training of the same recipe (another "
                        "seed; repeatable): the trees also learn from their out-of-fold "
                        "scores of the same pages, more ways the content model errs on unseen "
                        "sites; what is measured and saved stays --cv-dir's model's")
    p.add_argument("--leave-out-dir", default=None,
                   help="the leave-out models, DIR/without-.../model (default: the folds' "
                        "parent's leave-out/)")
    p.add_argument("--hold", action="append", default=None, choices=sorted(LEAVE_OUT),
                   help="also measure on a held-out dataset (repeatable)")
    p.add_argument("--folds", type=int, default=5, help="site-cv folds (default: 5)")
    p.add_argument("--only-folds", default=None, metavar="0,1",
                   help="use only these site-cv folds (those grownup lab evaluate --only-folds "
                        "trained): each is rescored by trees fitted on the others' pages")
    p.add_argument("--train-datasets", default="dragnet,cleaneval",
                   help="the extra training sets of the folds' plan (default: dragnet,cleaneval)")
    p.add_argument("--threshold", type=float, default=0.4,
                   help="the content model's threshold (default: 0.4, fast's)")
    p.add_argument("--cut", type=float, default=0.5,
                   help="rescored probability a block needs (default: 0.5)")
    p.add_argument("--band", type=float, default=0.3,
                   help="how far a page's own cut-off may move from --cut (default: 0.3; "
                        "the content model alone uses 0.2)")
    p.add_argument("--cut-weight", choices=CUT_WEIGHTS, default="block-chars",
                   help="how a page's cut-off weighs its blocks: each block once by its "
                        "characters (default), or each text-owning node by the log of its "
                        "characters (the content model's own decisions)")
    p.add_argument("--container", action=argparse.BooleanOptionalAction, default=False,
                   help="drop rescored blocks outside the page's main container unless sure "
                        "(default: no: the rescorer already reads where each block sits)")
    p.add_argument("--floor", type=float, default=FLOOR,
                   help="blocks the content model scores under this keep their score and are "
                        f"not fitted on (default: {FLOOR})")
    p.add_argument("--block-weight", choices=BLOCK_WEIGHTS, default="log-chars",
                   help="how the fit weighs each block (default: log-chars)")
    p.add_argument("--trees", type=int, default=200, help="boosting iterations (default: 200)")
    p.add_argument("--depth", type=int, default=8, help="tree depth (default: 8)")
    p.add_argument("--leaves", type=int, default=31, help="leaves per tree (default: 31)")
    p.add_argument("--learning-rate", type=float, default=0.05,
                   help="boosting learning rate (default: 0.05)")
    p.add_argument("--min-leaf", type=int, default=40,
                   help="fewest blocks in a leaf (default: 40)")
    p.add_argument("--max-features", type=share, default=1.0, metavar="SHARE",
                   help="share of the block features each split may choose from, drawn anew "
                        "per split (default: 1.0, all; below 1 needs scikit-learn 1.4)")
    p.add_argument("--without", action="append", default=[], choices=sorted(FEATURE_GROUPS),
                   help="fit without a group of block features, for an ablation (repeatable; "
                        "the columns are held constant, so the saved file stays loadable)")
    p.add_argument("--zero-positions", action="store_true",
                   help="score every page with its Laplacian positions set to zero, for an "
                        "ablation: what dropping them costs across sites (cached apart)")
    p.add_argument("--cache", default="runs/rescorer",
                   help="where the folds' scores and the baselines' texts are kept for a "
                        "re-run (default: runs/rescorer)")
    p.add_argument("--model", default=None,
                   help="the model to add the rescorer to (with --out; e.g. the site-cv "
                        "'all' model, or fast)")
    p.add_argument("--out", default=None, help="write the model with its rescorer here")
    p.add_argument("--no-baselines", action="store_true",
                   help="leave trafilatura and readability out")
    p.add_argument("--skip-cv", action="store_true",
                   help="measure only the --hold plans (the rescorer is still fitted on the "
                        "folds' pages those plans let train), not site-cv")
    p.add_argument("--scores", default=None,
                   help="also write every page's scores here, one JSON line per page and "
                        "method, as grownup lab evaluate's scores.jsonl")
    p.add_argument("--device", default="cpu",
                   help="where the fold models score their pages (default: cpu)")
    add_run_arguments(p)


class ScoredPage:
    """A test page, its parse, the content model's scores and its blocks' features."""

    def __init__(self, record, page, probs, threshold: float):
        self.record, self.page, self.probs = record, page, probs
        self.roots, self.features = block_features(page, probs, threshold) \
            if page is not None else (np.zeros(0, np.int64), None)
        self._labels = None

    @property
    def labels(self) -> np.ndarray:
        """Share of each block's characters the gold text covers."""
        if self._labels is None:
            page = self.page
            node = align_labels(page, self.record.gold or "").labels == 1
            lengths = page.text_lengths().astype(np.float64)
            owners = lengths > 0
            block = block_of(page)[owners]
            n = page.num_nodes
            content = np.bincount(block, weights=(lengths * node)[owners], minlength=n)
            total = np.bincount(block, weights=lengths[owners], minlength=n)
            self._labels = content[self.roots] / np.maximum(total[self.roots], 1.0)
        return self._labels


def scored_pages(plan, model_dir: Path, cache: Path, threshold: float, device: str,
                 limits=None, zero_positions: bool = False) -> list[ScoredPage]:
    """The pages of ``plan.test`` scored by the model in ``model_dir`` (the scores are cached
    in ``cache``, keyed by the model's weights). ``zero_positions``: every node's Laplacian
    positions set to zero before the model reads them (what dropping them costs; cached
    apart)."""
    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.extractor import ArticleExtractor

    extractor = ArticleExtractor.from_pretrained(model_dir, device=device)
    if extractor.featurizer.encoder.name != "static":
        # the vectors the fold models trained on are on disk (corpus_encoder): a MiniLM fold
        # is scored in seconds rather than embedded again for half an hour on a core
        extractor.featurizer.encoder.use_disk_cache()
    arm = "-zero-positions" if zero_positions else ""
    path = cache / f"{plan.name}-{extractor.version or 'unversioned'}{arm}.npz"
    cached = load_score_cache(path)
    pages = []
    for record in plan.test:
        try:
            pages.append(parse_page(record.html, url=record.url,
                                    content_type=record.extra.get("content_type"),
                                    limits=extractor.featurizer.limits))
        except GrownupError:
            pages.append(None)
    if zero_positions:
        from scrapy_grownup.page.dom import NUM_EIGENVECTORS

        for page in pages:
            if page is not None:
                page.positions = np.zeros((page.num_nodes, NUM_EIGENVECTORS), np.float32)
    missing = [i for i, (r, p) in enumerate(zip(plan.test, pages))
               if p is not None and record_key(r) not in cached]
    if missing:
        t0 = time.time()
        for i, probs in zip(missing, extractor.score([pages[i] for i in missing])):
            cached[record_key(plan.test[i])] = probs.astype(np.float32)
        save_score_cache(path, cached)
        logger.info("%s: scored %d pages in %.0f s", plan.name, len(missing), time.time() - t0)
    return [ScoredPage(r, p, cached.get(record_key(r)), threshold) if p is not None
            else ScoredPage(r, None, None, threshold) for r, p in zip(plan.test, pages)]


def load_score_cache(path: Path) -> dict[str, np.ndarray]:
    """``DATASET/ID`` -> float32 node scores, from ``save_score_cache``'s ``.npz`` (read with
    ``allow_pickle=False``: a cache file can hold arrays only, never code); empty when there
    is none or it cannot be read (the pages are scored again)."""
    if not path.is_file():
        return {}
    try:
        with np.load(path, allow_pickle=False) as data:
            keys, offsets, scores = data["keys"], data["offsets"], data["scores"]
            return {str(key): scores[offsets[i]:offsets[i + 1]].astype(np.float32)
                    for i, key in enumerate(keys.tolist())}
    except (OSError, ValueError, KeyError) as exc:
        logger.warning("ignoring the unreadable score cache %s: %s", path, exc)
        return {}


def save_score_cache(path: Path, cached: dict[str, np.ndarray]) -> None:
    """Write ``cached`` as one ``.npz``: the keys, every page's scores end to end and where
    each page's start (written to a temporary file first, then renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = list(cached)
    sizes = [len(cached[k]) for k in keys]
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
    scores = np.concatenate([np.asarray(cached[k], dtype=np.float32).ravel() for k in keys]) \
        if keys else np.zeros(0, dtype=np.float32)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        np.savez(out, keys=np.array(keys, dtype=str), offsets=offsets, scores=scores)
    os.replace(tmp, path)


BLOCK_WEIGHTS = ("log-chars", "page-log-chars", "page-chars")


def block_weights(pages: list[ScoredPage], how: str) -> np.ndarray:
    """Each block's weight in the fit: ``log-chars``, the log of its text length (as the page
    cut-off weighed blocks before); ``page-log-chars``, the same, each page's blocks (those
    under the floor counted too) summing to the same total (the benchmark averages per-page F1,
    so a page of 400 short blocks should not outweigh an article of 20); ``page-chars``, its
    share of its page's characters."""
    if how not in BLOCK_WEIGHTS:
        raise ValueError(f"block weight {how!r}: one of {', '.join(BLOCK_WEIGHTS)}")
    out = []
    for p in pages:
        log_chars = p.features[:, 3].astype(np.float64) * 10  # "log_chars": log1p(chars) / 10
        w = np.expm1(log_chars) if how == "page-chars" else log_chars
        # a page totals 100: per-block weights stay near log-chars' scale, far above the
        # trees' minimum hessian to split
        out.append(w / max(w.sum(), 1e-9) * 100 if how.startswith("page-") else w)
    return np.concatenate(out)


def fit(pages: list[ScoredPage], args, keys: set | None = None) -> BlockRescorer:
    """A rescorer fitted on the blocks of ``pages`` (those whose record key is in ``keys``)
    that the content model scores at least ``args.floor``, weighed by ``block_weights``."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    use = [p for p in pages if p.page is not None and len(p.roots)
           and (keys is None or record_key(p.record) in keys)]
    X = np.concatenate([p.features for p in use])
    y = np.concatenate([p.labels for p in use]) > 0.5
    weight = block_weights(use, args.block_weight)
    judged = X[:, 0] >= args.floor  # the column "score": lower blocks keep theirs when serving
    X, y, weight = X[judged], y[judged], weight[judged]
    X[:, ablated_columns(args.without)] = 0.0  # a constant column: no tree splits on it
    # passed only below 1: scikit-learn before 1.4 has no such argument
    options = {"max_features": args.max_features} if args.max_features < 1.0 else {}
    try:
        # a fixed number of trees: scikit-learn's early stopping would hold out random blocks,
        # a split by block rather than by site
        model = HistGradientBoostingClassifier(
            max_iter=args.trees, learning_rate=args.learning_rate, max_leaf_nodes=args.leaves,
            max_depth=args.depth, min_samples_leaf=args.min_leaf, l2_regularization=1.0,
            early_stopping=False, random_state=args.seed, **options)
    except TypeError as exc:
        raise GrownupError(f"--max-features {args.max_features}: needs scikit-learn 1.4 or "
                           "newer") from exc
    model.fit(X, y, sample_weight=weight)
    return BlockRescorer.from_sklearn(model, cut=args.cut, feature_threshold=args.threshold,
                                      floor=args.floor, container=args.container, band=args.band,
                                      cut_weight=args.cut_weight)


def page_texts(pages: list[ScoredPage], rescorer: BlockRescorer | None, threshold: float,
               **options) -> list[str]:
    """The text ``fast``'s decisions keep of each page (``options``: ``content_mask``'s),
    from the model's scores, or from the rescored ones (with the rescorer's decisions)."""
    out = []
    for p in pages:
        if p.page is None:
            out.append("")
            continue
        keep = article_mask(p.page, p.probs, threshold, **options) if rescorer is None else \
            rescored_article_mask(p.page, p.probs, rescorer, threshold, **options)
        out.append(assemble_text(p.page, keep))
    return out


def measure(pages: list[ScoredPage], rescorer: BlockRescorer, args) -> list:
    """Per-page scores of the model without and with the rescorer (and with the rescorer,
    ``grownup extract``'s --precision and --recall presets), and of the baselines."""
    records = [p.record for p in pages]
    arms = {BASE: (None, args.threshold, {}),
            RESCORED: (rescorer, rescorer.cut, {}),
            RESCORED + " --precision": (rescorer, rescorer.cut, {"refine": True}),
            RESCORED + " --recall": (rescorer, RECALL_THRESHOLD, {"adaptive": False})}
    scores = []
    for name, (arm_rescorer, threshold, options) in arms.items():
        texts = page_texts(pages, arm_rescorer, threshold, **options)
        scores += [score_page(r, name, t) for r, t in zip(records, texts)]
    if not args.no_baselines:
        scores += baseline_scores(records, perfect=False, cache=Path(args.cache))
    return scores


def fold_pages(cv_dir: Path, plans, cache: Path, args) -> dict:
    """Per site-cv plan, its test pages scored by the fold model in ``cv_dir``."""
    folds = {}
    for plan in plans:
        model_dir = cv_dir / plan.name / "model"
        if not (model_dir / "config.json").is_file():
            raise GrownupError(f"no fold model in {model_dir}")
        folds[plan.name] = scored_pages(plan, model_dir, cache, args.threshold, args.device,
                                        zero_positions=args.zero_positions)
    return folds


def run_rescorer(args) -> dict:
    if args.skip_cv and not args.hold:
        raise GrownupError("--skip-cv needs --hold")
    only = fold_list(args.only_folds, args.folds)
    if only is not None and len(only) < 2 and not args.skip_cv:
        raise GrownupError(f"--only-folds {args.only_folds}: at least two folds, each "
                           "rescored by trees fitted on the others")
    cv_dir = Path(args.cv_dir)
    for option, path in [("--cv-dir", cv_dir)] + [("--also-cv-dir", Path(d))
                                                  for d in args.also_cv_dir]:
        if not path.is_dir():  # before any page is loaded
            raise GrownupError(f"{option} {path}: no such directory")
    scores_path = Path(args.scores) if args.scores else None
    if scores_path is not None:
        scores_path.parent.mkdir(parents=True, exist_ok=True)
        scores_path.write_text("")
    cache = Path(args.cache)
    extra = [n for n in args.train_datasets.split(",") if n]
    eval_records = load_records(list(EVAL_DATASETS))
    extra_records = load_records(extra) if extra else []
    plans = site_cv_plan(eval_records, extra_records, args.folds, only)
    folds = fold_pages(cv_dir, plans, cache, args)
    # per plan, the pages of every training the trees learn from (--cv-dir's first)
    learn = {plan.name: [folds[plan.name]] for plan in plans}
    for other in args.also_cv_dir:
        for name, pages in fold_pages(Path(other), plans, cache, args).items():
            learn[name].append(pages)
    result: dict = {"protocols": {}}
    if not args.skip_cv:
        cv_scores = []
        for plan in plans:
            others = [p for name, runs in learn.items() if name != plan.name
                      for pages in runs for p in pages]
            plan_scores = measure(folds[plan.name], fit(others, args), args)
            if scores_path is not None:
                write_scores(scores_path, plan.name, plan_scores)
            cv_scores += plan_scores
        result["protocols"]["site-cv"] = summary(cv_scores)
    leave_out_dir = Path(args.leave_out_dir) if args.leave_out_dir else \
        cv_dir.parent / "leave-out"
    everything = [p for runs in learn.values() for pages in runs for p in pages]
    for held in args.hold or []:
        plan = leave_out_plan(eval_records, extra_records, LEAVE_OUT[held])
        model_dir = leave_out_dir / plan.name / "model"
        if not (model_dir / "config.json").is_file():
            raise GrownupError(f"no leave-out model in {model_dir}")
        pages = scored_pages(plan, model_dir, cache, args.threshold, args.device,
                             zero_positions=args.zero_positions)
        plan_scores = measure(pages, fit(everything, args, keys=plan.train_keys), args)
        if scores_path is not None:
            write_scores(scores_path, plan.name, plan_scores)
        result["protocols"][plan.name] = summary(plan_scores)
    if args.out:
        if not args.model:
            raise GrownupError("--out needs --model")
        from scrapy_grownup.extractor import resolve_model_dir

        source, out = resolve_model_dir(args.model), Path(args.out)
        if out.resolve() != source.resolve():
            shutil.copytree(source, out, dirs_exist_ok=True)
        rescorer = fit(everything, args)
        rescorer.save(out / RESCORER_FILE)
        result["saved"] = {"path": str(out / RESCORER_FILE), "trees": rescorer.num_trees,
                           "cut": rescorer.cut, "threshold": rescorer.feature_threshold}
    result["settings"] = {k: getattr(args, k) for k in (
        "folds", "only_folds", "threshold", "cut", "band", "cut_weight", "container", "floor",
        "block_weight", "trees", "depth", "leaves", "learning_rate", "min_leaf", "max_features",
        "without", "also_cv_dir")}
    return result


def tables(result: dict) -> str:
    parts = []
    for name, rows in result["protocols"].items():
        parts.append(f"== {name}\n{format_summary(rows)}")
    return "\n\n".join(parts)


def run(args) -> int:
    return report(args, run_rescorer, tables)


def main(argv: list[str] | None = None) -> int:
    return standalone("grownup lab fit-rescorer", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
