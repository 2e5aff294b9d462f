"""Images of the content: which ``<img>`` elements belong to the kept text, and their URLs.

An image has no text, so the model's scores say little about it (an ``<img>`` node is rarely
kept itself). It is taken as content by where it stands among the kept runs. Its *box* is the
largest element around it that holds no kept text; the box's own dropped text is its caption
when it is short (``CAPTION_MAX_WORDS``) and not mostly link text (a teaser's is). The image is
content when

- the element around its box holds no other dropped text and at most ``ANCHOR_MAX_WORDS``
  kept words (a figure with its kept caption, a paragraph the image stands in), or
- no other dropped text stands between the kept runs before and after it; before the first
  kept run, only the image nearest to it, alone in its box, may be content (a lead photo, not
  a strip of logos).

So a related-stories box, an advertisement with its label or an author's photo beside a
dropped byline is left out, and so is an image in or up to its box marked by a class or id
such as ``ad``, ``related``, ``share``, ``author`` or ``logo``; before the content, one in a
``header``, ``nav``, ``footer`` or ``aside``. So are tracking pixels and icons (a declared size), emoji, avatars
and icons by their class (``class="emoji"``, what WordPress writes; ``avatar``, ``icon``) or
address, and images inside headings (logos in a site title).

The URL is the image's lazy-loading copy where it has one (``data-src``...: its ``src`` is then a
placeholder), else ``src``, else the widest candidate of ``srcset``; made absolute against the
page's base URL. Only http(s) URLs count: ``data:`` placeholders and scripts are no image.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import NamedTuple

import numpy as np

from scrapy_grownup.page.dom import PageStructure
from scrapy_grownup.page.urls import join_url

__all__ = ["ContentImage", "content_images", "image_list", "image_url", "safe_url"]

# The most words the box around an image may hold for its text to pass as the image's caption.
CAPTION_MAX_WORDS = 60
# The most kept words of the element around an image's box for the image to count as anchored
# in it (a caption, a paragraph; not the whole article).
ANCHOR_MAX_WORDS = 200
# Declared sizes (``width`` / ``height`` attributes, pixels): at most this on a side is a
# tracking pixel; both sides under ``ICON_MAX_SIDE`` an icon.
PIXEL_MAX_SIDE = 2
ICON_MAX_SIDE = 48
_LAZY_ATTRIBUTES = ("data-src", "data-lazy-src", "data-original", "src")
_SRCSET_ATTRIBUTES = ("srcset", "data-srcset")
# class words (``attributes.attribute_words``: "wp-smiley" reads "wp smiley")
_NOT_CONTENT_CLASSES = frozenset({"emoji", "smiley", "emoticon", "avatar", "gravatar", "icon"})
# avatars and the icons of a theme (".../images/icons/icon-replied.gif")
_NOT_CONTENT_URL = re.compile(r"gravatar\.com/avatar|/icons?[/_-]", re.IGNORECASE)
# class and id words of advertisements, teasers, share buttons, bylines and site logos
_BOILERPLATE_WORDS = frozenset("""ad ads advert adverts advertisement advertising sponsor
    sponsored promo promotion related share sharing social newsletter subscribe author avatar
    byline logo""".split())
_FRAME_TAGS = frozenset({"header", "nav", "footer", "aside"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_SIZE = re.compile(r"\s*(\d{1,6})(?:\.\d*)?\s*(?:px)?\s*$")
_SRCSET_WIDTH = re.compile(r"^(\d{1,6})w$")
_SAFE_SCHEMES = ("http://", "https://")


class ContentImage(NamedTuple):
    """A content image: its absolute URL and its text alternative (``""`` without one)."""

    url: str
    alt: str


def safe_url(base: str | None, value: str | None,
             schemes: tuple[str, ...] = _SAFE_SCHEMES) -> str | None:
    """``value`` made absolute against ``base``, when the result starts with one of ``schemes``
    (lower case); ``None`` for anything else (``javascript:``, ``data:``, an unparsable URL).
    Spaces are percent-encoded."""
    value = (value or "").strip()
    if not value or value.startswith("#"):
        return None
    url = join_url(base or "", value)
    if not url or not url.lower().startswith(schemes):
        return None
    return url.replace(" ", "%20")


def image_url(values: dict | None, base: str | None) -> str | None:
    """The URL of an ``<img>`` with the kept attributes ``values`` (see the module docstring)."""
    if not values:
        return None
    for name in _LAZY_ATTRIBUTES:
        url = safe_url(base, values.get(name))
        if url:
            return url
    for name in _SRCSET_ATTRIBUTES:
        best, width = None, -1
        for candidate in (values.get(name) or "").split(","):
            parts = candidate.split()
            if not parts:
                continue
            m = _SRCSET_WIDTH.match(parts[1]) if len(parts) > 1 else None
            size = int(m.group(1)) if m else 0
            url = safe_url(base, parts[0])
            if url and size > width:
                best, width = url, size
        if best:
            return best
    return None


def _size(value: str | None) -> int | None:
    m = _SIZE.match(value) if value else None
    return int(m.group(1)) if m else None


def _too_small(values: dict) -> bool:
    width, height = _size(values.get("width")), _size(values.get("height"))
    sides = [s for s in (width, height) if s is not None]
    if any(s <= PIXEL_MAX_SIDE for s in sides):
        return True
    return len(sides) == 2 and max(sides) < ICON_MAX_SIDE


def content_images(page: PageStructure, keep_node_mask,
                   base_url: str | None = None) -> dict[int, ContentImage]:
    """The content images of ``page`` under the node mask ``keep_node_mask``, by node, in
    document order; links resolve against ``base_url`` (default: ``<base href>``, else the page
    URL)."""
    tags = page.tags
    if "img" not in tags or not page.seg_text:
        return {}
    pos = page.seg_pos
    if pos is None or len(pos) != len(page.seg_text):  # an older structure: no run positions
        return {}
    keep = np.asarray(keep_node_mask, dtype=bool)
    kept = keep[page.seg_owner]
    kept_runs = np.flatnonzero(kept)
    if not len(kept_runs):
        return {}
    if base_url is None:
        from scrapy_grownup.output.metadata import base_url as page_base

        base_url = page_base(page)
    n = page.num_nodes
    end = page.subtree_end
    # kept runs in each subtree (a subtree is range(v, end[v]))
    counts = np.concatenate([[0], np.cumsum(np.bincount(page.seg_owner[kept], minlength=n))])
    has_kept = (counts[page.subtree_end_array] - counts[:n] > 0).tolist()
    dropped_before = np.concatenate([[0], np.cumsum(~kept)]).tolist()  # dropped runs before k
    words_before = None
    kept_words_before = None

    def kept_words(runs: range) -> int:
        nonlocal kept_words_before
        if kept_words_before is None:
            kept_words_before = np.concatenate([[0], np.cumsum(
                [t.count(" ") + 1 if k else 0 for t, k in zip(page.seg_text, kept.tolist())])]
            ).tolist()
        return kept_words_before[runs.stop] - kept_words_before[runs.start]

    from scrapy_grownup.decisions import page_memo

    in_heading = np.zeros(n, dtype=bool)
    for tag in _HEADINGS:
        for i in page_memo.tag_nodes(page, tag):
            in_heading[i:end[i]] = True
    images = page_memo.tag_nodes(page, "img")
    positions = pos.tolist()
    kept_list = kept_runs.tolist()
    parent = page.parent.tolist()
    # the last image before the first kept run: the one image before the content that may be
    # its own (a lead photo; the logos, avatars and teasers further up are not)
    lead = max((i for i in images if bisect_right(positions, i) <= kept_list[0]), default=-1)
    out: dict[int, ContentImage] = {}
    for i in images:
        if in_heading[i]:
            continue
        values = page.attrs.get(i)
        if not values or _too_small(values):
            continue
        if _NOT_CONTENT_CLASSES.intersection(page.class_words[i].split()):
            continue
        before = bisect_right(positions, i)  # runs before the image in document order
        j = bisect_right(kept_list, before - 1)  # the first kept run after it
        if j == len(kept_list):
            continue  # after the content
        box = i  # the largest element around the image without kept text
        while parent[box] > 0 and not has_kept[parent[box]]:
            box = parent[box]
        if _boilerplate(page, i, box):
            continue
        runs = page.subtree_runs(box)  # all dropped
        own = range(0)  # the image's caption: dropped text that does not count against it
        if len(runs):
            if words_before is None:
                words_before = page_memo.words_before(page).tolist()
            words = words_before[runs.stop] - words_before[runs.start]
            if words <= CAPTION_MAX_WORDS and 2 * _link_words(page, runs, box) < words:
                own = runs
        # anchored: the element around the box holds no other dropped text and little kept
        # text (a figure with its kept caption, a paragraph the image stands in)
        around = page.subtree_runs(parent[box])
        if tags[parent[box]] in ("body", "html") \
                or dropped_before[around.stop] - dropped_before[around.start] > len(own) \
                or kept_words(around) > ANCHOR_MAX_WORDS:
            if not j and (i != lead or tags[box:end[box]].count("img") > 1
                          or _in_page_frame(page, i)):
                continue  # before the content: only the image nearest to it, alone in its box
            following = kept_list[j]
            start = kept_list[j - 1] + 1 if j else before
            foreign = dropped_before[following] - dropped_before[start] \
                - max(0, min(own.stop, following) - max(own.start, start))
            if foreign > 0:
                continue
        url = image_url(values, base_url)
        if url is None or _NOT_CONTENT_URL.search(url):
            continue
        out[i] = ContentImage(url, " ".join((values.get("alt") or "").split()))
    return out


def _boilerplate(page: PageStructure, image: int, box: int) -> bool:
    """Whether the image or an element up to its box is marked as something other than
    content by its class or id (``_BOILERPLATE_WORDS``)."""
    node = image
    while node >= box:
        words = page.class_words[node] + " " + page.id_words[node]
        if words.strip() and not _BOILERPLATE_WORDS.isdisjoint(words.split()):
            return True
        node = int(page.parent[node])
    return False


def _in_page_frame(page: PageStructure, image: int) -> bool:
    """Whether the image stands in a ``header``, ``nav``, ``footer`` or ``aside`` element."""
    node = int(page.parent[image])
    while node > 0:
        if page.tags[node] in _FRAME_TAGS:
            return True
        node = int(page.parent[node])
    return False


def _link_words(page: PageStructure, runs: range, box: int) -> int:
    """Words of ``runs`` (inside ``box``) that stand in a link: a teaser's, not a caption's."""
    count = 0
    for k in runs:
        node = int(page.seg_owner[k])
        while node >= box:
            if page.tags[node] == "a":
                count += page.seg_text[k].count(" ") + 1
                break
            node = int(page.parent[node])
    return count


def image_list(images: dict[int, ContentImage]) -> list[dict]:
    """``Article.images``: ``{"url", "alt"}`` of each content image, once per URL, in order."""
    seen: set[str] = set()
    out = []
    for image in images.values():
        if image.url not in seen:
            seen.add(image.url)
            out.append({"url": image.url, "alt": image.alt})
    return out


def render_inputs(page, keep_node_mask, base_url: str | None = None,
                  images: dict | None = None):
    """What the Markdown and HTML renderers start from: ``(keep, base_url, images)`` with the
    defaults filled in (``<base href>`` else the page URL; the content images), or ``None``
    where no text run is kept. ``ValueError`` for a mask of the wrong shape."""
    keep = np.asarray(keep_node_mask, dtype=bool)
    if keep.shape != (page.num_nodes,):
        raise ValueError(f"keep_node_mask has shape {keep.shape}, expected ({page.num_nodes},)")
    if not page.seg_text or not keep[page.seg_owner].any():
        return None
    if base_url is None:
        from scrapy_grownup.output.metadata import base_url as page_base

        base_url = page_base(page)
    if images is None:
        images = content_images(page, keep, base_url)
    return keep, base_url, images
