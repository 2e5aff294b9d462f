"""A second opinion on every block, from its context: the block rescorer.

The content head scores nodes one at a time from what message passing brings them. What it
misses is visible one level up: a teaser list whose items each look like a lede, a newsletter
box inside the article container, a forum post scored low between two posts scored high. The
rescorer reads, per block (``refine.block_of``), the content head's scores of the block, of its
four nearest ancestors' subtrees and of its neighbours in reading order, where it sits against
the page's own cut-off and main container, whether its text repeats, its tag and layout
features (``layout.layout_features``), what its own and its ancestors' class and id words say
it is (``attribute_cues``) and the page's signals (``page_signals``: what kind of page it is),
and returns the probability that the block is content.

It is a gradient-boosted tree ensemble (trained by ``grownup lab fit-rescorer`` with scikit-learn
on the cross-validation folds' out-of-fold scores, so it learns how the model errs on sites it
has not seen) evaluated here in numpy: serving needs no scikit-learn. The trees of all
iterations step down together (``boosted_trees``).
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise, repeat
from operator import itemgetter
from pathlib import Path

import numpy as np

from scrapy_grownup.graph.attribute_cues import CUE_NAMES, cue_bits, cue_columns
from scrapy_grownup.page.dom import PageStructure
from scrapy_grownup.graph.layout import LAYOUT_DIM
from scrapy_grownup.graph.signals import SIGNAL_DIM, SIGNAL_VERSION
from scrapy_grownup.decisions import page_memo
from scrapy_grownup.decisions.refine import (ADAPTIVE_BAND, CONTAINER_SHARE, block_means, block_of,
                     check_cut_weight, page_blocks, page_threshold)
from scrapy_grownup.decisions.boosted_trees import BoostedTrees
from scrapy_grownup.page.tree import inherit, subtree_sum

__all__ = ["BLOCK_FEATURE_VERSION", "BLOCK_FEATURE_NAMES", "RESCORER_FILE", "BlockRescorer",
           "block_features", "spread_to_nodes"]

BLOCK_FEATURE_VERSION = "3"  # 2: the class and id cues; 3: code blocks scored by their best node
RESCORER_FILE = "block_rescorer.npz"
# Blocks the content head scores below this keep their score: most of a page's blocks (menus,
# footers), which hold almost none of the content's text (docs/research/rescorer-ablations.md).
FLOOR = 0.01
ANCESTORS = 4
TAGS = ("p", "li", "div", "td", "h1", "h2", "h3", "h4", "h5", "h6", "span", "a", "figcaption",
        "blockquote", "pre", "dd", "dt", "section", "article", "button", "label", "th", "time",
        "strong", "em")
_TAG_COLUMN = {tag: k for k, tag in enumerate(TAGS)}
BLOCK_FEATURE_NAMES: tuple[str, ...] = (
    "score", "max_score", "min_score", "log_chars", "log_words",
    *(f"{what}_{k}" for k in range(1, ANCESTORS + 1) for what in ("ancestor_score",
                                                                 "ancestor_chars")),
    "previous_score", "next_score", "previous_2_score", "next_2_score",
    "page_cut", "page_share_above", "page_mean_score", "page_log_blocks", "page_max_score",
    "score_minus_cut", "in_container", "container_depth", "log_repeats", "block_position",
    *(f"layout_{k}" for k in range(LAYOUT_DIM)),
    *(f"tag_{tag}" for tag in TAGS), "tag_other",
    *(f"page_signal_{k}" for k in range(SIGNAL_DIM)),
    *(f"cue_{name}" for name in CUE_NAMES), *(f"inside_cue_{name}" for name in CUE_NAMES),
    "has_class_or_id",
)


def block_features(page: PageStructure, probs: np.ndarray, threshold: float = 0.4,
                   layout: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(roots, X)``: the text-owning blocks' root nodes in reading order and their
    ``float32 [blocks, len(BLOCK_FEATURE_NAMES)]`` features from the content head's ``probs``.
    ``threshold``: the content head's cut-off the page-level features are taken at;
    ``layout``: the page's layout features (default: ``page.layout``)."""
    return _block_table(page, probs, threshold, layout)[:2]


