"""Feature groups of the DOM graph on small hand-written pages, with exact expected values."""

import numpy as np
import pytest

from scrapy_grownup.page.dom import (
    NUM_CHILD_POSITIONS, SEP_BLOCK, SEP_NONE, SEP_SPACE, STRUCT_BLOCKS, STRUCT_DIM, parse_page,
    tree_edges,
)
from scrapy_grownup.page.fonts import SIZE_INDEX, S_ITALIC, S_NORMAL, S_UNKNOWN, W_BOLD, W_NORMAL, \
    W_UNKNOWN
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.page.tags import OTHER_TAG, TAG_INDEX, TAGS


def page(html, **kw):
    return parse_page(html.encode("utf-8"), positions=False, **kw)


def node(p, tag, nth=0):
    return [i for i, t in enumerate(p.tags) if t == tag][nth]


def test_nodes_in_document_order_with_removed_elements():
    p = page("<html><head><title>T</title><meta charset=utf-8><script>var x;</script></head>"
             "<body><!-- c --><div id=a><p>one</p><noscript>no</noscript>tail</div></body></html>")
    assert p.tags == ["html", "head", "title", "body", "div", "p"]
    assert p.parent.tolist() == [-1, 0, 1, 0, 3, 4]
    assert p.depth.tolist() == [0, 1, 2, 1, 2, 3]
    assert p.node_text[node(p, "div")] == "tail"  # the removed noscript's tail stays
    assert "var" not in " ".join(p.seg_text) and "no" not in p.seg_text


def test_tag_ids_fixed_vocabulary():
    assert len(TAGS) == 83 and TAGS[:3] == ("a", "div", "p") and TAGS[-1] == "del"
    p = page("<html><body><div><p><a>x</a></p><my-widget>y</my-widget><article>z</article>"
             "</div></body></html>")
    assert p.tag_ids.tolist() == [TAG_INDEX["html"], TAG_INDEX["body"], 1, 2, 0, OTHER_TAG,
                                  TAG_INDEX["article"]]
    assert TAG_INDEX["html"] == 6 and TAG_INDEX["article"] == 45 and OTHER_TAG == 83


@pytest.mark.parametrize("html,expected", [
    ("<b>x</b>", (W_BOLD, S_UNKNOWN, SIZE_INDEX["unknown"])),
    ("<strong>x</strong>", (W_BOLD, S_UNKNOWN, SIZE_INDEX["unknown"])),
    ("<i>x</i>", (W_UNKNOWN, S_ITALIC, SIZE_INDEX["unknown"])),
    ("<em>x</em>", (W_UNKNOWN, S_ITALIC, SIZE_INDEX["unknown"])),
    ("<h1>x</h1>", (W_BOLD, S_UNKNOWN, SIZE_INDEX["xx-large"])),
    ("<h3>x</h3>", (W_BOLD, S_UNKNOWN, SIZE_INDEX["large"])),
    ("<big>x</big>", (W_UNKNOWN, S_UNKNOWN, SIZE_INDEX["larger"])),
    ("<small>x</small>", (W_UNKNOWN, S_UNKNOWN, SIZE_INDEX["smaller"])),
    ('<font size="5">x</font>', (W_UNKNOWN, S_UNKNOWN, SIZE_INDEX["x-large"])),
    ('<font size="-1">x</font>', (W_UNKNOWN, S_UNKNOWN, SIZE_INDEX["smaller"])),
    ('<span style="font-weight: 700; font-style: italic; font-size: 18px">x</span>',
     (W_BOLD, S_ITALIC, SIZE_INDEX["large"])),
    ('<span style="FONT-WEIGHT:normal;font-style:oblique;font-size:12pt">x</span>',
     (W_NORMAL, 2, SIZE_INDEX["medium"])),  # 12pt = 16px, in the medium band (<=17px)
    ('<span style="font: italic bold 12px/30px Georgia, serif">x</span>',
     (W_BOLD, S_ITALIC, SIZE_INDEX["small"])),
    ('<span style="font-size: 1.5em">x</span>', (W_UNKNOWN, S_UNKNOWN, SIZE_INDEX["larger"])),
    ('<span style="font-size: 80%">x</span>', (W_UNKNOWN, S_UNKNOWN, SIZE_INDEX["smaller"])),
    ('<b style="font-weight: 400; font-style: normal">x</b>', (W_NORMAL, S_NORMAL,
                                                               SIZE_INDEX["unknown"])),
    ('<span style="font-size: x-small">x</span>', (W_UNKNOWN, S_UNKNOWN, SIZE_INDEX["x-small"])),
    ('<span style="color: red">x</span>', (W_UNKNOWN, S_UNKNOWN, SIZE_INDEX["unknown"])),
])
def test_font_buckets(html, expected):
    p = page(f"<html><body>{html}</body></html>")
    assert tuple(p.font[2].tolist()) == expected


