"""Featurized pages in compact form, saved as safetensors: training caches and corpus shards.

A node is ~100 bytes here instead of ~2.6 KB as float vectors: text, class and id are indices
into one table of unique string embeddings (most nodes own no text, class and id strings repeat
across a site), structural features are the small integer arrays they are one-hot expanded
from. ``collate`` rebuilds model-ready batches with numpy gathers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from scrapy_grownup.page.dom import PageStructure, struct_features, tree_edges
from scrapy_grownup.errors import GrownupError
from scrapy_grownup.graph.layout import layout_features
from scrapy_grownup.graph.repetition import repetition_features

if TYPE_CHECKING:  # pragma: no cover
    from torch_geometric.data import Batch

    from scrapy_grownup.encoders.base import TextEncoder

STORE_FORMAT = "grownup-graphs/1"
_NODE_FIELDS = ("parent", "tag_ids", "font", "text_len", "num_children", "child_index",
                "positions", "text_idx", "class_idx", "id_idx", "labels", "layout", "repeat")
# Node fields a store written before them lacks; its batches leave out the block they make.
_OPTIONAL_FIELDS = ("repeat",)
# Bump when a new store holds more than an older one of the same encoder, feature and parse
# versions (cached training stores are rebuilt): 2: the repeated-structure features.
STORE_REVISION = "2"


@dataclass
class GraphStore:
    """Pages ``0..P-1``; node arrays are concatenated and sliced by ``page_ptr``."""

    arrays: dict[str, np.ndarray]
    strings: np.ndarray  # float16 [U, D]; row 0 is the all-zero vector of the empty string
    ids: list[str]
    meta: dict[str, str]

    @property
    def num_pages(self) -> int:
        return len(self.ids)

    @property
    def fields(self) -> tuple[str, ...]:
        """The node fields this store holds (one written before an optional field lacks it)."""
        return tuple(name for name in _NODE_FIELDS
                     if name in self.arrays or name not in _OPTIONAL_FIELDS)

    @property
    def page_ptr(self) -> np.ndarray:
        return self.arrays["page_ptr"]

    def num_nodes(self, i: int) -> int:
        return int(self.page_ptr[i + 1] - self.page_ptr[i])

    @classmethod
    def build(cls, pages: Sequence[PageStructure], encoder: "TextEncoder",
              ids: Sequence[str], labels: Sequence[np.ndarray] | None = None,
              meta: dict[str, str] | None = None) -> "GraphStore":
        """Embed every distinct string of ``pages`` once and pack the pages."""
        table: dict[str, int] = {"": 0}
        parts: dict[str, list[np.ndarray]] = {name: [] for name in _NODE_FIELDS}
        for k, page in enumerate(pages):
            columns = page_columns(page, table, labels[k] if labels is not None else None)
            for name, values in columns.items():
                parts[name].append(values)
        arrays = {name: np.concatenate(chunks) if chunks else np.zeros(0)
                  for name, chunks in parts.items()}
        sizes = [p.num_nodes for p in pages]
        arrays["page_ptr"] = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        unique = list(table)
        strings = np.zeros((len(unique), encoder.dim), dtype=np.float16)
        if len(unique) > 1:
            strings[1:] = encoder.encode(unique[1:]).astype(np.float16)
        info = {"format": STORE_FORMAT, "encoder": encoder.name,
                "encoder_version": encoder.version}
        from scrapy_grownup.graph.featurizer import FEATURE_VERSION

        info["feature_version"] = FEATURE_VERSION
        info.update(meta or {})
        return cls(arrays, strings, list(ids), info)

    @classmethod
    def concat(cls, stores: Sequence["GraphStore"]) -> "GraphStore":
        """One store holding the pages of ``stores`` in order (string tables merged)."""
        if len(stores) == 1:
            return stores[0]
        encoders = {(s.meta.get("encoder"), s.meta.get("encoder_version")) for s in stores}
        if len(encoders) > 1:
            raise GrownupError(f"cannot mix stores of different encoders: {sorted(encoders)}")
        fields = [name for name in _NODE_FIELDS if all(name in s.fields for s in stores)]
        arrays: dict[str, list[np.ndarray]] = {name: [] for name in fields}
        ptr, tables, offset, nodes = [np.zeros(1, dtype=np.int64)], [stores[0].strings[:1]], 0, 0
        for store in stores:
            for name in fields:
                a = store.arrays[name]
                if name in ("text_idx", "class_idx", "id_idx"):
                    a = np.where(a > 0, a + offset, 0).astype(np.int32)
                arrays[name].append(a)
            ptr.append(store.page_ptr[1:] + nodes)
            nodes += int(store.page_ptr[-1])
            tables.append(store.strings[1:])
            offset += len(store.strings) - 1
        merged = {name: np.concatenate(chunks) for name, chunks in arrays.items()}
        merged["page_ptr"] = np.concatenate(ptr)
        meta = dict(stores[0].meta, dataset="+".join(s.meta.get("dataset", "?") for s in stores))
        return cls(merged, np.concatenate(tables), [i for s in stores for i in s.ids], meta)

    # -- persistence --------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write atomically (temporary name, then rename)."""
        from safetensors.numpy import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {name: np.ascontiguousarray(a) for name, a in self.arrays.items()}
        tensors["strings"] = np.ascontiguousarray(self.strings)
        meta = dict(self.meta, ids=json.dumps(self.ids))
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        save_file(tensors, str(tmp), metadata=meta)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "GraphStore":
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="numpy") as handle:
                meta = dict(handle.metadata() or {})
                arrays = {name: handle.get_tensor(name) for name in handle.keys()}
        except Exception as exc:  # safetensors raises several types for corrupt files
            raise GrownupError(f"cannot read graph store {path}: {exc}") from exc
        if meta.get("format") != STORE_FORMAT:
            raise GrownupError(f"{path}: not a {STORE_FORMAT} file (format={meta.get('format')})")
        ids = json.loads(meta.pop("ids", "[]"))
        strings = arrays.pop("strings")
        return cls(arrays, strings, ids, meta)

    # -- batches ------------------------------------------------------------------------------
    def page_arrays(self, i: int) -> dict[str, np.ndarray]:
        lo, hi = self.page_ptr[i], self.page_ptr[i + 1]
        return {name: self.arrays[name][lo:hi] for name in self.fields}

    def collate(self, indices: Sequence[int]) -> "Batch":
        """Model-ready ``Batch`` of the given pages, with ``y`` (-1 = unlabelled)."""
        import torch
        from torch_geometric.data import Batch

        pieces = [self.page_arrays(int(i)) for i in indices]
        cat = {name: np.concatenate([p[name] for p in pieces]) for name in self.fields}
        sizes = np.array([len(p["parent"]) for p in pieces])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        parent = cat["parent"].astype(np.int64)
        parent = np.where(parent >= 0, parent + np.repeat(offsets, sizes), -1)
        edge_index, edge_type = tree_edges(parent)
        strings = self.strings
        tensor = torch.from_numpy
        batch = Batch(
            x_text=tensor(strings[cat["text_idx"]].astype(np.float32)),
            x_class=tensor(strings[cat["class_idx"]].astype(np.float32)),
            x_id=tensor(strings[cat["id_idx"]].astype(np.float32)),
            x_struct=tensor(struct_features(cat["tag_ids"], cat["font"], cat["text_len"],
                                            cat["num_children"], cat["child_index"])),
            x_pos=tensor(cat["positions"].astype(np.float32)),
            x_layout=tensor(cat["layout"].astype(np.float32)),
            edge_index=tensor(edge_index),
            edge_type=tensor(edge_type),
            y=tensor(cat["labels"].astype(np.int64)),
            batch=tensor(np.repeat(np.arange(len(pieces)), sizes)),
            ptr=tensor(np.concatenate([[0], np.cumsum(sizes)])),
        )
        if "repeat" in cat:
            batch.x_repeat = tensor(cat["repeat"].astype(np.float32))
        batch.num_nodes = int(sizes.sum())
        batch._num_graphs = len(pieces)
        return batch


def page_columns(page: PageStructure, table: dict[str, int],
                 labels: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """One page's node arrays as a store keeps them (``_NODE_FIELDS``): its text, class and id
    strings become rows of ``table`` (new strings are appended), labels default to -1. The
    page's Laplacian positions are computed if it has none."""
    if page.positions is None:
        from scrapy_grownup.graph.laplacian import laplacian_positions

        page.positions = laplacian_positions(page.parent)

    def index(strings: list[str]) -> np.ndarray:
        return np.fromiter((table.setdefault(s, len(table)) for s in strings),
                           dtype=np.int32, count=len(strings))

    return {
        "parent": page.parent, "tag_ids": page.tag_ids, "font": page.font,
        "text_len": page.text_lengths(), "num_children": page.num_children,
        "child_index": page.child_index, "positions": page.positions.astype(np.float16),
        "text_idx": index(page.node_text), "class_idx": index(page.class_words),
        "id_idx": index(page.id_words),
        "labels": (np.asarray(labels, dtype=np.int8) if labels is not None
                   else np.full(page.num_nodes, -1, dtype=np.int8)),
        "layout": layout_features(page).astype(np.float16),
        "repeat": repetition_features(page).astype(np.float16),
    }
