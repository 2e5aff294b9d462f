"""``grownup inspect``: the page itself, each text-owning element shaded by its content score.

Green is content, red is boilerplate, the strength of the colour is the model's confidence.
People look at this picture to see why an extraction went wrong.

The report is inert: opening it runs none of the page's code and contacts no host. Scripts,
event-handler attributes (``onload``, ``onerror``...), ``javascript:`` URLs, frames, objects,
embeds, ``<link>`` (stylesheets, preloads), ``<base>`` and ``<meta>`` are removed, and a
Content-Security-Policy in the report's head forbids every script, frame, font, fetch and remote
resource (remote images and stylesheets included; inline styles and ``data:`` images stay).

The sanitizer does not lean on that policy for what it can remove itself, so the report stays
inert in a viewer that ignores a ``<meta>`` policy:

- SVG animation elements (``<animate>``, ``<set>``...) are removed: they can set a link's
  ``href`` to ``javascript:...`` (``attributeName="href" to="javascript:..."``) after the
  attributes were checked;
- a ``<style>`` element is written back as raw text, which a browser parses as markup where it
  puts the element in MathML or SVG (``<math><mtext><table><mglyph><style><img onerror>``):
  its text keeps no ``<`` (CSS escapes it as ``\\3c``), so it holds no markup wherever it
  lands;
- remote CSS in ``style`` attributes, SVG presentation attributes and ``<style>`` elements:
  ``url(...)`` (but ``data:``), ``image-set(``, ``image(``, ``src(`` and ``expression(`` are
  renamed to an unknown function, whose declaration the browser drops, and ``@import`` to an
  unknown at-rule; CSS escapes (``u\\72l(``) and any letter case are recognised. A
  ``<style>`` over ``PageLimits.max_script_chars`` is removed;
- comments and processing instructions are removed (a browser and libxml2 may disagree on
  where one ends).
"""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

from lxml import etree

from scrapy_grownup.output.assembly import rescored_article
from scrapy_grownup.page.dom import parse_page, parse_tree
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.page.xmlsafe import xml_safe

_LEGEND = (
    '<div id="grownup-legend" style="position:fixed;top:0;right:0;z-index:2147483647;'
    'background:#fff;border:2px solid #333;padding:6px 10px;font:13px sans-serif;color:#000">'
    "<b>scrapy_grownup</b> model {model}: "
    '<span style="background:rgba(0,170,0,.45)">content</span> '
    '<span style="background:rgba(220,0,0,.45)">boilerplate</span> '
    "&#183; {kept}/{total} text elements kept</div>"
)


# Elements that run code, embed other documents or load resources by themselves, or (SVG
# animation) change another element's attributes, a link's href included: removed with their
# content...
ACTIVE_TAGS = ("script", "iframe", "frame", "link", "base", "meta", "portal", "fencedframe",
               "animate", "set", "animatetransform", "animatemotion", "animatecolor", "handler",
               "listener")
# ...or unwrapped: what they hold is fallback content (and libxml2, which does not know that
# <embed> is empty, hangs the rest of the page under it).
UNWRAPPED_TAGS = ("object", "embed", "applet", "frameset", "noscript")
# What the browser may do when the report is opened: nothing but the report's own inline styles
# and data: images.
POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src 'none'; "
          "script-src 'none'; object-src 'none'; frame-src 'none'; connect-src 'none'; "
          "form-action 'none'; base-uri 'none'")
_SCRIPT_URL = re.compile(r"^\s*(?:javascript|vbscript|data\s*:\s*text/html)", re.I)
# Attributes whose value is CSS: ``style`` and SVG's presentation attributes that take url().
CSS_ATTRIBUTES = frozenset({"style", "fill", "stroke", "filter", "mask", "clip-path",
                            "marker-start", "marker-mid", "marker-end", "marker", "cursor"})


