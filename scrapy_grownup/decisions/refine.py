"""From node scores to the kept nodes: whole blocks, the main container, no repeated blocks,
and optionally the largest content group.

A reader sees blocks (paragraphs, list items, cells), not elements: ``whole_blocks`` decides each
block with its inline elements (``a``, ``span``, ``em``...) together, by their text-weighted mean
score, so a kept sentence never loses its link text and a dropped teaser never leaves a stray
link behind. A code block (``<pre>``) goes by its most confident token instead: highlighters
wrap every token in its own ``<span>`` (``block_means``).

The page-level decisions follow, each measured across sites (docs/accuracy.md, "Decisions"):

- ``page_threshold``: the cut-off adapts to the page. Scores of one page split into two
  groups (Otsu's criterion over its text-owning nodes, weighted by the log of their text
  length); the cut-off between them is used, held within ``ADAPTIVE_BAND`` of the configured
  threshold, so a page the model is unsure of as a whole loses less and the threshold knob
  still moves precision against recall. ``block_threshold`` (``cut_weight="block-chars"``)
  counts each block once, weighted by its characters: the long paragraphs decide the split,
  not the many short menu items and widget lines. The block rescorer's file asks for it
  (``BlockRescorer.decisions``); the content model alone measured better with the first.
  The cut-off drops below the threshold only on a page that has a block within
  ``LOWERING_MARGIN`` of it (``lowers_cut``): a page of nothing but boilerplate keeps nothing.
  A page that keeps nothing but has prose (three or more long, visible paragraphs of little
  link text outside its navigation, header and footer: ``page_prose``) keeps that prose
  instead, so a page the model cannot read is not lost.
- ``main_container``: most of a page's content sits in one element (the article, the thread,
  the product). Kept blocks outside the deepest element that holds most of the kept text are
  dropped unless the model is sure of them: teaser rails, consent boxes and footers that scored
  just above the threshold.
  (On the block rescorer's probabilities, which already read where each block sits, the
  rescorer's file switches this rule off and widens the band to 0.3.)
- ``without_headline``: the headline is the article's ``title``, not the first line of its
  text; the kept headline element (``metadata.headline_node``) that opens the kept text is
  dropped from the body.
- ``without_byline``: the byline and the date are the article's ``authors`` and ``published``;
  a short block among the first kept ones that names an author or is a date leaves the body.
- ``drop_repeated_blocks``: a block whose text repeats an earlier kept block (a consent
  placeholder for every embed, a "video needs JavaScript" notice, a headline shown twice) is
  kept once.
- ``without_hidden_copies``: a block that markup hides and that repeats the visible kept
  text (a paywall's or a schema.org block's ``display:none`` copy of the whole article) is
  dropped; other hidden blocks (tabs, accordions) stay content.
- ``without_dialogs``: a modal dialog (``role="dialog"`` / ``"alertdialog"``,
  ``aria-modal="true"``) is an overlay over the page: a cookie banner, a newsletter offer, a
  privacy policy or a size chart that scripts open. Kept blocks inside one are dropped, unless
  that would leave the page with no text.
- ``without_screen_reader_text``: text that a CSS utility class hides from the eye and leaves
  to screen readers (``sr-only``, ``visually-hidden``, ``screen-reader-text``: "(opens in a
  new window)", "Skip to search results", "Original price was: $24.95.", a product card's
  name said again for its "Add to cart" button) is not what a reader of the page sees; kept
  nodes inside such an element are dropped, unless that would leave the page with no text.
- ``without_embed_notices``: the consent placeholder of an embedded post or video ("An dieser
  Stelle finden Sie externen Inhalt ... mit einem Klick anzeigen lassen") sits inside the
  article, between its paragraphs, and reads like one; a short block that names external or
  third-party content and asks the reader to click, consent or load it is dropped.

Hausner & Gertz's refinement without rendering: keep the largest contiguous content group.

Their version groups content elements by vertical distance on the rendered page. We have no
layout, so the distance between two consecutive content runs is the number of boilerplate words
between them in reading order; a group ends where that gap exceeds ``max_gap_words``. The group
with the most words is the article; comments and stray teasers far from it are dropped.
"""

from __future__ import annotations

import re

import numpy as np

from scrapy_grownup.page.dom import PageStructure
from scrapy_grownup.decisions import page_memo
from scrapy_grownup.graph.layout import ARIA_ROLES, layout_column
from scrapy_grownup.page.tags import BLOCK_TAGS
from scrapy_grownup.page.tree import depth_levels, inherit, subtree_sum

