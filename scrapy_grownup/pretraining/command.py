"""``grownup pretrain --data DIR --out DIR``: arguments and entry point."""

from __future__ import annotations

import argparse
import json

from scrapy_grownup.pretraining.defaults import MASK_NODES, MASK_RATE, PAPER_WEIGHTS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True,
                   help="corpus directory written by: grownup warc PATH... --output DIR")
    p.add_argument("--out", required=True,
                   help="run directory (resumes if it has a checkpoint); the model is OUT/best")
    p.add_argument("--preset", default="small",
                   help="model shape (grownup lab presets lists them; default: small)")
    p.add_argument("--model-overrides", default=None, help="JSON of ModelConfig fields")
    p.add_argument("--epochs", type=int, default=10, help="epochs (default: 10)")
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate (default: 0.001)")
    p.add_argument("--weight-decay", type=float, default=0.0,
                   help="AdamW weight decay (default: 0)")
    p.add_argument("--batch-pages", type=int, default=32,
                   help="pages per batch (a same-website pair counts two)")
    p.add_argument("--batch-nodes", type=int, default=40_000, help="nodes per batch at most")
    p.add_argument("--mask-nodes", type=int, default=MASK_NODES,
                   help=f"nodes chosen per page for masked prediction (paper: {MASK_NODES})")
    p.add_argument("--mask-rate", type=float, default=MASK_RATE,
                   help="share of the chosen nodes whose inputs are zeroed")
    p.add_argument("--weights", default=None,
                   help=f"JSON changes to the loss weights (paper: {json.dumps(PAPER_WEIGHTS)})")
    p.add_argument("--permute-ratio", type=float, default=0.5,
                   help="share of each batch's pairs permuted into negatives")
    p.add_argument("--dev-fraction", type=float, default=0.1, help="share of sites held out")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--max-pages", type=int, default=None, help="use about this many pages")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: torch's, one per core)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    from scrapy_grownup.pretraining.trainer import PretrainConfig, pretrain

    result = pretrain(PretrainConfig(
        data=args.data, out=args.out, preset=args.preset,
        overrides=json.loads(args.model_overrides) if args.model_overrides else {},
        epochs=args.epochs, lr=args.lr, weight_decay=args.weight_decay,
        batch_pages=args.batch_pages, batch_nodes=args.batch_nodes, mask_nodes=args.mask_nodes,
        mask_rate=args.mask_rate, weights=json.loads(args.weights) if args.weights else {},
        permute_ratio=args.permute_ratio, dev_fraction=args.dev_fraction, seed=args.seed,
        max_pages=args.max_pages, threads=args.threads, progress=not args.no_progress))
    print(json.dumps(result))
    return 0
