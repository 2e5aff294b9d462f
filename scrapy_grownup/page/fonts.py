"""Font weight, style and size buckets from inline ``style`` and presentational tags.

No CSS cascade and no rendering: the page's own markup is the only source, as in the paper.
"""

from __future__ import annotations

import re
from functools import lru_cache

FONT_WEIGHTS = ("normal", "bold", "unknown")
FONT_STYLES = ("normal", "italic", "oblique", "unknown")
FONT_SIZES = (
    "xx-small", "x-small", "small", "medium", "large", "x-large", "xx-large",
    "smaller", "larger", "unknown",
)
W_NORMAL, W_BOLD, W_UNKNOWN = range(3)
S_NORMAL, S_ITALIC, S_OBLIQUE, S_UNKNOWN = range(4)
SIZE_INDEX = {name: i for i, name in enumerate(FONT_SIZES)}
SIZE_UNKNOWN = SIZE_INDEX["unknown"]

_TAG_WEIGHT = {"b": W_BOLD, "strong": W_BOLD, "h1": W_BOLD, "h2": W_BOLD, "h3": W_BOLD,
               "h4": W_BOLD, "h5": W_BOLD, "h6": W_BOLD, "th": W_BOLD}
_TAG_STYLE = {"i": S_ITALIC, "em": S_ITALIC, "cite": S_ITALIC, "var": S_ITALIC,
              "address": S_ITALIC, "dfn": S_ITALIC}
# Browser default sizes of headings and size-changing tags.
_TAG_SIZE = {"h1": "xx-large", "h2": "x-large", "h3": "large", "h4": "medium",
             "h5": "small", "h6": "x-small", "big": "larger", "small": "smaller"}
# <font size=1..7>
_FONT_ATTR_SIZE = {1: "x-small", 2: "small", 3: "medium", 4: "large", 5: "x-large",
                   6: "xx-large", 7: "xx-large"}
# Linear on any input (a page's ``style`` can be megabytes): a name starts only where a name
# can start, not inside a run of name letters (the former ``([a-zA-Z-]+)\s*:`` rescanned a run
# from each of its letters: 14 s for 40,000), and possessive quantifiers never give back what
# they took (``\s*`` after the colon may give back one space: a value of spaces is a value).
_DECL = re.compile(r"(?<![a-zA-Z-])([a-zA-Z-]++)\s*+:\s*([^;]++)")
_LENGTH = re.compile(r"([0-9]++(?:\.[0-9]++)?|\.[0-9]++)\s*+(px|pt|pc|in|cm|mm|em|rem|%|ex|ch)?")
# Values longer than this (rare, unbounded in size) are parsed each time rather than cached, so
# the caches stay small: 16,384 entries of at most this many characters.
MAX_CACHED_CHARS = 256
_ABS_UNITS_PX = {"px": 1.0, "pt": 96 / 72, "pc": 16.0, "in": 96.0, "cm": 96 / 2.54,
                 "mm": 96 / 25.4, None: 1.0}
_KEYWORD_SIZES = set(FONT_SIZES[:-1]) | {"xxx-large"}


def parse_style(style: str | None) -> dict[str, str]:
    """Inline ``style`` declarations as a lower-cased dict (last one wins)."""
    if not style:
        return {}
    return {k.lower(): v.strip().lower().replace("!important", "").strip()
            for k, v in _DECL.findall(style)}


def weight_bucket(value: str) -> int:
    value = value.strip()
    if value in ("bold", "bolder"):
        return W_BOLD
    if value in ("normal", "lighter", "initial"):
        return W_NORMAL
    if value.isascii() and value.isdigit():  # "²" passes isdigit() but not int()
        digits = value.lstrip("0")
        return W_BOLD if len(digits) > 3 or int(digits or "0") >= 600 else W_NORMAL
    return W_UNKNOWN


def style_bucket(value: str) -> int:
    value = value.strip().split()[0] if value.strip() else ""
    return {"normal": S_NORMAL, "italic": S_ITALIC, "oblique": S_OBLIQUE}.get(value, S_UNKNOWN)


