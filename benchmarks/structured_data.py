"""Our structured-data parsing (JSON-LD, OpenGraph, microdata) against extruct's, on the same
pages, under the same metadata rules. Prints one JSON line per arm and one for the JSON-LD blocks.

    python benchmarks/structured_data.py [--sets wcxb_dev,fundus,magic_html] [--limit N]

Arms (``scrapy_grownup.output.metadata.extract_metadata`` on the same ``PageStructure``; only the
structured-data layer it reads changes):

- ``grownup``: as shipped: ``dom._collect_metadata`` (``<meta>`` tags and JSON-LD script texts)
  and ``metadata.json_ld_objects`` (comment/CDATA wrappers and trailing commas tolerated,
  ``@graph`` flattened); microdata read from ``itemprop`` attributes by the author and date
  rules.
- ``extruct json-ld``: the JSON-LD objects are extruct's (``extruct.extract(tree,
  syntaxes=["json-ld"])``, then the same ``@graph`` flattening, which extruct does not do).
- ``extruct all``: also OpenGraph from extruct (its ``og:``/``article:``... properties replace
  ours in ``page.meta``; other ``<meta>`` tags are not extruct's business) and extruct's
  microdata items (``uniform=True``) after the JSON-LD objects.

extruct reads an ``lxml.html`` tree of the same decoded bytes, parsed with the same options as
``dom.parse_tree`` (switching the page parser to ``lxml.html.HTMLParser`` would give it that tree
for nothing, so parsing is not in its time); each syntax is extracted in its own call, so one
that raises loses that syntax alone (``raised`` counts pages per syntax).

Figures: field accuracy as ``benchmarks/metadata.py`` scores it (no content model: headline =
first ``h1``; the model's mask does not touch the structured-data layer), on every page and on
the site-grouped hold-out; ``layer_ms`` = median per page of the structured-data layer alone,
``metadata_ms`` = median per page of ``extract_metadata`` with that layer. The ``json-ld
blocks`` line parses every ``<script type="application/ld+json">`` block both ways.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from metadata import gold_of, load_sets, score, summarise  # noqa: E402  (pins one core too)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# OpenGraph prefixes extruct reads (extruct.opengraph._OG_NAMESPACES)
OG_PREFIXES = ("og", "music", "video", "article", "book", "profile", "product")
# ours, kept before run_arm hands extract_metadata each arm's objects in its place
from scrapy_grownup.output.metadata import json_ld_objects as JSON_LD_OBJECTS  # noqa: E402

SKIP_MESSAGE = ("extruct is not installed: its arms are skipped "
                "(pip install extruct to compare)")


def trees(record):
    """``(page, our tree, lxml.html tree)`` of one record, or ``None`` when it does not parse."""
    import lxml.html
    from lxml import etree

    from scrapy_grownup.page import dom
    from scrapy_grownup.page.decoding import decode_html
    from scrapy_grownup.errors import GrownupError

    try:
        page = dom.parse_page(record.html, url=record.url,
                              content_type=record.extra.get("content_type"))
    except GrownupError:
        return None
    text, _ = decode_html(bytes(record.html), record.extra.get("content_type"))
    data = text.encode("utf-8", errors="replace").replace(b"\x00", b"")
    ours = etree.fromstring(data, dom._parser())
    html_tree = etree.fromstring(data, lxml.html.HTMLParser(encoding="utf-8",
                                                             **dom._PARSER_OPTIONS))
    return page, ours, html_tree


def grownup_layer(page, tree, url, raised):
    """Our layer: meta tags and JSON-LD texts from the tree, parsed and flattened."""
    from scrapy_grownup.page import dom

    meta, blocks = dom._collect_metadata(tree)
    probe = copy.copy(page)
    probe.json_ld = blocks
    return meta, JSON_LD_OBJECTS(probe)


def extruct_layer(page, tree, url, raised, syntaxes=("json-ld", "opengraph", "microdata")):
    """extruct's layer: its JSON-LD (flattened as ours), OpenGraph and microdata items."""
    import extruct

    from scrapy_grownup.page import dom
    from scrapy_grownup.output import metadata

    out = {}
    for syntax in syntaxes:
        try:
            out[syntax] = extruct.extract(tree, base_url=url, syntaxes=[syntax], uniform=True,
                                          with_og_array=True, errors="strict")[syntax]
        except Exception:  # noqa: BLE001 - what extruct raises is what is measured
            raised[syntax] += 1
            out[syntax] = []
    objects: list[dict] = []
    for item in out["json-ld"]:
        metadata._flatten(item, objects, 0)
    for item in out.get("microdata", []):
        metadata._flatten(item, objects, 0)
    meta, _ = dom._collect_metadata(tree)  # non-OpenGraph meta tags stay ours
    if "opengraph" in syntaxes:
        meta = {k: v for k, v in meta.items() if k.split(":", 1)[0] not in OG_PREFIXES}
        for obj in out["opengraph"]:
            for key, value in obj.items():
                if key == "@context":
                    continue
                key = "og:type" if key == "@type" else key.lower()
                values = [v.strip() for v in (value if isinstance(value, list) else [value])
                          if isinstance(v, str) and v.strip()]
                if values and key not in meta:
                    meta[key] = "; ".join(dict.fromkeys(values)) \
                        if key in dom.MULTI_VALUE_META else values[0]
    return meta, objects


