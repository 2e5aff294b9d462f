"""Page workers that hold the model: on a CPU, each page's whole extraction in one worker.

Where the model runs on a CPU with the numpy runtime (no torch, a small process), a crawl needs
no model process: each page worker loads the extractor once and turns a response body into its
article (parse, features, the forward pass, the decisions, text, Markdown and metadata) in one
call. The crawl's process then only submits bodies and fills items: no page is pickled between
processes, only its bytes in and its article out, and every core does whole pages.

A page's ``GROWNUP_PAGE_TIMEOUT`` covers all of it (``workers.time_budget``); a worker that
dies takes only its page with it (``WorkerCrashedError``), and its replacement loads the model
again in its initializer.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from contextlib import nullcontext
from functools import partial

from scrapy_grownup.crawl import model_process
from scrapy_grownup.crawl.workers import featurization_worker, name_process, time_budget
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.extractor import run_split_on_oom
from scrapy_grownup.output.article import Article
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.page.limits import PageLimits


class ExtractedPage:
    """A page's article, built in a page worker, and the seconds its two parts took there."""

    __slots__ = ("article", "parse_seconds", "article_seconds", "num_nodes")

    def __init__(self, article: Article, parse_seconds: float, article_seconds: float,
                 num_nodes: int):
        self.article = article
        self.parse_seconds = parse_seconds
        self.article_seconds = article_seconds
        self.num_nodes = num_nodes

    def __getstate__(self):
        return self.article, self.parse_seconds, self.article_seconds, self.num_nodes

    def __setstate__(self, state) -> None:
        self.article, self.parse_seconds, self.article_seconds, self.num_nodes = state


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
    in_worker = multiprocessing.parent_process() is not None
    guard = time_budget(budget, f"parsing and building its article took longer than "
                                f"{budget:g} s (GROWNUP_PAGE_TIMEOUT)") \
        if budget and (in_worker or threading.current_thread() is not threading.main_thread()) \
        else nullcontext()
    start = time.perf_counter()
    with guard:
        page = parse_page(body, url=url, content_type=content_type, limits=limits)
        parsed = time.perf_counter()
        # the model's failure is the page's ModelError, its article's an ArticleError
        result = run_split_on_oom(partial(extractor.article_results, build_markdown=True),
                                  [page])[0][0]
    if isinstance(result, GrownupError):
        raise result
    done = time.perf_counter()
    return ExtractedPage(result, parsed - start, done - parsed, page.num_nodes)


__all__ = ["ExtractedPage", "extract_in_worker", "extraction_worker"]
