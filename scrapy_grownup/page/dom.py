"""HTML bytes to ``PageStructure``: the DOM tree as arrays, before any text embedding.

This is the CPU-bound half of featurization (lxml parsing, one walk over the tree, Laplacian
positions). It needs only lxml, numpy and scipy, so it runs in worker processes and its result
pickles cheaply between them.
"""

from __future__ import annotations

import codecs
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from itertools import chain

import numpy as np
from lxml import etree

from scrapy_grownup.page.attributes import attribute_words
from scrapy_grownup.page.decoding import decode_html, sniff_binary
from scrapy_grownup.page.nesting import flatten_deep, hit_depth_limit
from scrapy_grownup.errors import EmptyPageError, ParseError, own_error
from scrapy_grownup.page.fonts import FONT_SIZES, FONT_STYLES, FONT_WEIGHTS, font_features
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.page.tags import BLOCK_TAGS, NON_TEXT_TAGS, NUM_TAG_CLASSES, REMOVED_TAGS, tag_index
from scrapy_grownup.page.visibility import (HIDDEN_MARK, HIDING_ATTRIBUTES, TAG_ATTRIBUTES,
                                           TAG_NEVER, hidden_by, mark_hidden, remove_hidden,
                                           resolve_noscript, style_hides, tag_hiding)
from scrapy_grownup.page.tree import subtree_ends
from scrapy_grownup.page.xmlsafe import xml_safe

# Bump when parsing changes which nodes or text a page yields (training caches are keyed on it).
PARSE_VERSION = "4"  # 4: a <textarea>'s text is not page text
NUM_CHILD_POSITIONS = 32  # one-hot child index 0..30 and ">30"
NUM_EIGENVECTORS = 32
# Separator before a text segment: glued to the previous one, a space, or a paragraph break.
SEP_NONE, SEP_SPACE, SEP_BLOCK = 0, 1, 2

STRUCT_BLOCKS: tuple[tuple[str, int], ...] = (
    ("tag", NUM_TAG_CLASSES),
    ("font_weight", len(FONT_WEIGHTS)),
    ("font_style", len(FONT_STYLES)),
    ("font_size", len(FONT_SIZES)),
    ("text_length", 1),
    ("num_children", 1),
    ("child_index", NUM_CHILD_POSITIONS),
)
STRUCT_DIM = sum(size for _, size in STRUCT_BLOCKS)


