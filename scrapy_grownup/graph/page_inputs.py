"""A page's model inputs in a compact form, and many pages' inputs as one model batch.

``page_inputs`` computes on one parsed page everything the model reads that is neither the text
encoder nor the network: the structure's compact arrays, the Laplacian positions, the layout,
repetition and signal features, and each text block as the page's distinct strings with one
index per node. ``batch_inputs`` joins several pages' inputs into the arrays of
``Featurizer.batch_arrays`` (which is built on the two): the strings of all pages go through
the encoder in one call (its cache and deduplication), the dense blocks are concatenated.

A crawl's page workers compute the inputs and send them to the model process; the page, its
strings' order and everything else the article reads stays in the worker. Each node's string
index points into its page's own list, so the lists are short (most of a page's strings repeat)
and the join needs no object of the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from scrapy_grownup.page.dom import NUM_EIGENVECTORS, PageStructure, struct_features

TEXT_ATTRIBUTES = ("node_text", "class_words", "id_words")  # the text blocks, in TEXT_BLOCKS order
TEXT_BLOCKS = ("x_text", "x_class", "x_id")


@dataclass
class PageInputs:
    """One page's model inputs: numpy arrays and three lists of strings, no page object.

    ``strings[b]``: the distinct strings of text block ``b`` (``TEXT_BLOCKS``) in first-seen
    order; ``index[b, v]``: node ``v``'s row in it (``index`` None: ``strings[b]`` are the
    nodes' own strings, one per node). ``parent``: each node's parent (-1 at the root).
    ``structure``: the arrays ``struct_features`` reads. ``layout``, ``repetition``,
    ``signals``: those features where the model reads them, else None.
    """

    num_nodes: int
    strings: tuple[list[str], list[str], list[str]]
    index: np.ndarray | None
    parent: np.ndarray
    structure: tuple[np.ndarray, ...]
    positions: np.ndarray
    layout: np.ndarray | None
    repetition: np.ndarray | None
    signals: np.ndarray | None
    truncated: bool


def distinct(values: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """``(strings, index)``: ``values`` as its distinct strings in first-seen order and each
    value's row among them (int32)."""
    strings = list(dict.fromkeys(values))
    rows = dict(zip(strings, range(len(strings))))
    index = np.fromiter(map(rows.__getitem__, values), dtype=np.int32, count=len(values))
    return strings, index


def page_inputs(page: PageStructure, layout: bool = True, repetition: bool = False,
                signals: bool = False, compact: bool = True) -> PageInputs:
    """The model inputs of ``page``; ``layout``, ``repetition``, ``signals``: whether the model
    reads those features (``Featurizer.layout``, ``Featurizer.repetition``, a page-type head's
    ``page_type_signals``). Computes the page's Laplacian positions where it has none yet.
    ``compact=False``: each block as the nodes' own strings, not deduplicated (``index``
    None), for a batch joined in the same process: the encoder deduplicates all pages'
    strings anyway, and the page's distinct lists only pay where they travel."""
    if page.positions is None:
        from scrapy_grownup.graph.laplacian import laplacian_positions

        page.positions = laplacian_positions(page.parent, NUM_EIGENVECTORS)
    if compact:
        strings, index = zip(*(distinct(getattr(page, attr)) for attr in TEXT_ATTRIBUTES))
        index = np.stack(index) if page.num_nodes else np.zeros((3, 0), dtype=np.int32)
    else:
        strings, index = tuple(getattr(page, attr) for attr in TEXT_ATTRIBUTES), None
    return PageInputs(
        num_nodes=page.num_nodes,
        strings=tuple(strings),
        index=index,
        parent=page.parent,
        structure=(page.tag_ids, page.font, page.text_lengths(), page.num_children,
                   page.child_index),
        positions=page.positions,
        layout=page.layout if layout else None,
        repetition=page.repetition if repetition else None,
        signals=page.signals if signals else None,
        truncated=bool(page.truncated))


def batch_inputs(inputs: Sequence[PageInputs], encoder) -> dict[str, np.ndarray]:
    """The model input of several pages (``Featurizer.batch_arrays``' arrays): each text block
    as the distinct strings' vectors (``{block}_table``) and one row per node
    (``{block}_index``); the dense blocks, ``parent`` (batch row of each node's parent), ``ptr``
    (page offsets), ``truncated``, and ``x_signals`` where every page carries its signals.
    The strings of all pages and blocks are encoded in one ``encoder.encode_indexed`` call, in
    the order a call on every node's string would see them first, so the tables are the same
    rows in the same order."""
    if not inputs:
        raise ValueError("no pages to batch")
    sizes = [page.num_nodes for page in inputs]
    offsets = np.zeros(len(inputs) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    strings: list[str] = []
    nodes: list = []  # per block, each node's position in ``strings``
    per_node = all(page.index is None for page in inputs)  # then each block's is a slice
    for b in range(len(TEXT_BLOCKS)):  # all pages' block, then the next
        parts, first = [], len(strings)
        for page in inputs:
            start = len(strings)
            strings.extend(page.strings[b])
            if not per_node:
                parts.append(np.arange(start, len(strings)) if page.index is None
                             else page.index[b].astype(np.int64) + start)
        nodes.append(slice(first, len(strings)) if per_node else np.concatenate(parts))
    table, index = encoder.encode_indexed(strings)
    arrays: dict[str, np.ndarray] = {}
    for name, positions in zip(TEXT_BLOCKS, nodes):
        # the table rows the block uses, ascending, and each node's among them: what
        # ``np.unique(..., return_inverse=True)`` gives, by marking rows rather than sorting
        node_rows = index[positions]
        used = np.zeros(len(table), dtype=bool)
        used[node_rows] = True
        arrays[name + "_table"] = np.take(table, np.flatnonzero(used), axis=0)
        arrays[name + "_index"] = (np.cumsum(used) - 1)[node_rows]
    arrays["parent"] = np.concatenate([
        np.where(page.parent >= 0, page.parent.astype(np.int64) + start, -1)
        for page, start in zip(inputs, offsets[:-1].tolist())])
    arrays["x_struct"] = struct_features(
        *(np.concatenate([page.structure[k] for page in inputs]) for k in range(5)))
    arrays["x_pos"] = np.concatenate([page.positions for page in inputs]).astype(
        np.float32, copy=False)
    if all(page.layout is not None for page in inputs):
        arrays["x_layout"] = np.concatenate([page.layout for page in inputs])
    if all(page.repetition is not None for page in inputs):
        arrays["x_repeat"] = np.concatenate([page.repetition for page in inputs])
    arrays["ptr"] = offsets
    arrays["truncated"] = np.array([page.truncated for page in inputs])
    if all(page.signals is not None for page in inputs):
        arrays["x_signals"] = np.stack([page.signals for page in inputs])
    return arrays


__all__ = ["PageInputs", "batch_inputs", "distinct", "page_inputs"]