def _css_word(word: str) -> str:
    """A pattern for ``word`` as CSS reads it: each character in any ASCII case, or as a CSS
    escape (``\\75`` or ``\\000055 `` for "u", ``\\u`` for a letter that is no hex digit)."""
    parts = []
    for ch in word:
        codes = sorted({f"{ord(ch.lower()):x}", f"{ord(ch.upper()):x}"})
        escape = r"\\0{0,4}(?:" + "|".join(codes) + r")(?:\r\n|[ \t\r\n\f])?"
        literal = re.escape(ch.lower()) + re.escape(ch.upper()) if ch.isalpha() else re.escape(ch)
        if not (ch.isalnum() and ch.lower() in "0123456789abcdef"):
            escape += r"|\\[" + literal + "]"
        parts.append(f"(?:[{literal}]|{escape})")
    return "".join(parts)


# What makes CSS fetch from a host: a function taking a URL (a string in image-set(), image()
# and src(); IE's behavior and Firefox's old -moz-binding take url() too) or running code (IE's
# expression()), and @import; url() of a data: URL stays. Matched with escapes and in any case,
# so "u\72l(" is url( too.
_CSS_REMOTE = re.compile(
    "(?:" + _css_word("url") + r"\((?!\s*[\"']?\s*data:)|"
    + "|".join(_css_word(name) + r"\(" for name in ("image-set", "image", "src", "expression"))
    + "|@" + _css_word("import") + ")")


def _neutral(match: re.Match) -> str:
    if match.group().startswith("@"):
        return "@grownup-removed-import"  # an unknown at-rule: skipped up to its ";"
    return "grownup-removed("  # an unknown function: its declaration is dropped


def safe_css(css: str) -> str:
    """``css`` with nothing that fetches from a host (``_CSS_REMOTE``, renamed so that the
    browser ignores the declaration or rule) and no ``<`` (the ``<!--`` / ``-->`` markers
    that only hide CSS from old browsers go, any other ``<`` becomes the CSS escape ``\\3c``)."""
    css = _CSS_REMOTE.sub(_neutral, css)
    if "<" in css:
        css = css.replace("<!--", "").replace("-->", "").replace("<", "\\3c ")
    return css


def make_inert(root, max_style_chars: int = PageLimits().max_script_chars) -> None:
    """Strip the page's active content in place (see the module docstring)."""
    etree.strip_elements(root, *ACTIVE_TAGS, with_tail=False)  # with content, tails kept
    etree.strip_elements(root, etree.Comment, etree.ProcessingInstruction, with_tail=False)
    etree.strip_tags(root, *UNWRAPPED_TAGS)
    for el in list(root.iter("style")):
        if el.getparent() is not None and len(el.text or "") > max_style_chars:
            _remove(el)
        elif el.text:
            el.text = safe_css(el.text)
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
            elif local in CSS_ATTRIBUTES and el.attrib[name]:
                el.attrib[name] = xml_safe(safe_css(el.attrib[name]))


def _remove(el) -> None:
    """Remove ``el`` with its content; its tail stays."""
    parent, tail = el.getparent(), el.tail
    if tail:
        previous = el.getprevious()
        if previous is not None:
            previous.tail = xml_safe((previous.tail or "") + tail)
        else:
            parent.text = xml_safe((parent.text or "") + tail)
    parent.remove(el)


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
        el.set("style", xml_safe(el.get("style") or "") + ";" + shade(float(scores[i]), threshold))
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
    make_inert(root, extractor.featurizer.limits.max_script_chars)
    meta = etree.Element("meta", charset="utf-8")
    head.insert(0, meta)
    head.insert(1, etree.Element("meta", {"http-equiv": "Content-Security-Policy",
                                          "content": POLICY}))
    return "<!DOCTYPE html>\n" + etree.tostring(root, method="html", encoding="unicode")


def write_report(extractor, body: bytes, output: str | Path, url: str | None = None) -> Path:
    output = Path(output)
    output.write_text(render_report(extractor, body, url), encoding="utf-8")
    return output