# Measured on the site-grouped cross-validation (docs/accuracy.md, "Decisions").
CONTAINER_SHARE = 0.7  # the main container holds at least this share of the kept text
CONTAINER_SURE = 0.9   # blocks outside it stay only with at least this score
REPEAT_MIN_WORDS = 3   # shorter repeated blocks ("Share", "Photo") are left alone
ADAPTIVE_BAND = 0.2    # a page's own cut-off stays within this of the configured threshold
LOWERING_MARGIN = 0.2  # ... and drops below it only on a page with a block within this of it
HIDDEN_COPY_WORDS = 50  # a hidden copy of the article is long ...
HIDDEN_COPY_SHARE = 0.8  # ... and most of its word 4-grams are in the visible kept text
NOTICE_MAX_CHARS = 600  # an embed's consent notice is a few sentences, not a paragraph of news
# A page's prose, what a page that keeps nothing falls back to: blocks this long ...
PROSE_MIN_CHARS = 100
PROSE_MAX_LINK_SHARE = 0.3  # ... with less of their text in links ...
PROSE_MIN_BLOCKS = 3   # ... and at least this many of them on the page, ...
PROSE_ALONE_SHARE = 0.8  # ... or fewer that hold this share of the page's shown text (a short
# page whose only prose is one block), none of them asking the reader to act (``_NOTICE_ASK``)
# An embed notice names external content (de, en, fr, es, it, nl) ...
_EXTERNAL_CONTENT = re.compile(
    r"externe[nr]? inhalte?|external content|third[- ]party (?:content|provider)|"
    r"contenus? externes?|contenido externo|contenuto esterno|externe inhoud")
# ... and asks the reader to act on it (lower-cased text; "accept" alone is too common in news)
_NOTICE_ASK = re.compile(
    r"mit einem klick|klicken sie|klick auf|einverstanden|anzeigen lassen|laden und anzeigen|"
    r"zustimm|einwillig|aktivieren|privatsphäre-einstellungen|datenschutz-einstellungen|"
    r"click (?:here|to|on|the)|to (?:view|load|see|display) (?:this|the)|enable (?:cookies|"
    r"javascript)|accept (?:all )?cookies|your consent|cookie settings|privacy settings|"
    r"i agree|afficher|accepter|consentement|aceptar|acconsent|toestemming")
# Every match of ``_EXTERNAL_CONTENT`` holds one of these words: a block's text (its runs joined
# by spaces) holds one only inside a run, so a page whose kept runs hold none has no notice.
_EXTERNAL_WORDS = ("extern", "third", "esterno")
BYLINE_BLOCKS = 5      # a byline is among the first kept blocks ...
BYLINE_WORDS = 12      # ... and short; a date line alone is shorter still
DATE_LINE_WORDS = 8
BYLINE_REST_WORDS = 5  # words besides the author's name(s), unless the rest is a date
# Blocks scored by their most confident node (``block_means``): highlighted code.
CODE_BLOCK_TAGS = frozenset({"pre"})
RECALL_THRESHOLD = 0.2  # ``grownup extract --recall``: this threshold on every page
# ``page_threshold``'s weights: each text-owning node by log(1 + its characters), or each
# block once by its characters
CUT_WEIGHTS = ("log-nodes", "block-chars")


def content_mask(page: PageStructure, probs: np.ndarray, threshold: float = 0.5,
                 refine: bool = False, blocks: bool = True, container: bool = True,
                 repeats: bool = True, adaptive: bool = True,
                 headline: bool = True, byline: bool = True, notices: bool = True,
                 band: float = ADAPTIVE_BAND, cut_weight: str = "log-nodes",
                 copies: bool = True, fallback: bool = True,
                 dialogs: bool = True, screen_reader: bool = True) -> np.ndarray:
    """Nodes whose content probability reaches the page's cut-off (``threshold``, adapted to
    the page within ``band`` when ``adaptive``), judged per block when ``blocks``,
    restricted to the main container (``container``), each repeated block kept once
    (``repeats``), hidden copies of the kept text dropped (``copies``), embeds' consent
    notices dropped (``notices``), blocks inside modal dialogs dropped (``dialogs``), text
    for screen readers only dropped (``screen_reader``), the
    headline left to the title (``headline``) and the byline and date to their fields
    (``byline``), and optionally refined to the largest content group (``refine``); the
    cut-off drops below ``threshold`` only where ``lowers_cut``. Where all that keeps no
    text, the page's prose (``page_prose``, each repeated block once) when ``fallback``.
    ``cut_weight``: how ``page_threshold`` weighs the page's scores (``CUT_WEIGHTS``;
    block-chars judges blocks whole)."""
    check_cut_weight(cut_weight)
    probs = np.asarray(probs, dtype=np.float64)
    lengths = page_memo.text_lengths(page)
    levels = page_memo.levels(page)
    by_block = adaptive and cut_weight == "block-chars"
    block = page_blocks(page) if blocks or repeats or byline or by_block or notices \
        or copies else None
    scores = block_scores(page, probs, block, lengths) if blocks else probs
    if adaptive:
        cut = block_threshold(scores, lengths, block, threshold, band) if by_block else \
            page_threshold(scores, lengths, threshold, band)
        if cut >= threshold or lowers_cut(scores, lengths, threshold):
            threshold = cut
    keep = scores >= threshold
    if container:
        keep = main_container(page, keep, scores, lengths=lengths, levels=levels)
    if repeats:
        keep = drop_repeated_blocks(page, keep, block=block, lengths=lengths)
    if copies:
        keep = without_hidden_copies(page, keep, block=block, lengths=lengths, levels=levels)
    if notices:
        keep = without_embed_notices(page, keep, block=block, lengths=lengths)
    if dialogs:
        keep = without_dialogs(page, keep, lengths=lengths, levels=levels)
    if screen_reader:
        keep = without_screen_reader_text(page, keep, lengths=lengths, levels=levels)
    if headline:
        keep = without_headline(page, keep)
    if byline:
        keep = without_byline(page, keep, block=block, lengths=lengths)
    if fallback and not keeps_text(page, keep, lengths):
        block = page_blocks(page) if block is None else block
        keep = drop_repeated_blocks(page, page_prose(page, block, lengths, levels),
                                    block=block, lengths=lengths)
    return largest_content_group(page, keep) if refine else keep


