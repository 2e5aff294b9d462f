"""Text that lxml accepts: page text without the characters XML refuses.

libxml2's HTML parser keeps control characters of a page in its tree, but lxml refuses them in
any string set on an element (``ValueError: All strings must be XML compatible``): moving a
removed element's tail to its neighbour, setting an attribute or building a report from page
text would fail on one stray ``\\x11``. Every place that puts page text into a tree or an output
goes through ``xml_safe``: ``parse_tree`` cleans the decoded document once, before parsing, and
the code that moves or sets text (``visibility``, the ``inspect`` report, metadata values read
from JSON-LD, Markdown) cleans what it handles again, for trees and pages from elsewhere.

Refused, and so removed: C0 control characters but tab, line feed and carriage return; lone
surrogates; U+FFFE and U+FFFF. Form feed, whitespace in HTML, becomes a space.
"""

from __future__ import annotations

import re

__all__ = ["XML_REFUSED", "xml_safe"]

# What lxml refuses in a string (form feed is handled on its own: it is HTML whitespace).
XML_REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _replacement(match: re.Match) -> str:
    return " " if match.group() == "\x0c" else ""


def xml_safe(text: str) -> str:
    """``text`` without the characters XML refuses (a form feed becomes a space); ``text``
    itself, not a copy, when it has none (one scan at C speed)."""
    if not text or XML_REFUSED.search(text) is None:
        return text
    if "\x0c" in text:
        text = text.replace("\x0c", " ")
    return XML_REFUSED.sub("", text)
