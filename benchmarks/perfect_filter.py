#!/usr/bin/env python
"""Ceilings of node-level boilerplate removal: "no filter" and "perfect filter" LCS F1.

For each page: parse it, align the gold text to the nodes (``align_labels``), then score

* no filter: all the page's text (``assemble_text`` keeping every node);
* perfect filter: exactly the nodes aligned as content (``perfect_filter_text``);

with the paper's LCS metric (P and R averaged over pages, F1 = harmonic mean of the averages)
and the article-extraction-benchmark's shingle F1. One JSON line per dataset. Compare with
GROWN+UP (CIKM 2022) Table 2: perfect filter CleanEval 97.9 / Dragnet 99.4, no filter 89.8 / 64.9.
``dragnet+comments`` scores Dragnet against article + comments, which is what reproduces the
paper's Dragnet figures (article only gives a no-filter F1 near 54, not 65).

    .venv/bin/python benchmarks/perfect_filter.py                      # all datasets
    .venv/bin/python benchmarks/perfect_filter.py dragnet:test --limit 50
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_grownup.data import datasets  # noqa: E402
from scrapy_grownup.data.labels import (  # noqa: E402
    MIN_COVERAGE, align_labels, assemble_text, perfect_filter_text,
)
from scrapy_grownup.page.dom import parse_page  # noqa: E402
from scrapy_grownup.errors import GrownupError  # noqa: E402
from scrapy_grownup.evaluation.metrics import lcs_scores, shingle_f1  # noqa: E402

DEFAULT = (
    "dragnet:test", "dragnet+comments:test", "cleaneval:test", "pagetype:all", "l3s_gn1:all",
    "cleanportaleval:test", *(f"{name}:all" for name in datasets.MODERN_DATASETS),
)


def score_page(record: datasets.PageRecord) -> dict:
    gold = record.gold or ""
    t0 = time.perf_counter()
    try:
        page = parse_page(record.html, url=record.url, positions=False,
                          content_type=record.extra.get("content_type"))
    except GrownupError as exc:
        p, r = lcs_scores("", gold)
        return {"id": record.id, "error": str(exc), "coverage": 0.0, "none": (p, r, "", gold),
                "perfect": (p, r, "", gold), "seconds": time.perf_counter() - t0}
    result = align_labels(page, gold)
    all_text = assemble_text(page, np.ones(page.num_nodes, dtype=bool))
    perfect = perfect_filter_text(page, result.labels)
    none_pr = lcs_scores(all_text, gold)
    perfect_pr = lcs_scores(perfect, gold)
    return {
        "id": record.id,
        "coverage": result.coverage,
        "anchored": result.anchored,
        "none": (*none_pr, all_text, gold),
        "perfect": (*perfect_pr, perfect, gold),
        "seconds": time.perf_counter() - t0,
    }


def summarise(rows: list[dict], key: str, subset=None) -> dict:
    rows = [r for r in rows if subset is None or subset(r)]
    if not rows:
        return {"pages": 0}
    p = float(np.mean([r[key][0] for r in rows]))
    r_ = float(np.mean([r[key][1] for r in rows]))
    f1 = 2 * p * r_ / (p + r_) if p + r_ else 0.0
    sh = shingle_f1((r[key][2], r[key][3]) for r in rows)
    return {
        "lcs_f1": round(100 * f1, 2), "lcs_p": round(100 * p, 2), "lcs_r": round(100 * r_, 2),
        "shingle_f1": round(100 * sh["f1"], 2), "pages": len(rows),
    }


def run(spec: str, limit: int | None, workers: int) -> dict:
    name, _, split = spec.partition(":")
    t0 = time.perf_counter()
    comments = name.endswith("+comments")
    records = datasets.iter_records(name.removesuffix("+comments"), split or None, limit=limit)
    if comments:
        records = map(datasets.with_comments, records)
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            rows = list(pool.map(score_page, records, chunksize=4))
    else:
        rows = [score_page(r) for r in records]
    coverage = np.array([r["coverage"] for r in rows])

    def kept(r):
        return r["coverage"] > MIN_COVERAGE

    slowest = max(rows, key=lambda r: r["seconds"]) if rows else None
    return {
        "dataset": name,
        "split": split or "all",
        "pages": len(rows),
        "parse_errors": sum(1 for r in rows if "error" in r),
        "no_filter": summarise(rows, "none"),
        "perfect_filter": summarise(rows, "perfect"),
        "coverage_mean": round(float(coverage.mean()), 4) if len(rows) else None,
        "coverage_lt_0.5": int((coverage < 0.5).sum()),
        "coverage_le_0.75": int((coverage <= MIN_COVERAGE).sum()),
        "low_coverage_ids": [r["id"] for r in rows if r["coverage"] < 0.5][:20],
        "kept_pages": {  # pages the reference would keep (coverage > 0.75)
            "no_filter": summarise(rows, "none", kept),
            "perfect_filter": summarise(rows, "perfect", kept),
        },
        "anchored_pages": sum(1 for r in rows if r.get("anchored")),
        "slowest_page": {"id": slowest["id"], "seconds": round(slowest["seconds"], 2)}
        if slowest else None,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("specs", nargs="*", default=list(DEFAULT),
                        help="NAME[:SPLIT] (default: %(default)s)")
    parser.add_argument("--limit", type=int, default=None, help="first N pages per dataset")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    for spec in args.specs:
        print(json.dumps(run(spec, args.limit, args.workers)), flush=True)


if __name__ == "__main__":
    main()
