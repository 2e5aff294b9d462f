"""The article's description, images, modification date, tags, categories and HTML: a
hand-checked golden page, the content-image rule, the HTML's safety and its text."""

import pickle
import re
from dataclasses import asdict
from pathlib import Path

import lxml.html
import numpy as np
import pytest

from scrapy_grownup.output.assembly import assemble_text
from scrapy_grownup.output.html import to_html
from scrapy_grownup.output.images import content_images, image_list
from scrapy_grownup.output.markdown import to_markdown
from scrapy_grownup.output.metadata import extract_metadata
from scrapy_grownup.page.dom import parse_page

GOLDEN = Path(__file__).parents[1] / "golden"
MEDIA_URL = "https://railweekly.example.net/stories/night-trains?ref=rss"
COUCHETTE = "https://railweekly.example.net/media/couchette.jpg"
MAP = "https://railweekly.example.net/stories/map.png"  # relative to <base href>


def page(html, url=None):
    return parse_page(html, url=url, positions=False)


def subtree(p, tag, word=None):
    i = next(i for i, t in enumerate(p.tags)
             if t == tag and (word is None or word in p.class_words[i].split()))
    return slice(i, p.subtree_end[i])


def media_page():
    """The golden page and a model-free mask: the article without its byline and its
    related-story box."""
    p = page((GOLDEN / "media_meta.html").read_bytes(), MEDIA_URL)
    keep = np.zeros(p.num_nodes, dtype=bool)
    keep[subtree(p, "article")] = True
    keep[subtree(p, "aside")] = False
    keep[subtree(p, "p", "byline")] = False
    return p, keep


BLOCKS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "ul", "ol", "dl", "dt", "dd",
          "blockquote", "pre", "table", "tr", "td", "th", "caption", "figure", "figcaption",
          "thead", "tbody", "br"}
ALLOWED_TAGS = BLOCKS | {"a", "strong", "em", "del", "sub", "sup", "mark", "kbd", "code", "img"}
ALLOWED_ATTRIBUTES = {"href", "src", "alt", "start", "colspan", "class"}


def html_words(html: str) -> list[str]:
    """The words of ``html`` as a reader sees them (block elements apart), checking on the way
    that only the allowed elements, attributes and URL schemes are there."""
    root = lxml.html.fragment_fromstring(html, create_parent="div")
    out: list[str] = []

    def walk(el):
        if el is not root:
            assert el.tag in ALLOWED_TAGS, el.tag
            assert set(el.attrib) <= ALLOWED_ATTRIBUTES, dict(el.attrib)
            for name in ("href", "src"):
                if name in el.attrib:
                    assert el.attrib[name].startswith(("http://", "https://", "mailto:",
                                                       "tel:")), el.attrib[name]
        out.append("\n" if el.tag in BLOCKS else "")
        out.append(el.text or "")
        for child in el:
            walk(child)
        out.append("\n" if el.tag in BLOCKS else "")
        if el is not root:
            out.append(el.tail or "")

    walk(root)
    return [w for w in "".join(out).split() if w != "|"]


def text_words(text: str) -> list[str]:
    return [w for w in text.split() if w != "|"]  # a data table's cell borders


# -- the golden page ------------------------------------------------------------------------------

def test_golden_page_fields():
    p, keep = media_page()
    meta = asdict(extract_metadata(p, keep))
    assert meta["description"] == ("Sleeper trains return to a dozen routes, and the cabins "
                                   "sell out weeks ahead & more.")  # og: before meta, unescaped
    assert meta["image"] == "https://railweekly.example.net/media/night-train-cover.jpg"
    assert meta["date_modified"] == "2025-06-03T18:45:00+02:00"
    # every article:tag, once case aside; JSON-LD keywords and meta keywords not needed
    assert meta["tags"] == ["night trains", "Sleeper Cabins"]
    assert meta["categories"] == ["Travel", "Europe"]


def test_golden_page_content_images():
    """The lazy-loaded figure (its data-src, not the data: placeholder) and the linked map;
    not the logos, the avatar, the emoji, the tracking pixel, the related story's teaser, the
    footer."""
    p, keep = media_page()
    assert image_list(content_images(p, keep)) == [
        {"url": COUCHETTE, "alt": "A couchette with four berths"},
        {"url": MAP, "alt": "Map of [night] routes"}]


