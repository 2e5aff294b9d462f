"""End-to-end extraction speed on the Dragnet test pages; prints one JSON line per thread count.

    python benchmarks/extract.py [--models fast default] [--pages N] [--device cuda] [--markdown]
    python benchmarks/extract.py --busy [--pages N]      # a CPU burner on another core
    python benchmarks/extract.py --models fast OLD_DIR --rounds 3   # interleaved, best of 3

Shipped models (bytes -> Article, batched; by default ``fast`` on a CPU, every shipped model on a
GPU: MiniLM embeds only a few pages a second on one core, so ask for ``default`` with a small
``--pages`` there) next to trafilatura on the same pages in the same run. Each model starts with
an empty encoder cache, so MiniLM's figure includes embedding every string once.
``Article.markdown`` is built when first read; ``--markdown`` reads it for every page (as
``output_format="markdown"`` or a Scrapy item would), so its cost is in the figure.

``--threads 1 2`` measures the extractor with each torch intra-op thread count (its ``threads=``
option; default 1). ``--busy`` starts a CPU burner process (a Python busy loop) on one core for
the measurement, as a crawl or any other job would, and compares ``threads=1`` (the default) with
torch's own default of one thread per core (the extractor's behaviour before it set one thread):
with the other core taken, torch's threads wait for each other and throughput collapsed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time

from _common import dragnet_test_pages, pin_single_core

pin_single_core()


def burn() -> None:  # pragma: no cover - runs in the burner process until it is terminated
    while True:
        pass


def cores() -> int:
    """Torch's default intra-op thread count: one per core this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="*", default=None)
    parser.add_argument("--pages", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-pages", type=int, default=32)
    parser.add_argument("--markdown", action="store_true", help="read every Article.markdown")
    parser.add_argument("--threads", type=int, nargs="*", default=None,
                        help="torch threads of the extractor, one line each (default: 1; "
                             "with --busy: 1 and one per core)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every model and trafilatura this many times, interleaved "
                             "(a loaded machine: the best round is the figure, all are printed)")
    parser.add_argument("--busy", action="store_true",
                        help="run a CPU burner process on another core while measuring")
    args = parser.parse_args()

    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.extractor import shipped_models

    thread_counts = args.threads or ([1, cores()] if args.busy else [1])
    pages = dragnet_test_pages(args.pages)
    default_models = shipped_models() if args.device.startswith("cuda") else ["fast"]
    extractors = {}
    for name in args.models or default_models:
        extractors[name] = ArticleExtractor.from_pretrained(name, device=args.device)
        extractors[name].extract(pages[0][1])  # imports and first-call set-up, not measured

    burner = None
    if args.busy:
        burner = multiprocessing.get_context("spawn").Process(target=burn, daemon=True)
        burner.start()
        time.sleep(0.5)
    try:
        for threads in thread_counts:
            result = {"benchmark": "extract", "pages": len(pages), "device": args.device,
                      "threads": threads, "busy": args.busy, "cores": cores()}
            if args.markdown:
                result["markdown"] = True
            speeds: dict[str, list[float]] = {}
            for _round in range(args.rounds):  # models and trafilatura interleaved per round
                for name, extractor in extractors.items():
                    extractor.threads = threads
                    extractor.featurizer.encoder.clear_cache()
                    start = time.perf_counter()
                    for i in range(0, len(pages), args.batch_pages):
                        chunk = pages[i:i + args.batch_pages]
                        articles = extractor.extract_batch(
                            [(body, pid) for pid, body in chunk], errors="skip")
                        if args.markdown:
                            for article in articles:
                                if article is not None:
                                    _ = article.markdown
                    speeds.setdefault(name, []).append(
                        round(len(pages) / (time.perf_counter() - start), 2))
                if threads == thread_counts[0] and not args.busy:
                    speed = trafilatura_speed(pages)
                    if speed is not None:
                        speeds.setdefault("trafilatura", []).append(speed)
            for name, values in speeds.items():
                result[f"{name}_pages_per_s"] = max(values)  # the least disturbed round
                if args.rounds > 1:
                    result[f"{name}_rounds"] = values
            print(json.dumps(result), flush=True)
    finally:
        if burner is not None:
            burner.terminate()
            burner.join()


def trafilatura_speed(pages) -> float | None:
    """trafilatura's pages/s on ``pages`` (None where it is not installed)."""
    try:
        import trafilatura
    except ImportError:
        return None
    trafilatura.extract(pages[0][1])
    start = time.perf_counter()
    for _, body in pages:
        trafilatura.extract(body)
    return round(len(pages) / (time.perf_counter() - start), 2)


if __name__ == "__main__":
    main()
