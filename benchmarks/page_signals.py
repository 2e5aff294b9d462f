"""Time of the page-type signals (``page_signals.page_signals``: URL shape, JSON-LD types, DOM
counts, repeated siblings, price / cart / date cues, class and id cue words) per parsed page,
by group, next to the time of parsing the same pages (what every extraction pays anyway).
Prints one JSON line.

    python benchmarks/page_signals.py [PAGES]
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import best_ms, dragnet_test_pages, pin_single_core  # noqa: E402

from scrapy_grownup.graph import signals  # noqa: E402
from scrapy_grownup.page.dom import parse_page  # noqa: E402

PARTS = {
    "all": signals.page_signals,
    "url": lambda page: signals._url_part(page.url),
    "schema": signals._schema_part,
    "dom": signals._dom_part,
    "attrs": signals._attrs_part,
}


def main() -> None:
    pin_single_core()
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    htmls = [html for _id, html in dragnet_test_pages(limit)]
    pages = [parse_page(html) for html in htmls]
    out = {"benchmark": "page_signals", "pages": len(pages),
           "median_nodes": sorted(p.num_nodes for p in pages)[len(pages) // 2],
           "ms_per_page": {name: best_ms(fn, pages) for name, fn in PARTS.items()}}
    out["ms_per_page"]["parse_page"] = best_ms(parse_page, htmls, rounds=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