def test_golden_page_markdown_and_html():
    p, keep = media_page()
    markdown = to_markdown(p, keep)
    assert f"# Night trains are back in Europe\n\n![A couchette with four berths]({COUCHETTE})" \
           "\n\nFour berths, one window.\n\n" in markdown
    assert f"[![Map of \\[night\\] routes]({MAP})]" \
           "(https://railweekly.example.net/media/map-large.png)" in markdown
    assert "emoji" not in markdown and "pixel" not in markdown and "old-story" not in markdown
    assert to_html(p, keep) == (
        "<h1>Night trains are back in Europe</h1>\n"
        f'<figure><img src="{COUCHETTE}" alt="A couchette with four berths">\n'
        "<figcaption>Four berths, one window.</figcaption></figure>\n"
        "<p>Sleeper trains are back on a dozen routes and their cabins sell out weeks ahead."
        "</p>\n"
        '<p>Operators added <a href="https://railweekly.example.net/routes/vienna-paris">a '
        "Vienna to Paris line</a> last winter, booking opens 90 days out.</p>\n"
        "<p>The map below shows the network:</p>\n"
        '<p><a href="https://railweekly.example.net/media/map-large.png">'
        f'<img src="{MAP}" alt="Map of [night] routes"></a></p>\n'
        "<p>Prices start at 29 euros for a seat.</p>")


@pytest.mark.parametrize("name, url", [
    ("article_table", "https://optics.example.com/reviews/lens-comparison-2025?ref=rss"),
    ("article_lists", "https://garden.example.org/roses/pruning"),
    ("article_links", "https://docs.example.net/v2/release-notes"),
    ("news_jsonld", "https://riverside.example.com/news/2025/03/04/bike-lanes"),
    ("media_meta", MEDIA_URL),
])
@pytest.mark.parametrize("mask", ["all", "random"])
def test_html_text_is_the_article_text(name, url, mask):
    """Built from the same kept nodes: the HTML's words are the text's, in order."""
    p = page((GOLDEN / f"{name}.html").read_bytes(), url)
    keep = np.ones(p.num_nodes, dtype=bool) if mask == "all" else \
        np.random.default_rng(len(name)).random(p.num_nodes) < 0.6
    html = to_html(p, keep)
    assert html_words(html) == text_words(assemble_text(p, keep))


# -- safety ---------------------------------------------------------------------------------------

HOSTILE = b"""<html><head><style>p { color: red }</style>
<script>alert("head")</script></head><body onload="alert(1)">
<div onclick="alert(2)"><p style="x" class="lead" id="a1">Safe <b onmouseover="alert(3)">bold</b>
<a href="javascript:alert(4)">script link</a> <a href="JaVaScRiPt:alert(5)">mixed case</a>
<a href="data:text/html,<script>alert(6)</script>">data link</a>
<a href="vbscript:msgbox(7)">vb link</a> <a href="/ok?a=1&amp;b=&quot;2&quot;">fine link</a>
<a href="mailto:desk@example.com">mail</a></p>
<iframe src="https://evil.example/frame"></iframe><form action="/post"><input value="x">
<button>Send &lt;now&gt;</button></form>
<img src="javascript:alert(8)" alt="js image"><img src="data:image/png;base64,AAAA" alt="inline">
<img src="/real.jpg" alt='quote " and &lt;tag&gt;' onerror="alert(9)">
<svg onload="alert(10)"><text>svg text</text></svg><object data="x.swf">object text</object>
<p>&lt;script&gt;alert(11)&lt;/script&gt; is text here.</p></div></body></html>"""


def test_html_is_safe_to_render():
    p = page(HOSTILE, "https://site.example/page")
    keep = np.ones(p.num_nodes, dtype=bool)
    html = to_html(p, keep)
    lowered = html.lower()
    for bad in ("<script", "<style", "<iframe", "<form", "<input", "<button", "<svg",
                "<object", "javascript:", "vbscript:", "data:", " on", "style=", "id="):
        assert bad not in lowered, bad
    assert '<a href="https://site.example/ok?a=1&amp;b=&quot;2&quot;">fine link</a>' in html
    assert '<a href="mailto:desk@example.com">mail</a>' in html
    assert '<img src="https://site.example/real.jpg" alt="quote &quot; and &lt;tag&gt;">' in html
    assert "&lt;script&gt;alert(11)&lt;/script&gt; is text here." in html
    assert html_words(html) == text_words(assemble_text(p, keep))  # the forms' text stays


