"""Page workers: a response body in, its article out, in one call per page.

The crawl's process only submits bodies and fills items: no page is pickled between processes,
its bytes go in and its ``Article`` comes out. A worker does all of a page but, where a model
server runs, the forward pass:

- ``extract_in_worker`` (a CPU with the numpy runtime: no torch, a small process): each worker
  loads the whole extractor and does everything, the forward pass included; no model process.
- ``extract_with_model_server`` (a GPU, a torch model, or ``GROWNUP_MODEL_PROCESS`` on): the
  worker parses, computes the page's model inputs (``ArticleExtractor.page_inputs``), sends
  them to the model server (``model_server``), which batches the forward passes of all
  workers' pages, and builds the article from the outputs it gets back. The page itself never
  leaves the worker; the worker holds the page side of the extractor only
  (``ArticleExtractor.for_articles``: no weights, no text encoder).

A page's ``GROWNUP_PAGE_TIMEOUT`` covers its own work in the worker (``workers.time_budget``):
the parse and the article; the forward pass, shared by a batch, is no page's own. A worker
that dies takes only its page with it (``WorkerCrashedError``); its replacement sets up again
in its initializer.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from contextlib import nullcontext
from functools import partial

from scrapy_grownup.crawl import model_process
from scrapy_grownup.crawl.model_server import ModelClient
from scrapy_grownup.crawl.workers import featurization_worker, name_process, time_budget
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.extractor import run_split_on_oom
from scrapy_grownup.output.article import Article
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.page.limits import PageLimits


class ExtractedPage:
    """A page's article, built in a page worker, and the seconds its two parts took there.
    ``cpu_seconds``: the worker's CPU time on the page (its parse and article, and the forward
    pass where the worker ran it; not a wait for the model server). ``batch``: where a model
    server ran its forward pass, that batch's ``(pages, seconds, OOM splits)``; None where the
    worker ran it."""

    __slots__ = ("article", "article_seconds", "batch", "cpu_seconds", "num_nodes",
                 "parse_seconds")

    def __init__(self, article: Article, parse_seconds: float, article_seconds: float,
                 num_nodes: int, batch: tuple[int, float, int] | None = None,
                 cpu_seconds: float = 0.0):
        self.article = article
        self.parse_seconds = parse_seconds
        self.article_seconds = article_seconds
        self.num_nodes = num_nodes
        self.batch = batch
        self.cpu_seconds = cpu_seconds

    def __getstate__(self):
        return (self.article, self.parse_seconds, self.article_seconds, self.num_nodes,
                self.batch, self.cpu_seconds)

    def __setstate__(self, state) -> None:
        (self.article, self.parse_seconds, self.article_seconds, self.num_nodes,
         self.batch, self.cpu_seconds) = state


def extraction_worker(page_timeout: float | None, model: str, device: str | None,
                      limits: PageLimits, batch_nodes: int | None, threads: int,
                      threshold: float | None = None, refine: bool | None = None,
                      rescore: bool | None = None) -> None:
    """Initializer of a page worker that extracts whole pages: the extractor loaded and warmed
    up (``model_process.load_extractor``; a failure is kept for ``describe``), then the page
    worker's own set-up (one thread, its name, the per-page budget)."""
    model_process.load_extractor(model, device, limits, batch_nodes, threads, threshold,
                                 refine, rescore, page_timeout)
    featurization_worker(page_timeout)
    name_process("grownup-worker")


def extract_in_worker(body: bytes, url: str | None, content_type: str | None,
                      limits: PageLimits, derive: tuple[str, ...] = (),
                      options: dict | None = None) -> ExtractedPage:
    """One page's article (module-level so it pickles; ``derive`` is accepted for the pool's
    signature, the extractor computes what it reads; ``options``: its request's extraction
    overrides, ``model_process.extractor_with``'s). Raises the page's ``GrownupError``:
    ``PageTimeoutError`` past ``GROWNUP_PAGE_TIMEOUT`` for the parse and the article together,
    ``ParseError``, ``ModelError``, ``ArticleError``..."""
    extractor = model_process.loaded_extractor()
    if options:
        extractor = model_process.extractor_with(extractor, **options)
    budget = model_process._state.get("page_timeout")
    guard = time_budget(budget, f"parsing and building its article took longer than "
                                f"{budget:g} s (GROWNUP_PAGE_TIMEOUT)") \
        if budget and _may_interrupt() else nullcontext()
    start, start_cpu = time.perf_counter(), time.process_time()
    with guard:
        page = parse_page(body, url=url, content_type=content_type, limits=limits)
        parsed = time.perf_counter()
        # the model's failure is the page's ModelError, its article's an ArticleError
        result = run_split_on_oom(partial(extractor.article_results, build_markdown=True),
                                  [page])[0][0]
    if isinstance(result, GrownupError):
        raise result
    done = time.perf_counter()
    return ExtractedPage(result, parsed - start, done - parsed, page.num_nodes,
                         cpu_seconds=time.process_time() - start_cpu)


