"""``grownup pretrain``: self-supervised pre-training of the backbone on a corpus directory.

Both objectives of GROWN+UP 2.4 at once, with the paper's loss weights by default (see
``heads``): masked node-feature prediction on every page of each batch, and same-website
prediction on the batch's pairs with in-batch permutation negatives.

Every epoch writes ``checkpoint.pt`` (backbone + pre-training heads, optimiser, RNG state,
epoch, history), so an interrupted run resumes where it stopped; every random draw of an epoch
derives from ``(seed, epoch)``, so a resumed run does exactly what the uninterrupted one would
have done. ``last/`` (every epoch) and ``best/`` (lowest dev loss; train loss without a dev
split) are ``GrownUpModel`` directories (safetensors + JSON): ``grownup train --init OUT/best``
fine-tunes from the backbone. The pre-training heads are kept beside the model in
``pretrain_heads.safetensors``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from scrapy_grownup.pretraining.data import PretrainData, Unit, batch_layout
from scrapy_grownup.pretraining.heads import PretrainHeads, check_weights, pair_negatives, total_loss
from scrapy_grownup.pretraining.masking import MASK_NODES, MASK_RATE, make_targets, mask_inputs, select_nodes

logger = logging.getLogger(__name__)
HEADS_FILE = "pretrain_heads.safetensors"
CHECKPOINT = "checkpoint.pt"


@dataclass
class PretrainConfig:
    data: str                      # corpus directory (``grownup warc --output``)
    out: str                       # run directory (resumes when it has a checkpoint)
    preset: str = "small"
    overrides: dict = field(default_factory=dict)  # ModelConfig fields
    epochs: int = 10
    lr: float = 1e-3               # paper 4.1: Adam, 0.001
    weight_decay: float = 0.0
    batch_pages: int = 32          # pages per batch (a pair counts two)
    batch_nodes: int = 40_000      # and at most this many nodes
    mask_nodes: int = MASK_NODES   # M per page
    mask_rate: float = MASK_RATE
    weights: dict = field(default_factory=dict)  # changes to heads.PAPER_WEIGHTS
    permute_ratio: float = 0.5     # share of a batch's pairs permuted into negatives
    dev_fraction: float = 0.1      # share of sites held out for the dev loss
    seed: int = 0
    max_pages: int | None = None   # use about this many pages of the corpus
    threads: int | None = None
    cache_shards: int = 8
    flip_positions: bool = True    # random sign of the Laplacian eigenvectors (train only)
    progress: bool = True


class PretrainModel(nn.Module):
    """A ``GrownUpModel`` (only its backbone is trained here) and the pre-training heads."""

    def __init__(self, model, heads: PretrainHeads):
        super().__init__()
        self.model = model
        self.heads = heads


def build_model(cfg: PretrainConfig, corpus) -> PretrainModel:
    from scrapy_grownup.model import GrownUpModel, ModelConfig

    index = corpus.index
    text_dim = int(index.get("text_dim") or corpus.load_shard(0).strings.shape[1])
    config = ModelConfig.preset(
        cfg.preset, encoder=index.get("encoder") or "static", text_dim=text_dim,
        feature_version=str(index.get("feature_version", "1")),
        encoder_version=index.get("encoder_version"), **cfg.overrides)
    torch.manual_seed(cfg.seed)
    model = GrownUpModel(config)
    return PretrainModel(model, PretrainHeads(config.hidden_size, text_dim))


def batch_losses(pm: PretrainModel, data: PretrainData, units: list[Unit], cfg: PretrainConfig,
                 weights: dict, generator: torch.Generator, train: bool = True):
    """``(total loss, {part: loss tensor}, {stat: float})`` of one batch of units."""
    from scrapy_grownup.model import random_flip_positions

    pages, positions, sites = batch_layout(units)
    batch = data.collate(pages)
    graph = batch.batch
    if train and cfg.flip_positions:
        random_flip_positions(graph, generator)
    nodes = select_nodes(graph.ptr, cfg.mask_nodes, generator)
    targets = make_targets(graph, batch.raw, nodes)
    blocks = [name for name, _ in pm.model.config.input_blocks]
    mask_inputs(graph, targets, blocks, cfg.mask_rate, generator)
    node_features, page_features = pm.model.backbone(graph)
    parts = pm.heads.mask_losses(node_features, targets)
    stats = {"masked_nodes": float(targets.masked.sum()), "target_nodes": float(len(targets))}
    if len(positions) and weights.get("site"):
        parts["site"], site_stats = site_objective(pm.heads, page_features, positions, sites,
                                                   cfg.permute_ratio)
        stats.update(site_stats)
    if not train:
        with torch.no_grad():
            stats.update({f"{k}_accuracy": v for k, v in
                          pm.heads.mask_accuracy(node_features, targets).items()})
    return total_loss(parts, weights), parts, stats


def site_objective(heads: PretrainHeads, page_features: torch.Tensor, positions: np.ndarray,
                   sites: np.ndarray, ratio: float = 0.5) -> tuple[torch.Tensor, dict]:
    """Same-website loss of a batch's pairs (graph positions ``[P, 2]``, site hashes ``[P]``)
    with in-batch negatives: the second pages are permuted by ``pair_negatives`` and each
    permuted pair is labelled by comparing site hashes."""
    order, labels = pair_negatives(sites, sites, ratio)
    first = page_features[torch.from_numpy(positions[:, 0])]
    second = page_features[torch.from_numpy(positions[order, 1])]
    label_t = torch.from_numpy(labels)
    loss = heads.site_loss(first, second, label_t)
    with torch.no_grad():
        z = heads.site_probability(first, second)
        accuracy = float(((z > 0.5).float() == label_t).float().mean())
    return loss, {"site_accuracy": accuracy, "pairs": float(len(labels)),
                  "negatives": float((labels == 0).sum())}


def evaluate(pm: PretrainModel, data: PretrainData, cfg: PretrainConfig, weights: dict) -> dict:
    """Mean dev losses with fixed masks (the same nodes every epoch), no dropout."""
    if not data.dev_units:
        return {}
    generator = torch.Generator().manual_seed(cfg.seed * 100_003)
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    pm.eval()
    with torch.no_grad():
        for units in data.batches(data.dev_units, cfg.batch_pages, cfg.batch_nodes):
            loss, parts, stats = batch_losses(pm, data, units, cfg, weights, generator,
                                              train=False)
            for key, value in [("loss", float(loss)), *((k, float(v)) for k, v in parts.items()),
                               *stats.items()]:
                sums[key] = sums.get(key, 0.0) + value
                counts[key] = counts.get(key, 0.0) + 1
    return {key: sums[key] / counts[key] for key in sums}


def pretrain(cfg: PretrainConfig) -> dict:
    """Pre-train per ``cfg``; returns the best loss and where the model is."""
    from tqdm.auto import tqdm

    from scrapy_grownup.warc.corpus import load_corpus

    weights = check_weights(cfg.weights)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus(cfg.data, cache_shards=cfg.cache_shards)
    data = PretrainData(corpus, cfg.dev_fraction, cfg.seed, cfg.max_pages)
    if not data.train_units:
        raise ValueError(f"{cfg.data}: no page to pre-train on")
    pm = build_model(cfg, corpus)
    optimizer = torch.optim.AdamW(pm.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    state = {"epoch": 0, "best_loss": None, "best_epoch": -1, "history": [],
             "model_config": pm.model.config.to_dict()}
    checkpoint = out / CHECKPOINT
    if checkpoint.exists():
        state = load_checkpoint(checkpoint, pm, optimizer)
        logger.info("resumed from %s at epoch %d", checkpoint, state["epoch"])
    (out / "pretrain_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    log = (out / "pretrain.log").open("a", encoding="utf-8")
    try:
        while state["epoch"] < cfg.epochs:
            epoch = state["epoch"] + 1
            torch.manual_seed(cfg.seed * 100_003 + epoch)
            generator = torch.Generator().manual_seed(cfg.seed * 100_003 + epoch)
            rng = np.random.default_rng([cfg.seed, epoch])
            batches = data.batches(data.train_units, cfg.batch_pages, cfg.batch_nodes, rng)
            pm.train()
            sums: dict[str, float] = {}
            start = time.perf_counter()
            bar = tqdm(batches, desc=f"pretrain epoch {epoch}/{cfg.epochs}", leave=False,
                       mininterval=2, disable=not cfg.progress)
            for units in bar:
                loss, parts, stats = batch_losses(pm, data, units, cfg, weights, generator)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(pm.parameters(), 1.0)
                optimizer.step()
                values = {"loss": float(loss.detach()),
                          **{k: float(v.detach()) for k, v in parts.items()}}
                for key, value in values.items():
                    sums[key] = sums.get(key, 0.0) + value
                bar.set_postfix(loss=f"{values['loss']:.3f}", refresh=False)
            bar.close()
            record = {"epoch": epoch, **{k: v / max(1, len(batches)) for k, v in sums.items()},
                      "batches": len(batches), "seconds": round(time.perf_counter() - start, 1)}
            dev = evaluate(pm, data, cfg, weights)
            record.update({f"dev_{k}": v for k, v in dev.items()})
            score = dev.get("loss", record["loss"])
            state["history"].append(record)
            state["epoch"] = epoch
            improved = state["best_loss"] is None or score < state["best_loss"]
            save_model(pm, out / "last", cfg, record)
            if improved:
                state["best_loss"], state["best_epoch"] = score, epoch
                save_model(pm, out / "best", cfg, record)
            log.write(json.dumps(record) + "\n")
            log.flush()
            logger.info("pretrain epoch %d loss %.4f dev %.4f (%s)%s", epoch, record["loss"],
                        dev.get("loss", float("nan")),
                        ", ".join(f"{k} {v:.3f}" for k, v in record.items()
                                  if k not in ("epoch", "loss", "batches", "seconds")
                                  and not k.startswith("dev_")),
                        " *" if improved else "")
            save_checkpoint(checkpoint, pm, optimizer, state)
    finally:
        log.close()
    return {"best_loss": state["best_loss"], "best_epoch": state["best_epoch"],
            "epochs": state["epoch"], "model_dir": str(out / "best"),
            "train_units": len(data.train_units), "dev_units": len(data.dev_units)}


def save_model(pm: PretrainModel, directory: Path, cfg: PretrainConfig, record: dict) -> None:
    """The ``GrownUpModel`` (its content head marked untrained) and the heads beside it."""
    from safetensors.torch import save_file

    from scrapy_grownup.model.config import saved_tensor_name

    model = pm.model
    # by the names saved weights give the heads (``config.saved_tensor_name``)
    untrained = [saved_tensor_name(name) for name in ("node_head", "page_type_head", "role_head")
                 if getattr(model, name, None) is not None]
    model.save_pretrained(directory, metadata={"pretrain": asdict(cfg), "epoch": record,
                                               "untrained_heads": untrained})
    tensors = {k: v.detach().cpu().contiguous() for k, v in pm.heads.state_dict().items()}
    tmp = directory / f".{HEADS_FILE}.tmp-{os.getpid()}"
    save_file(tensors, str(tmp), metadata={"heads": json.dumps(pm.heads.shape_config())})
    os.replace(tmp, directory / HEADS_FILE)


def load_heads(directory: str | os.PathLike) -> PretrainHeads:
    """The pre-training heads saved beside a pre-trained model."""
    from safetensors import safe_open

    path = Path(directory) / HEADS_FILE
    with safe_open(str(path), framework="pt") as handle:
        shapes = json.loads((handle.metadata() or {})["heads"])
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    heads = PretrainHeads(**shapes)
    heads.load_state_dict(tensors)
    return heads


def save_checkpoint(path: Path, pm: PretrainModel, optimizer, state: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"model": pm.state_dict(), "optimizer": optimizer.state_dict(),
                "state": json.dumps(state), "torch_rng": torch.get_rng_state()}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path, pm: PretrainModel, optimizer) -> dict:
    saved = torch.load(path, weights_only=True)
    state = json.loads(saved["state"])
    if state.get("model_config") != pm.model.config.to_dict():
        raise ValueError(f"{path}: the checkpoint is of another model configuration; use "
                         f"another --out or the settings it was started with")
    pm.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    torch.set_rng_state(saved["torch_rng"])
    return state


__all__ = ["PretrainConfig", "PretrainModel", "batch_losses", "build_model", "evaluate",
           "load_heads", "pretrain", "save_model", "site_objective"]
