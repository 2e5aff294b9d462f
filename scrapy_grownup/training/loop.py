"""The epoch loop every trainer shares: its config, the auxiliary labels, the losses.

``fit_epochs`` trains a model for a fixed number of epochs on store pages (AdamW, cosine
decay), no dev split and no checkpoints: cross-validation folds, the cross-site protocols and
quick experiments use it directly; ``grownup train`` (``trainer.train``) runs ``train_epoch``
with its own dev split, early stopping and checkpoints.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np

from scrapy_grownup.data.store import GraphStore
from scrapy_grownup.graph.batching import node_budget_batches
from scrapy_grownup.training.corpus import DEFAULT_MIN_COVERAGE

logger = logging.getLogger(__name__)


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
    # Share of training pages whose class and id vectors are zeroed for a batch: the model must
    # also judge pages whose class names it has never seen (a site's own vocabulary).
    attribute_dropout: float = 0.0
    # fit_epochs: the saved weights are the mean of the weights after every optimizer step of
    # the last ``average_last`` epochs (stochastic weight averaging, as SWAD does for domain
    # generalization: a flatter solution that should carry better to unseen sites); 0: the
    # last step's weights.
    average_last: int = 0
    # Datasets whose content labels train the content head (None: all); the others only train
    # the page-type / role heads (L3S-GN1's gold leaves captions and the like out, which made the
    # content head drop recall on every test set).
    content_datasets: list[str] | None = None
    page_type_weight: float = 0.0  # > 0: page-type head, loss on pages with a page-type label
    role_weight: float = 0.0   # > 0: role head, loss on nodes with a role label
    role_balance: float = 0.5  # role class weights ~ frequency ** -role_balance (0: none)
    # Content-loss weight of a page ~ (share of training pages of its page type) ** -type_balance
    # (0: every page weighs the same): products, listings and collections are a few percent of
    # the training pages and what the content head gets most wrong on unseen sites.
    type_balance: float = 0.0
    # How the content loss weighs a page's text-owning nodes (NODE_WEIGHTS): "none", every
    # node the same (the recipe, so a page of 900 nodes weighs 30 times one of 30);
    # "log-chars", each ~ log(1 + its characters), as the benchmark's bag of words and the
    # decisions' block means weigh a long paragraph above a "Share" button; "page", every
    # page's nodes summing to the same total, as the benchmark averages per-page F1;
    # "page-log-chars", both. Each averages 1 over a batch's labelled nodes.
    node_weight: str = "none"
    # The arithmetic of the forward pass (PRECISIONS): "fp32", or "bf16" (torch.autocast to
    # bfloat16: matrix products in bfloat16, weights, optimizer state and losses in float32).
    # On a CPU with AVX512-BF16 an epoch takes 0.6 of fp32's time; without it (or AMX) bfloat16
    # is emulated and far slower (``emulated_bf16``: the run warns).
    precision: str = "fp32"
    # After training: refit the page-type / role heads on the best model's frozen features
    # (kept only where the dev score does not drop); 0 turns it off.
    refit_steps: int = 500
    refit_lr: float = 5e-3


@dataclass
class AuxLabels:
    """Page-type id per page and role id per node of a ``GraphStore`` (-1: no label), and the
    content loss's weight per page (None: 1 for every page)."""

    page_types: np.ndarray  # int64 [pages]
    roles: np.ndarray   # int8 [nodes], aligned with the store's nodes
    page_weights: np.ndarray | None = None  # float32 [pages]

    @classmethod
    def empty(cls, store: GraphStore) -> "AuxLabels":
        return cls(np.full(store.num_pages, -1, dtype=np.int64),
                   np.full(int(store.page_ptr[-1]), -1, dtype=np.int8))

    @classmethod
    def concat(cls, parts: list["AuxLabels"]) -> "AuxLabels":
        weights = None
        if any(p.page_weights is not None for p in parts):
            weights = np.concatenate([
                p.page_weights if p.page_weights is not None
                else np.ones(len(p.page_types), dtype=np.float32) for p in parts])
        return cls(np.concatenate([p.page_types for p in parts]),
                   np.concatenate([p.roles for p in parts]), weights)

    def node_weights(self, store: GraphStore, indices):
        """The content loss's weight of every node of ``store.collate(indices)`` (each node
        its page's), or None where every page weighs 1."""
        import torch

        if self.page_weights is None:
            return None
        sizes = [store.num_nodes(i) for i in indices]
        return torch.from_numpy(np.repeat(self.page_weights[list(indices)], sizes)
                                .astype(np.float32))

    def targets(self, store: GraphStore, indices) -> tuple:
        """``(page_type [B], role [N])`` long tensors for ``store.collate(indices)``."""
        import torch

        ptr = store.page_ptr
        roles = np.concatenate([self.roles[ptr[i]:ptr[i + 1]] for i in indices])
        return (torch.from_numpy(self.page_types[list(indices)].astype(np.int64)),
                torch.from_numpy(roles.astype(np.int64)))