@dataclass
class PageStructure:
    """One page's DOM as a tree of ``n`` element nodes in document (pre-)order.

    Node 0 is the root (``html``). ``parent[i] < i`` for every other node. Text lives in
    ``segments``: each text run of the page in reading order with the node that directly owns it,
    which is what label alignment and article assembly need.
    """

    url: str | None
    encoding: str
    tags: list[str]
    parent: np.ndarray  # int32 [n], -1 for the root
    depth: np.ndarray  # int32 [n]
    tag_ids: np.ndarray  # int16 [n], index into tags.TAGS (83 = other)
    child_index: np.ndarray  # int32 [n], position among element siblings
    num_children: np.ndarray  # int32 [n]
    font: np.ndarray  # int8 [n, 3]: weight, style, size bucket indices
    class_words: list[str]
    id_words: list[str]
    seg_owner: np.ndarray  # int32 [m]
    seg_sep: np.ndarray  # int8 [m]: SEP_NONE / SEP_SPACE / SEP_BLOCK before the segment
    seg_text: list[str]  # whitespace-normalised, never empty
    title: str = ""
    lang: str | None = None
    meta: dict[str, str] = field(default_factory=dict)
    json_ld: list[str] = field(default_factory=list)
    # caps hit: "bytes", "nodes", "depth", "libxml2_depth" (see ``nesting``), "attribute",
    # "script" (``PageLimits``)
    truncated: list[str] = field(default_factory=list)
    positions: np.ndarray | None = None  # float32 [n, 32] Laplacian eigenvectors
    # Nodes opened before each run was emitted: places a run exactly between its owner's child
    # elements (a tail after ``<br>`` vs after the next empty child), which markdown needs.
    seg_pos: np.ndarray | None = None  # int32 [m]
    # The few attributes metadata and markdown read (href, rel, datetime, itemprop, ...), only
    # for nodes that have one; see ``KEPT_ATTRIBUTES`` (and ``role``, ``aria-modal`` and the
    # hidden mark on any element).
    attrs: dict[int, dict[str, str]] = field(default_factory=dict)
    raw_text: dict[int, str] = field(default_factory=dict)  # ``<pre>`` text, whitespace kept

    @property
    def num_nodes(self) -> int:
        return len(self.tags)

    @cached_property
    def locator(self) -> list[str]:
        """Each node's positional XPath (``/html/body[1]/div[2]``), resolvable against the tree
        ``parse_tree`` returns. Derived on demand: the caps drop nodes in document order, so a
        kept node's earlier same-tag siblings are all kept and its index can be counted here."""
        paths: list[str] = []
        seen: dict[tuple[int, str], int] = {}
        for i, (tag, par) in enumerate(zip(self.tags, self.parent.tolist())):
            if par < 0:
                paths.append(f"/{tag}")
                continue
            count = seen[par, tag] = seen.get((par, tag), 0) + 1
            paths.append(f"{paths[par]}/{tag}[{count}]")
        return paths

    @cached_property
    def node_text(self) -> list[str]:
        """Each node's own direct text (its text and its children's tails), normalised."""
        parts: dict[int, list[str]] = {}  # only owners of text: most nodes have none
        for owner, text in zip(self.seg_owner.tolist(), self.seg_text):
            own = parts.get(owner)
            if own is None:
                parts[owner] = [text]
            else:
                own.append(text)
        out = [""] * self.num_nodes
        for owner, own in parts.items():
            out[owner] = own[0] if len(own) == 1 else " ".join(own)
        return out

    @cached_property
    def subtree_end(self) -> list[int]:
        """One past each node's last descendant: in pre-order a subtree is ``range(i, end)``."""
        return self.subtree_end_array.tolist()

    @cached_property
    def subtree_end_array(self) -> np.ndarray:
        """``subtree_end`` as int64 [n], for the whole-page arithmetic of ``page.tree``."""
        return subtree_ends(self.parent)

    @cached_property
    def _runs_by_owner(self) -> tuple[list[int], list[int]]:
        order = np.argsort(self.seg_owner, kind="stable")
        return order.tolist(), self.seg_owner[order].tolist()

    def subtree_runs(self, node: int) -> range:
        """Indices of the text runs inside ``node``'s subtree, contiguous in reading order."""
        order, owners = self._runs_by_owner
        lo = bisect_left(owners, node)
        hi = bisect_left(owners, self.subtree_end[node], lo)
        if lo == hi:
            return range(0)
        runs = order[lo:hi]
        return range(min(runs), max(runs) + 1)

    def text_lengths(self) -> np.ndarray:
        return np.fromiter(map(len, self.node_text), dtype=np.int32,
                           count=self.num_nodes)

    @cached_property
    def layout(self) -> np.ndarray:
        """``layout.layout_features`` of the page (float32 [n, LAYOUT_DIM]), computed once: the
        model's input and the block rescorer both read it."""
        from scrapy_grownup.graph.layout import layout_features

        return layout_features(self)

    @cached_property
    def repetition(self) -> np.ndarray:
        """``repetition.repetition_features`` of the page (float32 [n, REPETITION_DIM]),
        computed once, for models that read them."""
        from scrapy_grownup.graph.repetition import repetition_features

        return repetition_features(self)

    @cached_property
    def signals(self) -> np.ndarray:
        """``page_signals.page_signals`` of the page (float32 [SIGNAL_DIM]), computed once: the
        page-type head and the block rescorer both read them."""
        from scrapy_grownup.graph.signals import page_signals

        return page_signals(self)

    def struct_features(self) -> np.ndarray:
        """Encoder-independent features, float32 [n, STRUCT_DIM], blocks as in STRUCT_BLOCKS."""
        return struct_features(self.tag_ids, self.font, self.text_lengths(), self.num_children,
                               self.child_index)

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """``(edge_index [2, e], edge_type [e])`` with PyG's source->target convention.

        Type 0 (PARENT): parent -> child, a node hears its parent. Type 1 (CHILD): child ->
        parent. Type 2 (SELF): self-loops. Each type has its own weights in the model.
        """
        return tree_edges(self.parent)


