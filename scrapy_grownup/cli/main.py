"""grownup: main-content extraction from saved web pages and web archives with a GROWN+UP graph
neural network.

Commands extract articles, show a page's scores, build a pre-training corpus from archives,
pre-train and train models; "grownup lab" holds the research tools (evaluation across sites,
heads, rescorer and page-type fitting, exports).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import re
import sys
import zlib
from collections import Counter
from pathlib import Path

from scrapy_grownup.cli.argtypes import probability
from scrapy_grownup.errors import GrownupError, UserError

logger = logging.getLogger("scrapy_grownup.cli.main")
HTML_SUFFIXES = (".html", ".htm", ".xhtml", ".shtml")
OUTPUT_FORMATS = ("json", "text", "markdown", "html", "csv")
# Why a page gave no article, as the summary line counts it (the crawl's drop reasons).
SKIP_REASONS = {"NotHTMLError": "not_html", "EmptyPageError": "empty_page",
                "ParseError": "parse_error", "ModelError": "model_error",
                "ArticleError": "article_error", "WorkerCrashedError": "worker_crashed"}


def _is_html_name(path: Path) -> bool:
    name = path.name.lower()
    return name.removesuffix(".gz").endswith(HTML_SUFFIXES)


def _inputs(paths: list[str], roots: list | None = None) -> list:
    """What ``extract`` reads, in order: each file as given (a WARC/ARC archive when its first
    bytes are one, gzipped or not, or when it is named like one; a page otherwise), an http(s)
    URL as an archive read as it downloads, under
    directories the HTML files (``.gz`` too) and the archives (by content or name), sorted,
    ``"-"`` for standard input, and a ``sources.PathSkip`` for each path that gives nothing
    (a dangling link, a link loop, a FIFO, an empty directory): counted, not an error.
    ``roots`` (when given) gets, for each input, the directory given that it was found under
    (None for an input given itself): ``-o DIR`` names its files after their place there."""
    from scrapy_grownup.warc.sources import expand_inputs

    inputs: list = []
    for raw in paths:
        if raw == "-":
            if "-" in inputs:
                raise UserError("'-' (standard input) can be given only once")
            inputs.append("-")
            if roots is not None:
                roots.append(None)
            continue
        if not raw.startswith(("http://", "https://")) and not os.path.lexists(raw):
            raise UserError(f"no such file or directory: {raw}")
        items = expand_inputs([raw], page_name=lambda name: _is_html_name(Path(name)),
                              sort_pages=True).items
        inputs.extend(items)
        if roots is not None:
            root = raw if not raw.startswith(("http://", "https://")) and os.path.isdir(raw) \
                else None
            roots.extend([root] * len(items))
    return inputs


def _read_page(source) -> bytes:
    """A page's bytes from a file or ``"-"`` (stdin), gunzipped when they are gzip data."""
    data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def _open_output(path: str, resume_bytes: int | None = None):
    """The output stream: standard output, ``path`` written anew, or (``resume_bytes``) ``path``
    cut to what an interrupted run had finished, to go on after it."""
    if path == "-":
        return sys.stdout
    try:
        if resume_bytes is None:
            return open(path, "w", encoding="utf-8")
        out = open(path, "r+", encoding="utf-8")
        out.truncate(resume_bytes)
        out.seek(0, os.SEEK_END)
        return out
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def cmd_extract(args) -> int:
    from scrapy_grownup.extractor import ArticleExtractor
    from scrapy_grownup.warc.extract import ExtractProgress, estimated_pages
    from scrapy_grownup.warc.sources import PathSkip, Source

    roots: list = []
    inputs = _inputs(args.paths, roots)
    archives = any(isinstance(item, Source) for item in inputs)
    real = [item for item in inputs if not isinstance(item, PathSkip)]
    if args.url and archives:
        raise UserError("--url gives one page its URL; the pages of an archive have their "
                        "records' WARC-Target-URI")
    if args.url and len(real) != 1:
        raise UserError(f"--url gives one page its URL, but {len(real)} pages were given")
    if not real:
        broken = [item for item in inputs if item.reason != "empty_directory"]
        if broken:
            raise UserError(f"{broken[0].path}: {broken[0].detail} ({broken[0].reason})")
        raise UserError("no HTML files (.html, .htm, .xhtml, .shtml, or those .gz) or WARC/ARC "
                        "archives found in " + ", ".join(args.paths))
    directory = _output_directory(args.output)
    names = _output_names(inputs, roots, args.format, directory) if directory else None
    progress = state = None
    if directory is not None:
        progress = ExtractProgress(str(directory), inputs, _progress_options(args))
        progress.path = directory / DIRECTORY_PROGRESS  # inside DIR, not beside it
        state = progress.load()
        out = None
    elif args.output != "-":
        progress = ExtractProgress(args.output, inputs, _progress_options(args))
        state = progress.load()
    if directory is None:
        # before the model loads: a bad path fails at once
        out = _open_output(args.output, state["output_bytes"] if state else None)
    run = _Run(inputs, state, progress, archives)
    several = archives or len(real) > 1
    sink = _DirectoryOutput(directory, names, args.format, inputs) if directory is not None \
        else _StreamOutput(out, args.format, several, fresh=not (state and
                                                                 state["output_bytes"]))
    if state:
        logger.info("resuming %s: %d of %d inputs were done by an earlier run; going on from "
                    "%s (an archive is read again from its start)", args.output, run.done,
                    len(inputs), _item_name(inputs[run.done]) if run.done < len(inputs)
                    else "the end")
    try:
        expected = estimated_pages(inputs[run.done:])
        jobs = _extract_jobs(args, expected)
        chunks = _input_chunks(inputs, args, run, _batch_pages(args.batch_pages, expected, jobs))
        if jobs > 1:
            results = _process_chunks(chunks, args, jobs)
        else:
            extractor = ArticleExtractor.from_pretrained(args.model, **_extractor_options(args))
            results = _local_chunks(extractor, chunks, args)
        summary = _extract_all(results, sink, args, run)
    finally:
        sink.close()
    if progress is not None:
        progress.finish()  # the output is whole: a rerun starts over
    print(json.dumps(summary), file=sys.stderr)
    return 0 if summary["extracted"] else 1


def _progress_options(args) -> dict:
    """The options that change ``extract``'s output: a progress file of other ones is not
    resumed."""
    return {"format": args.format, "model": args.model, "url": args.url,
            "threshold": args.threshold, "precision": args.precision, "refine": args.refine,
            "no_rescorer": args.no_rescorer, "comments": args.comments,
            "with_metadata": args.with_metadata}


def _item_name(item) -> str:
    from scrapy_grownup.warc.sources import PathSkip, Source

    if isinstance(item, Source):
        return item.location
    if isinstance(item, PathSkip):
        return item.path
    return str(item)


