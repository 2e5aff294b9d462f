"""Accuracy on sites a model has never seen: the protocols behind every figure we publish.

- ``site-cv``: site-grouped k-fold cross-validation over the modern sets. For each fold a model
  is trained from scratch on every page whose site group is outside the fold (the modern sets'
  other folds plus the extra training sets, minus any page of a site in the fold) and scored on
  the fold.
- ``leave-out``: the same with one held-out group of datasets as the test side (train without
  ``fundus`` + ``fundus_history``, test on them; or without ``magic_html_*``).
- ``model``: an already trained model on whole datasets (valid only where the model never saw
  those sites, e.g. a shipped model on a set that was not in its training data).

Every protocol scores trafilatura and readability on the same pages in the same run, with three
metrics: the paper's LCS F1, the article-extraction-benchmark's 4-shingle F1, and the WCXB
benchmark's bag-of-words F1 (mean of per-page F1 over lower-cased ``\\w+`` tokens), overall, per
dataset, per page type and per language.
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from scrapy_grownup.data import datasets
from scrapy_grownup.data.labels import align_labels, perfect_filter_text
from scrapy_grownup.output.assembly import assemble_text
from scrapy_grownup.output.assembly import article_mask, rescored_article_mask
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.evaluation.metrics import bag_of_words_scores, harmonic_mean, lcs_scores, shingle_scores
from scrapy_grownup.data.splits import site_folds, site_groups
from scrapy_grownup.crawl.workers import parent_bound_pool
from scrapy_grownup.training.command import fold_list
from scrapy_grownup.training.corpus import cache_root, corpus_encoder, store_from_records, store_key
from scrapy_grownup.training.loop import (NODE_WEIGHTS, PRECISIONS, AuxLabels, TrainConfig, fit_epochs, page_type_weights,
                   warn_if_emulated)

logger = logging.getLogger(__name__)

# The modern human-gold sets the cross-site protocols test on.
EVAL_DATASETS = ("wcxb_dev", "fundus", "fundus_history", "magic_html_article", "magic_html_forum")
BASELINES = ("trafilatura", "readability")
LEAVE_OUT = {"fundus": ("fundus", "fundus_history"),
             "magic_html": ("magic_html_article", "magic_html_forum")}


def held_out_datasets(hold: str, eval_datasets: Sequence[str]) -> tuple[str, ...]:
    """The datasets ``--hold`` names: a ``LEAVE_OUT`` group or comma-separated datasets, each
    among ``eval_datasets`` (a typo would otherwise train a model with nothing to test)."""
    held = LEAVE_OUT.get(hold, tuple(n for n in hold.split(",") if n))
    unknown = sorted(set(held) - set(eval_datasets))
    if unknown or not held:
        raise GrownupError(f"--hold {hold}: {', '.join(unknown) or 'no dataset'} not among the "
                           f"evaluated sets ({', '.join(eval_datasets)})")
    return held


def load_records(names: Sequence[str], split_of: dict[str, str] | None = None,
                 limit: int | None = None) -> list:
    """Records of ``names`` (each set's training split for the old sets, ``all`` for the modern
    ones). The page-type set's pages that ``wcxb_dev`` also holds are left out when both are
    asked for: ``wcxb_dev``'s reviewed gold wins."""
    split_of = {"dragnet": "train", "cleaneval": "train", **(split_of or {})}
    records = []
    for name in names:
        records.extend(datasets.load(name, split=split_of.get(name), limit=limit))
    if "pagetype" in names and "wcxb_dev" in names:
        wcxb_urls = {r.url for r in records if r.dataset == "wcxb_dev"}
        records = [r for r in records if r.dataset != "pagetype" or r.url not in wcxb_urls]
    return records


def record_key(record) -> str:
    return f"{record.dataset}/{record.id}"


def page_types_of(records) -> dict[str, str]:
    """``DATASET/ID`` -> page type: the set's own label where it has one (``wcxb_dev``,
    ``magic_html_forum``), else "article" (the news sets, Dragnet, CleanEval)."""
    return {record_key(r): r.extra.get("page_type") or "article" for r in records}


# ----------------------------------------------------------------------------------------------
# Baselines


def baseline_text(method: str, record) -> str:
    """Main text of ``record`` by a baseline extractor with its default settings."""
    try:
        if method == "trafilatura":
            import trafilatura

            return trafilatura.extract(record.html, url=record.url) or ""
        if method == "readability":
            from lxml import html as lxml_html
            from readability import Document

            logging.getLogger("readability").setLevel(logging.CRITICAL)  # logs every failure

            summary = Document(record.html).summary(html_partial=True)
            return "\n".join(" ".join(t.split()) for t in
                             lxml_html.fromstring(summary).itertext() if t.strip())
    except Exception as exc:  # a baseline failing on a page scores it as empty, like ours
        logger.debug("%s failed on %s: %s", method, record_key(record), exc)
        return ""
    raise ValueError(f"unknown baseline {method!r}")


# ----------------------------------------------------------------------------------------------
# Scoring


