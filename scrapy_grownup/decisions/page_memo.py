"""What the decisions and the article's fields read of a page alone, computed once per page.

Building an article reads the same page-only arrays many times: the rescorer, each pass of
``refine.content_mask`` and the metadata each want the text lengths, the depth levels, every
node's block or the nodes of one tag. A page is not changed once parsed (``PageStructure``
caches its own derived lists the same way), so each is kept in the page's ``__dict__`` beside
those caches, read-only, and goes with the page.
"""

from __future__ import annotations

from itertools import repeat
from typing import Callable

import numpy as np

from scrapy_grownup.page.dom import PageStructure
from scrapy_grownup.page.tree import depth_levels

__all__ = ["memo", "text_lengths", "levels", "parent64", "tag_index", "tag_nodes",
           "attribute_nodes", "words_before"]

_KEY = "_decisions_memo"


def memo(page: PageStructure, name: str, compute: Callable[[], object]):
    """``compute()``, once per page and ``name``; an array comes back read-only."""
    store = page.__dict__.get(_KEY)
    if store is None:
        store = page.__dict__[_KEY] = {}
    value = store.get(name)
    if value is None:
        value = compute()
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
        store[name] = value
    return value


def text_lengths(page: PageStructure) -> np.ndarray:
    """``page.text_lengths()`` (int32 [n]: each node's own text length)."""
    return memo(page, "lengths", page.text_lengths)


def levels(page: PageStructure) -> list[np.ndarray]:
    """``tree.depth_levels`` of the page."""
    return memo(page, "levels", lambda: depth_levels(page.depth))


def parent64(page: PageStructure) -> np.ndarray:
    """``page.parent`` as int64."""
    return memo(page, "parent64", lambda: page.parent.astype(np.int64))


def _group(pairs) -> dict[str, list[int]]:
    """``{key: [node, ...]}`` of ``(node, key)`` pairs, nodes in the pairs' order."""
    index: dict[str, list[int]] = {}
    for i, key in pairs:
        nodes = index.get(key)
        if nodes is None:
            index[key] = [i]
        else:
            nodes.append(i)
    return index


def tag_index(page: PageStructure) -> dict[str, list[int]]:
    """Each tag of the page and its nodes, in document order (shared: not to be changed)."""
    return memo(page, "tags", lambda: _group(enumerate(page.tags)))


def tag_nodes(page: PageStructure, tag: str) -> list[int]:
    """The nodes of ``tag``, in document order (a shared list: not to be changed)."""
    return tag_index(page).get(tag, [])


def attribute_nodes(page: PageStructure, name: str) -> list[int]:
    """The nodes whose kept attributes (``page.attrs``) hold ``name``, in ``page.attrs``'s
    order (a shared list: not to be changed). The metadata and the decisions each look for
    one or two attributes among every node's: one pass over ``page.attrs`` serves them all."""
    return memo(page, "attributes", lambda: _group(
        (i, key) for i, values in page.attrs.items() for key in values)).get(name, [])


def words_before(page: PageStructure) -> np.ndarray:
    """int64 [runs + 1]: the words of the text runs before each run (a run's words are its
    spaces plus one)."""
    def compute():
        texts = page.seg_text
        out = np.zeros(len(texts) + 1, dtype=np.int64)
        spaces = np.fromiter(map(str.count, texts, repeat(" ")), dtype=np.int64,
                             count=len(texts))
        np.cumsum(spaces + 1, out=out[1:])
        return out

    return memo(page, "words_before", compute)
