"""grownup: main-content extraction from saved web pages with a GROWN+UP graph neural network.

Sub-commands extract articles, inspect a page's scores, and train, evaluate and export models.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import sys
import zlib
from collections import Counter
from pathlib import Path

from scrapy_grownup.cli.argtypes import probability
from scrapy_grownup.errors import GrownupError

logger = logging.getLogger("scrapy_grownup.cli.main")
HTML_SUFFIXES = (".html", ".htm", ".xhtml", ".shtml")
OUTPUT_FORMATS = ("json", "text", "markdown")
# Why a page gave no article, as the summary line counts it (the crawl's drop reasons).
SKIP_REASONS = {"NotHTMLError": "not_html", "EmptyPageError": "empty_page",
                "ParseError": "parse_error", "ModelError": "model_error",
                "ArticleError": "article_error", "WorkerCrashedError": "worker_crashed"}


class UserError(Exception):
    """A mistake in the command line or its files: one line on stderr, exit status 2."""


def _is_html_name(path: Path) -> bool:
    name = path.name.lower()
    return name.removesuffix(".gz").endswith(HTML_SUFFIXES)


def _inputs(paths: list[str]) -> list:
    """What ``extract`` reads, in order: files as given, the HTML files (``.gz`` too) under
    directories, sorted, and ``"-"`` for standard input."""
    inputs: list = []
    for raw in paths:
        if raw == "-":
            if "-" in inputs:
                raise UserError("'-' (standard input) can be given only once")
            inputs.append("-")
            continue
        path = Path(raw)
        if path.is_dir():
            inputs.extend(sorted(p for p in path.rglob("*") if p.is_file() and _is_html_name(p)))
        elif path.exists():
            inputs.append(path)
        else:
            raise UserError(f"no such file or directory: {raw}")
    return inputs


def _read_page(source) -> bytes:
    """A page's bytes from a file or ``"-"`` (stdin), gunzipped when they are gzip data."""
    data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def _open_output(path: str):
    if path == "-":
        return sys.stdout
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def cmd_extract(args) -> int:
    from scrapy_grownup.extractor import ArticleExtractor

    inputs = _inputs(args.paths)
    if args.url and len(inputs) != 1:
        raise UserError(f"--url gives one page its URL, but {len(inputs)} pages were given")
    if not inputs:
        raise UserError("no HTML files (.html, .htm, .xhtml, .shtml, or those .gz) found in "
                        + ", ".join(args.paths))
    out = _open_output(args.output)  # before the model loads: a bad path fails at once
    try:
        jobs = _extract_jobs(args, len(inputs))
        if jobs > 1:
            summary = _extract_all(_process_chunks(inputs, args, jobs), inputs, out, args)
        else:
            extractor = ArticleExtractor.from_pretrained(args.model, **_extractor_options(args))
            summary = _extract_all(_local_chunks(extractor, inputs, args), inputs, out, args)
    finally:
        if out is not sys.stdout:
            out.close()
    print(json.dumps(summary), file=sys.stderr)
    return 0 if summary["extracted"] else 1


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


def _extract_all(chunks, inputs: list, out, args) -> dict:
    """Write each article of ``chunks`` (per batch of inputs, one result per page: ``("ok",
    body)`` or ``("skip", reason, detail)``, in input order), count the rest by reason;
    returns the summary."""
    from contextlib import closing

    from tqdm import tqdm

    skipped: Counter = Counter()
    extracted = 0
    # a progress bar on a terminal, for runs of more than one batch
    progress = tqdm(total=len(inputs), unit="page", file=sys.stderr, leave=False,
                    disable=None if len(inputs) > args.batch_pages else True)
    with closing(chunks):
        for results in chunks:
            for name, result in results:
                if result[0] == "skip":
                    skipped[result[1]] += 1
                    logger.warning("%s: skipped (%s): %s", name, result[1], result[2])
                    continue
                if args.format != "json" and extracted:
                    out.write("\n")  # a blank line between pages
                out.write(result[1])
                extracted += 1
            progress.update(len(results))
    progress.close()
    return {"read": len(inputs), "extracted": extracted, "skipped": dict(sorted(skipped.items()))}


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


