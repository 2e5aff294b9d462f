"""``PageStructure`` + text encoder -> ``torch_geometric.data.Data``: the model's input graph.

Two stages so that a crawler can run them in different places: ``structure()`` is CPU-bound
parsing (worker processes), ``graphs()`` embeds the strings of many pages in one encoder call
(the model's process, GPU when there is one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from scrapy_grownup.page.dom import (NUM_EIGENVECTORS, STRUCT_BLOCKS, STRUCT_DIM, PageStructure, parse_page,
                  tree_edges)
from scrapy_grownup.graph.layout import LAYOUT_DIM
from scrapy_grownup.page.limits import PageLimits
from scrapy_grownup.graph.repetition import REPETITION_DIM

if TYPE_CHECKING:  # pragma: no cover
    from torch_geometric.data import Data

    from scrapy_grownup.encoders.base import TextEncoder

# Bump when anything changes what a node's feature vector means (tag list, buckets, scaling).
FEATURE_VERSION = "1"
TEXT_BLOCKS = ("x_text", "x_class", "x_id")


def feature_blocks(text_dim: int, layout: bool = True,
                   repetition: bool = False) -> list[tuple[str, int]]:
    """Names and widths of the input blocks, in the order the model concatenates them.

    ``layout=False`` is the block list of models trained before the layout features
    (``layout.py``), ``repetition=True`` adds the repeated-structure features
    (``repetition.py``); a model reads the blocks it lists and a batch carries those its
    featurizer computes."""
    blocks = [(name, text_dim) for name in TEXT_BLOCKS] + [
        ("x_struct", STRUCT_DIM), ("x_pos", NUM_EIGENVECTORS)
    ]
    if layout:
        blocks.append(("x_layout", LAYOUT_DIM))
    if repetition:
        blocks.append(("x_repeat", REPETITION_DIM))
    return blocks


def uses_layout(input_blocks) -> bool:
    """Whether a model with these input blocks reads the layout features."""
    return any(name == "x_layout" for name, _ in input_blocks)


def uses_repetition(input_blocks) -> bool:
    """Whether a model with these input blocks reads the repeated-structure features."""
    return any(name == "x_repeat" for name, _ in input_blocks)


class Featurizer:
    """Turns HTML into GROWN+UP graphs with a named text encoder (``static`` or ``minilm``)."""

    def __init__(self, encoder: "str | TextEncoder" = "static", limits: PageLimits | None = None,
                 layout: bool = True, repetition: bool = False, **encoder_kwargs):
        if isinstance(encoder, str):
            from scrapy_grownup.encoders import get_encoder

            encoder = get_encoder(encoder, **encoder_kwargs)
        self.encoder = encoder
        self.limits = limits or PageLimits()
        self.layout = layout  # compute the layout block (False for models that do not read it)
        self.repetition = repetition  # compute the repeated-structure block

    @classmethod
    def for_blocks(cls, encoder: "str | TextEncoder", input_blocks,
                   limits: PageLimits | None = None) -> "Featurizer":
        """The featurizer that computes what a model with these input blocks reads."""
        return cls(encoder, limits=limits, layout=uses_layout(input_blocks),
                   repetition=uses_repetition(input_blocks))

    @property
    def blocks(self) -> list[tuple[str, int]]:
        return feature_blocks(self.encoder.dim, self.layout, self.repetition)

    def structure(self, body: bytes | str, url: str | None = None,
                  content_type: str | bytes | None = None) -> PageStructure:
        return parse_page(body, url=url, content_type=content_type, limits=self.limits)

    def featurize(self, body: bytes | str, url: str | None = None,
                  content_type: str | bytes | None = None) -> "Data":
        return self.graphs([self.structure(body, url, content_type)])[0]

    def graphs(self, pages: Sequence[PageStructure]) -> list["Data"]:
        """Embed all strings of ``pages`` in one encoder call and build one graph per page."""
        strings: list[str] = []
        for page in pages:
            strings.extend(page.node_text)
            strings.extend(page.class_words)
            strings.extend(page.id_words)
        vectors = self.encoder.encode(strings) if strings else np.zeros((0, self.encoder.dim))
        out, offset = [], 0
        for page in pages:
            n = page.num_nodes
            text, klass, ident = (vectors[offset + i * n: offset + (i + 1) * n] for i in range(3))
            offset += 3 * n
            out.append(build_graph(page, text, klass, ident, repetition=self.repetition))
        return out

    def batch_arrays(self, pages: Sequence[PageStructure]) -> dict[str, np.ndarray]:
        """The model input of ``pages`` as numpy arrays, for inference: each text block as the
        distinct strings' vectors (``{block}_table``) and one row index per node
        (``{block}_index``), which the model projects once per distinct string; the other
        blocks dense; ``parent`` (batch row of each node's parent, -1 at a root), ``ptr``
        (page offsets) and ``truncated``. ``batch`` wraps these as torch tensors."""
        from scrapy_grownup.graph.page_inputs import batch_inputs, page_inputs

        return batch_inputs([page_inputs(page, self.layout, self.repetition, compact=False)
                             for page in pages], self.encoder)

    def batch(self, pages: Sequence[PageStructure]) -> "GraphBatch":
        """The model input of ``pages`` as one torch batch, for inference: the same graphs as
        ``Batch.from_data_list(self.graphs(pages))``, with the text blocks in index form
        (``batch_arrays``)."""
        return graph_batch(self.batch_arrays(pages), pages=list(pages))


def graph_batch(arrays: dict[str, np.ndarray], pages=None) -> "GraphBatch":
    """``batch_arrays``' arrays (or ``page_inputs.batch_inputs``') as one torch batch."""
    import torch

    arrays = dict(arrays)
    edge_index, edge_type = tree_edges(arrays.pop("parent"))
    tensors = {name: torch.from_numpy(value) for name, value in arrays.items()}
    tensors["edge_index"] = torch.from_numpy(edge_index)
    tensors["edge_type"] = torch.from_numpy(edge_type)
    sizes = np.diff(arrays["ptr"])
    tensors["batch"] = torch.from_numpy(np.repeat(np.arange(len(sizes)), sizes))
    # the same key order as before: the tensors first, then the graph's bookkeeping
    order = [k for k in tensors if k not in ("ptr", "truncated")] + ["ptr", "truncated"]
    return GraphBatch(int(arrays["ptr"][-1]), len(sizes), {k: tensors[k] for k in order},
                      pages=pages)


class GraphBatch:
    """Tensors of a batch of page graphs (``Featurizer.batch``), with the attributes the model
    reads from a ``torch_geometric`` ``Batch``: ``batch``, ``ptr``, ``num_nodes``,
    ``num_graphs``, ``edge_index``, ``edge_type`` and the input blocks. ``pages``: the parsed
    pages (a page-type head that reads page signals computes them from these, only then)."""

    def __init__(self, num_nodes: int, num_graphs: int, tensors: dict, pages=None):
        self.num_nodes, self.num_graphs = num_nodes, num_graphs
        self.keys = list(tensors)
        self.__dict__.update(tensors)
        self.pages = pages

    def to(self, device) -> "GraphBatch":
        return GraphBatch(self.num_nodes, self.num_graphs,
                          {key: getattr(self, key).to(device) for key in self.keys},
                          pages=self.pages)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{key}={list(getattr(self, key).shape)}" for key in self.keys)
        return f"GraphBatch(num_nodes={self.num_nodes}, num_graphs={self.num_graphs}, {shapes})"


def build_graph(page: PageStructure, text: np.ndarray, klass: np.ndarray,
                ident: np.ndarray, repetition: bool = False) -> "Data":
    import torch
    from torch_geometric.data import Data

    if page.positions is None:
        from scrapy_grownup.graph.laplacian import laplacian_positions

        page.positions = laplacian_positions(page.parent, NUM_EIGENVECTORS)
    edge_index, edge_type = page.edges()
    extra = {"x_repeat": torch.from_numpy(page.repetition.copy())} if repetition else {}
    return Data(
        x_text=torch.from_numpy(np.ascontiguousarray(text, dtype=np.float32)),
        x_class=torch.from_numpy(np.ascontiguousarray(klass, dtype=np.float32)),
        x_id=torch.from_numpy(np.ascontiguousarray(ident, dtype=np.float32)),
        x_struct=torch.from_numpy(page.struct_features()),
        x_pos=torch.from_numpy(np.ascontiguousarray(page.positions, dtype=np.float32)),
        x_layout=torch.from_numpy(page.layout.copy()),
        edge_index=torch.from_numpy(edge_index),
        edge_type=torch.from_numpy(edge_type),
        num_nodes=page.num_nodes,
        truncated=torch.tensor([bool(page.truncated)]),
        page=page,
        **extra,
    )


__all__ = ["Featurizer", "FEATURE_VERSION", "GraphBatch", "STRUCT_BLOCKS", "build_graph",
           "feature_blocks", "graph_batch", "uses_layout", "uses_repetition"]
