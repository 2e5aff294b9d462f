"""``grownup train``: fine-tune a GROWN+UP content extractor, resumable and deterministic.

Only training splits are used (Dragnet ``training.txt``, CleanEval dev, the page-type set minus
its hold-out, L3S-GN1 minus its hold-out, the modern sets whole); a deterministic 10% of their
site groups is the dev split for early stopping (``splits.grouped_holdout``: never a page of a
dev site in training); ``dev_fraction=0`` trains a fixed number of epochs and keeps the last. Every epoch writes ``checkpoint.pt`` (model, optimiser, RNG state), so an interrupted
run resumes where it stopped; the best dev model is written to ``best/`` as safetensors + JSON.

Multi-task: ``page_type_weight > 0`` adds the Li-ArcFace page-type head, trained on the pages
that have a page-type label (the page-type set); ``role_weight > 0`` adds the block-role head,
trained on the pages with role annotations (L3S-GN1). Each loss counts only the pages/nodes it
has labels for; early stopping still follows the dev content LCS F1.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from scrapy_grownup.data import datasets
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.data.splits import grouped_holdout
from scrapy_grownup.data.store import GraphStore
from scrapy_grownup.training.corpus import corpus_encoder, labelled_store, store_from_records
from scrapy_grownup.training.evaluate import node_f1, store_predictions, text_scores
from scrapy_grownup.training.page_type_cv import (PAGE_TYPES, page_type_corpus, page_type_index,
                                                  page_types)
from scrapy_grownup.training.heads import (HeadFitConfig, fit_page_type_head, fit_role_head,
                                            frozen_features, predict_page_type)
from scrapy_grownup.training.holdout import holdout
from scrapy_grownup.training.loop import AuxLabels, TrainConfig, role_class_weights, train_epoch, warn_if_emulated
from scrapy_grownup.training.roles import ROLES, role_scores, store_roles

logger = logging.getLogger(__name__)
TRAIN_SPLITS = {"dragnet": "train", "cleaneval": "train", "pagetype": "all", "l3s_gn1": "all",
                **{name: "all" for name in datasets.MODERN_DATASETS}}


def head_overrides(cfg: TrainConfig) -> dict:
    """ModelConfig fields of the heads ``cfg`` asks for (explicit overrides win)."""
    extra: dict = {}
    if cfg.page_type_weight:
        extra.update(num_page_types=len(PAGE_TYPES), page_type_names=list(PAGE_TYPES))
    if cfg.role_weight:
        extra.update(num_roles=len(ROLES), role_names=list(ROLES))
    extra.update(cfg.overrides)
    return extra


def aux_labels(name: str, store: GraphStore, cfg: TrainConfig, records=None, split=None,
               limits: PageLimits | None = None) -> AuxLabels:
    """Page-type and role labels of one dataset's store (only for the heads ``cfg`` trains)."""
    aux = AuxLabels.empty(store)
    if cfg.page_type_weight:
        if records is not None:
            types = {r.id: r.extra.get("page_type") for r in records}
        elif name == "pagetype":
            types = page_types(name, split)
        else:
            types = {}
        aux.page_types[:] = [page_type_index(types.get(i)) for i in store.ids]
    if cfg.role_weight:
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
        # (``grownup lab evaluate --protocol site-cv``), whose folds are whole sites
        return split, None
    return split, set(holdout(dataset)[0])


