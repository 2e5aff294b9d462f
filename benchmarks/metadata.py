"""Title / author / date / language accuracy, and the description / image / tags / categories /
modification date that each method finds, ours beside trafilatura's, on the same pages.

    python benchmarks/metadata.py [--sets wcxb_dev,fundus] [--model fast] [--limit N]

Sets and their gold:

- ``wcxb_dev``: the WCXB dev split's reviewed ``title``, ``author`` and ``publish_date``
  (``record.extra``); no language.
- ``fundus``: the publisher parsers' ``title``, ``authors`` (``gold_parts/ID.json``),
  ``publishing_date`` and ``language`` (mostly the page's ``<html lang>``); and ``topics`` and
  ``summary`` (``gold_parts/ID.json``), the gold closest to tags and a description.
- ``magic_html``: ``magic_html_article`` + ``magic_html_forum``, language only (their gold
  language is guessed from the gold text's script and stop words, so it does not come from the
  markup).
- ``pagetype``: the former benchmark (LLM-written title, author, date), with the hold-out of
  ``training.trainer.heldout_ids("pagetype")``.

The hold-out of the modern sets is ``splits.grouped_holdout(records, 0.2)`` over all their pages
together (whole site groups: a site is never on both sides). The metadata rules were tuned on
the other pages only ("train"); "held-out" figures are the ones to quote.

Methods, all on the same pages in the same run: ``grownup (MODEL)`` (metadata with the model's
content mask locating the headline and the text to detect the language on), ``grownup (no
model)`` (headline = first ``h1``, text = the whole page), ``trafilatura``
(``extract_metadata``). One JSON line per method and set goes to stdout, a table to stderr.

Matching rules:

- title: both sides NFKC, case-folded, quotes/dashes unified, punctuation dropped, whitespace
  collapsed; ``exact`` = equal strings, ``f1>=0.9`` = bag-of-words F1 of at least 0.9.
  Over pages with a gold title.
- authors: each side split into names on ``; , & | /`` and " and "; a name is normalised as a
  title is, plus accents stripped and a leading "by" dropped; parts with digits and bare
  credentials (PhD, MD, ...) are dropped. ``set`` = equal name sets; ``any`` = at least one name
  in common. Over pages with a gold author; ``none ok`` = share of pages *without* a gold author
  where the method also gives none.
- date: the calendar date of the publication (the method's value moved to the gold's UTC
  offset when both have a time and an offset, else its first 10 characters) equals the gold's.
  Over pages with a gold date; ``none ok`` as for authors.
- language: the primary subtag (``de`` of ``de-AT``; ``nb`` / ``nn`` count as ``no``) equals
  the gold's. Over pages with a gold language.

The newer fields (``FIELD_COLUMNS``, a second table): no set has gold for ``image``,
``categories`` or ``date_modified``, so each method's *coverage* is given (``cov``: share of
pages where it returns a value; trafilatura has no modification date) and, per field, the
*agreement* of the two methods (``agree``, on the trafilatura row: over pages where either
returns a value, the share where both return the same one: descriptions equal as titles are,
images the same absolute URL, tags and categories the same set, case folded). Where gold
exists (fundus): ``tags gold`` = the method's tags and categories together share at least one
topic with the gold's ``topics`` (over pages with topics), ``desc gold`` = the description has
a bag-of-words F1 of at least 0.9 with the gold ``summary`` (the lead the publisher's parser
reads; over pages with one). wcxb_dev's ``ground-truth`` files hold no such field (their
``_internal.page_type.tags`` are the annotators' topic labels, not the page's tags).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import unicodedata
from collections import Counter
from datetime import datetime
from pathlib import Path

from _common import pin_single_core

pin_single_core()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_CREDENTIALS = {"phd", "md", "dr", "rn", "mba", "jr", "sr", "msc", "ma", "ba", "esq", "cpa"}
COLUMNS = ("title_exact", "title_f1", "author_set", "author_any", "author_none_ok", "date",
           "date_none_ok", "language")
FIELDS = ("description", "image", "tags", "categories", "date_modified")
FIELD_COLUMNS = tuple(f"{f}_cov" for f in FIELDS) + tuple(f"{f}_agree" for f in FIELDS[:4]) \
    + ("tags_gold", "desc_gold")


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


def _datetime(value) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        return None


def calendar_date(value, like=None) -> str | None:
    """``YYYY-MM-DD`` of ``value``; moved to the UTC offset of ``like`` when both have one."""
    if not value:
        return None
    if like:
        a, b = _datetime(value), _datetime(like)
        if a is not None and b is not None and a.tzinfo and b.tzinfo \
                and len(str(value).strip()) > 10:
            return a.astimezone(b.tzinfo).date().isoformat()
    m = re.match(r"\d{4}-\d{2}-\d{2}", str(value).strip())
    return m.group(0) if m else None


def primary_language(value) -> str | None:
    if not value:
        return None
    code = str(value).strip().replace("_", "-").split("-")[0].lower()
    return "no" if code in ("nb", "nn") else code or None


def score(pred: dict, gold: dict) -> dict:
    """Per-page outcomes; ``None`` where the page does not count for that figure."""
    out = {}
    gt = norm_text(gold.get("title"))
    pt = norm_text(pred.get("title"))
    out["title_exact"] = (gt == pt) if gt else None
    out["title_f1"] = (token_f1(pt, gt) >= 0.9) if gt else None
    if "author" in gold:
        ga, pa = name_set(gold.get("author")), name_set(pred.get("authors"))
        out["author_set"] = (ga == pa) if ga else None
        out["author_any"] = bool(ga & pa) if ga else None
        out["author_none_ok"] = (not pa) if not ga else None
    else:
        out["author_set"] = out["author_any"] = out["author_none_ok"] = None
    if "publish_date" in gold:
        gold_date = gold.get("publish_date")
        gd = calendar_date(gold_date)
        pd = calendar_date(pred.get("published"), like=gold_date)
        out["date"] = (gd == pd) if gd else None
        out["date_none_ok"] = (pd is None) if not gd else None
    else:
        out["date"] = out["date_none_ok"] = None
    gl = primary_language(gold.get("language"))
    # a method that gives no language field at all (trafilatura's extract_metadata) is "-"
    out["language"] = (primary_language(pred.get("language")) == gl) \
        if gl and "language" in pred else None
    return out


def _field_value(pred: dict, name: str, base: str | None):
    """A comparable form of field ``name`` of a prediction, ``None`` where it has none."""
    from urllib.parse import urljoin

    value = pred.get(name)
    if not value:
        return None
    if name == "description":
        return norm_text(value) or None
    if name == "image":
        try:
            return urljoin(base or "", str(value).strip())
        except ValueError:
            return str(value).strip()
    if name in ("tags", "categories"):  # trafilatura's list items may be "a, b, c"
        values = value if isinstance(value, (list, tuple)) else [value]
        values = [part for v in values for part in str(v).split(",")]
        return frozenset(norm_text(v) for v in values if norm_text(v)) or None
    return value


def score_fields(pred: dict, gold: dict, base: str | None) -> dict:
    """Coverage of the newer fields, and their agreement with the gold where it exists."""
    out = {}
    for name in FIELDS:
        out[f"{name}_cov"] = (_field_value(pred, name, base) is not None) \
            if name in pred else None
    topics = gold.get("topics")
    if topics:
        mine = (_field_value(pred, "tags", base) or frozenset()) \
            | (_field_value(pred, "categories", base) or frozenset())
        out["tags_gold"] = bool(mine & {norm_text(t) for t in topics}) \
            if "tags" in pred else None
    summary = norm_text(" ".join(gold.get("summary") or []))
    if summary and "description" in pred:
        out["desc_gold"] = token_f1(norm_text(pred.get("description")), summary) >= 0.9
    return out


def agreement(ours: dict, theirs: dict, base: str | None) -> dict:
    """Per field, over pages where either method has a value: whether both have the same."""
    out = {}
    for name in FIELDS[:4]:
        a, b = _field_value(ours, name, base), _field_value(theirs, name, base)
        out[f"{name}_agree"] = (a == b) if (a is not None or b is not None) else None
    return out


def summarise(rows: list[dict]) -> dict:
    summary: dict = {"pages": len(rows)}
    for key in COLUMNS + FIELD_COLUMNS:
        values = [r[key] for r in rows if r.get(key) is not None]
        summary[key] = round(100 * sum(values) / len(values), 1) if values else None
        summary[key + "_n"] = len(values)
    return summary


# ----------------------------------------------------------------------------------------------
# Gold


def _fundus_gold(record) -> dict | None:
    from scrapy_grownup.data import datasets

    path = datasets.dataset_dir(record.dataset) / "gold_parts" / f"{record.id}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def fundus_authors(record) -> list[str] | None:
    parts = _fundus_gold(record)
    return None if parts is None else parts.get("authors") or []


def fundus_parts(record) -> dict:
    """The fundus gold's ``topics`` and ``summary`` (lead paragraphs), where it has them."""
    parts = _fundus_gold(record) or {}
    return {key: parts[key] for key in ("topics", "summary") if parts.get(key)}