def check_cut_weight(cut_weight: str) -> str:
    """``cut_weight`` itself, or ``ValueError`` when it is not one of ``CUT_WEIGHTS``."""
    if cut_weight not in CUT_WEIGHTS:
        raise ValueError(f"cut_weight must be one of {CUT_WEIGHTS}, not {cut_weight!r}")
    return cut_weight


def block_of(page: PageStructure, levels: list[np.ndarray] | None = None) -> np.ndarray:
    """Each node's block: itself when its tag is a block element, else its parent's block
    (the root is a block). Resolved one depth level at a time, parents first (``levels``:
    ``tree.depth_levels`` of the page when the caller has it)."""
    n = page.num_nodes
    out = np.arange(n, dtype=np.int64)
    if not n:
        return out
    parent = page.parent.astype(np.int64)
    inline = np.ones(n, dtype=bool)
    tags = page_memo.tag_index(page)
    for tag in BLOCK_TAGS.intersection(tags):
        inline[tags[tag]] = False
    inline &= parent >= 0
    for nodes in (depth_levels(page.depth) if levels is None else levels)[1:]:
        nodes = nodes[inline[nodes]]
        out[nodes] = out[parent[nodes]]
    return out


def page_blocks(page: PageStructure) -> np.ndarray:
    """``block_of`` the page, computed once per page (``page_memo``; read-only)."""
    return page_memo.memo(page, "blocks", lambda: block_of(page, page_memo.levels(page)))


def block_means(page: PageStructure, probs: np.ndarray, block: np.ndarray,
                lengths: np.ndarray) -> np.ndarray:
    """float64 [n]: at each block's root, the block's score: the text-length-weighted mean of
    its text-owning nodes' probabilities; for a code block (``CODE_BLOCK_TAGS``), the highest of
    them and the root's own. Syntax highlighters split code into a ``<span>`` per token, which
    the model judges one by one out of context (a lone ``)`` or ``=``), so a kept listing
    would lose most of its lines; code blocks are content far more often than not (of the
    1,488 ``<pre>`` blocks of ``wcxb_dev`` and magic-html, 1,290 are content by their gold,
    30 are not). 0 elsewhere."""
    probs = np.asarray(probs, dtype=np.float64)
    lengths = lengths.astype(np.float64)
    owners = lengths > 0
    n = page.num_nodes
    weight = np.bincount(block[owners], weights=lengths[owners], minlength=n)
    mass = np.bincount(block[owners], weights=(lengths * probs)[owners], minlength=n)
    mean = np.divide(mass, weight, out=np.zeros(n), where=weight > 0)
    if CODE_BLOCK_TAGS.isdisjoint(page.tags):  # most pages: no code
        return mean
    code = np.fromiter((tag in CODE_BLOCK_TAGS for tag in page.tags), dtype=bool, count=n)
    code &= (block == np.arange(n)) & (weight > 0)
    if code.any():
        best = probs.copy()
        np.maximum.at(best, block[owners], probs[owners])
        mean[code] = best[code]
    return mean


def block_scores(page: PageStructure, probs: np.ndarray, block: np.ndarray | None = None,
                 lengths: np.ndarray | None = None) -> np.ndarray:
    """Each text-owning node's score replaced by its block's score (``block_means``); nodes
    that own no text keep their own. (``block``, ``lengths``: ``block_of`` and
    ``text_lengths`` when the caller has them.)"""
    scores = np.asarray(probs, dtype=np.float64).copy()
    lengths = page.text_lengths() if lengths is None else lengths
    owners = lengths > 0
    if not owners.any():
        return scores
    block = block_of(page) if block is None else block
    scores[owners] = block_means(page, scores, block, lengths)[block[owners]]
    return scores


