"""Class and id attribute values as words: ``mainNav-item_2`` becomes ``main nav item``."""

from __future__ import annotations

import re
from functools import lru_cache

# The words between separators (whitespace, ``-_:./#[]()``) and digits.
_WORD = re.compile(r"[^\s\-_:./#\[\]()\d]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_CAMEL_PAIR = re.compile(r"[a-zA-Z][A-Z]")  # no camelCase boundary without one


# Values longer than this (rare, unbounded in size) are split each time rather than cached, so
# the cache stays small: 65,536 entries of at most this many characters.
MAX_CACHED_CHARS = 256


def attribute_words(value: str | None) -> str:
    """Split an attribute value into lower-case words.

    Hyphens, underscores and other punctuation separate words, camelCase boundaries split,
    digits are dropped; the result is a space-joined string (empty when nothing is left).
    Cached, but for values longer than ``MAX_CACHED_CHARS``.
    """
    if not value:
        return ""
    if len(value) > MAX_CACHED_CHARS:
        return _words(value)
    return _cached_words(value)


def _words(value: str) -> str:
    # camelCase boundaries become spaces, then one pass finds the words between separators:
    # no Python-level loop per word, so a class of a million words costs C-speed passes only.
    # The lower-casing is per word as ever ("Σ" lowers by its neighbours).
    if _CAMEL_PAIR.search(value) is not None:
        value = _CAMEL.sub(" ", value)
    return " ".join(map(str.lower, _WORD.findall(value)))


_cached_words = lru_cache(maxsize=65536)(_words)  # class names repeat across a page and a site