def struct_features(tag_ids: np.ndarray, font: np.ndarray, text_lengths: np.ndarray,
                    num_children: np.ndarray, child_index: np.ndarray) -> np.ndarray:
    """One-hot and scaled structural features from the compact per-node arrays."""
    n = len(tag_ids)
    out = np.zeros((n, STRUCT_DIM), dtype=np.float32)
    rows = np.arange(n)
    offset = 0
    out[rows, offset + tag_ids.astype(np.int64)] = 1.0
    offset += NUM_TAG_CLASSES
    for column, size in ((0, len(FONT_WEIGHTS)), (1, len(FONT_STYLES)), (2, len(FONT_SIZES))):
        out[rows, offset + font[:, column].astype(np.int64)] = 1.0
        offset += size
    out[:, offset] = np.log1p(text_lengths.astype(np.float32)) / 8.0
    offset += 1
    out[:, offset] = np.log1p(num_children.astype(np.float32)) / 4.0
    offset += 1
    out[rows, offset + np.minimum(child_index, NUM_CHILD_POSITIONS - 1)] = 1.0
    return out


EDGE_PARENT, EDGE_CHILD, EDGE_SELF = 0, 1, 2
NUM_EDGE_TYPES = 3


def tree_edges(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(parent)
    child = np.nonzero(parent >= 0)[0].astype(np.int64)
    par = parent[child].astype(np.int64)
    nodes = np.arange(n, dtype=np.int64)
    src = np.concatenate([par, child, nodes])
    dst = np.concatenate([child, par, nodes])
    types = np.concatenate([
        np.full(len(child), EDGE_PARENT, dtype=np.int64),
        np.full(len(child), EDGE_CHILD, dtype=np.int64),
        np.full(n, EDGE_SELF, dtype=np.int64),
    ])
    return np.stack([src, dst]), types


# ``collect_ids=False``: no table of ``id`` values (only XPath's ``id()`` reads it, never used).
_PARSER_OPTIONS = dict(
    remove_comments=True, remove_pis=True, no_network=True, recover=True, huge_tree=True,
    remove_blank_text=False, compact=True, default_doctype=False, collect_ids=False,
)


def _parser() -> etree.HTMLParser:
    return etree.HTMLParser(encoding="utf-8", **_PARSER_OPTIONS)


@lru_cache(maxsize=4096)
def _norm_tag(tag) -> str | None:
    """Lower-case local name; ``None`` for comments, PIs and entities (their ``tag`` is a
    function). Cached: a page repeats a few dozen tag names thousands of times."""
    if not isinstance(tag, str):
        return None
    if tag.startswith("{"):
        tag = tag.rsplit("}", 1)[1]
    return tag.lower()


def parse_page(
    body: bytes | str,
    url: str | None = None,
    content_type: str | bytes | None = None,
    limits: PageLimits | None = None,
    positions: bool = True,
    visibility: bool = False,
) -> PageStructure:
    """Parse one HTML document into a ``PageStructure``.

    Markup-hidden elements (``visibility.is_hidden``) stay nodes, flagged for the layout
    features; ``visibility=True`` removes them instead (an ablation arm).

    Raises ``NotHTMLError`` for binary formats and ``EmptyPageError`` when no element remains;
    anything else (broken markup, wrong charsets, huge or absurdly deep pages) gives a valid,
    possibly truncated structure whose ``truncated`` list says which cap was hit. A failure
    that is a bug raises ``ParseError``, never another type.
    """
    limits = limits or PageLimits()
    with own_error(ParseError):
        # the walk judges hiding itself, as it reads each element's attributes anyway
        root, encoding, truncated, meta, json_ld = parse_tree(body, content_type, limits,
                                                              visibility, mark=False)
        page = _walk(root, limits, truncated, not visibility)
        page.url, page.encoding, page.meta, page.json_ld = url, encoding, meta, json_ld
        if positions:
            from scrapy_grownup.graph.laplacian import laplacian_positions

            page.positions = laplacian_positions(page.parent, NUM_EIGENVECTORS)
    return page


def parse_tree(body: bytes | str, content_type: str | bytes | None = None,
               limits: PageLimits | None = None, visibility: bool = False, mark: bool = True):
    """Decode and parse into the cleaned lxml tree whose elements become the nodes.

    Returns ``(root, encoding, truncated, meta, json_ld)``; ``PageStructure.locator`` paths
    resolve against this ``root`` (the ``inspect`` report relies on it). Hidden elements are
    removed (``visibility``) or carry ``HIDDEN_MARK``; ``mark=False`` leaves them unmarked for
    a caller that judges them itself.
    """
    limits = limits or PageLimits()
    truncated: list[str] = []
    if isinstance(body, str):
        text, encoding = body, "unicode"
        if not text or text.isspace():  # not strip(): no copy of the page
            raise EmptyPageError("empty body")
        sniff_binary(text)
        if len(text) > limits.max_bytes:
            text, truncated = text[: limits.max_bytes], ["bytes"]
    else:
        body = bytes(body)
        if not body or body.isspace():
            raise EmptyPageError("empty body")
        sniff_binary(body, content_type)
        if len(body) > limits.max_bytes:
            body, truncated = body[: limits.max_bytes], ["bytes"]
        text, encoding = decode_html(body, content_type)
    data = _document_bytes(text, body if encoding == "utf-8" else None)
    if not data or data.isspace():
        raise EmptyPageError("empty body")
    try:
        parser = _parser()
        root = etree.fromstring(data, parser)
        if hit_depth_limit(parser):
            # libxml2 stopped at 2,048 levels and dropped the rest of the page: parse again
            # with the tags nested deeper than FLATTEN_DEPTH left out (their text is kept).
            root = etree.fromstring(flatten_deep(data), _parser())
            truncated.append("libxml2_depth")
    except (etree.ParserError, etree.XMLSyntaxError, ValueError) as exc:
        raise EmptyPageError(f"no HTML element could be parsed: {exc}") from None
    if root is None or not isinstance(root.tag, str):
        raise EmptyPageError("no HTML element could be parsed")
    meta, json_ld = _collect_metadata(root, limits, truncated)
    resolve_noscript(root)
    etree.strip_elements(root, *REMOVED_TAGS, with_tail=False)
    if visibility:
        remove_hidden(root)
    elif mark:
        mark_hidden(root)
    return root, encoding, truncated, meta, json_ld


# What XML refuses (``xmlsafe.XML_REFUSED``) that a strict UTF-8 decoding can hold: C0 controls
# but tab, LF and CR (as bytes), and U+FFFE / U+FFFF (as characters: a fast search of the text).
_REFUSED_BYTES = bytes(range(0x09)) + b"\x0b\x0c" + bytes(range(0x0e, 0x20))


def _document_bytes(text: str, utf8_body: bytes | None) -> bytes:
    """The document for libxml2: ``text`` without what lxml would refuse later (a removed
    element's tail moved to its neighbour, an attribute set by the inspect report), as UTF-8.

    ``utf8_body`` is the body ``text`` was decoded from as UTF-8 (or ``None``): when that
    decoding was strict (no U+FFFD: a lenient one replaces something) the body is already
    those bytes, so it is used as it is unless it holds a refused character."""
    if utf8_body is not None and "\ufffd" not in text and "\ufffe" not in text and \
            "\uffff" not in text:
        data = utf8_body[3:] if utf8_body.startswith(codecs.BOM_UTF8) else utf8_body
        if len(data.translate(None, _REFUSED_BYTES)) == len(data):
            return data
    return xml_safe(text).encode("utf-8", errors="replace")


# Meta keys that repeat once per author (or tag, section); their values are joined with "; ".
MULTI_VALUE_META = frozenset({"author", "article:author", "citation_author", "dc.creator",
                              "dcterms.creator", "parsely-author", "sailthru.author",
                              "article:tag", "og:article:tag", "article:section"})
# Attributes kept per tag in ``PageStructure.attrs`` (``itemprop`` is kept on any element).
KEPT_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "a": ("href", "rel"), "link": ("rel", "href"), "base": ("href",), "time": ("datetime",),
    "ol": ("start",), "td": ("colspan",), "th": ("colspan",), "pre": ("class",),
    "code": ("class",),
    # images of the content (``output.images``): the address, lazy-loading copies of it, the
    # text alternative and the size (a 1x1 tracking pixel is no image)
    "img": ("src", "alt", "data-src", "data-lazy-src", "data-original", "srcset", "data-srcset",
            "width", "height", "title"),
}