def page_threshold(scores: np.ndarray, lengths: np.ndarray, threshold: float,
                   band: float = ADAPTIVE_BAND) -> float:
    """The cut-off that best splits the page's text-owning nodes' ``scores`` in two (Otsu:
    most between-group variance, each node weighted by ``log(1 + text length)``), clipped to
    ``threshold`` +- ``band``; ``threshold`` itself when the page has fewer than two distinct
    scores."""
    owners = lengths > 0
    return otsu_cut(np.asarray(scores, dtype=np.float64)[owners],
                    np.log1p(lengths[owners].astype(np.float64)), threshold, band)


def lowers_cut(scores: np.ndarray, lengths: np.ndarray, threshold: float,
               margin: float = LOWERING_MARGIN) -> bool:
    """Whether the page may have its cut-off below ``threshold``: one of its text-owning
    nodes scores at least ``threshold - margin``. Otsu splits every page in two; on a page of
    nothing but boilerplate (a shop's script-rendered shell) the upper group is merely the
    least unlikely lines, a shop's name or a copyright, and a lowered cut-off would keep them.
    Such a page keeps nothing (and in a crawl its item is dropped as empty)."""
    owners = lengths > 0
    return bool(owners.any()) and float(np.max(scores[owners])) >= threshold - margin


# the page's chrome: every landmark role but ``main`` (its landmark tags are all chrome)
_CHROME_ROLES = [k for k, role in enumerate(ARIA_ROLES) if role != "main"]


def page_prose(page: PageStructure, block: np.ndarray, lengths: np.ndarray,
               levels: list[np.ndarray] | None = None) -> np.ndarray:
    """bool [n]: the text-owning nodes of the page's prose: blocks (``block_of``) of
    ``PROSE_MIN_CHARS`` characters or more, under ``PROSE_MAX_LINK_SHARE`` of them link text,
    shown, and outside the page's navigation, header, footer, asides, forms and menus (tags
    and ARIA roles), as ``page.layout`` flags them; none unless the page has
    ``PROSE_MIN_BLOCKS`` such blocks, or fewer that hold ``PROSE_ALONE_SHARE`` of the page's
    shown text, none of which asks the reader to act (``_NOTICE_ASK``: a consent box or a
    newsletter offer is no prose). ``levels``: ``depth_levels`` of the page, when the caller
    has them.

    The last resort of a page whose scores keep nothing. The content model can score every
    block of a page unlike its training sites under 0.1 (a book chapter set as one paragraph
    per printed line, a local station's topic page of teasers), and ``lowers_cut`` then keeps
    nothing: a crawl would drop a page a reader sees as text. A shop's script-rendered shell,
    which should keep nothing, has no such prose: its few long lines are a consent box or a
    newsletter offer, one or two blocks beside its other text. A short page whose only text
    is one paragraph (a script before it made the model keep nothing) is its prose."""
    owners = lengths > 0
    keep = np.zeros(page.num_nodes, dtype=bool)
    if not owners.any():
        return keep
    layout = page.layout  # its flags are inherited from ancestors
    in_link = layout[:, layout_column("in_link")][:, 0] > 0
    chrome = layout[:, layout_column("landmark")].any(axis=1)
    chrome |= layout[:, layout_column("aria_role")][:, _CHROME_ROLES].any(axis=1)
    levels = depth_levels(page.depth) if levels is None else levels
    chrome |= dialog_nodes(page, levels)  # a consent or newsletter overlay's text is not prose
    shown = layout[:, layout_column("hidden")][:, 0] == 0
    n = page.num_nodes
    chars = np.bincount(block[owners], weights=lengths[owners], minlength=n)
    linked = owners & in_link
    link_chars = np.bincount(block[linked], weights=lengths[linked], minlength=n)
    prose = (chars >= PROSE_MIN_CHARS) & (link_chars < PROSE_MAX_LINK_SHARE * chars)
    prose &= shown & ~chrome
    count = int(prose.sum())
    if count < PROSE_MIN_BLOCKS and not (count and _prose_alone(page, prose, chars, lengths,
                                                                   shown, block)):
        return keep
    return owners & prose[block] & ~screen_reader_nodes(page, levels)


def _prose_alone(page: PageStructure, prose: np.ndarray, chars: np.ndarray,
                 lengths: np.ndarray, shown: np.ndarray, block: np.ndarray) -> bool:
    """Whether the prose blocks (``prose``: bool per block root) hold ``PROSE_ALONE_SHARE``
    of the page's shown text and none of them asks the reader to act."""
    total = float(lengths[(lengths > 0) & shown].sum())
    if not total or float(chars[prose].sum()) < PROSE_ALONE_SHARE * total:
        return False
    texts = kept_block_texts(page, prose[block], block)
    return not any(_NOTICE_ASK.search(" ".join(runs).lower()) for runs in texts.values())


