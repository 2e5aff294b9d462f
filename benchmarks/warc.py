"""WARC spider throughput and memory on a large synthetic WARC; prints one JSON line.

    python benchmarks/warc.py [--pages 4000] [--workers 1] [--keep DIR]

The WARC is built from real pages of the shared datasets (Dragnet and the page-type set,
shuffled, cycled under new URLs on 300 sites), each page with the records a crawl interleaves:
its request, a redirect (request + response), a CSS response (request + response) and a
revisit, so 7 records per page. Two stages, each in its own process while this one samples the
resident memory of that process and its children (the featurization workers) every 0.2 s:

- ``read``: ``RecordReader`` only (records/s, MB/s of the gzip file);
- ``featurize``: the whole spider, as ``grownup warc FILE --output DIR`` runs it (static
  encoder, shards of 256 pages, pairs and manifest at the end): pages/s and records/s.

Memory must stay flat: the report gives the peak and the median resident set of each quarter
of the run. The figures are per ``--workers`` featurization processes plus the main one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import pin_single_core  # noqa: E402

pin_single_core()


def build(path: Path, pages: int) -> dict:
    from scrapy_grownup.warc.synthetic import dataset_pages, write_warc

    import random

    source = dataset_pages(None, names=("dragnet", "pagetype"))
    random.Random(0).shuffle(source)  # the same mix of old and modern pages all along

    def records():
        for i in range(pages):
            _, html = source[i % len(source)]
            site = f"site{i % 300}.example"
            yield f"http://{site}/section{(i // 300) % 7}/story-{i}.html", html, "text/html"

    start = time.perf_counter()
    write_warc(path, records(), noise=True)
    return {"unique_pages": len(source), "warc_bytes": path.stat().st_size,
            "build_seconds": round(time.perf_counter() - start, 1)}


def stage_read(path: str) -> dict:
    from scrapy_grownup.warc.reader import Candidate, RecordReader
    from scrapy_grownup.warc.sources import Source

    start = time.perf_counter()
    reader = RecordReader(Source(path))
    candidates = sum(1 for event in reader if isinstance(event, Candidate))
    seconds = time.perf_counter() - start
    return {"records": reader.records, "html_records": candidates, "seconds": seconds}


def stage_featurize(path: str, out: str, workers: int) -> dict:
    from scrapy.crawler import CrawlerProcess

    from scrapy_grownup.warc.spider import WarcSpider

    process = CrawlerProcess({
        "LOG_LEVEL": "WARNING",
        "REMOTE_CONTROL_ENABLED": False, "GROWNUP_WORKERS": workers,
        "GROWNUP_WARC_LOG_EVERY": 0,
    })
    crawler = process.create_crawler(WarcSpider)
    process.crawl(crawler, paths=path, output=out)
    process.start()
    stats = crawler.stats.get_stats()
    return {"records": stats.get("grownup/warc/records", 0),
            "pages": stats.get("grownup/warc/pages", 0),
            "pairs": stats.get("grownup/warc/corpus/pairs", 0),
            "shards": stats.get("grownup/warc/corpus/shards", 0),
            "seconds": stats["elapsed_time_seconds"]}


def measure(args: list[str]) -> tuple[dict, dict]:
    """Run a stage in a child process; sample the RSS of it and its children."""
    import psutil

    child = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE,
                             text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    samples: list[tuple[float, float]] = []
    start = time.monotonic()

    def sample() -> None:
        proc = psutil.Process(child.pid)
        while child.poll() is None:
            try:
                rss = proc.memory_info().rss + sum(
                    c.memory_info().rss for c in proc.children(recursive=True))
            except psutil.Error:
                break
            samples.append((time.monotonic() - start, rss / 2**20))
            time.sleep(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    output, _ = child.communicate()
    thread.join()
    if child.returncode != 0:
        raise SystemExit(f"stage {args[0]} failed with exit code {child.returncode}")
    result = json.loads(output.strip().splitlines()[-1])
    return result, memory_profile(samples)


def memory_profile(samples: list[tuple[float, float]]) -> dict:
    import statistics

    if not samples:
        return {}
    end = samples[-1][0] or 1.0
    quarters = []
    for q in range(4):
        part = [mb for t, mb in samples if q * end / 4 <= t <= (q + 1) * end / 4]
        quarters.append(round(statistics.median(part), 1) if part else None)
    return {"peak_rss_mb": round(max(mb for _, mb in samples), 1),
            "rss_mb_by_quarter": quarters, "samples": len(samples)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=4000, help="HTML pages in the WARC")
    parser.add_argument("--workers", type=int, default=1, help="featurization processes")
    parser.add_argument("--keep", default=None, help="build the WARC here and keep it")
    parser.add_argument("--stage", choices=["read", "featurize"], help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage == "read":
        print(json.dumps(stage_read(args.rest[0])))
        return
    if args.stage == "featurize":
        print(json.dumps(stage_featurize(args.rest[0], args.rest[1], int(args.rest[2]))))
        return

    with tempfile.TemporaryDirectory(prefix="grownup-warc-bench-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        warc = base / "synthetic.warc.gz"
        result: dict = {"benchmark": "warc", "pages": args.pages, "workers": args.workers}
        if not warc.exists():
            result.update(build(warc, args.pages))
        read, read_memory = measure(["--stage", "read", str(warc)])
        result["records"] = read["records"]
        result["read_records_per_s"] = round(read["records"] / read["seconds"], 1)
        result["read_mb_per_s"] = round(warc.stat().st_size / 2**20 / read["seconds"], 2)
        result["read_memory"] = read_memory
        out = base / "corpus"
        featurized, memory = measure(["--stage", "featurize", str(warc), str(out),
                                      str(args.workers)])
        result["featurize_pages"] = featurized["pages"]
        result["featurize_seconds"] = round(featurized["seconds"], 1)
        result["featurize_pages_per_s"] = round(featurized["pages"] / featurized["seconds"], 2)
        result["featurize_records_per_s"] = round(featurized["records"] /
                                                  featurized["seconds"], 1)
        result["pairs"], result["shards"] = featurized["pairs"], featurized["shards"]
        result["corpus_mb"] = round(sum(p.stat().st_size for p in out.rglob("*")
                                        if p.is_file()) / 2**20, 1)
        result["featurize_memory"] = memory
        print(json.dumps(result))


if __name__ == "__main__":
    main()
