"""Labelled training corpora: dataset pages -> aligned node labels -> cached ``GraphStore``.

Parsing and alignment run in worker processes; text embedding runs once per distinct string.
The cache key holds the dataset split, encoder name and weights version and the feature
version, so a changed encoder or featurizer never reuses stale features.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scrapy_grownup.data.labels import align_labels
from scrapy_grownup.page.dom import PageStructure, parse_page
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.data.store import GraphStore
from scrapy_grownup.crawl.workers import parent_bound_pool

logger = logging.getLogger(__name__)
# The reference implementation drops pages whose gold text aligns this poorly.
DEFAULT_MIN_COVERAGE = 0.75


def cache_root() -> Path:
    from scrapy_grownup.encoders.disk_cache import cache_home

    return cache_home() / "features"


def corpus_encoder(name: str):
    """The shared encoder ``name`` for building corpora; a model encoder (MiniLM) also keeps
    its vectors on disk (``TextEncoder.use_disk_cache``), so corpora share strings and an
    interrupted build resumes. The static encoder is fast enough without."""
    from scrapy_grownup.encoders import get_encoder

    encoder = get_encoder(name)
    if encoder.name != "static":
        encoder.use_disk_cache()
    return encoder


@dataclass
class PreparedPage:
    id: str
    page: PageStructure | None
    labels: np.ndarray | None
    coverage: float
    error: str | None = None


def prepare_page(args: tuple) -> PreparedPage:
    """Parse one page and align its gold text (runs in a worker process)."""
    id_, html, gold, url, content_type, limits = args
    try:
        page = parse_page(html, url=url, content_type=content_type, limits=limits)
    except GrownupError as exc:
        return PreparedPage(id_, None, None, 0.0, f"{type(exc).__name__}: {exc}")
    if gold is None:
        return PreparedPage(id_, page, None, 0.0)
    result = align_labels(page, gold)
    return PreparedPage(id_, page, result.labels, result.coverage)


def prepare_pages(records, limits: PageLimits | None = None, workers: int = 2):
    """``PreparedPage`` for each dataset record, in order."""
    limits = limits or PageLimits()
    jobs = [(r.id, r.html, r.gold, r.url, r.extra.get("content_type"), limits)
            for r in records]
    if workers <= 1 or len(jobs) < 8:
        return [prepare_page(job) for job in jobs]
    with parent_bound_pool(workers) as pool:
        return list(pool.map(prepare_page, jobs, chunksize=8))


def store_key(encoder, limits: PageLimits, min_coverage: float) -> str:
    """What a cached store's contents depend on, for its file name: the encoder and its weights,
    the feature, parse and store versions, the page caps and the alignment coverage cut."""
    from scrapy_grownup.page.dom import PARSE_VERSION
    from scrapy_grownup.graph.featurizer import FEATURE_VERSION
    from scrapy_grownup.data.store import STORE_REVISION

    return (f"{encoder.name}-{encoder.version}-f{FEATURE_VERSION}p{PARSE_VERSION}s{STORE_REVISION}"
            f"-n{limits.max_nodes}-d{limits.max_depth}-c{min_coverage}")


def labelled_store(dataset: str, split: str, encoder, min_coverage: float = DEFAULT_MIN_COVERAGE,
                   limits: PageLimits | None = None, workers: int = 2,
                   refresh: bool = False) -> GraphStore:
    """The labelled ``GraphStore`` of one dataset split, built once and cached on disk."""
    from scrapy_grownup.data import datasets

    limits = limits or PageLimits()
    key = f"{dataset}-{split}-" + store_key(encoder, limits, min_coverage)
    path = cache_root() / f"{key}.safetensors"
    if path.exists() and not refresh:
        return GraphStore.load(path)
    store = store_from_records(datasets.load(dataset, split=split), encoder, min_coverage,
                               limits, workers, meta={"dataset": dataset, "split": split})
    store.save(path)
    return store


def store_from_records(records, encoder, min_coverage: float = DEFAULT_MIN_COVERAGE,
                       limits: PageLimits | None = None, workers: int = 2,
                       meta: dict | None = None) -> GraphStore:
    """Parse, align and embed ``PageRecord``s; pages that align badly are left out."""
    prepared = prepare_pages(records, limits, workers)
    kept = [p for p in prepared if p.page is not None and p.labels is not None
            and p.coverage >= min_coverage and (p.labels == 1).any()]
    skipped = len(prepared) - len(kept)
    meta = dict(meta or {})
    logger.info("%s: %d pages, %d kept, %d skipped (parse errors or coverage < %.2f)",
                meta.get("dataset", "records"), len(prepared), len(kept), skipped, min_coverage)
    return GraphStore.build([p.page for p in kept], encoder, ids=[p.id for p in kept],
                            labels=[p.labels for p in kept],
                            meta={**meta, "skipped": str(skipped)})