def block_threshold(scores: np.ndarray, lengths: np.ndarray, block: np.ndarray,
                    threshold: float, band: float = ADAPTIVE_BAND) -> float:
    """``page_threshold`` with each block counted once and weighted by its characters
    (``scores``: ``block_scores``, one value per block's text-owning nodes; ``block``:
    ``block_of``)."""
    owners = lengths > 0
    chars = np.bincount(block[owners], weights=lengths[owners].astype(np.float64),
                        minlength=len(lengths))
    roots = np.flatnonzero(chars)
    # a block's text-owning nodes share its score; the first one in document order stands
    # for it (the root itself owns no text where all of the block's text sits in inline tags)
    first = np.full(len(lengths), -1, dtype=np.int64)
    nodes = np.flatnonzero(owners)[::-1]
    first[block[nodes]] = nodes
    return otsu_cut(np.asarray(scores, dtype=np.float64)[first[roots]], chars[roots],
                    threshold, band)


def otsu_cut(x: np.ndarray, w: np.ndarray, threshold: float, band: float) -> float:
    """The cut between the two groups of values ``x`` (weights ``w``) with the most
    between-group variance (Otsu), clipped to ``threshold`` +- ``band``; ``threshold`` itself
    with fewer than two distinct values."""
    if len(x) < 2:
        return threshold
    order = np.argsort(x, kind="stable")
    x = x[order]
    w = w[order]
    below_w = np.cumsum(w)[:-1]
    below_m = np.cumsum(w * x)[:-1]
    total_w, total_m = below_w[-1] + w[-1], below_m[-1] + w[-1] * x[-1]
    above_w = total_w - below_w
    valid = (x[:-1] < x[1:]) & (below_w > 0) & (above_w > 0)
    if not valid.any():
        return threshold
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = below_w * above_w * (below_m / below_w - (total_m - below_m) / above_w) ** 2
    k = int(np.argmax(np.where(valid, spread, -1.0)))
    cut = (x[k] + x[k + 1]) / 2
    return float(min(max(cut, threshold - band), threshold + band))