class _Run:
    """``extract``'s counts (those of the run it resumes included), its progress file and
    its progress display."""

    def __init__(self, inputs: list, state: dict | None, progress, archives: bool):
        import time

        counts = (state or {}).get("counts") or {}
        self.inputs = inputs
        self.done = int((state or {}).get("done", 0))
        self.resumed = self.done if state else None
        self.read = int(counts.get("read", 0))
        self.extracted = int(counts.get("extracted", 0))
        self.skipped: Counter = Counter(counts.get("skipped") or {})
        # the pages (inputs, not an archive's records) that gave no article: name -> reason,
        # the first MAX_LISTED_SKIPS of them, in the summary line
        self.skipped_pages: dict = dict(counts.get("skipped_pages") or {})
        self.unlisted = int(counts.get("skipped_pages_not_listed", 0))
        # ``archives`` and ``records`` of the archives written out; ``item_counts`` holds
        # those of each archive read (``warc.extract.record_entries``, by input index) until
        # its last line is written (``finish_inputs``)
        self.archive_counts = {"archives": int(counts.get("archives", 0)),
                               "records": int(counts.get("records", 0))}
        self.item_counts: dict[int, dict] = {}
        self.finished = self.done
        self.archives = archives
        self.progress = progress
        self.started = time.perf_counter()
        self.start_read, self.start_extracted = self.read, self.extracted

    def counts(self) -> dict:
        return {"read": self.read, "extracted": self.extracted,
                "skipped": dict(sorted(self.skipped.items())),
                "skipped_pages": dict(self.skipped_pages),
                "skipped_pages_not_listed": self.unlisted, **self.archive_counts}

    def skip_page(self, name: str, reason: str) -> None:
        if len(self.skipped_pages) < MAX_LISTED_SKIPS:
            self.skipped_pages[name] = reason
        else:
            self.unlisted += 1

    def finish_inputs(self, done: int) -> None:
        """Inputs before ``done`` are written out whole: their archives' counts count."""
        for index in range(self.finished, done):
            for key, value in self.item_counts.pop(index, {}).items():
                self.archive_counts[key] = self.archive_counts.get(key, 0) + value
        self.finished = max(self.finished, done)

    def position(self, sink) -> int:
        """The output's size now (0 without a progress file: not needed)."""
        if self.progress is None:
            return 0
        return sink.size()

    def checkpoint(self, done: int, output_bytes: int, counts: dict | None = None) -> None:
        self.done = done
        if self.progress is not None:
            self.progress.save(done, output_bytes, counts or self.counts())

    def rate(self) -> float:
        import time

        elapsed = max(time.perf_counter() - self.started, 1e-9)
        return (self.extracted - self.start_extracted) / elapsed

    def summary(self) -> dict:
        summary = {"read": self.read, "extracted": self.extracted,
                   "skipped": dict(sorted(self.skipped.items()))}
        if self.archives:
            summary.update(self.archive_counts)
        if self.skipped_pages:
            summary["skipped_pages"] = dict(self.skipped_pages)
        if self.unlisted:
            summary["skipped_pages_not_listed"] = self.unlisted
        if self.resumed is not None:
            summary["resumed_after"] = self.resumed
        return summary


def _extractor_options(args) -> dict:
    """``ArticleExtractor.from_pretrained``'s options from ``extract``'s command line."""
    return {"device": args.device, "threshold": args.threshold,
            "refine": args.refine or args.precision or None, "threads": args.threads,
            "rescore": False if args.no_rescorer else None}


def _extract_jobs(args, pages: int) -> int:
    """``--jobs``: ``auto`` is one process per core on a CPU, and this process alone where
    every page fits one batch (a process's start, the model's load included, costs more than
    it saves) or on a GPU (the GPU is the parallelism; each process would hold its own
    CUDA context)."""
    if args.jobs != "auto":
        return int(args.jobs)
    if pages <= args.batch_pages:
        return 1
    if args.device is None or not str(args.device).startswith("cpu"):
        from scrapy_grownup.model.cuda import cuda_available

        if args.device is not None or cuda_available():
            return 1
    return max(1, os.cpu_count() or 1)


def _extract_all(chunks, sink, args, run: _Run) -> dict:
    """Write each article of ``chunks`` (per batch of entries, one result per entry: ``("ok",
    body)`` or ``("skip", reason, detail[, quiet])``, in input order, with the number of inputs
    done after it) to ``sink`` (``_StreamOutput`` or ``_DirectoryOutput``), count the rest by
    reason (a page's own skip, not an archive record's, also by name), record the progress;
    returns the summary."""
    from contextlib import closing

    from tqdm import tqdm

    pages = sum(1 for item in run.inputs[run.done:] if isinstance(item, (Path, str)))
    # on a terminal, a progress bar (records read, pages/s) for archives and for runs of more
    # than one batch; elsewhere a log line every --log-every entries
    progress = tqdm(total=None if run.archives else pages, unit=" records" if run.archives
                    else "page", file=sys.stderr, leave=False,
                    disable=None if run.archives or pages > args.batch_pages else True)
    logged = run.read // args.log_every if args.log_every else 0
    with closing(chunks):
        for results, done, owners in chunks:
            # the output's size where the inputs before ``owner`` are finished: an input's
            # lines are in the output whole or not at all at a checkpoint
            boundary = None
            for (name, result), owner in zip(results, owners):
                if owner != owners[0] and boundary is None or \
                        boundary is not None and owner != boundary[0]:
                    run.finish_inputs(owner)
                    sink.finish(owner)
                    boundary = (owner, run.position(sink), run.counts())
                run.read += 1
                if result[0] == "skip":
                    run.skipped[result[1]] += 1
                    quiet = len(result) > 3 and result[3]
                    logger.log(logging.DEBUG if quiet else logging.WARNING,
                               "%s: skipped (%s): %s", name, result[1], result[2])
                    if not quiet:
                        run.skip_page(name, result[1])
                    continue
                sink.write(owner, name, result[1])
                run.extracted += 1
            if done > owners[-1]:  # every input of this batch is finished
                run.finish_inputs(done)
                sink.finish(done)
                run.checkpoint(done, run.position(sink))
            elif boundary is not None:
                run.checkpoint(*boundary)
            progress.update(len(results))
            if not progress.disable:
                progress.set_postfix_str(f"{run.extracted} articles, {run.rate():.1f} pages/s",
                                         refresh=False)
            elif args.log_every and run.read // args.log_every > logged:
                logged = run.read // args.log_every
                logger.info("%d read (%s), %d articles, %d skipped, %.1f pages/s", run.read,
                            "pages and records" if run.archives else "pages", run.extracted,
                            sum(run.skipped.values()), run.rate())
    progress.close()
    return run.summary()


def _skip_reason(exc: BaseException) -> str:
    return SKIP_REASONS.get(type(exc).__name__, "bad_page")