def _may_interrupt() -> bool:
    """Whether a page's time budget may be enforced here: in a worker process, or on a
    thread (checked when the work ends); never on the crawl's own main thread."""
    return multiprocessing.parent_process() is not None or \
        threading.current_thread() is not threading.main_thread()


# The page side of the extractor and the connection to the model server of this worker
# (``model_server_worker``).
_served: dict = {}


def model_server_worker(page_timeout: float | None, address: str, authkey: bytes, model: str,
                        limits: PageLimits, threshold: float | None = None,
                        refine: bool | None = None, rescore: bool | None = None) -> None:
    """Initializer of a page worker whose forward passes run in the model server at
    ``address``: the page side of the extractor of ``model`` (the model the server loaded,
    ``ArticleExtractor.for_articles``), then the page worker's own set-up. A failure to load
    is raised by each page (``loaded_extractor``'s)."""
    from scrapy_grownup.extractor import ArticleExtractor

    _served.clear()
    _served["page_timeout"] = page_timeout or None
    _served["client"] = ModelClient(address, authkey)
    try:
        _served["extractor"] = ArticleExtractor.for_articles(
            model, threshold=threshold, refine=refine, limits=limits, rescore=rescore)
    except Exception as exc:  # noqa: BLE001 - each page reports it
        _served["error"] = exc if isinstance(exc, GrownupError) else \
            GrownupError(f"loading model {model!r}: {type(exc).__name__}: {exc}")
    featurization_worker(page_timeout)
    name_process("grownup-worker")


def extract_with_model_server(body: bytes, url: str | None, content_type: str | None,
                              limits: PageLimits, derive: tuple[str, ...] = (),
                              options: dict | None = None) -> ExtractedPage:
    """One page's article, its forward pass in the model server (``extract_in_worker``'s
    arguments and errors). ``GROWNUP_PAGE_TIMEOUT`` bounds the parse with the inputs, then
    what it leaves the article (``model_process.article_budget``); the wait for the outputs
    counts for neither. A model server that dies while it holds the page is its
    ``ModelError``."""
    if "error" in _served:
        raise _served["error"]
    extractor = _served["extractor"]
    if options:
        extractor = model_process.extractor_with(extractor, **options)
    budget = _served["page_timeout"] if _may_interrupt() else None
    start, start_cpu = time.perf_counter(), time.process_time()
    with time_budget(budget, f"parsing took longer than {budget:g} s (GROWNUP_PAGE_TIMEOUT)") \
            if budget else nullcontext():
        page = parse_page(body, url=url, content_type=content_type, limits=limits)
        inputs = extractor.page_inputs(page)
    parsed, parsed_cpu = time.perf_counter(), time.process_time()
    outputs, batch = _served["client"].score(inputs)
    scored, scored_cpu = time.perf_counter(), time.process_time()
    with model_process.article_budget(budget, parsed - start) if budget else nullcontext():
        # the page-type classifier's failure is the page's ModelError, its article's an
        # ArticleError
        result = run_split_on_oom(partial(extractor.articles_from_outputs, outputs=[outputs],
                                          build_markdown=True), [page])[0][0]
    if isinstance(result, GrownupError):
        raise result
    return ExtractedPage(result, parsed - start, time.perf_counter() - scored, page.num_nodes,
                         batch, (parsed_cpu - start_cpu) + (time.process_time() - scored_cpu))


__all__ = ["ExtractedPage", "extract_in_worker", "extract_with_model_server",
           "extraction_worker", "model_server_worker"]