def whole_blocks(page: PageStructure, probs: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """The node mask with every block's text-owning nodes kept or dropped together, by the
    block's score (``block_means``: the text-length-weighted mean probability of those nodes,
    the best of them for code). Nodes that own no text keep their own
    decision."""
    return block_scores(page, probs) >= threshold


def main_container(page: PageStructure, keep: np.ndarray, scores: np.ndarray,
                   share: float = CONTAINER_SHARE, sure: float = CONTAINER_SURE,
                   lengths: np.ndarray | None = None,
                   levels: list[np.ndarray] | None = None) -> np.ndarray:
    """``keep`` without the text-owning nodes outside the deepest element whose subtree holds
    at least ``share`` of the kept text, unless their score reaches ``sure``."""
    keep = np.asarray(keep, dtype=bool)
    lengths = (page.text_lengths() if lengths is None else lengths).astype(np.float64)
    kept_text = np.where(keep, lengths, 0.0)
    total = kept_text.sum()
    if total <= 0:
        return keep.copy()
    levels = page_memo.levels(page) if levels is None else levels
    held = subtree_sum(kept_text, page_memo.parent64(page), levels)
    candidates = np.flatnonzero(held >= share * total - 1e-9)
    top = int(candidates[np.argmax(page.depth[candidates])])
    # Pre-order: a subtree is the run of node ids from its root to the next node that is not
    # deeper than the root.
    after = np.flatnonzero(page.depth[top + 1:] <= page.depth[top])
    stop = top + 1 + int(after[0]) if len(after) else page.num_nodes
    inside = np.zeros(page.num_nodes, dtype=bool)
    inside[top:stop] = True
    outside_text = (lengths > 0) & ~inside & (np.asarray(scores) < sure)
    return keep & ~outside_text


def without_headline(page: PageStructure, keep: np.ndarray) -> np.ndarray:
    """``keep`` without the headline element's text when it opens the kept text (nothing kept
    comes before it): the headline is the article's ``title``."""
    from scrapy_grownup.output.metadata import headline_node  # metadata is not needed until a page is scored

    keep = np.asarray(keep, dtype=bool)
    if not keep.any() or not len(page.seg_text):
        return keep
    head = headline_node(page, keep)
    if head is None:
        return keep
    runs = page.subtree_runs(head)
    kept_runs = np.flatnonzero(keep[page.seg_owner])
    if not len(runs) or not len(kept_runs) or kept_runs[0] < runs[0]:
        return keep
    owners = np.unique(page.seg_owner[runs])
    if not keep[owners].any():
        return keep
    out = keep.copy()
    out[owners] = False
    return out


def without_blocks(page: PageStructure, keep: np.ndarray, block: np.ndarray, drop,
                   lengths: np.ndarray | None = None) -> np.ndarray:
    """``keep`` without the text of the blocks rooted at ``drop`` (itself when there are
    none); ``block``: ``block_of`` the page."""
    if not len(drop):
        return keep
    lengths = page.text_lengths() if lengths is None else lengths
    out = np.array(keep, dtype=bool)
    out[np.isin(block, drop) & (lengths > 0)] = False
    return out


def kept_block_texts(page: PageStructure, keep: np.ndarray,
                     block: np.ndarray) -> dict[int, list[str]]:
    """The text runs of each block that has kept text, keyed by the block's root node."""
    texts: dict[int, list[str]] = {}
    owners = page.seg_owner
    for k in np.flatnonzero(keep[owners]).tolist():
        texts.setdefault(int(block[owners[k]]), []).append(page.seg_text[k])
    return texts


def without_byline(page: PageStructure, keep: np.ndarray, block: np.ndarray | None = None,
                   lengths: np.ndarray | None = None) -> np.ndarray:
    """``keep`` without the byline and date lines: among the first ``BYLINE_BLOCKS`` kept
    blocks, those of at most ``BYLINE_WORDS`` words that hold one of the page's authors
    (``metadata.authors``) and little else (``BYLINE_REST_WORDS`` more words, or a date), and
    those of at most ``DATE_LINE_WORDS`` words that hold a date."""
    from scrapy_grownup.output.metadata import authors, text_date

    keep = np.asarray(keep, dtype=bool)
    if not keep.any() or not len(page.seg_text):
        return keep
    block = block_of(page) if block is None else block
    texts = kept_block_texts(page, keep, block)
    first = sorted(texts)[:BYLINE_BLOCKS]  # block roots in reading order
    names = None
    drop = []
    for b in first:
        text = " ".join(texts[b])
        words = text.count(" ") + 1
        if words > BYLINE_WORDS:
            continue
        if words <= DATE_LINE_WORDS and text_date(text):
            drop.append(b)
            continue
        if names is None:
            names = [n.casefold() for n in authors(page, keep=keep) if len(n) > 3]
        rest = text.casefold()
        named = False
        for name in names:
            if name in rest:
                rest, named = rest.replace(name, " "), True
        # "By Jane Doe, staff reporter", "Jane Doe | 17 July 2024": the name and little else
        if named and (len(rest.split()) <= BYLINE_REST_WORDS or text_date(rest)):
            drop.append(b)
    return without_blocks(page, keep, block, drop, lengths)


def drop_repeated_blocks(page: PageStructure, keep: np.ndarray,
                         min_words: int = REPEAT_MIN_WORDS, block: np.ndarray | None = None,
                         lengths: np.ndarray | None = None) -> np.ndarray:
    """``keep`` with every kept block whose text (``min_words`` words or more) repeats an
    earlier kept block's dropped; the first one stays."""
    keep = np.asarray(keep, dtype=bool)
    if not len(page.seg_text):
        return keep
    block = block_of(page) if block is None else block
    texts = kept_block_texts(page, keep, block)
    seen: set[str] = set()
    repeated: list[int] = []
    for b in sorted(texts):  # block roots in reading order
        text = " ".join(texts[b]).casefold()  # runs are whitespace-normalised already
        if text.count(" ") + 1 < min_words:
            continue
        if text in seen:
            repeated.append(b)
        else:
            seen.add(text)
    return without_blocks(page, keep, block, repeated, lengths)


def marked_nodes(page: PageStructure, marked, levels: list[np.ndarray] | None = None,
                 keys: tuple[str, ...] = ()) -> np.ndarray:
    """bool [n]: the nodes whose kept attributes (``page.attrs``) satisfy ``marked``,
    themselves or through an ancestor. ``keys``: attributes ``marked`` needs one of (nodes
    with none of them are not asked)."""
    out = np.zeros(page.num_nodes, dtype=bool)
    if keys:
        attrs = page.attrs
        found = [i for key in keys for i in page_memo.attribute_nodes(page, key)
                 if marked(attrs[i])]
    else:
        found = [i for i, values in page.attrs.items() if marked(values)]
    out[found] = True
    return _with_descendants(page, out, levels)


def _with_descendants(page: PageStructure, flags: np.ndarray,
                      levels: list[np.ndarray] | None) -> np.ndarray:
    """``flags`` spread from each flagged node to its whole subtree."""
    if not flags.any():
        return flags
    levels = page_memo.levels(page) if levels is None else levels
    return inherit(flags, page_memo.parent64(page), levels)


def hidden_nodes(page: PageStructure, levels: list[np.ndarray] | None = None) -> np.ndarray:
    """bool [n]: the nodes that markup hides (``visibility.is_hidden``), themselves or through
    an ancestor (computed once per page: read-only)."""
    return page_memo.memo(page, "hidden", lambda: marked_nodes(
        page, lambda values: bool(values.get("hidden")), levels, ("hidden",)))


# ARIA roles of a dialog; ``aria-modal="true"`` marks a modal one under any role
DIALOG_ROLES = frozenset({"dialog", "alertdialog"})


def _is_dialog(values: dict) -> bool:
    return (values.get("aria-modal") or "").strip().lower() == "true" or \
        not DIALOG_ROLES.isdisjoint((values.get("role") or "").lower().split())


def dialog_nodes(page: PageStructure, levels: list[np.ndarray] | None = None) -> np.ndarray:
    """bool [n]: the nodes inside an ARIA dialog (a ``role`` in ``DIALOG_ROLES``, or
    ``aria-modal="true"``), the dialog's own element included (computed once per page:
    read-only)."""
    return page_memo.memo(page, "dialogs", lambda: marked_nodes(
        page, _is_dialog, levels, ("aria-modal", "role")))


def without_dialogs(page: PageStructure, keep: np.ndarray, lengths: np.ndarray | None = None,
                    levels: list[np.ndarray] | None = None) -> np.ndarray:
    """``keep`` without the nodes inside ARIA dialogs (``dialog_nodes``), unless that leaves
    no text. A modal is an overlay a script opens over the page: a consent banner, a
    newsletter offer, a refund or privacy policy, a size chart. Served in the HTML, closed,
    it reads like content, and the content model can score a shop's whole privacy policy
    0.9 (allbirds.com). A ``<dialog>`` element without ``open`` is already hidden
    (``visibility``); ARIA dialogs are plain elements that only scripts show or hide. Where the
    page's only kept text is in a dialog, it stays: a dialog that is the page (a post opened
    as a modal) is better kept than an empty article."""
    return _without_unless_empty(page, keep, dialog_nodes(page, levels), lengths)


# The CSS utility classes that hide an element's text from the eye but not from screen
# readers, as ``attributes.attribute_words`` writes a class attribute: Bootstrap's and
# Tailwind's ``sr-only``, Bootstrap 5's, Drupal's, Shopify's and GOV.UK's ``visually-hidden``,
# HTML5 Boilerplate's and Apple's ``visuallyhidden``, WordPress's ``screen-reader-text``,
# Drupal 7's ``element-invisible``, Foundation's ``show-for-sr``, ``a11y-hidden``,
# ``offscreen``, Bootstrap 3's image-replacement ``text-hide``.
_SCREEN_READER_CLASS = re.compile(
    r"(?:^| )(?:sr only|sr text|show for sr|visually hidden|visuallyhidden|hidden visually|"
    r"screen ?reader (?:text|only)|assistive text|element invisible|a y hidden|offscreen|"
    r"off screen|text hide|hide text)(?: |$)")


def screen_reader_nodes(page: PageStructure, levels: list[np.ndarray] | None = None
                        ) -> np.ndarray:
    """bool [n]: the nodes inside an element whose class hides its text from the eye but not
    from screen readers (``_SCREEN_READER_CLASS``), the element itself included (computed once
    per page: read-only)."""
    return page_memo.memo(page, "screen_reader", lambda: _screen_reader_nodes(page, levels))


def _screen_reader_nodes(page: PageStructure, levels: list[np.ndarray] | None) -> np.ndarray:
    classes = page.class_words
    # a page repeats a few class lists many times: each distinct one is searched once, and
    # only where it holds a word of those names ("sr", "hid"den or "hide", "screen",
    # "assistive", "invisible": most hold none)
    hits = {words for words in set(classes)
            if ("sr" in words or "hid" in words or "screen" in words or "assistive" in words
                or "invisible" in words) and _SCREEN_READER_CLASS.search(words)}
    if not hits:
        return np.zeros(page.num_nodes, dtype=bool)
    return _with_descendants(page, np.fromiter((words in hits for words in classes),
                                               dtype=bool, count=page.num_nodes), levels)


def without_screen_reader_text(page: PageStructure, keep: np.ndarray,
                               lengths: np.ndarray | None = None,
                               levels: list[np.ndarray] | None = None) -> np.ndarray:
    """``keep`` without the nodes whose text is for screen readers only
    (``screen_reader_nodes``), unless that leaves no text. Such text sits inside kept blocks,
    in a link's or a price's own ``<span>`` ("(opens in a new window)", "Current price is:"),
    so judging whole blocks keeps it; a reader of the page never sees it, and a shop's grid
    says every product's name once more for its hidden "Add to cart" label."""
    return _without_unless_empty(page, keep, screen_reader_nodes(page, levels), lengths)


def _without_unless_empty(page: PageStructure, keep: np.ndarray, drop: np.ndarray,
                          lengths: np.ndarray | None) -> np.ndarray:
    """``keep`` without the nodes of ``drop``, or ``keep`` itself where that would leave no
    node that owns text: an empty article is worse than one that keeps such text."""
    keep = np.asarray(keep, dtype=bool)
    if not (keep & drop).any():
        return keep
    out = keep & ~drop
    return out if keeps_text(page, out, lengths) else keep


def keeps_text(page: PageStructure, keep, lengths: np.ndarray | None = None) -> bool:
    """Whether ``keep`` holds a node that owns text (``lengths``: ``page.text_lengths()``,
    when the caller has them)."""
    lengths = page_memo.text_lengths(page) if lengths is None else lengths
    return bool(np.any(np.asarray(keep, dtype=bool) & (lengths > 0)))


_WORD = re.compile(r"\w+")


def _four_grams(text: str) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.casefold())
    return {tuple(words[i:i + 4]) for i in range(len(words) - 3)}


