"""How far ``page_type_score`` can be trusted: accuracy of the page-type classifier by its score,
out of fold over sites, on the ``wcxb_dev`` pages and their gold page types.

The shipped classifier was fitted on all of ``wcxb_dev``, so its own scores there are in-sample.
This refits the same recipe (``training.page_type_fit.fit_page_type``: the linear SVM over text,
URL and ``og:type`` words, page signals and the model's pooled page-type inputs, C chosen over the
training side's sites) on the training sites of each of ``--folds`` site-grouped folds
(``data.splits.site_groups``: a site, its domain and its near-duplicates never on both sides)
and scores the held-out sites' pages with it: the top type's softmax score, as
``Article.page_type_score`` reports it, and whether that type is the gold one. The pooled
inputs are those of the model's frozen backbone (``--model``; ``fast``'s was trained on
``wcxb_dev``'s content labels, not on its page types). Prints the accuracy per score decile and
per fixed score band, and ``decisions.page_type.RELIABLE_SCORE``'s share and accuracy, as
Markdown; ``--json`` also writes every page's score.

    python benchmarks/page_type_reliability.py [--model fast] [--folds 5] [--json OUT]
    # about 4 minutes on 2 cores (the parsed corpus is cached under ~/.cache/scrapy_grownup)
"""
import argparse
import itertools
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402


def out_of_fold(model: str, folds: int, seed: int, workers: int, limit: int | None):
    """``(gold, predicted, score, groups)`` of every ``wcxb_dev`` page, each from a classifier
    fitted without its site."""
    from sklearn.model_selection import GroupKFold

    from scrapy_grownup.extractor import resolve_model_dir
    from scrapy_grownup.model import GrownUpModel
    from scrapy_grownup.training.corpus import corpus_encoder
    from scrapy_grownup.training.crosssite import load_records
    from scrapy_grownup.training.page_type_cv import PAGE_TYPES
    from scrapy_grownup.training.page_type_sites import corpus_groups, site_corpus
    from scrapy_grownup.training.page_type import pooled_inputs
    from scrapy_grownup.training.page_type_fit import fit_page_type

    directory = resolve_model_dir(model)
    config = GrownUpModel.read_config(directory)[0]
    records = load_records(["wcxb_dev"], limit=limit)
    store, info = site_corpus(records, corpus_encoder(config.encoder), workers=workers)
    pooled = pooled_inputs(directory, store)
    texts, urls, og = info["texts"], info["urls"], info["og_types"]
    signals = np.asarray(info["signals"], np.float32)
    gold = np.asarray(info["page_types"], np.int64)
    groups = np.asarray(corpus_groups(records, info["keys"]))
    predicted = np.full(len(gold), -1)
    score = np.zeros(len(gold))
    for k, (train, test) in enumerate(GroupKFold(folds).split(gold, gold, groups)):
        assert not set(groups[train]) & set(groups[test])
        classifier = fit_page_type(
            [texts[i] for i in train], [urls[i] for i in train], signals[train],
            pooled[train], gold[train], PAGE_TYPES, groups=list(groups[train]), seed=seed,
            og_types=[og[i] for i in train])
        probs = classifier.probabilities([texts[i] for i in test], [urls[i] for i in test],
                                         signals[test], pooled[test], [og[i] for i in test])
        predicted[test], score[test] = probs.argmax(1), probs.max(1)
        print(json.dumps({"fold": k, "test_pages": len(test),
                          "accuracy": round(float((predicted[test] == gold[test]).mean()), 4)}),
              file=sys.stderr, flush=True)
    return gold, predicted, score, groups, list(PAGE_TYPES)


def table(rows) -> str:
    lines = ["| score | pages | accuracy, % |", "|---|---|---|"]
    lines += [f"| {label} | {n} | {acc:.1f} |" for label, n, acc in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="fast", help="a shipped name or a model directory")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="pages (a quick check)")
    parser.add_argument("--json", default=None, help="also write every page's score here")
    args = parser.parse_args()
    start = time.perf_counter()
    gold, predicted, score, groups, names = out_of_fold(args.model, args.folds, args.seed,
                                                       args.workers, args.limit)
    right = predicted == gold
    from scrapy_grownup.decisions.page_type import RELIABLE_SCORE

    edges = np.quantile(score, np.linspace(0, 1, 11))
    deciles = []
    for k in range(10):
        lo, hi = edges[k], edges[k + 1]
        mask = (score >= lo) & ((score < hi) if k < 9 else (score <= hi))
        deciles.append((f"{lo:.3f}-{hi:.3f}", int(mask.sum()), 100 * float(right[mask].mean())))
    bands = []
    cuts = [0.0, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 1.0001]
    for lo, hi in itertools.pairwise(cuts):
        mask = (score >= lo) & (score < hi)
        if mask.any():
            bands.append((f"{lo:.2f}-{min(hi, 1.0):.2f}", int(mask.sum()),
                          100 * float(right[mask].mean())))
    low = score < RELIABLE_SCORE
    print(f"{len(gold)} pages, {args.folds} site-grouped folds, model {args.model}: "
          f"accuracy {100 * right.mean():.1f}%\n")
    print("By decile of the score:\n\n" + table(deciles) + "\n")
    print("By score band:\n\n" + table(bands) + "\n")
    print(f"RELIABLE_SCORE = {RELIABLE_SCORE}: {int(low.sum())} pages below it "
          f"({100 * low.mean():.1f}%), accuracy {100 * right[low].mean():.1f}% there; "
          f"{int((~low).sum())} at or above, accuracy {100 * right[~low].mean():.1f}%")
    print(f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"names": names, "gold": gold.tolist(), "predicted": predicted.tolist(),
                       "score": score.tolist(), "groups": groups.tolist()}, out)


if __name__ == "__main__":
    main()