@dataclass
class PageScore:
    key: str
    dataset: str
    page_type: str
    language: str
    method: str
    lcs: tuple[float, float]
    shingle: tuple[float, float, float]
    bow: tuple[float, float, float]


def score_page(record, method: str, text: str) -> PageScore:
    gold = record.gold or ""
    language = (record.extra.get("language") or "").split("-")[0].lower() or "?"
    return PageScore(record_key(record), record.dataset, record.extra.get("page_type") or "?",
                     language, method, lcs_scores(text, gold), shingle_scores(text, gold),
                     bag_of_words_scores(text, gold))


def write_scores(path: Path, plan_name: str, scores: Sequence[PageScore]) -> None:
    """Append ``scores`` to ``path``, one JSON line per page and method (``scores.jsonl``)."""
    with path.open("a", encoding="utf-8") as fh:
        for s in scores:
            fh.write(json.dumps({"plan": plan_name, **s.__dict__}) + "\n")


def read_scores(path: Path) -> dict[str, dict[str, list[PageScore]]]:
    """``write_scores``'s rows back, by plan and method."""
    done: dict[str, dict[str, list[PageScore]]] = defaultdict(lambda: defaultdict(list))
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        plan_name = row.pop("plan")
        done[plan_name][row["method"]].append(
            PageScore(**{k: tuple(v) if isinstance(v, list) else v for k, v in row.items()}))
    return done


def aggregate(scores: Sequence[PageScore]) -> dict:
    """LCS F1 (harmonic mean of mean P and R), shingle F1 (same aggregation) and the WCXB
    bag-of-words F1 (mean of per-page F1), with its mean P and R."""
    n = len(scores)
    if not n:
        return {"pages": 0}
    lcs_p = sum(s.lcs[0] for s in scores) / n
    lcs_r = sum(s.lcs[1] for s in scores) / n
    sh_p = sum(s.shingle[0] for s in scores) / n
    sh_r = sum(s.shingle[1] for s in scores) / n
    return {"pages": n,
            "bow_f1": sum(s.bow[2] for s in scores) / n,
            "bow_precision": sum(s.bow[0] for s in scores) / n,
            "bow_recall": sum(s.bow[1] for s in scores) / n,
            "lcs_f1": harmonic_mean(lcs_p, lcs_r), "lcs_precision": lcs_p, "lcs_recall": lcs_r,
            "shingle_f1": harmonic_mean(sh_p, sh_r)}


def summary(scores: Sequence[PageScore]) -> list[dict]:
    """One row per (slice, method): ``all``, each dataset, page type and language with at
    least 10 pages."""
    rows = []
    slices: dict[tuple[str, str], list[PageScore]] = defaultdict(list)
    for s in scores:
        for kind, value in (("all", "all"), ("dataset", s.dataset), ("page_type", s.page_type),
                            ("language", s.language)):
            slices[(kind, value)].append(s)
    for (kind, value), members in sorted(slices.items()):
        by_method: dict[str, list[PageScore]] = defaultdict(list)
        for s in members:
            by_method[s.method].append(s)
        for method, group in by_method.items():
            if kind in ("page_type", "language") and len(group) < 10:
                continue
            rows.append({"slice": kind, "value": value, "method": method, **aggregate(group)})
    return rows


def format_summary(rows: Sequence[dict], methods: Sequence[str] | None = None) -> str:
    """A plain-text table: one line per slice, bag-of-words F1 (and LCS F1) per method."""
    methods = list(methods or dict.fromkeys(r["method"] for r in rows))
    table: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for r in rows:
        table[(r["slice"], r["value"])][r["method"]] = r
    width = max(12, *(len(m) for m in methods))
    head = f"{'slice':<30} {'pages':>5} " + " ".join(f"{m:>{width}}" for m in methods)
    lines = [head, "(bag-of-words F1 / LCS F1, %)", "-" * len(head)]
    for (kind, value), by_method in table.items():
        pages = max(r["pages"] for r in by_method.values())
        cells = []
        for m in methods:
            r = by_method.get(m)
            cells.append(f"{100 * r['bow_f1']:5.1f} / {100 * r['lcs_f1']:4.1f}".rjust(width)
                         if r else " " * width)
        lines.append(f"{kind + ':' + value:<30} {pages:>5} " + " ".join(cells))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Our model's variants on test pages


@dataclass
class Variant:
    """One way of turning a trained model's scores into text (an ablation arm)."""

    name: str
    visibility: bool = False  # True: markup-hidden elements removed before the walk
    blocks: bool = True       # blocks judged whole
    container: bool = True    # blocks outside the main container dropped unless sure
    repeats: bool = True      # a repeated block kept once
    adaptive: bool = True     # each page's cut-off from its own scores, near the threshold
    headline: bool = True     # the headline left to the title, not the text
    byline: bool = True       # the byline and date left to their fields
    notices: bool = True      # embeds' consent notices dropped
    copies: bool = True       # hidden copies of the kept text dropped
    fallback: bool = True     # a page that keeps nothing keeps its prose
    dialogs: bool = True      # blocks inside ARIA dialogs dropped
    screen_reader: bool = True  # text for screen readers only (sr-only classes) dropped
    refine: bool = False      # largest contiguous content group
    threshold: float | None = None  # None: the model's own (``ArticleExtractor.threshold``)
    rescore: bool = True      # the model's block rescorer, when it has one