def _page_entries(chunk: list, args) -> list:
    """``(name, bytes or (reason, detail), url)`` of each input of ``chunk``, read here."""
    entries = []
    for source in chunk:
        url = args.url or (None if source == "-" else Path(source).resolve().as_uri())
        try:
            body = _read_page(source)
        except (OSError, EOFError, zlib.error) as exc:
            body = ("unreadable", getattr(exc, "strerror", None) or _first_line(exc))
        entries.append((str(source), body, url))
    return entries


def chunk_results(extractor, entries: list, output_format: str, comments: bool,
                  with_metadata: bool = False) -> list:
    """``[(name, ("ok", body) or ("skip", reason, detail[, quiet]))]`` of entries
    ``(name, bytes or (reason, detail), url[, extra])`` (``_page_entries``,
    ``warc.extract.record_entries``; ``extra``: the ``content_type`` the page was served
    with, the ``fields`` its JSON line gets, ``quiet`` to log its skip as debug): each page
    parsed, the pages' articles made in one batch and rendered (``_render``; ``with_metadata``:
    text, Markdown and HTML with a header of the page's title, URL, authors and date). The
    same in this process and in ``--jobs`` processes, so both write the same bytes."""
    from functools import partial

    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.extractor import run_split_on_oom

    results: list = [None] * len(entries)
    pages, rows = [], []

    def skip(i: int, reason: str, detail: str) -> None:
        extra = entries[i][3] if len(entries[i]) > 3 else None
        quiet = (True,) if extra and extra.get("quiet") else ()
        results[i] = (entries[i][0], ("skip", reason, detail, *quiet))

    for i, entry in enumerate(entries):
        name, body, url = entry[:3]
        extra = (entry[3] if len(entry) > 3 else None) or {}
        if isinstance(body, tuple):
            skip(i, *body)
            continue
        try:
            pages.append(parse_page(body, url=url, content_type=extra.get("content_type"),
                                    limits=extractor.featurizer.limits))
            rows.append(i)
        except GrownupError as exc:
            skip(i, _skip_reason(exc), _first_line(exc))
    if not pages:  # skips only: no model needed (the extractor may be None)
        return results
    articles = partial(extractor.article_results,
                       build_markdown=output_format not in ("text", "csv"))
    for i, article in zip(rows, run_split_on_oom(articles, pages)[0]):
        name = entries[i][0]
        fields = ((entries[i][3] if len(entries[i]) > 3 else None) or {}).get("fields")
        if isinstance(article, GrownupError):
            skip(i, _skip_reason(article), _first_line(article))
            continue
        try:
            body = _render(article, name, output_format, comments, fields, with_metadata)
        except GrownupError as exc:  # a lazily built Markdown's own failure
            skip(i, "article_error", _first_line(exc))
            continue
        if body is None:
            skip(i, "no_content", "the model kept no text")
        else:
            results[i] = (name, ("ok", body))
    return results


# Entries (skips) a batch holds at most besides its pages: an archive of nothing but
# revisits still goes out in bounded batches.
MAX_BATCH_ENTRIES = 4096
# With several --jobs processes: batches per process at least, and pages per batch at least
BATCHES_PER_JOB = 4
MIN_JOB_BATCH = 8


def _item_entries(index: int, item, args, run: _Run):
    from scrapy_grownup.page.limits import PageLimits
    from scrapy_grownup.warc.extract import path_skip_entry, record_entries
    from scrapy_grownup.warc.sources import PathSkip, Source

    if isinstance(item, PathSkip):
        yield path_skip_entry(item)
    elif isinstance(item, Source):
        yield from record_entries(item, PageLimits().max_bytes,
                                  run.item_counts.setdefault(index, {}))
    else:
        yield from _page_entries([item], args)


