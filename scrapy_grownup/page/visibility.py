"""What a reader never sees is never content; what a script-less reader sees is.

Modern pages carry whole hidden copies of their text (a ``display:none`` schema.org block, a
closed dialog, a ``<template>`` for a client-side renderer), and some put their real content in
``<noscript>`` for readers without JavaScript (Discourse forums render every post there). A
crawler sees the HTML without running its scripts, so:

- elements hidden by markup alone are removed before the walk: the ``hidden`` attribute,
  ``aria-hidden="true"``, an inline ``display:none`` / ``visibility:hidden``, ``<template>`` and a
  ``<dialog>`` without ``open``; ``html``, ``head`` and ``body`` are never removed (anti-flicker
  snippets hide the whole body until a script reveals it);
- a ``<noscript>`` inside ``body`` that holds real text (``NOSCRIPT_MIN_TEXT`` characters or
  more) is unwrapped, its children taking its place; any other ``<noscript>`` (tracking pixels,
  "please enable JavaScript") is removed.

Only markup counts: stylesheets and scripts are not evaluated.
"""

from __future__ import annotations

from functools import lru_cache

from lxml import etree

from scrapy_grownup.page.xmlsafe import xml_safe

__all__ = ["HIDDEN_MARK", "HIDING_ATTRIBUTES", "NOSCRIPT_MIN_TEXT", "hidden_by",
           "hidden_elements", "is_hidden", "mark_hidden", "remove_hidden", "resolve_noscript",
           "style_hides", "tag_hiding"]

NOSCRIPT_MIN_TEXT = 200
_NEVER_REMOVED = frozenset({"html", "head", "body"})
_HIDDEN_XPATH = etree.XPath(
    "//*[@hidden or @aria-hidden or @style or self::template or self::dialog]")


# What a tag alone says (``tag_hiding``): never hidden, always hidden, hidden unless ``open``,
# or up to the attributes.
TAG_NEVER, TAG_ALWAYS, TAG_UNLESS_OPEN, TAG_ATTRIBUTES = range(4)
# The attributes that can hide an element of any tag besides ``style``: the DOM walk reads
# them only on the few elements whose attribute names include one.
HIDING_ATTRIBUTES = ("hidden", "aria-hidden")
MAX_STYLE_CHARS = 10_000  # a longer ``style`` is not read for hiding
_MAX_CACHED_STYLE = 256  # longer styles are checked each time, so the cache stays small


def _compact_style_hides(style: str) -> bool:
    compact = "".join(style.lower().split())
    return "display:none" in compact or "visibility:hidden" in compact


_cached_style_hides = lru_cache(maxsize=4096)(_compact_style_hides)  # styles repeat on a site


def style_hides(style: str | None) -> bool:
    """Whether an inline ``style`` hides its element (``display:none``, ``visibility:hidden``)."""
    if not style or len(style) >= MAX_STYLE_CHARS:
        return False
    if len(style) > _MAX_CACHED_STYLE:
        return _compact_style_hides(style)
    return _cached_style_hides(style)


def tag_hiding(tag: str) -> int:
    """``TAG_*`` for a lower-case local tag name."""
    if tag in _NEVER_REMOVED:
        return TAG_NEVER
    if tag == "template":
        return TAG_ALWAYS
    return TAG_UNLESS_OPEN if tag == "dialog" else TAG_ATTRIBUTES


def hidden_by(hiding: int, get, style: str | None) -> bool:
    """``is_hidden`` from the tag's ``tag_hiding``, the element's ``get`` and its ``style``."""
    if hiding == TAG_NEVER:
        return False
    if hiding == TAG_ALWAYS or (hiding == TAG_UNLESS_OPEN and get("open") is None):
        return True
    if get("hidden") is not None:
        return True
    if (get("aria-hidden") or "").strip().lower() == "true":
        return True
    return style_hides(style)


def is_hidden(el) -> bool:
    """Whether markup alone hides ``el`` (see the module docstring for the rules)."""
    tag = el.tag if isinstance(el.tag, str) else ""
    return hidden_by(tag_hiding(tag.rsplit("}", 1)[-1].lower()), el.get, el.get("style"))


def _append_tail(el, text: str) -> None:
    """Add ``text`` to the end of ``el``'s tail. Every move of text goes through here or
    ``_append_text``: a tree from libxml2 may hold characters lxml refuses to set (``xml_safe``)."""
    el.tail = xml_safe((el.tail or "") + text)


def _append_text(el, text: str) -> None:
    """Add ``text`` to the end of ``el``'s own text (before its first child)."""
    el.text = xml_safe((el.text or "") + text)


def _drop_keep_tail(el) -> None:
    """Remove ``el`` and its subtree; its tail text stays where it was."""
    parent = el.getparent()
    if parent is None:
        return
    tail = el.tail
    if tail:
        previous = el.getprevious()
        if previous is not None:
            _append_tail(previous, tail)
        else:
            _append_text(parent, tail)
    parent.remove(el)


HIDDEN_MARK = "data-grownup-hidden"


def hidden_elements(root) -> list:
    """The elements of ``root``'s tree that markup hides (``is_hidden``), in document order."""
    return [el for el in _HIDDEN_XPATH(root) if is_hidden(el)]


def mark_hidden(root) -> list:
    """Mark every element hidden by markup (``HIDDEN_MARK``, read by the DOM walk into the
    layout features); returns them."""
    hidden = hidden_elements(root)
    for el in hidden:
        el.set(HIDDEN_MARK, "1")
    return hidden


def remove_hidden(root) -> int:
    """Remove every element hidden by markup from the tree; returns how many subtrees went."""
    hidden = hidden_elements(root)
    removed = 0
    for el in hidden:
        # An element inside an already removed subtree has no path to the root any more.
        if any(ancestor is root for ancestor in el.iterancestors()) or el is root:
            _drop_keep_tail(el)
            removed += 1
    return removed


def resolve_noscript(root) -> None:
    """Unwrap ``<noscript>`` elements in ``body`` that hold real text; remove the others."""
    for el in list(root.iter("noscript")):
        if el.getparent() is None:
            continue
        in_body = any(a.tag == "body" for a in el.iterancestors())
        text_length = sum(len(t.strip()) for t in el.itertext())
        if in_body and text_length >= NOSCRIPT_MIN_TEXT:
            _unwrap(el)
        else:
            _drop_keep_tail(el)


def _unwrap(el) -> None:
    """Replace ``el`` by its children, keeping its text and tail in place."""
    parent = el.getparent()
    index = parent.index(el)
    previous = el.getprevious()
    leading = el.text or ""
    if leading:
        if previous is not None:
            _append_tail(previous, leading)
        else:
            _append_text(parent, leading)
    children = list(el)
    tail = el.tail or ""
    parent.remove(el)
    for offset, child in enumerate(children):
        parent.insert(index + offset, child)
    if tail:
        if children:
            _append_tail(children[-1], tail)
        else:
            prev = parent[index - 1] if index > 0 else None
            if prev is not None:
                _append_tail(prev, tail)
            else:
                _append_text(parent, tail)