DEFAULT_VARIANTS = (
    Variant("grownup"),
    Variant("grownup -blocks", blocks=False),
    Variant("grownup -adaptive", adaptive=False),
    Variant("grownup -container", container=False),
    Variant("grownup -repeats", repeats=False),
    Variant("grownup -headline", headline=False),
    Variant("grownup -byline", byline=False),
    Variant("grownup -notices", notices=False),
    Variant("grownup -copies", copies=False),
    Variant("grownup -fallback", fallback=False),
    Variant("grownup -dialogs", dialogs=False),
    Variant("grownup -screen-reader", screen_reader=False),
    Variant("grownup +drop-hidden", visibility=True),
    Variant("grownup --precision", refine=True),                   # grownup extract's presets
    Variant("grownup --recall", threshold=0.2, adaptive=False),
    Variant("grownup -rescorer", rescore=False),
)


def model_texts(extractor, records, variants: Sequence[Variant] = DEFAULT_VARIANTS
                ) -> dict[str, list[str]]:
    """Text of every record under each variant (a page that does not parse is empty)."""
    out: dict[str, list[str]] = {}
    parsed: dict[bool, list] = {}
    for visibility in sorted({v.visibility for v in variants}):
        pages = []
        for record in records:
            try:
                pages.append(parse_page(record.html, url=record.url, visibility=visibility,
                                        content_type=record.extra.get("content_type"),
                                        limits=extractor.featurizer.limits))
            except GrownupError:
                pages.append(None)
        good = [p for p in pages if p is not None]
        scores = iter(extractor.score(good))
        parsed[visibility] = [(p, next(scores) if p is not None else None) for p in pages]
    rescorer = getattr(extractor, "rescorer", None)
    rescored: dict[bool, list] = {}
    for visibility, rows in parsed.items():
        rescored[visibility] = [(p, rescorer.rescore(p, s)) if p is not None else (p, s)
                                for p, s in rows] if rescorer is not None else rows
    for variant in variants:
        if rescorer is None and not variant.rescore:
            continue  # the same as the plain arm
        rescore = rescorer is not None and variant.rescore
        if variant.threshold is not None:
            threshold = variant.threshold
        elif rescorer is not None and not rescore:
            threshold = rescorer.feature_threshold  # the content head's own cut-off
        else:
            threshold = extractor.threshold
        options = {"refine": variant.refine, "blocks": variant.blocks,
                   "repeats": variant.repeats, "adaptive": variant.adaptive,
                   "headline": variant.headline, "byline": variant.byline,
                   "notices": variant.notices, "copies": variant.copies,
                   "fallback": variant.fallback, "dialogs": variant.dialogs,
                   "screen_reader": variant.screen_reader}
        texts = []
        for (p, s), (_, r) in zip(parsed[variant.visibility], rescored[variant.visibility]):
            if p is None:
                texts.append("")
            elif rescore:  # the rescorer's own decisions (a variant can switch off its container)
                texts.append(assemble_text(p, rescored_article_mask(
                    p, s, rescorer, threshold, rescored=r,
                    container=variant.container and rescorer.container, **options)))
            else:
                texts.append(assemble_text(p, article_mask(p, s, threshold,
                                                           container=variant.container,
                                                           **options)))
        out[variant.name] = texts
    return out


def perfect_texts(records) -> list[str]:
    """The perfect-filter text of each record (the ceiling of an element classifier)."""
    out = []
    for record in records:
        try:
            page = parse_page(record.html, url=record.url,
                              content_type=record.extra.get("content_type"))
        except GrownupError:
            out.append("")
            continue
        out.append(perfect_filter_text(page, align_labels(page, record.gold or "").labels))
    return out


def score_methods(records, texts_by_method: dict[str, list[str]]) -> list[PageScore]:
    return [score_page(r, method, text) for method, texts in texts_by_method.items()
            for r, text in zip(records, texts)]


def available_baselines(baselines: Sequence[str] = BASELINES) -> list[str]:
    """The baselines that are installed (``pip install scrapy-grownup[eval]``); a missing one
    is left out with a warning rather than scored as empty."""
    import importlib.util

    modules = {"trafilatura": "trafilatura", "readability": "readability"}
    found = [b for b in baselines if importlib.util.find_spec(modules[b]) is not None]
    for missing in sorted(set(baselines) - set(found)):
        logger.warning("%s is not installed (pip install scrapy-grownup[eval]): left out", missing)
    return found