def gold_of(record) -> dict:
    """The fields this set has gold for (a field it lacks is left out, not empty)."""
    extra = record.extra
    if record.dataset in ("wcxb_dev", "pagetype"):
        return {"title": extra.get("title"), "author": extra.get("author"),
                "publish_date": extra.get("publish_date")}
    if record.dataset in ("fundus", "fundus_history"):
        gold = {"title": extra.get("title"), "publish_date": extra.get("publish_date"),
                "language": extra.get("language")}
        authors = fundus_authors(record)
        if authors is not None:
            gold["author"] = authors
        gold.update(fundus_parts(record))
        return gold
    return {"language": extra.get("language")}  # magic_html: language only


def load_sets(names: list[str], limit: int | None) -> dict[str, tuple[list, list[int]]]:
    """Per set: its records and the indices of its held-out pages."""
    from scrapy_grownup.data import datasets
    from scrapy_grownup.data.splits import grouped_holdout

    loaded = {}
    for name in names:
        parts = ["magic_html_article", "magic_html_forum"] if name == "magic_html" else [name]
        records = [r for part in parts for r in datasets.iter_records(part)][:limit]
        loaded[name] = records
    modern = [(name, i) for name, records in loaded.items() if name != "pagetype"
              for i in range(len(records))]
    _, held = grouped_holdout([loaded[n][i] for n, i in modern], 0.2)
    out = {name: (records, []) for name, records in loaded.items()}
    for k in held:
        name, i = modern[k]
        out[name][1].append(i)
    if "pagetype" in loaded:
        from scrapy_grownup.training.holdout import heldout_ids

        ids = set(heldout_ids("pagetype"))
        out["pagetype"] = (loaded["pagetype"],
                           [i for i, r in enumerate(loaded["pagetype"]) if r.id in ids])
    return out


