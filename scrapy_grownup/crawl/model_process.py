"""The model's side of the crawl: one process holding ``ArticleExtractor``, pages in, articles out.

Runs in a spawned process (see ``workers``), or on a thread when ``GROWNUP_MODEL_PROCESS`` is
off. The model and text encoder stay loaded (on the GPU when there is one) between batches. A
CUDA out-of-memory error halves the batch and retries; a page that fails on its own gets a
``ModelError``, the other pages of its batch do not. Each page's article, Markdown included, is
built here on its own before the batch is sent back, so a page whose article fails
(``ArticleError``) fails alone too, and a page whose parsing and article together take longer
than ``GROWNUP_PAGE_TIMEOUT`` is a ``PageTimeoutError`` (the crawl's ``timeout`` drop).
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from functools import partial
from typing import Sequence

from scrapy_grownup.output.article import Article
from scrapy_grownup.page.dom import PageStructure
from scrapy_grownup.errors import GrownupError, ModelError
from scrapy_grownup.extractor import is_out_of_memory, run_split_on_oom  # noqa: F401 - also imported here
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.crawl.workers import (PageTimeoutError, ParsedPage, background_process,
                                          name_process, time_budget)

logger = logging.getLogger(__name__)
WARMUP_PAGE = (b"<html><head><title>warm-up</title></head><body><div class=main><h1>Warm-up"
               b"</h1><p>A page parsed and scored once before the crawl.</p></div></body></html>")
_state: dict = {}


def load_extractor(model: str, device: str | None, limits: PageLimits,
                   batch_nodes: int | None, threads: int, threshold: float | None = None,
                   refine: bool | None = None, rescore: bool | None = None,
                   page_timeout: float | None = None, lower_priority: bool = True) -> None:
    """Process initializer: load and warm up the model; a failure is kept for ``describe``.
    ``page_timeout``: ``GROWNUP_PAGE_TIMEOUT``, what each page's parsing and article may take
    together (``score_articles``); ``lower_priority``: ``workers.background_process``'s."""
    _state.clear()
    _state["page_timeout"] = page_timeout or None
    background_process(lower_priority)
    name_process("grownup-model")
    try:
        from scrapy_grownup.page.dom import parse_page
        from scrapy_grownup.extractor import ArticleExtractor

        # GROWNUP_MODEL_THREADS: torch threads of each model call (set for the call; this
        # may be the crawl's own process when GROWNUP_MODEL_PROCESS is off)
        # GROWNUP_THRESHOLD / GROWNUP_REFINE / GROWNUP_RESCORER: None keeps the model's own
        extractor = ArticleExtractor.from_pretrained(model, device=device, limits=limits,
                                                     threads=threads, threshold=threshold,
                                                     refine=refine, rescore=rescore)
        if batch_nodes is not None:  # None: the extractor's own
            extractor.batch_nodes = batch_nodes
        # First calls load lazy parts (py3langid's model, torch's kernels): done before
        # the crawl.
        extractor.articles([parse_page(WARMUP_PAGE, url="about:warmup", limits=limits)])
        _state["extractor"] = extractor
    except Exception as exc:  # noqa: BLE001 - reported by describe() in the crawl's process
        _state["error"] = exc if isinstance(exc, GrownupError) else \
            ModelError(f"loading model {model!r} failed: {type(exc).__name__}: {exc}")


def loaded_extractor():
    """The model this process loaded (``load_extractor``); raises its load error."""
    if "error" in _state:
        raise _state["error"]
    return _state["extractor"]


def describe() -> dict:
    """What the crawl needs to know of the loaded model (raises its load error): ``loaded`` is
    the shipped model's own name (``auto`` and ``default`` resolved) or the directory."""
    from scrapy_grownup.extractor import MODELS_DIR, resolve_model_dir

    extractor = loaded_extractor()
    try:
        directory = resolve_model_dir(extractor.name)
        loaded = directory.name if directory.parent == MODELS_DIR else str(directory)
    except GrownupError:  # pragma: no cover - it loaded from there
        loaded = extractor.name
    return {"name": extractor.name, "loaded": loaded, "version": extractor.version,
            "device": str(extractor.device), "threshold": extractor.threshold,
            "adaptive": bool(getattr(extractor, "adaptive", False)),
            "rescorer": getattr(extractor, "rescorer", None) is not None,
            "refine": bool(extractor.refine), "num_genres": extractor.model.config.num_genres,
            "page_features": extractor.page_features}


