"""What a node's class and id words say it is: related-story rail, newsletter box, share bar,
comments, consent notice, advert, navigation, article body, media, metadata, screen-reader
text, product details, card.

Templates name their boxes in a shared vocabulary (``related-posts``, ``newsletterSignup``,
``article__body``), and boilerplate detectors since Readability have read it. The content
model sees these words only through a sentence embedding of each node's own class and id; the
block rescorer reads the flags below for a block and for everything around it (a paragraph
inside ``<div class="teaser-list">`` is inside a teaser list, however plain its own markup).
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

__all__ = ["CUE_NAMES", "attribute_cues", "cue_bits", "cue_columns"]

# Matched against ``attributes.attribute_words`` (lower-case words, camelCase and separators
# split), whole words only, so "header" never matches "headline" and "ad" never "add".
_CUES = {
    "related": r"related|recommend\w*|teaser\w*|promo\w*|outbrain|taboola|trending|popular|most"
               r"|more|also|suggest\w*|recirc\w*|next|prev\w*|pager|pagination",
    "subscribe": r"newsletter\w*|subscri\w*|signup|paywall|premium|register|login|account|cta"
                 r"|plus",
    "share": r"share\w*|social|facebook|twitter|whatsapp|linkedin|pinterest|print|mail|email",
    "comment": r"comments?|disqus|respond|reply|replies|discussion",
    "consent": r"cookie\w*|consent|gdpr|privacy|modal|popup|overlay|dialog|notice|alert",
    "advert": r"ads?|advert\w*|sponsor\w*|dfp|gpt|anzeige\w*|werbung|banner|commercial"
              r"|affiliate",
    "navigation": r"nav\w*|menu\w*|breadcrumbs?|header|footer|sidebar|widget\w*|toolbar|skip"
                  r"|masthead|topbar",
    "body": r"article\w*|content|body|post|entry|story|text|main|prose|richtext|rte|paragraph"
            r"|copy",
    "media": r"caption|figure|figcaption|credit|image|img|photo\w*|media|video|gallery|picture",
    "metadata": r"author\w*|byline|date|time|meta|tags?|keywords?|category|categories|kicker"
                r"|label|badge",
    "hidden": r"hidden|sr|only|visually|screen|reader|offscreen|invisible|collapsed?",
    "product": r"price|cart|basket|buy|checkout|product\w*|sku|review\w*|rating\w*|stars?"
               r"|spec\w*|description|details?",
    "card": r"card\w*|tile\w*|item\w*|grid|list\w*|thumb\w*|feed|stream|river|collection",
}
CUE_NAMES: tuple[str, ...] = tuple(_CUES)
_PATTERNS = tuple(re.compile(rf"\b(?:{words})\b") for words in _CUES.values())
# All the cues' words at once: a word it does not match has no cue (most words), one search
# instead of one per cue.
_ANY_CUE = re.compile(rf"\b(?:{'|'.join(_CUES.values())})\b")


_BITS = np.array([1 << k for k in range(len(CUE_NAMES))], dtype=np.int64)


@lru_cache(maxsize=65_536)
def _word_cues(word: str) -> int:
    """The cues of one word, as bits. A pattern is whole words of word characters, so it never
    matches across a space: the cues of a string are the union of its words' cues, and words
    repeat across pages far more than whole class strings do."""
    if _ANY_CUE.search(word) is None:
        return 0
    return sum(1 << k for k, pattern in enumerate(_PATTERNS) if pattern.search(word))


@lru_cache(maxsize=16_384)
def _cues_of(words: str) -> int:
    bits = 0
    for word in words.split():
        bits |= _word_cues(word)
    return bits


def cue_bits(class_words: list[str], id_words: list[str]) -> np.ndarray:
    """int64 [len(class_words)]: the cues of each node's class and id words together, bit k
    for ``CUE_NAMES[k]`` (a word's cues, see ``_word_cues``); bits OR down a tree cheaply."""
    n = len(class_words)
    bits = np.fromiter(map(_cues_of, class_words), dtype=np.int64, count=n)
    bits |= np.fromiter(map(_cues_of, id_words), dtype=np.int64, count=n)
    return bits


def cue_columns(bits: np.ndarray) -> np.ndarray:
    """bool [len(bits), len(CUE_NAMES)] of ``cue_bits``."""
    return (bits[:, None] & _BITS) != 0


def attribute_cues(page) -> np.ndarray:
    """bool [n, len(CUE_NAMES)]: which cues each node's own class and id words hold."""
    return cue_columns(cue_bits(page.class_words, page.id_words))