def baseline_texts(method: str, records, cache: Path | None = None) -> list[str]:
    """``baseline_text`` of each record; with ``cache`` (a folder), texts are kept there per
    baseline version, keyed by record and a hash of its HTML, so a re-run does not extract
    them again (trafilatura and readability take about 2 minutes per 300 pages)."""
    if cache is None:
        return [baseline_text(method, r) for r in records]
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version({"readability": "readability-lxml"}.get(method, method))
    except PackageNotFoundError:
        installed = "unknown"
    path = cache / f"baseline-{method}-{installed}.json"
    known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def key(record) -> str:
        digest = hashlib.blake2b(record.html, digest_size=8)
        return f"{record_key(record)}#{digest.hexdigest()}"

    keys = [key(r) for r in records]
    missing = [(k, r) for k, r in zip(keys, records) if k not in known]
    if missing:
        known.update((k, baseline_text(method, r)) for k, r in missing)
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(known), encoding="utf-8")
        tmp.replace(path)
    return [known[k] for k in keys]


def baseline_scores(records, baselines: Sequence[str] = BASELINES,
                    perfect: bool = True, cache: Path | None = None) -> list[PageScore]:
    """Per-page scores of the installed baselines (and the perfect filter) on ``records``;
    ``cache``: a folder where the baselines' texts are kept between runs."""
    texts = {method: baseline_texts(method, records, cache)
             for method in available_baselines(baselines)}
    if perfect:
        texts["perfect filter"] = perfect_texts(records)
    return score_methods(records, texts)


# ----------------------------------------------------------------------------------------------
# Protocols


@dataclass
class FoldPlan:
    name: str
    test: list        # records scored
    train_keys: set   # record keys allowed in training
    info: dict = field(default_factory=dict)


def site_cv_plan(eval_records, extra_records, folds: int, only: Sequence[int] | None = None
                 ) -> list[FoldPlan]:
    """Site-grouped folds over ``eval_records``; ``extra_records`` only ever train, and only
    when their site group is not in the fold being tested."""
    everything = list(eval_records) + list(extra_records)
    groups = site_groups(everything)
    fold_of_eval = site_folds(eval_records, folds)
    group_fold: dict[str, int] = {}
    for g, k in zip(groups, fold_of_eval):
        group_fold[g] = k  # groups spanning eval and extra records take the eval fold
    plans = []
    for k in range(folds):
        if only is not None and k not in only:
            continue
        test = [r for r, f in zip(eval_records, fold_of_eval) if f == k]
        train = {record_key(r) for r, g in zip(everything, groups) if group_fold.get(g) != k}
        plans.append(FoldPlan(f"fold{k}", test, train, {"fold": k, "folds": folds}))
    return plans


def leave_out_plan(eval_records, extra_records, held: Sequence[str]) -> FoldPlan:
    """Test on the datasets ``held``; train on everything else minus their sites."""
    everything = list(eval_records) + list(extra_records)
    groups = site_groups(everything)
    test_groups = {g for r, g in zip(everything, groups) if r.dataset in held}
    test = [r for r in eval_records if r.dataset in held]
    train = {record_key(r) for r, g in zip(everything, groups) if g not in test_groups}
    return FoldPlan("without-" + "+".join(held), test, train, {"held": list(held)})


def pretraining_sites(init_dir: str | Path) -> set[int] | None:
    """The site hashes (``warc.pairs.site_hash`` of each page's host) of the corpus the model
    in ``init_dir`` was pre-trained on; None where the model names no corpus or it is gone."""
    from safetensors import safe_open

    from scrapy_grownup.model import GrownUpModel
    from scrapy_grownup.warc.corpus import load_corpus

    doc = GrownUpModel.read_config(init_dir)[1]
    data = ((doc.get("metadata") or {}).get("pretrain") or {}).get("data")
    if not data or not (Path(data) / "index.json").is_file():
        return None
    sites: set[int] = set()
    for shard in load_corpus(data).shards:
        with safe_open(str(shard.path), framework="numpy") as handle:
            if "page_site" in set(handle.keys()):
                sites.update(int(v) for v in handle.get_tensor("page_site").tolist())
    sites.discard(0)
    return sites


def check_init_disjoint(plan: FoldPlan, init_dir: str | Path) -> None:
    """Refuse a pre-trained backbone whose corpus holds pages of the plan's test sites (by
    host): pre-training reads no labels, but a figure "on sites the model never saw" must not
    come from a backbone that read their pages. A model whose corpus cannot be found is used
    with a warning."""
    from scrapy_grownup.warc.pairs import site_hash, site_key

    if not plan.test:
        return
    corpus_sites = pretraining_sites(init_dir)
    if corpus_sites is None:
        logger.warning("%s: %s names no pre-training corpus that can be read; its sites cannot "
                       "be checked against the test side", plan.name, init_dir)
        return
    test_sites = {site_key(r.url) for r in plan.test if r.url}
    seen = sorted(s for s in test_sites if s and site_hash(s) in corpus_sites)
    if seen:
        raise GrownupError(f"{init_dir} was pre-trained on pages of {len(seen)} of {plan.name}'s "
                           f"test sites (e.g. {', '.join(seen[:3])}); pre-train on a corpus "
                           "without them")


def check_disjoint(plan: FoldPlan, everything) -> None:
    """Raise if a site of the test side is also on the training side (a leak)."""
    from scrapy_grownup.data.splits import site_of

    test_sites = {site_of(r) for r in plan.test}
    leaked = {site_of(r) for r in everything if record_key(r) in plan.train_keys} & test_sites
    if leaked:
        raise AssertionError(f"{plan.name}: sites on both sides: {sorted(leaked)[:5]}")


