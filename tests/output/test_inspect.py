"""The inspect report, rendered in headless Chromium: content green, boilerplate red."""

import shutil
import subprocess

import numpy as np
import pytest

from example_project.news_site import STORIES, article_page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class FixedScores:
    """An extractor stand-in whose model says: paragraphs are content, the rest is not."""

    threshold = 0.5
    name = "fixed"

    def __init__(self):
        from scrapy_grownup.page.limits import PageLimits

        self.featurizer = type("F", (), {"limits": PageLimits()})()

    def score(self, pages):
        return [np.array([0.95 if t == "p" else 0.05 for t in p.tags]) for p in pages]


def test_report_marks_every_text_element():
    from scrapy_grownup.output.inspect import render_report

    html, _ = article_page(0)
    report = render_report(FixedScores(), html.encode())
    # the story's paragraphs and the footer's <p>
    assert report.count('data-grownup-score="0.950"') == len(STORIES[0][1]) + 1
    assert 'data-grownup-score="0.050"' in report and "grownup-legend" in report
    assert "<script" not in report


def test_report_shades_the_content_models_scores_where_the_article_falls_back_to_them(
        monkeypatch):
    """Where the rescorer would keep no text, the article is the content model's own, so the
    report shades the content model's scores at its own threshold, as the article keeps."""
    from scrapy_grownup import ArticleExtractor
    from scrapy_grownup.output.inspect import render_report

    html, _ = article_page(0)
    extractor = ArticleExtractor.from_pretrained("fast")
    plain = render_report(ArticleExtractor.from_pretrained("fast", rescore=False), html.encode())
    monkeypatch.setattr(extractor.rescorer, "rescore",
                        lambda page, probs, layout=None: np.zeros_like(probs))
    assert extractor.extract(html).text  # the article fell back, it is not empty
    report = render_report(extractor, html.encode())
    assert report == plain
    assert "0,170,0" in report  # content shaded green, as the article keeps it


@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed")
def test_report_screenshot_in_headless_chromium(tmp_path):
    from scrapy_grownup.output.inspect import render_report

    html = ("<html><body style='margin:0'>"
            "<p style='height:300px;margin:0;font-size:40px'>the article paragraph</p>"
            "<div style='height:300px;margin:0;font-size:40px'>navigation menu</div>"
            "</body></html>")

    class Scores(FixedScores):
        def score(self, pages):
            return [np.array([0.99 if t == "p" else 0.01 for t in p.tags]) for p in pages]

    report = tmp_path / "report.html"
    report.write_text(render_report(Scores(), html.encode()), encoding="utf-8")
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars",
                    "--window-size=800,700", f"--screenshot={shot}", report.as_uri()],
                   check=True, capture_output=True, timeout=120)
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    top = image.getpixel((600, 250))  # inside the paragraph, right of the legend, past the text
    below = image.getpixel((600, 500))  # inside the div
    assert top[1] > top[0] + 40, f"paragraph should be green, got {top}"
    assert below[0] > below[1] + 40, f"div should be red, got {below}"


HOSTILE = b"""<html><head><base href="http://evil.example/">
<link rel="stylesheet" href="http://evil.example/x.css"><link rel="preload" href="http://evil.example/f">
<meta http-equiv="refresh" content="0;url=http://evil.example/">
<style>@import url(http://evil.example/y.css); p { color: black }</style>
<script>fetch('http://evil.example/')</script></head>
<body onload="alert(1)">
<p onclick="alert(2)">The first paragraph of the story, with enough words to be content.</p>
<img src="http://evil.example/pixel.gif" onerror="alert(3)">
<iframe src="http://evil.example/frame" srcdoc="<script>alert(4)</script>"></iframe>
<object data="http://evil.example/o.swf"></object><embed src="http://evil.example/e.swf">
<a href="javascript:alert(5)">a link</a> <a href="http://example.org/ok">a real link</a>
<svg onload="alert(6)"><a xlink:href="javascript:alert(7)">svg link</a></svg>
<form action="javascript:alert(8)"><button formaction="http://evil.example/">go</button></form>
<p>The second paragraph of the story keeps its text after the removed elements.</p>
</body></html>"""


def test_report_is_inert():
    """The report kept onload/onerror handlers, iframes and external stylesheets: opening it
    ran the page's scripts and contacted remote hosts."""
    from scrapy_grownup.output.inspect import POLICY, render_report

    report = render_report(FixedScores(), HOSTILE)
    lowered = report.lower()
    for needle in ("onload", "onerror", "onclick", "<iframe", "srcdoc", "<link", "<object",
                   "<embed", "<base", "javascript:", "<script", "http-equiv=\"refresh\"",
                   "formaction"):
        assert needle not in lowered, needle
    assert f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">' in report
    assert "default-src 'none'" in POLICY and "script-src 'none'" in POLICY
    assert "The second paragraph of the story" in report  # the page itself is still there
    assert 'href="http://example.org/ok"' in report
    assert report.count('data-grownup-score="0.950"') == 2


