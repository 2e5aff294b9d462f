"""The model's side of the crawl: one process holding ``ArticleExtractor``, pages in, articles out.

Runs in a spawned process (see ``workers``), or on a thread when ``GROWNUP_MODEL_PROCESS`` is
off. The model and text encoder stay loaded (on the GPU when there is one) between batches. A
CUDA out-of-memory error halves the batch and retries; a page that fails on its own gets a
``ModelError``, the other pages of its batch do not.
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

from .article import Article
from .dom import PageStructure
from .errors import GrownupError, ModelError
from .limits import PageLimits
from .workers import background_process

logger = logging.getLogger(__name__)
WARMUP_PAGE = (b"<html><head><title>warm-up</title></head><body><div class=main><h1>Warm-up"
               b"</h1><p>A page parsed and scored once before the crawl.</p></div></body></html>")
_state: dict = {}


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA OOM (``torch.OutOfMemoryError``), recognised without importing torch."""
    return type(exc).__name__ == "OutOfMemoryError" or "CUDA out of memory" in str(exc)


def run_split_on_oom(infer: Callable[[Sequence[PageStructure]], list[Article]],
                     pages: Sequence[PageStructure], on_oom: Callable[[], None] = lambda: None
                     ) -> tuple[list[Article | GrownupError], int]:
    """``infer(pages)``, halving the batch on out-of-memory; returns results and split count."""
    try:
        return list(infer(pages)), 0
    except Exception as exc:  # noqa: BLE001 - every failure is returned per page
        if len(pages) == 1:
            error = exc if isinstance(exc, GrownupError) else \
                ModelError(f"{type(exc).__name__}: {exc}")
            return [error], 0
        if is_out_of_memory(exc):
            on_oom()
            logger.warning("out of memory on a batch of %d pages; splitting it", len(pages))
            halves = (pages[:len(pages) // 2], pages[len(pages) // 2:])
            splits = 1
        else:
            logger.warning("model failed on a batch of %d pages (%s); retrying page by page",
                           len(pages), exc)
            halves, splits = [[page] for page in pages], 0
        results: list = []
        for part in halves:
            part_results, part_splits = run_split_on_oom(infer, part, on_oom)
            results += part_results
            splits += part_splits
        return results, splits


def load_extractor(model: str, device: str | None, limits: PageLimits, batch_nodes: int,
                   threads: int) -> None:
    """Process initializer: load and warm up the model; a failure is kept for ``describe``."""
    _state.clear()
    background_process()
    try:
        import torch

        from .dom import parse_page
        from .extractor import ArticleExtractor

        torch.set_num_threads(threads)
        extractor = ArticleExtractor.from_pretrained(model, device=device, limits=limits)
        extractor.batch_nodes = batch_nodes
        # First calls import torch_geometric and build kernels: done before the crawl.
        extractor.articles([parse_page(WARMUP_PAGE, url="about:warmup", limits=limits)])
        _state["extractor"] = extractor
    except Exception as exc:  # noqa: BLE001 - reported by describe() in the crawl's process
        _state["error"] = exc if isinstance(exc, GrownupError) else \
            ModelError(f"loading model {model!r} failed: {type(exc).__name__}: {exc}")


def _extractor():
    if "error" in _state:
        raise _state["error"]
    return _state["extractor"]


def describe() -> dict:
    """What the crawl needs to know of the loaded model (raises its load error)."""
    extractor = _extractor()
    return {"name": extractor.name, "version": extractor.version, "device": str(extractor.device),
            "num_genres": extractor.model.config.num_genres}


def score_articles(pages: Sequence[PageStructure]) -> tuple[list[Article | GrownupError], int]:
    """Articles of one micro-batch, errors isolated per page."""
    extractor = _extractor()
    return run_split_on_oom(extractor.articles, pages, _empty_cuda_cache)


def _empty_cuda_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