def run_plans(plans: Sequence[FoldPlan], everything, train_fold: Callable, out: Path,
              variants: Sequence[Variant] = DEFAULT_VARIANTS,
              baselines: Sequence[str] = BASELINES) -> list[PageScore]:
    """Train one model per plan (``train_fold(plan) -> ArticleExtractor``), score it and the
    baselines on the plan's test pages; per-page scores go to ``out/scores.jsonl``. A re-run
    resumes per plan and method: only the variants and baselines a plan has no rows for yet are
    scored (delete a method's rows to score it again)."""
    out.mkdir(parents=True, exist_ok=True)
    done_path = out / "scores.jsonl"
    done = read_scores(done_path) if done_path.exists() else {}
    scores: list[PageScore] = []
    for plan in plans:
        have = done.get(plan.name, {})
        for rows in have.values():
            scores.extend(rows)
        todo_variants = [v for v in variants if v.name not in have]
        todo_baselines = [b for b in available_baselines(baselines) if b not in have]
        todo_perfect = "perfect filter" not in have
        if plan.test and not (todo_variants or todo_baselines or todo_perfect):
            logger.info("%s: already scored", plan.name)
            continue
        check_disjoint(plan, everything)
        start = time.perf_counter()
        plan_scores: list[PageScore] = []
        if todo_variants or not plan.test:
            extractor = train_fold(plan)
            if not plan.test:  # the final model: nothing held out, nothing to score
                continue
            plan_scores += score_methods(plan.test, model_texts(extractor, plan.test,
                                                                todo_variants))
        if todo_baselines or todo_perfect:
            plan_scores += baseline_scores(plan.test, todo_baselines, perfect=todo_perfect)
        write_scores(done_path, plan.name, plan_scores)
        logger.info("%s: %d test pages scored in %.0f s", plan.name, len(plan.test),
                    time.perf_counter() - start)
        scores.extend(plan_scores)
    return scores


def training_store(everything, encoder, min_coverage: float = 0.75, workers: int = 2):
    """``(store, keys)``: one store of every trainable page (built once per dataset and
    cached), and each store page's ``DATASET/ID`` key."""
    from scrapy_grownup.data.store import GraphStore

    parts, keys = _dataset_stores(everything, encoder, min_coverage, workers)
    return GraphStore.concat([store for _, store in parts]), keys


def _dataset_stores(everything, encoder, min_coverage: float, workers: int):
    """``([(cache path, store), ...], keys)``: each dataset's cached store, in the order
    ``training_store`` joins them, and every store page's ``DATASET/ID`` key."""
    from scrapy_grownup.page.limits import PageLimits

    by_dataset: dict[str, list] = defaultdict(list)
    for r in everything:
        by_dataset[r.dataset].append(r)
    parts, keys = [], []
    for name, records in by_dataset.items():
        path, store = _cached_store(name, records, encoder, min_coverage, PageLimits(), workers)
        parts.append((path, store))
        keys.extend(f"{name}/{i}" for i in store.ids)
    return parts, keys


def train_plan_model(store, keys, plan: FoldPlan, encoder, cfg_kwargs: dict, model_dir: Path,
                     page_types: dict[str, str] | None = None):
    """Train a fresh model on the plan's training pages (fixed epochs, no dev split, so no
    test page steers training) and save it to ``model_dir``; returns the model.
    ``page_types`` (``DATASET/ID`` -> type, ``page_types_of``) weighs pages by their type's
    share of the training pages where ``cfg_kwargs["type_balance"]`` is set."""
    import torch

    from scrapy_grownup.model import GrownUpModel, ModelConfig

    from scrapy_grownup.graph.featurizer import feature_blocks

    cfg_kwargs = dict(cfg_kwargs)
    use_silver = cfg_kwargs.pop("use_silver", True)
    layout = cfg_kwargs.pop("layout", True)  # False: the inputs of models before layout.py
    repetition = cfg_kwargs.pop("repetition", False)  # True: also the repetition.py features
    cfg = TrainConfig(out=str(model_dir.parent), encoder=encoder.name, **cfg_kwargs)
    indices = [i for i, k in enumerate(keys) if k in plan.train_keys
               and (use_silver or k.split("/", 1)[0] not in datasets.SILVER_DATASETS)]
    torch.manual_seed(cfg.seed)
    config = ModelConfig.preset(cfg.preset, encoder=encoder.name, text_dim=encoder.dim,
                                encoder_version=encoder.version,
                                input_blocks=feature_blocks(encoder.dim, layout, repetition),
                                **cfg.overrides)
    model = GrownUpModel(config)
    if cfg.init:  # a pre-trained backbone (grownup pretrain); its heads start from the seed
        from scrapy_grownup.pretraining.init import load_pretrained

        check_init_disjoint(plan, cfg.init)
        load_pretrained(model, cfg.init)
    aux = AuxLabels.empty(store)
    if cfg.type_balance:
        if page_types is None:
            raise ValueError("type_balance needs the pages' page types")
        aux.page_weights = np.ones(store.num_pages, dtype=np.float32)
        aux.page_weights[indices] = page_type_weights(
            [page_types.get(keys[i], "article") for i in indices], cfg.type_balance)
    history = fit_epochs(model, store, indices, aux, cfg,
                         log=lambda rec: logger.info("%s %s", plan.name, rec))
    model.cpu()
    model.save_pretrained(model_dir, encoder=encoder.name, encoder_version=encoder.version,
                          metadata={"plan": plan.name, "train_pages": len(indices),
                                    "train": {k: v for k, v in cfg_kwargs.items()},
                                    "history": history})
    return model


