"""Block roles: L3S-GN1's block labels on DOM nodes, per-role scores, and the site-disjoint test.

L3S-GN1 annotates text blocks as headline, full text, supplemental (captions and the like),
related content, user comments or "not content"; text nobody selected is not content too. A
node's role is the majority label of its own tokens after aligning the page's tokens with the
annotated blocks (the same difflib alignment as the content labels; unmatched page tokens are
"not content"); nodes that own no text get -1 and are never scored.

``python -m scrapy_grownup.training.roles`` (``grownup lab roles-eval``) trains a model with the
content and role heads on the L3S-GN1 pages of 80% of the sites and reports per-role F1 on the
pages of the other 20% of the sites (split by host name, so no site is on both sides); with
``--model DIR`` it scores a trained model's role head on the pages of L3S-GN1's trainer hold-out
whose sites the trainer never saw instead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from scrapy_grownup.data import datasets
from scrapy_grownup.data.labels import match_blocks, page_tokens
from scrapy_grownup.page.dom import PageStructure, parse_page
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.extractor import resolve_model_dir
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.crawl.workers import parent_bound_pool
from scrapy_grownup.training.command import add_model_shape_arguments, add_run_arguments, report, standalone
from scrapy_grownup.training.corpus import cache_root, corpus_encoder, labelled_store
from scrapy_grownup.training.evaluate import store_predictions
from scrapy_grownup.training.holdout import heldout_ids, page_host, site_split
from scrapy_grownup.training.loop import AuxLabels, TrainConfig, fit_epochs

logger = logging.getLogger(__name__)

# Index i is L3S-GN1's label i (x-nc-sel<i>).
ROLES = ("not_content", "headline", "main_text", "supplemental", "related", "comments")
ROLE_INDEX = {name: i for i, name in enumerate(ROLES)}
NOT_CONTENT, HEADLINE, MAIN_TEXT, SUPPLEMENTAL, RELATED, COMMENTS = range(len(ROLES))
# Bump when the mapping of annotated blocks onto nodes changes (invalidates cached labels).
ROLE_LABEL_VERSION = "1"
# Pages whose role-bearing text (roles 1-5) aligns worse than this get no role labels.
MIN_ROLE_COVERAGE = 0.75


@dataclass
class RoleAlignment:
    labels: np.ndarray  # int8 [num_nodes]: role index, -1 for nodes that own no text
    coverage: float  # matched tokens of roles 1-5 / tokens of roles 1-5 (1.0 if there are none)


def role_labels(page: PageStructure, segments: Sequence[tuple[int, str]]) -> RoleAlignment:
    """Per-node role of ``page`` from L3S-style ``(label, text)`` blocks in document order."""
    toks, owners = page_tokens(page)
    gold: list[str] = []
    gold_role: list[int] = []
    for label, text in segments:
        words = text.split()
        gold.extend(words)
        gold_role.extend([int(label)] * len(words))
    roles = np.asarray(gold_role, dtype=np.int64)
    token_role = np.full(len(toks), NOT_CONTENT, dtype=np.int64)
    matched_roles = 0
    for i, j, size in match_blocks(toks, gold)[0]:
        token_role[i:i + size] = roles[j:j + size]
        matched_roles += int((roles[j:j + size] > 0).sum())
    counts = np.zeros((page.num_nodes, len(ROLES)), dtype=np.int64)
    if toks:
        flat_nodes = np.fromiter((n for nodes in owners for n in nodes), dtype=np.int64)
        flat_roles = np.repeat(token_role, [len(nodes) for nodes in owners])
        np.add.at(counts, (flat_nodes, flat_roles), 1)
    # Majority role; a tie between "not content" and a role goes to the role.
    score = 2 * counts + ((counts > 0) & (np.arange(len(ROLES)) > 0))
    labels = np.where(counts.sum(1) > 0, score.argmax(1), -1).astype(np.int8)
    total = int((roles > 0).sum())
    return RoleAlignment(labels, matched_roles / total if total else 1.0)


# ----------------------------------------------------------------------------------------------
# Role labels of a GraphStore (cached)


def _role_job(args) -> np.ndarray | None:
    html, url, content_type, limits, segments, expected_nodes, min_coverage = args
    try:
        page = parse_page(html, url=url, content_type=content_type, limits=limits,
                          positions=False)
    except GrownupError:
        return None
    if page.num_nodes != expected_nodes:
        return None
    result = role_labels(page, segments)
    return result.labels if result.coverage >= min_coverage else None


def store_roles(store, records=None, dataset: str | None = None, split: str | None = None,
                limits: PageLimits | None = None, workers: int = 2,
                min_coverage: float = MIN_ROLE_COVERAGE) -> np.ndarray:
    """Role label per node of ``store`` (int8, aligned with its nodes; -1: none).

    Pages come from ``records`` (``PageRecord`` s with ``extra["roles"]``) or are loaded from
    ``dataset``/``split``. Pages without role annotations, whose roles align badly or whose
    re-parse does not give the store's node count get -1 throughout. Cached on disk by the
    store's page ids and sizes.
    """
    limits = limits or PageLimits()
    sizes = np.diff(store.page_ptr)
    digest = hashlib.sha1(json.dumps([store.ids, sizes.tolist(), store.meta.get("encoder"),
                                      limits.max_nodes, limits.max_depth, min_coverage,
                                      ROLE_LABEL_VERSION]).encode()).hexdigest()[:16]
    path = cache_root() / f"roles-{dataset or 'records'}-{digest}.npy"
    if records is None and path.is_file():
        cached = np.load(path)
        if cached.shape == (int(store.page_ptr[-1]),):
            return cached
    if records is None:
        records = datasets.load(dataset, split=split, ids=store.ids)
    by_id = {r.id: r for r in records}
    jobs, slots = [], []
    for i, page_id in enumerate(store.ids):
        record = by_id.get(page_id)
        segments = (record.extra.get("roles") if record is not None else None) or None
        if segments is None:
            continue
        jobs.append((record.html, record.url, record.extra.get("content_type"), limits,
                     segments, int(sizes[i]), min_coverage))
        slots.append(i)
    if workers > 1 and len(jobs) >= 16:
        with parent_bound_pool(workers) as pool:
            results = list(pool.map(_role_job, jobs, chunksize=8))
    else:
        results = [_role_job(job) for job in jobs]
    out = np.full(int(store.page_ptr[-1]), -1, dtype=np.int8)
    ptr = store.page_ptr
    for i, labels in zip(slots, results):
        if labels is not None:
            out[ptr[i]:ptr[i + 1]] = labels
    logger.info("role labels for %d of %d pages", sum(r is not None for r in results),
                store.num_pages)
    if dataset is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npy")
        np.save(tmp, out)
        tmp.replace(path)
    return out


# ----------------------------------------------------------------------------------------------
# Scores


def role_scores(gold: np.ndarray, pred: np.ndarray, weights: np.ndarray | None = None,
                names: Sequence[str] = ROLES) -> dict:
    """Per-role precision/recall/F1 over nodes with a gold role (``weights``: e.g. tokens).

    ``macro_f1`` averages the roles other than "not content"; ``macro_f1_all`` all roles.
    """
    mask = gold >= 0
    gold, pred = gold[mask].astype(np.int64), pred[mask].astype(np.int64)
    w = np.ones(len(gold)) if weights is None else np.asarray(weights, dtype=float)[mask]
    out: dict = {"roles": {}}
    for r, name in enumerate(names):
        tp = float(w[(gold == r) & (pred == r)].sum())
        fp = float(w[(gold != r) & (pred == r)].sum())
        fn = float(w[(gold == r) & (pred != r)].sum())
        p = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * p * rec / (p + rec) if p + rec else 0.0
        out["roles"][name] = {"precision": p, "recall": rec, "f1": f1,
                              "support": float(w[gold == r].sum())}
    f1s = [out["roles"][n]["f1"] for n in names]
    out["macro_f1"] = float(np.mean(f1s[1:])) if len(f1s) > 1 else float(f1s[0])
    out["macro_f1_all"] = float(np.mean(f1s))
    out["accuracy"] = float(w[gold == pred].sum() / w.sum()) if w.sum() else 0.0
    return out


def node_text_lengths(store, indices: Sequence[int]) -> np.ndarray:
    """Characters of text owned by each node of the pages, in page order."""
    return np.concatenate([store.arrays["text_len"][store.page_ptr[i]:store.page_ptr[i + 1]]
                           for i in indices]).astype(float)


def evaluate_roles(model, store, indices: Sequence[int], roles: np.ndarray,
                   batch_nodes: int = 30_000) -> dict:
    """Role scores of ``model`` on the store pages: per node (``nodes``) and per character of
    text (``text``: each node weighted by the length of the text it owns)."""
    preds = store_predictions(model, store, indices, batch_nodes)
    pred = np.concatenate([p["roles"].argmax(1) for p in preds])
    gold = np.concatenate([roles[store.page_ptr[i]:store.page_ptr[i + 1]] for i in indices])
    names = tuple(model.role_names)
    nodes = role_scores(gold, pred, names=names)
    text = role_scores(gold, pred, node_text_lengths(store, indices), names=names)
    pages = sum(bool((roles[store.page_ptr[i]:store.page_ptr[i + 1]] >= 0).any())
                for i in indices)
    return {"nodes": nodes, "text": text, "pages": pages}


def format_table(result: dict) -> str:
    nodes, text = result["nodes"], result["text"]
    lines = [f"{'role':<14} {'nodes':>6} {'P':>6} {'R':>6} {'F1':>6} {'chars F1':>8}",
             "-" * 51]
    for name, s in nodes["roles"].items():
        lines.append(f"{name:<14} {int(s['support']):>6} {100 * s['precision']:6.1f} "
                     f"{100 * s['recall']:6.1f} {100 * s['f1']:6.1f} "
                     f"{100 * text['roles'][name]['f1']:8.1f}")
    lines.append(f"{'macro (roles)':<14} {'':>6} {'':>6} {'':>6} {100 * nodes['macro_f1']:6.1f} "
                 f"{100 * text['macro_f1']:8.1f}")
    return "\n".join(lines)




# ----------------------------------------------------------------------------------------------
# Command


def l3s_store(encoder, limits: PageLimits | None = None, workers: int = 2):
    """The (cached) labelled L3S-GN1 store, its role labels and each page's host."""
    limits = limits or PageLimits()
    store = labelled_store("l3s_gn1", "all", encoder, limits=limits, workers=workers)
    roles = store_roles(store, dataset="l3s_gn1", split="all", limits=limits, workers=workers)
    root = datasets.ensure_unpacked("l3s_gn1")
    urls = datasets._l3s_urls(root)
    hosts = [page_host(urls.get(i)) for i in store.ids]
    return store, roles, hosts


