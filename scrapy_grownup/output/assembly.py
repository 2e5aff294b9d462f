"""What plain-text assembly (``assemble_text`` below) and Markdown (``markdown.to_markdown``)
share, so that both read the same way from the same kept nodes:

* ``run_separators``: the separator before each kept run. The strongest one in the text flow
  since the previous kept run, and at least a space where a dropped run stood between them or
  where two runs of different elements meet as ``...today`` / ``Develop...`` (two lower-case
  letters or a sentence end, then a capitalised word: styled inline elements such as ``<span>``
  menu entries; ``i<b>OS</b>`` stays "iOS").
  Only whitespace is added: the words stay those of the kept runs, never glued together.
* ``pre_text``: the kept text of a ``<pre>`` with the source's line breaks and indentation.
* ``data_tables``: tables that hold data (rows of cells), told apart from layout tables the
  same way for both outputs; their rows and cells in order.
* ``complete_blocks``: the extractor keeps a code block whole when it keeps any of it, and a data
  table whole when it keeps most of its text, so that ``text`` and ``markdown`` never show half a
  code block or a table without its header cells. (Evaluation calls ``assemble_text`` on the
  model's own mask; this completion is the extractor's.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from scrapy_grownup.decisions import page_memo
from scrapy_grownup.page.dom import SEP_BLOCK, SEP_NONE, SEP_SPACE, PageStructure
from scrapy_grownup.decisions.refine import content_mask, keeps_text

__all__ = ["assemble_text", "run_separators", "pre_roots", "pre_text", "DataTable", "data_tables", "table_text",
           "text_units", "article_mask", "rescored_article", "model_article", "ArticleChoice",
           "TEXT_SOURCES", "complete_blocks", "LAYOUT_CONTENT", "MAX_CELL_CHARS"]

# Block content that makes a table a layout table rather than data.
LAYOUT_CONTENT = frozenset({"table", "p", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6",
                            "blockquote", "pre", "form", "article", "section", "nav"})
# A cell holding more text than this is prose laid out in a table, not a datum.
MAX_CELL_CHARS = 1000
# Share of a data table's text the model must keep for the extractor to keep all of it.
TABLE_COMPLETION_SHARE = 0.5
_SENTENCE_END = frozenset(".!?")


def run_separators(page: PageStructure, kept) -> np.ndarray:
    """``SEP_NONE`` / ``SEP_SPACE`` / ``SEP_BLOCK`` before each run, for the runs ``kept``
    (a bool array over runs); the values of dropped runs mean nothing."""
    kept = np.asarray(kept, dtype=bool)
    out = np.zeros(len(kept), dtype=np.int8)
    idx = np.flatnonzero(kept)
    if not len(idx):
        return out
    starts = np.concatenate([[0], idx[:-1] + 1])
    sep = np.maximum.reduceat(np.asarray(page.seg_sep[: idx[-1] + 1], dtype=np.int8), starts)
    # A dropped run between two kept runs: at least a space (``Community|MongoDB`` without
    # its ``|`` is not ``CommunityMongoDB``).
    sep = np.where((idx > starts) & (sep == SEP_NONE), SEP_SPACE, sep).astype(np.int8)
    texts = page.seg_text
    for j in np.flatnonzero(sep == SEP_NONE).tolist():
        if j == 0:
            continue
        k = int(idx[j])
        before, after = texts[k - 1][-2:], texts[k][:2]
        # "today" + "Develop", "skills." + "Books"; not "i" + "OS", "e" + "Bay"
        if after[:1].isupper() and after[1:].islower() and len(before) == 2 and (
                before.islower() or before[1] in _SENTENCE_END and before[0].isalpha()):
            sep[j] = SEP_SPACE
    out[idx] = sep
    return out


def pre_roots(page: PageStructure) -> list[int]:
    """The ``<pre>`` elements that are not inside another one, in document order."""
    if "pre" not in page.tags:
        return []
    roots: list[int] = []
    end = -1
    for i in page_memo.tag_nodes(page, "pre"):
        if i >= end:
            roots.append(i)
            end = page.subtree_end[i]
    return roots


def pre_text(page: PageStructure, node: int, kept) -> str:
    """The kept runs of the ``<pre>`` ``node`` with the whitespace the source has between them
    (line breaks, indentation, the spaces of ASCII art); tabs expanded to 4 columns, trailing
    spaces and leading / trailing blank lines dropped. ``kept`` is a bool sequence over runs.

    The runs are found again in the element's raw text (``PageStructure.raw_text``); where the
    source has no whitespace between two kept words, a block boundary or a new line element
    (``<span class="line">``, how code highlighters write lines) is a line break and a dropped
    word a space. Should a run not be found there (a page cut by the node cap), the
    rest is joined with the flow separators."""
    runs = page.subtree_runs(node)
    raw = page.raw_text.get(node)
    lost = raw is None
    if raw is not None:
        raw = raw.replace("\r\n", "\n").replace("\r", "\n")
    parts: list[str] = []
    pos = 0
    gap: list[str] = []  # source whitespace since the last kept word
    dropped = False  # a dropped word since the last kept word
    line = last_line = -1
    for k in runs:
        line = _line_element(page, int(page.seg_owner[k]), node)
        for w, word in enumerate(page.seg_text[k].split(" ")):
            if not lost:
                at = raw.find(word, pos)
                if at < 0:
                    lost = True
                    gap = []
                else:
                    between = raw[pos:at]
                    if between and not between.isspace():  # text without a run (<style>)
                        between = "".join(c for c in between if c.isspace())
                    gap.append(between)
                    pos = at + len(word)
            if not kept[k]:
                dropped = True
                continue
            space = "".join(gap)
            if not parts:  # the first kept word keeps its line's indentation
                space = space[space.rfind("\n") + 1:]
            elif line != last_line and "\n" not in space:
                space = "\n" + space  # its indentation kept
            elif not space:
                flow = page.seg_sep[k] if w == 0 else SEP_SPACE
                space = "\n" if flow == SEP_BLOCK else " " if flow == SEP_SPACE or dropped else ""
            parts.append(space)
            parts.append(word)
            gap, dropped, last_line = [], False, line
    text = "".join(parts).expandtabs(4)
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def _line_element(page: PageStructure, node: int, pre: int) -> int:
    """The nearest element from ``node`` up to (not including) ``pre`` with the class word
    "line" (not a line number), or -1."""
    if not page.class_words:
        return -1
    while node > pre:
        words = page.class_words[node]
        if words and "line" in words.split() and "number" not in words \
                and "numbers" not in words:
            return node
        node = int(page.parent[node])
    return -1


# ----------------------------------------------------------------------------------------------
# Tables


@dataclass
class DataTable:
    """A table of data: its caption (or -1) and rows, each a list of ``(cell, colspan)``."""

    node: int
    caption: int
    rows: list[list[tuple[int, int]]]
    header: bool  # the first row is a header (in ``thead``, or all ``th``)


def attr_int(value: str, default: int) -> int:
    """A whole-number attribute (``start``, ``colspan``): ASCII digits only (``"²"`` passes
    ``isdigit()`` but not ``int()``), at most 9 of them; anything else gives ``default``."""
    value = value.strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) < 10 else default


def data_tables(page: PageStructure) -> dict[int, DataTable]:
    """The page's data tables by node: no block content (``LAYOUT_CONTENT``, a nested table),
    no text outside its cells and caption, no cell over ``MAX_CELL_CHARS`` characters, and at
    least two rows and two columns. Every other table lays out the page. (Found once per page:
    the result is shared, not to be changed.)"""
    if "table" not in page.tags:
        return {}
    return page_memo.memo(page, "data_tables", lambda: _data_tables(page))


def _data_tables(page: PageStructure) -> dict[int, DataTable]:
    tags, parent = page.tags, page.parent
    tables = page_memo.tag_nodes(page, "table")
    if not tables:
        return {}
    ends = page.subtree_end
    lengths = None
    out: dict[int, DataTable] = {}
    for v in tables:
        end = ends[v]
        if any(tags[i] in LAYOUT_CONTENT for i in range(v + 1, end)):
            continue
        children: dict[int, list[int]] = {}
        for i in range(v + 1, end):
            children.setdefault(int(parent[i]), []).append(i)
        caption = -1
        rows: list[int] = []
        for c in children.get(v, ()):
            if tags[c] == "tr":
                rows.append(c)
            elif tags[c] in ("thead", "tbody", "tfoot"):
                rows.extend(r for r in children.get(c, ()) if tags[r] == "tr")
            elif tags[c] == "caption" and caption < 0:
                caption = c
        grid = [[c for c in children.get(r, ()) if tags[c] in ("td", "th")] for r in rows]
        if sum(1 for cells in grid if cells) < 2 or max(map(len, grid)) < 2:
            continue
        covered = len(page.subtree_runs(caption)) if caption >= 0 else 0
        covered += sum(len(page.subtree_runs(c)) for cells in grid for c in cells)
        if covered != len(page.subtree_runs(v)):  # text outside the cells
            continue
        if lengths is None:
            lengths = np.fromiter(map(len, page.seg_text), dtype=np.int64,
                                  count=len(page.seg_text))
        if any(int(lengths[page.subtree_runs(c).start:page.subtree_runs(c).stop].sum())
               > MAX_CELL_CHARS for cells in grid for c in cells):
            continue
        first = grid[0] if grid else []
        header = bool(first) and (tags[int(parent[rows[0]])] == "thead"
                                  or all(tags[c] == "th" for c in first))
        out[v] = DataTable(
            node=v, caption=caption, header=header,
            rows=[[(c, min(max(attr_int((page.attrs.get(c) or {}).get("colspan", ""), 1), 1),
                               20)) for c in cells] for cells in grid])
    return out


def table_text(page: PageStructure, table: DataTable, kept, separators) -> str:
    """The kept text of a data table for plain text: the caption on its own line, then one
    line per row with a kept cell, ``| a | b | c |`` (an empty cell stays ``| |`` up to the
    row's last kept cell, so columns keep their place)."""
    lines = []
    if table.caption >= 0:
        caption = _one_line(page, page.subtree_runs(table.caption), kept, separators)
        if caption:
            lines.append(caption)
    for row in table.rows:
        cells = [_one_line(page, page.subtree_runs(c), kept, separators) for c, _ in row]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            lines.append("|" + "|".join(f" {c} " if c else " " for c in cells) + "|")
    return "\n".join(lines)


def _one_line(page: PageStructure, runs: range, kept, separators) -> str:
    parts: list[str] = []
    for k in runs:
        if kept[k]:
            if parts and separators[k] != SEP_NONE:
                parts.append(" ")
            parts.append(page.seg_text[k])
    return "".join(parts)


def text_units(page: PageStructure, kept) -> list[tuple[int, int, str, int]]:
    """Runs that plain text renders as one piece: ``(first run, end run, kind, node)`` for
    each outermost ``<pre>`` ("pre") and data table ("table") with a kept run, in order."""
    units = []
    for v in pre_roots(page):
        runs = page.subtree_runs(v)
        if len(runs) and any(kept[runs.start:runs.stop]):
            units.append((runs.start, runs.stop, "pre", v))
    tables = data_tables(page)
    if tables:
        pre_ranges = [(a, b) for a, b, _, _ in units]
        for v in tables:
            runs = page.subtree_runs(v)
            if len(runs) and any(kept[runs.start:runs.stop]) and not any(
                    a <= runs.start < b for a, b in pre_ranges):
                units.append((runs.start, runs.stop, "table", v))
        units.sort()
    return units


# ----------------------------------------------------------------------------------------------
# The extractor's mask


def article_mask(page: PageStructure, scores, threshold: float, **decisions) -> np.ndarray:
    """The nodes an article keeps: ``refine.content_mask``'s page-level ``decisions`` on
    ``scores``, then code blocks and data tables completed (``complete_blocks``). The extractor
    keeps these, and every evaluation scores the same."""
    return complete_blocks(page, content_mask(page, scores, threshold, **decisions))


class ArticleChoice(NamedTuple):
    """The nodes an article keeps (``keep``), the scores and cut-off they were taken from,
    and which of the extractor's paths chose them (``source``, one of ``TEXT_SOURCES``)."""

    keep: np.ndarray
    scores: np.ndarray
    threshold: float
    source: str


# Which path chose an article's text, in the order they are tried: the rescorer's trees, the
# content model's own scores, the page's prose (``refine.page_prose``), or none of them.
TEXT_SOURCES = ("rescorer", "content_model", "prose", "none")


def rescored_article_mask(page: PageStructure, probs, rescorer, threshold: float,
                          rescored=None, **decisions) -> np.ndarray:
    """The nodes an article keeps from ``rescorer``'s probabilities: ``rescored_article``'s
    mask."""
    return rescored_article(page, probs, rescorer, threshold, rescored, **decisions).keep


def rescored_article(page: PageStructure, probs, rescorer, threshold: float, rescored=None,
                     **decisions) -> ArticleChoice:
    """The nodes an article keeps from ``rescorer``'s probabilities (``rescored``, computed
    here when not given) with its page-level decisions; where those keep no text at all, the
    content model's own article (``model_article``: ``probs`` at its threshold, then the
    page's prose).
    The trees judge blocks by what other sites' pages taught them and can drop the one short
    block of a small page (Readability's test page with a title unlike its ``<h1>``): an
    empty article is the worst answer to a page the content model reads."""
    if rescored is None:
        rescored = rescorer.rescore(page, probs)
    # the page's prose is the last resort, after the content model's own article
    keep = article_mask(page, rescored, threshold,
                        **{**rescorer.decisions, **decisions, "fallback": False})
    if keeps_text(page, keep):
        return ArticleChoice(keep, rescored, threshold, "rescorer")
    own = {k: v for k, v in decisions.items() if k not in rescorer.decisions}
    return model_article(page, probs, rescorer.feature_threshold, **own)


def model_article(page: PageStructure, probs, threshold: float, **decisions) -> ArticleChoice:
    """The content model's article (``article_mask`` of ``probs``); where its scores keep no
    text, the page's prose (unless ``fallback=False``), and ``source`` says which."""
    keep = article_mask(page, probs, threshold, **{**decisions, "fallback": False})
    if keeps_text(page, keep):
        return ArticleChoice(keep, probs, threshold, "content_model")
    if decisions.get("fallback", True):
        # rare (pages whose scores keep nothing): the same decisions again, with the prose
        prose = article_mask(page, probs, threshold, **decisions)
        if keeps_text(page, prose):
            return ArticleChoice(prose, probs, threshold, "prose")
    return ArticleChoice(keep, probs, threshold, "none")


def complete_blocks(page: PageStructure, keep) -> np.ndarray:
    """``keep`` with every ``<pre>`` that has a kept run kept whole, and every data table whose
    kept text is at least ``TABLE_COMPLETION_SHARE`` of its text kept whole (header cells and
    all). Only nodes that own text are added; a copy is returned."""
    keep = np.array(keep, dtype=bool)
    if not page.seg_text:
        return keep
    owners = page.seg_owner
    kept = keep[owners]
    for v in pre_roots(page):
        runs = page.subtree_runs(v)
        if len(runs) and kept[runs.start:runs.stop].any():
            keep[owners[runs.start:runs.stop]] = True
    tables = data_tables(page)
    if tables:
        lengths = np.fromiter(map(len, page.seg_text), dtype=np.int64, count=len(page.seg_text))
        for table in tables.values():
            runs = page.subtree_runs(table.node)
            total = int(lengths[runs.start:runs.stop].sum())
            held = int(lengths[runs.start:runs.stop][kept[runs.start:runs.stop]].sum())
            if total and held < total and held >= TABLE_COMPLETION_SHARE * total:
                keep[owners[runs.start:runs.stop]] = True
    return keep


def assemble_text(page: PageStructure, keep_node_mask) -> str:
    """Text of the runs whose owner node is kept, in reading order.

    ``keep_node_mask`` is a bool array (or sequence) over nodes. Between two kept runs comes
    ``"\\n"`` for a paragraph break, ``" "`` for whitespace and nothing for glued runs
    (``wor<b>ld</b>`` stays "world"), from ``assembly.run_separators``: a dropped run between
    them, or ``today`` / ``Develop`` from two elements, is at least a space. A ``<pre>`` keeps
    its line breaks and indentation (``assembly.pre_text``); a data table is one line per row,
    ``| a | b |`` (``assembly.table_text``). Each run has exactly one owner, so nested kept nodes
    never duplicate text, and only whitespace and the table's ``|`` are added to the kept runs'
    words.
    """
    keep = np.asarray(keep_node_mask, dtype=bool)
    if keep.shape != (page.num_nodes,):
        raise ValueError(f"keep_node_mask has shape {keep.shape}, expected ({page.num_nodes},)")
    if not page.seg_text:
        return ""
    kept = keep[page.seg_owner]
    kept_runs = np.flatnonzero(kept).tolist()
    if not kept_runs:
        return ""
    seps = run_separators(page, kept).tolist()
    units = text_units(page, kept)
    tables = data_tables(page) if any(kind == "table" for _, _, kind, _ in units) else {}
    texts = page.seg_text
    parts: list[str] = []
    u, skip = 0, -1
    for k in kept_runs:
        if k < skip:
            continue
        while u < len(units) and units[u][1] <= k:
            u += 1
        if u < len(units) and units[u][0] <= k:
            _, skip, kind, node = units[u]
            body = pre_text(page, node, kept) if kind == "pre" else \
                table_text(page, tables[node], kept, seps)
            if body:
                if parts:
                    parts.append("\n")
                parts.append(body)
            continue
        if parts:
            sep = seps[k]
            if sep == SEP_BLOCK:
                parts.append("\n")
            elif sep == SEP_SPACE:
                parts.append(" ")
        parts.append(texts[k])
    return "".join(parts)
