"""``PageStructure`` + text encoder -> ``torch_geometric.data.Data``: the model's input graph.

Two stages so that a crawler can run them in different places: ``structure()`` is CPU-bound
parsing (worker processes), ``graphs()`` embeds the strings of many pages in one encoder call
(the model's process, GPU when there is one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from .dom import NUM_EIGENVECTORS, STRUCT_BLOCKS, STRUCT_DIM, PageStructure, parse_page
from .limits import PageLimits

if TYPE_CHECKING:  # pragma: no cover
    from torch_geometric.data import Data

    from .encoders.base import TextEncoder

# Bump when anything changes what a node's feature vector means (tag list, buckets, scaling).
FEATURE_VERSION = "1"
TEXT_BLOCKS = ("x_text", "x_class", "x_id")


def feature_blocks(text_dim: int) -> list[tuple[str, int]]:
    """Names and widths of the input blocks, in the order the model concatenates them."""
    return [(name, text_dim) for name in TEXT_BLOCKS] + [
        ("x_struct", STRUCT_DIM), ("x_pos", NUM_EIGENVECTORS)
    ]


class Featurizer:
    """Turns HTML into GROWN+UP graphs with a named text encoder (``static`` or ``minilm``)."""

    def __init__(self, encoder: "str | TextEncoder" = "static", limits: PageLimits | None = None,
                 **encoder_kwargs):
        if isinstance(encoder, str):
            from .encoders import get_encoder

            encoder = get_encoder(encoder, **encoder_kwargs)
        self.encoder = encoder
        self.limits = limits or PageLimits()

    @property
    def blocks(self) -> list[tuple[str, int]]:
        return feature_blocks(self.encoder.dim)

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
            out.append(build_graph(page, text, klass, ident))
        return out


def build_graph(page: PageStructure, text: np.ndarray, klass: np.ndarray,
                ident: np.ndarray) -> "Data":
    import torch
    from torch_geometric.data import Data

    if page.positions is None:
        from .laplacian import laplacian_positions

        page.positions = laplacian_positions(page.parent, NUM_EIGENVECTORS)
    edge_index, edge_type = page.edges()
    return Data(
        x_text=torch.from_numpy(np.ascontiguousarray(text, dtype=np.float32)),
        x_class=torch.from_numpy(np.ascontiguousarray(klass, dtype=np.float32)),
        x_id=torch.from_numpy(np.ascontiguousarray(ident, dtype=np.float32)),
        x_struct=torch.from_numpy(page.struct_features()),
        x_pos=torch.from_numpy(np.ascontiguousarray(page.positions, dtype=np.float32)),
        edge_index=torch.from_numpy(edge_index),
        edge_type=torch.from_numpy(edge_type),
        num_nodes=page.num_nodes,
        truncated=torch.tensor([bool(page.truncated)]),
        page=page,
    )


__all__ = ["Featurizer", "FEATURE_VERSION", "STRUCT_BLOCKS", "build_graph", "feature_blocks"]
