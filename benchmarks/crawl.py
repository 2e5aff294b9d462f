"""Crawl speed with and without the add-on: pages/s of a local site, and their ratio.

A loopback HTTP server (its own process) serves hundreds of generated news pages; the same
spider crawls them with Scrapy alone and with ``ADDONS = {"scrapy_grownup.Addon": 500}`` and
the chosen model, each crawl in a fresh process. Speed is HTML pages over Scrapy's
``elapsed_time_seconds`` (spider open to close; model loading happens before it). Prints one
JSON line with the median of ``--repeat`` runs of each.

    python benchmarks/crawl.py --pages 400 --repeat 3 --model fast
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from _common import crawl_index, served_site  # noqa: E402
sys.path.insert(0, str(ROOT))


def child(config: dict) -> None:
    """One crawl: the index page's links, nothing else; writes the stats as JSON."""
    stats = crawl_index(config["start_url"], config["settings"])
    Path(config["out"]).write_text(json.dumps({
        "seconds": stats["elapsed_time_seconds"],
        "pages": stats.get("downloader/response_status_count/200", 0),
        "items": stats.get("item_scraped_count", 0),
        "batch_size_mean": stats.get("grownup/batch_size_mean"),
        "model_ms_per_page": stats.get("grownup/model_ms_per_page"),
        "cpu_seconds": stats.get("bench/crawl_process_cpu_seconds"),
    }))


def crawl(tmp: Path, start_url: str, settings: dict) -> dict:
    out = tmp / f"run-{time.monotonic_ns()}.json"
    config = {"start_url": start_url, "settings": settings, "out": str(out)}
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    subprocess.run([sys.executable, __file__, "--child", json.dumps(config)], check=True,
                   env=env, cwd=ROOT)
    return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default="fast")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--workers", default="auto")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return 0
    with served_site(args.pages) as (tmp, start_url):
        plain_settings = {"ITEM_PIPELINES": {}}
        grownup_settings = {"ADDONS": {"scrapy_grownup.Addon": 500},
                            "GROWNUP_MODEL": args.model, "GROWNUP_DEVICE": args.device,
                            "GROWNUP_WORKERS": args.workers}
        plain, grownup = [], []
        for _ in range(args.repeat):  # interleaved, so load changes hit both alike
            plain.append(crawl(tmp, start_url, plain_settings))
            grownup.append(crawl(tmp, start_url, grownup_settings))
    plain_rate = statistics.median(r["pages"] / r["seconds"] for r in plain)
    grownup_rate = statistics.median(r["pages"] / r["seconds"] for r in grownup)

    def cpu_ms_per_page(runs):
        return round(statistics.median(1000 * r["cpu_seconds"] / r["pages"] for r in runs), 2)
    print(json.dumps({
        "benchmark": "crawl", "pages": args.pages + 1, "repeat": args.repeat,
        "model": args.model, "device": args.device, "workers": args.workers,
        "plain_pages_per_s": round(plain_rate, 1),
        "grownup_pages_per_s": round(grownup_rate, 1),
        "slowdown": round(plain_rate / grownup_rate, 2),
        # the crawl's own process (reactor and its threads), CPU ms per page, spider open to close
        "plain_cpu_ms_per_page": cpu_ms_per_page(plain),
        "grownup_cpu_ms_per_page": cpu_ms_per_page(grownup),
        "items": grownup[-1]["items"],
        "batch_size_mean": grownup[-1]["batch_size_mean"],
        "model_ms_per_page": grownup[-1]["model_ms_per_page"],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