def _collect_metadata(root, limits: PageLimits, truncated: list[str]
                      ) -> tuple[dict[str, str], list[str]]:
    """``<meta>`` name/property -> content and JSON-LD blocks, read before they are removed.
    A value over ``limits.max_attribute_chars`` is cut to it and a JSON-LD block over
    ``limits.max_script_chars`` is left out, flagged in ``truncated``."""
    meta: dict[str, str] = {}
    # the values of each multi-valued key, joined with "; " at the end, and their "; "-separated
    # parts so far: a page of 100,000 author <meta> tags is one set lookup each, not a split
    # and a copy of everything before it
    values: dict[str, list[str]] = {}
    parts: dict[str, set[str]] = {}
    json_ld: list[str] = []
    max_attr, max_script = limits.max_attribute_chars, limits.max_script_chars
    for el in root.iter("meta", "script"):
        if el.tag == "meta":
            key = el.get("property") or el.get("name") or el.get("itemprop") or el.get("http-equiv")
            value = el.get("content")
            if not key or not value or not value.strip():
                continue
            if len(key) > max_attr or len(value) > max_attr:
                key, value = key[:max_attr], value[:max_attr]
                _flag(truncated, "attribute")
            key, value = key.lower(), value.strip()
            if key not in meta:
                meta[key] = value
                if key in MULTI_VALUE_META:
                    values[key], parts[key] = [value], set(value.split("; "))
            elif key in MULTI_VALUE_META and value not in parts[key]:
                values[key].append(value)
                parts[key].update(value.split("; "))
        elif (el.get("type") or "").strip().lower() == "application/ld+json" and el.text:
            if len(el.text) > max_script:
                _flag(truncated, "script")
                continue
            json_ld.append(el.text.strip())
    for key, joined in values.items():
        if len(joined) > 1:
            meta[key] = "; ".join(joined)
    return meta, json_ld