def run_site_split(args) -> dict:
    """Train content + role heads on the training sites, score the roles on the test sites."""
    import torch

    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.model import GrownUpModel, ModelConfig

    torch.manual_seed(args.seed)
    encoder = get_encoder("static")
    store, roles, hosts = l3s_store(encoder, workers=args.workers)
    train_pos, test_pos = site_split(hosts)
    ptr = store.page_ptr
    train_idx = [i for i in train_pos if (roles[ptr[i]:ptr[i + 1]] >= 0).any()]
    cfg = TrainConfig(out="", preset=args.preset, epochs=args.epochs, lr=args.lr,
                      batch_nodes=args.batch_nodes, seed=args.seed, role_weight=1.0,
                      overrides=json.loads(args.model_overrides) if args.model_overrides else {})
    config = ModelConfig.preset(cfg.preset, encoder="static", text_dim=encoder.dim,
                                encoder_version=encoder.version, num_roles=len(ROLES),
                                role_names=list(ROLES), **cfg.overrides)
    model = GrownUpModel(config)
    aux = AuxLabels(np.full(store.num_pages, -1, dtype=np.int64), roles)
    start = time.perf_counter()
    history = fit_epochs(model, store, train_idx, aux, cfg)
    result = evaluate_roles(model, store, test_pos, roles)
    result.update(setting="site-split", train_pages=len(train_idx),
                  train_sites=len({hosts[i] for i in train_pos}),
                  test_sites=len({hosts[i] for i in test_pos}), test_pages=len(test_pos),
                  epochs=cfg.epochs, preset=cfg.preset, overrides=cfg.overrides,
                  final_loss=history[-1]["loss"] if history else None,
                  seconds=round(time.perf_counter() - start, 1))
    return result