NODE_WEIGHTS = ("none", "log-chars", "page", "page-log-chars")
PRECISIONS = ("fp32", "bf16")


def emulated_bf16(device: str) -> bool:
    """Whether bfloat16 arithmetic on ``device`` is emulated, as on a CPU without AVX512-BF16
    or AMX, which converts every operand. An epoch of the recipe took 8x fp32's time on such
    a core (an AVX2-only EPYC) against 0.6x with AVX512-BF16 (docs/training-ablations.md)."""
    import torch

    if torch.device(device).type != "cpu":
        return False
    cpu = torch.cpu
    checks = [getattr(cpu, name, None) for name in ("_is_avx512_bf16_supported",
                                                     "_is_amx_tile_supported")]
    if not any(callable(c) for c in checks):
        return False  # a torch that cannot tell: say nothing
    return not any(c() for c in checks if callable(c))


def precision_warning(precision: str, device: str) -> str | None:
    """The line a training run prints before it starts when ``precision`` would be emulated
    on ``device`` (``emulated_bf16``), else ``None``."""
    if precision != "bf16" or not emulated_bf16(device):
        return None
    return ("--precision bf16: this CPU has no AVX512-BF16 or AMX, so bfloat16 is emulated "
            "and training runs many times slower than fp32 (8x measured); use fp32 here")


def warn_if_emulated(precision: str, device: str) -> None:
    """Log ``precision_warning`` where there is one: the training commands call it once,
    before they read any data."""
    warning = precision_warning(precision, device)
    if warning:
        logger.warning(warning)


def forward_precision(cfg: TrainConfig):
    """The context a training forward pass runs in (``TrainConfig.precision``): nothing for
    fp32, ``torch.autocast`` to bfloat16 on the config's device type for bf16."""
    import contextlib

    import torch

    if cfg.precision == "fp32":
        return contextlib.nullcontext()
    if cfg.precision not in PRECISIONS:
        raise ValueError(f"unknown precision {cfg.precision!r}: one of {', '.join(PRECISIONS)}")
    return torch.autocast(torch.device(cfg.device).type, dtype=torch.bfloat16)


def node_weights(store: GraphStore, indices, mode: str):
    """The content loss's weight of every node of ``store.collate(indices)``
    (``TrainConfig.node_weight``), averaging 1 over the labelled nodes; None for "none"."""
    import torch

    if mode == "none":
        return None
    if mode not in NODE_WEIGHTS:
        raise ValueError(f"unknown node weight {mode!r}: one of {', '.join(NODE_WEIGHTS)}")
    ptr = store.page_ptr
    lengths = np.concatenate([store.arrays["text_len"][ptr[i]:ptr[i + 1]] for i in indices])
    labelled = np.concatenate([store.arrays["labels"][ptr[i]:ptr[i + 1]] for i in indices]) >= 0
    weights = np.log1p(lengths.astype(np.float64)) if mode.endswith("log-chars") \
        else np.ones(len(lengths))
    if mode.startswith("page"):
        page = np.repeat(np.arange(len(indices)), [store.num_nodes(i) for i in indices])
        totals = np.bincount(page, weights=np.where(labelled, weights, 0.0),
                             minlength=len(indices))
        weights = weights / np.maximum(totals[page], 1e-9)
    mean = weights[labelled].mean() if labelled.any() else 1.0
    return torch.from_numpy((weights / (mean if mean > 0 else 1.0)).astype(np.float32))


def class_weights(labels: np.ndarray, num_classes: int, power: float) -> np.ndarray | None:
    """Per-class loss weights ~ frequency ** -power, averaging 1 over the labelled samples."""
    labels = labels[labels >= 0]
    if not power or not len(labels):
        return None
    counts = np.bincount(labels.astype(np.int64), minlength=num_classes).astype(float) + 1.0
    weights = counts ** -power
    return weights * counts.sum() / (weights * counts).sum()


def page_type_weights(page_types, power: float) -> np.ndarray:
    """Content-loss weight per page ~ (share of the pages with its page type) ** -power,
    averaging 1 over the pages (``TrainConfig.type_balance``); ``power`` 0: all 1."""
    names = sorted(set(page_types))
    ids = np.array([names.index(t) for t in page_types], dtype=np.int64)
    weights = class_weights(ids, len(names), power) if power else None
    if weights is None:
        return np.ones(len(ids), dtype=np.float32)
    per_page = weights[ids]
    return (per_page / per_page.mean()).astype(np.float32)


