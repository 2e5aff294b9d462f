"""The inspect report, rendered in headless Chromium: content green, boilerplate red."""

import shutil
import subprocess

import numpy as np
import pytest

from example_project.news_site import article_page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class FixedScores:
    """An extractor stand-in whose model says: paragraphs are content, the rest is not."""

    threshold = 0.5
    name = "fixed"

    def __init__(self):
        from scrapy_grownup.limits import PageLimits

        self.featurizer = type("F", (), {"limits": PageLimits()})()

    def score(self, pages):
        return [np.array([0.95 if t == "p" else 0.05 for t in p.tags]) for p in pages]


def test_report_marks_every_text_element():
    from scrapy_grownup.inspect_report import render_report

    html, _ = article_page(0)
    report = render_report(FixedScores(), html.encode())
    assert report.count('data-grownup-score="0.950"') == 5  # 4 paragraphs + the footer <p>
    assert 'data-grownup-score="0.050"' in report and "grownup-legend" in report
    assert "<script" not in report


@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed")
def test_report_screenshot_in_headless_chromium(tmp_path):
    from scrapy_grownup.inspect_report import render_report

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
