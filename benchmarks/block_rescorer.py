"""Time of ``fast``'s block rescorer per parsed page: the block features, the trees, and the
whole ``rescore`` (features, trees on the blocks scored at least ``FLOOR``, spread back to the
nodes), next to the content model's own time on the same pages (what every extraction pays
anyway). One core; prints one JSON line.

    python benchmarks/block_rescorer.py [PAGES]
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import best_ms, dragnet_test_pages, pin_single_core  # noqa: E402

from scrapy_grownup import ArticleExtractor  # noqa: E402
from scrapy_grownup.decisions.rescorer import block_features  # noqa: E402
from scrapy_grownup.page.dom import parse_page  # noqa: E402


def main() -> None:
    pin_single_core()
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    extractor = ArticleExtractor.from_pretrained("fast", device="cpu")
    rescorer = extractor.rescorer
    pages = [parse_page(html) for _id, html in dragnet_test_pages(limit)]
    scored = list(zip(pages, extractor.score(pages)))
    features = [block_features(page, probs, rescorer.feature_threshold) for page, probs in scored]
    judged = [X[X[:, 0] >= rescorer.floor] for _roots, X in features]
    out = {"benchmark": "block_rescorer", "pages": len(pages),
           "trees": rescorer.num_trees, "depth": rescorer.trees.depth,
           "mean_blocks": round(sum(len(X) for _r, X in features) / len(pages), 1),
           "mean_blocks_judged": round(sum(len(X) for X in judged) / len(pages), 1),
           "ms_per_page": {
               "block_features": best_ms(
                   lambda sp: block_features(sp[0], sp[1], rescorer.feature_threshold), scored),
               "trees": best_ms(rescorer.predict, judged),
               "rescore": best_ms(lambda sp: rescorer.rescore(*sp), scored),
               "content_model": best_ms(lambda page: extractor.score([page]), pages, 1)}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
