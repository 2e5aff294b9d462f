"""Metadata: hand-checked golden pages (JSON-LD, OpenGraph/meta, microdata, bylines) and rules."""

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from scrapy_grownup.page.dom import parse_page
from scrapy_grownup.output.metadata import (extract_metadata, headline_node, json_ld_objects,
                                     normalize_date, split_authors)

GOLDEN = Path(__file__).parents[1] / "golden"
PAGES = {
    "news_jsonld": "https://riverside.example.com/news/2025/03/04/bike-lanes?utm=x",
    "blog_meta": "https://eng.acme.example/blog/faster-builds",
    "forum_microdata": "https://forum.example.org/t/42",
    "byline_text": "https://times.example.com/science/tides",
    # description, main image, modification date, tags and sections (and content images:
    # tests/output/test_article_fields.py)
    "media_meta": "https://railweekly.example.net/stories/night-trains?ref=rss",
}
CONTENT = {"news_jsonld": "article", "blog_meta": "div", "forum_microdata": "div",
           "byline_text": "div", "media_meta": "article"}


def page(html, url=None):
    return parse_page(html, url=url, positions=False)


def mask_of(p, tag, nth=0):
    """Nodes inside the ``nth`` element ``tag``: a model-free content mask."""
    start = [i for i, t in enumerate(p.tags) if t == tag][nth]
    keep = np.zeros(p.num_nodes, dtype=bool)
    keep[start:p.subtree_end[start]] = True
    return keep


@pytest.mark.parametrize("name", sorted(PAGES))
def test_golden_metadata(name):
    p = page((GOLDEN / f"{name}.html").read_bytes(), PAGES[name])
    expected = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    assert asdict(extract_metadata(p)) == expected


@pytest.mark.parametrize("name", sorted(PAGES))
def test_golden_metadata_with_a_content_mask(name):
    p = page((GOLDEN / f"{name}.html").read_bytes(), PAGES[name])
    nth = 1 if name == "byline_text" else 0  # the story, not the header div
    got = asdict(extract_metadata(p, mask_of(p, CONTENT[name], nth)))
    expected = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    if name == "byline_text":  # the content start anchors the byline's dateline
        expected["published"] = "2025-03-05"
    assert got == expected


@pytest.mark.parametrize("value, expected", [
    ("2025-09-04", "2025-09-04"),
    ("2025-09-04T10:30:00Z", "2025-09-04T10:30:00+00:00"),
    ("2025-09-04T10:30:00.123+0200", "2025-09-04T10:30:00+02:00"),
    ("2025-09-04 10:30", "2025-09-04T10:30:00"),
    ("2025/9/4", "2025-09-04"),
    ("Thu, 04 Sep 2025 10:30:00 GMT", "2025-09-04T10:30:00+00:00"),
    ("Thu, 04 Sep 2025 10:30:00 -0500", "2025-09-04T10:30:00-05:00"),
    ("September 4, 2025", "2025-09-04"),
    ("Published: Sept. 4th, 2025 at 10am", "2025-09-04"),
    ("4 September 2025", "2025-09-04"),
    ("04.09.2025", "2025-09-04"),
    ("09/04/2025", "2025-09-04"),
    ("25/12/2024", "2024-12-25"),
    (1757000000, "2025-09-04T15:33:20+00:00"),
    ("1757000000000", "2025-09-04T15:33:20+00:00"),
    ("2025-02-30", None),
    ("1850-01-01", None),
    ("yesterday", None),
    ("", None),
    (None, None),
])
def test_normalize_date(value, expected):
    assert normalize_date(value) == expected


@pytest.mark.parametrize("value, expected", [
    ("By Jane Doe", ["Jane Doe"]),
    ("Written by Jane Doe and John Roe", ["Jane Doe", "John Roe"]),
    ("Rui Ma, Heba Ledwon & Suparn Patra", ["Rui Ma", "Heba Ledwon", "Suparn Patra"]),
    ("Doe, Jane", ["Doe, Jane"]),  # "Last, First" stays one name
    ("Jane Doe, PhD", ["Jane Doe"]),
    ("Jane Doe; jane doe", ["Jane Doe"]),
    ("Reyan Perumal Published December 17, 2025", ["Reyan Perumal"]),
    ("https://www.facebook.com/someone", []),
    ("undefined", []),
    ("Name *", []),
    ("2 weeks ago", []),
])
def test_split_authors(value, expected):
    assert split_authors(value) == expected


def test_json_ld_tolerates_wrappers_lists_and_trailing_commas():
    p = page('<html><head><script type="application/ld+json"><!--\n'
             '[{"@type": "http://schema.org/BlogPosting", "headline": "H", "author": '
             '{"@type": "Person", "name": ["Ann", "Lee"]},},]\n--></script>'
             '<script type="application/ld+json">{not json</script></head><body>x</body></html>')
    objects = json_ld_objects(p)
    assert [o["headline"] for o in objects] == ["H"]
    meta = extract_metadata(p)
    assert meta.title == "H" and meta.authors == ["Ann Lee"]


