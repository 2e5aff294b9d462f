"""The article's text and mask (``output/assembly.py``): which path chose the article, and completed
data tables."""

import numpy as np

from scrapy_grownup.output.assembly import assemble_text
from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.decisions.refine import content_mask
from tests.page_support import prose_page, scored


def test_the_prose_fallback_comes_after_the_content_models_own_article():
    """Where the rescorer's trees keep nothing, the content model's article is next; the
    page's prose only where that keeps nothing too."""
    from types import SimpleNamespace

    from scrapy_grownup.output.assembly import model_article, rescored_article, rescored_article_mask

    page = parse_page(prose_page(3))
    trees = SimpleNamespace(rescore=lambda page, probs: np.full(page.num_nodes, 0.02),
                            decisions={"container": False, "band": 0.3,
                                       "cut_weight": "block-chars"},
                            feature_threshold=0.4)
    own = scored(page, default=0.03, Short=0.9)
    assert assemble_text(page, rescored_article_mask(page, own, trees, 0.5)) == "Short line."
    nothing = scored(page, default=0.03)
    prose = assemble_text(page, rescored_article_mask(page, nothing, trees, 0.5))
    assert prose.startswith("Part 0:") and len(prose.splitlines()) == 3
    assert assemble_text(page, rescored_article_mask(page, nothing, trees, 0.5,
                                                     fallback=False)) == ""
    # and each article says which path chose it
    assert rescored_article(page, own, trees, 0.5).source == "content_model"
    assert rescored_article(page, nothing, trees, 0.5).source == "prose"
    assert rescored_article(page, nothing, trees, 0.5, fallback=False).source == "none"
    assert model_article(page, nothing, 0.5).source == "prose"
    assert model_article(page, own, 0.5).source == "content_model"
    kept = scored(page, default=0.9)
    assert rescored_article(page, kept, SimpleNamespace(**{**vars(trees), "rescore": lambda
                            page, probs: probs}), 0.5).source == "rescorer"


def test_the_article_mask_completes_a_data_table_the_decisions_kept_most_of():
    from scrapy_grownup.output.assembly import article_mask

    cells = [("Alpha", "Ten"), ("Bravo", "Eleven"), ("Charlie", "Twelve"), ("Delta", "Thirteen")]
    rows = "".join(f"<tr><td>{name} station</td><td>{rain} mm of rain fell overnight</td></tr>"
                   for name, rain in cells)
    page = parse_page(b"<html><body><article><p>" + b"Storm totals by station. " * 6
                      + b"</p><table><tr><th>Station</th><th>Rain</th></tr>"
                      + rows.encode() + b"</table></article></body></html>")
    sure = {word: 0.9 for word in ("Storm", "Alpha", "Ten", "Bravo", "Eleven", "Charlie",
                                   "Twelve")}
    probs = scored(page, default=0.0, **sure)
    by_decisions = assemble_text(page, content_mask(page, probs, 0.5, adaptive=False))
    kept = assemble_text(page, article_mask(page, probs, 0.5, adaptive=False))
    assert "Twelve mm" in by_decisions and "Thirteen" not in by_decisions
    assert "Rain" not in by_decisions
    assert "Thirteen mm of rain" in kept and "Rain" in kept and "Delta station" in kept
    alone = scored(page, default=0.0, Storm=0.9)  # nothing to complete: the decisions' mask
    np.testing.assert_array_equal(article_mask(page, alone, 0.5, adaptive=False),
                                  content_mask(page, alone, 0.5, adaptive=False))
