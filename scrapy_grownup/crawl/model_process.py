"""A process's loaded ``ArticleExtractor``: loading it once, describing it, a page's overrides.

A process that holds the model (the crawl's model server, ``model_server``; a page worker that
extracts whole pages, ``page_worker``; a ``grownup extract --jobs`` worker) loads it in its
initializer with ``load_extractor``, which keeps a load failure for ``describe`` to raise in
the crawl's process. ``extractor_with`` applies one request's ``meta["grownup"]`` overrides,
``article_budget`` what is left of a page's ``GROWNUP_PAGE_TIMEOUT`` for its article.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

from scrapy_grownup.errors import GrownupError, ModelError
from scrapy_grownup.extractor import is_out_of_memory, run_split_on_oom  # noqa: F401 - also imported here
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.crawl.workers import (PageTimeoutError, background_process, name_process,
                                          time_budget)

logger = logging.getLogger(__name__)
WARMUP_PAGE = (b"<html><head><title>warm-up</title></head><body><div class=main><h1>Warm-up"
               b"</h1><p>A page parsed and scored once before the crawl.</p></div></body></html>")
_state: dict = {}


def load_extractor(model: str, device: str | None, limits: PageLimits,
                   batch_nodes: int | None, threads: int, threshold: float | None = None,
                   refine: bool | None = None, rescore: bool | None = None,
                   page_timeout: float | None = None, lower_priority: bool = True,
                   forward_only: bool = False) -> None:
    """Process initializer: load and warm up the model; a failure is kept for ``describe``.
    ``page_timeout``: ``GROWNUP_PAGE_TIMEOUT``, what each page's parsing and article may take
    together (``page_worker``); ``lower_priority``: ``workers.background_process``'s;
    ``forward_only``: the warm-up runs the forward pass alone (the model server, which builds
    no article), not a whole article."""
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
        page = parse_page(WARMUP_PAGE, url="about:warmup", limits=limits)
        if forward_only:
            extractor.batch_outputs([extractor.page_inputs(page)])
        else:
            extractor.articles([page])
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
            "refine": bool(extractor.refine),
            "num_page_types": extractor.model.config.num_page_types,
            "page_features": extractor.page_features}


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

