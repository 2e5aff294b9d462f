"""Page-level signals of a page's type that the DOM graph does not see: serving code.

``page_signals(page)`` is a fixed-length float vector read from a parsed page alone (no model,
no training imports), in named groups (``SIGNAL_GROUPS``):

- ``url``: the URL path's tokens hashed into ``URL_BUCKETS`` buckets (``/forum/``,
  ``/products/``, ``/docs/``, ``/category/`` ...), and its shape (depth, a date, a numeric id,
  a long slug, a query, the site root);
- ``schema``: which schema.org types the page's JSON-LD names and its ``og:type``;
- ``dom``: counts of forms, inputs, buttons, list items, code blocks, tables, images...,
  the share of the text inside links, repeated sibling structures (cards, posts, rows),
  prices and cart words;
- ``attrs``: cue words in class and id attributes (``product``, ``price``, ``post``,
  ``thread``, ``card``, ``toc`` ...).

Counts are ``log1p``-scaled; the vector is what a page-type classifier reads next to the text.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from functools import lru_cache
from urllib.parse import urlsplit

import numpy as np

from scrapy_grownup.page.dom import PageStructure
from scrapy_grownup.graph.repetition import own_text, sibling_groups
from scrapy_grownup.page.tags import TAG_INDEX
from scrapy_grownup.page.tree import range_inherit, range_sum

__all__ = ["SIGNAL_VERSION", "SIGNAL_GROUPS", "SIGNAL_DIM", "page_signals", "url_tokens"]

SIGNAL_VERSION = "1"
URL_BUCKETS = 64
URL_SHAPE = ("depth", "date", "numeric", "slug_words", "query", "root", "extension")
SCHEMA_TYPES = (
    "article", "newsarticle", "blogposting", "techarticle", "report", "product", "offer",
    "aggregaterating", "review", "qapage", "question", "answer", "discussionforumposting",
    "comment", "socialmediaposting", "itemlist", "collectionpage", "searchresultspage",
    "breadcrumblist", "service", "professionalservice", "localbusiness", "organization",
    "faqpage", "howto", "softwareapplication", "softwaresourcecode", "event", "recipe",
    "webpage", "website", "person", "jobposting", "course")
OG_TYPES = ("article", "product", "website", "blog", "profile", "book", "video")
DOM_COUNTS = ("form", "input", "button", "select", "textarea", "a", "li", "article", "h1", "h2",
              "h3", "pre", "code", "table", "tr", "img", "time", "nav", "aside", "dl", "kbd",
              "blockquote", "iframe", "video")
DOM_SHAPE = ("nodes", "text_chars", "link_text_share", "li_text_share", "segments",
             "words_per_segment", "max_repeat", "repeat_groups", "repeat_nodes_share",
             "prices", "cart_words", "date_strings", "title_words")
ATTR_WORDS = (
    "product", "price", "cart", "sku", "stock", "buy", "shop", "add", "variant", "rating",
    "post", "thread", "reply", "replies", "comment", "forum", "topic", "message", "user",
    "avatar", "vote", "answer", "question", "card", "item", "grid", "tile", "list", "listing",
    "result", "results", "teaser", "excerpt", "pagination", "pager", "filter", "sort", "facet",
    "category", "docs", "doc", "toc", "sidebar", "api", "highlight", "hljs", "syntax",
    "breadcrumb", "article", "entry", "author", "byline", "date", "share", "related", "service",
    "services", "cta", "hero", "contact", "faq", "testimonial", "pricing", "feature", "search")
SIGNAL_GROUPS = {"url": URL_BUCKETS + len(URL_SHAPE),
                 "schema": len(SCHEMA_TYPES) + len(OG_TYPES),
                 "dom": len(DOM_COUNTS) + len(DOM_SHAPE),
                 "attrs": len(ATTR_WORDS)}
SIGNAL_DIM = sum(SIGNAL_GROUPS.values())

_WORD = re.compile(r"[a-z][a-z0-9]*")
_TYPE = re.compile(r'"@type"\s*:\s*(\[[^\]]*\]|"[^"]*")')
# The cue patterns run on the lower-cased text (no re.I: case-insensitive scans are 2x slower)
# and open with a literal or a character class, not ``\b``, so the scanner can skip ahead; the
# word boundary before a match is a look-behind placed after its first letters.
# An amount before a currency word starts at the first digit of a number and is at most 31
# characters: unbounded, every digit of a long run rescanned the rest of it (a 16,000-digit
# text took 4 s). A price opens with a currency sign or a digit, one class the scanner skips
# ahead by; a look-behind then says which of the two it was.
_PRICE = re.compile(r"[$€£¥\d](?:(?<=[$€£¥])\s?\d[\d.,]*|"
                    r"(?<=\d)(?<!\d\d)[\d.,]{0,30}\s?(?:€|usd|eur|gbp)\b)")
_CART = re.compile(r"(?:a(?<!\w.)dd to (?:cart|bag|basket)|i(?<!\w.)n stock|o(?<!\w.)ut of stock|"
                   r"c(?<!\w.)heckout|b(?<!\w.)uy now|a(?<!\w.)dd to wishlist|"
                   r"f(?<!\w.)ree shipping|q(?<!\w.)uantity)\b")
_CART_WORDS = ("cart", "bag", "basket", "stock", "checkout", "buy now", "wishlist", "shipping",
               "quantity")  # a page with none of these has no cart phrase: skip the scan
_NUMERIC_DATE = re.compile(r"(?:19|20)(?<!\w..)\d\d[-/.](?:0?[1-9]|1[0-2])[-/.]"
                           r"(?:[0-2]?\d|3[01])\b")
_MONTH_DATE = re.compile(r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)(?<!\w...)"
                         r"[a-z]*\.? \d{1,2},? (?:19|20)\d\d\b")
_ATTR_INDEX = {w: i for i, w in enumerate(ATTR_WORDS)}
_A, _LI = TAG_INDEX["a"], TAG_INDEX["li"]


def url_tokens(url: str | None) -> list[str]:
    """Lower-case word tokens of a URL's path (digits-only parts left out)."""
    if not url:
        return []
    try:
        path = urlsplit(url).path.lower()
    except ValueError:
        return []
    return _WORD.findall(path)