def _dev_ids(name: str, split: str, ids: list[str], records, cfg: TrainConfig) -> set[str]:
    """The dev pages among ``ids``: whole site groups (``splits.grouped_holdout``), so early
    stopping measures pages of sites the model does not train on."""
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

    from scrapy_grownup.model import GrownUpModel, ModelConfig
    from scrapy_grownup.model.config import model_tensor_name

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    warn_if_emulated(cfg.precision, cfg.device)
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
            if name == "pagetype" and cfg.page_type_weight:
                # Every page has a page type; pages whose gold text aligns badly (a third of the
                # collection and forum pages) stay in, with content labels -1.
                store, _ = page_type_corpus(encoder, limits, cfg.workers, cfg.min_coverage)
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
        from scrapy_grownup.pretraining.init import load_pretrained

        load_pretrained(model, cfg.init)
    role_weights = role_class_weights(model, store, train_idx, aux, cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    state = {"epoch": 0, "best_f1": -1.0, "best_epoch": -1, "history": []}
    checkpoint = out / "checkpoint.pt"
    if checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=True)
        # a checkpoint of a run started before the page-type rename names its tensors as
        # saved weights do (``config.model_tensor_name``)
        model.load_state_dict({model_tensor_name(name): t for name, t in saved["model"].items()})
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
        dev.update(_dev_head_scores(model, store, aux, dev_idx, preds))
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
        heads = "".join(f" {key} {dev[key]:.4f}"
                        for key in ("page_type_accuracy", "role_macro_f1") if key in dev)
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
    if (model.page_type_head is not None or model.role_head is not None) and cfg.refit_steps \
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
    """Refit the page-type and role heads of ``model`` on its frozen backbone's features.

    Multi-task training leaves the heads noisy from epoch to epoch while the best epoch is
    picked by content F1; this makes the shipped heads fit the shipped backbone
    (``heads.fit_page_type_head`` / ``fit_role_head`` on features of one backbone pass). A refit
    head replaces the model's only when its dev score is at least as good. Returns the dev
    scores.
    """
    import copy

    import torch

    fit = HeadFitConfig(page_type_steps=cfg.refit_steps, role_steps=cfg.refit_steps,
                        role_lr=cfg.refit_lr, role_balance=cfg.role_balance, seed=cfg.seed,
                        batch_nodes=cfg.batch_nodes)
    ptr = store.page_ptr
    train_idx, dev_idx = list(train_idx), list(dev_idx)
    x_page_type, nodes = frozen_features(model, store, train_idx + dev_idx, aux.roles,
                                     cfg.batch_nodes)
    is_train = [True] * len(train_idx) + [False] * len(dev_idx)
    pages = train_idx + dev_idx
    info: dict = {}
    if model.page_type_head is not None:
        train_g = [k for k, i in enumerate(pages) if is_train[k] and aux.page_types[i] >= 0]
        dev_g = [k for k, i in enumerate(pages) if not is_train[k] and aux.page_types[i] >= 0]
        if train_g and dev_g:
            y_dev = aux.page_types[[pages[k] for k in dev_g]]
            before = float((predict_page_type(model, x_page_type[dev_g]).argmax(1)
                            == y_dev).mean())
            candidate = copy.deepcopy(model)
            fit_page_type_head(candidate, x_page_type[train_g],
                               aux.page_types[[pages[k] for k in train_g]], fit)
            after = float((predict_page_type(candidate, x_page_type[dev_g]).argmax(1)
                           == y_dev).mean())
            kept = after >= before
            if kept:
                model.page_type_readout, model.page_type_norm, model.page_type_head = (
                    candidate.page_type_readout, candidate.page_type_norm,
                    candidate.page_type_head)
            info["page_type"] = {"dev_accuracy_before": before, "dev_accuracy_after": after,
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


def _dev_head_scores(model, store, aux: AuxLabels, dev_idx, preds) -> dict:
    """Dev page-type accuracy and role macro F1 (only for the heads the model has)."""
    out: dict = {}
    if model.page_type_head is not None:
        gold = aux.page_types[list(dev_idx)] if dev_idx else np.zeros(0, np.int64)
        mask = gold >= 0
        if mask.any():
            pred = np.array([int(np.argmax(p["page_type"])) for p in preds])
            out["page_type_accuracy"] = float((pred[mask] == gold[mask]).mean())
            out["page_type_pages"] = int(mask.sum())
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