def without_hidden_copies(page: PageStructure, keep: np.ndarray,
                          block: np.ndarray | None = None, lengths: np.ndarray | None = None,
                          levels: list[np.ndarray] | None = None) -> np.ndarray:
    """``keep`` without the kept blocks that markup hides and that repeat the visible kept
    text: at least ``HIDDEN_COPY_WORDS`` words, ``HIDDEN_COPY_SHARE`` of their word 4-grams
    in the kept blocks a reader sees. Paywalls and schema.org blocks carry the whole article
    again in a ``display:none`` element, which doubles it; hidden elements stay nodes (tabs,
    accordions and FAQ answers are content: ``dom.parse_page``), and the model can score such
    a copy as highly as the article it copies."""
    keep = np.asarray(keep, dtype=bool)
    if not keep.any() or not page.attrs or not len(page.seg_text):
        return keep
    hidden = hidden_nodes(page, levels)
    if not (hidden & keep).any():
        return keep
    block = block_of(page) if block is None else block
    texts = {b: " ".join(runs) for b, runs in kept_block_texts(page, keep, block).items()}
    copies = [b for b, text in texts.items()
              if hidden[b] and len(_WORD.findall(text)) >= HIDDEN_COPY_WORDS]
    if not copies:
        return keep
    seen = set().union(*(_four_grams(text) for b, text in texts.items() if not hidden[b]))
    drop = []
    for b in copies:
        grams = _four_grams(texts[b])
        if grams and len(grams & seen) >= HIDDEN_COPY_SHARE * len(grams):
            drop.append(b)
    return without_blocks(page, keep, block, drop, lengths)


