"""Repetition features (``graph/repetition.py``): cards in a list, which models read them, stores
that keep them."""

import numpy as np
import pytest

from scrapy_grownup.page.dom import parse_page


def _node(page, tag, nth=0):
    return [i for i, t in enumerate(page.tags) if t == tag][nth]


# ------------------------------------------------------------------------------------------
# Repeated-structure features


_CARDS = b"".join(b'<div class="card"><h3>Story number %d</h3><p>Teaser text of story %d.</p>'
                  b"</div>" % (i, i) for i in range(8))


REPEAT_PAGE = (b"<html><body><nav><a href=/>Home</a></nav><main><article><h1>Headline</h1>"
               b"<p>A paragraph of real article text, long enough to count.</p>"
               b"<p>Another paragraph of article text, also long enough.</p></article>"
               b'<section class="related">' + _CARDS + b"</section>"
               b'<div class="solo"><p>One box that is alike to nothing else here.</p></div>'
               b"</main></body></html>")


def test_repetition_features_tell_cards_their_list_and_their_share():
    from scrapy_grownup.graph.repetition import REPETITION_BLOCKS, REPETITION_DIM, repetition_features

    page = parse_page(REPEAT_PAGE)
    f = repetition_features(page)
    assert f.shape == (page.num_nodes, REPETITION_DIM) and f.dtype == np.float32
    col = {name: k for k, (name, _) in enumerate(REPETITION_BLOCKS)}
    card, section = _node(page, "div", 0), _node(page, "section")
    heading, solo = _node(page, "h3", 0), _node(page, "div", 8)
    first_p = _node(page, "p", 0)
    assert page.class_words[card] == "card" and page.class_words[solo] == "solo"
    assert f[card, col["group_size"]] == pytest.approx(np.log(8) / np.log(64))
    assert f[first_p, col["group_size"]] == pytest.approx(np.log(2) / np.log(64))  # two <p>
    assert f[solo, col["group_size"]] == 0.0                  # one of a kind
    assert f[section, col["largest_child_group"]] == f[card, col["group_size"]]
    assert f[section, col["group_size"]] == 0.0 and f[section, col["inside_group"]] == 0.0
    assert f[heading, col["inside_group"]] == f[card, col["group_size"]]  # inside a card
    assert f[card, col["inside_group"]] == 0.0
    # the eight cards hold most of the page's text; the heading inherits its card's share
    share = f[card, col["group_text_share"]]
    assert 0.5 < share < 1.0 and f[heading, col["group_text_share"]] == share
    assert f[solo, col["group_text_share"]] == 0.0
    assert f[0].tolist() == [0.0, 0.0, 0.0, 0.0]              # the root is in no group
    assert np.isfinite(f).all() and f.min() >= 0.0 and f.max() <= 1.0
    # many alike siblings saturate at 1
    many = b"<ul>" + b"".join(b"<li>List item number %d here</li>" % i for i in range(100))
    g = repetition_features(parse_page(b"<html><body>" + many + b"</ul></body></html>"))
    assert g[:, col["group_size"]].max() == 1.0


def test_repetition_features_of_pages_without_groups():
    from scrapy_grownup.graph.repetition import REPETITION_DIM, repetition_features

    for html in (b"<html><body></body></html>", b"<html><body><p>short</p></body></html>"):
        f = repetition_features(parse_page(html))
        assert f.shape[1] == REPETITION_DIM and not f.any()


def test_models_read_repetition_only_when_trained_with_it(tmp_path):
    import torch

    from scrapy_grownup.extractor import ArticleExtractor
    from scrapy_grownup.graph.featurizer import Featurizer, feature_blocks, uses_repetition
    from scrapy_grownup.model import GrownUpModel, ModelConfig
    from scrapy_grownup.graph.repetition import REPETITION_DIM

    assert feature_blocks(8, repetition=True)[-1] == ("x_repeat", REPETITION_DIM)
    assert not uses_repetition(feature_blocks(8)) and uses_repetition(feature_blocks(8, True, True))
    page = parse_page(REPEAT_PAGE)
    plain, reading = Featurizer("static"), Featurizer("static", repetition=True)
    assert not hasattr(plain.batch([page]), "x_repeat")
    batch, graph = reading.batch([page]), reading.graphs([page])[0]
    assert torch.equal(batch.x_repeat, torch.from_numpy(page.repetition))
    assert torch.equal(graph.x_repeat, batch.x_repeat)
    # a model trained with the block: the loaded extractor computes it (here and in a crawl's
    # workers) and its scores move with it
    config = ModelConfig.preset("tiny", encoder="static", text_dim=reading.encoder.dim,
                                input_blocks=reading.blocks)
    torch.manual_seed(0)
    GrownUpModel(config).save_pretrained(tmp_path / "m")
    extractor = ArticleExtractor.from_pretrained(tmp_path / "m", device="cpu")
    assert extractor.featurizer.repetition and "repetition" in extractor.page_features
    model = extractor.model.eval()
    with torch.no_grad():
        scores = model(reading.batch([page])).node_logits
        batch = reading.batch([page])
        batch.x_repeat = torch.zeros_like(batch.x_repeat)
        assert not torch.equal(model(batch).node_logits, scores)
    assert "repetition" not in ArticleExtractor.from_pretrained("fast").page_features


def test_stores_keep_the_repetition_block_and_old_stores_still_load(tmp_path):
    import torch

    from scrapy_grownup.encoders import get_encoder
    from scrapy_grownup.data.store import GraphStore

    page = parse_page(REPEAT_PAGE)
    store = GraphStore.build([page, page], get_encoder("static"), ids=["a", "b"])
    batch = store.collate([0, 1])
    assert torch.equal(batch.x_repeat[:page.num_nodes],
                       torch.from_numpy(page.repetition).to(torch.float16).float())
    # a store written before the block: its batches lack it, the other blocks are unchanged
    del store.arrays["repeat"]
    old = GraphStore.load(store.save(tmp_path / "old.safetensors"))
    assert "repeat" not in old.fields and "layout" in old.fields
    assert not hasattr(old.collate([0]), "x_repeat")
    assert "repeat" not in GraphStore.concat([old, GraphStore.build(
        [page], get_encoder("static"), ids=["c"])]).fields
