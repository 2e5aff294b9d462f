"""The fixed tag vocabulary of the GROWN+UP features and HTML element categories."""

from __future__ import annotations

# The 83 most common tags, in the order of the authors' tags.txt (most pages first).
# Index 83 is the catch-all "other". Changing this list changes FEATURE_VERSION.
TAGS: tuple[str, ...] = (
    "a", "div", "p", "head", "body", "img", "html", "li", "ul", "span", "title", "link", "input",
    "form", "br", "h1", "h3", "h2", "strong", "style", "label", "iframe", "h4", "em", "textarea",
    "b", "table", "td", "tr", "small", "select", "ol", "option", "hr", "center", "i", "abbr",
    "header", "button", "footer", "dl", "blockquote", "dt", "nav", "dd", "article", "cite",
    "aside", "h5", "h6", "tbody", "fieldset", "section", "time", "font", "code", "map", "area",
    "th", "param", "object", "figure", "embed", "base", "u", "legend", "address", "caption",
    "nobr", "thead", "sup", "tfoot", "figcaption", "q", "col", "acronym", "strike", "wbr",
    "colgroup", "canvas", "big", "var", "del",
)
assert len(TAGS) == 83
OTHER_TAG = len(TAGS)
NUM_TAG_CLASSES = len(TAGS) + 1
TAG_INDEX: dict[str, int] = {t: i for i, t in enumerate(TAGS)}

# Elements whose start or end breaks the text flow into a new paragraph (label alignment,
# article assembly). Inline elements (a, span, b, ...) do not.
BLOCK_TAGS = frozenset(
    """address article aside blockquote body br caption center dd details dialog div dl dt
    fieldset figcaption figure footer form frame frameset h1 h2 h3 h4 h5 h6 head header hgroup hr
    html iframe legend li main menu nav ol option p pre section select summary table tbody td
    textarea tfoot th thead title tr ul""".split()
)

# Elements removed with their content (their tail text stays). ``noscript`` is unwrapped or
# removed before these by ``visibility.resolve_noscript``.
REMOVED_TAGS = ("script", "meta")
# Elements that stay nodes but whose text is not page text: CSS, templates, and a form field's
# value (a forum's "edit post" ``<textarea>`` holds the post again as raw HTML source).
NON_TEXT_TAGS = frozenset({"style", "template", "textarea"})


def tag_index(tag: str) -> int:
    """Index of ``tag`` in the one-hot vocabulary; unknown tags map to ``OTHER_TAG``."""
    return TAG_INDEX.get(tag, OTHER_TAG)