def multitask_loss(model, batch, page_type_y, role_y, cfg: TrainConfig, role_weights=None,
                   node_weight=None):
    """``(total loss, {part: float})`` of one batch for the heads the model has;
    ``node_weight`` scales each node's content loss (``AuxLabels.node_weights``)."""
    from scrapy_grownup.model import masked_cross_entropy, weighted_bce_with_smoothing

    with forward_precision(cfg):
        output = model(batch, page_type_labels=page_type_y
                       if model.page_type_head is not None else None)
    content = weighted_bce_with_smoothing(
        output.node_logits.float(), batch.y, pos_weight=cfg.pos_weight,
        neg_weight=cfg.neg_weight, smoothing=cfg.label_smoothing, node_weight=node_weight)
    loss = cfg.content_weight * content
    parts = {"content": float(content.detach())}
    if output.page_type_logits is not None and cfg.page_type_weight:
        page_type = masked_cross_entropy(output.page_type_logits.float(), page_type_y)
        loss = loss + cfg.page_type_weight * page_type
        parts["page_type"] = float(page_type.detach())
    if output.role_logits is not None and cfg.role_weight:
        role = masked_cross_entropy(output.role_logits.float(), role_y, role_weights)
        loss = loss + cfg.role_weight * role
        parts["role"] = float(role.detach())
    return loss, parts


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


def drop_attributes(batch, share: float, generator) -> None:
    """Zero the class and id vectors of each page of ``batch`` with probability ``share``
    (whole pages: a page keeps all its class names or none), in place."""
    import torch

    dropped = torch.rand(batch.num_graphs, generator=generator) < share
    nodes = dropped[batch.batch]
    if nodes.any():
        batch.x_class[nodes] = 0.0
        batch.x_id[nodes] = 0.0


def train_epoch(model, store: GraphStore, indices, aux: AuxLabels, cfg: TrainConfig,
                optimizer, epoch: int, role_weights=None, scheduler=None,
                progress=None, after_step=None) -> dict[str, float]:
    """One epoch over store pages ``indices``; returns the mean ``loss`` and per-task losses.

    Every random draw derives from ``(cfg.seed, epoch)``: a resumed run repeats exactly what
    the uninterrupted run would have done. ``progress`` wraps the batch list (a progress bar);
    ``after_step()`` runs after every optimizer step.
    """
    import torch

    from scrapy_grownup.model import random_flip_positions

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
        if cfg.attribute_dropout > 0:
            drop_attributes(batch, cfg.attribute_dropout, generator)
        page_type_y, role_y = aux.targets(store, chosen)
        node_weight = aux.node_weights(store, chosen)
        by_node = node_weights(store, chosen, cfg.node_weight)
        if by_node is not None:
            node_weight = by_node if node_weight is None else node_weight * by_node
        if cfg.device != "cpu":
            batch, page_type_y, role_y = (batch.to(cfg.device), page_type_y.to(cfg.device),
                                      role_y.to(cfg.device))
            if node_weight is not None:
                node_weight = node_weight.to(cfg.device)
        loss, parts = multitask_loss(model, batch, page_type_y, role_y, cfg, role_weights,
                                     node_weight)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        if after_step is not None:
            after_step()
        for key, value in (("loss", float(loss.detach())), *parts.items()):
            sums[key] = sums.get(key, 0.0) + value
    return {key: value / max(1, len(batches)) for key, value in sums.items()}


def fit_epochs(model, store: GraphStore, indices, aux: AuxLabels, cfg: TrainConfig,
               log=None) -> list[dict]:
    """Train ``model`` on store pages for ``cfg.epochs`` epochs (AdamW, cosine decay to 5%).

    No dev split, no checkpoints: for cross-validation folds and quick experiments. Returns
    the per-epoch mean losses. Deterministic for a given ``cfg.seed``. With
    ``cfg.average_last`` > 0, ``model`` ends with the mean of its weights (and buffers) after
    every step of those last epochs.
    """
    import torch
    from torch.optim.swa_utils import AveragedModel

    if not 0 <= cfg.average_last <= cfg.epochs:
        raise ValueError(f"average_last {cfg.average_last}: between 0 and epochs "
                         f"({cfg.epochs})")

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
    averaged = AveragedModel(model, use_buffers=True) if cfg.average_last else None
    history = []
    for epoch in range(1, cfg.epochs + 1):
        start = time.perf_counter()
        averaging = averaged is not None and epoch > cfg.epochs - cfg.average_last
        losses = train_epoch(model, store, indices, aux, cfg, optimizer, epoch, role_weights,
                             scheduler,
                             after_step=(lambda: averaged.update_parameters(model))
                             if averaging else None)
        record = {"epoch": epoch, **losses, "seconds": round(time.perf_counter() - start, 1)}
        history.append(record)
        if log is not None:
            log(record)
    if averaged is not None:
        model.load_state_dict(averaged.module.state_dict())
    model.eval()
    return history
