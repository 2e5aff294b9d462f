"""``grownup inspect``: the page itself, each text-owning element shaded by its content score.

Green is content, red is boilerplate, the strength of the colour is the model's confidence.
People look at this picture to see why an extraction went wrong.
"""

from __future__ import annotations

import html as html_lib
from pathlib import Path

from lxml import etree

from .dom import parse_page, parse_tree

_LEGEND = (
    '<div id="grownup-legend" style="position:fixed;top:0;right:0;z-index:2147483647;'
    'background:#fff;border:2px solid #333;padding:6px 10px;font:13px sans-serif;color:#000">'
    "<b>scrapy_grownup</b> model {model}: "
    '<span style="background:rgba(0,170,0,.45)">content</span> '
    '<span style="background:rgba(220,0,0,.45)">boilerplate</span> '
    "&#183; {kept}/{total} text elements kept</div>"
)


def shade(score: float, threshold: float) -> str:
    """CSS for one element: green above the threshold, red below, alpha by confidence."""
    confidence = abs(score - threshold) / max(threshold, 1 - threshold)
    alpha = 0.15 + 0.4 * confidence
    colour = "0,170,0" if score >= threshold else "220,0,0"
    return (f"background-color:rgba({colour},{alpha:.2f}) !important;"
            f"outline:1px solid rgba({colour},.8) !important;")


def render_report(extractor, body: bytes, url: str | None = None) -> str:
    page = parse_page(body, url=url, limits=extractor.featurizer.limits)
    scores = extractor.score([page])[0]
    root = parse_tree(body, limits=extractor.featurizer.limits)[0]
    owns_text = [bool(t) for t in page.node_text]
    kept = 0
    for i, locator in enumerate(page.locator):
        if not owns_text[i] or page.tags[i] in ("title", "head", "html"):
            continue
        try:
            found = root.xpath(locator)
        except etree.XPathError:  # e.g. a namespace prefix in a tag name
            continue
        if not found:
            continue
        el = found[0]
        el.set("style", (el.get("style") or "") + ";" + shade(float(scores[i]),
                                                               extractor.threshold))
        el.set("data-grownup-score", f"{scores[i]:.3f}")
        kept += scores[i] >= extractor.threshold
    body_el = root.find("body")
    total = sum(owns_text)
    legend = etree.fromstring(_LEGEND.format(model=html_lib.escape(extractor.name),
                                             kept=kept, total=total))
    (body_el if body_el is not None else root).insert(0, legend)
    head = root.find("head")
    if head is None:
        head = etree.Element("head")
        root.insert(0, head)
    meta = etree.Element("meta", charset="utf-8")
    head.insert(0, meta)
    return "<!DOCTYPE html>\n" + etree.tostring(root, method="html", encoding="unicode")


def write_report(extractor, body: bytes, output: str | Path, url: str | None = None) -> Path:
    output = Path(output)
    output.write_text(render_report(extractor, body, url), encoding="utf-8")
    return output
