"""Layout features (``graph/layout.py``) and which models read them."""

import numpy as np

from scrapy_grownup.page.dom import parse_page


def _node(page, tag, nth=0):
    return [i for i, t in enumerate(page.tags) if t == tag][nth]


# ------------------------------------------------------------------------------------------
# Layout features


def test_layout_features_measure_link_density_landmarks_and_position():
    from scrapy_grownup.graph.layout import LAYOUT_BLOCKS, LAYOUT_DIM, layout_column, layout_features

    page = parse_page(
        b"<html><body><nav role=navigation><ul><li><a href=/a>Home page link</a></li></ul></nav>"
        b"<main><article><div itemprop=articleBody><p>One sentence here. Another one!</p>"
        b"<p>Text with <a href=/x>a link</a> inside.</p></div></article></main>"
        b"<footer><p>(c) 2026</p></footer></body></html>")
    f = layout_features(page)
    assert f.shape == (page.num_nodes, LAYOUT_DIM) and f.dtype == np.float32
    col = {name: layout_column(name).start for name, _ in LAYOUT_BLOCKS}
    assert layout_column("landmark") == slice(9, 15) and layout_column("hidden").stop == LAYOUT_DIM
    nav, li = _node(page, "nav"), _node(page, "li")
    body_div, footer_p = _node(page, "div"), _node(page, "p", 2)
    assert f[li, col["link_density"]] == 1.0                  # all of its text is a link
    assert 0.0 < f[body_div, col["link_density"]] < 0.3       # "a link" of the article's text
    assert f[_node(page, "a", 1), col["in_link"]] == 1.0
    assert f[li, col["landmark"] + 0] == 1.0                  # inside <nav>
    assert f[li, col["aria_role"] + 0] == 1.0                 # role=navigation, inherited
    assert f[nav, col["article_body"]] == 0.0
    assert f[_node(page, "p", 0), col["article_body"]] == 1.0
    assert f[_node(page, "p", 0), col["main"] + 0] == 1.0     # inside <article>
    assert f[footer_p, col["landmark"] + 2] == 1.0            # inside <footer>
    assert f[footer_p, col["position"]] > f[_node(page, "p", 0), col["position"]]
    assert f[_node(page, "p", 0), col["sentences"]] > 0
    assert f[0, col["text_share"]] == 1.0                     # the root holds all the text
    assert np.isfinite(f).all() and f.min() >= 0.0


def test_old_models_keep_their_inputs_and_new_ones_read_layout():
    from scrapy_grownup.graph.featurizer import feature_blocks, uses_layout
    from scrapy_grownup.graph.layout import LAYOUT_DIM

    assert feature_blocks(256)[-1] == ("x_layout", LAYOUT_DIM) and uses_layout(feature_blocks(8))
    assert not uses_layout(feature_blocks(256, layout=False))
    assert len(feature_blocks(256, layout=False)) == len(feature_blocks(256)) - 1
