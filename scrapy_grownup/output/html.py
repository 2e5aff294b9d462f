"""Article HTML from the content nodes: clean markup that is safe to render.

The walk is Markdown's (``markdown._Renderer``): the same kept runs in the same order with the
same separators, so the HTML's text is the article's text up to whitespace (a data table's
``|`` aside). Only these elements are written: ``p``, ``h1``-``h6``, ``ul`` / ``ol`` / ``li``,
``dl`` / ``dt`` / ``dd``, ``blockquote``, ``pre`` and ``code``, data tables (``table``,
``caption``, ``thead``, ``tbody``, ``tr``, ``th``, ``td``), ``figure`` / ``figcaption`` /
``img`` (the content images, ``images.content_images``), ``a``, ``strong``, ``em``, ``del``,
``sub``, ``sup``, ``mark``, ``kbd``, ``br``; and only these attributes: ``href`` (absolute,
http(s), mailto or tel), ``src`` (absolute http(s)), ``alt``, ``start``, ``colspan`` and a
``class="language-..."`` on code blocks. Every other element (``div``, ``span``, layout
tables, forms...) gives way to its content, a block element's edges becoming paragraph breaks,
and the text is escaped: no script, style, event handler, iframe, form or ``javascript:`` URL
can come through.
"""

from __future__ import annotations

import html as html_lib
import re
from typing import NamedTuple

from scrapy_grownup.output.assembly import attr_int, pre_text
from scrapy_grownup.output.markdown import _BLOCK, _FLOW, _LANGUAGE, _LINE, _Renderer
from scrapy_grownup.page.dom import SEP_BLOCK, SEP_SPACE, PageStructure
from scrapy_grownup.page.tags import BLOCK_TAGS
from scrapy_grownup.page.urls import join_url
from scrapy_grownup.page.xmlsafe import xml_safe
from scrapy_grownup.output.images import render_inputs

__all__ = ["to_html"]

# A block element's finished HTML in partial output: ``_OPEN`` + html + ``_CLOSE`` (its own
# content holds no placeholder and no other block, so the two never nest).
_OPEN, _CLOSE = "\x03", "\x04"
_PIECE = re.compile(r"\x03[^\x03\x04]*\x04|[\x00\x01\x02]")
_PLACEHOLDERS = re.compile(r"[\x00-\x04]")
# A break between paragraphs or lines (markdown's ``_GAP``, kept by ``split``: linear time).
_BREAK = re.compile(r"((?<![ \n\x00\x01\x02])[ \n]*+[\x00\x01\x02][ \n\x00\x01\x02]*+)")
_EDGE_CHARS = " \n\x00\x01\x02"
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_INLINE = {"strong": "strong", "b": "strong", "em": "em", "i": "em", "cite": "em", "dfn": "em",
           "del": "del", "s": "del", "strike": "del", "sub": "sub", "sup": "sup",
           "mark": "mark", "kbd": "kbd", "samp": "kbd"}
_LINK_SCHEMES = ("http://", "https://", "mailto:", "tel:")


class _Ctx(NamedTuple):
    code: bool = False  # inside code: text only
    link: bool = False
    table: bool = False  # inside a data table's cell
    heading: bool = False
    figure: bool = False  # inside a figure: a figcaption is its caption
    inline: frozenset = frozenset()  # inline elements open around this point


def to_html(page: PageStructure, keep_node_mask, base_url: str | None = None,
            images: dict | None = None) -> str:
    """HTML of the runs whose owner node is kept, with the content images (computed here
    unless given); links resolve against ``base_url`` (default: ``<base href>``, else the page
    URL). ``""`` where nothing is kept."""
    inputs = render_inputs(page, keep_node_mask, base_url, images)
    return _HtmlRenderer(page, *inputs).render() if inputs is not None else ""


def _escape(text: str) -> str:
    return html_lib.escape(text, quote=False)


def _attribute(value: str) -> str:
    return html_lib.escape(value, quote=True)


def _edges(text: str) -> tuple[str, str, str]:
    rest = text.lstrip(_EDGE_CHARS)
    core = rest.rstrip(_EDGE_CHARS)
    return text[:len(text) - len(rest)], core, rest[len(core):]