def chunk_results(extractor, entries: list, output_format: str, comments: bool) -> list:
    """``[(name, ("ok", body) or ("skip", reason, detail))]`` of ``_page_entries``: each
    page parsed, the pages' articles made in one batch and rendered (``_render``). The same
    in this process and in ``--jobs`` processes, so both write the same bytes."""
    from functools import partial

    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.extractor import run_split_on_oom

    results: list = [None] * len(entries)
    pages, rows = [], []
    for i, (name, body, url) in enumerate(entries):
        if isinstance(body, tuple):
            results[i] = (name, ("skip", *body))
            continue
        try:
            pages.append(parse_page(body, url=url, limits=extractor.featurizer.limits))
            rows.append(i)
        except GrownupError as exc:
            results[i] = (name, ("skip", _skip_reason(exc), _first_line(exc)))
    articles = partial(extractor.article_results, build_markdown=output_format != "text")
    for i, article in zip(rows, run_split_on_oom(articles, pages)[0] if pages else []):
        name = entries[i][0]
        if isinstance(article, GrownupError):
            results[i] = (name, ("skip", _skip_reason(article), _first_line(article)))
            continue
        try:
            body = _render(article, name, output_format, comments)
        except GrownupError as exc:  # a lazily built Markdown's own failure
            results[i] = (name, ("skip", "article_error", _first_line(exc)))
            continue
        results[i] = (name, ("ok", body) if body is not None
                      else ("skip", "no_content", "the model kept no text"))
    return results


def _local_chunks(extractor, inputs: list, args):
    for start in range(0, len(inputs), args.batch_pages):
        entries = _page_entries(inputs[start:start + args.batch_pages], args)
        yield chunk_results(extractor, entries, args.format, args.comments)


def _chunk_results_in_job(entries: list, output_format: str, comments: bool) -> list:
    """A ``--jobs`` process's side of ``chunk_results``, on the model it loaded."""
    from scrapy_grownup.crawl.model_process import loaded_extractor

    return chunk_results(loaded_extractor(), entries, output_format, comments)


async def job_batch(pool, entries: list, output_format: str, comments: bool) -> list:
    """``chunk_results`` of one batch in a ``--jobs`` process of ``pool``
    (``workers.ProcessPool``). A batch whose process died twice is tried page by page, so
    only the page that kills a process is lost (``worker_crashed``)."""
    from scrapy_grownup.crawl.workers import WorkerCrashedError

    try:
        return await pool.call(_chunk_results_in_job, entries, output_format, comments,
                               what=f"a batch of {len(entries)} pages")
    except WorkerCrashedError:
        if len(entries) == 1:
            return [(entries[0][0], ("skip", "worker_crashed",
                                     "its process died twice"))]
        return [row for entry in entries
                for row in await job_batch(pool, [entry], output_format, comments)]


def _process_chunks(inputs: list, args, jobs: int):
    """``_local_chunks`` in ``jobs`` processes, each with its own model (loaded once, as the
    crawl's model process), twice as many batches handed out as there are processes; results
    in input order (``job_batch``)."""
    import asyncio

    from scrapy_grownup.page.limits import PageLimits
    from scrapy_grownup.crawl.model_process import describe, load_extractor
    from scrapy_grownup.crawl.workers import ProcessPool

    options = _extractor_options(args)
    pool = ProcessPool(jobs, "extract", initializer=load_extractor,
                       initargs=(args.model, options["device"], PageLimits(), None,
                                 options["threads"], options["threshold"], options["refine"],
                                 options["rescore"]))
    loop = asyncio.new_event_loop()
    pending: list = []

    async def load():
        await asyncio.gather(*(pool.call(describe, what="loading the model")
                               for _ in range(jobs)))

    try:
        # every process loads its model first; one that cannot says why, once
        loop.run_until_complete(load())
        for start in range(0, len(inputs), args.batch_pages):
            entries = _page_entries(inputs[start:start + args.batch_pages], args)
            pending.append(loop.create_task(job_batch(pool, entries, args.format,
                                                      args.comments)))
            if len(pending) >= 2 * jobs:
                yield loop.run_until_complete(pending.pop(0))
        while pending:
            yield loop.run_until_complete(pending.pop(0))
    finally:
        for task in pending:
            task.cancel()
        pool.close()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


