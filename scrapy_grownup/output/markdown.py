"""Article markdown from the content nodes: headings, lists, tables, links, emphasis, code.

The keep rule is ``assemble_text``'s: a text run appears when the node that owns it is kept, so
the words are exactly those of the plain text and no run is written twice. The markup around a
run comes from its ancestors whether or not they are kept: a kept ``li`` is a list item even
when the model scored its ``ul`` low. Content images (``images.content_images``) stand where
they are in the page, as ``![alt](url)``.

``output.html`` renders the same walk (``_Renderer``) as HTML.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import NamedTuple

import numpy as np

from scrapy_grownup.output.assembly import attr_int, data_tables, pre_text, run_separators
from scrapy_grownup.page.dom import SEP_BLOCK, SEP_SPACE, PageStructure
from scrapy_grownup.page.tags import BLOCK_TAGS
from scrapy_grownup.page.urls import join_url
from scrapy_grownup.page.xmlsafe import xml_safe
from scrapy_grownup.output.images import render_inputs

__all__ = ["to_markdown"]

# Placeholders in partial output, resolved by ``_finish``: a block boundary from an element, a
# line break (``<br>``), a paragraph break from the text flow (boilerplate or an empty block
# element between two kept runs).
_BLOCK, _LINE, _FLOW = "\x00", "\x01", "\x02"
# A run of spaces, newlines and placeholders holding at least one placeholder. Linear on any
# input (``<pre>`` keeps whitespace runs of any length): a match starts only where a run starts,
# and the possessive spaces before the first placeholder are never given back. The former
# ``[ \n\x00-\x02]*[\x00-\x02]...`` rescanned a run from each of its characters: 10-42 s on long
# whitespace runs in ``<pre>``.
_GAP = re.compile(r"(?<![ \n\x00\x01\x02])[ \n]*+[\x00\x01\x02][ \n\x00\x01\x02]*+")
_EDGE_CHARS = " \n\x00\x01\x02"

_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_STRONG = frozenset({"strong", "b"})
_EMPHASIS = frozenset({"em", "i", "cite", "dfn"})
_STRIKE = frozenset({"del", "s", "strike"})
_NO_LINK = ("javascript:", "data:", "vbscript:")
# A content image as ``image`` writes it, alone or as a link.
_IMAGE = re.compile(r"(\[)?!\[(?:\\.|[^\]\\])*\]\([^)\s]*\)(?(1)\]\([^)\s]*\))")
_LANGUAGE = re.compile(r"(?:^|\s)(?:language|lang|highlight-source|highlight)-([\w+#.-]+)")


class _Ctx(NamedTuple):
    code: bool = False  # inside code: no escaping, no markup
    link: bool = False
    strong: bool = False
    emphasis: bool = False
    table: bool = False  # inside a table cell: one line, "|" escaped
    heading: bool = False  # one line: no line-start escapes
    no_images: bool = False  # the text alone (a link's, to see whether it would be one)


def to_markdown(page: PageStructure, keep_node_mask, base_url: str | None = None,
                images: dict | None = None) -> str:
    """Markdown of the runs whose owner node is kept, with the content images
    (``images.content_images``, computed here unless given) as ``![alt](url)``; links resolve
    against ``base_url`` (default: ``<base href>``, else the page URL)."""
    inputs = render_inputs(page, keep_node_mask, base_url, images)
    return _Renderer(page, *inputs).render() if inputs is not None else ""


class _Renderer:
    def __init__(self, page: PageStructure, keep: np.ndarray, base_url: str | None,
                 images: dict | None = None):
        self.page, self.base = page, base_url or ""
        self.images = images or {}
        self.image_nodes = sorted(self.images)
        self.tags = page.tags
        n = page.num_nodes
        kept = keep[page.seg_owner]
        self.kept = kept.tolist()
        # Separator before each kept run, as in the plain text (``assembly.run_separators``).
        self.sep = run_separators(page, kept).tolist()
        self.tables = data_tables(page)
        # Nodes with kept text or a content image in their subtree (a subtree is
        # range(i, end[i])); only those and their children are visited.
        owners = page.seg_owner[kept]
        if self.images:
            owners = np.concatenate([owners, np.fromiter(self.images, dtype=owners.dtype)])
        counts = np.concatenate([[0], np.cumsum(np.bincount(owners, minlength=n))])
        has = counts[np.asarray(page.subtree_end)] - counts[:n] > 0
        self.has_text = has.tolist()
        if self.images:  # kept text itself, not images alone (a table of images is no table)
            counts = np.concatenate(
                [[0], np.cumsum(np.bincount(page.seg_owner[kept], minlength=n))])
            self.has_kept_text = (counts[np.asarray(page.subtree_end)] - counts[:n] > 0).tolist()
        else:
            self.has_kept_text = self.has_text
        parent = page.parent
        self.children: dict[int, list[int]] = {}
        below = np.flatnonzero(has[parent[1:]]) + 1
        for i, p in zip(below.tolist(), parent[below].tolist()):
            self.children.setdefault(p, []).append(i)
        self.runs: dict[int, list[int]] = {}
        ks = np.flatnonzero(has[page.seg_owner])
        for k, owner in zip(ks.tolist(), page.seg_owner[ks].tolist()):
            self.runs.setdefault(owner, []).append(k)
        self.pos = self._run_positions()

    def _run_positions(self) -> list[int]:
        """Nodes opened before each run (``seg_pos``); rebuilt from run order when absent."""
        if self.page.seg_pos is not None and len(self.page.seg_pos) == len(self.page.seg_text):
            return self.page.seg_pos.tolist()
        # Older structures: a run goes before the first child whose subtree starts after it.
        first_run = [len(self.page.seg_text)] * self.page.num_nodes
        for k, owner in reversed(list(enumerate(self.page.seg_owner.tolist()))):
            first_run[owner] = k
        for i in range(self.page.num_nodes - 1, 0, -1):
            p = int(self.page.parent[i])
            first_run[p] = min(first_run[p], first_run[i])
        pos = []
        for k, owner in enumerate(self.page.seg_owner.tolist()):
            before = [c for c in self.children.get(owner, ()) if first_run[c] < k]
            pos.append(self.page.subtree_end[before[-1]] if before else owner + 1)
        return pos

    def render(self) -> str:
        text = _finish(self.node(0, _Ctx()), "\n\n")
        return re.sub(r"\n{3,}", "\n\n", text).strip()

    # -- pieces ---------------------------------------------------------------------------------
    def run(self, k: int, ctx: _Ctx) -> str:
        if not self.kept[k]:
            return ""
        text = self.page.seg_text[k]
        if not text.isprintable():  # no placeholder character nor any other XML refuses
            text = xml_safe(text)
        sep = self.sep[k]
        if not ctx.code:
            text = _escape(text, line_start=sep == SEP_BLOCK and not (ctx.table or ctx.heading),
                           table=ctx.table)
        return (_FLOW if sep == SEP_BLOCK else " " if sep == SEP_SPACE else "") + text

    def inline(self, v: int, ctx: _Ctx) -> str:
        """``v``'s own runs and rendered children, in document order."""
        runs, pos, parts = self.runs.get(v, ()), self.pos, []
        r = 0
        for c in self.children.get(v, ()):
            while r < len(runs) and pos[runs[r]] <= c:
                parts.append(self.run(runs[r], ctx))
                r += 1
            if self.has_text[c]:
                parts.append(self.node(c, ctx))
            elif self.tags[c] == "br":
                parts.append(_LINE)
        parts.extend(self.run(k, ctx) for k in runs[r:])
        return "".join(parts)

    def plain(self, v: int) -> str:
        """Kept text of ``v``'s subtree, unescaped, without markup (code spans)."""
        return self.inline(v, _Ctx(code=True))

    def node(self, v: int, ctx: _Ctx) -> str:
        tag = self.tags[v]
        if ctx.code:
            return self.inline(v, ctx)
        if tag in _HEADINGS and not ctx.table:
            text = _one_line(self.inline(v, ctx._replace(heading=True)))
            return f"{_BLOCK}{'#' * _HEADINGS[tag]} {text}{_BLOCK}" if text else ""
        if tag in ("ul", "ol", "menu"):
            return self.list(v, ctx)
        if tag == "li":
            return self.list_item(v, "- ", ctx)
        if tag == "pre":
            return self.pre(v, ctx)
        if tag == "blockquote":
            body = _finish(self.inline(v, ctx), "\n\n")
            quoted = "\n".join(f"> {line}" if line else ">" for line in body.split("\n"))
            return f"{_BLOCK}{quoted}{_BLOCK}" if body else ""
        if tag == "table" and not ctx.table and v in self.tables and self.has_kept_text[v]:
            return self.table(v, ctx)
        if tag == "code":
            lead, core, trail = _edges(self.plain(v))
            return f"{lead}{_code_span(core)}{trail}" if core else lead + trail
        if tag == "img":
            return self.image(v, ctx)
        if tag == "a" and not ctx.link:
            return self.link(v, ctx)
        if tag in _STRONG and not ctx.strong:
            return self.emphasis(v, ctx._replace(strong=True), "**")
        if tag in _EMPHASIS and not ctx.emphasis:
            return self.emphasis(v, ctx._replace(emphasis=True), "*")
        if tag in _STRIKE:
            return self.emphasis(v, ctx, "~~")
        inner = self.inline(v, ctx)
        return f"{_BLOCK}{inner}{_BLOCK}" if tag in BLOCK_TAGS else inner

    # -- elements -------------------------------------------------------------------------------
    def link(self, v: int, ctx: _Ctx) -> str:
        inner = self.inline(v, ctx._replace(link=True))
        href = (self.page.attrs.get(v) or {}).get("href", "").strip()
        if not href or href == "#" or href.lower().startswith(_NO_LINK):
            return inner
        url = join_url(self.base, href)
        if url is None:  # not a URL (``http://[``): the text stays, without the link
            return inner
        url = url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")

        def linked(part: str) -> str:
            heading = re.match(r"#{1,6} ", part)
            if heading:
                return f"{heading.group(0)}[{part[heading.end():]}]({url})"
            return f"[{part}]({url})"

        split = self.around_images(v, ctx._replace(link=True), inner, linked)
        if split is not None:
            return split
        lead, core, trail = _edges(inner)
        if not core or _has_marker(core):
            return inner
        heading = re.match(r"#{1,6} ", core) if _BLOCK in lead else None
        if heading:  # <a><h3>...</h3></a>: the heading holds the link
            return f"{lead}{heading.group(0)}[{core[heading.end():]}]({url}){trail}"
        return f"{lead}[{core}]({url}){trail}"

    def emphasis(self, v: int, ctx: _Ctx, marker: str) -> str:
        inner = self.inline(v, ctx)
        split = self.around_images(
            v, ctx, inner, lambda part: part if _IMAGE.fullmatch(part) else _wrap(part, marker))
        if split is not None:
            return split
        if _IMAGE.fullmatch(_edges(inner)[1]):
            return inner  # an image alone: no emphasis
        return _wrap(inner, marker)

    def around_images(self, v: int, ctx: _Ctx, inner: str, apply) -> str | None:
        """``inner`` (``v``'s content in ``ctx``) with ``apply`` (a link, emphasis) applied to
        each of its blocks, where content images in blocks of their own keep the markup from
        wrapping it whole but the text alone could be wrapped (as before images were
        written); ``None`` where that is not so."""
        lead, core, trail = _edges(inner)
        if not core or not _has_marker(core) or ctx.no_images or not self.holds_image(v):
            return None
        text = _edges(self.inline(v, ctx._replace(no_images=True)))[1]
        if not text or _has_marker(text):
            return None
        return lead + "".join(apply(part) if part.strip(_EDGE_CHARS) else part
                              for part in _split_gaps(core)) + trail

    def holds_image(self, v: int) -> bool:
        """Whether a content image is in ``v``'s subtree."""
        at = bisect_left(self.image_nodes, v)
        return at < len(self.image_nodes) and self.image_nodes[at] < self.page.subtree_end[v]

    def image(self, v: int, ctx: _Ctx) -> str:
        """``![alt](url)`` of a content image, where it stands (no space is added around it:
        the words stay as in the plain text)."""
        image = self.images.get(v)
        if image is None or ctx.no_images:
            return ""
        alt = image.alt.translate(_ESCAPED_IN_TABLE if ctx.table else _ESCAPED)
        url = image.url.replace("(", "%28").replace(")", "%29")
        return f"![{alt}]({url})"

    def sequence(self, v: int) -> list[tuple[bool, int]]:
        """``v``'s own runs ``(True, k)`` and children ``(False, c)`` in document order."""
        runs, pos, out = self.runs.get(v, ()), self.pos, []
        r = 0
        for c in self.children.get(v, ()):
            while r < len(runs) and pos[runs[r]] <= c:
                out.append((True, runs[r]))
                r += 1
            out.append((False, c))
        out.extend((True, k) for k in runs[r:])
        return out

    def list(self, v: int, ctx: _Ctx) -> str:
        ordered = self.tags[v] == "ol"
        number = 1
        if ordered:
            number = attr_int((self.page.attrs.get(v) or {}).get("start", ""), 1)
        blocks: list[str] = []  # lists, and text that sits directly in the list element
        items: list[str] = []
        text: list[str] = []
        width = 2

        def flush_text() -> None:
            if not text:
                return
            body = _finish("".join(text), "\n\n")
            text.clear()
            if body:
                if items:
                    blocks.append("\n".join(items))
                    items.clear()
                blocks.append(body)

        for is_run, x in self.sequence(v):
            if is_run:
                text.append(self.run(x, ctx))
                continue
            if not self.has_text[x]:
                continue
            flush_text()
            if self.tags[x] == "li" or not items:
                marker = f"{number}. " if ordered else "- "
                item = self.list_item(x, marker, ctx).strip(_BLOCK)
                width = len(marker)
                number += 1
            else:  # a nested list or a block directly inside the list: the previous item's
                body = _finish(self.node(x, ctx), "\n")
                item = "\n".join(" " * width + line if line else "" for line in body.split("\n"))
            if item:
                items.append(item)
        flush_text()
        if items:
            blocks.append("\n".join(items))
        return _BLOCK + _BLOCK.join(blocks) + _BLOCK if blocks else ""

    def list_item(self, v: int, marker: str, ctx: _Ctx) -> str:
        body = _finish(self.inline(v, ctx), "\n")
        if not body:
            return ""
        pad = " " * len(marker)
        lines = body.split("\n")
        return _BLOCK + "\n".join([marker + lines[0]] + [pad + line if line else ""
                                                         for line in lines[1:]]) + _BLOCK

    def pre(self, v: int, ctx: _Ctx) -> str:
        text = xml_safe(pre_text(self.page, v, self.kept))
        if not text.strip():
            return ""
        if ctx.table:
            return _code_span(" ".join(text.split()))
        language = ""
        for node in [v, *self.children.get(v, ())[:1]]:
            m = _LANGUAGE.search((self.page.attrs.get(node) or {}).get("class", ""))
            if m:
                language = m.group(1)
                break
        fence = "`" * max(3, _longest_run(text, "`") + 1)  # longer than any in the text
        return f"{_BLOCK}{fence}{language}\n{text}\n{fence}{_BLOCK}"

    def table(self, v: int, ctx: _Ctx) -> str:
        """A pipe table with every cell of the rows that have kept text (an empty string where
        a cell has none), so the columns stay in place; see ``assembly.data_tables``."""
        table = self.tables[v]
        cell_ctx = ctx._replace(table=True)
        grid: list[list[str]] = []
        header = False
        for index, row in enumerate(table.rows):
            cells: list[str] = []
            for cell, span in row:
                text = _one_line(self.inline(cell, cell_ctx)) if self.has_text[cell] else ""
                cells.extend([text] + [""] * (span - 1))
            if not any(cells):
                continue
            if not grid and index == 0:
                header = table.header
            grid.append(cells)
        if not grid:
            return ""
        width = max(len(r) for r in grid)
        grid = [r + [""] * (width - len(r)) for r in grid]
        head = grid.pop(0) if header else [""] * width
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join([" --- "] * width) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in grid]
        lines = [re.sub(r" {2,}\|", " |", line) for line in lines]
        caption = table.caption
        title = _finish(self.node(caption, ctx), "\n\n") + "\n\n" \
            if caption >= 0 and self.has_text[caption] else ""
        return f"{_BLOCK}{title}{chr(10).join(lines)}{_BLOCK}"


