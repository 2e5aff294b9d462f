"""Featurization throughput on the Dragnet test pages, one core; prints one JSON line.

    python benchmarks/featurize.py [--minilm-pages 60]

Stages: structure + Laplacian (parse_page), full features with the ``static`` encoder (as
``Data`` graphs, and in the extractor's batch form), full features with ``minilm`` (a subset, it is ~100x slower), encoder cache hit rates, and trafilatura's
extraction speed on the same pages as a reference point.
"""

from __future__ import annotations

import argparse
import json
import time

from _common import dragnet_test_pages, pin_single_core

pin_single_core()


def timed(fn, pages):
    start = time.perf_counter()
    for _, body in pages:
        fn(body)
    return len(pages) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=None, help="limit the page count")
    parser.add_argument("--minilm-pages", type=int, default=60)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.graph.featurizer import Featurizer

    pages = dragnet_test_pages(args.pages)
    parse_page(pages[0][1])  # warm imports (scipy) outside the timing
    result = {"benchmark": "featurize", "pages": len(pages)}
    result["structure_pages_per_s"] = round(timed(parse_page, pages), 2)
    result["mean_nodes"] = round(sum(parse_page(b, positions=False).num_nodes
                                     for _, b in pages) / len(pages), 1)

    for name, subset in (("static", pages), ("minilm", pages[: args.minilm_pages])):
        featurizer = Featurizer(name)
        featurizer.featurize(pages[0][1])
        featurizer.encoder.clear_cache()
        result[f"{name}_pages"] = len(subset)
        result[f"{name}_pages_per_s"] = round(timed(featurizer.featurize, subset), 2)
        result[f"{name}_cache_hit_rate"] = round(featurizer.encoder.cache_info().hit_rate, 3)
        if name == "static":  # the inference form the extractor builds (Featurizer.batch)
            featurizer.encoder.clear_cache()
            result["static_batch_pages_per_s"] = round(timed(
                lambda body: featurizer.batch([featurizer.structure(body)]), subset), 2)

    try:
        import trafilatura
    except ImportError:
        pass
    else:
        trafilatura.extract(pages[0][1])
        result["trafilatura_extract_pages_per_s"] = round(timed(trafilatura.extract, pages), 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