def test_child_index_and_counts():
    items = "".join(f"<li>{i}</li>" for i in range(35))
    p = page(f"<html><body><ul>{items}</ul><p>after</p></body></html>")
    ul = node(p, "ul")
    lis = [i for i, t in enumerate(p.tags) if t == "li"]
    assert p.num_children[ul] == 35
    assert p.child_index[lis].tolist() == list(range(35))
    assert p.child_index[node(p, "p")] == 1
    feats = p.struct_features()
    offset = STRUCT_DIM - NUM_CHILD_POSITIONS
    onehot = feats[lis, offset:]
    assert onehot.sum(axis=1).tolist() == [1.0] * 35
    assert onehot[:31].argmax(axis=1).tolist() == list(range(31))
    assert onehot[31:].argmax(axis=1).tolist() == [31] * 4  # >30 share the catch-all


def test_class_and_id_words():
    p = page('<html><body><div class="post-content entryBody_2 clearfix" id="mainNav3">x</div>'
             '<div class="">y</div></body></html>')
    d = node(p, "div")
    assert p.class_words[d] == "post content entry body clearfix"
    assert p.id_words[d] == "main nav"
    assert p.class_words[d + 1] == "" and p.id_words[d + 1] == ""


def test_own_text_segments_and_separators():
    p = page("<html><body><p>Hello <b>wor</b>ld again</p><div>Next<br>line</div></body></html>")
    assert p.seg_text == ["Hello", "wor", "ld again", "Next", "line"]
    assert p.seg_sep.tolist() == [SEP_BLOCK, SEP_SPACE, SEP_NONE, SEP_BLOCK, SEP_BLOCK]
    para, bold = node(p, "p"), node(p, "b")
    assert p.node_text[para] == "Hello ld again"
    assert p.node_text[bold] == "wor"
    assert [p.seg_owner[i] for i in range(3)] == [para, bold, para]


def test_style_text_is_not_page_text():
    p = page("<html><head><style>body{color:red}</style></head><body>x</body></html>")
    assert p.node_text[node(p, "style")] == ""
    assert p.seg_text == ["x"]


def test_a_form_fields_value_is_not_page_text():
    """A forum's "edit post" box holds the post again as raw HTML source: a ``<textarea>``
    stays a node, its value is not text, the text around it is."""
    p = page("<html><body><p>The post, as readers see it.</p><form>"
             "<textarea name=post_content>&lt;p&gt;The post, as readers see it.&lt;/p&gt;"
             "</textarea>Reply below</form></body></html>")
    assert p.node_text[node(p, "textarea")] == ""
    assert p.seg_text == ["The post, as readers see it.", "Reply below"]
    # an editable code block: the <pre>'s whitespace-kept text is its lines, not the editor's
    code = page("<html><body><pre><code><textarea>x = 2\ny = 3</textarea>"
                "<span class=line>x = 1</span>\n<span class=line>y = 2</span></code></pre>"
                "</body></html>")
    assert code.raw_text[node(code, "pre")] == "x = 1\ny = 2"
    # read without recursion: a <pre> nesting 1,500 elements parses
    deep = page("<html><body><pre>" + "<span>x" * 1500 + "</span>" * 1500 + "</pre></body></html>")
    assert deep.raw_text[node(deep, "pre")] == "x" * 1500