# ----------------------------------------------------------------------------------------------
# Text helpers

def _finish(text: str, paragraph: str) -> str:
    """Resolve placeholders: element or flow boundaries become ``paragraph``, ``<br>`` a newline."""

    def gap(m: re.Match) -> str:
        s = m.group(0)
        if _BLOCK in s:
            return paragraph
        return "\n" if _LINE in s else paragraph

    return _GAP.sub(gap, text).strip(" \n")


def _split_gaps(text: str) -> list[str]:
    """``text`` cut before and after each ``_GAP``, the gaps kept as parts of their own."""
    parts, pos = [], 0
    for m in _GAP.finditer(text):
        parts += [text[pos:m.start()], m.group(0)]
        pos = m.end()
    parts.append(text[pos:])
    return [part for part in parts if part]


def _edges(text: str) -> tuple[str, str, str]:
    """``(lead, core, trail)``: ``text`` split around its leading and trailing spaces, newlines
    and placeholders (all of an empty core's text is ``lead``)."""
    rest = text.lstrip(_EDGE_CHARS)
    core = rest.rstrip(_EDGE_CHARS)
    return text[:len(text) - len(rest)], core, rest[len(core):]


def _longest_run(text: str, char: str) -> int:
    return max(map(len, re.findall(re.escape(char) + "+", text)), default=0)


