"""``grownup train``: fine-tune a GROWN+UP content extractor, resumable and deterministic.

Only training splits are used (Dragnet ``training.txt``, CleanEval dev, the page-type set minus
its hold-out, L3S-GN1 minus its hold-out); a deterministic 10% of them is the dev split for early
stopping. Every epoch writes ``checkpoint.pt`` (model, optimiser, RNG state), so an interrupted
run resumes where it stopped; the best dev model is written to ``best/`` as safetensors + JSON.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .. import datasets
from ..dom import parse_page
from ..limits import PageLimits
from ..store import GraphStore, node_budget_batches
from .corpus import DEFAULT_MIN_COVERAGE, labelled_store, store_from_records
from .evaluate import node_f1, predict_store, text_scores

logger = logging.getLogger(__name__)
TRAIN_SPLITS = {"dragnet": "train", "cleaneval": "train", "pagetype": "all", "l3s_gn1": "all"}
# Page-level hold-outs of the datasets without a standard split (never trained on).
HOLDOUT_FRACTION = 0.2
HOLDOUT_SEED = "grownup-holdout"


@dataclass
class TrainConfig:
    out: str
    datasets: list[str] = field(default_factory=lambda: ["dragnet"])
    encoder: str = "static"
    preset: str = "small"
    epochs: int = 30
    lr: float = 1e-3
    weight_decay: float = 1e-4
    batch_nodes: int = 16_000
    patience: int = 6
    seed: int = 0
    dev_fraction: float = 0.1
    pos_weight: float = 1.0
    neg_weight: float = 1.0
    label_smoothing: float = 0.01
    min_coverage: float = DEFAULT_MIN_COVERAGE
    max_pages: int | None = None  # per dataset; for quick experiments and tests
    init: str | None = None  # a pre-trained model directory whose backbone is loaded
    threads: int | None = None
    workers: int = 2
    overrides: dict = field(default_factory=dict)  # ModelConfig fields


def train_ids(dataset: str) -> tuple[str, set[str] | None]:
    """The split to read and, for sets without a standard split, the ids kept for training."""
    split = TRAIN_SPLITS[dataset]
    if split != "all":
        return split, None
    return split, set(_holdout(dataset)[0])


def heldout_ids(dataset: str) -> list[str]:
    return _holdout(dataset)[1]


def _holdout(dataset: str) -> tuple[list[str], list[str]]:
    ids = [i for i, _ in datasets.list_ids(dataset)]
    return datasets.holdout_split(ids, HOLDOUT_FRACTION, HOLDOUT_SEED)


def _subset(store: GraphStore, keep: set[str] | None, limit: int | None) -> list[int]:
    idx = [i for i, page_id in enumerate(store.ids) if keep is None or page_id in keep]
    return idx[:limit] if limit else idx


def train(cfg: TrainConfig, records: dict | None = None) -> dict:
    """Train per ``cfg``; returns the best dev scores and where the model is.

    ``records`` maps a corpus name to its ``PageRecord`` list and replaces the named datasets
    (tests and users with their own labelled pages use it).
    """
    import torch
    from tqdm.auto import tqdm

    from ..encoders import get_encoder
    from ..model import GrownUpModel, ModelConfig, random_flip_positions, \
        weighted_bce_with_smoothing

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    encoder = get_encoder(cfg.encoder)
    limits = PageLimits()

    # -- data: train and dev pages of every dataset, one merged store --------------------------
    stores, train_idx, dev_idx, dev_corpus, dev_refs = [], [], [], [], []
    offset = 0
    names = list(records) if records else cfg.datasets
    for name in names:
        if records:
            split, keep = "given", None
            store = store_from_records(records[name], encoder, cfg.min_coverage, limits,
                                       cfg.workers, meta={"dataset": name})
        else:
            split, keep = train_ids(name)
            store = labelled_store(name, split, encoder, cfg.min_coverage, limits, cfg.workers)
        chosen = _subset(store, keep, cfg.max_pages)
        ids = [store.ids[i] for i in chosen]
        train_part, dev_part = datasets.holdout_split(ids, cfg.dev_fraction, f"dev-{cfg.seed}")
        dev_set = set(dev_part)
        for i in chosen:
            if store.ids[i] in dev_set:
                dev_idx.append(offset + i)
                dev_corpus.append(name)
            else:
                train_idx.append(offset + i)
        dev_refs.append((name, split, dev_part))
        stores.append(store)
        offset += store.num_pages
    store = GraphStore.concat(stores)
    dev_pages, dev_golds = [], []
    dev_records = {}
    for name, split, ids in dev_refs:
        wanted = set(ids)
        found = ([r for r in records[name] if r.id in wanted] if records
                 else datasets.load(name, split=split, ids=ids))
        dev_records.update({(name, r.id): r for r in found})
    for i, name in zip(dev_idx, dev_corpus):  # ids are unique within a corpus only
        record = dev_records[(name, store.ids[i])]
        dev_pages.append(parse_page(record.html, url=record.url, limits=limits,
                                    content_type=record.extra.get("content_type"),
                                    positions=False))
        dev_golds.append(record.gold)
    logger.info("training on %d pages, dev %d pages", len(train_idx), len(dev_idx))

    # -- model, optimiser, resume --------------------------------------------------------------
    model_config = ModelConfig.preset(cfg.preset, encoder=cfg.encoder, text_dim=encoder.dim,
                                      encoder_version=encoder.version, **cfg.overrides)
    model = GrownUpModel(model_config)
    if cfg.init:
        pretrained = GrownUpModel.from_pretrained(cfg.init, expected_encoder=cfg.encoder)
        model.backbone.load_state_dict(pretrained.backbone.state_dict())
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    state = {"epoch": 0, "best_f1": -1.0, "best_epoch": -1, "history": []}
    checkpoint = out / "checkpoint.pt"
    if checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=True)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        state = json.loads(saved["state"])
        logger.info("resumed from %s at epoch %d", checkpoint, state["epoch"])
    (out / "train_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    log = (out / "train.log").open("a", encoding="utf-8")
    sizes = [store.num_nodes(i) for i in train_idx]

    while state["epoch"] < cfg.epochs:
        epoch = state["epoch"] + 1
        # Every random draw of an epoch derives from (seed, epoch): a resumed run repeats
        # exactly what the uninterrupted run would have done.
        torch.manual_seed(cfg.seed * 100_003 + epoch)
        generator = torch.Generator().manual_seed(cfg.seed * 100_003 + epoch)
        order = np.random.default_rng([cfg.seed, epoch]).permutation(len(train_idx))
        model.train()
        batches = node_budget_batches(sizes, cfg.batch_nodes, order)
        losses, start = [], time.perf_counter()
        for batch_ids in tqdm(batches, desc=f"epoch {epoch}", leave=False, mininterval=5):
            batch = store.collate([train_idx[k] for k in batch_ids])
            random_flip_positions(batch, generator)
            output = model(batch)
            loss = weighted_bce_with_smoothing(
                output.node_logits, batch.y, pos_weight=cfg.pos_weight,
                neg_weight=cfg.neg_weight, smoothing=cfg.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(float(loss.detach()))
        probs = predict_store(model, store, dev_idx, cfg.batch_nodes)
        labels = np.concatenate([store.arrays["labels"][store.page_ptr[i]:store.page_ptr[i + 1]]
                                 for i in dev_idx]) if dev_idx else np.zeros(0)
        dev = text_scores(dev_pages, dev_golds, probs) if dev_idx else {"lcs_f1": 0.0}
        dev["node_f1"] = node_f1(labels, np.concatenate(probs)) if dev_idx else 0.0
        record = {"epoch": epoch, "loss": float(np.mean(losses)), "seconds":
                  round(time.perf_counter() - start, 1), **{f"dev_{k}": v for k, v in dev.items()}}
        state["history"].append(record)
        state["epoch"] = epoch
        improved = dev["lcs_f1"] > state["best_f1"]
        if improved:
            state["best_f1"], state["best_epoch"] = dev["lcs_f1"], epoch
            model.save_pretrained(out / "best", encoder=cfg.encoder,
                                  encoder_version=encoder.version,
                                  metadata={"train": asdict(cfg), "dev": record})
        log.write(json.dumps(record) + "\n")
        log.flush()
        logger.info("epoch %d loss %.4f dev LCS F1 %.4f node F1 %.4f%s", epoch,
                    record["loss"], dev["lcs_f1"], dev["node_f1"], " *" if improved else "")
        _save_checkpoint(checkpoint, model, optimizer, state)
        if epoch - state["best_epoch"] >= cfg.patience:
            logger.info("early stop: no dev improvement for %d epochs", cfg.patience)
            break
    log.close()
    return {"best_dev_lcs_f1": state["best_f1"], "best_epoch": state["best_epoch"],
            "epochs": state["epoch"], "model_dir": str(out / "best")}


def _save_checkpoint(path: Path, model, optimizer, state: dict) -> None:
    import os

    import torch

    tmp = path.with_name(path.name + ".tmp")
    torch.save({
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "state": json.dumps(state),
    }, tmp)
    os.replace(tmp, path)