def _render(article, name: str, output_format: str, comments: bool = False) -> str | None:
    """One article as ``output_format`` (a JSON line, or the text / Markdown ending in a
    newline); ``None`` when it has no text. ``comments`` appends the readers' comments (the
    role head's ``comments`` field) to text and Markdown; JSON always has them in
    ``comments``."""
    if not article.text.strip():
        return None
    if output_format == "json":
        record = article.to_dict()
        record["path"] = name
        return json.dumps(record, ensure_ascii=False) + "\n"
    body = (article.markdown if output_format == "markdown" else article.text).rstrip("\n")
    if comments and (article.comments or "").strip():
        heading = "## Comments" if output_format == "markdown" else "Comments:"
        body += f"\n\n{heading}\n\n{article.comments.strip()}"
    return body + "\n"


def cmd_train(args) -> int:
    from scrapy_grownup.training.loop import TrainConfig
    from scrapy_grownup.training.trainer import train

    overrides = json.loads(args.model_overrides) if args.model_overrides else {}
    result = train(TrainConfig(
        out=args.out, datasets=args.datasets.split(","), encoder=args.encoder,
        preset=args.preset, epochs=args.epochs, lr=args.lr, batch_nodes=args.batch_nodes,
        patience=args.patience, seed=args.seed, max_pages=args.max_pages, init=args.init,
        threads=args.threads, overrides=overrides, genre_weight=args.genre_weight,
        role_weight=args.role_weight, precision=args.precision,
        content_datasets=args.content_datasets.split(",") if args.content_datasets else None))
    print(json.dumps(result))
    return 0


def cmd_genre_cv(args) -> int:
    from scrapy_grownup.training.genre import run

    return run(args)


def cmd_genre_sites(args) -> int:
    from scrapy_grownup.training.genre_sites import run

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
    if rescorer.is_file():  # grownup fit-rescorer's: it reads this model's scores
        import shutil

        shutil.copy2(rescorer, Path(args.out) / RESCORER_FILE)
    print(json.dumps({"exported": args.out, "fp16": not args.fp32, **metadata["inference"],
                      "rescorer": rescorer.is_file()}))
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


# The precision / recall presets of ``extract``, measured with the shipped fast's recipe (block
# rescorer included) in the nested site-grouped cross-validation (docs/accuracy.md, "Block
# rescorer"; bag-of-words P / R, default 88.2 / 91.7): keeping only the largest content group buys
# precision (89.4 / 85.3), a fixed threshold of 0.2 on the rescored blocks recall (85.5 / 93.8).
from scrapy_grownup.decisions.refine import RECALL_THRESHOLD  # noqa: E402 - with the presets' measurements


