"""Features that mean the same on every site: how much text a subtree holds, how much of it is
link text, where it sits in reading order, and which landmark it is inside.

Sentence embeddings of a node's text, class and id carry a site's vocabulary; a model that
leans on them learns the boilerplate of the sites it saw. These numbers describe the page the
way boilerplate detectors since Kohlschütter's have (text and link density), plus the HTML5
and ARIA landmarks that modern templates mark their navigation, banners, footers and main
content with, and whether markup hides the node (``visibility.is_hidden``, inherited). One row of ``LAYOUT_DIM`` floats per node, all in [0, 1] or close to it.
"""

from __future__ import annotations

import re
from itertools import repeat

import numpy as np

from scrapy_grownup.page.tree import range_inherit, range_sum

__all__ = ["ARIA_ROLES", "LAYOUT_BLOCKS", "LAYOUT_DIM", "layout_column", "layout_features"]

_LANDMARK_TAGS = ("nav", "header", "footer", "aside", "form", "menu")
ARIA_ROLES = ("navigation", "banner", "contentinfo", "complementary", "main")
_MAIN_TAGS = ("article", "main")
LAYOUT_BLOCKS: tuple[tuple[str, int], ...] = (
    ("subtree_text", 1), ("link_density", 1), ("in_link", 1), ("text_density", 1),
    ("punctuation", 1), ("sentences", 1), ("position", 1), ("relative_depth", 1),
    ("text_share", 1), ("landmark", len(_LANDMARK_TAGS)), ("aria_role", len(ARIA_ROLES)),
    ("article_body", 1), ("main", len(_MAIN_TAGS)), ("hidden", 1),
)
LAYOUT_DIM = sum(size for _, size in LAYOUT_BLOCKS)
_PUNCT = re.compile(r"[^\w\s]")
_SENTENCE_END = re.compile(r"[.!?。！？](?:\s|$)")


def layout_column(name: str) -> slice:
    """The columns of ``layout_features`` that block ``name`` of ``LAYOUT_BLOCKS`` fills."""
    start = 0
    for block, size in LAYOUT_BLOCKS:
        if block == name:
            return slice(start, start + size)
        start += size
    raise KeyError(name)


def layout_features(page) -> np.ndarray:
    """float32 [n, LAYOUT_DIM] for a ``PageStructure`` (blocks as in ``LAYOUT_BLOCKS``)."""
    n = page.num_nodes
    depth = page.depth.astype(np.int64)
    end = page.subtree_end_array  # all sums below are of whole numbers: by ranges
    tags = page.tags
    texts = page.node_text
    own = np.fromiter(map(len, texts), dtype=np.float64, count=n)
    punct = np.zeros(n)
    sentences = np.zeros(n)
    for i in np.nonzero(own)[0].tolist():
        text = texts[i]
        punct[i] = len(_PUNCT.findall(text))
        sentences[i] = len(_SENTENCE_END.findall(text))
    attrs = page.attrs
    flags = np.zeros((n, 3 + len(_LANDMARK_TAGS) + len(ARIA_ROLES) + len(_MAIN_TAGS)),
                     dtype=bool)
    hidden_column = flags.shape[1] - 1
    tag_column = {tag: 1 + k for k, tag in enumerate(_LANDMARK_TAGS)}
    tag_column.update({tag: 2 + len(_LANDMARK_TAGS) + len(ARIA_ROLES) + k
                       for k, tag in enumerate(_MAIN_TAGS)})
    tag_column["a"] = 0
    role_column = {role: 1 + len(_LANDMARK_TAGS) + k for k, role in enumerate(ARIA_ROLES)}
    body_column = 1 + len(_LANDMARK_TAGS) + len(ARIA_ROLES)
    columns = np.fromiter(map(tag_column.get, tags, repeat(-1, n)), dtype=np.int64, count=n)
    tagged = np.flatnonzero(columns >= 0)
    flags[tagged, columns[tagged]] = True
    for i, values in attrs.items():
        role = values.get("role")
        if role:
            for word in role.lower().split():
                column = role_column.get(word)
                if column is not None:
                    flags[i, column] = True
        itemprop = values.get("itemprop")
        if itemprop and "articlebody" in itemprop.lower():
            flags[i, body_column] = True
        if values.get("hidden"):
            flags[i, hidden_column] = True
    flags = range_inherit(flags, end)
    in_link = flags[:, 0]
    subtree_text = range_sum(own, end)
    link_text = range_sum(own * in_link, end)
    subtree_nodes = (end - np.arange(n)).astype(np.float64)
    subtree_sentences = range_sum(sentences, end)
    total = max(1.0, subtree_text[0])
    out = np.empty((n, LAYOUT_DIM), dtype=np.float32)
    out[:, 0] = np.log1p(subtree_text) / 10.0
    out[:, 1] = np.divide(link_text, subtree_text, out=np.zeros(n), where=subtree_text > 0)
    out[:, 2] = in_link
    out[:, 3] = np.log1p(subtree_text / subtree_nodes) / 6.0
    out[:, 4] = np.divide(punct, own, out=np.zeros(n), where=own > 0)
    out[:, 5] = np.log1p(subtree_sentences) / 5.0
    out[:, 6] = np.arange(n) / max(1, n - 1)
    out[:, 7] = depth / max(1, int(depth.max()))
    out[:, 8] = subtree_text / total
    out[:, 9:] = flags[:, 1:]
    return out