def _train_plan_job(store_paths: list, keys: list, name: str, train_keys: set,
                    encoder: tuple, cfg_kwargs: dict, model_dir: str,
                    page_types: dict | None = None) -> str:
    """One ``train_in_parallel`` process: join the datasets' cached stores as
    ``training_store`` does, train and save one plan's model. ``encoder``: (name, dim,
    version), all that training reads of the encoder."""
    from types import SimpleNamespace

    import torch

    from scrapy_grownup.data.store import GraphStore

    logging.basicConfig(level=logging.INFO, format=f"{name} %(asctime)s %(message)s")
    torch.set_num_threads(max(1, int(cfg_kwargs.get("threads") or 1)))
    store = GraphStore.concat([GraphStore.load(path) for path in store_paths])
    enc = SimpleNamespace(name=encoder[0], dim=encoder[1], version=encoder[2])
    train_plan_model(store, keys, FoldPlan(name, [], train_keys), enc, cfg_kwargs,
                     Path(model_dir), page_types)
    return name


def training_pool(jobs: int):
    """The processes ``train_in_parallel`` trains in: spawned, so that they inherit no CUDA
    context or encoder threads, and each ending when the run that started it is gone (a
    killed ``grownup lab evaluate --jobs`` leaves no training running on)."""
    return parent_bound_pool(jobs, "spawn")


def train_in_parallel(plans: Sequence[FoldPlan], everything, encoder_name: str,
                      cfg_kwargs: dict, out: Path, jobs: int, min_coverage: float = 0.75,
                      workers: int = 2) -> list[str]:
    """Train the models of ``plans`` that ``out/PLAN/model`` does not hold yet, ``jobs`` at
    a time in their own processes, each exactly as ``train_plan_model`` alone would (same
    pages, seed and recipe). The datasets' stores are built (and embedded) once here, into
    ``training_store``'s cache, and each process loads them from there. One GPU trains several of these small models at once (an H100 trained
    the seven MiniLM plans of a site-cv + leave-out run in under three minutes together);
    returns the plans trained."""
    todo = [p for p in plans if not (out / p.name / "model" / "config.json").is_file()]
    if not todo:
        return []
    if cfg_kwargs.get("init"):  # the processes see no test pages: check the backbone here
        for plan in todo:
            check_init_disjoint(plan, cfg_kwargs["init"])
    encoder = corpus_encoder(encoder_name)
    parts, keys = _dataset_stores(everything, encoder, min_coverage, workers)
    store_paths = [str(path) for path, _ in parts]
    del parts
    identity = (encoder.name, encoder.dim, encoder.version)
    with training_pool(jobs) as pool:
        page_types = page_types_of(everything)
        futures = [pool.submit(_train_plan_job, store_paths, keys, p.name, p.train_keys,
                               identity, cfg_kwargs, str(out / p.name / "model"), page_types)
                   for p in todo]
        done = [f.result() for f in futures]
    logger.info("trained %s in parallel (%d at a time)", ", ".join(done), jobs)
    return done


def fold_trainer(everything, encoder_name: str, cfg_kwargs: dict, out: Path,
                 min_coverage: float = 0.75, workers: int = 2,
                 threshold: float = 0.5) -> Callable:
    """A ``train_fold`` for ``run_plans``: trains (``train_plan_model``) or, where
    ``out/PLAN/model`` is saved already (a resumed run, or models trained on a GPU machine),
    loads the plan's model."""
    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.graph.featurizer import Featurizer

    encoder = corpus_encoder(encoder_name)
    cache: dict = {}

    def train_fold(plan: FoldPlan):
        from scrapy_grownup.extractor import ArticleExtractor
        from scrapy_grownup.model import GrownUpModel

        model_dir = out / plan.name / "model"
        if (model_dir / "config.json").is_file():
            model = GrownUpModel.from_pretrained(model_dir)
        else:
            if not cache:
                cache["store"], cache["keys"] = training_store(everything, encoder,
                                                               min_coverage, workers)
            model = train_plan_model(cache["store"], cache["keys"], plan, encoder, cfg_kwargs,
                                     model_dir, page_types_of(everything))
        featurizer = Featurizer.for_blocks(get_encoder(encoder_name), model.config.input_blocks)
        # scored where it trained (--device): on a GPU machine the fold pages score there too
        return ArticleExtractor(model, featurizer,
                                name=plan.name, device=cfg_kwargs.get("device") or "cpu",
                                threshold=threshold)

    return train_fold


