"""What the evaluation commands (page-type-cv, roles-eval, fit-heads) share: a table for people,
one JSON line for scripts, optionally the JSON line in a file."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Callable

from scrapy_grownup.errors import GrownupError


def report(args, compute: Callable[[argparse.Namespace], dict],
           tables: Callable[[dict], str]) -> int:
    """Run ``compute(args)`` on ``args.threads`` torch threads, print ``tables(result)`` and
    the result as one JSON line (also written to ``args.json`` when given)."""
    import torch

    torch.set_num_threads(args.threads)
    result = compute(args)
    print(tables(result))
    line = json.dumps(result)
    print(line)
    if args.json:
        Path(args.json).write_text(line + "\n")
    return 0


def standalone(prog: str, doc: str | None, add_arguments, run, argv: list[str] | None) -> int:
    """``python -m`` entry point of a command: parse ``argv``, log to stderr, ``run(args)``."""
    parser = argparse.ArgumentParser(prog=prog, description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return run(args)
    except GrownupError as exc:  # a user's error: one line, as ``grownup`` prints it
        print(f"{prog}: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
              file=sys.stderr)
        return 2


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``--seed``, ``--workers``, ``--threads`` and ``--json``: what every command run through
    ``report`` takes (``report`` reads ``threads`` and ``json``)."""
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--workers", type=int, default=2,
                        help="featurization processes (default: 2)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    parser.add_argument("--json", default=None, help="also write the JSON line here")


def add_model_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """``--preset`` and ``--model-overrides`` of the models a command trains itself."""
    parser.add_argument("--preset", default="small",
                        help="model shape (grownup lab presets lists them; default: small)")
    parser.add_argument("--model-overrides", default='{"num_layers": 4, '
                        '"num_transformer_layers": 0, "readout": "mean"}',
                        help="JSON of ModelConfig fields (default: the fast model's shape)")


def fold_list(text: str | None, folds: int) -> list[int] | None:
    """``--only-folds`` ("0,2") as fold numbers, None for every fold; a number that is no
    fold of ``folds`` is a one-line error."""
    if not text:
        return None
    try:
        only = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError:
        raise GrownupError(f"--only-folds {text}: comma-separated fold numbers, as 0,2") from None
    if not only or not all(0 <= k < folds for k in only):
        raise GrownupError(f"--only-folds {text}: fold numbers from 0 to {folds - 1}")
    return only