def _flag(truncated: list[str], cap: str) -> None:
    if cap not in truncated:
        truncated.append(cap)


# Font buckets depend on the tag and two attributes only; styles repeat across a page and a site.
_font_features = font_features  # cached in fonts.py, but for huge styles (memory stays bounded)


@lru_cache(maxsize=4096)
def _tag_info(raw_tag) -> tuple | None:
    """What the walk needs of an element by its raw ``tag``: ``(name, tag id, block, text,
    kept attribute names, font buckets without style, visibility.tag_hiding)``; ``None`` for
    comments, PIs and entities."""
    tag = _norm_tag(raw_tag)
    if tag is None:
        return None
    return (tag, tag_index(tag), tag in BLOCK_TAGS, tag not in NON_TEXT_TAGS,
            KEPT_ATTRIBUTES.get(tag), font_features(tag, None, None),
            tag_hiding(raw_tag.rsplit("}", 1)[-1].lower()))


_GET = etree._Element.get  # unbound: no bound method made per element

# Attributes only a few elements carry: one ``keys()`` call tells whether to read any of them.
_RARE_ATTRIBUTES = frozenset({"role", "aria-modal", "itemprop", HIDDEN_MARK, *HIDING_ATTRIBUTES})


def _page_text(el) -> str:
    """``"".join(el.itertext())`` without the text of elements whose text is not page text
    (``NON_TEXT_TAGS``: a ``<textarea>`` inside a ``<pre>`` is an editor's copy of the code);
    their tails are kept. A loop, not recursion: a ``<pre>`` may nest a thousand levels."""
    parts = [el.text or ""]
    stack = [(iter(el), None)]
    while stack:
        children, owner = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if owner is not None and owner.tail:
                parts.append(owner.tail)
            continue
        info = _tag_info(child.tag)
        if info is not None and info[3]:  # an element with page text: its text, then inside
            parts.append(child.text or "")
            stack.append((iter(child), child))
        elif child.tail:  # a comment, or an element without page text: only its tail
            parts.append(child.tail)
    return "".join(parts)


def _node_attrs(el, tag: str, kept: tuple[str, ...] | None, rare: bool, hidden: bool,
                max_attr: int, names: list[str]) -> tuple[dict[str, str], bool]:
    """``PageStructure.attrs`` of one node (empty when it has none of them) and whether a
    value was cut. ``kept``: its tag's ``KEPT_ATTRIBUTES``; ``rare``: it has one of
    ``_RARE_ATTRIBUTES``; ``hidden``: it is judged hidden; ``names``: its ``keys()``."""
    values: dict[str, str] = {}
    cut = False
    get = el.get
    for name in kept or ():
        value = get(name) if name in names else None  # most of an <img>'s are absent
        if value:
            if len(value) > max_attr:
                if tag == "img":  # a data: URI image; not read, so nothing is cut
                    continue
                cut = True
                if name == "href":  # a cut URL would point elsewhere
                    continue
                value = value[:max_attr]
            values[name] = value
    if rare:
        role = get("role")
        if role:  # ARIA landmarks (layout features) and dialogs (refine.dialog_nodes)
            values["role"] = role[:100]
        modal = get("aria-modal")
        if modal:
            values["aria-modal"] = modal[:10]
        if hidden or get(HIDDEN_MARK):
            values["hidden"] = "1"
        itemprop = get("itemprop")
        if itemprop:
            content = get("content")
            if len(itemprop) > max_attr or (content and len(content) > max_attr):
                itemprop, content = itemprop[:max_attr], content and content[:max_attr]
                cut = True
            values["itemprop"] = itemprop
            if content:
                values["content"] = content
    elif hidden:
        values["hidden"] = "1"
    return values, cut


