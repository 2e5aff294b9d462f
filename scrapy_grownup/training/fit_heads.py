"""``grownup lab fit-heads``: add a page-type and a role head to a content model (frozen
backbone).

``grownup lab fit-heads --model fast --out DIR`` adds a page-type head (page-type pages outside
the trainer hold-out) and a role head (L3S-GN1 pages of the training sites of the site-disjoint
split) to a content model (``heads.fit_page_type_head`` / ``fit_role_head`` on the backbone's
frozen features), and reports both on pages and sites the heads never saw. ``--signals``: the
page-type head also reads ``page_signals`` (computed from the parsed page at serving time).
``--page-type-datasets pagetype,wcxb_dev``: the page-type head also trains on ``wcxb_dev``'s
pages whose sites none of the hold-out pages share (so the hold-out still scores unseen sites).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict

import numpy as np

from scrapy_grownup.data import datasets
from scrapy_grownup.extractor import resolve_model_dir
from scrapy_grownup.graph.signals import SIGNAL_VERSION
from scrapy_grownup.data.splits import site_of
from scrapy_grownup.training.command import add_run_arguments, report, standalone
from scrapy_grownup.training.corpus import corpus_encoder
from scrapy_grownup.training.crosssite import load_records
from scrapy_grownup.training.page_type_cv import (PAGE_TYPES, page_type_corpus, page_type_index,
                                                  scores, text_baseline)
from scrapy_grownup.training.page_type_cv import format_table as page_type_table
from scrapy_grownup.training.page_type_sites import record_signals, site_corpus
from scrapy_grownup.training.heads import (HeadFitConfig, fit_page_type_head, fit_role_head,
                                            frozen_features, predict_page_type)
from scrapy_grownup.training.holdout import heldout_ids, site_split
from scrapy_grownup.training.roles import ROLES, l3s_store, node_text_lengths, role_scores
from scrapy_grownup.training.roles import format_table as roles_table


def extra_page_type_records(names, pagetype_records, held) -> list:
    """Pages of the sets ``names`` (``wcxb_dev``) that may train the page-type head next to the
    page-type set: every page whose site is none of the hold-out pages' sites (a page both
    sets hold trains with the other set's reviewed label, as ``crosssite.load_records``
    does for content)."""
    if not names:
        return []
    held_sites = {site_of(r) for r in pagetype_records if r.id in held}
    return [r for r in load_records(names) if page_type_index(r.extra.get("page_type")) >= 0
            and site_of(r) not in held_sites]


def add_heads(args) -> dict:
    import torch

    from scrapy_grownup.model import GrownUpModel

    cfg = HeadFitConfig(seed=args.seed)
    source = resolve_model_dir(args.model)
    base = GrownUpModel.from_pretrained(source)
    config = base.config.replace(num_page_types=len(PAGE_TYPES),
                                 page_type_names=list(PAGE_TYPES),
                                 page_type_readout="content_pooled", num_roles=len(ROLES),
                                 role_names=list(ROLES), role_head_hidden=args.role_hidden,
                                 role_features="context",
                                 page_type_signals=SIGNAL_VERSION if args.signals else "")
    model = GrownUpModel(config)
    model.backbone.load_state_dict(base.backbone.state_dict())
    model.node_head.load_state_dict(base.node_head.state_dict())
    encoder = corpus_encoder(config.encoder)
    start = time.perf_counter()
    result: dict = {"task": "fit-heads", "model": str(args.model), "fit": asdict(cfg)}

    # Page type: every page-type page outside the trainer hold-out (and, with --page-type-datasets,
    # those sets' pages off the hold-out's sites); scored on the hold-out, next to the text
    # baseline trained on the same pages.
    store, info = page_type_corpus(encoder, workers=args.workers)
    y = np.asarray(info["page_types"], dtype=np.int64)
    held = set(heldout_ids("pagetype"))
    test = [i for i, page_id in enumerate(store.ids) if page_id in held]
    train = [i for i, page_id in enumerate(store.ids) if page_id not in held]
    records = {r.id: r for r in datasets.load("pagetype", ids=store.ids)}
    extra_names = [n for n in args.page_type_datasets.split(",") if n and n != "pagetype"]
    extra = extra_page_type_records(extra_names, [records[i] for i in store.ids], held)
    extra_urls = {r.url for r in extra}
    train = [i for i in train if records[store.ids[i]].url not in extra_urls]  # theirs win
    signals = None
    if args.signals:  # the head also reads the page signals (URL, JSON-LD, forms, prices...)
        signals = record_signals([records[i] for i in store.ids], workers=args.workers)
    x, _ = frozen_features(model, store, train + test, batch_nodes=cfg.batch_nodes,
                           signals=signals)
    x_train, y_train = x[:len(train)], y[train]
    texts = info["texts"]
    train_texts = [texts[i] for i in train]
    if extra:
        extra_store, extra_info = site_corpus(extra, encoder, workers=args.workers)
        extra_signals = np.asarray(extra_info["signals"], np.float32) if args.signals else None
        extra_x, _ = frozen_features(model, extra_store, range(len(extra_info["keys"])),
                                     batch_nodes=cfg.batch_nodes, signals=extra_signals)
        x_train = torch.cat([x_train, extra_x])
        y_train = np.concatenate([y_train, np.asarray(extra_info["page_types"], np.int64)])
        train_texts += extra_info["texts"]
    fit_page_type_head(model, x_train, y_train, cfg)
    pred = predict_page_type(model, x[len(train):]).argmax(1)
    baseline = text_baseline(train_texts, y_train, [texts[i] for i in test], args.seed)
    result["page_type"] = {"train_pages": len(y_train), "test_pages": len(test),
                           "datasets": ["pagetype", *extra_names],
                           "grownup": scores(y[test], pred),
                           "text_tfidf_logreg": scores(y[test], baseline),
                           "class_counts": {name: int((y[test] == k).sum())
                                            for k, name in enumerate(PAGE_TYPES)}}

    # Roles: L3S-GN1 pages of the training sites; scored on the other sites' pages.
    store, roles, hosts = l3s_store(encoder, workers=args.workers)
    train_pos, test_pos = site_split(hosts)
    _, nodes = frozen_features(model, store, list(train_pos) + list(test_pos), roles,
                               cfg.batch_nodes, page_type=False)
    train_nodes, test_nodes = nodes[:len(train_pos)], nodes[len(train_pos):]
    fit_role_head(model, torch.cat([n[0] for n in train_nodes]),
                  torch.cat([n[1] for n in train_nodes]), cfg)
    with torch.no_grad():
        pred = model.role_head(torch.cat([n[0] for n in test_nodes])).argmax(1).numpy()
    gold = torch.cat([n[1] for n in test_nodes]).numpy()
    lengths = node_text_lengths(store, test_pos)
    labelled = np.concatenate([roles[store.page_ptr[i]:store.page_ptr[i + 1]] >= 0
                               for i in test_pos])
    result["roles"] = {"setting": "site-split (frozen backbone)",
                       "train_pages": len(train_pos), "test_pages": len(test_pos),
                       "train_sites": len({hosts[i] for i in train_pos}),
                       "test_sites": len({hosts[i] for i in test_pos}),
                       "nodes": role_scores(gold, pred, names=ROLES),
                       "text": role_scores(gold, pred, lengths[labelled], names=ROLES)}
    result["seconds"] = round(time.perf_counter() - start, 1)
    doc = GrownUpModel.read_config(source)[1]
    metadata = {**(doc.get("metadata") or {}),
                "heads": {"page_type": result["page_type"],
                          "roles": {k: v for k, v in result["roles"].items()
                                    if k not in ("nodes", "text")},
                          "roles_macro_f1": result["roles"]["nodes"]["macro_f1"],
                          "fit": result["fit"], "base_model": str(args.model)}}
    model.save_pretrained(args.out, fp16=doc.get("dtype") == "float16", metadata=metadata)
    result["out"] = str(args.out)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="fast", help="content model (name or directory)")
    parser.add_argument("--out", required=True, help="where to write the model with heads")
    parser.add_argument("--role-hidden", type=int, default=256,
                        help="hidden width of the role head (0: linear)")
    parser.add_argument("--signals", action="store_true",
                        help="the page-type head also reads the page signals (page_signals.py: "
                             "URL, JSON-LD types, forms, prices, repeated siblings, class words)")
    parser.add_argument("--page-type-datasets", "--genre-datasets", default="pagetype",
                        metavar="SETS",
                        help="sets whose pages train the page-type head (pagetype,wcxb_dev: also "
                             "wcxb_dev's pages off the page-type hold-out's sites); "
                             "--genre-datasets is its former name")
    add_run_arguments(parser)


def run(args) -> int:
    return report(args, add_heads,
                  lambda r: page_type_table(r["page_type"]) + "\n" + roles_table(r["roles"]))


def main(argv: list[str] | None = None) -> int:
    return standalone("grownup lab fit-heads", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
