"""``grownup lab fit-page-type``: fit the page-type classifier (``page_type_classifier``: a linear
SVM and, with ``--stack``, boosted trees stacked on it) on every page of a page-type set and
add it to a model.

It reads the model's own pooled page-type inputs (``GrownUpModel.page_type_inputs``, the
backbone frozen), so a classifier belongs to the weights it was fitted with. ``grownup lab
page-type-sites`` measures the same recipe across sites (its ``stacked`` and ``linear`` arms:
fitted on each fold's training sites with that fold's backbone); this command fits it on all
pages for shipping.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np

from scrapy_grownup.errors import GrownupError
from scrapy_grownup.graph.signals import SIGNAL_DIM
from scrapy_grownup.decisions.page_type import PAGE_TYPE_FILE
from scrapy_grownup.training.command import add_run_arguments, report, standalone
from scrapy_grownup.training.page_type_fit import fit_linear_page_type, fit_stack


def pooled_inputs(model_dir: Path, store, batch_nodes: int = 16_000) -> np.ndarray:
    """The model's parameter-free pooled page-type inputs (without the page signals) of every
    store page."""
    from scrapy_grownup.model import GrownUpModel
    from scrapy_grownup.training.page_type_sites import page_type_model
    from scrapy_grownup.training.heads import frozen_features

    model = page_type_model(GrownUpModel.from_pretrained(model_dir))
    pooled, _ = frozen_features(model, store, range(store.num_pages), batch_nodes=batch_nodes)
    return pooled.numpy()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="the model to add the classifier to "
                                                  "(a directory or a shipped name)")
    p.add_argument("--out", required=True, help="write the model with its classifier here")
    p.add_argument("--dataset", default="wcxb_dev",
                   help="the page-type set it learns from (default: wcxb_dev)")
    p.add_argument("--limit", type=int, default=None, help="pages (a quick check)")
    p.add_argument("--stack", action=argparse.BooleanOptionalAction, default=False,
                   help="stack boosted trees on the linear model's out-of-fold margins and the "
                        "page signals where inner folds over sites say they beat it (no better "
                        "across sites with the pooled inputs, see docs/research/page-type.md; "
                        "default: off)")
    add_run_arguments(p)


def fit_command(args) -> dict:
    from scrapy_grownup.extractor import resolve_model_dir
    from scrapy_grownup.model import GrownUpModel
    from scrapy_grownup.training.corpus import corpus_encoder
    from scrapy_grownup.training.crosssite import load_records
    from scrapy_grownup.training.page_type_cv import PAGE_TYPES
    from scrapy_grownup.training.page_type_sites import corpus_groups, site_corpus

    source, out = resolve_model_dir(args.model), Path(args.out)
    model = GrownUpModel.from_pretrained(source)
    names = list(model.page_type_names or PAGE_TYPES)
    if names != list(PAGE_TYPES):
        raise GrownupError(f"the model's page types {names} are not "
                           f"the set's {list(PAGE_TYPES)}")
    records = load_records([args.dataset], limit=args.limit)
    store, info = site_corpus(records, corpus_encoder(model.config.encoder),
                              workers=args.workers)
    pages = (info["texts"], info["urls"], np.asarray(info["signals"], np.float32),
             pooled_inputs(source, store), np.asarray(info["page_types"]))
    groups = corpus_groups(records, info["keys"])
    classifier = fit_linear_page_type(*pages, names, groups=groups, seed=args.seed,
                                      og_types=info["og_types"])
    stack = fit_stack(classifier, *pages, groups, seed=args.seed, og_types=info["og_types"]) \
        if args.stack else {"stacked": False, "why": "no --stack"}
    if out.resolve() != source.resolve():
        shutil.copytree(source, out, dirs_exist_ok=True)
    classifier.save(out / PAGE_TYPE_FILE)
    return {"saved": str(out / PAGE_TYPE_FILE), "pages": len(info["keys"]),
            "text_terms": len(classifier.text), "url_terms": len(classifier.url),
            "signal_dim": SIGNAL_DIM, "pooled_dim": classifier.pooled_dim,
            "stacked_trees": 0 if classifier.stack is None else classifier.stack.num_trees,
            "stack": stack}


def run(args) -> int:
    return report(args, fit_command, lambda result: "\n".join(
        f"{k}: {v}" for k, v in result.items()))


def main(argv: list[str] | None = None) -> int:
    return standalone("grownup lab fit-page-type", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