# -- what the sanitizer removes itself, without the CSP (issue 55) -------------------------------
# A viewer that ignores a <meta> Content-Security-Policy must still find the report inert.
NO_CSP_HOSTILE = b"""<html><head>
<style>@import "http://evil.example/a.css"; @IMPORT url(http://evil.example/b.css);
@\\69mport 'http://evil.example/c.css'; p { background: url(http://evil.example/p.png) }
h1 { background-image: u\\72l("http://evil.example/h.png") } <!-- .old { color: red } --></style>
</head><body>
<p>The first paragraph of the story, with a styled span of its own in it.</p>
<svg><a><text>svg link</text>
<animate attributeName="href" values="javascript:alert(1)"/>
<set attributeName="href" to="javascript:alert(2)"/>
<animateTransform attributeName="transform" to="javascript:alert(3)"/></a>
<rect fill="url(http://evil.example/#paint)" width="1" height="1"/></svg>
<math><mtext><table><mglyph><style><img src=x onerror=alert(4)></style></mglyph></table></mtext></math>
<div style="background:URL( 'http://evil.example/d.png' );color:red">a div</div>
<div style="background:image-set('http://evil.example/i.png' 1x);width:expression(alert(5))">b</div>
<div style="background:url(data:image/png;base64,iVBORw0KGgo=)">a data: image stays</div>
<!-- a comment --!><p>The second paragraph of the story keeps its text.</p>
</body></html>"""


def _styles(report: str) -> list[str]:
    import re

    return re.findall(r"<style[^>]*>(.*?)</style>", report, re.S | re.I)


def test_the_sanitizer_removes_svg_animations_that_set_a_javascript_href():
    from scrapy_grownup.output.inspect import render_report

    report = render_report(FixedScores(), NO_CSP_HOSTILE).lower()
    for needle in ("<animate", "<set", "javascript:", "attributename"):
        assert needle not in report, needle
    assert "svg link" in report  # the link's text stays


def test_the_sanitizer_leaves_no_markup_in_a_style_a_browser_may_read_as_mathml():
    """libxml2 keeps ``<img onerror>`` as the text of a ``<style>`` under ``<mglyph>``, and the
    report writes a style's text back raw: a browser puts that style in MathML, where its text
    is markup, and the image's handler ran (the CSP alone stopped it)."""
    from scrapy_grownup.output.inspect import render_report

    report = render_report(FixedScores(), NO_CSP_HOSTILE)
    styles = _styles(report)
    assert len(styles) == 2  # the page's own two
    for text in styles:
        assert "<" not in text, text
    assert "\\3c img" in styles[1]  # kept as CSS's escape of "<": text, wherever it lands
    assert ".old { color: red }" in styles[0]  # the <!-- --> markers went, the rule stayed


def test_the_sanitizer_removes_remote_css_from_styles_and_style_elements():
    import re

    from scrapy_grownup.output.inspect import render_report, safe_css

    report = render_report(FixedScores(), NO_CSP_HOSTILE)
    lowered = report.lower()
    assert "evil.example" in lowered  # the URLs are still there, as text nothing fetches
    assert not re.search(r"url\((?!data:)|(?:image-set|image|src|expression)\(|@import|u\\72l",
                         lowered)
    assert "url(data:image/png;base64,ivborw0kggo=)" in lowered  # data: needs no host
    assert "<!--" not in report and "a comment" not in report
    assert "The second paragraph of the story" in report
    # escapes and case, in attributes and elements alike
    for css in ("background:\\75 rl(http://e/)", "b:\\000075\\000052\\00004c(http://e)",
                "b:\\u\\r\\l(x)", "b:-webkit-image-set('http://x' 1x)", "src: src('http://x')",
                "@\\000069mport 'x';", "b:Url(http://e)"):
        assert "grownup-removed" in safe_css(css), css
    for css in ("color:red; background-image:none", "background:url( 'data:image/gif,x')"):
        assert safe_css(css) == css


def test_a_huge_style_element_is_left_out_of_the_report():
    from scrapy_grownup.output.inspect import render_report
    from scrapy_grownup.page.limits import PageLimits

    class Small(FixedScores):
        def __init__(self):
            self.featurizer = type("F", (), {"limits": PageLimits(max_script_chars=1000)})()

    html = (b"<html><head><style>" + b"p{color:red}" * 200 + b"</style></head><body>"
            b"<p>The paragraph of the story.</p></body></html>")
    assert "p{color:red}" in render_report(FixedScores(), html)
    report = render_report(Small(), html)
    assert "p{color:red}" not in report and "The paragraph of the story." in report


def test_a_control_character_in_a_style_does_not_break_the_report():
    from scrapy_grownup.output.inspect import render_report

    html = (b"<html><body><p style='color:red\x11'>The paragraph of the story.</p>"
            b"<noscript></noscript>\x11 a tail</body></html>")
    report = render_report(FixedScores(), html)
    assert "The paragraph of the story." in report and "a tail" in report