def _pieces(text: str) -> list[tuple[bool, str]]:
    """``text`` resolved into its pieces: ``(True, html)`` for a block element, ``(False,
    html)`` for a run of inline content between paragraph breaks (``<br>`` for line breaks)."""
    out: list[tuple[bool, str]] = []
    current: list[str] = []

    def flush() -> None:
        inline = "".join(current).strip(" \n")
        current.clear()
        while inline.startswith("<br>"):
            inline = inline[4:].lstrip(" \n")
        while inline.endswith("<br>\n") or inline.endswith("<br>"):
            inline = inline[:inline.rfind("<br>")].rstrip(" \n")
        if inline:
            out.append((False, inline))

    pos = 0
    for m in _PIECE.finditer(text):
        current.append(text[pos:m.start()])
        pos = m.end()
        piece = m.group()
        if piece == _LINE:
            current.append("<br>\n")
        elif piece in (_BLOCK, _FLOW):
            flush()
        else:
            flush()
            out.append((True, piece[1:-1]))
    current.append(text[pos:])
    flush()
    return out


def _paragraphs(text: str) -> str:
    """Block content: each run of inline content a ``<p>``."""
    return "\n".join(html if block else f"<p>{html}</p>" for block, html in _pieces(text))


def _item(text: str) -> str:
    """The content of a list item, cell, caption or figure: inline content as it is where it
    comes first and alone (``<li>text<ul>...</ul></li>``), else in paragraphs."""
    pieces = _pieces(text)
    if not pieces:
        return ""
    if not pieces[0][0] and all(block for block, _ in pieces[1:]):
        return "\n".join(html for _, html in pieces)
    return "\n".join(html if block else f"<p>{html}</p>" for block, html in pieces)


def _one_line(text: str) -> str:
    return " ".join(_PLACEHOLDERS.sub(" ", text).split())


def _block(html: str) -> str:
    return f"{_OPEN}{html}{_CLOSE}"