def score_articles(pages: Sequence[PageStructure | ParsedPage | PageOptions]
                   ) -> tuple[list[Article | GrownupError], int]:
    """Articles of one micro-batch, errors isolated per page: the model's (``ModelError``)
    and the article's (``ArticleError``; Markdown is built here, not while pickling). A crawl
    sends its workers' ``ParsedPage``s, unpickled here; a ``PageOptions`` carries a page with
    its request's extraction overrides (``request.meta["grownup"]``), and the pages of each
    set of overrides are extracted together by an extractor with them (``extractor_with``)."""
    extractor = loaded_extractor()
    budget = _state.get("page_timeout")
    options = [p.options if isinstance(p, PageOptions) else {} for p in pages]
    pages = [p.parsed if isinstance(p, PageOptions) else p for p in pages]
    # the seconds each page already spent of its budget, in its featurization worker
    spent = [p.parse_seconds if isinstance(p, ParsedPage) else 0.0 for p in pages]
    pages = [p.page if isinstance(p, ParsedPage) else p for p in pages]
    guard = None
    if budget is not None:
        spent_of = {id(page): seconds for page, seconds in zip(pages, spent)}

        def guard(page):
            return article_budget(budget, spent_of.get(id(page), 0.0))
    groups: dict[tuple, list[int]] = {}
    for i, overrides in enumerate(options):
        groups.setdefault(tuple(sorted(overrides.items())), []).append(i)
    results: list = [None] * len(pages)
    splits = 0
    for key, rows in groups.items():
        variant = extractor_with(extractor, **dict(key)) if key else extractor
        part, part_splits = run_split_on_oom(
            partial(variant.article_results, build_markdown=True, page_guard=guard),
            [pages[i] for i in rows], _empty_cuda_cache)
        for i, result in zip(rows, part):
            results[i] = result
        splits += part_splits
    return results, splits


class PageOptions:
    """A page sent to ``score_articles`` (a ``ParsedPage`` or ``PageStructure``) with its
    request's extraction overrides (``request_options.RequestOptions.extraction``)."""

    __slots__ = ("parsed", "options")

    def __init__(self, parsed, options: dict):
        self.parsed = parsed
        self.options = dict(options)

    @property
    def num_nodes(self) -> int:  # what the batcher sizes batches by
        return self.parsed.num_nodes

    def __getstate__(self):
        return self.parsed, self.options

    def __setstate__(self, state) -> None:
        self.parsed, self.options = state


def extractor_with(extractor, threshold: float | None = None, refine: bool | None = None):
    """``extractor`` with one page's overrides (``request.meta["grownup"]``): a shallow copy
    sharing its model, featurizer and decisions; ``threshold`` is used exactly on the page
    (``GROWNUP_THRESHOLD``: not adapted), ``refine`` as ``GROWNUP_REFINE``. The loaded
    extractor itself is never changed."""
    import copy

    variant = copy.copy(extractor)
    if threshold is not None:
        variant.threshold, variant.adaptive = float(threshold), False
    if refine is not None:
        variant.refine = bool(refine)
    return variant


@contextmanager
def article_budget(budget: float, spent: float):
    """What is left of a page's ``budget`` seconds after ``spent`` parsing it, for its article
    (decisions, metadata, text, Markdown); past it, ``PageTimeoutError``. The model's forward
    pass, shared by the pages of a batch, is no page's own and is not counted."""
    message = (f"parsing and building its article took longer than {budget:g} s "
               f"(GROWNUP_PAGE_TIMEOUT; parsing took {spent:.2f} s)")
    left = budget - spent
    if left <= 0:
        raise PageTimeoutError(message)
    with time_budget(left, message):
        yield


def _empty_cuda_cache() -> None:
    torch = sys.modules.get("torch")  # a numpy model on a CPU never imported it
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