def test_json_ld_with_javascript_comments_and_several_objects_in_one_block():
    # Patterns of wcxb_dev pages: hand-edited JSON-LD with "// ..." notes after values (URLs
    # inside strings keep their "//"), and one block holding two objects separated by a comma.
    p = page('<html><head><script type="application/ld+json">\n{\n'
             '  "@context": "https://schema.org",\n  "@type": "BlogPosting",\n'
             '  "headline": "Start an online business",\n'
             '  "datePublished": "2025-05-28T13:46:45+05:00", // Current date/time in PKT\n'
             '  /* the host */ "author": {"@type": "Person", "name": "Jeff Cobb",\n'
             '    "sameAs": ["https://www.linkedin.com/in/jeffcobb"\n'
             '      // Add his Twitter handle if available\n    ]}\n}</script>'
             '<script type="application/ld+json">{"@context":"https:\\/\\/schema.org",'
             '"@type":"LocalBusiness","name":"Cafe"},{"@context":"http:\\/\\/schema.org",'
             '"@type":"WebSite","name":"Cafe Saigon"}</script></head><body>x</body></html>')
    objects = json_ld_objects(p)
    assert [o["@type"] for o in objects] == ["BlogPosting", "LocalBusiness", "WebSite"]
    assert objects[0]["author"]["sameAs"] == ["https://www.linkedin.com/in/jeffcobb"]
    meta = extract_metadata(p)
    assert meta.title == "Start an online business" and meta.authors == ["Jeff Cobb"]
    assert meta.published == "2025-05-28T13:46:45+05:00"


def test_json_ld_repair_is_linear_on_unterminated_strings():
    import time

    p = page('<html><head><script type="application/ld+json">{"a": "'
             + 'x\\"y/' * 100_000 + '</script></head><body>x</body></html>')
    start = time.perf_counter()
    assert json_ld_objects(p) == []
    assert time.perf_counter() - start < 5


def test_headline_node_follows_the_content():
    html = ("<html><body><h1>Site logo</h1><nav>menu</nav><div><h1>The story</h1>"
            "<p>Body text of the story.</p></div><div><h1>Your privacy</h1><p>cookies</p></div>"
            "</body></html>")
    p = page(html)
    first, story, modal = [i for i, t in enumerate(p.tags) if t == "h1"]
    assert headline_node(p) == first  # without a model: the first h1
    keep = np.zeros(p.num_nodes, dtype=bool)
    keep[p.tags.index("p")] = True
    assert headline_node(p, keep) == story
    keep[:] = False
    assert headline_node(p, keep) == first


def test_title_sources_and_site_suffix():
    # No h1: og:title without the part that names the site.
    p = page('<html><head><meta property="og:title" content="Big news | Daily Bugle">'
             '<meta property="og:site_name" content="Daily Bugle"></head><body>x</body></html>')
    assert extract_metadata(p).title == "Big news"
    # A part that is not known to be the site stays.
    p = page("<html><head><title>Plans & Packages | Professional Tutoring</title></head>"
             "<body>x</body></html>", "https://tutor.example.com/plans")
    assert extract_metadata(p).title == "Plans & Packages | Professional Tutoring"
    # The host name is the site.
    p = page("<html><head><title>Plans - Tutor</title></head><body>x</body></html>",
             "https://www.tutor.com/plans")
    assert extract_metadata(p).title == "Plans"
    assert extract_metadata(page("<p>no title at all</p>")).title == ""


def test_published_falls_back_to_time_elements_and_the_url():
    p = page('<html><body><h1>T</h1><time datetime="2021-05-06T07:08:09+02:00">May 6</time>'
             "</body></html>")
    assert extract_metadata(p).published == "2021-05-06T07:08:09+02:00"
    p = page("<html><body><p>x</p></body></html>", "https://n.example.com/2019/12/31/story")
    assert extract_metadata(p).published == "2019-12-31"
    p = page("<html><body><h1>T</h1><p>Updated June 1, 2024</p><p>Posted May 2, 2024</p>"
             "</body></html>")
    assert extract_metadata(p).published == "2024-05-02"  # an update is not a publication


def test_language_canonical_and_site_name_normalised():
    p = page('<html lang="EN_us"><head><link rel="Canonical" href="../b?x=1">'
             '<meta name="application-name" content="App"></head><body>x</body></html>',
             "https://e.example/a/c")
    meta = extract_metadata(p)
    assert (meta.language, meta.canonical_url, meta.site_name) == (
        "en-US", "https://e.example/b?x=1", "App")
    p = page('<html lang="not a language"><body>x</body></html>')
    assert extract_metadata(p).language is None and extract_metadata(p).canonical_url is None


def test_repeated_author_meta_is_kept():
    p = page('<html><head><meta name="citation_author" content="Curie, Marie">'
             '<meta name="citation_author" content="Curie, Pierre"></head><body>x</body></html>')
    assert p.meta["citation_author"] == "Curie, Marie; Curie, Pierre"
    assert extract_metadata(p).authors == ["Curie, Marie", "Curie, Pierre"]


def test_article_carries_metadata():
    from scrapy_grownup.output.article import Article

    fields = Article(url=None, title="t", text="x").to_dict()
    assert {"authors", "published", "canonical_url", "site_name", "markdown"} <= set(fields)