# -- the content-image rule -----------------------------------------------------------------------

def images_of(body: str, keep_tags=("main",), url="https://example.org/a/b.html") -> list:
    p = page(f"<html><body>{body}</body></html>", url)
    keep = np.zeros(p.num_nodes, dtype=bool)
    for tag in keep_tags:
        keep[subtree(p, tag)] = True
    return [image["url"] for image in image_list(content_images(p, keep))]


def test_image_urls():
    assert images_of(
        '<main><p>One two three.</p><img src="data:image/gif;base64,R0l" data-src="lazy.jpg">'
        '<img srcset="small.jpg 300w, large.jpg 1200w, mid.jpg 600w">'
        '<img src="plain.png"><img src="plain.png"><img src="javascript:x()">'
        '<img src="https://example.org/icons/share.svg"><img src="//cdn.example.org/x.jpg">'
        '<img src="a.jpg" width="1" height="1"><img src="b.jpg" width="32" height="32">'
        '<img src="c.jpg" width="32"><p>Four five six.</p></main>') == [
        "https://example.org/a/lazy.jpg", "https://example.org/a/large.jpg",
        "https://example.org/a/plain.png", "https://cdn.example.org/x.jpg",
        "https://example.org/a/c.jpg"]  # once per URL; pixels, icons, scripts left out


def test_images_outside_the_content_are_left_out():
    body = ('<header><img src="logo.png"></header>'
            '<main><p>Kept text.</p><div class="ad"><img src="ad.jpg"><p>Advertisement</p>'
            '</div><p>More kept text.</p><figure><img src="photo.jpg"><figcaption>A caption '
            'the model dropped.</figcaption></figure><p>Last kept text.</p>'
            '<h2><img src="heading-icon.png">A heading</h2></main>'
            '<footer><img src="footer.png"></footer>')
    p = page(f"<html><body>{body}</body></html>", "https://example.org/")
    keep = np.zeros(p.num_nodes, dtype=bool)
    keep[subtree(p, "main")] = True
    keep[subtree(p, "div", "ad")] = False
    keep[subtree(p, "figcaption")] = False
    # the figure (its dropped caption is its own), not the advertisement (its class), the
    # heading's icon, the header's logo or the footer's image
    assert [i["url"] for i in image_list(content_images(p, keep))] == [
        "https://example.org/photo.jpg"]


def test_lead_image_before_the_content():
    """Before the first kept run, only the image nearest to it, alone in its box."""
    assert images_of('<div class="logos"><img src="l1.png"><img src="l2.png"></div>'
                     '<main><p>Text.</p></main>') == []
    assert images_of('<img src="avatar-photo.jpg"><p>By Someone</p><img src="hero.jpg">'
                     '<main><p>Text.</p></main>', keep_tags=("main",)) == [
        "https://example.org/a/hero.jpg"]


# -- the extractor --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def extractor():
    from scrapy_grownup.extractor import ArticleExtractor

    return ArticleExtractor.from_pretrained("fast", device="cpu")


def test_extractor_fills_the_fields(extractor):
    body = (GOLDEN / "media_meta.html").read_bytes()
    article = extractor.extract(body, url=MEDIA_URL)
    assert article.description.startswith("Sleeper trains return")
    assert article.image == "https://railweekly.example.net/media/night-train-cover.jpg"
    assert article.date_modified == "2025-06-03T18:45:00+02:00"
    assert article.tags == ["night trains", "Sleeper Cabins"]
    assert article.categories == ["Travel", "Europe"]
    assert all(set(image) == {"url", "alt"} for image in article.images)
    assert "_html_build" in article.__dict__  # built when first read, as markdown
    html = article.html
    assert "_html_build" not in article.__dict__ and html.startswith("<")
    assert html_words(html) == text_words(article.text)
    for image in article.images:
        assert image["url"] in article.markdown and image["url"] in html
    again = extractor.extract(body, url=MEDIA_URL)
    assert pickle.loads(pickle.dumps(again)).html == html  # a pickle carries it built