def _block_table(page: PageStructure, probs: np.ndarray, threshold: float,
                 layout: np.ndarray | None) -> tuple:
    """``block_features`` and what ``rescore`` reuses: each node's block and the text-owning
    nodes' mask."""
    n = page.num_nodes
    probs = np.asarray(probs, dtype=np.float64)
    lengths = page_memo.text_lengths(page).astype(np.float64)
    owners = lengths > 0
    if not owners.any():
        return (np.zeros(0, np.int64), np.zeros((0, len(BLOCK_FEATURE_NAMES)), np.float32),
                None, owners)
    levels = page_memo.levels(page)
    parent = page_memo.parent64(page)
    block = page_blocks(page)
    owned = np.flatnonzero(owners)
    owned_block = block[owned]
    # the text-owning nodes by block, in document order within each
    by_block = np.argsort(owned_block, kind="stable")
    grouped = owned_block[by_block]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    roots = grouped[starts]
    m = len(roots)
    chars = np.bincount(owned_block, weights=lengths[owners], minlength=n)[roots]
    means = block_means(page, probs, block, lengths)
    score = means[roots]
    top = np.full(n, -1.0)
    np.maximum.at(top, owned_block, probs[owners])
    low = np.full(n, 2.0)
    np.minimum.at(low, owned_block, probs[owners])
    subtree_chars = subtree_sum(lengths, parent, levels)
    subtree_mean = np.divide(subtree_sum(lengths * probs, parent, levels), subtree_chars,
                             out=np.zeros(n), where=subtree_chars > 0)
    ancestors = []
    node = roots
    for _ in range(ANCESTORS):
        node = np.where(parent[node] >= 0, parent[node], node)
        ancestors += [subtree_mean[node], np.log1p(subtree_chars[node]) / 10]
    previous = np.r_[0.0, score[:-1]]
    following = np.r_[score[1:], 0.0]
    previous_2 = np.r_[0.0, 0.0, score[:-2]][:m]
    following_2 = np.r_[score[2:], 0.0, 0.0][:m]
    # the page as refine.content_mask sees it (refine.block_scores, from the means above)
    scores = probs.copy()
    scores[owners] = means[owned_block]
    cut = page_threshold(scores, lengths, threshold)
    total = lengths.sum()
    share_above = lengths[owners & (scores >= threshold)].sum() / total
    mean_score = (lengths * probs).sum() / total
    kept_text = np.where(scores >= cut, lengths, 0.0)
    inside = np.zeros(m)
    container_depth = np.zeros(m)
    if kept_text.sum() > 0:  # refine.main_container's element
        held = subtree_sum(kept_text, parent, levels)
        candidates = np.flatnonzero(held >= CONTAINER_SHARE * kept_text.sum() - 1e-9)
        first = int(candidates[np.argmax(page.depth[candidates])])
        after = np.flatnonzero(page.depth[first + 1:] <= page.depth[first])
        stop = first + 1 + int(after[0]) if len(after) else n
        inside = ((roots >= first) & (roots < stop)).astype(np.float64)
        container_depth = (page.depth[roots] - page.depth[first]) / 10
    texts = page.node_text
    texts = [texts[i] for i in owned[by_block].tolist()]
    bounds = starts.tolist() + [len(texts)]
    keys = [" ".join(texts[a:b]).casefold() for a, b in pairwise(bounds)]
    repeats = np.array(list(map(Counter(keys).__getitem__, keys)), dtype=np.float64)
    words = np.fromiter(map(str.count, keys, repeat(" ")), dtype=np.float64, count=m) + 1
    if layout is None:
        layout = page.layout
    tag = np.zeros((m, len(TAGS) + 1), np.float32)
    tags = page.tags
    tag[np.arange(m), [_TAG_COLUMN.get(tags[r], len(TAGS)) for r in roots.tolist()]] = 1
    cues, inside_cues = _root_cues(page, roots, parent, levels)
    class_words, id_words = _pick(page.class_words, roots), _pick(page.id_words, roots)
    named = np.fromiter(map(bool, class_words), dtype=bool, count=m) | \
        np.fromiter(map(bool, id_words), dtype=bool, count=m)
    X = np.column_stack([
        score, top[roots], low[roots], np.log1p(chars) / 10, np.log1p(words) / 5, *ancestors,
        previous, following, previous_2, following_2,
        np.full(m, cut), np.full(m, share_above), np.full(m, mean_score),
        np.full(m, np.log1p(m) / 8), np.full(m, score.max()), score - cut, inside,
        container_depth, np.log1p(repeats - 1), np.arange(m) / max(m - 1, 1),
        layout[roots], tag, np.broadcast_to(page.signals, (m, SIGNAL_DIM)),
        cues, inside_cues, named,
    ]).astype(np.float32)
    return roots, X, block, owners


