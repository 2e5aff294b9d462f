"""Pages nested deeper than libxml2 parses: flatten the deep tags, keep their text.

libxml2 stops building the tree at 2,048 levels of nesting (``huge_tree`` included) and, in
recovery mode, drops everything after that point: the rest of the page, not only the deep part.
``flatten_deep`` rewrites such a document in one linear pass, leaving out the start and end tags
nested deeper than ``limit`` (their text and tails stay, inside the element at ``limit``), so a
second parse keeps the whole page. Elements that deep are never nodes anyway (they are far past
``PageLimits.max_depth``, whose cap folds deeper text into the ancestor at the cap).

Depth is counted on the tags as written (void elements and ``<x/>`` do not nest; end tags close
one level); HTML whose end tags are implied (``<p>``, ``<li>`` left open) counts deeper than
libxml2 would, which can only flatten a little more of a page that already hit the limit.
Comments and the raw text of ``script``, ``style``, ``textarea``... are copied (or, past the
limit, left out) whole, so a ``<div>`` in a script string does not count.
"""

from __future__ import annotations

import re

# libxml2's own limit is 2,048 levels; the flattened copy stays well below it.
FLATTEN_DEPTH = 1024

_MARK = re.compile(rb"<(?:!--|(/?)([A-Za-z][A-Za-z0-9:_.-]{0,63}))")
_VOID = frozenset({b"area", b"base", b"basefont", b"bgsound", b"br", b"col", b"command",
                   b"embed", b"frame", b"hr", b"image", b"img", b"input", b"isindex", b"keygen",
                   b"link", b"meta", b"param", b"source", b"track", b"wbr"})
_RAW = frozenset({b"script", b"style", b"textarea", b"title", b"xmp", b"iframe", b"noembed",
                  b"noframes", b"plaintext"})
_RAW_END = {name: re.compile(rb"</" + name + rb"\b[^>]*>", re.I) for name in _RAW}


def hit_depth_limit(parser) -> bool:
    """Whether libxml2 gave up on the document's nesting (its error log says so)."""
    return any(entry.type_name == "ERR_RESOURCE_LIMIT" and "depth" in entry.message.lower()
               for entry in parser.error_log)


def flatten_deep(data: bytes, limit: int = FLATTEN_DEPTH) -> bytes:
    """``data`` without the tags nested deeper than ``limit`` (see the module docstring)."""
    out = bytearray()
    pos = depth = 0
    size = len(data)
    while pos < size:
        mark = _MARK.search(data, pos)
        if mark is None:
            break
        start = mark.start()
        if mark.group(2) is None:  # a comment: copied whole
            end = data.find(b"-->", mark.end())
            end = size if end < 0 else end + 3
            out += data[pos:end]
            pos = end
            continue
        close = data.find(b">", mark.end())
        if close < 0:
            break
        tag_end = close + 1
        name = mark.group(2).lower()
        out += data[pos:start]
        pos = tag_end
        if mark.group(1):  # an end tag
            if name not in _VOID:
                if depth <= limit:
                    out += data[start:tag_end]
                depth = max(0, depth - 1)
            continue
        if name in _RAW:  # the element is copied or left out whole, with its raw text
            found = _RAW_END[name].search(data, tag_end)
            end = size if found is None else found.end()
            if depth + 1 <= limit:
                out += data[start:end]
            pos = end
            continue
        if name in _VOID or data[close - 1:close] == b"/":
            out += data[start:tag_end]  # nests nothing
            continue
        depth += 1
        if depth <= limit:
            out += data[start:tag_end]
    out += data[pos:]
    return bytes(out)