class _HtmlRenderer(_Renderer):
    def render(self) -> str:
        return _paragraphs(self.node(0, _Ctx()))

    # -- pieces ---------------------------------------------------------------------------------
    def run(self, k: int, ctx) -> str:
        if not self.kept[k]:
            return ""
        text = self.page.seg_text[k]
        if not text.isprintable():
            text = xml_safe(text)
        text = _escape(text)
        sep = self.sep[k]
        return (_FLOW if sep == SEP_BLOCK else " " if sep == SEP_SPACE else "") + text

    def plain(self, v: int) -> str:
        return self.inline(v, _Ctx(code=True))

    def wrap(self, inner: str, tag: str, attributes: str = "") -> str:
        """``inner`` in the element ``tag``; where it holds paragraph or line breaks, each
        piece between them in one; where it holds a block (a list in a link), as it is."""
        lead, core, trail = _edges(inner)
        if not core or _OPEN in core:
            return inner
        if _PLACEHOLDERS.search(core):
            return lead + "".join(
                f"<{tag}{attributes}>{part}</{tag}>" if part.strip(_EDGE_CHARS) else part
                for part in _BREAK.split(core)) + trail
        return f"{lead}<{tag}{attributes}>{core}</{tag}>{trail}"

    def node(self, v: int, ctx) -> str:
        tag = self.tags[v]
        if ctx.code:
            return self.inline(v, ctx)
        if tag in _HEADINGS and not ctx.table:
            inner = self.inline(v, ctx._replace(heading=True))
            if _OPEN in inner:  # a block inside a heading: the blocks alone
                return f"{_BLOCK}{inner}{_BLOCK}"
            text = _one_line(inner)
            return _block(f"<{tag}>{text}</{tag}>") if text else ""
        if tag in ("ul", "ol", "menu"):
            return self.list(v, ctx)
        if tag == "dl":
            return self.definitions(v, ctx)
        if tag == "pre":
            return self.pre(v, ctx)
        if tag == "blockquote" and not ctx.table:
            body = _paragraphs(self.inline(v, ctx))
            return _block(f"<blockquote>\n{body}\n</blockquote>") if body else ""
        if tag == "table" and not ctx.table and v in self.tables and self.has_kept_text[v]:
            return self.table(v, ctx)
        if tag == "figure" and not ctx.table:
            body = _item(self.inline(v, ctx._replace(figure=True)))
            return _block(f"<figure>{body}</figure>") if body else ""
        if tag == "figcaption" and ctx.figure:
            body = _item(self.inline(v, ctx._replace(figure=False)))
            return _block(f"<figcaption>{body}</figcaption>") if body else ""
        if tag == "code":
            lead, core, trail = _edges(self.plain(v))
            core = _PLACEHOLDERS.sub(" ", core)
            return f"{lead}<code>{core}</code>{trail}" if core else lead + trail
        if tag == "img":
            return self.image(v, ctx)
        if tag == "a" and not ctx.link:
            return self.link(v, ctx)
        name = _INLINE.get(tag)
        if name is not None and name not in ctx.inline:
            return self.wrap(self.inline(v, ctx._replace(inline=ctx.inline | {name})), name)
        inner = self.inline(v, ctx)
        return f"{_BLOCK}{inner}{_BLOCK}" if tag in BLOCK_TAGS else inner

    # -- elements -------------------------------------------------------------------------------
    def image(self, v: int, ctx) -> str:
        image = self.images.get(v)
        if image is None:
            return ""
        return f"<img src=\"{_attribute(image.url)}\" alt=\"{_attribute(image.alt)}\">"

    def link(self, v: int, ctx) -> str:
        inner = self.inline(v, ctx._replace(link=True))
        href = (self.page.attrs.get(v) or {}).get("href", "").strip()
        if not href or href == "#":
            return inner
        url = join_url(self.base, href)
        if url is None or not url.lower().startswith(_LINK_SCHEMES):
            return inner  # javascript:, data:, vbscript:, or not a URL
        return self.wrap(inner, "a", f" href=\"{_attribute(url.replace(' ', '%20'))}\"")

    def list(self, v: int, ctx) -> str:
        tag = "ol" if self.tags[v] == "ol" else "ul"
        start = ""
        if tag == "ol":
            number = attr_int((self.page.attrs.get(v) or {}).get("start", ""), 1)
            start = f" start=\"{number}\"" if number != 1 else ""
        items: list[str] = []
        loose: list[str] = []  # text that sits directly in the list element

        def flush() -> None:
            if loose:
                body = _item("".join(loose))
                loose.clear()
                if body:
                    items.append(body)

        for is_run, x in self.sequence(v):
            if is_run:
                loose.append(self.run(x, ctx))
                continue
            if not self.has_text[x]:
                continue
            flush()
            if self.tags[x] == "li":
                body = _item(self.inline(x, ctx))
                if body:
                    items.append(body)
            else:  # a nested list or a block directly in the list: the previous item's
                body = _item(self.node(x, ctx))
                if body and items:
                    items[-1] += "\n" + body
                elif body:
                    items.append(body)
        flush()
        if not items:
            return ""
        lines = "\n".join(f"<li>{item}</li>" for item in items)
        return _block(f"<{tag}{start}>\n{lines}\n</{tag}>")

    def definitions(self, v: int, ctx) -> str:
        entries: list[list[str]] = []  # [tag, body]
        for is_run, x in self.sequence(v):
            if is_run:
                text = self.run(x, ctx)
                if text:
                    entries.append(["dd", text])
                continue
            if not self.has_text[x]:
                continue
            if self.tags[x] in ("dt", "dd"):
                entries.append([self.tags[x], self.inline(x, ctx)])
            else:  # a <div> around a term and its definition, or another block
                entries.append(["dd", self.node(x, ctx)])
        lines = []
        for tag, body in entries:
            body = _item(body)
            if body:
                lines.append(f"<{tag}>{body}</{tag}>")
        return _block("<dl>\n" + "\n".join(lines) + "\n</dl>") if lines else ""

    def pre(self, v: int, ctx) -> str:
        text = xml_safe(pre_text(self.page, v, self.kept))
        if not text.strip():
            return ""
        if ctx.table:
            return f"<code>{_escape(' '.join(text.split()))}</code>"
        language = ""
        for node in [v, *self.children.get(v, ())[:1]]:
            m = _LANGUAGE.search((self.page.attrs.get(node) or {}).get("class", ""))
            if m:
                language = f" class=\"language-{_attribute(m.group(1))}\""
                break
        return _block(f"<pre><code{language}>{_escape(text)}</code></pre>")

    def table(self, v: int, ctx) -> str:
        """Every cell of the rows that have kept text (empty where a cell has none), as in
        Markdown's table; the header row in ``thead``."""
        table = self.tables[v]
        cell_ctx = ctx._replace(table=True)
        head: list[str] = []
        body: list[str] = []
        for index, row in enumerate(table.rows):
            cells = [(cell, span, _item(self.inline(cell, cell_ctx)) if self.has_text[cell]
                      else "") for cell, span in row]
            if not any(text for _, _, text in cells):
                continue
            header = index == 0 and table.header
            line = []
            for cell, span, text in cells:
                name = "th" if header or self.tags[cell] == "th" else "td"
                colspan = f' colspan="{span}"' if span > 1 else ""
                line.append(f"<{name}{colspan}>{text}</{name}>")
            (head if header else body).append("<tr>" + "".join(line) + "</tr>")
        if not head and not body:
            return ""
        parts = ["<table>"]
        caption = table.caption
        if caption >= 0 and self.has_text[caption]:
            text = _item(self.inline(caption, ctx))
            if text:
                parts.append(f"<caption>{text}</caption>")
        if head:
            parts.append("<thead>\n" + "\n".join(head) + "\n</thead>")
        if body:
            parts.append("<tbody>\n" + "\n".join(body) + "\n</tbody>")
        parts.append("</table>")
        return _block("\n".join(parts))