def _bucket(token: str, buckets: int) -> int:
    return zlib.crc32(token.encode("utf-8")) % buckets


def _url_part(url: str | None) -> np.ndarray:
    out = np.zeros(URL_BUCKETS + len(URL_SHAPE), dtype=np.float32)
    for token in set(url_tokens(url)):
        out[_bucket(token, URL_BUCKETS)] = 1.0
    try:
        parts = urlsplit(url or "")
    except ValueError:
        return out
    segments = [s for s in parts.path.split("/") if s]
    last = segments[-1] if segments else ""
    shape = [
        np.log1p(len(segments)),
        float(bool(re.search(r"/(?:19|20)\d\d/", parts.path))),
        float(any(s.isdigit() for s in segments) or bool(re.search(r"\d{4,}", last))),
        np.log1p(len([w for w in re.split(r"[-_]", last.rsplit(".", 1)[0]) if w])),
        float(bool(parts.query)),
        float(not segments),
        float("." in last),
    ]
    out[URL_BUCKETS:] = shape
    return out


def _schema_part(page: PageStructure) -> np.ndarray:
    names: set[str] = set()
    for doc in page.json_ld or ():
        for found in _TYPE.findall(doc):
            names.update(n.lower() for n in re.findall(r"[A-Za-z]+", found))
    out = np.zeros(len(SCHEMA_TYPES) + len(OG_TYPES), dtype=np.float32)
    for i, name in enumerate(SCHEMA_TYPES):
        out[i] = float(name in names)
    og = (page.meta or {}).get("og:type", "").lower()
    for i, name in enumerate(OG_TYPES):
        out[len(SCHEMA_TYPES) + i] = float(og.startswith(name))
    return out


def _cart_phrases(low: str) -> int:
    if not any(word in low for word in _CART_WORDS):
        return 0
    return len(_CART.findall(low))


def _dom_part(page: PageStructure) -> np.ndarray:
    tags = page.tags
    n = len(tags)
    counts = Counter(tags)
    parent = np.asarray(page.parent, dtype=np.int64)
    end = page.subtree_end_array
    tag_ids = np.asarray(page.tag_ids)
    own = own_text(page)  # characters of text each node owns
    inside = range_inherit(np.stack([tag_ids == _A, tag_ids == _LI], axis=1), end)
    in_link, in_li = inside[:, 0], inside[:, 1]
    total = float(own.sum())
    # repeated sibling structures: siblings sharing tag + class, each with some text below
    subtree_text = range_sum(own, end)
    _, sizes = sibling_groups(page, parent, subtree_text)
    repeats = [int(c) for c in sizes if c >= 4]
    text = " ".join(page.seg_text)
    low = text.lower()
    words = len(text.split())
    segments = len(page.seg_text)
    shape = [
        np.log1p(n), np.log1p(total),
        float(own[in_link].sum() / total) if total else 0.0,
        float(own[in_li].sum() / total) if total else 0.0,
        np.log1p(segments), np.log1p(words / segments) if segments else 0.0,
        np.log1p(max(repeats, default=0)), np.log1p(len(repeats)),
        float(sum(repeats) / n) if n else 0.0,
        np.log1p(len(_PRICE.findall(low))), np.log1p(_cart_phrases(low)),
        np.log1p(len(_NUMERIC_DATE.findall(low)) + len(_MONTH_DATE.findall(low))),
        np.log1p(len((page.title or "").split())),
    ]
    return np.asarray([np.log1p(counts.get(t, 0)) for t in DOM_COUNTS] + shape,
                      dtype=np.float32)


@lru_cache(maxsize=16_384)
def _word_attr_indices(word: str) -> frozenset[int]:
    """The ``ATTR_WORDS`` indices of the tokens in one word of a class or id value. Words
    repeat across pages far more than whole values, and no token spans a space, so a value's
    indices are the union of its words'."""
    indices = (_ATTR_INDEX.get(token) for token in _WORD.findall(word.lower()))
    return frozenset(k for k in indices if k is not None)


def _attrs_part(page: PageStructure) -> np.ndarray:
    out = np.zeros(len(ATTR_WORDS), dtype=np.float32)
    for words in (page.class_words, page.id_words):
        for value, times in Counter(words).items():
            if not value:
                continue
            found = set()
            for word in value.split():
                found |= _word_attr_indices(word)
            for k in found:
                out[k] += times
    return np.log1p(out)


def page_signals(page: PageStructure, url: str | None = None) -> np.ndarray:
    """``[SIGNAL_DIM]`` float32 signals of ``page`` (``url``: instead of ``page.url``)."""
    return np.concatenate([_url_part(url if url is not None else page.url), _schema_part(page),
                           _dom_part(page), _attrs_part(page)]).astype(np.float32)