def _one_line(text: str) -> str:
    return " ".join(_GAP.sub(" ", text).split())


def _has_marker(text: str) -> bool:
    return _BLOCK in text or _LINE in text or _FLOW in text


def _wrap(inner: str, marker: str) -> str:
    lead, core, trail = _edges(inner)
    if not core or _has_marker(core):
        return inner
    return f"{lead}{marker}{core}{marker}{trail}"


def _code_span(text: str) -> str:
    text = " ".join(_GAP.sub(" ", text).split())
    if not text:
        return ""
    ticks = _longest_run(text, "`") + 1
    fence = "`" * ticks
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# Backslash-escaped wherever they stand, by one ``str.translate`` at C speed however many
# there are (a regular expression's replacement template is expanded in Python at every
# match, which made a text of millions of "[" take seconds) ...
_ESCAPED = str.maketrans({c: "\\" + c for c in "\\`*[]"})
_ESCAPED_IN_TABLE = str.maketrans({c: "\\" + c for c in "\\`*[]|"})
# ... and where markdown reads them as markup: "_" at a word's edge, "<" before a tag's first
# character. The matches are empty, just before the character, and take a literal backslash.
# The backslashes inserted above stand only before a non-alphanumeric character that is not
# "/", "!" or "?", so they change no lookaround here.
_ESCAPE_BEFORE = re.compile(r"(?<![A-Za-z0-9])(?=_)|(?=_(?![A-Za-z0-9]))|(?=<[A-Za-z/!?])")
_LINE_START = re.compile(r"^(#{1,6}(?=\s|$)|[-+](?=\s|$)|>|\d{1,9}(?=[.)](?:\s|$))|={3,}|~{3,})")


def _escape(text: str, line_start: bool, table: bool) -> str:
    """Backslash-escape what markdown would read as markup in plain text."""
    text = text.translate(_ESCAPED_IN_TABLE if table else _ESCAPED)
    if "_" in text or "<" in text:
        text = _ESCAPE_BEFORE.sub(r"\\", text)
    if line_start:
        m = _LINE_START.match(text)
        if m:
            end = m.end()
            text = (text[:end] + "\\" + text[end:]) if text[:end].isdigit() else "\\" + text
    return text