def test_locator_is_positional_xpath():
    p = page("<html><body><div><p>a</p><p>b</p></div><div><span>c</span></div></body></html>")
    assert p.locator == ["/html", "/html/body[1]", "/html/body[1]/div[1]",
                         "/html/body[1]/div[1]/p[1]", "/html/body[1]/div[1]/p[2]",
                         "/html/body[1]/div[2]", "/html/body[1]/div[2]/span[1]"]
    from lxml import html as lh
    tree = lh.fromstring("<html><body><div><p>a</p><p>b</p></div><div><span>c</span></div>"
                         "</body></html>")
    assert tree.xpath(p.locator[4])[0].text == "b"


def test_edges_three_types():
    edge_index, edge_type = tree_edges(np.array([-1, 0, 0, 1], dtype=np.int32))
    pairs = {(int(s), int(d), int(t)) for s, d, t in zip(*edge_index, edge_type)}
    assert pairs == {(0, 1, 0), (0, 2, 0), (1, 3, 0),  # parent -> child
                     (1, 0, 1), (2, 0, 1), (3, 1, 1),  # child -> parent
                     (0, 0, 2), (1, 1, 2), (2, 2, 2), (3, 3, 2)}


def test_struct_feature_blocks():
    p = page('<html><body><h2 style="font-style:italic">Title here</h2></body></html>')
    feats = p.struct_features()
    assert feats.shape == (3, STRUCT_DIM) == (3, 135)
    assert [name for name, _ in STRUCT_BLOCKS] == ["tag", "font_weight", "font_style",
                                                   "font_size", "text_length", "num_children",
                                                   "child_index"]
    h2 = feats[2]
    assert h2[TAG_INDEX["h2"]] == 1 and h2[:84].sum() == 1
    assert h2[84 + W_BOLD] == 1 and h2[87 + S_ITALIC] == 1 and h2[91 + SIZE_INDEX["x-large"]] == 1
    assert h2[101] == pytest.approx(np.log1p(len("Title here")) / 8)
    assert h2[102] == 0.0  # no children
    assert feats[0, 102] == pytest.approx(np.log1p(1) / 4)


def test_title_lang_and_metadata_are_collected():
    p = page('<html lang="en"><head><title> My  page </title>'
             '<meta property="og:title" content="OG"><script type="application/ld+json">'
             '{"@type": "NewsArticle"}</script></head><body>x</body></html>')
    assert p.title == "My page" and p.lang == "en"
    assert p.meta["og:title"] == "OG" and "NewsArticle" in p.json_ld[0]


def test_caps_truncate_and_flag():
    deep = "<div>" * 300 + "deep" + "</div>" * 300
    p = page(f"<html><body>{deep}</body></html>", limits=PageLimits(max_depth=50))
    assert p.truncated == ["depth"] and p.depth.max() == 49
    assert "deep" in p.seg_text  # folded into the ancestor at the cap
    many = "".join(f"<p>{i}</p>" for i in range(500))
    p = page(f"<html><body>{many}</body></html>", limits=PageLimits(max_nodes=100))
    assert p.num_nodes == 100 and "nodes" in p.truncated
    p = page(f"<html><body>{many}</body></html>", limits=PageLimits(max_bytes=200))
    assert p.truncated == ["bytes"] and p.num_nodes < 40
    assert not page("<html><body><p>x</p></body></html>").truncated