def _version() -> str:
    from scrapy_grownup import __version__

    return (f"grownup {__version__} from {Path(__file__).resolve().parent.parent} "
            f"(Python {sys.version_info.major}.{sys.version_info.minor})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grownup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-V", "--version", action="version", version=_version(),
                        help="print the version and where the package is installed, then exit")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log debug messages, and show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("extract", help="extract the articles of saved web pages",
                       description="Extract the main content of saved web pages (files, "
                                   "directories of .html/.htm files, .gz files, or - for "
                                   "standard input). Writes one JSON object per article "
                                   "(--format json), or the text or Markdown of each page; "
                                   "pages without an article are skipped and counted, and a "
                                   "summary line goes to standard error. Exits 1 when no "
                                   "page gave an article, 2 on a usage error.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="HTML file (also .gz), directory (searched for .html, .htm, .xhtml, "
                        ".shtml and those .gz), or - for standard input")
    p.add_argument("-o", "--output", default="-",
                   help="write here instead of standard output")
    p.add_argument("-f", "--format", choices=OUTPUT_FORMATS, default="json",
                   help="json: one JSON object per article (text, Markdown, metadata, path); "
                        "text or markdown: each page's article, pages separated by a blank "
                        "line (default: json)")
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
                           "(as --refine; fast on unseen sites: precision 89.4, recall 85.3 "
                           "against 88.2 / 91.7 by default)")
    knob.add_argument("--recall", dest="threshold", action="store_const",
                      const=RECALL_THRESHOLD,
                      help=f"favour recall (threshold {RECALL_THRESHOLD} on every page; fast on "
                           "unseen sites: precision 85.5, recall 93.8)")
    p.add_argument("--refine", action="store_true",
                   help="keep only the largest contiguous group of content")
    p.add_argument("--no-rescorer", action="store_true",
                   help="judge blocks by the content model's scores alone, without the "
                        "model's block rescorer (fast has one; see README, Accuracy)")
    p.add_argument("--comments", action="store_true",
                   help="text and markdown formats: append the readers' comments after the "
                        "article (json always has them in its comments field)")
    p.add_argument("--batch-pages", type=_positive_int, default=64, metavar="N",
                   help="pages read and sent to the model at a time (default: 64)")
    p.add_argument("--jobs", type=_jobs_arg, default="auto", metavar="N",
                   help="processes that extract pages side by side, each with its own model "
                        "and --threads torch threads (default: auto: one per CPU core on a "
                        "CPU; 1 on a GPU, or when every page fits one batch); 1 extracts in "
                        "this process")
    _add_threads(p)
    p.set_defaults(func=cmd_extract)

    from scrapy_grownup.training.loop import PRECISIONS

    p = sub.add_parser("train", help="fine-tune a content extractor on training splits")
    p.add_argument("--out", required=True, help="run directory (resumes if it has a checkpoint)")
    p.add_argument("--datasets", default="dragnet,cleaneval,pagetype",
                   help="comma-separated training sets (default: dragnet,cleaneval,pagetype)")
    p.add_argument("--encoder", default="static", choices=["static", "minilm"],
                   help="text encoder of the node features (default: static)")
    p.add_argument("--preset", default="small",
                   help="model shape (grownup presets lists them; default: small)")
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
    p.add_argument("--genre-weight", type=float, default=0.0,
                   help="> 0: also train the page-genre head (page-type set pages)")
    p.add_argument("--role-weight", type=float, default=0.0,
                   help="> 0: also train the block-role head (L3S-GN1 pages)")
    p.add_argument("--content-datasets", default=None,
                   help="datasets whose content labels are trained (default: all of them)")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="the forward pass's arithmetic: fp32 (default) or bf16 (autocast to "
                        "bfloat16, weights and losses in float32; faster on CPUs with "
                        "AVX512-BF16 and on GPUs, many times slower on other CPUs)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("presets", help="the model presets and their parameter counts")
    p.add_argument("--encoder", default="minilm", choices=["static", "minilm"],
                   help="count parameters for this encoder's features (default: minilm)")
    p.set_defaults(func=cmd_presets)

    from scrapy_grownup.training import fit_heads as heads_module, genre as genre_module, roles as roles_module
    from scrapy_grownup.training import genre_sites as genre_sites_module

    p = sub.add_parser("genre-cv", help="10-fold CV of the genre head vs a TF-IDF baseline")
    genre_module.add_arguments(p)
    p.set_defaults(func=cmd_genre_cv)

    p = sub.add_parser("genre-sites", help="page type on unseen sites: the genre head on the "
                       "site-cv folds' backbones vs text baselines, same folds")
    genre_sites_module.add_arguments(p)
    p.set_defaults(func=cmd_genre_sites)

    p = sub.add_parser("roles-eval", help="per-role F1 of the block-role head, unseen sites")
    roles_module.add_arguments(p)
    p.set_defaults(func=cmd_roles_eval)

    p = sub.add_parser("fit-heads", help="add genre and role heads to a content model "
                       "(frozen backbone)")
    heads_module.add_arguments(p)
    p.set_defaults(func=cmd_fit_heads)

    from scrapy_grownup.training import rescorer as rescorer_module

    p = sub.add_parser("fit-rescorer", help="fit the block rescorer on the site-cv folds' "
                       "out-of-fold scores; measure it across sites; add it to a model")
    rescorer_module.add_arguments(p)
    p.set_defaults(func=cmd_fit_rescorer)

    from scrapy_grownup.training import page_type as page_type_module

    p = sub.add_parser("fit-page-type", help="fit the page-type classifier (a linear SVM on page "
                       "text, URL, signals and pooled backbone; --stack: boosted trees on it) on "
                       "a page-type set; add it to a model")
    page_type_module.add_arguments(p)
    p.set_defaults(func=cmd_fit_page_type)

    p = sub.add_parser("evaluate", help="score models and baselines on test pages")
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

    p = sub.add_parser("export", help="save a trained model for shipping (fp16, options)")
    p.add_argument("model", help="trained model directory, e.g. runs/x/best")
    p.add_argument("--out", required=True, help="directory to write the model to")
    p.add_argument("--threshold", type=probability, default=0.5,
                   help="content probability cut-off the model will use (default: 0.5)")
    p.add_argument("--refine", action="store_true",
                   help="the model will keep only the largest content group by default")
    p.add_argument("--fp32", action="store_true", help="keep 32-bit weights (default: 16-bit)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("distill-static", help="distil the static encoder from MiniLM")
    p.add_argument("rest", nargs=argparse.REMAINDER, metavar="OPTION",
                   help="options of the distillation, after -- (grownup distill-static -- "
                        "--help lists them)")
    p.set_defaults(func=cmd_distill)

    from scrapy_grownup.training import dataset_warc as dataset_warc_module

    p = sub.add_parser("dataset-warc", help="write the datasets' pages to a WARC for grownup "
                       "warc, leaving out a cross-site measurement's test sites",
                       description="Write the labelled sets' pages that have URLs to one "
                                   "WARC archive, for grownup warc and grownup pretrain. With "
                                   "--hold or --fold, every page of a site group or host that "
                                   "the named leave-out plan or site-cv fold tests on is left "
                                   "out, so a backbone pre-trained on it may be measured there.")
    dataset_warc_module.add_arguments(p)
    p.set_defaults(func=cmd_dataset_warc)

    from scrapy_grownup.warc.command import add_arguments as warc_arguments

    p = sub.add_parser("warc", help="featurize WARC/ARC archives into a pre-training corpus",
                       description="Read archives (or a scrapy-redis queue of them) into "
                                   "sharded graphs and same-website pairs.")
    warc_arguments(p)
    p.set_defaults(func=cmd_warc)

    from scrapy_grownup.pretraining.command import add_arguments as pretrain_arguments

    p = sub.add_parser("pretrain", help="self-supervised pre-training on a corpus from "
                       "grownup warc",
                       description="Masked node-feature prediction and same-website pairs "
                                   "(GROWN+UP 2.4); fine-tune afterwards with: grownup train "
                                   "--init OUT/best")
    pretrain_arguments(p)
    p.set_defaults(func=cmd_pretrain)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    if args.command == "evaluate" and args.model is None and \
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
        print(f"grownup {args.command}: error: {_error_line(exc)}", file=sys.stderr)
        return 2


def _error_line(exc: BaseException) -> str:
    """One line for a user's error: the OS's words and the file for an ``OSError``."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return _first_line(exc)


if __name__ == "__main__":
    sys.exit(main())