def _cached_store(name: str, records, encoder, min_coverage, limits, workers):
    """``(path, store)``: the labelled store of one dataset's records and the file it is
    cached in, like ``corpus.labelled_store``."""
    from scrapy_grownup.data.store import GraphStore

    split = records[0].split if records else "all"
    key = f"{name}-{split}-{len(records)}-" + store_key(encoder, limits, min_coverage)
    path = cache_root() / f"{key}.safetensors"
    if path.exists():
        return path, GraphStore.load(path)
    store = store_from_records(records, encoder, min_coverage, limits, workers,
                               meta={"dataset": name, "split": split})
    path.parent.mkdir(parents=True, exist_ok=True)
    store.save(path)
    return path, store


# ----------------------------------------------------------------------------------------------
# ``grownup lab evaluate --protocol ...``

PROTOCOLS = ("in-domain", "site-cv", "leave-out", "model")


def default_workers() -> int:
    """Featurizing processes for the training stores: one per core, at most 8 (each holds a
    parser and the encoder; 2 on a 2-core machine, 8 on a 16-core GPU machine)."""
    import os

    return max(1, min(8, os.cpu_count() or 1))


def chosen_baselines(no_baselines: bool, no_trafilatura: bool) -> tuple[str, ...]:
    """The baselines a cross-site run scores beside the model (``--no-baselines``,
    ``--no-trafilatura``)."""
    if no_baselines:
        return ()
    return tuple(b for b in BASELINES if not (no_trafilatura and b == "trafilatura"))


def add_arguments(p) -> None:
    """The cross-site options of ``grownup lab evaluate``."""
    p.add_argument("--protocol", choices=PROTOCOLS, default="in-domain",
                   help="in-domain: the standard test splits (Dragnet, CleanEval); site-cv: "
                        "site-grouped k-fold cross-validation over --eval-datasets, one model "
                        "trained per fold; leave-out: train without --hold, test on it; model: "
                        "score --model on whole --eval-datasets (only where it never saw them)")
    p.add_argument("--eval-datasets", default=",".join(EVAL_DATASETS),
                   help="modern sets the cross-site protocols test on")
    p.add_argument("--train-datasets", default="dragnet,cleaneval",
                   help="extra sets that only ever train (their test-side sites left out)")
    p.add_argument("--folds", type=int, default=5, help="site-cv: number of site-grouped folds")
    p.add_argument("--only-folds", default=None, help="site-cv: run only these folds (0,2)")
    p.add_argument("--hold", default="fundus",
                   help=f"leave-out: held-out group ({', '.join(LEAVE_OUT)}) or datasets")
    p.add_argument("--out", default="runs/crosssite",
                   help="per-fold models and per-page scores (a re-run resumes from them)")
    p.add_argument("--encoder", default="static", help="site-cv / leave-out: text encoder")
    p.add_argument("--preset", default="small", help="site-cv / leave-out: model preset")
    p.add_argument("--model-overrides", default='{"num_layers": 4, "num_transformer_layers": 0,'
                   ' "readout": "mean"}', help="JSON ModelConfig fields (default: fast's shape)")
    p.add_argument("--epochs", type=int, default=10, help="training epochs per fold")
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (AdamW, cosine)")
    p.add_argument("--pos-weight", type=float, default=2.0,
                   help="loss weight of content nodes (2 measured better than 1 across sites)")
    p.add_argument("--threshold", type=float, default=0.4,
                   help="site-cv / leave-out: content probability cut-off of the fold models")
    p.add_argument("--type-balance", type=float, default=0.0, metavar="POWER",
                   help="site-cv / leave-out: weigh each training page's content loss by "
                        "(share of the training pages of its page type) ** -POWER, averaging "
                        "1 (default: 0, every page the same)")
    p.add_argument("--node-weight", choices=NODE_WEIGHTS, default="none",
                   help="site-cv / leave-out: how the content loss weighs a page's text-owning "
                        "nodes: none (each the same: the recipe), log-chars (~ log(1 + its "
                        "characters)), page (every page's nodes summing to the same total) or "
                        "page-log-chars (both); averaging 1 per batch")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="site-cv / leave-out: the training forward pass's arithmetic: fp32 (the "
                        "recipe) or bf16 (autocast to bfloat16; weights and losses stay "
                        "float32): 0.6 of the time an epoch takes on a CPU with AVX512-BF16, "
                        "many times more on a CPU without it")
    p.add_argument("--attribute-dropout", type=float, default=0.0, metavar="SHARE",
                   help="site-cv / leave-out: share of training pages whose class and id "
                        "vectors are zeroed per batch (default: 0, the recipe)")
    p.add_argument("--average-last", type=int, default=0, metavar="EPOCHS",
                   help="site-cv / leave-out: keep the mean of the weights over every step of "
                        "the last EPOCHS epochs (stochastic weight averaging; default: 0, the "
                        "last step's weights)")
    p.add_argument("--no-layout", action="store_true",
                   help="train without the layout features (the ablation arm)")
    p.add_argument("--repetition", action="store_true",
                   help="also read the repeated-structure features (repetition.py: alike "
                        "siblings, list containers, cards; the ablation arm)")
    p.add_argument("--no-silver", action="store_true", help="leave the silver sets out")
    p.add_argument("--final", action="store_true",
                   help="site-cv / leave-out: also train one model on every page with the same "
                        "recipe (OUT/PROTOCOL/all/model; what ships, after fit-heads and export)")
    p.add_argument("--seed", type=int, default=0,
                   help="site-cv / leave-out: training seed (weights, batch order; default: 0); "
                        "two models of the same pages differ by up to a point on held-out sets")
    p.add_argument("--init", default=None, metavar="DIR",
                   help="site-cv / leave-out: start every model's backbone from this pre-trained "
                        "model (grownup pretrain's OUT/best); refused where its corpus holds "
                        "pages of a test site")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--workers", type=int, default=default_workers(),
                   help="site-cv / leave-out: processes that parse and featurize the training "
                        "pages (default: one per core, at most 8: "
                        f"{default_workers()} here)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="site-cv / leave-out: train N plans' models at once, each in its own "
                        "process (default: 1). For a GPU, which holds several of these small "
                        "models; on a CPU each process takes --threads cores")
    p.add_argument("--no-baselines", action="store_true",
                   help="site-cv / leave-out / model: score neither trafilatura nor readability "
                        "(--no-trafilatura leaves out trafilatura only)")


