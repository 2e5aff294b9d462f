"""Time of the page-type signals (``page_signals.page_signals``: URL shape, JSON-LD types, DOM
counts, repeated siblings, price / cart / date cues, class and id cue words) per parsed page,
by group, next to the time of parsing the same pages (what every extraction pays anyway).
Prints one JSON line.

    python benchmarks/page_signals.py [PAGES]
"""
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import dragnet_test_pages, pin_single_core  # noqa: E402

from scrapy_grownup import page_signals as signals  # noqa: E402
from scrapy_grownup.dom import parse_page  # noqa: E402

PARTS = {
    "all": signals.page_signals,
    "url": lambda page: signals._url_part(page.url),
    "schema": signals._schema_part,
    "dom": signals._dom_part,
    "attrs": signals._attrs_part,
}


def _best_ms(fn, items, rounds: int = 3) -> float:
    """Minimum over ``rounds`` of the mean ms per item: the least disturbed round."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, (time.perf_counter() - start) / len(items) * 1000)
    return round(best, 3)


def main() -> None:
    pin_single_core()
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    htmls = [html for _id, html in dragnet_test_pages(limit)]
    pages = [parse_page(html) for html in htmls]
    out = {"benchmark": "page_signals", "pages": len(pages),
           "median_nodes": sorted(p.num_nodes for p in pages)[len(pages) // 2],
           "ms_per_page": {name: _best_ms(fn, pages) for name, fn in PARTS.items()}}
    out["ms_per_page"]["parse_page"] = _best_ms(parse_page, htmls, rounds=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
