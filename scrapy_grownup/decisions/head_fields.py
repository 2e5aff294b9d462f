"""Article fields from the page-type and block-role heads: serving code, no training imports.

``page_type`` / ``page_type_score`` come from the page-type head (or the page-type classifier
that replaces its scores; its ``page_type`` is None below ``page_type.RELIABLE_SCORE``, the score
kept); ``comments`` (text of the nodes the role head calls comments) and ``related_links``
(links whose text is mostly in nodes it calls related) from the role head.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from scrapy_grownup.output.assembly import assemble_text
from scrapy_grownup.page.dom import PageStructure

__all__ = ["head_fields", "related_links", "subtree_sizes"]


def head_fields(page: PageStructure, outputs: dict, page_type_names: Sequence[str],
                role_names: Sequence[str]) -> dict:
    """``Article`` fields from one page's head outputs: ``page_type`` and ``page_type_score``
    (page-type head; ``page_type`` None where the score is under
    ``page_type_reliable_score``, which the page-type classifier sets), ``comments`` and
    ``related_links`` (role head); a missing head leaves its fields out (so they stay None)."""
    fields: dict = {}
    page_type = outputs.get("page_type")
    if page_type is not None and len(page_type):
        from scrapy_grownup.decisions.page_type import reliable_page_type

        best = int(np.argmax(page_type))
        fields["page_type_score"] = float(page_type[best])
        # the page-type classifier's type only where its score is in its reliable range
        fields["page_type"] = reliable_page_type(str(page_type_names[best]),
                                                 fields["page_type_score"],
                                                 outputs.get("page_type_reliable_score"))
    roles = outputs.get("roles")
    if roles is not None:
        role = np.asarray(roles).argmax(1)
        names = list(role_names)
        if "comments" in names:
            fields["comments"] = assemble_text(page, role == names.index("comments"))
        if "related" in names:
            fields["related_links"] = related_links(page, role == names.index("related"))
    return fields


def subtree_sizes(parent: np.ndarray) -> np.ndarray:
    """Nodes in each node's subtree (pre-order: node i's subtree is ``i .. i + size - 1``)."""
    sizes = np.ones(len(parent), dtype=np.int64)
    par = parent.tolist()
    for i in range(len(par) - 1, 0, -1):
        if par[i] >= 0:
            sizes[par[i]] += sizes[i]
    return sizes


_SKIP_HREF = ("javascript:", "mailto:", "tel:", "#", "data:")


def related_links(page: PageStructure, related: np.ndarray) -> list[dict]:
    """``{"text", "url"}`` of each link whose text is mostly in nodes of the related role.

    URLs are resolved against ``<base href>`` / the page URL; a URL is listed once.
    """
    from scrapy_grownup.output.metadata import base_url
    from scrapy_grownup.page.urls import join_url

    attrs = getattr(page, "attrs", None) or {}
    if not related.any() or not attrs:
        return []
    lengths = page.text_lengths()
    sizes = subtree_sizes(page.parent)
    base = base_url(page) or ""  # a bad <base href> is ignored
    texts = page.node_text
    out, seen = [], set()
    for i, tag in enumerate(page.tags):
        if tag != "a":
            continue
        href = (attrs.get(i) or {}).get("href", "").strip()
        if not href or href.lower().startswith(_SKIP_HREF):
            continue
        lo, hi = i, i + int(sizes[i])
        chars = lengths[lo:hi]
        total = int(chars.sum())
        if not total or 2 * int(chars[related[lo:hi]].sum()) <= total:
            continue
        url = join_url(base, href)
        if url is None or url in seen:
            continue
        seen.add(url)
        out.append({"text": " ".join(t for t in texts[lo:hi] if t), "url": url})
    return out
