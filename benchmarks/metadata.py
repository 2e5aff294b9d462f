"""Title / author / date accuracy on the page-type set, ours beside trafilatura's, same pages.

    python benchmarks/metadata.py [--limit N] [--model fast]

Prints one JSON line per method (``grownup``: metadata with the model's content mask locating
the headline; ``grownup-nomodel``: the same without a model, headline = first ``h1``;
``trafilatura``: ``extract_metadata``) with figures on the hold-out ids
(``training.trainer.heldout_ids("pagetype")``) and on all pages; a table goes to stderr.

Matching rules (gold: ``ground_truth.title / author / publish_date``, LLM-written):

- title: both sides NFKC, case-folded, quotes/dashes unified, punctuation dropped, whitespace
  collapsed; ``exact`` = equal strings, ``f1>=0.9`` = bag-of-words F1 of at least 0.9.
  Over pages with a gold title.
- authors: each side split into names on ``; , & | /`` and " and "; a name is normalised as a
  title is, plus accents stripped and a leading "by" dropped; parts with digits and bare
  credentials (PhD, MD, ...) are dropped. ``set`` = equal name sets; ``any`` = at least one name
  in common. Over pages with a gold author; ``none ok`` = share of pages *without* a gold author
  where the method also gives none.
- date: the calendar date (first 10 characters of the ISO value, local to the page's own
  offset) equals the gold ``YYYY-MM-DD``. Over pages with a gold date; ``none ok`` as for
  authors.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

from _common import pin_single_core

pin_single_core()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_CREDENTIALS = {"phd", "md", "dr", "rn", "mba", "jr", "sr", "msc", "ma", "ba", "esq", "cpa"}


def norm_text(text: str | None) -> str:
    text = unicodedata.normalize("NFKC", text or "").casefold()
    text = re.sub(r"[\u2018\u2019\u201c\u201d\u2032`´]", "'", text)
    text = re.sub(r"[\u2010-\u2015\u2212]", "-", text)
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


def token_f1(a: str, b: str) -> float:
    ta, tb = Counter(a.split()), Counter(b.split())
    common = sum((ta & tb).values())
    if not common:
        return 0.0
    p, r = common / sum(ta.values()), common / sum(tb.values())
    return 2 * p * r / (p + r)


def name_set(value) -> frozenset[str]:
    if not value:
        return frozenset()
    if isinstance(value, (list, tuple)):
        value = "; ".join(value)
    out = set()
    for part in re.split(r"\s*(?:[;,&|/]|\band\b)\s*", str(value), flags=re.IGNORECASE):
        part = unicodedata.normalize("NFKD", part)
        part = "".join(c for c in part if not unicodedata.combining(c))
        name = norm_text(part)
        name = re.sub(r"^by\s+", "", name)
        if name and not re.search(r"\d", name) and name.replace(" ", "") not in _CREDENTIALS:
            out.add(name)
    return frozenset(out)


def calendar_date(value) -> str | None:
    if not value:
        return None
    m = re.match(r"\d{4}-\d{2}-\d{2}", str(value).strip())
    return m.group(0) if m else None


def score(pred: dict, gold: dict) -> dict:
    """Per-page outcomes; ``None`` where the page does not count for that figure."""
    out = {}
    gt = norm_text(gold.get("title"))
    pt = norm_text(pred.get("title"))
    out["title_exact"] = (gt == pt) if gt else None
    out["title_f1"] = (token_f1(pt, gt) >= 0.9) if gt else None
    ga, pa = name_set(gold.get("author")), name_set(pred.get("authors"))
    out["author_set"] = (ga == pa) if ga else None
    out["author_any"] = bool(ga & pa) if ga else None
    out["author_none_ok"] = (not pa) if not ga else None
    gd, pd = calendar_date(gold.get("publish_date")), calendar_date(pred.get("published"))
    out["date"] = (gd == pd) if gd else None
    out["date_none_ok"] = (pd is None) if not gd else None
    return out


def summarise(rows: list[dict]) -> dict:
    keys = rows[0].keys() if rows else ()
    summary: dict = {"pages": len(rows)}
    for key in keys:
        values = [r[key] for r in rows if r[key] is not None]
        summary[key] = round(100 * sum(values) / len(values), 1) if values else None
        summary[key + "_n"] = len(values)
    return summary


def grownup_predictions(records, model: str | None) -> tuple[list[dict], float]:
    from scrapy_grownup.dom import parse_page
    from scrapy_grownup.metadata import extract_metadata

    masks = [None] * len(records)
    pages = [parse_page(r.html, url=r.url) for r in records]
    if model:
        import torch

        torch.set_num_threads(1)
        from scrapy_grownup.extractor import ArticleExtractor
        from scrapy_grownup.refine import content_mask

        extractor = ArticleExtractor.from_pretrained(model, device="cpu")
        scores = extractor.score(pages)
        masks = [content_mask(p, s, extractor.threshold, extractor.refine)
                 for p, s in zip(pages, scores)]
    start = time.perf_counter()
    preds = []
    for page, mask in zip(pages, masks):
        meta = extract_metadata(page, mask)
        preds.append({"title": meta.title, "authors": meta.authors, "published": meta.published})
    return preds, (time.perf_counter() - start) / max(1, len(records))


def trafilatura_predictions(records) -> tuple[list[dict], float]:
    import logging

    import trafilatura
    from trafilatura.utils import load_html

    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    logging.getLogger("htmldate").setLevel(logging.CRITICAL)
    preds = []
    start = time.perf_counter()
    for record in records:
        tree = load_html(record.html)
        doc = trafilatura.extract_metadata(tree, default_url=record.url) if tree is not None \
            else None
        preds.append({"title": doc.title if doc else None,
                      "authors": doc.author if doc else None,
                      "published": doc.date if doc else None})
    return preds, (time.perf_counter() - start) / max(1, len(records))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--model", default="fast", help="model for the content mask")
    parser.add_argument("--subsets", default="heldout,all",
                        help="comma list of heldout, rest (not held out), all")
    args = parser.parse_args()

    from scrapy_grownup import datasets
    from scrapy_grownup.training.trainer import heldout_ids

    records = list(datasets.iter_records("pagetype"))[: args.limit]
    heldout = set(heldout_ids("pagetype"))
    golds = [r.extra for r in records]
    methods = {
        f"grownup ({args.model})": lambda: grownup_predictions(records, args.model),
        "grownup (no model)": lambda: grownup_predictions(records, None),
        "trafilatura": lambda: trafilatura_predictions(records),
    }
    subsets = {
        "heldout": [i for i, r in enumerate(records) if r.id in heldout],
        "rest": [i for i, r in enumerate(records) if r.id not in heldout],
        "all": list(range(len(records))),
    }
    table = []
    for name, run in methods.items():
        preds, seconds = run()
        rows = [score(p, g) for p, g in zip(preds, golds)]
        result = {"benchmark": "metadata", "method": name,
                  "ms_per_page": round(1000 * seconds, 2)}
        for subset in args.subsets.split(","):
            result[subset] = summarise([rows[i] for i in subsets[subset]])
        print(json.dumps(result), flush=True)
        table.append(result)
    columns = ("title_exact", "title_f1", "author_set", "author_any", "author_none_ok", "date",
               "date_none_ok")
    print(f"{'method':<20} {'subset':<8} {'pages':>5} " + " ".join(f"{c:>14}" for c in columns),
          file=sys.stderr)
    for result in table:
        for subset in args.subsets.split(","):
            s = result[subset]
            print(f"{result['method']:<20} {subset:<8} {s['pages']:>5} "
                  + " ".join(f"{s[c] if s[c] is not None else '-':>14}" for c in columns),
                  file=sys.stderr)


if __name__ == "__main__":
    main()
