"""``grownup lab evaluate``: ours next to "no filter", "perfect filter" and trafilatura.

Every method is scored on the same test pages in the same run with both metrics: the paper's
LCS F1 and the article-extraction-benchmark's word-4-shingle F1.
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from scrapy_grownup.data import datasets
from scrapy_grownup.data.labels import align_labels, perfect_filter_text
from scrapy_grownup.output.assembly import assemble_text
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.training.evaluate import scores_for_texts
from scrapy_grownup.training.holdout import heldout_ids

logger = logging.getLogger(__name__)
TEST_SPLITS = {"dragnet": "test", "cleaneval": "test", "cleanportaleval": "all"}


def test_records(name: str, limit: int | None = None):
    """Test pages: the standard test split, or the fixed hold-out of sets without one.

    ``dragnet+comments`` scores Dragnet against article + comments, the paper's setting.
    """
    if name == "dragnet+comments":
        return [datasets.with_comments(r) for r in test_records("dragnet", limit)]
    if name in TEST_SPLITS:
        return datasets.load(name, split=TEST_SPLITS[name], limit=limit)
    ids = heldout_ids(name)
    return datasets.load(name, ids=ids[:limit] if limit else ids)


def evaluate_dataset(name: str, extractors: Sequence, limit: int | None = None,
                     trafilatura: bool = True) -> list[dict]:
    """One row per method for dataset ``name``; rows share the same page list."""
    records = [r for r in test_records(name, limit) if r.gold is not None]
    pages, golds, skipped = [], [], 0
    for record in records:
        try:
            pages.append(parse_page(record.html, url=record.url))
            golds.append(record.gold)
        except GrownupError:
            skipped += 1  # scored as an empty extraction below, for every method alike
            pages.append(None)
            golds.append(record.gold)
    rows = []

    def row(method: str, texts: list[str]) -> None:
        rows.append({"dataset": name, "method": method, **scores_for_texts(texts, golds),
                     "unparsable": skipped})

    row("no filter", [assemble_text(p, np.ones(p.num_nodes, bool)) if p else "" for p in pages])
    row("perfect filter", [perfect_filter_text(p, align_labels(p, g).labels) if p else ""
                           for p, g in zip(pages, golds)])
    for extractor in extractors:
        good = [p for p in pages if p is not None]
        scores = iter(extractor.score(good))
        per_page = [next(scores) if p is not None else None for p in pages]
        for refine in (False, True):
            texts = [extractor.article(page, s, refine=refine).text if page is not None else ""
                     for page, s in zip(pages, per_page)]
            row(f"grownup:{extractor.name}" + (" +refine" if refine else ""), texts)
    if trafilatura:
        try:
            import trafilatura as traf
        except ImportError:
            logger.warning("trafilatura not installed (pip install scrapy-grownup[eval])")
        else:
            row("trafilatura", [traf.extract(r.html) or "" for r in records])
    return rows


def format_table(rows: list[dict]) -> str:
    header = f"{'dataset':<16} {'method':<30} {'pages':>5} {'LCS P':>6} {'LCS R':>6} " \
             f"{'LCS F1':>6} {'4-sh F1':>7}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r['dataset']:<16} {r['method']:<30} {r['pages']:>5} "
                     f"{100 * r['lcs_precision']:6.1f} {100 * r['lcs_recall']:6.1f} "
                     f"{100 * r['lcs_f1']:6.1f} {100 * r['shingle_f1']:7.1f}")
    return "\n".join(lines)
