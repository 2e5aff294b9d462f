"""End-to-end extraction speed on the Dragnet test pages, one core; prints one JSON line.

    python benchmarks/extract.py [--models fast default] [--pages N] [--device cuda] [--markdown]

Shipped models (bytes -> Article, batched; by default ``fast`` on a CPU, every shipped model on a
GPU: MiniLM embeds only a few pages a second on one core, so ask for ``default`` with a small
``--pages`` there) next to trafilatura on the same pages in the same run. Each model starts with
an empty encoder cache, so MiniLM's figure includes embedding every string once. ``Article.markdown`` is built when first read; ``--markdown`` reads it for every page
(as ``output_format="markdown"`` or a Scrapy item would), so its cost is in the figure.
"""

from __future__ import annotations

import argparse
import json
import time

from _common import dragnet_test_pages, pin_single_core

pin_single_core()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="*", default=None)
    parser.add_argument("--pages", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-pages", type=int, default=32)
    parser.add_argument("--markdown", action="store_true", help="read every Article.markdown")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.extractor import shipped_models

    pages = dragnet_test_pages(args.pages)
    result = {"benchmark": "extract", "pages": len(pages), "device": args.device}
    if args.markdown:
        result["markdown"] = True
    default_models = shipped_models() if args.device.startswith("cuda") else ["fast"]
    for name in args.models or default_models:
        extractor = ArticleExtractor.from_pretrained(name, device=args.device)
        extractor.extract(pages[0][1])
        extractor.featurizer.encoder.clear_cache()
        start = time.perf_counter()
        for i in range(0, len(pages), args.batch_pages):
            chunk = pages[i:i + args.batch_pages]
            articles = extractor.extract_batch([(body, pid) for pid, body in chunk],
                                               errors="skip")
            if args.markdown:
                for article in articles:
                    if article is not None:
                        _ = article.markdown
        result[f"{name}_pages_per_s"] = round(len(pages) / (time.perf_counter() - start), 2)
    try:
        import trafilatura
    except ImportError:
        pass
    else:
        trafilatura.extract(pages[0][1])
        start = time.perf_counter()
        for _, body in pages:
            trafilatura.extract(body)
        result["trafilatura_pages_per_s"] = round(len(pages) / (time.perf_counter() - start), 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
