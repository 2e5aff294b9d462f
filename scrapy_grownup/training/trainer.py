"""``grownup train``: fine-tune a GROWN+UP content extractor, resumable and deterministic.

Only training splits are used (Dragnet ``training.txt``, CleanEval dev, the page-type set minus
its hold-out, L3S-GN1 minus its hold-out, the modern sets whole); a deterministic 10% of their
site groups is the dev split for early stopping (``splits.grouped_holdout``: never a page of a
dev site in training); ``dev_fraction=0`` trains a fixed number of epochs and keeps the last. Every epoch writes ``checkpoint.pt`` (model, optimiser, RNG state), so an interrupted
run resumes where it stopped; the best dev model is written to ``best/`` as safetensors + JSON.

Multi-task: ``genre_weight > 0`` adds the Li-ArcFace genre head, trained on the pages that have a
genre label (the page-type set); ``role_weight > 0`` adds the block-role head, trained on the
pages with role annotations (L3S-GN1). Each loss counts only the pages/nodes it has labels for;
early stopping still follows the dev content LCS F1.
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
from .corpus import (DEFAULT_MIN_COVERAGE, corpus_encoder, labelled_store,
                     store_from_records)
from .evaluate import node_f1, text_scores

logger = logging.getLogger(__name__)
TRAIN_SPLITS = {"dragnet": "train", "cleaneval": "train", "pagetype": "all", "l3s_gn1": "all",
                **{name: "all" for name in datasets.MODERN_DATASETS}}
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
    device: str = "cpu"  # where fit_epochs trains ("cuda" on a GPU machine)
    overrides: dict = field(default_factory=dict)  # ModelConfig fields
    content_weight: float = 1.0
    # Datasets whose content labels train the content head (None: all); the others only train
    # the genre / role heads (L3S-GN1's gold leaves captions and the like out, which made the
    # content head drop recall on every test set).
    content_datasets: list[str] | None = None
    genre_weight: float = 0.0  # > 0: genre head, loss on pages with a genre label
    role_weight: float = 0.0   # > 0: role head, loss on nodes with a role label
    role_balance: float = 0.5  # role class weights ~ frequency ** -role_balance (0: none)
    # After training: refit the genre / role heads on the best model's frozen features
    # (kept only where the dev score does not drop); 0 turns it off.
    refit_steps: int = 500
    refit_lr: float = 5e-3


@dataclass
class AuxLabels:
    """Genre id per page and role id per node of a ``GraphStore`` (-1: no label)."""

    genres: np.ndarray  # int64 [pages]
    roles: np.ndarray   # int8 [nodes], aligned with the store's nodes

    @classmethod
    def empty(cls, store: GraphStore) -> "AuxLabels":
        return cls(np.full(store.num_pages, -1, dtype=np.int64),
                   np.full(int(store.page_ptr[-1]), -1, dtype=np.int8))

    @classmethod
    def concat(cls, parts: list["AuxLabels"]) -> "AuxLabels":
        return cls(np.concatenate([p.genres for p in parts]),
                   np.concatenate([p.roles for p in parts]))

    def targets(self, store: GraphStore, indices) -> tuple:
        """``(genre [B], role [N])`` long tensors for ``store.collate(indices)``."""
        import torch

        ptr = store.page_ptr
        roles = np.concatenate([self.roles[ptr[i]:ptr[i + 1]] for i in indices])
        return (torch.from_numpy(self.genres[list(indices)].astype(np.int64)),
                torch.from_numpy(roles.astype(np.int64)))


def class_weights(labels: np.ndarray, num_classes: int, power: float) -> np.ndarray | None:
    """Per-class loss weights ~ frequency ** -power, averaging 1 over the labelled samples."""
    labels = labels[labels >= 0]
    if not power or not len(labels):
        return None
    counts = np.bincount(labels.astype(np.int64), minlength=num_classes).astype(float) + 1.0
    weights = counts ** -power
    return weights * counts.sum() / (weights * counts).sum()


def multitask_loss(model, batch, genre_y, role_y, cfg: TrainConfig, role_weights=None):
    """``(total loss, {part: float})`` of one batch for the heads the model has."""
    from ..model import masked_cross_entropy, weighted_bce_with_smoothing

    output = model(batch, genre_labels=genre_y if model.genre_head is not None else None)
    content = weighted_bce_with_smoothing(
        output.node_logits, batch.y, pos_weight=cfg.pos_weight, neg_weight=cfg.neg_weight,
        smoothing=cfg.label_smoothing)
    loss = cfg.content_weight * content
    parts = {"content": float(content.detach())}
    if output.genre_logits is not None and cfg.genre_weight:
        genre = masked_cross_entropy(output.genre_logits, genre_y)
        loss = loss + cfg.genre_weight * genre
        parts["genre"] = float(genre.detach())
    if output.role_logits is not None and cfg.role_weight:
        role = masked_cross_entropy(output.role_logits, role_y, role_weights)
        loss = loss + cfg.role_weight * role
        parts["role"] = float(role.detach())
    return loss, parts


def head_overrides(cfg: TrainConfig) -> dict:
    """ModelConfig fields of the heads ``cfg`` asks for (explicit overrides win)."""
    from .genre import GENRES
    from .roles import ROLES

    extra: dict = {}
    if cfg.genre_weight:
        extra.update(num_genres=len(GENRES), genre_names=list(GENRES))
    if cfg.role_weight:
        extra.update(num_roles=len(ROLES), role_names=list(ROLES))
    extra.update(cfg.overrides)
    return extra


def role_class_weights(model, store: GraphStore, indices, aux: AuxLabels, cfg: TrainConfig):
    """Role-loss class weights from the role labels of ``indices`` (None: no role loss or no
    weighting)."""
    import torch

    if model.role_head is None or not cfg.role_weight:
        return None
    ptr = store.page_ptr
    seen = np.concatenate([aux.roles[ptr[i]:ptr[i + 1]] for i in indices]) if len(indices) \
        else np.zeros(0, np.int8)
    weights = class_weights(seen, model.config.num_roles, cfg.role_balance)
    return torch.tensor(weights, dtype=torch.float32) if weights is not None else None


def train_epoch(model, store: GraphStore, indices, aux: AuxLabels, cfg: TrainConfig,
                optimizer, epoch: int, role_weights=None, scheduler=None,
                progress=None) -> dict[str, float]:
    """One epoch over store pages ``indices``; returns the mean ``loss`` and per-task losses.

    Every random draw derives from ``(cfg.seed, epoch)``: a resumed run repeats exactly what
    the uninterrupted run would have done. ``progress`` wraps the batch list (a progress bar).
    """
    import torch

    from ..model import random_flip_positions

    torch.manual_seed(cfg.seed * 100_003 + epoch)
    generator = torch.Generator().manual_seed(cfg.seed * 100_003 + epoch)
    order = np.random.default_rng([cfg.seed, epoch]).permutation(len(indices))
    model.train()
    sizes = [store.num_nodes(i) for i in indices]
    batches = node_budget_batches(sizes, cfg.batch_nodes, order)
    sums: dict[str, float] = {}
    for batch_ids in (progress(batches) if progress is not None else batches):
        chosen = [indices[k] for k in batch_ids]
        batch = store.collate(chosen)
        random_flip_positions(batch, generator)  # on the CPU: the generator's device
        genre_y, role_y = aux.targets(store, chosen)
        if cfg.device != "cpu":
            batch, genre_y, role_y = (batch.to(cfg.device), genre_y.to(cfg.device),
                                      role_y.to(cfg.device))
        loss, parts = multitask_loss(model, batch, genre_y, role_y, cfg, role_weights)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        for key, value in (("loss", float(loss.detach())), *parts.items()):
            sums[key] = sums.get(key, 0.0) + value
    return {key: value / max(1, len(batches)) for key, value in sums.items()}


def fit_epochs(model, store: GraphStore, indices, aux: AuxLabels, cfg: TrainConfig,
               log=None) -> list[dict]:
    """Train ``model`` on store pages for ``cfg.epochs`` epochs (AdamW, cosine decay to 5%).

    No dev split, no checkpoints: for cross-validation folds and quick experiments. Returns
    the per-epoch mean losses. Deterministic for a given ``cfg.seed``.
    """
    import math

    import torch

    indices = list(indices)
    model.to(cfg.device)
    role_weights = role_class_weights(model, store, indices, aux, cfg)
    if role_weights is not None:
        role_weights = role_weights.to(cfg.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sizes = [store.num_nodes(i) for i in indices]
    steps_per_epoch = len(node_budget_batches(sizes, cfg.batch_nodes))
    total = max(1, cfg.epochs * steps_per_epoch)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(step, total)
                                                                   / total)))
    history = []
    for epoch in range(1, cfg.epochs + 1):
        start = time.perf_counter()
        losses = train_epoch(model, store, indices, aux, cfg, optimizer, epoch, role_weights,
                             scheduler)
        record = {"epoch": epoch, **losses, "seconds": round(time.perf_counter() - start, 1)}
        history.append(record)
        if log is not None:
            log(record)
    model.eval()
    return history


def aux_labels(name: str, store: GraphStore, cfg: TrainConfig, records=None, split=None,
               limits: PageLimits | None = None) -> AuxLabels:
    """Genre and role labels of one dataset's store (only for the heads ``cfg`` trains)."""
    aux = AuxLabels.empty(store)
    if cfg.genre_weight:
        from .genre import genre_index, page_types

        if records is not None:
            types = {r.id: r.extra.get("page_type") for r in records}
        elif name == "pagetype":
            types = page_types(name, split)
        else:
            types = {}
        aux.genres[:] = [genre_index(types.get(i)) for i in store.ids]
    if cfg.role_weight:
        from .roles import store_roles

        if records is not None:
            if any(r.extra.get("roles") for r in records):
                aux.roles[:] = store_roles(store, records=records, limits=limits,
                                           workers=cfg.workers)
        elif name == "l3s_gn1":
            aux.roles[:] = store_roles(store, dataset=name, split=split, limits=limits,
                                       workers=cfg.workers)
    return aux


