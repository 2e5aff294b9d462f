"""Time of ``fast``'s page-type classifier per parsed page (text and URL vectors, signals,
the linear scores, the stacked trees), next to the content model's own time on the same pages
(which computes the pooled inputs the classifier reads). One core; prints one JSON line.

    python benchmarks/page_type.py [--pages N] [--model DIR]   # default: 200 pages, fast
"""
import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import best_ms, dragnet_test_pages, pin_single_core  # noqa: E402

from scrapy_grownup import ArticleExtractor  # noqa: E402
from scrapy_grownup.page.dom import parse_page  # noqa: E402
from scrapy_grownup.extractor import page_type_probabilities  # noqa: E402


def main() -> None:
    pin_single_core()
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--model", default="fast", help="a shipped name or a model directory")
    args = parser.parse_args()
    limit = args.pages
    extractor = ArticleExtractor.from_pretrained(args.model, device="cpu")
    classifier = extractor.page_type
    if classifier is None:
        raise SystemExit(f"{args.model} has no page-type classifier")
    pages = [parse_page(html) for _id, html in dragnet_test_pages(limit)]
    outputs = [extractor.predict([page]) for page in pages]
    for page in pages:
        page.signals  # computed once per page, shared with the rescorer: not counted here
    out = {"benchmark": "page_type", "model": args.model, "pages": len(pages),
           "text_terms": len(classifier.text), "url_terms": len(classifier.url),
           "stacked_trees": 0 if classifier.stack is None else classifier.stack.num_trees,
           "ms_per_page": {
               "classifier": best_ms(lambda po: page_type_probabilities(classifier, [po[0]],
                                                                        po[1]),
                                     list(zip(pages, outputs))),
               "content_model": best_ms(lambda page: extractor.predict([page]), pages, 1)}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