def _pick(items: list, nodes: np.ndarray) -> list:
    """``[items[i] for i in nodes]``, the lookups in C."""
    nodes = nodes.tolist()
    return list(itemgetter(*nodes)(items)) if len(nodes) > 1 else [items[i] for i in nodes]


def _root_cues(page: PageStructure, roots: np.ndarray, parent: np.ndarray,
               levels: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``attribute_cues`` of the blocks' ``roots`` and their ``inherit``-ed cues (a root's or
    an ancestor's), bool [roots, len(CUE_NAMES)]. Only the roots and their ancestors are
    read (most of a page's nodes are inline or hold no text), their cues kept as bits."""
    n = page.num_nodes
    needed = np.zeros(n, dtype=bool)
    needed[roots] = True
    for nodes in reversed(levels[1:]):
        needed[parent[nodes[needed[nodes]]]] = True
    nodes = np.flatnonzero(needed)
    bits = np.zeros(n, dtype=np.int64)
    bits[nodes] = cue_bits(_pick(page.class_words, nodes), _pick(page.id_words, nodes))
    inside = inherit(bits, parent, levels)
    return cue_columns(bits[roots]), cue_columns(inside[roots])


def _first_difference(names: tuple[str, ...]) -> str:
    """Where a rescorer file's feature names first differ from ``BLOCK_FEATURE_NAMES``."""
    for k, (theirs, ours) in enumerate(zip(names, BLOCK_FEATURE_NAMES)):
        if theirs != ours:
            return f"column {k} {theirs!r} where this package has {ours!r}"
    k = min(len(names), len(BLOCK_FEATURE_NAMES))
    extra = names[k] if len(names) > k else BLOCK_FEATURE_NAMES[k]
    return f"the first {k} the same, then {extra!r} on one side only"


def spread_to_nodes(page: PageStructure, probs: np.ndarray, roots: np.ndarray,
                    block_probs: np.ndarray, block: np.ndarray | None = None,
                    owners: np.ndarray | None = None) -> np.ndarray:
    """``probs`` with every text-owning node's score replaced by its block's ``block_probs``
    (nodes that own no text keep theirs). ``block``, ``owners``: ``refine.block_of`` and the
    text-owning mask, when the caller has them."""
    out = np.asarray(probs, dtype=np.float64).copy()
    if not len(roots):
        return out
    owners = page.text_lengths() > 0 if owners is None else owners
    block = block_of(page) if block is None else block
    by_root = np.zeros(page.num_nodes)
    by_root[roots] = block_probs
    out[owners] = by_root[block[owners]]
    return out


class BlockRescorer:
    """Gradient-boosted trees (``boosted_trees.BoostedTrees``, one output) over
    ``block_features``: the probability is ``sigmoid(bias + sum of the leaves reached)``.

    ``cut``: the probability a block needs to be kept (the content head's ``threshold`` is
    replaced by it), ``feature_threshold``: the content head's cut-off the page features are
    taken at; blocks scored under ``floor`` keep their score (they are not trained on either).
    ``container``, ``band`` and ``cut_weight``: the page-level decisions that suit the rescored
    probabilities (``refine.content_mask``'s: whether blocks outside the main container are
    dropped, how far a page's own cut-off may move from ``cut``, and how the cut-off weighs
    the page's blocks), measured by ``grownup lab fit-rescorer``.
    """

    def __init__(self, trees: BoostedTrees, cut: float = 0.5, feature_threshold: float = 0.4,
                 floor: float = FLOOR, feature_names: tuple[str, ...] = BLOCK_FEATURE_NAMES,
                 container: bool = True, band: float = ADAPTIVE_BAND,
                 cut_weight: str = "log-nodes"):
        if trees.num_outputs != 1:
            raise ValueError("a block rescorer's trees have one output (a binary model)")
        self.trees = trees
        self.cut = float(cut)
        self.feature_threshold = float(feature_threshold)
        self.floor = float(floor)
        self.feature_names = tuple(feature_names)
        self.container = bool(container)
        self.band = float(band)
        self.cut_weight = check_cut_weight(cut_weight)

    @property
    def decisions(self) -> dict:
        """``refine.content_mask`` options for rescored probabilities."""
        return {"container": self.container, "band": self.band, "cut_weight": self.cut_weight}

    @classmethod
    def from_sklearn(cls, model, cut: float = 0.5, feature_threshold: float = 0.4,
                     floor: float = FLOOR, container: bool = True,
                     band: float = ADAPTIVE_BAND,
                     cut_weight: str = "log-nodes") -> "BlockRescorer":
        """From a fitted binary ``HistGradientBoostingClassifier`` (numeric features, no
        missing values)."""
        return cls(BoostedTrees.from_sklearn(model), cut, feature_threshold, floor,
                   container=container, band=band, cut_weight=cut_weight)

    def save(self, path: str | Path) -> None:
        arrays = self.trees.arrays()
        del arrays["output"]  # one output: the file format of rescorers before BoostedTrees
        np.savez_compressed(
            path, **arrays, cut=self.cut, feature_threshold=self.feature_threshold,
            floor=self.floor, container=self.container, band=self.band,
            cut_weight=self.cut_weight, version=f"{BLOCK_FEATURE_VERSION}/{SIGNAL_VERSION}",
            feature_names=np.array(self.feature_names))

    @classmethod
    def load(cls, path: str | Path) -> "BlockRescorer":
        """Raises ``ValueError`` when the file was made for other block features."""
        with np.load(path, allow_pickle=False) as f:
            version = str(f["version"])
            names = tuple(str(x) for x in f["feature_names"])
            ours = f"{BLOCK_FEATURE_VERSION}/{SIGNAL_VERSION}"
            if version != ours:
                raise ValueError(f"{path}: block rescorer for block features version "
                                 f"{version!r} (and page signals); this package computes "
                                 f"{ours!r}: refit it with grownup lab fit-rescorer")
            if names != BLOCK_FEATURE_NAMES:
                raise ValueError(f"{path}: block rescorer fitted on {len(names)} block "
                                 f"features, {_first_difference(names)}; this package "
                                 f"computes {len(BLOCK_FEATURE_NAMES)}: refit it with "
                                 f"grownup lab fit-rescorer")
            # a file written before a decision was stored gets the constructor's default,
            # the content model's own
            decisions = {name: cast(f[name]) for name, cast in
                         (("container", bool), ("band", float), ("cut_weight", str))
                         if name in f.files}
            return cls(BoostedTrees.from_arrays(f), float(f["cut"]),
                       float(f["feature_threshold"]), float(f["floor"]), names, **decisions)

    @property
    def num_trees(self) -> int:
        return self.trees.num_trees

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Content probability of each row of ``X`` ([blocks, features]; none gives none)."""
        return 1.0 / (1.0 + np.exp(-self.trees.raw(X)[:, 0]))

    def rescore(self, page: PageStructure, probs: np.ndarray,
                layout: np.ndarray | None = None) -> np.ndarray:
        """``probs`` with each text-owning node's score replaced by its block's rescored
        probability (its block's content-head score below ``floor``)."""
        roots, X, block, owners = _block_table(page, probs, self.feature_threshold, layout)
        block_probs = X[:, 0].astype(np.float64)  # the column "score"
        judged = block_probs >= self.floor
        block_probs[judged] = self.predict(X[judged])
        return spread_to_nodes(page, probs, roots, block_probs, block, owners)