def without_embed_notices(page: PageStructure, keep: np.ndarray,
                          block: np.ndarray | None = None,
                          lengths: np.ndarray | None = None) -> np.ndarray:
    """``keep`` without the kept blocks of at most ``NOTICE_MAX_CHARS`` characters that name
    external content (``_EXTERNAL_CONTENT``) and ask the reader to show it
    (``_NOTICE_ASK``): an embed's consent placeholder."""
    keep = np.asarray(keep, dtype=bool)
    if not keep.any() or not len(page.seg_text):
        return keep
    texts = page.seg_text
    kept = "\n".join([texts[k] for k in np.flatnonzero(keep[page.seg_owner]).tolist()]).lower()
    if not any(word in kept for word in _EXTERNAL_WORDS):
        return keep
    block = block_of(page) if block is None else block
    notices = []
    for b, runs in kept_block_texts(page, keep, block).items():
        text = " ".join(runs)
        if len(text) > NOTICE_MAX_CHARS:
            continue
        low = text.lower()
        if _EXTERNAL_CONTENT.search(low) and _NOTICE_ASK.search(low):
            notices.append(b)
    return without_blocks(page, keep, block, notices, lengths)


def largest_content_group(page: PageStructure, keep: np.ndarray,
                          max_gap_words: int = 40) -> np.ndarray:
    """Return a copy of the node mask ``keep`` restricted to the largest content group."""
    keep = np.asarray(keep, dtype=bool)
    if not keep.any() or not len(page.seg_text):
        return keep.copy()
    words = np.fromiter((t.count(" ") + 1 for t in page.seg_text), dtype=np.int64,
                        count=len(page.seg_text))
    content = keep[page.seg_owner]
    if not content.any():  # the kept nodes own no text: nothing to group
        return keep.copy()
    group = np.full(len(words), -1)
    current, gap, started = 0, 0, False
    for i in range(len(words)):
        if content[i]:
            if started and gap > max_gap_words:
                current += 1
            group[i], gap, started = current, 0, True
        elif started:
            gap += words[i]
    sizes = np.bincount(group[group >= 0], weights=words[group >= 0])
    best = int(np.argmax(sizes))
    owners = np.unique(page.seg_owner[group == best])
    refined = np.zeros_like(keep)
    refined[owners] = True  # kept wrappers that own no text do not affect the text
    return refined
