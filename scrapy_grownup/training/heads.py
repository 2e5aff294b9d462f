"""Page-type and role heads fitted on a frozen backbone.

The backbone and content head stay exactly as trained (content extraction does not move); the
backbone runs once over the pages, and the heads then take many cheap full-batch steps on the
cached features: a 10-fold page-type cross-validation takes seconds per fold instead of the
minutes that fine-tuning the whole network takes, and a shipped model gains its heads without
being retrained (``grownup lab fit-heads``: ``fit_heads.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from scrapy_grownup.graph.batching import node_budget_batches
from scrapy_grownup.training.loop import class_weights


@dataclass
class HeadFitConfig:
    page_type_steps: int = 600
    page_type_lr: float = 1e-3
    role_steps: int = 2000
    role_lr: float = 3e-3
    role_batch: int = 4096
    role_balance: float = 0.5      # role class weights ~ frequency ** -role_balance
    weight_decay: float = 0.05
    seed: int = 0
    batch_nodes: int = 16_000


def frozen_features(model, store, pages: Sequence[int], roles: np.ndarray | None = None,
                    batch_nodes: int = 16_000, signals: np.ndarray | None = None,
                    page_type: bool = True):
    """One eval-mode pass of ``model`` over store ``pages``.

    Returns ``(page_type, nodes)``: ``page_type`` [len(pages), D] what the page-type head's
    trainable part starts from (``GrownUpModel.page_type_inputs``; None without a page-type
    head), and ``nodes`` a list per page of ``(role inputs [m, D], role labels [m])`` for the
    nodes with a role label in ``roles`` (``GrownUpModel.role_inputs``, store node order; None
    when ``roles`` is None). ``signals`` [store pages, SIGNAL_DIM]: the page signals of a
    page-type head that reads them (``ModelConfig.page_type_signals``), by store page.
    ``page_type=False``: no page-type inputs (``page_type`` is None), e.g. for the role head's
    pages.
    """
    import torch

    model.eval()
    pages = [int(i) for i in pages]
    ptr = store.page_ptr
    with_page_type = page_type and model.page_type_head is not None
    page_type_rows: list = [None] * len(pages)
    nodes: list = [None] * len(pages)
    with torch.inference_mode():
        for ids in node_budget_batches([store.num_nodes(i) for i in pages], batch_nodes):
            chosen = [pages[k] for k in ids]
            batch = store.collate(chosen)
            if signals is not None:
                batch.x_signals = torch.from_numpy(np.asarray(signals[chosen], np.float32))
            node_feats, page_feats = model.backbone(batch)
            content = torch.sigmoid(model.content_logits(batch, node_feats, page_feats).float())
            if with_page_type:
                inputs = model.page_type_inputs(batch, node_feats, page_feats, content)
                for j, k in enumerate(ids):
                    page_type_rows[k] = inputs[j].clone()
            if roles is not None:
                role_inputs = model.role_inputs(batch, node_feats, content)
                bptr = batch.ptr.tolist()
                for j, (k, i) in enumerate(zip(ids, chosen)):
                    labels = torch.from_numpy(roles[ptr[i]:ptr[i + 1]].astype(np.int64))
                    keep = labels >= 0
                    nodes[k] = (role_inputs[bptr[j]:bptr[j + 1]][keep].clone(), labels[keep])
    stacked = torch.stack(page_type_rows) if with_page_type and pages else None
    return stacked, (nodes if roles is not None else None)


def fit_page_type_head(model, x, y: np.ndarray, cfg: HeadFitConfig) -> None:
    """Fresh page-type readout / norm and Li-ArcFace head for ``model``, trained on pooled page
    features ``x`` [P, D] with page-type labels ``y`` (full batch, AdamW)."""
    import copy

    import torch

    torch.manual_seed(cfg.seed)
    target = torch.as_tensor(np.asarray(y), dtype=torch.long)
    readout = copy.deepcopy(model.page_type_readout) \
        if model.page_type_readout is not None else None
    norm = copy.deepcopy(model.page_type_norm) if model.page_type_norm is not None else None
    head = copy.deepcopy(model.page_type_head)
    for module in (readout, norm, head):
        if module is not None:
            _reset(module)
    modules = [m for m in (readout, norm, head) if m is not None]
    optimizer = torch.optim.AdamW([p for m in modules for p in m.parameters()],
                                  lr=cfg.page_type_lr, weight_decay=cfg.weight_decay)
    for module in modules:
        module.train()
    for _ in range(cfg.page_type_steps):
        loss = head.loss(_page_type_transform(readout, norm, x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    # The batch norm's running statistics become the exact statistics of the training pages.
    batchnorm = readout.norm if readout is not None else norm
    if batchnorm is not None:
        with torch.no_grad():
            batchnorm.running_mean.copy_(x.float().mean(0))
            batchnorm.running_var.copy_(x.float().var(0, unbiased=False))
    for module in modules:
        module.eval()
    model.page_type_readout, model.page_type_norm, model.page_type_head = readout, norm, head


def predict_page_type(model, x) -> np.ndarray:
    """Page-type probabilities [P, G] from pooled features (``frozen_features``)."""
    import torch

    with torch.no_grad():
        feats = _page_type_transform(model.page_type_readout, model.page_type_norm, x)
        return model.page_type_head.probabilities(feats).numpy()


def fit_role_head(model, x, y, cfg: HeadFitConfig) -> None:
    """Fresh role head for ``model`` on role inputs ``x`` [M, D] with role labels ``y``."""
    import copy

    import torch

    from scrapy_grownup.model import masked_cross_entropy

    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    head = copy.deepcopy(model.role_head)
    _reset(head)
    head.train()
    weights = class_weights(y.numpy(), model.config.num_roles, cfg.role_balance)
    weights = torch.tensor(weights, dtype=torch.float32) if weights is not None else None
    optimizer = torch.optim.AdamW(head.parameters(), lr=cfg.role_lr,
                                  weight_decay=cfg.weight_decay)
    for step in range(cfg.role_steps):
        for group in optimizer.param_groups:  # linear decay to 10%
            group["lr"] = cfg.role_lr * (1.0 - 0.9 * step / max(cfg.role_steps, 1))
        pick = torch.randint(len(x), (min(cfg.role_batch, len(x)),), generator=generator)
        loss = masked_cross_entropy(head(x[pick]), y[pick], weights)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    norm = getattr(head, "norm", None)  # exact statistics of the training nodes
    if norm is not None:
        with torch.no_grad():
            norm.running_mean.copy_(x.float().mean(0))
            norm.running_var.copy_(x.float().var(0, unbiased=False))
    model.role_head = head.eval()


def _page_type_transform(readout, norm, x):
    if readout is not None:
        return readout(x)
    return norm(x) if norm is not None else x


def _reset(module) -> None:
    """Fresh parameters (and batch-norm statistics) for every part of ``module``."""
    for sub in module.modules():
        if hasattr(sub, "reset_parameters"):
            sub.reset_parameters()