@pytest.mark.parametrize("value,expected", [
    # a parenthesis or a role never splits a name
    ("Martin Untersinger (avec Damien Leloup et Morgane Tual)",
     ["Martin Untersinger", "Damien Leloup", "Morgane Tual"]),
    ("By Jane Doe (with John Roe)", ["Jane Doe", "John Roe"]),
    ("Elena Oberholzer (obe)", ["Elena Oberholzer"]),
    ("Jane Doe (Reuters)", ["Jane Doe"]),
    ("Fons_de_spons (", ["Fons_de_spons"]),
    ("John Smith, Senior Reporter", ["John Smith"]),
    ("Mike Marshall, Shipping Expert", ["Mike Marshall"]),
    ("Staff Writer", ["Staff Writer"]),  # a role alone is what the page gives
    # "Di"/"Par" start names too: only "By"-like words followed by a space or a capital go
    ("Diana Resnik", ["Diana Resnik"]),
    ("Dirk Knop", ["Dirk Knop"]),
    ("ByJane Doe", ["Jane Doe"]),
    ("Post by galitsyn »", ["galitsyn"]),
    # labels and dates are not names
    ("Follow the author", []),
    ("Your Name", []),
    ("Sun", []),
    ("Dec", []),
])
def test_split_authors_parentheses_roles_and_labels(value, expected):
    assert split_authors(value) == expected


@pytest.mark.parametrize("title,url,site,expected", [
    ("What do people love about Rust? | Rust Blog",
     "https://blog.rust-lang.org/2025/12/19/what-do-people-love-about-rust", None,
     "What do people love about Rust?"),  # the host names the site
    ("Online Tuition and Financing | Liberty University", "https://www.liberty.edu/online/",
     "Liberty University Online", "Online Tuition and Financing"),  # part of the site name
    ("Camping Tents | REI Co-op", "https://www.rei.com/c/tents", "REI", "Camping Tents"),
    ("2025 TOP 100 Companies | WFA", "https://worldfutureawards.com/x", "World Future Awards",
     "2025 TOP 100 Companies"),  # the site name's initials
    ("Plans & Packages | Professional Tutoring", "https://tutor.example.com/plans", None,
     "Plans & Packages | Professional Tutoring"),  # not known to be the site: stays
    ("Rust | Rust Blog", "https://blog.rust-lang.org/x", None, "Rust | Rust Blog"),  # all site
])
def test_title_without_the_site_part(title, url, site, expected):
    meta = f'<meta property="og:site_name" content="{site}">' if site else ""
    p = page(f"<html><head><title>{title}</title>{meta}</head><body><p>x</p></body></html>",
             url)
    assert extract_metadata(p).title == expected


def test_json_ld_headline_loses_the_site_part_too():
    p = page('<html><head><script type="application/ld+json">{"@type": "NewsArticle", '
             '"headline": "Reliable Music Lesson Reviews | Make More Music"}</script>'
             '<meta property="og:site_name" content="Make More Music"></head>'
             "<body><h1>Testimonials</h1></body></html>", "https://makemoremusic.uk/why-us")
    assert extract_metadata(p).title == "Reliable Music Lesson Reviews"


GERMAN = ("Die Bundesregierung hat am Mittwoch neue Regeln für den Ausbau der Windkraft "
          "beschlossen. Künftig sollen Genehmigungen schneller erteilt werden, und die Länder "
          "müssen mehr Flächen ausweisen. Kritiker warnen vor Konflikten mit dem Naturschutz, "
          "während die Branche die Pläne als überfällig begrüßt. ")


def test_language_detected_when_undeclared_and_checked_when_declared():
    from scrapy_grownup.output.metadata import language

    # none declared: the text's
    assert extract_metadata(page(f"<html><body><p>{GERMAN}</p></body></html>")).language == "de"
    # a template's "en" over German text: the text's
    p = page(f'<html lang="en"><body><p>{GERMAN * 2}</p></body></html>')
    assert extract_metadata(p).language == "de"
    assert language(p, detect=False) == "en"
    # declared and agreeing: the declared tag, region kept
    english = "The council approved the new budget on Tuesday after a long debate. " * 6
    p = page(f'<html lang="en-GB"><body><p>{english}</p></body></html>')
    assert extract_metadata(p).language == "en-GB"
    # too little text to contradict a declared language, or to detect one
    assert extract_metadata(page('<html lang="en"><body><p>Guten Tag, Herr Müller und '
                                 'Frau Schmidt aus Berlin.</p></body></html>')).language == "en"
    assert extract_metadata(page("<html><body><p>OK</p></body></html>")).language is None
    # the content mask picks the text: German content in an English page frame
    p = page(f'<html><body><nav>{"Home News Sport Weather Contact us " * 10}</nav>'
             f"<article><p>{GERMAN}</p></article></body></html>")
    assert extract_metadata(p, mask_of(p, "article")).language == "de"
    # deprecated codes
    assert extract_metadata(page('<html lang="in"><body>x</body></html>')).language == "id"