def run(args) -> int:
    """``grownup lab evaluate`` with a cross-site protocol; prints the summary table."""
    import torch

    torch.set_num_threads(max(1, args.threads))
    if not 0 <= args.attribute_dropout <= 1:
        raise GrownupError(f"--attribute-dropout {args.attribute_dropout}: a share between 0 "
                           "and 1")
    if args.jobs < 1:
        raise GrownupError(f"--jobs {args.jobs}: at least 1")
    if args.workers < 1:
        raise GrownupError(f"--workers {args.workers}: at least 1")
    if args.type_balance < 0:
        raise GrownupError(f"--type-balance {args.type_balance}: 0 (off) or more")
    if not 0 <= args.average_last <= args.epochs:
        raise GrownupError(f"--average-last {args.average_last}: between 0 and --epochs "
                           f"({args.epochs})")
    eval_names = [n for n in args.eval_datasets.split(",") if n]
    out = Path(args.out)
    baselines = chosen_baselines(args.no_baselines, args.no_trafilatura)
    if args.protocol == "model":
        from scrapy_grownup.extractor import ArticleExtractor

        records = load_records(eval_names, limit=args.limit)
        scores = baseline_scores(records, baselines)
        for name in args.model:
            extractor = ArticleExtractor.from_pretrained(name, device=args.device)
            texts = model_texts(extractor, records)
            scores += score_methods(records, {f"{k}:{name}": v for k, v in texts.items()})
    else:
        train_names = [n for n in args.train_datasets.split(",") if n and n not in eval_names]
        # checked before any page is loaded: a typo must not cost a training run
        held = held_out_datasets(args.hold, eval_names) if args.protocol == "leave-out" else ()
        only = fold_list(args.only_folds, args.folds) if args.protocol == "site-cv" else None
        eval_records = load_records(eval_names, limit=args.limit)
        extra = load_records(train_names, limit=args.limit)
        everything = eval_records + extra
        if args.protocol == "site-cv":
            plans = site_cv_plan(eval_records, extra, args.folds, only)
        else:
            plans = [leave_out_plan(eval_records, extra, held)]
        if args.final:
            plans.append(FoldPlan("all", [], {record_key(r) for r in everything}))
        cfg = {"preset": args.preset, "epochs": args.epochs, "lr": args.lr,
               "overrides": json.loads(args.model_overrides), "use_silver": not args.no_silver,
               "threads": args.threads, "device": args.device or "cpu",
               "pos_weight": args.pos_weight, "layout": not args.no_layout, "seed": args.seed}
        if args.repetition:
            cfg["repetition"] = True
        if args.attribute_dropout:
            cfg["attribute_dropout"] = args.attribute_dropout
        if args.type_balance:
            cfg["type_balance"] = args.type_balance
        if args.node_weight != "none":
            cfg["node_weight"] = args.node_weight
        if args.precision != "fp32":
            cfg["precision"] = args.precision
            warn_if_emulated(args.precision, cfg["device"])
        if args.average_last:
            cfg["average_last"] = args.average_last
        if args.init:
            cfg["init"] = str(args.init)
        if args.jobs > 1:
            train_in_parallel(plans, everything, args.encoder, cfg, out / args.protocol,
                              args.jobs, workers=args.workers)
        trainer = fold_trainer(everything, args.encoder, cfg, out / args.protocol,
                               workers=args.workers, threshold=args.threshold)
        scores = run_plans(plans, everything, trainer, out / args.protocol, baselines=baselines)
    rows = summary(scores)
    print(format_summary(rows))
    if args.json:
        Path(args.json).write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return 0