def _walk(root, limits: PageLimits, truncated: list[str], judge_hidden: bool = False
          ) -> PageStructure:
    """One pass over the tree with lxml's ``iterwalk``: a node is recorded at its start event
    and its tail text (which belongs to its parent) is emitted at its end event, after its
    subtree. A node over the depth / node caps folds its whole text into its parent and its
    subtree is skipped. Hidden nodes are those ``HIDDEN_MARK`` marks, and with
    ``judge_hidden`` those ``visibility.is_hidden`` hides (the tree is not marked then).

    The loop does the least per element: child positions and counts come from the parent
    array afterwards, and the attributes few elements carry are read only where ``keys()``
    names one."""
    # Per node, one list each (no tuple per node: fewer objects for the cyclic GC to track)
    tags: list[str] = []
    tag_ids: list[int] = []
    parents: list[int] = []
    depths: list[int] = []
    fonts: list[tuple[int, int, int]] = []
    raw_class: list[str | None] = []
    raw_id: list[str | None] = []
    # Per text run: its owner, the separator before it, its raw text, the nodes opened before it.
    seg_owner: list[int] = []
    seg_sep: list[int] = []
    seg_raw: list[str] = []
    seg_pos: list[int] = []
    folded_into: list[int] = []  # the parent of each element the caps left out
    attrs: dict[int, dict[str, str]] = {}
    raw_text: dict[int, str] = {}
    tag_info, font_of, rare_names, get = _tag_info, _font_features, _RARE_ATTRIBUTES, _GET
    title = ""
    max_nodes, max_depth = limits.max_nodes, limits.max_depth
    max_attr = limits.max_attribute_chars
    lang = root.get("lang") or root.get("{http://www.w3.org/XML/1998/namespace}lang")
    cut_attr = False  # a value over max_attr was cut (or a URL over it left out)
    if lang and len(lang) > max_attr:
        lang, cut_attr = lang[:max_attr], True
    sep = SEP_NONE  # separator before the next text run

    def emit(owner: int, raw: str, opened: int) -> None:
        """Append the text run ``raw`` (not empty, not all whitespace) owned by ``owner``,
        after ``opened`` nodes. The first run's separator is set at the end."""
        nonlocal sep
        if sep == SEP_NONE and raw[0].isspace():
            sep = SEP_SPACE
        seg_owner.append(owner)
        seg_sep.append(sep)
        seg_raw.append(raw)
        seg_pos.append(opened)
        sep = SEP_SPACE if raw[-1].isspace() else SEP_NONE

    # Per open element: (node index, or -1 when folded or not an element; block element, or
    # None when not an element). ``open_nodes[-1]`` is the parent of the element being started.
    open_nodes: list[tuple[int, bool | None]] = []
    walker = etree.iterwalk(root, events=("start", "end"))
    for event, el in walker:
        if event == "end":
            block = open_nodes.pop()[1]
            if not open_nodes:
                break  # the root: no tail
            if block is None:  # not an element
                continue
            if block:  # the end of a block element, and so before its tail
                sep = SEP_BLOCK
            tail = el.tail
            if tail:
                if tail.isspace():
                    if sep == SEP_NONE:
                        sep = SEP_SPACE
                else:
                    emit(open_nodes[-1][0], tail, len(tags))
            continue
        info = tag_info(el.tag)
        if info is None:
            open_nodes.append((-1, None))
            walker.skip_subtree()
            continue
        tag, tag_id, block, has_text, kept, plain_font, hiding = info
        dep = len(open_nodes)
        par = open_nodes[-1][0] if dep else -1
        idx = len(tags)
        if dep >= max_depth or idx >= max_nodes:
            _flag(truncated, "depth" if dep >= max_depth else "nodes")
            folded_into.append(par)
            if has_text and par >= 0:
                if block:
                    sep = SEP_BLOCK
                text = " ".join(el.itertext())
                if text:
                    if text.isspace():
                        if sep == SEP_NONE:
                            sep = SEP_SPACE
                    else:
                        emit(par, text, idx)
            open_nodes.append((-1, block))
            walker.skip_subtree()
            continue
        # an absent attribute is read only from the names (``get`` still costs a call), and
        # ``keys()`` lists the no-namespace ones by their plain name, as ``get`` finds them
        names = el.keys()
        if names:
            rare = not rare_names.isdisjoint(names)
            style = get(el, "style") if "style" in names else None
            cls = get(el, "class") if "class" in names else None
            eid = get(el, "id") if "id" in names else None
        else:
            rare, style, cls, eid = False, None, None, None
        hidden = False
        if judge_hidden and hiding != TAG_NEVER:  # judged on the whole style, before a cut
            if rare or hiding != TAG_ATTRIBUTES:
                hidden = hidden_by(hiding, el.get, style)
            elif style:
                hidden = style_hides(style)
        if (style and len(style) > max_attr) or (cls and len(cls) > max_attr) or \
                (eid and len(eid) > max_attr):
            style, cls, eid = style and style[:max_attr], cls and cls[:max_attr], \
                eid and eid[:max_attr]
            cut_attr = True
        if style or tag == "font":
            size = get(el, "size") if tag == "font" else None
            font = font_of(tag, style, size and size[:max_attr])
        else:
            font = plain_font
        tags.append(tag)
        tag_ids.append(tag_id)
        parents.append(par)
        depths.append(dep)
        fonts.append(font)
        raw_class.append(cls)
        raw_id.append(eid)
        if kept is not None or rare or hidden:
            values, cut = _node_attrs(el, tag, kept, rare, hidden, max_attr, names)
            if values:
                attrs[idx] = values
            cut_attr = cut_attr or cut
            if tag == "pre":
                raw_text[idx] = _page_text(el)
        text = el.text
        if block:
            sep = SEP_BLOCK
        if text:
            if tag == "title" and not title:
                if len(text) > max_attr:  # the <title> is read as a value (its run is whole)
                    cut_attr = True
                title = " ".join(text[:max_attr].split())
            if has_text:
                if text.isspace():
                    if sep == SEP_NONE:
                        sep = SEP_SPACE
                else:
                    emit(idx, text, idx + 1)
        open_nodes.append((idx, block))
    if not tags:
        raise EmptyPageError("no element in the document")
    if cut_attr:
        _flag(truncated, "attribute")
    n = len(tags)
    parent = np.array(parents, dtype=np.int32)
    # Children counts include the elements the caps left out. A node's siblings are nodes in
    # document order: its position among them is its rank in its parent's group.
    num_children = np.bincount(parent[1:], minlength=n)
    if folded_into:
        num_children += np.bincount(folded_into, minlength=n)
    order = np.argsort(parent, kind="stable")
    grouped = parent[order]
    child_index = np.empty(n, dtype=np.int32)
    child_index[order] = np.arange(n) - np.searchsorted(grouped, grouped)
    seg_sep = np.array(seg_sep, dtype=np.int8)
    if seg_raw:
        seg_sep[0] = SEP_BLOCK  # the first run starts the text
    # class and id values repeat: each distinct one is split once
    words = {value: attribute_words(value) for value in {*raw_class, *raw_id}}
    return PageStructure(
        url=None,
        encoding="",
        tags=tags,
        parent=parent,
        depth=np.array(depths, dtype=np.int32),
        tag_ids=np.array(tag_ids, dtype=np.int16),
        child_index=child_index,
        num_children=num_children.astype(np.int32),
        font=np.fromiter(chain.from_iterable(fonts), dtype=np.int8, count=3 * n).reshape(n, 3),
        class_words=list(map(words.__getitem__, raw_class)),
        id_words=list(map(words.__getitem__, raw_id)),
        seg_owner=np.array(seg_owner, dtype=np.int32),
        seg_sep=seg_sep,
        seg_text=[" ".join(raw.split()) for raw in seg_raw],
        title=title,
        lang=lang,
        truncated=truncated,
        seg_pos=np.array(seg_pos, dtype=np.int32),
        attrs=attrs,
        raw_text=raw_text,
    )
