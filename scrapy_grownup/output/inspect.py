"""``grownup inspect``: the page itself, each text-owning element shaded by its content score.

Green is content, red is boilerplate, the strength of the colour is the model's confidence.
People look at this picture to see why an extraction went wrong.

The report is inert: opening it runs none of the page's code and contacts no host. Scripts,
event-handler attributes (``onload``, ``onerror``...), ``javascript:`` URLs, frames, objects,
embeds, ``<link>`` (stylesheets, preloads), ``<base>`` and ``<meta>`` are removed, and a
Content-Security-Policy in the report's head forbids every script, frame, font, fetch and remote
resource (remote images and stylesheets included; inline styles and ``data:`` images stay).
"""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

from lxml import etree

from scrapy_grownup.output.assembly import rescored_article
from scrapy_grownup.page.dom import parse_page, parse_tree

_LEGEND = (
    '<div id="grownup-legend" style="position:fixed;top:0;right:0;z-index:2147483647;'
    'background:#fff;border:2px solid #333;padding:6px 10px;font:13px sans-serif;color:#000">'
    "<b>scrapy_grownup</b> model {model}: "
    '<span style="background:rgba(0,170,0,.45)">content</span> '
    '<span style="background:rgba(220,0,0,.45)">boilerplate</span> '
    "&#183; {kept}/{total} text elements kept</div>"
)


# Elements that run code, embed other documents or load resources by themselves: removed with
# their content...
ACTIVE_TAGS = ("script", "iframe", "frame", "link", "base", "meta", "portal", "fencedframe")
# ...or unwrapped: what they hold is fallback content (and libxml2, which does not know that
# <embed> is empty, hangs the rest of the page under it).
UNWRAPPED_TAGS = ("object", "embed", "applet", "frameset", "noscript")
# What the browser may do when the report is opened: nothing but the report's own inline styles
# and data: images.
POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src 'none'; "
          "script-src 'none'; object-src 'none'; frame-src 'none'; connect-src 'none'; "
          "form-action 'none'; base-uri 'none'")
_SCRIPT_URL = re.compile(r"^\s*(?:javascript|vbscript|data\s*:\s*text/html)", re.I)


def make_inert(root) -> None:
    """Strip the page's active content in place (see the module docstring)."""
    etree.strip_elements(root, *ACTIVE_TAGS, with_tail=False)  # with content, tails kept
    etree.strip_tags(root, *UNWRAPPED_TAGS)
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        for name in list(el.attrib):
            local = name.rsplit("}", 1)[-1].lower()
            if local.startswith("on") or local in ("srcdoc", "ping", "formaction"):
                del el.attrib[name]
            elif _SCRIPT_URL.match(el.attrib[name] or "") and local in (
                    "href", "src", "action", "data", "xlink:href", "background", "poster",
                    "codebase", "cite", "dynsrc", "lowsrc", "srcset"):
                del el.attrib[name]


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
    threshold = extractor.threshold
    rescorer = getattr(extractor, "rescorer", None)
    if rescorer is not None:  # the scores and cut-off the article is taken from
        _, scores, threshold, _ = rescored_article(page, scores, rescorer, threshold,
                                                   refine=extractor.refine,
                                                   adaptive=extractor.adaptive)
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
        el.set("style", (el.get("style") or "") + ";" + shade(float(scores[i]), threshold))
        el.set("data-grownup-score", f"{scores[i]:.3f}")
        kept += scores[i] >= threshold
    body_el = root.find("body")
    total = sum(owns_text)
    legend = etree.fromstring(_LEGEND.format(model=html_lib.escape(extractor.name),
                                             kept=kept, total=total))
    (body_el if body_el is not None else root).insert(0, legend)
    head = root.find("head")
    if head is None:
        head = etree.Element("head")
        root.insert(0, head)
    make_inert(root)
    meta = etree.Element("meta", charset="utf-8")
    head.insert(0, meta)
    head.insert(1, etree.Element("meta", {"http-equiv": "Content-Security-Policy",
                                          "content": POLICY}))
    return "<!DOCTYPE html>\n" + etree.tostring(root, method="html", encoding="unicode")


def write_report(extractor, body: bytes, output: str | Path, url: str | None = None) -> Path:
    output = Path(output)
    output.write_text(render_report(extractor, body, url), encoding="utf-8")
    return output
