"""The ``grownup`` command: extract, train, evaluate, inspect, warc, pretrain and helpers."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from .extractor import DEFAULT_MODEL  # cheap: the extractor imports torch only when used

HTML_SUFFIXES = (".html", ".htm", ".xhtml", ".shtml")



def _html_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix.lower() in HTML_SUFFIXES))
        else:
            files.append(path)
    return files


def cmd_extract(args) -> int:
    from .errors import GrownupError
    from .extractor import ArticleExtractor

    extractor = ArticleExtractor.from_pretrained(args.model, device=args.device,
                                                 refine=args.refine or None,
                                                 threads=args.threads)
    files = _html_files(args.paths)
    out = open(args.output, "w", encoding="utf-8") if args.output != "-" else sys.stdout
    written = failed = 0
    try:
        for start in range(0, len(files), args.batch_pages):
            chunk = files[start:start + args.batch_pages]
            items = []
            for path in chunk:
                try:
                    items.append((path.read_bytes(), path.as_uri() if path.is_absolute()
                                  else str(path)))
                except OSError as exc:
                    logging.error("%s: %s", path, exc)
                    items.append((b"", str(path)))
            for path, article in zip(chunk, extractor.extract_batch(items, errors="skip")):
                if article is None:
                    failed += 1
                    continue
                try:
                    record = article.to_dict()  # builds the Markdown: may fail, for this page
                except GrownupError as exc:
                    logging.error("%s: %s", path, exc)
                    failed += 1
                    continue
                record["path"] = str(path)
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                written += 1
    except GrownupError as exc:
        logging.error("%s", exc)
        return 2
    finally:
        if out is not sys.stdout:
            out.close()
    print(json.dumps({"extracted": written, "failed": failed}), file=sys.stderr)
    return 0 if written else 1


def cmd_train(args) -> int:
    from .training.trainer import TrainConfig, train

    overrides = json.loads(args.model_overrides) if args.model_overrides else {}
    result = train(TrainConfig(
        out=args.out, datasets=args.datasets.split(","), encoder=args.encoder,
        preset=args.preset, epochs=args.epochs, lr=args.lr, batch_nodes=args.batch_nodes,
        patience=args.patience, seed=args.seed, max_pages=args.max_pages, init=args.init,
        threads=args.threads, overrides=overrides, genre_weight=args.genre_weight,
        role_weight=args.role_weight,
        content_datasets=args.content_datasets.split(",") if args.content_datasets else None))
    print(json.dumps(result))
    return 0


def cmd_genre_cv(args) -> int:
    from .training.genre import run

    return run(args)


def cmd_fit_heads(args) -> int:
    from .training.heads import run

    return run(args)


def cmd_roles_eval(args) -> int:
    from .training.roles import run

    return run(args)


def cmd_evaluate(args) -> int:
    if args.protocol != "in-domain":
        from .training.crosssite import run

        return run(args)
    from .extractor import ArticleExtractor
    from .training.report import evaluate_dataset, format_table

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
    from .extractor import ArticleExtractor
    from .inspect_report import write_report

    extractor = ArticleExtractor.from_pretrained(args.model, device=args.device,
                                                 threads=args.threads)
    write_report(extractor, Path(args.page).read_bytes(), args.output)
    print(args.output, file=sys.stderr)
    return 0


def cmd_export(args) -> int:
    """Re-save a trained model (fp16 by default) with the inference options it should use."""
    from .model import GrownUpModel

    config, doc = GrownUpModel.read_config(args.model)
    model = GrownUpModel.from_pretrained(args.model)
    metadata = dict(doc.get("metadata") or {})
    metadata["inference"] = {"threshold": args.threshold, "refine": args.refine}
    model.save_pretrained(args.out, fp16=not args.fp32, metadata=metadata)
    print(json.dumps({"exported": args.out, "fp16": not args.fp32, **metadata["inference"]}))
    return 0


def cmd_distill(args) -> int:
    from .encoders.distill import main as distill_main

    return distill_main(args.rest)


def cmd_warc(args) -> int:
    from .warc.command import run

    return run(args)


def cmd_pretrain(args) -> int:
    from .pretraining.command import run

    return run(args)


def cmd_presets(args) -> int:
    from .model import GrownUpModel, ModelConfig
    from .model.config import PRESETS, count_parameters

    print(f"| preset | S | T | K | heads | readout | parameters ({args.encoder} features) |")
    print("|---|---|---|---|---|---|---|")
    for name in PRESETS:
        config = ModelConfig.preset(name, encoder=args.encoder)
        params = count_parameters(GrownUpModel(config))
        heads = config.num_heads if config.num_transformer_layers else "-"
        print(f"| `{name}` | {config.num_layers} | {config.num_transformer_layers} | "
              f"{config.hidden_size} | {heads} | {config.readout} | {params:,} |")
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return value


def _add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=_positive_int, default=1, metavar="N",
                   help="torch threads for the model (default: 1, fastest for these small "
                        "models, and it leaves the other cores to other work)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grownup", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("extract", help="extract articles from HTML files into JSON lines")
    p.add_argument("paths", nargs="+", help="HTML files or directories")
    p.add_argument("-o", "--output", default="-", help="output .jsonl (default: stdout)")
    p.add_argument("--model", default="auto",
                   help="shipped model name or directory (auto: default on a GPU, else fast)")
    p.add_argument("--device", default=None)
    p.add_argument("--refine", action="store_true", help="keep the largest content group only")
    p.add_argument("--batch-pages", type=int, default=64)
    _add_threads(p)
    p.set_defaults(func=cmd_extract)

    p = sub.add_parser("train", help="fine-tune a content extractor on training splits")
    p.add_argument("--out", required=True, help="run directory (resumes if it has a checkpoint)")
    p.add_argument("--datasets", default="dragnet,cleaneval,pagetype")
    p.add_argument("--encoder", default="static", choices=["static", "minilm"])
    p.add_argument("--preset", default="small")
    p.add_argument("--model-overrides", default=None, help="JSON of ModelConfig fields")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch-nodes", type=int, default=16_000)
    p.add_argument("--patience", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-pages", type=int, default=None, help="per dataset (quick runs)")
    p.add_argument("--init", default=None, help="pre-trained model directory")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--genre-weight", type=float, default=0.0,
                   help="> 0: also train the page-genre head (page-type set pages)")
    p.add_argument("--role-weight", type=float, default=0.0,
                   help="> 0: also train the block-role head (L3S-GN1 pages)")
    p.add_argument("--content-datasets", default=None,
                   help="datasets whose content labels are trained (default: all of them)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("presets", help="the model presets and their parameter counts")
    p.add_argument("--encoder", default="minilm", choices=["static", "minilm"])
    p.set_defaults(func=cmd_presets)

    from .training import genre as genre_module, heads as heads_module, roles as roles_module

    p = sub.add_parser("genre-cv", help="10-fold CV of the genre head vs a TF-IDF baseline")
    genre_module.add_arguments(p)
    p.set_defaults(func=cmd_genre_cv)

    p = sub.add_parser("roles-eval", help="per-role F1 of the block-role head, unseen sites")
    roles_module.add_arguments(p)
    p.set_defaults(func=cmd_roles_eval)

    p = sub.add_parser("fit-heads", help="add genre and role heads to a content model "
                       "(frozen backbone)")
    heads_module.add_arguments(p)
    p.set_defaults(func=cmd_fit_heads)

    p = sub.add_parser("evaluate", help="score models and baselines on test pages")
    p.add_argument("--model", action="append", default=None,
                   help=f"model name or directory (repeatable; default: {DEFAULT_MODEL})")
    p.add_argument("--datasets", default="dragnet,cleaneval,pagetype")
    p.add_argument("--limit", type=int, default=None, help="pages per dataset")
    p.add_argument("--no-trafilatura", action="store_true")
    p.add_argument("--no-embedding-cache", action="store_true",
                   help="do not keep a model encoder's vectors under ~/.cache/scrapy_grownup")
    p.add_argument("--json", default=None, help="also write rows as JSON lines here")
    p.add_argument("--device", default=None)
    from .training.crosssite import add_arguments as crosssite_arguments

    crosssite_arguments(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("inspect", help="render a page shaded by content score")
    p.add_argument("page")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--model", default="auto", help="auto: default on a GPU, else fast")
    p.add_argument("--device", default=None)
    _add_threads(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("export", help="save a trained model for shipping (fp16, options)")
    p.add_argument("model", help="trained model directory, e.g. runs/x/best")
    p.add_argument("--out", required=True)
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--refine", action="store_true")
    p.add_argument("--fp32", action="store_true")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("distill-static", help="distil the static encoder from MiniLM")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_distill)

    from .warc.command import add_arguments as warc_arguments

    p = sub.add_parser("warc", help="featurize WARC/ARC archives into a pre-training corpus",
                       description="Read archives (or a scrapy-redis queue of them) into "
                                   "sharded graphs and same-website pairs.")
    warc_arguments(p)
    p.set_defaults(func=cmd_warc)

    from .pretraining.command import add_arguments as pretrain_arguments

    p = sub.add_parser("pretrain", help="self-supervised pre-training on a `grownup warc` corpus",
                       description="Masked node-feature prediction and same-website pairs "
                                   "(GROWN+UP 2.4); fine-tune with `grownup train --init "
                                   "OUT/best`.")
    pretrain_arguments(p)
    p.set_defaults(func=cmd_pretrain)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    if getattr(args, "model", None) is None and args.command == "evaluate":
        args.model = [DEFAULT_MODEL]
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