def test_what_is_read_of_one_value_is_capped_and_flagged():
    """A 4 MB ``class`` spent seconds in ``attribute_words`` (issue 55): every value read is cut
    at ``max_attribute_chars`` (a URL over it is left out) and a JSON-LD block over
    ``max_script_chars`` is not read; ``truncated`` says "attribute" / "script"."""
    limits = PageLimits(max_attribute_chars=100, max_script_chars=1000)
    ld = '{"@type": "NewsArticle", "headline": "%s"}'
    html = (f'<html lang="{"l" * 300}"><head><title>{"t " * 300}</title>'
            f'<meta name="author" content="{"a " * 300}">'
            f'<script type="application/ld+json">{ld % ("h" * 2000)}</script>'
            f'<script type="application/ld+json">{ld % "Short"}</script></head><body>'
            f'<div class="{"c " * 300}" id="{"i" * 300}" style="{"color:red;" * 30}">x</div>'
            f'<p><a href="http://a.test/{"u" * 300}">long</a> <a href="/ok">ok</a></p>'
            f'<span itemprop="author" content="{"n " * 300}">y</span></body></html>')
    p = page(html, limits=limits)
    assert p.truncated == ["attribute", "script"]
    assert p.json_ld == [ld % "Short"]  # the long block is left out, not cut
    assert len(p.meta["author"]) <= 100 and len(p.lang) == 100 and len(p.title) <= 100
    div = p.tags.index("div")
    assert p.class_words[div] == " ".join(["c"] * 50) and p.id_words[div] == "i" * 100
    hrefs = [v.get("href") for v in p.attrs.values() if "href" in v]
    assert hrefs == ["/ok"]  # a cut URL would point elsewhere: left out
    span = p.tags.index("span")
    assert len(p.attrs[span]["content"]) == 100
    # the defaults are far above real values: a page of ordinary ones is never flagged
    assert PageLimits().max_attribute_chars >= 20_000 and PageLimits().max_script_chars >= 10**6
    assert not page(html).truncated


def test_declared_utf16_without_bom_and_plain_str_bodies():
    from scrapy_grownup.errors import NotHTMLError

    html = "<html><head><title>Wide</title></head><body><p>Wide story text.</p></body></html>"
    p = parse_page(html.encode("utf-16-le"), content_type="text/html; charset=utf-16le",
                   positions=False)
    assert p.encoding == "utf-16-le" and p.title == "Wide" and "Wide story text." in p.seg_text
    # A str body goes through the same not-HTML check as bytes (it used to be parsed as text).
    for text in ("Just a few words of plain text, no tag at all.", '{"title": "x"}'):
        with pytest.raises(NotHTMLError):
            parse_page(text, positions=False)
        with pytest.raises(NotHTMLError):
            parse_page(text.encode("utf-8"), positions=False)
    assert parse_page("<p>Hello</p>", positions=False).seg_text == ["Hello"]


def test_nesting_deeper_than_libxml2_keeps_the_rest_of_the_page():
    """libxml2 stops at 2,048 levels and dropped everything after that point (the deep text
    and the rest of the page) without a flag. Now the page is parsed again with the tags below
    1,024 levels left out: every word is kept, and ``truncated`` says "libxml2_depth"."""
    import time

    for levels in (2_100, 5_000, 100_000):
        html = ("<html><body><p>Before the nest.</p>" + "<div>" * levels +
                "<p>deep text</p>" + "</div>" * levels + "<p>After the nest.</p></body></html>")
        start = time.perf_counter()
        p = parse_page(html.encode(), positions=False)
        assert time.perf_counter() - start < 5
        text = " ".join(p.seg_text)
        assert "Before the nest." in text and "deep text" in text and "After the nest." in text
        assert p.truncated == ["libxml2_depth", "depth"]
    shallow = "<div>" * 2_000 + "<p>x</p>" + "</div>" * 2_000
    assert "libxml2_depth" not in page(f"<html><body>{shallow}</body></html>").truncated


def test_flatten_deep_counts_only_real_tags():
    from scrapy_grownup.page.nesting import flatten_deep

    doc = (b"<div><!-- <div><div> --><script>'<div><div>'</script><br><img src=x/>"
           b"<div><div><p>deep</p></div></div>tail</div>")
    assert flatten_deep(doc, limit=2) == (b"<div><!-- <div><div> --><script>'<div><div>'"
                                          b"</script><br><img src=x/><div>deep</div>tail</div>")
    assert flatten_deep(doc, limit=10) == doc
    # Past the limit a raw-text element goes whole; an unclosed comment or tag ends the scan.
    assert flatten_deep(b"<a><b><style>x</style>t</b></a>", limit=1) == b"<a>t</a>"
    assert flatten_deep(b"<a><!-- open", limit=0) == b"<!-- open"
