"""datatrove pipeline steps: GROWN+UP's articles where datatrove's ``Trafilatura`` would run.

``GrownupExtractor`` takes HTML documents (``Document.text``, the page's URL in
``metadata["url"]``, as datatrove's ``WarcReader`` gives them) and turns each into its article:
``Document.text`` becomes the article's text (or Markdown), the article's other fields (title,
language, authors, published, page type, Markdown...) go into ``Document.metadata``, and a
page without an article is dropped and counted by reason. ``GrownupWarcReader`` reads WARC/ARC
archives with the reader of ``grownup extract`` and ``grownup warc``
(``scrapy_grownup.warc.reader``: the same HTML records, the same skip reasons as stats), so that
``GrownupWarcReader -> GrownupExtractor`` gives, record for record, what
``grownup extract ARCHIVES`` gives::

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import JsonlWriter
    from scrapy_grownup.datatrove import GrownupExtractor, GrownupWarcReader

    LocalPipelineExecutor(pipeline=[
        WarcReader("crawl/"),            # or GrownupWarcReader("crawl/")
        GrownupExtractor(),              # where Trafilatura() would be
        JsonlWriter("articles/"),
    ], tasks=8, logging_dir="logs/").run()

Each task loads the model once, the first time it has a page (in the task's own process), and
extracts pages in batches of ``batch_size``. Stats (datatrove's ``stats.json``): ``total``,
``forwarded`` (documents kept), ``dropped`` and ``dropped_<reason>`` (``not_html``,
``empty_page``, ``parse_error``, ``model_error``, ``article_error``, ``no_content``: the
reasons of ``grownup extract``'s summary), ``model_loads``, and the time per document. The
reader counts ``skipped_<reason>`` with the WARC reader's reasons (``request``, ``revisit``,
``not_html``, ``http_404``, ``truncated_record``, ``corrupt``...).

Needs ``pip install 'scrapy-grownup[datatrove]'``; nothing else in ``scrapy_grownup`` imports
datatrove.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Iterable

try:
    from datatrove.data import Document, DocumentsPipeline
    from datatrove.pipeline.extractors.base import BaseExtractor
    from datatrove.pipeline.readers.base import BaseDiskReader
    from datatrove.utils.typeshelper import StatHints
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(f"scrapy_grownup.datatrove needs datatrove ({exc}); install it with "
                      f"pip install 'scrapy-grownup[datatrove]'") from exc

from scrapy_grownup.warc.sources import Source

__all__ = ["GrownupExtractor", "GrownupWarcReader"]
logger = logging.getLogger(__name__)

# One model per set of options in each process: a task's documents, and the tasks that a
# worker process runs one after the other, share it.
_EXTRACTORS: dict[tuple, Any] = {}


class GrownupExtractor(BaseExtractor):
    """A datatrove step that turns HTML documents into their articles, where datatrove's
    ``Trafilatura`` step would run.

    ``Document.text`` (the page's HTML, its URL in ``metadata["url"]``) becomes the article's
    text or Markdown and the article's other fields go into ``Document.metadata``; a page
    without an article is dropped and counted as ``dropped_<reason>``. Each task loads the
    model once, in its own process, and extracts pages in batches, so the model's cost is
    shared by many pages (see the module's doc).

    Args:
        model: a shipped model's name (``auto``, ``fast``, ``default``, ``minilm``) or a model
            directory.
        device: ``cpu``, ``cuda`` or ``cuda:N``; ``None``: CUDA when available.
        threshold: as ``grownup extract --threshold`` (``None``: each page's own cut-off).
        refine: as ``grownup extract --refine``.
        precision: as ``grownup extract --precision`` (the same as ``refine``).
        rescore: ``False`` as ``grownup extract --no-rescorer``; ``None``: the model's own.
        threads: torch threads of each task's model (one suits one task per core).
        batch_size: pages sent to the model at a time.
        output_format: ``text`` (``Document.text`` is the article's text) or ``markdown``.
        comments: append the readers' comments to the text, as ``grownup extract
            --comments`` (they are always in ``metadata["comments"]``).
        timeout: kept for ``BaseExtractor``'s interface, unused: pages are bounded by the
            extractor's page limits (bytes, nodes, depth) instead, and extracted in this
            process, in batches, rather than one by one in a sandbox process.

    Raises:
        ValueError: ``output_format`` is neither ``text`` nor ``markdown``, or ``batch_size``
            is below 1. A model that cannot load raises ``ModelLoadError`` when the first page
            arrives.
    """

    name = "🌱 GROWN+UP"
    _requires_dependencies: list = []  # scrapy-grownup itself; torch only where the model needs it

    def __init__(self, model: str = "auto", device: str | None = None,
                 threshold: float | None = None, refine: bool = False, precision: bool = False,
                 rescore: bool | None = None, threads: int | None = 1, batch_size: int = 64,
                 output_format: str = "text", comments: bool = False,
                 timeout: float | None = None):
        super().__init__(timeout=timeout if timeout is not None else 0)
        if output_format not in ("text", "markdown"):
            raise ValueError(f"output_format must be 'text' or 'markdown', not {output_format!r}")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.model = model
        self.device = device
        self.threshold = threshold
        self.refine = bool(refine or precision)
        self.rescore = rescore
        self.threads = threads
        self.batch_size = batch_size
        self.output_format = output_format
        self.comments = comments
        self._warned: set[str] = set()

    # -- the model: once per process -----------------------------------------------------------
    def _options(self) -> tuple:
        return (self.model, self.device, self.threshold, self.refine or None, self.rescore,
                self.threads)

    @property
    def extractor(self):
        key = self._options()
        extractor = _EXTRACTORS.get(key)
        if extractor is None:
            from scrapy_grownup.extractor import ArticleExtractor

            extractor = ArticleExtractor.from_pretrained(
                self.model, device=self.device, threshold=self.threshold,
                refine=self.refine or None, rescore=self.rescore, threads=self.threads)
            _EXTRACTORS[key] = extractor
            self.stat_update("model_loads")
        return extractor

    def __getstate__(self) -> dict:
        return dict(self.__dict__)  # the model stays out: it is a module-level cache

    # -- BaseExtractor's interface ---------------------------------------------------------------
    def extract(self, text: str) -> str:
        """One page's article text ("" when it has none); ``run`` batches pages instead."""
        from scrapy_grownup.errors import GrownupError

        try:
            article = self.extractor.extract(text)
        except GrownupError:
            return ""
        return self._text(article) or ""

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1
            ) -> DocumentsPipeline:
        """Extract the articles of ``data``'s documents, in batches of ``batch_size``.

        Args:
            data: the documents from the previous step.
            rank: this task's number (datatrove's).
            world_size: how many tasks run (datatrove's).

        Returns:
            The documents that have an article, text and metadata replaced, in order.
        """
        batch: list[Document] = []
        for doc in data or ():
            self.stat_update(StatHints.total)
            batch.append(doc)
            if len(batch) >= self.batch_size:
                yield from self._extract_batch(batch)
                batch = []
        if batch:
            yield from self._extract_batch(batch)

    # -- one batch -------------------------------------------------------------------------------
    def _extract_batch(self, docs: list[Document]) -> Iterable[Document]:
        from functools import partial

        from scrapy_grownup.cli.main import SKIP_REASONS
        from scrapy_grownup.errors import GrownupError
        from scrapy_grownup.extractor import run_split_on_oom
        from scrapy_grownup.page.dom import parse_page

        def reason_of(exc: BaseException) -> str:
            reason = SKIP_REASONS.get(type(exc).__name__, "bad_page")
            if reason not in self._warned:  # once per reason, as BaseExtractor warns
                self._warned.add(reason)
                logger.warning("dropping pages as %s, such as this one: %s: %s (said once)",
                               reason, type(exc).__name__, exc)
            return reason

        extractor = self.extractor  # loaded before the clock starts: ``model_loads`` says so
        started = time.perf_counter()
        outcome: list = [None] * len(docs)  # (text, fields) or a drop reason
        pages, rows = [], []
        for i, doc in enumerate(docs):
            metadata = doc.metadata or {}
            try:
                pages.append(parse_page(doc.text, url=metadata.get("url") or None,
                                        content_type=metadata.get("content_type"),
                                        limits=extractor.featurizer.limits))
                rows.append(i)
            except GrownupError as exc:
                outcome[i] = reason_of(exc)
        if pages:
            articles = partial(extractor.article_results, build_markdown=True)
            for i, article in zip(rows, run_split_on_oom(articles, pages)[0]):
                if isinstance(article, GrownupError):
                    outcome[i] = reason_of(article)
                    continue
                try:
                    text = self._text(article)
                    fields = article.to_dict()
                except GrownupError as exc:
                    outcome[i] = reason_of(exc)
                    continue
                outcome[i] = (text, fields) if text is not None else "no_content"
        share = (time.perf_counter() - started) / len(docs)
        for doc, result in zip(docs, outcome):
            self.stats.time_stats.update(share)  # each document's share of its batch's time
            if isinstance(result, str):
                self.stat_update(StatHints.dropped, f"dropped_{result}")
                continue
            text, fields = result
            fields.pop("text", None)
            doc.text = text
            doc.metadata.update(fields)
            self.stat_update("extracted", StatHints.forwarded)
            self.update_doc_stats(doc)
            yield doc

    def _text(self, article) -> str | None:
        """The article's text (or Markdown), with its readers' comments after it when asked
        for, as ``grownup extract --format text|markdown [--comments]`` writes it; None when
        the article has no text."""
        if not article.text.strip():
            return None
        body = article.markdown if self.output_format == "markdown" else article.text
        if self.comments and (article.comments or "").strip():
            heading = "## Comments" if self.output_format == "markdown" else "Comments:"
            body = body.rstrip("\n") + f"\n\n{heading}\n\n{article.comments.strip()}"
        return body


@dataclass(frozen=True)
class _FolderSource(Source):
    """An archive of a datatrove ``DataFolder`` that is not on the local disk (S3, HF...)."""

    folder: Any = None
    path: str = ""

    def open(self, timeout: float = 60.0):
        return self.folder.open(self.path, "rb")  # no decompression: the reader does it

    def size(self) -> int | None:
        try:
            return int(self.folder.size(self.path))
        except Exception:  # noqa: BLE001 - a size is only a hint
            return None


class GrownupWarcReader(BaseDiskReader):
    """WARC/ARC archives (plain or gzipped, known by their first bytes) -> one document per
    HTML record, read by ``scrapy_grownup.warc.reader.RecordReader``.

    ``Document.text`` is the page's HTML, decoded as ``grownup extract`` decodes it (HTTP
    charset, BOM, ``<meta charset>``...); ``id`` the ``WARC-Record-ID``; metadata ``url``
    (``WARC-Target-URI``), ``date`` (``WARC-Date``), ``content_type`` (the HTTP one),
    ``warc_offset``, ``record_type`` and ``file_path``. Records that are no HTML page are
    counted as ``skipped_<reason>`` (the reader's reasons); files whose first bytes are no
    archive and whose names are not an archive's as ``skipped_not_an_archive``.
    Reading with the same reader as ``grownup extract`` means
    ``GrownupWarcReader -> GrownupExtractor`` gives, record for record, what
    ``grownup extract ARCHIVES`` gives.

    Args:
        data_folder (DataFolderLike): the archives' folder (local, S3, HF...), as datatrove's
            readers take it.
        max_bytes: caps a page's body as the extractor's page limits do.
        record_types: the WARC record types that can be pages.
        **kwargs (Any): the other arguments of datatrove's ``BaseDiskReader`` (``paths_file``,
            ``limit``, ``skip``, ``glob_pattern``...).
    """

    name = "🕷 GROWN+UP WARC"
    _requires_dependencies = ["warcio"]

    def __init__(self, data_folder, paths_file=None, limit: int = -1, skip: int = 0,
                 file_progress: bool = False, doc_progress: bool = False, adapter=None,
                 text_key: str = "text", id_key: str = "id", default_metadata: dict | None = None,
                 recursive: bool = True, glob_pattern: str | None = None,
                 shuffle_files: bool = False, max_bytes: int = 5_000_000,
                 record_types: tuple[str, ...] = ("response", "resource"), **kwargs):
        super().__init__(data_folder, paths_file=paths_file, limit=limit, skip=skip,
                         file_progress=file_progress, doc_progress=doc_progress,
                         adapter=adapter, text_key=text_key, id_key=id_key,
                         default_metadata=default_metadata, recursive=recursive,
                         glob_pattern=glob_pattern, shuffle_files=shuffle_files, **kwargs)
        self.max_bytes = max_bytes
        self.record_types = tuple(record_types)

    def _source(self, filepath: str) -> Source:
        location = self.data_folder.resolve_paths(filepath)
        if self.data_folder.is_local():
            return Source(location)
        return _FolderSource(location, self.data_folder, filepath)

    def read_file(self, filepath: str) -> DocumentsPipeline:
        from scrapy_grownup.page.decoding import decode_html
        from scrapy_grownup.warc.reader import Candidate, RecordReader
        from scrapy_grownup.warc.sources import is_archive_name, sniff_archive

        source = self._source(filepath)
        if not is_archive_name(filepath):
            try:
                with source.open() as handle:
                    head = handle.read(4096)
            except OSError:
                head = None
            if head is not None and sniff_archive(head) is None:
                self.stat_update("skipped_not_an_archive")
                return
        reader = RecordReader(source, self.max_bytes, self.record_types)
        for index, event in enumerate(reader):
            if not isinstance(event, Candidate):
                self.stat_update(f"skipped_{event.reason}")
                continue
            with self.track_time():
                text = decode_html(event.body, event.content_type)[0]
                if not text.strip():
                    self.stat_update("skipped_empty_page")
                    continue
                document = self.get_document_from_dict({
                    "text": text,
                    "id": event.record_id or f"{source.location}@{event.offset}",
                    "metadata": {"url": event.url or None, "date": event.date,
                                 "content_type": event.content_type,
                                 "warc_offset": event.offset, "record_type": event.record_type,
                                 "file_path": source.location},
                }, filepath, index)
            if document is not None:
                yield document