def train_ids(dataset: str) -> tuple[str, set[str] | None]:
    """The split to read and, for sets without a standard split, the ids kept for training."""
    split = TRAIN_SPLITS[dataset]
    if split != "all" or dataset in datasets.MODERN_DATASETS:
        # the modern sets keep no page hold-out: they are scored by the cross-site protocols
        # (``grownup evaluate --protocol site-cv``), whose folds are whole sites
        return split, None
    return split, set(_holdout(dataset)[0])


def heldout_ids(dataset: str) -> list[str]:
    return _holdout(dataset)[1]


def _holdout(dataset: str) -> tuple[list[str], list[str]]:
    ids = [i for i, _ in datasets.list_ids(dataset)]
    return datasets.holdout_split(ids, HOLDOUT_FRACTION, HOLDOUT_SEED)


def _dev_ids(name: str, split: str, ids: list[str], records, cfg: TrainConfig) -> set[str]:
    """The dev pages among ``ids``: whole site groups (``splits.grouped_holdout``), so early
    stopping measures pages of sites the model does not train on."""
    from ..splits import grouped_holdout

    if not ids or cfg.dev_fraction <= 0:
        return set()
    wanted = set(ids)
    found = records if records is not None else datasets.load(name, split=split, ids=ids)
    chosen = [r for r in found if r.id in wanted]
    _, held = grouped_holdout(chosen, cfg.dev_fraction, f"dev-{cfg.seed}")
    return {chosen[k].id for k in held}


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

    from ..model import GrownUpModel, ModelConfig
    from .roles import role_scores, store_predictions

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    encoder = corpus_encoder(cfg.encoder)
    limits = PageLimits()

    # -- data: train and dev pages of every dataset, one merged store --------------------------
    stores, train_idx, dev_idx, dev_corpus, dev_refs, auxes = [], [], [], [], [], []
    dev_content: list[bool] = []
    offset = 0
    names = list(records) if records else cfg.datasets
    for name in names:
        if records:
            split, keep = "given", None
            store = store_from_records(records[name], encoder, cfg.min_coverage, limits,
                                       cfg.workers, meta={"dataset": name})
        else:
            split, keep = train_ids(name)
            if name == "pagetype" and cfg.genre_weight:
                # Every page has a genre; pages whose gold text aligns badly (a third of the
                # collection and forum pages) stay in, with content labels -1.
                from .genre import genre_corpus

                store, _ = genre_corpus(encoder, limits, cfg.workers, cfg.min_coverage)
            else:
                store = labelled_store(name, split, encoder, cfg.min_coverage, limits,
                                       cfg.workers)
        if cfg.content_datasets is not None and name not in cfg.content_datasets:
            # This dataset trains the other heads only.
            store.arrays["labels"] = np.full_like(store.arrays["labels"], -1)
        part = aux_labels(name, store, cfg, records[name] if records else None, split, limits)
        auxes.append(part)
        chosen = _subset(store, keep, cfg.max_pages)
        ptr = store.page_ptr
        has_content = {i for i in chosen if (store.arrays["labels"][ptr[i]:ptr[i + 1]] == 1).any()}
        has_roles = {i for i in chosen if (part.roles[ptr[i]:ptr[i + 1]] >= 0).any()}
        # Only pages with content or role labels can be dev pages (the others train the other
        # heads); the dev text scores use the pages with content labels.
        ids = [store.ids[i] for i in chosen if i in has_content or i in has_roles]
        dev_set = _dev_ids(name, split, ids, records[name] if records else None, cfg)
        for i in chosen:
            if store.ids[i] in dev_set:
                dev_idx.append(offset + i)
                dev_corpus.append(name)
                dev_content.append(i in has_content)
            else:
                train_idx.append(offset + i)
        dev_refs.append((name, split, [store.ids[i] for i in chosen
                                       if store.ids[i] in dev_set and i in has_content]))
        stores.append(store)
        offset += store.num_pages
    store = GraphStore.concat(stores)
    aux = AuxLabels.concat(auxes)
    dev_pages, dev_golds = [], []
    dev_records = {}
    for name, split, ids in dev_refs:
        wanted = set(ids)
        found = ([r for r in records[name] if r.id in wanted] if records
                 else datasets.load(name, split=split, ids=ids))
        dev_records.update({(name, r.id): r for r in found})
    dev_text_idx = [i for i, c in zip(dev_idx, dev_content) if c]
    for i, name, c in zip(dev_idx, dev_corpus, dev_content):  # ids: unique within a corpus
        if not c:
            continue
        record = dev_records[(name, store.ids[i])]
        dev_pages.append(parse_page(record.html, url=record.url, limits=limits,
                                    content_type=record.extra.get("content_type"),
                                    positions=False))
        dev_golds.append(record.gold)
    logger.info("training on %d pages, dev %d pages", len(train_idx), len(dev_idx))

    # -- model, optimiser, resume --------------------------------------------------------------
    model_config = ModelConfig.preset(cfg.preset, encoder=cfg.encoder, text_dim=encoder.dim,
                                      encoder_version=encoder.version, **head_overrides(cfg))
    torch.manual_seed(cfg.seed)  # the same initial weights for the same seed
    model = GrownUpModel(model_config)
    if cfg.init:  # backbone (+ trained heads of the same shape); see pretraining.init
        from ..pretraining.init import load_pretrained

        load_pretrained(model, cfg.init)
    role_weights = role_class_weights(model, store, train_idx, aux, cfg)
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

    # (a run that stopped early stays stopped when the command is repeated)
    while state["epoch"] < cfg.epochs and (state["best_epoch"] < 0 or
                                           state["epoch"] - state["best_epoch"] < cfg.patience):
        epoch = state["epoch"] + 1
        start = time.perf_counter()
        losses = train_epoch(model, store, train_idx, aux, cfg, optimizer, epoch, role_weights,
                             progress=lambda batches: tqdm(batches, desc=f"epoch {epoch}",
                                                           leave=False, mininterval=5))
        preds = store_predictions(model, store, dev_idx, cfg.batch_nodes)
        probs = [p["content"] for p, c in zip(preds, dev_content) if c]
        labels = np.concatenate([store.arrays["labels"][store.page_ptr[i]:store.page_ptr[i + 1]]
                                 for i in dev_text_idx]) if dev_text_idx else np.zeros(0)
        dev = text_scores(dev_pages, dev_golds, probs) if dev_text_idx else {"lcs_f1": 0.0}
        dev["node_f1"] = node_f1(labels, np.concatenate(probs)) if dev_text_idx else 0.0
        dev.update(_dev_head_scores(model, store, aux, dev_idx, preds, role_scores))
        record = {"epoch": epoch, "loss": losses.pop("loss"), "seconds":
                  round(time.perf_counter() - start, 1),
                  **{f"loss_{k}": v for k, v in losses.items()},
                  **{f"dev_{k}": v for k, v in dev.items()}}
        state["history"].append(record)
        state["epoch"] = epoch
        # without dev pages (``dev_fraction=0``: a fixed number of epochs) the last one is best
        improved = dev["lcs_f1"] > state["best_f1"] or not dev_text_idx
        if improved:
            state["best_f1"], state["best_epoch"] = dev["lcs_f1"], epoch
            model.save_pretrained(out / "best", encoder=cfg.encoder,
                                  encoder_version=encoder.version,
                                  metadata={"train": asdict(cfg), "dev": record})
        log.write(json.dumps(record) + "\n")
        log.flush()
        heads = "".join(f" {key} {dev[key]:.4f}" for key in ("genre_accuracy", "role_macro_f1")
                        if key in dev)
        logger.info("epoch %d loss %.4f dev LCS F1 %.4f node F1 %.4f%s%s", epoch,
                    record["loss"], dev["lcs_f1"], dev["node_f1"], heads,
                    " *" if improved else "")
        _save_checkpoint(checkpoint, model, optimizer, state)
        if dev_text_idx and epoch - state["best_epoch"] >= cfg.patience:
            logger.info("early stop: no dev improvement for %d epochs", cfg.patience)
            break
    log.close()
    result = {"best_dev_lcs_f1": state["best_f1"], "best_epoch": state["best_epoch"],
              "epochs": state["epoch"], "model_dir": str(out / "best")}
    if (model.genre_head is not None or model.role_head is not None) and cfg.refit_steps \
            and "refit" not in state and (out / "best").is_dir():
        best = GrownUpModel.from_pretrained(out / "best")
        _, doc = GrownUpModel.read_config(out / "best")
        state["refit"] = refit_heads(best, store, train_idx, dev_idx, aux, cfg)
        logger.info("heads refit on frozen features: %s", json.dumps(state["refit"]))
        best.save_pretrained(out / "best", encoder=cfg.encoder, encoder_version=encoder.version,
                             metadata={**(doc.get("metadata") or {}), "refit": state["refit"]})
        _save_checkpoint(checkpoint, model, optimizer, state)
    if "refit" in state:
        result["refit"] = state["refit"]
    return result


