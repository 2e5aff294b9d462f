"""Hostile input: a clear package exception or a valid (possibly tiny) graph, never a crash."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from scrapy_grownup.page.dom import PageStructure, parse_page
from scrapy_grownup.errors import EmptyPageError, GrownupError, NotHTMLError
from scrapy_grownup.page.limits import PageLimits
from tests.crawl_support import PEAK_RSS_KB


def check_valid(p: PageStructure) -> None:
    n = p.num_nodes
    assert n >= 1 and p.parent[0] == -1
    assert (p.parent[1:] >= 0).all() and (p.parent[1:] < np.arange(1, n)).all()
    assert len(p.locator) == len(p.class_words) == len(p.id_words) == n
    assert p.font.shape == (n, 3) and p.struct_features().shape[0] == n
    assert len(p.seg_text) == len(p.seg_owner) == len(p.seg_sep)
    assert all(p.seg_text) and (p.seg_owner < n).all()
    if p.positions is not None:
        assert p.positions.shape == (n, 32) and np.isfinite(p.positions).all()


@pytest.mark.parametrize("body,error", [
    (b"", EmptyPageError),
    (b" \n\t ", EmptyPageError),
    (b"<!-- only a comment -->", EmptyPageError),
    (b"%PDF-1.4\n1 0 obj", NotHTMLError),
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, NotHTMLError),
    (b"GIF89a\x01\x00", NotHTMLError),
    (b"plain text, zero elements", NotHTMLError),
])
def test_rejected_inputs(body, error):
    with pytest.raises(error):
        parse_page(body)


@pytest.mark.parametrize("body", [
    b"<html><body><p>caf\xe9 \xff\xfe \xc3( ok</p></body></html>",  # invalid utf-8
    b"<p>a\x00b</p>",
    b'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml" xmlns:fb="x"><body>'
    b'<fb:like/><svg:rect xmlns:svg="http://www.w3.org/2000/svg"/><p>Hi</p></body></html>',
    b'<html><frameset cols="50%,50%"><frame src="a"><frame src="b"><noframes>n</noframes>'
    b"</frameset></html>",
    b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000,
    b"<div>" * 100_000,
    b"</p></div></body><td><tr><<<>>>&&&;<p",
    "<p>ünïcödé</p>".encode("utf-16"),
])
def test_odd_inputs_give_valid_graphs(body):
    p = parse_page(body)
    check_valid(p)


def test_deep_nesting_is_capped():
    p = parse_page(b"<div>" * 100_000 + b"x" + b"</div>" * 100_000)
    assert "depth" in p.truncated and p.depth.max() < PageLimits().max_depth


def test_50mb_page_is_truncated_in_bounded_time_and_memory():
    # Run in a subprocess so the peak RSS measured is this page's alone.
    code = (
        "from scrapy_grownup.page.dom import parse_page;"
        "b=b'<html><body>'+b'<div class=c><p>para text here</p></div>'*1_300_000;"
        "p=parse_page(b);"
        f"print(len(b), p.num_nodes, ','.join(p.truncated), {PEAK_RSS_KB})"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    size, nodes, truncated, rss_kb = int(out[0]), int(out[1]), out[2], int(out[3])
    assert size > 50_000_000
    assert nodes == PageLimits().max_nodes and "bytes" in truncated and "nodes" in truncated
    assert rss_kb < 1_500_000  # the 50 MB body itself plus a 5 MB parse, not 50 MB of tree


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_random_bytes(body):
    try:
        p = parse_page(body)
    except GrownupError:
        return
    check_valid(p)


_TAGS = st.sampled_from(["div", "p", "span", "a", "b", "ul", "li", "table", "tr", "td", "h1",
                         "script", "style", "meta", "br", "img", "x-y", "svg:g", "frameset"])
_ATTRS = st.sampled_from(['', ' class="a-b cD_3"', ' id="mainNav"', ' style="font: bold 9px x"',
                          ' style="font-size:200%;font-weight:900"', ' size="+2"', " class"])
_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)


@st.composite
def random_html(draw):
    parts = []
    for _ in range(draw(st.integers(0, 60))):
        kind = draw(st.integers(0, 4))
        tag = draw(_TAGS)
        if kind == 0:
            parts.append(f"<{tag}{draw(_ATTRS)}>")
        elif kind == 1:
            parts.append(f"</{tag}>")
        elif kind == 2:
            parts.append(draw(_TEXT))
        elif kind == 3:
            parts.append(draw(st.sampled_from(["<!--", "-->", "<![CDATA[", "]]>", "&amp;",
                                               "&#0;", "<?pi?>", "<!DOCTYPE html>", "<"])))
        else:
            parts.append(f"<{tag}{draw(_ATTRS)}/>")
    return "".join(parts)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_html(), st.sampled_from(["utf-8", "cp1252", "utf-16"]))
def test_random_html(html, encoding):
    body = html.encode(encoding, errors="replace")
    try:
        p = parse_page(body, limits=PageLimits(max_nodes=200, max_depth=20))
    except GrownupError:
        return
    check_valid(p)
    assert p.num_nodes <= 200 and p.depth.max() < 20


# -- bytes that are not HTML: NotHTMLError, never an empty article counted as extracted ---------
_RANDOM = __import__("random").Random(13)
NOT_HTML = {
    "random_20_bytes": bytes(_RANDOM.randrange(256) for _ in range(20)),
    "random_kilobyte": bytes(_RANDOM.randrange(256) for _ in range(1024)),
    "random_200_kb": bytes(_RANDOM.randrange(256) for _ in range(200_000)),
    "plain_word": b"Hello",
    "plain_sentence": b"Just a few words, no markup at all.\n",
    "plain_prose": ("Dear reader,\n\nif a < b and b > c, then who knows. Write to "
                    "<editor@news.example> or see <https://news.example/faq>.\n\n"
                    "Caf\u00e9 \u00fcber alles \u2014 fin.\n").encode() * 50,
    "plain_utf16_with_bom": "Plain text, in UTF-16.".encode("utf-16"),
    "json_object": b'{"title": "A story", "body": "<p>HTML inside a JSON string</p>"}',
    "json_array": b' [1, 2, {"a": null}]\n',
}
HTML_FRAGMENTS = [b"<p>Hello</p>", b"Hello <b>world</b>, a fragment",
                  "<p>ünïcödé fragment</p>".encode("utf-16"), b"<br/>Line after a break"]


@pytest.mark.parametrize("name", sorted(NOT_HTML))
def test_not_html_is_rejected_by_the_parser(name):
    with pytest.raises(NotHTMLError):
        parse_page(NOT_HTML[name])


@pytest.mark.parametrize("body", HTML_FRAGMENTS)
def test_html_fragments_are_html(body):
    check_valid(parse_page(body))


@pytest.fixture(scope="module")
def extractor():
    from scrapy_grownup import ArticleExtractor

    return ArticleExtractor.from_pretrained("fast", device="cpu")


def test_not_html_raises_not_html_error_in_the_api(extractor):
    for name, body in NOT_HTML.items():
        with pytest.raises(NotHTMLError):
            extractor.extract(body, url=f"http://x.test/{name}")
    # a fragment is a page (a lone word is no article for the model, a sentence is)
    fragment = b"<p>Hello, world. This fragment is a page of its own.</p>"
    assert "This fragment is a page" in extractor.extract(fragment).text
    results = extractor.extract_batch([(body, None) for body in NOT_HTML.values()]
                                      + [(fragment, None)], errors="skip")
    assert results[:-1] == [None] * len(NOT_HTML) and "This fragment" in results[-1].text