def size_bucket(value: str) -> int:
    """Bucket a CSS font-size value: keywords directly, absolute lengths by pixel bands."""
    value = value.strip()
    if value == "xxx-large":
        return SIZE_INDEX["xx-large"]
    if value in SIZE_INDEX and value != "unknown":
        return SIZE_INDEX[value]
    if value == "initial":
        return SIZE_INDEX["medium"]
    match = _LENGTH.fullmatch(value)
    if not match:
        return SIZE_UNKNOWN
    number, unit = float(match.group(1)), match.group(2)
    if unit in ("em", "rem", "%", "ex", "ch"):
        ratio = number / 100 if unit == "%" else number / 2 if unit in ("ex", "ch") else number
        if ratio >= 1.01:
            return SIZE_INDEX["larger"]
        if ratio <= 0.99:
            return SIZE_INDEX["smaller"]
        return SIZE_UNKNOWN
    px = number * _ABS_UNITS_PX[unit]
    for limit, name in ((9, "xx-small"), (11, "x-small"), (14, "small"), (17, "medium"),
                        (22, "large"), (30, "x-large")):
        if px <= limit:
            return SIZE_INDEX[name]
    return SIZE_INDEX["xx-large"]


def _font_shorthand(value: str) -> tuple[int, int, int]:
    """Parse ``font: [style] [variant] [weight] size[/line-height] family`` loosely."""
    weight, style, size = W_UNKNOWN, S_UNKNOWN, SIZE_UNKNOWN
    for token in value.split(",")[0].split():
        token = token.split("/")[0]
        if style == S_UNKNOWN and token in ("italic", "oblique"):
            style = style_bucket(token)
        elif weight == W_UNKNOWN and (token in ("bold", "bolder", "lighter") or
                                      (token.isascii() and token.isdigit() and len(token) == 3)):
            weight = weight_bucket(token)
        elif size == SIZE_UNKNOWN and size_bucket(token) != SIZE_UNKNOWN:
            size = size_bucket(token)
    return weight, style, size


def font_features(tag: str, style: str | None, font_size_attr: str | None) -> tuple[int, int, int]:
    """(weight, style, size) bucket indices for one element.

    Inline CSS wins over the tag's presentational meaning; anything not stated is "unknown"
    (inherited), which is what the model sees for most elements. Cached, but for values longer
    than ``MAX_CACHED_CHARS``.
    """
    if (style and len(style) > MAX_CACHED_CHARS) or \
            (font_size_attr and len(font_size_attr) > MAX_CACHED_CHARS):
        return _font_features(tag, style, font_size_attr)
    return _cached_font_features(tag, style, font_size_attr)


def _font_features(tag: str, style: str | None, font_size_attr: str | None
                   ) -> tuple[int, int, int]:
    weight = _TAG_WEIGHT.get(tag, W_UNKNOWN)
    fstyle = _TAG_STYLE.get(tag, S_UNKNOWN)
    size = SIZE_INDEX[_TAG_SIZE[tag]] if tag in _TAG_SIZE else SIZE_UNKNOWN
    if tag == "font" and font_size_attr:
        size = _font_attr_size(font_size_attr)
    decls = parse_style(style)
    if decls:
        if "font" in decls:
            w, s, z = _font_shorthand(decls["font"])
            weight = w if w != W_UNKNOWN else weight
            fstyle = s if s != S_UNKNOWN else fstyle
            size = z if z != SIZE_UNKNOWN else size
        if "font-weight" in decls:
            weight = weight_bucket(decls["font-weight"])
        if "font-style" in decls:
            fstyle = style_bucket(decls["font-style"])
        if "font-size" in decls:
            size = size_bucket(decls["font-size"])
    return weight, fstyle, size


# (tag, style) pairs repeat; parsing CSS each time was a hot spot
_cached_font_features = lru_cache(maxsize=16384)(_font_features)


def _font_attr_size(value: str) -> int:
    value = value.strip()
    try:
        if value.startswith(("+", "-")):
            delta = int(value)
            return SIZE_INDEX["larger"] if delta > 0 else SIZE_INDEX["smaller"] if delta < 0 \
                else SIZE_INDEX["medium"]
        return SIZE_INDEX[_FONT_ATTR_SIZE[min(max(int(value), 1), 7)]]
    except ValueError:
        return SIZE_UNKNOWN