def run_arm(layer, loaded, url_of) -> tuple[list[dict], list[float], list[float], Counter]:
    from scrapy_grownup.output import metadata

    preds, layer_times, meta_times, raised = [], [], [], Counter()
    try:
        for key, parsed in loaded:
            if parsed is None:
                preds.append({})
                continue
            page, ours, html_tree = parsed
            tree = html_tree if layer is not grownup_layer else ours
            start = time.perf_counter()
            meta, objects = layer(page, tree, url_of[key], raised)
            middle = time.perf_counter()
            probe = copy.copy(page)
            probe.meta = meta
            metadata.json_ld_objects = lambda _page, objects=objects: objects
            found = metadata.extract_metadata(probe, None)
            end = time.perf_counter()
            layer_times.append(1000 * (middle - start))
            meta_times.append(1000 * (end - start))
            preds.append({"title": found.title, "authors": found.authors,
                          "published": found.published, "language": found.language,
                          "canonical_url": found.canonical_url, "site_name": found.site_name})
    finally:
        metadata.json_ld_objects = JSON_LD_OBJECTS
    return preds, layer_times, meta_times, raised


def json_ld_blocks(loaded) -> dict:
    """Every JSON-LD block parsed by ours (``metadata._load_json``) and by extruct."""
    from extruct.jsonld import HTML_OR_JS_COMMENTLINE, JsonLdExtractor

    from scrapy_grownup.output import metadata

    extractor = JsonLdExtractor()
    counts, examples = Counter(), []
    for key, parsed in loaded:
        if parsed is None:
            continue
        _, _, html_tree = parsed
        for node in html_tree.iter("script"):
            kind = (node.get("type") or "").strip().lower()
            if kind != "application/ld+json" or not (node.text or "").strip():
                continue
            counts["blocks"] += 1
            ours = metadata._load_json(node.text.strip())
            if node.get("type") != "application/ld+json":  # extruct's XPath: exact attribute
                theirs, error = None, "type attribute not exactly application/ld+json"
            else:
                try:
                    theirs, error = list(extractor._extract_items(node)), None
                except Exception as exc:  # noqa: BLE001
                    theirs, error = None, f"{type(exc).__name__}: {str(exc)[:60]}"
            outcome = ("ours ok" if ours is not None else "ours fails") + ", " + (
                "extruct ok" if error is None else "extruct fails")
            if ours is not None and error is None:
                items = ours if isinstance(ours, list) else [ours]
                outcome += ", same" if items == [t for t in theirs if t] else ", differ"
            counts[outcome] += 1
            if "fails" in outcome and len(examples) < 8:
                head = HTML_OR_JS_COMMENTLINE.sub("", node.text.strip())[:50]
                examples.append({"page": key, "outcome": outcome, "extruct_error": error,
                                 "starts": head})
    return {"benchmark": "structured_data", "arm": "json-ld blocks", **counts,
            "examples": examples}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", default="wcxb_dev,fundus,magic_html")
    parser.add_argument("--limit", type=int, default=None, help="pages per set")
    args = parser.parse_args()

    try:
        import extruct  # noqa: F401
        have_extruct = True
    except ImportError:
        print(SKIP_MESSAGE, file=sys.stderr)
        have_extruct = False

    sets = load_sets(args.sets.split(","), args.limit)
    records, held = [], []
    for name, (recs, held_idx) in sets.items():
        held += [len(records) + i for i in held_idx]
        records += recs
    golds = [gold_of(r) for r in records]
    keys = [f"{r.dataset}/{r.id}" for r in records]
    url_of = dict(zip(keys, (r.url for r in records)))
    loaded = [(key, trees(r)) for key, r in zip(keys, records)]

    arms = {"grownup": grownup_layer}
    if have_extruct:
        arms["extruct json-ld"] = lambda *a: extruct_layer(*a, syntaxes=("json-ld",))
        arms["extruct all"] = extruct_layer
    baseline = None
    for arm, layer in arms.items():
        preds, layer_ms, meta_ms, raised = run_arm(layer, loaded, url_of)
        rows = [score(p, g) for p, g in zip(preds, golds)]
        result = {"benchmark": "structured_data", "arm": arm, "pages": len(records),
                  "layer_ms": round(statistics.median(layer_ms), 3),
                  "metadata_ms": round(statistics.median(meta_ms), 3),
                  "raised": dict(raised),
                  "all": summarise(rows), "heldout": summarise([rows[i] for i in held])}
        if baseline is None:
            baseline = preds
        else:  # pages where a field differs from ours (canonical URL and site name have no gold)
            result["differs_from_grownup"] = {
                f: sum(a.get(f) != b.get(f) for a, b in zip(preds, baseline))
                for f in ("title", "authors", "published", "language", "canonical_url",
                          "site_name")}
        print(json.dumps(result), flush=True)
    if have_extruct:
        print(json.dumps(json_ld_blocks(loaded)), flush=True)


if __name__ == "__main__":
    main()
