"""Shared helpers for the benchmarks: single-core pinning and the Dragnet page set."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def pin_single_core() -> None:
    """Make BLAS, OpenMP, the tokenizer (Rust, rayon) and torch use one thread, so figures are
    per core."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "RAYON_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def dragnet_test_pages(limit: int | None = None) -> list[tuple[str, bytes]]:
    """``(id, html bytes)`` of the Dragnet test split, unpacked into the cache if needed."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from scrapy_grownup.datasets import load

    records = load("dragnet", split="test")
    pages = [(r.id, r.html) for r in records]
    return pages[:limit] if limit else pages
