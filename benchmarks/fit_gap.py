#!/usr/bin/env python
"""How well the site-cv fold models fit their own training pages: is capacity the limit?

For each fold model of ``grownup lab evaluate --protocol site-cv`` (``--cv-dir``, OUT/site-cv), the
content model alone (fixed threshold, whole blocks, the page-level decisions; no rescorer)
extracts a random sample of the modern pages it trained on (in-sample) and of the fold's test
pages (its sites never trained on), and both are scored with the bag-of-words F1 the
cross-site tables lead with. The perfect filter of the same pages is the ceiling.

- in-sample far below the perfect filter: the model does not fit its training pages (too
  small, or too few epochs), and more capacity or training can help on unseen sites too;
- in-sample near the ceiling and out-of-fold far below: it memorises sites, and only more
  sites, features or regularisation help.

One JSON line per fold, then one for all folds:

    .venv/bin/python benchmarks/fit_gap.py --cv-dir runs/cv/site-cv --folds 0,2 --pages 250
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import pin_single_core  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cv-dir", required=True, help="the site-cv fold models: DIR/fold0/model ...")
    p.add_argument("--folds", default="0,1,2,3,4", help="which folds to measure (default: all)")
    p.add_argument("--num-folds", type=int, default=5, help="folds of the plan (default: 5)")
    p.add_argument("--train-datasets", default="dragnet,cleaneval",
                   help="the extra training sets of the folds' plan (default: dragnet,cleaneval)")
    p.add_argument("--pages", type=int, default=250,
                   help="pages sampled per fold and side (default: 250)")
    p.add_argument("--threshold", type=float, default=0.4,
                   help="the fold models' threshold (default: 0.4, fast's)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default: 0)")
    args = p.parse_args(argv)
    pin_single_core()
    import torch

    torch.set_num_threads(1)
    from scrapy_grownup.training.crosssite import (
        DEFAULT_VARIANTS, EVAL_DATASETS, aggregate, fold_trainer, load_records, model_texts,
        perfect_texts, record_key, score_methods, site_cv_plan,
    )

    folds = [int(k) for k in args.folds.split(",") if k]
    eval_records = load_records(EVAL_DATASETS)
    extra = load_records([n for n in args.train_datasets.split(",") if n])
    plans = site_cv_plan(eval_records, extra, args.num_folds, folds)
    trainer = fold_trainer(eval_records + extra, "static", {}, Path(args.cv_dir),
                           threshold=args.threshold)
    variant = [v for v in DEFAULT_VARIANTS if v.name == "grownup"]
    totals: dict[str, list] = {"in_sample": [], "out_of_fold": [], "in_sample_perfect": [],
                               "out_of_fold_perfect": []}
    for plan in plans:
        if not (Path(args.cv_dir) / plan.name / "model" / "config.json").is_file():
            raise SystemExit(f"no model at {Path(args.cv_dir) / plan.name / 'model'}: train it "
                             "with grownup lab evaluate --protocol site-cv first")
        rng = random.Random(args.seed)
        trained = [r for r in eval_records if record_key(r) in plan.train_keys]
        sides = {"in_sample": rng.sample(trained, min(args.pages, len(trained))),
                 "out_of_fold": rng.sample(plan.test, min(args.pages, len(plan.test)))}
        extractor = trainer(plan)
        row = {"benchmark": "fit_gap", "fold": plan.name, "pages": args.pages}
        for side, records in sides.items():
            ours = score_methods(records, {"grownup": model_texts(extractor, records,
                                                                  variant)["grownup"]})
            perfect = score_methods(records, {"perfect filter": perfect_texts(records)})
            totals[side] += ours
            totals[side + "_perfect"] += perfect
            row[side + "_bow_f1"] = round(100 * aggregate(ours)["bow_f1"], 2)
            row[side + "_perfect_bow_f1"] = round(100 * aggregate(perfect)["bow_f1"], 2)
        print(json.dumps(row), flush=True)
    print(json.dumps({"benchmark": "fit_gap", "fold": "all", "folds": folds,
                      **{k + "_bow_f1": round(100 * aggregate(v)["bow_f1"], 2)
                         for k, v in totals.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