def run_model_holdout(args) -> dict:
    """Score a trained model's role head on trainer hold-out pages of unseen sites."""
    from scrapy_grownup.model import GrownUpModel

    directory = resolve_model_dir(args.model)
    model = GrownUpModel.from_pretrained(directory)
    if model.role_head is None:
        raise GrownupError(f"{directory}: the model has no role head")
    encoder = corpus_encoder(model.config.encoder)
    store, roles, hosts = l3s_store(encoder, workers=args.workers)
    held = set(heldout_ids("l3s_gn1"))
    train_hosts = {h for i, h in zip(store.ids, hosts) if i not in held}
    test = [k for k, (i, h) in enumerate(zip(store.ids, hosts))
            if i in held and h not in train_hosts]
    result = evaluate_roles(model, store, test, roles)
    result.update(setting="trainer hold-out, unseen sites", model=str(args.model),
                  test_pages=len(test), test_sites=len({hosts[k] for k in test}))
    return result


def main(argv: list[str] | None = None) -> int:
    return standalone("grownup lab roles-eval", __doc__, add_arguments, run, argv)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None,
                        help="score this trained model on unseen-site hold-out pages instead")
    add_model_shape_arguments(parser)
    parser.add_argument("--epochs", type=int, default=15, help="training epochs (default: 15)")
    parser.add_argument("--lr", type=float, default=2e-3, help="learning rate (default: 0.002)")
    parser.add_argument("--batch-nodes", type=int, default=16_000,
                        help="DOM nodes per training batch (default: 16000)")
    add_run_arguments(parser)


def run(args) -> int:
    return report(args, lambda a: run_model_holdout(a) if a.model else run_site_split(a),
                  format_table)


if __name__ == "__main__":
    sys.exit(main())