def _batch_pages(most: int, expected: int, jobs: int) -> int:
    """Pages per batch: ``--batch-pages``, or with several ``--jobs`` processes fewer, so that
    each process gets several batches and none is left with the last big one while the others
    idle (at least ``MIN_JOB_BATCH`` pages, where a batch's own costs stay small)."""
    if jobs <= 1:
        return most
    return min(most, max(MIN_JOB_BATCH, -(-expected // (BATCHES_PER_JOB * jobs))))


def _input_chunks(inputs: list, args, run: _Run, batch_pages: int | None = None):
    """``(entries, done, owners)``: the inputs not done yet as batches of at most
    ``batch_pages`` (default ``--batch-pages``) pages (and the skips among them), streamed (an
    archive's records are read as the batches are needed); ``done``: how many inputs are
    finished once this batch is written; ``owners``: the input (index) of each entry."""
    batch_pages = batch_pages or args.batch_pages
    batch: list = []
    owners: list = []
    pages = 0
    for index in range(run.done, len(inputs)):
        for entry in _item_entries(index, inputs[index], args, run):
            if batch and (pages >= batch_pages or len(batch) >= MAX_BATCH_ENTRIES):
                yield batch, index, owners
                batch, owners, pages = [], [], 0
            batch.append(entry)
            owners.append(index)
            pages += not isinstance(entry[1], tuple)
    if batch:
        yield batch, len(inputs), owners


def _local_chunks(extractor, chunks, args):
    for entries, done, owners in chunks:
        yield chunk_results(extractor, entries, args.format, args.comments,
                            args.with_metadata), done, owners


def _chunk_results_in_job(entries: list, output_format: str, comments: bool,
                          with_metadata: bool = False) -> list:
    """A ``--jobs`` process's side of ``chunk_results``, on the model it loaded."""
    from scrapy_grownup.crawl.model_process import loaded_extractor

    return chunk_results(loaded_extractor(), entries, output_format, comments, with_metadata)


async def job_batch(pool, entries: list, output_format: str, comments: bool,
                    with_metadata: bool = False) -> list:
    """``chunk_results`` of one batch in a ``--jobs`` process of ``pool``
    (``workers.ProcessPool``). A batch whose process died twice is tried page by page, so
    only the page that kills a process is lost (``worker_crashed``)."""
    from scrapy_grownup.crawl.workers import WorkerCrashedError

    try:
        return await pool.call(_chunk_results_in_job, entries, output_format, comments,
                               with_metadata, what=f"a batch of {len(entries)} pages")
    except WorkerCrashedError:
        if len(entries) == 1:
            return [(entries[0][0], ("skip", "worker_crashed",
                                     "its process died twice"))]
        return [row for entry in entries
                for row in await job_batch(pool, [entry], output_format, comments,
                                           with_metadata)]


def _process_chunks(chunks, args, jobs: int):
    """``_local_chunks`` in ``jobs`` processes, each with its own model (loaded once, as the
    crawl's model process), twice as many batches handed out as there are processes; results
    in input order (``job_batch``). A batch of skips alone is not sent anywhere."""
    import asyncio

    from scrapy_grownup.page.limits import PageLimits
    from scrapy_grownup.crawl.model_process import describe, load_extractor
    from scrapy_grownup.crawl.workers import ProcessPool

    options = _extractor_options(args)
    pool = ProcessPool(jobs, "extract", initializer=load_extractor,
                       initargs=(args.model, options["device"], PageLimits(), None,
                                 options["threads"], options["threshold"], options["refine"],
                                 options["rescore"], None, False))
    loop = asyncio.new_event_loop()
    pending: list = []  # (task, done, owners, sent to a process)

    async def load():
        await asyncio.gather(*(pool.call(describe, what="loading the model")
                               for _ in range(jobs)))

    try:
        # every process loads its model first; one that cannot says why, once
        loop.run_until_complete(load())
        for entries, done, owners in chunks:
            sent = any(not isinstance(entry[1], tuple) for entry in entries)
            if sent:
                task = loop.create_task(job_batch(pool, entries, args.format, args.comments,
                                                  args.with_metadata))
            else:
                task = loop.create_future()
                task.set_result(chunk_results(None, entries, args.format, args.comments,
                                              args.with_metadata))
            pending.append((task, done, owners, sent))
            while sum(1 for *_, busy in pending if busy) >= 2 * jobs:
                task, done, owners, _ = pending.pop(0)
                yield loop.run_until_complete(task), done, owners
        while pending:
            task, done, owners, _ = pending.pop(0)
            yield loop.run_until_complete(task), done, owners
    finally:
        for task, *_ in pending:
            task.cancel()
        pool.close()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


def _render(article, name: str, output_format: str, comments: bool = False,
            fields: dict | None = None, with_metadata: bool = False) -> str | None:
    """One article as ``output_format`` (a JSON line, a CSV row of ``CSV_COLUMNS``, or the
    text, Markdown or HTML ending in a newline); ``None`` when it has no text. ``comments``
    appends the readers' comments (the role head's ``comments`` field) to text, Markdown and
    HTML; JSON always has them in ``comments``. ``fields`` are added to the JSON line (an
    archive record's ``path`` and ``warc``). ``with_metadata`` puts the page's title, URL,
    authors and date before the text or Markdown (``metadata_header``) and makes the HTML a
    whole document whose head holds them."""
    if not article.text.strip():
        return None
    if output_format == "json":
        record = article.to_dict()
        record["path"] = name
        record.update(fields or {})
        return json.dumps(record, ensure_ascii=False) + "\n"
    if output_format == "csv":
        return csv_row(article, name)
    if output_format == "html":
        return article_html(article, comments, with_metadata)
    body = (article.markdown if output_format == "markdown" else article.text).rstrip("\n")
    if comments and (article.comments or "").strip():
        heading = "## Comments" if output_format == "markdown" else "Comments:"
        body += f"\n\n{heading}\n\n{article.comments.strip()}"
    if with_metadata:
        body = metadata_header(article, output_format) + body
    return body + "\n"


# The columns of --format csv, one row per page (authors joined by "; ").
CSV_COLUMNS = ("path", "url", "title", "authors", "date", "language", "page_type", "text")


def _csv_line(values) -> str:
    import csv
    import io

    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(values)
    return buffer.getvalue()


def csv_row(article, name: str) -> str:
    """The CSV row (RFC 4180: quoted where needed, CRLF at its end) of ``article``."""
    return _csv_line([name, article.url or "", article.title or "",
                      "; ".join(article.authors or ()), article.published or "",
                      article.language or "", article.page_type or "", article.text])


def _metadata_values(article) -> list[tuple[str, str]]:
    """``(name, value)`` of the header of ``--with-metadata``: those the page has."""
    values = [("title", article.title), ("url", article.url),
              ("author", "; ".join(article.authors or ())), ("date", article.published)]
    return [(key, str(value)) for key, value in values if value]


def metadata_header(article, output_format: str) -> str:
    """``--with-metadata``'s header before a page's text (``Title: ...`` lines) or Markdown
    (YAML front matter between ``---`` lines, its values JSON-quoted), and a blank line."""
    values = _metadata_values(article)
    if output_format == "markdown":
        lines = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in values]
        return "---\n" + "".join(line + "\n" for line in lines) + "---\n\n"
    lines = [f"{key.capitalize() if key != 'url' else 'URL'}: {' '.join(value.split())}"
             for key, value in values]
    return "".join(line + "\n" for line in lines) + "\n" if lines else ""


def article_html(article, comments: bool = False, with_metadata: bool = False) -> str:
    """The article's clean HTML (``Article.html`` where the article has it; else a ``<p>`` per
    line of its text, escaped), the comments in a ``<section>`` after it with ``comments``;
    with ``with_metadata`` a whole document whose ``<head>`` holds the title, canonical URL,
    authors and date."""
    from html import escape

    def paragraphs(text: str) -> str:
        return "\n".join(f"<p>{escape(line.strip())}</p>" for line in text.splitlines()
                         if line.strip())

    body = (getattr(article, "html", None) or "").strip() or paragraphs(article.text)
    if comments and (article.comments or "").strip():
        body += f'\n<section class="comments">\n<h2>Comments</h2>\n' \
                f'{paragraphs(article.comments)}\n</section>'
    if not with_metadata:
        return body + "\n"
    head = ['<meta charset="utf-8">']
    values = dict(_metadata_values(article))
    if "title" in values:
        head.append(f"<title>{escape(values['title'])}</title>")
    if "url" in values:
        head.append(f'<link rel="canonical" href="{escape(values["url"])}">')
    if "author" in values:
        head.append(f'<meta name="author" content="{escape(values["author"])}">')
    if "date" in values:
        head.append(f'<meta name="date" content="{escape(values["date"])}">')
    lang = f' lang="{escape(article.language)}"' if article.language else ""
    return (f"<!DOCTYPE html>\n<html{lang}>\n<head>\n" + "\n".join(head) +
            f"\n</head>\n<body>\n{body}\n</body>\n</html>\n")


# -- where extract writes --------------------------------------------------------------------------
# The file of an input under -o DIR, by format; an archive's, holding many pages: ``ARCHIVE_SUFFIX``
PAGE_SUFFIX = {"json": ".json", "text": ".txt", "markdown": ".md", "html": ".html", "csv": ".csv"}
ARCHIVE_SUFFIX = {**PAGE_SUFFIX, "json": ".jsonl"}
# Formats of whole documents: a stream of several pages names each before it.
DOCUMENT_FORMATS = ("text", "markdown", "html")
DIRECTORY_PROGRESS = ".grownup-extract.progress.json"
# Pages listed by name in the summary line at most (the rest only counted).
MAX_LISTED_SKIPS = 100
_ARCHIVE_NAME = re.compile(r"(\.w?arc)?(\.gz)?$", re.IGNORECASE)


def _output_directory(output: str) -> Path | None:
    """``-o``'s directory where it names one (an existing directory, or a path ending in
    ``/``, created), else None (a file, or ``-``)."""
    if output == "-" or not (output.endswith(("/", os.sep)) or os.path.isdir(output)):
        return None
    directory = Path(output)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot write {output}: {exc.strerror or exc}") from None
    if not os.access(directory, os.W_OK):
        raise UserError(f"cannot write {output}: permission denied")
    return directory


def _output_names(inputs: list, roots: list, output_format: str, directory: Path) -> dict:
    """``{input index: file under directory}`` (see ``-o``'s help): a page's file named after
    it (``page.html`` -> ``page.txt``, ``.md``, ``.html``, ``.json``, ``.csv``), under the
    sub-directories of the directory it was found in; an archive's (``crawl.warc.gz`` ->
    ``crawl.jsonl``...) holding all its pages; ``stdin`` for standard input. A name taken
    twice gets ``-2``, ``-3``... A file that would be an input itself is a ``UserError``."""
    from scrapy_grownup.warc.sources import PathSkip, Source

    names: dict[int, Path] = {}
    taken: set[str] = set()
    sources = set()
    for index, (item, root) in enumerate(zip(inputs, roots)):
        if isinstance(item, PathSkip):
            continue
        if isinstance(item, Source):
            parent, stem = _relative_parent(item.location, root), _ARCHIVE_NAME.sub("", item.name)
            suffix = ARCHIVE_SUFFIX[output_format]
            if not item.is_url:
                sources.add(os.path.realpath(item.location))
        elif item == "-":
            parent, stem, suffix = "", "stdin", PAGE_SUFFIX[output_format]
        else:
            name = Path(item).name
            base = name[:-3] if name.lower().endswith(".gz") else name
            stem = base[:base.rfind(".")] if _is_html_name(Path(base)) else name
            parent, suffix = _relative_parent(str(item), root), PAGE_SUFFIX[output_format]
            sources.add(os.path.realpath(item))
        stem = stem or "page"
        relative, k = Path(parent) / f"{stem}{suffix}", 1
        while str(relative).lower() in taken:
            k += 1
            relative = Path(parent) / f"{stem}-{k}{suffix}"
        taken.add(str(relative).lower())
        names[index] = directory / relative
    for index, path in names.items():
        if os.path.realpath(path) in sources:
            raise UserError(f"-o {directory}: {path} would overwrite an input; write to "
                            "another directory")
    return names


def _relative_parent(location: str, root: str | None) -> str:
    """The folder of ``location`` under the directory ``root`` it was found in ("" for one
    given itself, or one outside it through a link)."""
    if root is None or location.startswith(("http://", "https://")):
        return ""
    relative = os.path.relpath(os.path.abspath(location), os.path.abspath(root))
    parent = os.path.dirname(relative)
    return "" if parent.startswith("..") else parent


class _StreamOutput:
    """One stream (standard output or ``-o FILE``): JSON lines; CSV rows under one header
    row (none without a row); or text, Markdown or HTML, where with several pages each is
    named on a line of its own before it (``==> NAME <==``, as ``head`` does) and pages are
    separated by a blank line. ``fresh``: nothing of an earlier run is in the stream."""

    def __init__(self, out, output_format: str, several: bool, fresh: bool = True):
        self.out = out
        self.format = output_format
        self.several = several
        self.written = not fresh

    def write(self, owner: int, name: str, body: str) -> None:
        if self.format == "csv" and not self.written:
            self.out.write(_csv_line(CSV_COLUMNS))  # the header, before the first row
        if self.format in DOCUMENT_FORMATS:
            if self.written:
                self.out.write("\n")  # a blank line between pages
            if self.several:
                self.out.write(f"==> {name} <==\n")
        self.out.write(body)
        self.written = True

    def finish(self, done: int) -> None:
        """The inputs before ``done`` are written whole (nothing to do for a stream)."""

    def size(self) -> int:
        self.out.flush()
        return os.fstat(self.out.fileno()).st_size

    def close(self) -> None:
        if self.out is not sys.stdout:
            self.out.close()


class _DirectoryOutput:
    """``-o DIR``: one file per input (``_output_names``), opened at its first article (an
    input without any gives no file) and written anew when a resumed run reads it again; an
    archive's file holds its pages as a stream of them does (``_StreamOutput``)."""

    def __init__(self, directory: Path, names: dict, output_format: str, inputs: list):
        from scrapy_grownup.warc.sources import Source

        self.directory = directory
        self.names = names
        self.format = output_format
        self.archives = {i for i, item in enumerate(inputs) if isinstance(item, Source)}
        self.open: dict[int, _StreamOutput] = {}

    def write(self, owner: int, name: str, body: str) -> None:
        stream = self.open.get(owner)
        if stream is None:
            path = self.names[owner]
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                out = open(path, "w", encoding="utf-8")
            except OSError as exc:
                raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
            stream = self.open[owner] = _StreamOutput(out, self.format,
                                                      owner in self.archives)
        stream.write(owner, name, body)

    def finish(self, done: int) -> None:
        for owner in [k for k in self.open if k < done]:
            self.open.pop(owner).close()

    def size(self) -> int:
        return 0  # a resumed run starts each unfinished input's file anew

    def close(self) -> None:
        for owner in list(self.open):
            self.open.pop(owner).close()


def cmd_train(args) -> int:
    from scrapy_grownup.training.loop import TrainConfig
    from scrapy_grownup.training.trainer import train

    overrides = json.loads(args.model_overrides) if args.model_overrides else {}
    result = train(TrainConfig(
        out=args.out, datasets=args.datasets.split(","), encoder=args.encoder,
        preset=args.preset, epochs=args.epochs, lr=args.lr, batch_nodes=args.batch_nodes,
        patience=args.patience, seed=args.seed, max_pages=args.max_pages, init=args.init,
        threads=args.threads, overrides=overrides, page_type_weight=args.page_type_weight,
        role_weight=args.role_weight, precision=args.precision,
        content_datasets=args.content_datasets.split(",") if args.content_datasets else None))
    print(json.dumps(result))
    return 0


def cmd_page_type_cv(args) -> int:
    from scrapy_grownup.training.page_type_cv import run

    return run(args)


def cmd_page_type_sites(args) -> int:
    from scrapy_grownup.training.page_type_sites import run

    return run(args)


def cmd_fit_heads(args) -> int:
    from scrapy_grownup.training.fit_heads import run

    return run(args)


def cmd_fit_rescorer(args) -> int:
    from scrapy_grownup.training.rescorer import run

    return run(args)


def cmd_dataset_warc(args) -> int:
    from scrapy_grownup.training.dataset_warc import run

    return run(args)


def cmd_fit_page_type(args) -> int:
    from scrapy_grownup.training.page_type import run

    return run(args)


def cmd_roles_eval(args) -> int:
    from scrapy_grownup.training.roles import run

    return run(args)


def cmd_evaluate(args) -> int:
    if args.protocol != "in-domain":
        from scrapy_grownup.training.crosssite import run

        return run(args)
    from scrapy_grownup.extractor import ArticleExtractor
    from scrapy_grownup.training.report import evaluate_dataset, format_table

    extractors = [ArticleExtractor.from_pretrained(m, device=args.device) for m in args.model]
    for extractor in extractors:
        encoder = extractor.featurizer.encoder
        if encoder.name != "static" and not args.no_embedding_cache:
            encoder.use_disk_cache()  # MiniLM: a re-run reads the test pages' vectors back
    rows = []
    for name in args.datasets.split(","):
        rows.extend(evaluate_dataset(name, extractors, args.limit,
                                     trafilatura=not args.no_trafilatura))
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return 0


def cmd_inspect(args) -> int:
    from scrapy_grownup.extractor import ArticleExtractor
    from scrapy_grownup.output.inspect import write_report

    html = _read_page(args.page)  # before the model loads: a missing page fails at once
    extractor = ArticleExtractor.from_pretrained(args.model, device=args.device,
                                                 threads=args.threads)
    write_report(extractor, html, args.output)
    print(args.output, file=sys.stderr)
    return 0


def cmd_export(args) -> int:
    """Re-save a trained model (fp16 by default) with the inference options it should use."""
    from scrapy_grownup.model import GrownUpModel

    config, doc = GrownUpModel.read_config(args.model)
    model = GrownUpModel.from_pretrained(args.model)
    metadata = dict(doc.get("metadata") or {})
    metadata["inference"] = {"threshold": args.threshold, "refine": args.refine}
    model.save_pretrained(args.out, fp16=not args.fp32, metadata=metadata)
    from scrapy_grownup.decisions.rescorer import RESCORER_FILE

    rescorer = Path(args.model) / RESCORER_FILE
    if rescorer.is_file():  # grownup lab fit-rescorer's: it reads this model's scores
        import shutil

        shutil.copy2(rescorer, Path(args.out) / RESCORER_FILE)
    print(json.dumps({"exported": args.out, "fp16": not args.fp32, **metadata["inference"],
                      "rescorer": rescorer.is_file()}))
    return 0


def cmd_export_onnx(args) -> int:
    try:
        from scrapy_grownup.model.onnx_export import export_onnx
    except ImportError as exc:  # pragma: no cover - torch missing: the [train] extra
        raise UserError(f"exporting needs the [train] extra ({exc})") from None
    try:
        path = export_onnx(args.model)
    except (ImportError, ModuleNotFoundError) as exc:
        raise UserError(f"exporting needs the [train] extra: pip install "
                        f"'scrapy-grownup[train]' ({exc})") from None
    except ValueError as exc:
        raise UserError(str(exc)) from None
    print(path)
    return 0


def cmd_distill(args) -> int:
    from scrapy_grownup.encoders.distill import main as distill_main

    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    return distill_main(rest)


def cmd_warc(args) -> int:
    from scrapy_grownup.warc.command import run

    return run(args)


def cmd_pretrain(args) -> int:
    from scrapy_grownup.pretraining.command import run

    return run(args)


def cmd_presets(args) -> int:
    from scrapy_grownup.model import GrownUpModel, ModelConfig
    from scrapy_grownup.model.config import PRESETS, count_parameters

    print(f"| preset | S | T | K | heads | readout | parameters ({args.encoder} features) |")
    print("|---|---|---|---|---|---|---|")
    for name in PRESETS:
        config = ModelConfig.preset(name, encoder=args.encoder)
        params = count_parameters(GrownUpModel(config))
        heads = config.num_heads if config.num_transformer_layers else "-"
        print(f"| `{name}` | {config.num_layers} | {config.num_transformer_layers} | "
              f"{config.hidden_size} | {heads} | {config.readout} | {params:,} |")
    return 0


def _jobs_arg(text: str) -> str:
    if text.strip().lower() == "auto":
        return "auto"
    return str(_positive_int(text, " or 'auto'"))


def _positive_int(text: str, or_else: str = "") -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1{or_else}, not {text!r}")
    return value


def _add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=_positive_int, default=1, metavar="N",
                   help="torch threads for the model (default: 1, fastest for these small "
                        "models, and it leaves the other cores to other work)")


# The precision / recall presets of ``extract``; what each costs and buys is measured in the
# docs (docs/cli.md, and the research log's accuracy page).
from scrapy_grownup.decisions.refine import RECALL_THRESHOLD  # noqa: E402 - beside the presets


def _version() -> str:
    from scrapy_grownup import __version__

    return (f"grownup {__version__} from {Path(__file__).resolve().parent.parent} "
            f"(Python {sys.version_info.major}.{sys.version_info.minor})")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``grownup`` parser. With ``command`` (the one being run), the other commands that
    read training, pre-training or corpus options are listed but their options are left out,
    so running ``grownup extract`` never imports the modules that define those."""

    def stub(p: argparse.ArgumentParser, name: str) -> bool:
        """True (and ``p`` takes any words) where ``name`` is not the command being run."""
        if command is None or command == name:
            return False
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        return True

    parser = argparse.ArgumentParser(prog="grownup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-V", "--version", action="version", version=_version(),
                        help="print the version and where the package is installed, then exit")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log debug messages, and show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("extract", help="extract the articles of saved web pages and web "
                       "archives",
                       description="Extract the main content of saved web pages (files, "
                                   "directories of .html/.htm files, .gz files, or - for "
                                   "standard input) and of WARC/ARC web archives (plain or "
                                   "gzipped, known by their first bytes, not their names): "
                                   "every HTML response of an archive is one page, its JSON "
                                   "line holding the archive's path and the record's "
                                   "WARC-Target-URI, WARC-Date and WARC-Record-ID under "
                                   "\"warc\". Writes one JSON object per article (--format "
                                   "json), or each page's text, Markdown or clean HTML, or "
                                   "a CSV row per page; with -o DIR one file per input; pages "
                                   "without an article, and records that are no HTML page "
                                   "(requests, revisits, other types, redirects, truncated "
                                   "or broken records), are skipped and counted by reason, "
                                   "and a summary line goes to standard error (it names "
                                   "each page skipped, with its reason). With -o FILE or DIR, "
                                   "a run that was stopped resumes when the same command is "
                                   "run again: it keeps FILE up to the last input it had "
                                   "finished and goes on from there, reading the archive it "
                                   "stopped in again from its start (FILE.progress.json, or "
                                   "DIR/.grownup-extract.progress.json, holds its progress "
                                   "until the run ends; with other inputs "
                                   "or options it says so and starts over). Exits 1 when no "
                                   "page gave an article, 2 on a usage error.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="HTML file (also .gz), WARC/ARC archive (.warc, .arc, gzipped or "
                        "not; a file or an http(s) URL), directory (searched for .html, .htm, "
                        ".xhtml, .shtml, those .gz, and archives), or - for standard input")
    p.add_argument("-o", "--output", default="-", metavar="FILE|DIR",
                   help="write to FILE instead of standard output, or, where it is a "
                        "directory (one that exists, or a path ending in /), one file per "
                        "input there, named after it: page.html gives DIR/page.json, .txt, "
                        ".md, .html or .csv by --format (a page found under a directory "
                        "given keeps its sub-directory; standard input is DIR/stdin.*), an "
                        "archive crawl.warc.gz one file DIR/crawl.jsonl (.txt, .md, .html, "
                        ".csv) holding all its pages as standard output would; a stopped "
                        "run of the same command resumes it")
    p.add_argument("-f", "--format", choices=OUTPUT_FORMATS, default="json",
                   help="json: one JSON object per article (text, Markdown, metadata, path); "
                        "text, markdown or html: each page's article as plain text, Markdown "
                        "or clean HTML, several pages in one stream each after a line "
                        "naming it (==> NAME <==) and a blank line; csv: a header row, then "
                        "a row per page: path, url, title, authors, date, language, "
                        "page_type, text (default: json)")
    p.add_argument("--with-metadata", action="store_true",
                   help="text and markdown formats: begin each page with its title, URL, "
                        "authors and date (Title: lines; YAML front matter in Markdown); "
                        "html: a whole document with them in its head (json and csv always "
                        "hold them)")
    p.add_argument("--url", default=None,
                   help="the URL the page was saved from (one page only; by default a file's "
                        "own file: URL, none for standard input): resolves its relative links "
                        "and is the article's url")
    p.add_argument("--model", default="auto",
                   help="shipped model name (fast, minilm, default) or a model directory "
                        "(default: auto, which is default on a GPU and fast on a CPU)")
    p.add_argument("--device", default=None,
                   help="cpu, cuda or cuda:N (default: cuda when available)")
    knob = p.add_mutually_exclusive_group()
    knob.add_argument("--threshold", type=probability, default=None,
                      help="content probability an element needs to be kept, the same on "
                           "every page (default: each page's own cut-off near the model's "
                           "threshold, fast: within 0.3 of 0.5 on its rescored blocks): lower keeps "
                           "more text, higher less")
    knob.add_argument("--precision", action="store_true",
                      help="favour precision: keep only the largest contiguous group of content "
                           "(as --refine; docs/cli.md gives the measured trade-off)")
    knob.add_argument("--recall", dest="threshold", action="store_const",
                      const=RECALL_THRESHOLD,
                      help=f"favour recall (threshold {RECALL_THRESHOLD} on every page; "
                           "docs/cli.md gives the measured trade-off)")
    p.add_argument("--refine", action="store_true",
                   help="keep only the largest contiguous group of content")
    p.add_argument("--no-rescorer", action="store_true",
                   help="judge blocks by the content model's scores alone, without the "
                        "model's block rescorer (fast has one; see docs/accuracy.md)")
    p.add_argument("--comments", action="store_true",
                   help="text, markdown and html formats: append the readers' comments after "
                        "the article (json always has them in its comments field)")
    p.add_argument("--batch-pages", type=_positive_int, default=64, metavar="N",
                   help="pages read and sent to the model at a time (default: 64; with "
                        "several --jobs, fewer, so that each process gets several batches)")
    p.add_argument("--jobs", type=_jobs_arg, default="auto", metavar="N",
                   help="processes that extract pages side by side, each with its own model "
                        "and --threads torch threads (default: auto: one per CPU core on a "
                        "CPU; 1 on a GPU, or when every page fits one batch); 1 extracts in "
                        "this process. Archives are read here, their pages extracted in the "
                        "processes")
    p.add_argument("--log-every", type=_positive_int, default=10_000, metavar="N",
                   help="when standard error is not a terminal, log the counts every N pages "
                        "and records read (on a terminal a progress bar shows records and "
                        "pages/s; default: 10000)")
    _add_threads(p)
    p.set_defaults(func=cmd_extract)

    p = sub.add_parser("train", help="fine-tune a content extractor on training splits")
    if not stub(p, "train"):
        _train_arguments(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("inspect", help="render a page shaded by content score")
    p.add_argument("page", help="HTML file (also .gz), or - for standard input")
    p.add_argument("-o", "--output", required=True, help="the HTML report to write")
    p.add_argument("--model", default="auto",
                   help="shipped model name or directory (default: auto, which is default on "
                        "a GPU and fast on a CPU)")
    p.add_argument("--device", default=None,
                   help="cpu, cuda or cuda:N (default: cuda when available)")
    _add_threads(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("warc", help="featurize WARC/ARC archives into a pre-training corpus",
                       description="Read archives (or a scrapy-redis queue of them) into "
                                   "sharded graphs and same-website pairs.")
    if not stub(p, "warc"):
        from scrapy_grownup.warc.command import add_arguments as warc_arguments

        warc_arguments(p)
    p.set_defaults(func=cmd_warc)

    p = sub.add_parser("pretrain", help="self-supervised pre-training on a corpus from "
                       "grownup warc",
                       description="Masked node-feature prediction and same-website pairs "
                                   "(GROWN+UP 2.4); fine-tune afterwards with: grownup train "
                                   "--init OUT/best")
    if not stub(p, "pretrain"):
        from scrapy_grownup.pretraining.command import add_arguments as pretrain_arguments

        pretrain_arguments(p)
    p.set_defaults(func=cmd_pretrain)
    p = sub.add_parser("lab", help="research tools: cross-site evaluation, fitting heads, the "
                       "rescorer and the page-type classifier, exports (grownup lab -h)",
                       description="Research tools: measuring across sites, fitting the heads, "
                                   "the block rescorer and the page-type classifier, exporting "
                                   "models and the static encoder.")
    if stub(p, "lab"):
        return parser
    lab = p.add_subparsers(dest="lab_command", required=True, metavar="TOOL")

    p = lab.add_parser("presets", help="the model presets and their parameter counts")
    p.add_argument("--encoder", default="minilm", choices=["static", "minilm"],
                   help="count parameters for this encoder's features (default: minilm)")
    p.set_defaults(func=cmd_presets)

    from scrapy_grownup.training import fit_heads as heads_module
    from scrapy_grownup.training import page_type_cv as page_type_cv_module
    from scrapy_grownup.training import page_type_sites as page_type_sites_module
    from scrapy_grownup.training import roles as roles_module

    p = lab.add_parser("page-type-cv", help="10-fold CV of the page-type head vs a TF-IDF "
                   "baseline")
    page_type_cv_module.add_arguments(p)
    p.set_defaults(func=cmd_page_type_cv)

    p = lab.add_parser("page-type-sites", help="page type on unseen sites: the page-type head on "
                   "the "
                       "site-cv folds' backbones vs text baselines, same folds")
    page_type_sites_module.add_arguments(p)
    p.set_defaults(func=cmd_page_type_sites)

    p = lab.add_parser("roles-eval", help="per-role F1 of the block-role head, unseen sites")
    roles_module.add_arguments(p)
    p.set_defaults(func=cmd_roles_eval)

    p = lab.add_parser("fit-heads", help="add page-type and role heads to a content model "
                       "(frozen backbone)")
    heads_module.add_arguments(p)
    p.set_defaults(func=cmd_fit_heads)

    from scrapy_grownup.training import rescorer as rescorer_module

    p = lab.add_parser("fit-rescorer", help="fit the block rescorer on the site-cv folds' "
                       "out-of-fold scores; measure it across sites; add it to a model")
    rescorer_module.add_arguments(p)
    p.set_defaults(func=cmd_fit_rescorer)

    from scrapy_grownup.training import confidence_fit as confidence_module

    p = lab.add_parser("fit-confidence", help="fit Article.confidence on the site-cv folds' "
                       "articles; measure its calibration across sites; add it to a model")
    confidence_module.add_arguments(p)
    p.set_defaults(func=confidence_module.run)

    from scrapy_grownup.training import page_type as page_type_module

    p = lab.add_parser("fit-page-type", help="fit the page-type classifier (a linear SVM on page "
                       "text, URL, signals and pooled backbone; --stack: boosted trees on it) on "
                       "a page-type set; add it to a model")
    page_type_module.add_arguments(p)
    p.set_defaults(func=cmd_fit_page_type)

    p = lab.add_parser("evaluate", help="score models and baselines on test pages")
    p.add_argument("--model", action="append", default=None,
                   help="model name or directory (repeatable; default: auto, which is "
                        "default on a GPU and fast on a CPU)")
    p.add_argument("--datasets", default="dragnet,cleaneval,pagetype")
    p.add_argument("--limit", type=int, default=None, help="pages per dataset")
    p.add_argument("--no-trafilatura", action="store_true",
                   help="leave trafilatura out (every protocol)")
    p.add_argument("--no-embedding-cache", action="store_true",
                   help="do not keep a model encoder's vectors under ~/.cache/scrapy_grownup")
    p.add_argument("--json", default=None, help="also write rows as JSON lines here")
    p.add_argument("--device", default=None)
    from scrapy_grownup.training.crosssite import add_arguments as crosssite_arguments

    crosssite_arguments(p)
    p.set_defaults(func=cmd_evaluate)

    p = lab.add_parser("export", help="save a trained model for shipping (fp16, options)")
    p.add_argument("model", help="trained model directory, e.g. runs/x/best")
    p.add_argument("--out", required=True, help="directory to write the model to")
    p.add_argument("--threshold", type=probability, default=0.5,
                   help="content probability cut-off the model will use (default: 0.5)")
    p.add_argument("--refine", action="store_true",
                   help="the model will keep only the largest content group by default")
    p.add_argument("--fp32", action="store_true", help="keep 32-bit weights (default: 16-bit)")
    p.set_defaults(func=cmd_export)

    p = lab.add_parser("distill-static", help="distil the static encoder from MiniLM")
    p.add_argument("rest", nargs=argparse.REMAINDER, metavar="OPTION",
                   help="options of the distillation, after -- (grownup lab distill-static -- "
                        "--help lists them)")
    p.set_defaults(func=cmd_distill)

    from scrapy_grownup.training import dataset_warc as dataset_warc_module

    p = lab.add_parser("dataset-warc", help="write the datasets' pages to a WARC for grownup "
                       "warc, leaving out a cross-site measurement's test sites",
                       description="Write the labelled sets' pages that have URLs to one "
                                   "WARC archive, for grownup warc and grownup pretrain. With "
                                   "--hold or --fold, every page of a site group or host that "
                                   "the named leave-out plan or site-cv fold tests on is left "
                                   "out, so a backbone pre-trained on it may be measured there.")
    dataset_warc_module.add_arguments(p)
    p.set_defaults(func=cmd_dataset_warc)

    p = lab.add_parser("export-onnx", help="write a model's backbone.onnx (ONNX Runtime on a "
                       "CPU; needs the [train] extra)")
    p.add_argument("model", help="model directory (written by grownup train or lab export)")
    p.set_defaults(func=cmd_export_onnx)

    return parser


def _train_arguments(p: argparse.ArgumentParser) -> None:
    from scrapy_grownup.training.loop import PRECISIONS

    p.add_argument("--out", required=True, help="run directory (resumes if it has a checkpoint)")
    p.add_argument("--datasets", default="dragnet,cleaneval,pagetype",
                   help="comma-separated training sets (default: dragnet,cleaneval,pagetype)")
    p.add_argument("--encoder", default="static", choices=["static", "minilm"],
                   help="text encoder of the node features (default: static)")
    p.add_argument("--preset", default="small",
                   help="model shape (grownup lab presets lists them; default: small)")
    p.add_argument("--model-overrides", default=None, help="JSON of ModelConfig fields")
    p.add_argument("--epochs", type=int, default=30, help="most epochs (default: 30)")
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate (default: 0.001)")
    p.add_argument("--batch-nodes", type=int, default=16_000,
                   help="DOM nodes per training batch (default: 16000)")
    p.add_argument("--patience", type=int, default=6,
                   help="stop after this many epochs without a better dev score (default: 6)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--max-pages", type=int, default=None, help="per dataset (quick runs)")
    p.add_argument("--init", default=None, help="pre-trained model directory")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: torch's, one per core)")
    p.add_argument("--page-type-weight", "--genre-weight", type=float, default=0.0,
                   metavar="WEIGHT",
                   help="> 0: also train the page-type head (page-type set pages); "
                        "--genre-weight is its former name")
    p.add_argument("--role-weight", type=float, default=0.0,
                   help="> 0: also train the block-role head (L3S-GN1 pages)")
    p.add_argument("--content-datasets", default=None,
                   help="datasets whose content labels are trained (default: all of them)")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="the forward pass's arithmetic: fp32 (default) or bf16 (autocast to "
                        "bfloat16, weights and losses in float32; faster on CPUs with "
                        "AVX512-BF16 and on GPUs, many times slower on other CPUs)")


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    argv = sys.argv[1:] if argv is None else list(argv)
    words = [word for word in argv if not word.startswith("-")]
    args = build_parser(command=words[0] if words else "").parse_args(argv)
    command = args.command if args.command != "lab" else f"lab {args.lab_command}"
    if getattr(args, "lab_command", None) == "evaluate" and args.model is None and \
            args.protocol in ("in-domain", "model"):  # the protocols that load --model
        from scrapy_grownup.extractor import auto_model

        args.model = [auto_model(args.device)]
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("grownup: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader (head, less) stopped reading: nothing more to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except (UserError, GrownupError, OSError) as exc:
        if args.verbose:
            raise
        print(f"grownup {command}: error: {_error_line(exc)}", file=sys.stderr)
        return 2


def _error_line(exc: BaseException) -> str:
    """One line for a user's error: the OS's words and the file for an ``OSError``."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return _first_line(exc)


if __name__ == "__main__":
    sys.exit(main())
