"""``grownup lab dataset-warc``: the pages of our datasets as one WARC archive, with the sites a
cross-site measurement tests on left out, for ``grownup warc`` and ``grownup pretrain``.

A backbone measured on sites it never saw must not have read their pages either, labels or
not (``grownup lab evaluate --init`` refuses one that did). ``--hold fundus`` leaves out the test
side of ``grownup lab evaluate --protocol leave-out --hold fundus``, ``--fold K`` that of site-cv
fold K: the plans are the evaluation's own (``crosssite.leave_out_plan`` / ``site_cv_plan``),
a page goes when its site group (``splits.site_groups``: shared domain, publisher, URL or
near-duplicate) holds a test page, and any page left on a test page's host goes too, as the
check compares hosts. Without either, every page goes in (the shipped model's corpus). Pages
without a URL cannot be placed on a site and are skipped; a URL two sets share is written
once (the first set named wins).

    grownup lab dataset-warc runs/pt/no-fundus.warc.gz --hold fundus
    grownup lab dataset-warc runs/pt/fold2.warc.gz --fold 2
    grownup warc runs/pt/fold2.warc.gz --output runs/pt/fold2 --encoder static
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

from scrapy_grownup.errors import GrownupError
from scrapy_grownup.data.splits import site_groups
from scrapy_grownup.warc.pairs import site_key
from scrapy_grownup.training.crosssite import (EVAL_DATASETS, LEAVE_OUT, held_out_datasets, leave_out_plan,
                        load_records, record_key, site_cv_plan)

# every labelled set whose pages carry their URL (Dragnet and CleanEval have none)
CORPUS_DATASETS = ("wcxb_dev", "pagetype", "fundus", "fundus_history", "magic_html_article",
                   "magic_html_forum", "postlight_silver", "newspaper_2014_silver",
                   "newspaper4k_silver", "l3s_gn1")


def held_out_pages(hold: str | None = None, fold: int | None = None, folds: int = 5,
                   eval_datasets: Sequence[str] = EVAL_DATASETS,
                   train_datasets: Sequence[str] = ("dragnet", "cleaneval")) -> list:
    """The test pages of the leave-out plan ``hold`` or of site-cv fold ``fold`` (none when
    neither is given), as ``grownup lab evaluate`` draws them."""
    if hold is None and fold is None:
        return []
    if hold is not None and fold is not None:
        raise GrownupError("give --hold or --fold, not both")
    if fold is not None and not 0 <= fold < folds:
        raise GrownupError(f"--fold {fold}: folds are numbered 0 to {folds - 1}")
    eval_records = load_records(list(eval_datasets))
    extra = load_records([n for n in train_datasets if n not in eval_datasets])
    if hold is not None:
        return leave_out_plan(eval_records, extra, held_out_datasets(hold, eval_datasets)).test
    return site_cv_plan(eval_records, extra, folds, only=[fold])[0].test


def corpus_pages(records: Sequence, test: Sequence) -> tuple[list, Counter]:
    """``records`` that may go into a corpus whose model is tested on ``test``: with a URL,
    first of their URL, outside every site group and host that holds a test page; and the
    count of those left out, by reason."""
    left_out: Counter = Counter()
    test_keys = {record_key(r) for r in test}
    pool = list(test) + [r for r in records if record_key(r) not in test_keys]
    groups = site_groups(pool)
    test_groups = set(groups[:len(test)])
    group_of = {record_key(r): g for r, g in zip(pool, groups)}
    test_hosts = {site_key(r.url) for r in test} - {None}
    kept, urls = [], set()
    for r in records:
        url = (r.url or "").strip()
        if not url or site_key(url) is None:
            left_out["no_url"] += 1
        elif record_key(r) in test_keys or group_of[record_key(r)] in test_groups:
            left_out["test_site"] += 1
        elif site_key(url) in test_hosts:
            left_out["test_host"] += 1
        elif url in urls:
            left_out["same_url"] += 1
        else:
            urls.add(url)
            kept.append(r)
    return kept, left_out


def write_dataset_warc(out: str | Path, datasets: Sequence[str] = CORPUS_DATASETS,
                       hold: str | None = None, fold: int | None = None, folds: int = 5,
                       limit: int | None = None) -> dict:
    """Write the corpus pages of ``datasets`` (``limit`` pages a set) to the WARC ``out``;
    returns what was written and left out."""
    from scrapy_grownup.warc.synthetic import write_warc

    unknown = sorted(set(datasets) - set(CORPUS_DATASETS))
    if unknown:
        raise GrownupError(f"{', '.join(unknown)}: no URLs to archive; choose from "
                           f"{', '.join(CORPUS_DATASETS)}")
    test = held_out_pages(hold, fold, folds)
    kept, left_out = corpus_pages(load_records(list(datasets), limit=limit), test)
    if not kept:
        raise GrownupError("no page left to archive")
    path = write_warc(out, ((r.url.strip(), r.html, "text/html") for r in kept), requests=False)
    return {"warc": str(path), "pages": len(kept),
            "sites": len({site_key(r.url) for r in kept}),
            "by_dataset": dict(Counter(r.dataset for r in kept)),
            "left_out": dict(left_out), "test_pages": len(test),
            "held_out": {"hold": hold} if hold else ({"fold": fold, "folds": folds}
                                                     if fold is not None else None)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", help="the WARC to write (.warc.gz)")
    p.add_argument("--datasets", default=",".join(CORPUS_DATASETS),
                   help="the sets whose pages go in (default: every set with URLs)")
    p.add_argument("--hold", default=None,
                   help=f"leave out the test sites of grownup lab evaluate --protocol leave-out "
                        f"--hold HOLD ({', '.join(LEAVE_OUT)}, or datasets)")
    p.add_argument("--fold", type=int, default=None,
                   help="leave out the test sites of site-cv fold FOLD")
    p.add_argument("--folds", type=int, default=5, help="site-cv folds (default: 5)")
    p.add_argument("--limit", type=int, default=None, help="pages a set (a quick check)")


def run(args) -> int:
    datasets = [n for n in args.datasets.split(",") if n]
    result = write_dataset_warc(args.out, datasets, args.hold, args.fold, args.folds,
                                args.limit)
    print(json.dumps(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    from scrapy_grownup.training.command import standalone

    return standalone("grownup lab dataset-warc", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