def refit_heads(model, store: GraphStore, train_idx, dev_idx, aux: AuxLabels,
                cfg: TrainConfig) -> dict:
    """Refit the genre and role heads of ``model`` on its frozen backbone's features.

    Multi-task training leaves the heads noisy from epoch to epoch while the best epoch is
    picked by content F1; this makes the shipped heads fit the shipped backbone
    (``heads.fit_genre_head`` / ``fit_role_head`` on features of one backbone pass). A refit
    head replaces the model's only when its dev score is at least as good. Returns the dev
    scores.
    """
    import copy

    import torch

    from .heads import (HeadFitConfig, fit_genre_head, fit_role_head, frozen_features,
                        predict_genre)
    from .roles import role_scores

    fit = HeadFitConfig(genre_steps=cfg.refit_steps, role_steps=cfg.refit_steps,
                        role_lr=cfg.refit_lr, role_balance=cfg.role_balance, seed=cfg.seed,
                        batch_nodes=cfg.batch_nodes)
    ptr = store.page_ptr
    train_idx, dev_idx = list(train_idx), list(dev_idx)
    x_genre, nodes = frozen_features(model, store, train_idx + dev_idx, aux.roles,
                                     cfg.batch_nodes)
    is_train = [True] * len(train_idx) + [False] * len(dev_idx)
    pages = train_idx + dev_idx
    info: dict = {}
    if model.genre_head is not None:
        train_g = [k for k, i in enumerate(pages) if is_train[k] and aux.genres[i] >= 0]
        dev_g = [k for k, i in enumerate(pages) if not is_train[k] and aux.genres[i] >= 0]
        if train_g and dev_g:
            y_dev = aux.genres[[pages[k] for k in dev_g]]
            before = float((predict_genre(model, x_genre[dev_g]).argmax(1) == y_dev).mean())
            candidate = copy.deepcopy(model)
            fit_genre_head(candidate, x_genre[train_g], aux.genres[[pages[k] for k in train_g]],
                           fit)
            after = float((predict_genre(candidate, x_genre[dev_g]).argmax(1) == y_dev).mean())
            kept = after >= before
            if kept:
                model.genre_readout, model.genre_norm, model.genre_head = (
                    candidate.genre_readout, candidate.genre_norm, candidate.genre_head)
            info["genre"] = {"dev_accuracy_before": before, "dev_accuracy_after": after,
                             "dev_pages": len(dev_g), "kept": kept}
    if model.role_head is not None:
        has = [k for k, i in enumerate(pages) if (aux.roles[ptr[i]:ptr[i + 1]] >= 0).any()]
        train_r = [k for k in has if is_train[k]]
        dev_r = [k for k in has if not is_train[k]]
        if train_r and dev_r:
            x_dev = torch.cat([nodes[k][0] for k in dev_r])
            y_dev = torch.cat([nodes[k][1] for k in dev_r]).numpy()

            def macro_f1(head) -> float:
                with torch.no_grad():
                    pred = head(x_dev).argmax(1).numpy()
                return role_scores(y_dev, pred, names=model.role_names)["macro_f1"]

            before = macro_f1(model.role_head)
            candidate = copy.deepcopy(model)
            fit_role_head(candidate, torch.cat([nodes[k][0] for k in train_r]),
                          torch.cat([nodes[k][1] for k in train_r]), fit)
            after = macro_f1(candidate.role_head)
            kept = after >= before
            if kept:
                model.role_head = candidate.role_head
            info["roles"] = {"dev_macro_f1_before": before, "dev_macro_f1_after": after,
                             "dev_nodes": int(len(y_dev)), "kept": kept}
    return info


def _dev_head_scores(model, store, aux: AuxLabels, dev_idx, preds, role_scores) -> dict:
    """Dev genre accuracy and role macro F1 (only for the heads the model has)."""
    out: dict = {}
    if model.genre_head is not None:
        gold = aux.genres[list(dev_idx)] if dev_idx else np.zeros(0, np.int64)
        mask = gold >= 0
        if mask.any():
            pred = np.array([int(np.argmax(p["genre"])) for p in preds])
            out["genre_accuracy"] = float((pred[mask] == gold[mask]).mean())
            out["genre_pages"] = int(mask.sum())
    if model.role_head is not None and dev_idx:
        gold = np.concatenate([aux.roles[store.page_ptr[i]:store.page_ptr[i + 1]]
                               for i in dev_idx])
        if (gold >= 0).any():
            pred = np.concatenate([p["roles"].argmax(1) for p in preds])
            out["role_macro_f1"] = role_scores(gold, pred, names=model.role_names)["macro_f1"]
    return out


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
