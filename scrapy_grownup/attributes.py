"""Class and id attribute values as words: ``mainNav-item_2`` becomes ``main nav item``."""

from __future__ import annotations

import re
from functools import lru_cache

_SEPARATORS = re.compile(r"[\s\-_:./#\[\]()]+|\d+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


@lru_cache(maxsize=65536)  # class names repeat across a page and a site
def attribute_words(value: str | None) -> str:
    """Split an attribute value into lower-case words.

    Hyphens, underscores and other punctuation separate words, camelCase boundaries split,
    digits are dropped; the result is a space-joined string (empty when nothing is left).
    """
    if not value:
        return ""
    words: list[str] = []
    for part in _SEPARATORS.split(value):
        if part:
            words.extend(w.lower() for w in _CAMEL.split(part) if w)
    return " ".join(words)
