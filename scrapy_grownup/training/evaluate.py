"""Scoring pages with a model and measuring extracted text against gold."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from scrapy_grownup.output.assembly import assemble_text
from scrapy_grownup.output.assembly import article_mask
from scrapy_grownup.page.dom import PageStructure
from scrapy_grownup.extractor import node_probabilities
from scrapy_grownup.evaluation.metrics import lcs_f1, shingle_f1
from scrapy_grownup.data.store import GraphStore


def store_predictions(model, store: GraphStore, indices: Sequence[int],
                      batch_nodes: int = 30_000, device: str = "cpu") -> list[dict]:
    """Per page of ``indices``: ``content`` [n] probabilities, ``roles`` [n, R] and ``page_type``
    [G] probabilities (None without that head), in eval mode without gradients."""
    indices = list(indices)
    return node_probabilities(model, [store.num_nodes(int(i)) for i in indices],
                              lambda ids: store.collate([indices[k] for k in ids]),
                              batch_nodes, device, heads=True)


def text_scores(pages: Sequence[PageStructure], golds: Sequence[str],
                probs: Sequence[np.ndarray], threshold: float = 0.5,
                refine: bool = False) -> dict:
    """LCS P/R/F1 (the paper's metric) and word-4-shingle F1 of the extracted texts."""
    texts = [assemble_text(p, article_mask(p, s, threshold, refine=refine))
             for p, s in zip(pages, probs)]
    return scores_for_texts(texts, golds)


def scores_for_texts(texts: Sequence[str], golds: Sequence[str]) -> dict:
    pairs = list(zip(texts, golds))
    lcs = lcs_f1(pairs)
    shingle = shingle_f1(pairs)
    return {"lcs_precision": lcs["precision"], "lcs_recall": lcs["recall"], "lcs_f1": lcs["f1"],
            "shingle_f1": shingle["f1"], "pages": len(pairs)}


def node_f1(labels: np.ndarray, probs: np.ndarray, threshold: float = 0.5) -> float:
    """Micro F1 of the content class over labelled nodes (the reference's checkpoint metric)."""
    mask = labels >= 0
    pred, gold = probs[mask] >= threshold, labels[mask] == 1
    tp = float((pred & gold).sum())
    denom = float(pred.sum() + gold.sum())
    return 2 * tp / denom if denom else 1.0