def test_main_image_falls_back_to_the_first_content_image(extractor):
    body = ("<html><head><title>Plain</title></head><body><article><h1>Plain page</h1>"
            + "".join(f"<p>Paragraph {n} of the plain article text, which goes on for a while "
                      f"about the weather in the valley on day {n}.</p>" for n in range(6))
            + '<figure><img src="/photo.jpg" alt="Photo"><figcaption>The caption of the photo.'
            "</figcaption></figure>"
            + "".join(f"<p>More of the article text in paragraph {n}, which goes on for a while "
                      f"about the rain that fell on day {n}.</p>" for n in range(6, 12))
            + "</article></body></html>")
    article = extractor.extract(body, url="https://example.com/story")
    assert article.images == [{"url": "https://example.com/photo.jpg", "alt": "Photo"}]
    assert article.image == "https://example.com/photo.jpg"


def test_metadata_sources():
    def meta(head):
        return extract_metadata(page(f"<html><head>{head}</head><body><p>x</p></body></html>",
                                     "https://example.com/a/"))

    ld = ('<script type="application/ld+json">{"@type": "BlogPosting", '
          '"description": "<p>From &amp; JSON-LD</p>", "dateModified": "2024-02-03", '
          '"keywords": "alpha, beta,alpha , Gamma", "articleSection": ["News", "World"], '
          '"image": [{"@type": "ImageObject", "contentUrl": "/img/ld.jpg"}]}</script>')
    got = meta(ld)
    assert got.description == "From & JSON-LD"  # tags dropped, entities decoded
    assert meta(ld + '<meta name="description" content="meta">').description == "meta"
    assert got.date_modified == "2024-02-03"
    assert got.tags == ["alpha", "beta", "Gamma"]
    assert got.categories == ["News", "World"]
    assert got.image == "https://example.com/img/ld.jpg"
    got = meta('<meta property="og:updated_time" content="1717171717">'
               '<meta name="twitter:image" content="javascript:alert(1)">'
               '<meta name="keywords" content="one; two, three">'
               '<link rel="image_src" href="https://cdn.example.com/i.png">')
    assert got.date_modified == "2024-05-31T16:08:37+00:00"
    assert got.image == "https://cdn.example.com/i.png"  # the script URL is no image
    assert got.tags == ["one", "two", "three"]
    got = meta("")
    assert (got.description, got.image, got.date_modified, got.tags, got.categories) == \
        (None, None, None, [], [])


def test_item_fields_follow_the_article():
    from scrapy_grownup.crawl.items import LONG_FIELDS, ArticleItem, article_values
    from scrapy_grownup.output.article import Article

    names = set(ArticleItem.fields)
    assert {"description", "image", "images", "date_modified", "tags", "categories",
            "html"} <= names
    assert "html" in LONG_FIELDS
    article = Article(url="https://example.com/", title="t", text="x")
    article.defer_html(lambda: "<p>x</p>")
    values = article_values(article)
    assert values["html"] == "<p>x</p>" and values["images"] == []


def test_no_image_markup_in_text():
    """``text`` is never touched: no image syntax in it."""
    p, keep = media_page()
    assert not re.search(r"!\[|<img", assemble_text(p, keep))


def test_big_pages_take_linear_time():
    """Thousands of images, linked images beside linked text, emphasis around both, a
    megabyte of <pre> whitespace: each output in about a second here (linear: 4x the page,
    4x the time)."""
    import time

    n = 4_000
    body = "".join(f'<p>Text {k} <a href="/p{k}"><img src="/i{k}.jpg" alt="a{k}"><div>linked '
                   f'text {k}</div></a> <b><img src="/b{k}.jpg"><br>bold {k}</b></p>'
                   for k in range(n)) + "<pre>x" + " \n" * 500_000 + "y</pre>"
    from scrapy_grownup.page.limits import PageLimits

    p = parse_page(f"<html><body><main>{body}</main></body></html>", url="https://example.org/",
                   positions=False, limits=PageLimits(max_nodes=300_000))
    assert not p.truncated
    keep = np.ones(p.num_nodes, dtype=bool)
    for fn in (content_images, to_markdown, to_html):
        start = time.perf_counter()
        out = fn(p, keep)
        assert time.perf_counter() - start < 10.0, fn.__name__  # room for any load
        assert len(out) > n
    html = to_html(p, keep)
    assert html_words(html) == text_words(assemble_text(p, keep))
    assert '<a href="https://example.org/p7"><img src="https://example.org/i7.jpg" alt="a7">' \
           '</a>' in html and '<a href="https://example.org/p7">linked text 7</a>' in html