# ----------------------------------------------------------------------------------------------
# Methods


def grownup_predictions(records, model: str | None) -> tuple[list[dict], float]:
    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.errors import GrownupError
    from scrapy_grownup.output.metadata import extract_metadata

    pages = []
    for r in records:
        try:
            pages.append(parse_page(r.html, url=r.url,
                                    content_type=r.extra.get("content_type")))
        except GrownupError:
            pages.append(None)
    masks = [None] * len(records)
    if model:
        import torch

        torch.set_num_threads(1)
        from scrapy_grownup.output.assembly import complete_blocks
        from scrapy_grownup.extractor import ArticleExtractor
        from scrapy_grownup.decisions.refine import content_mask

        extractor = ArticleExtractor.from_pretrained(model, device="cpu")
        good = [p for p in pages if p is not None]
        scores = iter(extractor.score(good))
        masks = [complete_blocks(p, content_mask(p, next(scores), extractor.threshold,
                                                 extractor.refine)) if p is not None else None
                 for p in pages]
    extract_metadata(pages[0], masks[0]) if pages and pages[0] is not None else None  # warm-up
    start = time.perf_counter()
    preds = []
    for page, mask in zip(pages, masks):
        if page is None:
            preds.append({})
            continue
        meta = extract_metadata(page, mask)
        image = meta.image
        if image is None and mask is not None:  # the extractor's fallback: a content image
            from scrapy_grownup.output.images import content_images

            image = next(iter(content_images(page, mask).values()), (None,))[0]
        preds.append({"title": meta.title, "authors": meta.authors, "published": meta.published,
                      "language": meta.language, "description": meta.description,
                      "image": image, "tags": meta.tags, "categories": meta.categories,
                      "date_modified": meta.date_modified})
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
                      "published": doc.date if doc else None,
                      "description": doc.description if doc else None,
                      "image": doc.image if doc else None,
                      "tags": doc.tags if doc else None,
                      "categories": doc.categories if doc else None})
    return preds, (time.perf_counter() - start) / max(1, len(records))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", default="wcxb_dev,fundus,magic_html",
                        help="comma list of wcxb_dev, fundus, magic_html, pagetype")
    parser.add_argument("--limit", type=int, default=None, help="pages per set")
    parser.add_argument("--model", default="fast", help="model for the content mask")
    parser.add_argument("--subsets", default="heldout,all",
                        help="comma list of heldout, train (not held out), all")
    parser.add_argument("--no-trafilatura", action="store_true")
    args = parser.parse_args()

    sets = load_sets(args.sets.split(","), args.limit)
    table = []
    for name, (records, held) in sets.items():
        golds = [gold_of(r) for r in records]
        methods = {f"grownup ({args.model})": lambda: grownup_predictions(records, args.model),
                   "grownup (no model)": lambda: grownup_predictions(records, None)}
        if not args.no_trafilatura:
            methods["trafilatura"] = lambda: trafilatura_predictions(records)
        held_set = set(held)
        subsets = {"heldout": held, "train": [i for i in range(len(records)) if i not in held_set],
                   "all": list(range(len(records)))}
        ours = None  # the model's predictions: trafilatura's row says how far they agree
        for method, run in methods.items():
            preds, seconds = run()
            rows = [{**score(p, g), **score_fields(p, g, r.url)}
                    for p, g, r in zip(preds, golds, records)]
            if ours is None:
                ours = preds
            elif method == "trafilatura":
                for row, mine, theirs, r in zip(rows, ours, preds, records):
                    row.update(agreement(mine, theirs, r.url))
            result = {"benchmark": "metadata", "set": name, "method": method,
                      "ms_per_page": round(1000 * seconds, 2)}
            for subset in args.subsets.split(","):
                result[subset] = summarise([rows[i] for i in subsets[subset]])
            print(json.dumps(result), flush=True)
            table.append(result)
    for columns, width in ((COLUMNS, 14), (FIELD_COLUMNS, 18)):
        print(f"{'set':<10} {'method':<20} {'subset':<8} {'pages':>5} "
              + " ".join(f"{c:>{width}}" for c in columns) + f" {'ms/page':>8}",
              file=sys.stderr)
        for result in table:
            for subset in args.subsets.split(","):
                s = result[subset]
                print(f"{result['set']:<10} {result['method']:<20} {subset:<8} {s['pages']:>5} "
                      + " ".join(f"{s[c] if s[c] is not None else '-':>{width}}"
                                 for c in columns)
                      + f" {result['ms_per_page']:>8}", file=sys.stderr)


if __name__ == "__main__":
    main()
