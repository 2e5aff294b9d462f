"""Corpus shards: ``GraphStore`` files built incrementally, one per (archive, part).

A shard holds the featurized pages of ``shard_pages`` consecutive HTML records of one archive
(part ``k`` = records ``k*shard_pages ..``). It is a ``GraphStore`` safetensors file
(``grownup-graphs/1``), so the training code reads it with ``GraphStore.load`` and batches it with
``GraphStore.collate``. Pages are packed as they arrive and their ``PageStructure`` dropped;
distinct strings are embedded once per shard, when the shard is closed.

Besides the ``GraphStore`` arrays, a shard carries ``page_site`` (int64 [pages], the site hash
of each page, see ``pairs.site_hash``) and, in its safetensors metadata: ``source`` (the
archive), ``source_key``, ``part``, ``urls`` and ``record_offsets`` (JSON lists, one per page),
``failures`` (JSON: HTML records of this part that could not be parsed, by reason) and
``candidates`` (HTML records in the part). The page ids (``GraphStore.ids``) are the WARC record
ids, or ``<source key>@<offset>`` for ARC records that have none.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scrapy_grownup.page.dom import NUM_EIGENVECTORS, PageStructure
from scrapy_grownup.graph.layout import LAYOUT_DIM
from scrapy_grownup.graph.repetition import REPETITION_DIM
from scrapy_grownup.data.store import _NODE_FIELDS, GraphStore, page_columns
from scrapy_grownup.warc.pairs import site_hash, site_key

if TYPE_CHECKING:  # pragma: no cover
    from scrapy_grownup.encoders.base import TextEncoder

SHARD_DIR = "shards"
ENCODE_BLOCK = 8192  # strings per encoder call when a shard is closed
SHARD_SUFFIX = ".safetensors"
_EMPTY = {
    "parent": np.zeros(0, np.int32), "tag_ids": np.zeros(0, np.int16),
    "font": np.zeros((0, 3), np.int8), "text_len": np.zeros(0, np.int32),
    "num_children": np.zeros(0, np.int32), "child_index": np.zeros(0, np.int32),
    "positions": np.zeros((0, NUM_EIGENVECTORS), np.float16),
    "text_idx": np.zeros(0, np.int32), "class_idx": np.zeros(0, np.int32),
    "id_idx": np.zeros(0, np.int32), "labels": np.zeros(0, np.int8),
    "layout": np.zeros((0, LAYOUT_DIM), np.float16),
    "repeat": np.zeros((0, REPETITION_DIM), np.float16),
}


def shard_name(key: str, part: int) -> str:
    return f"{key}-{part:05d}{SHARD_SUFFIX}"


@dataclass
class ShardInfo:
    """What the index and the per-archive marker record about a written shard."""

    name: str  # file name inside shards/
    part: int
    pages: int
    nodes: int
    candidates: int
    failures: dict[str, int]
    sha256: str
    bytes: int

    def to_dict(self) -> dict:
        return asdict(self)


class ShardBuilder:
    """Packs pages into ``GraphStore`` arrays as they come; ``build`` embeds the strings."""

    def __init__(self, source: str, key: str, part: int):
        self.source, self.key, self.part = source, key, part
        self.table: dict[str, int] = {"": 0}
        self.columns: dict[str, list[np.ndarray]] = {name: [] for name in _NODE_FIELDS}
        self.sizes: list[int] = []
        self.ids: list[str] = []
        self.urls: list[str] = []
        self.offsets: list[int | None] = []
        self.sites: list[int] = []
        self.failures: Counter[str] = Counter()
        self.candidates = 0

    @property
    def pages(self) -> int:
        return len(self.ids)

    @property
    def nodes(self) -> int:
        return int(sum(self.sizes))

    def add(self, page: PageStructure, page_id: str, url: str, offset: int | None) -> None:
        """Pack one page exactly as ``GraphStore.build`` does (unlabelled: labels -1)."""
        for name, values in page_columns(page, self.table).items():
            self.columns[name].append(values)
        self.sizes.append(page.num_nodes)
        self.ids.append(page_id)
        self.urls.append(url)
        self.offsets.append(offset)
        self.sites.append(site_hash(site_key(url)))
        self.candidates += 1

    def fail(self, reason: str) -> None:
        """An HTML record of this part that gave no page."""
        self.failures[reason] += 1
        self.candidates += 1

    def build(self, encoder: "TextEncoder") -> GraphStore:
        arrays = {name: np.concatenate(chunks) if chunks else _EMPTY[name]
                  for name, chunks in self.columns.items()}
        arrays["page_ptr"] = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        arrays["page_site"] = np.asarray(self.sites, dtype=np.int64)
        unique = list(self.table)
        strings = np.zeros((len(unique), encoder.dim), dtype=np.float16)
        # In blocks, so the float32 encoder output never holds the whole table at once.
        for start in range(1, len(unique), ENCODE_BLOCK):
            block = unique[start:start + ENCODE_BLOCK]
            strings[start:start + len(block)] = encoder.encode(block).astype(np.float16)
        from scrapy_grownup.graph.featurizer import FEATURE_VERSION
        from scrapy_grownup.data.store import STORE_FORMAT

        meta = {
            "format": STORE_FORMAT, "encoder": encoder.name, "encoder_version": encoder.version,
            "feature_version": FEATURE_VERSION, "dataset": "warc", "source": self.source,
            "source_key": self.key, "part": str(self.part), "candidates": str(self.candidates),
            "urls": json.dumps(self.urls), "record_offsets": json.dumps(self.offsets),
            "failures": json.dumps(dict(sorted(self.failures.items()))),
        }
        return GraphStore(arrays, strings, list(self.ids), meta)

    def save(self, store: GraphStore, directory: str | os.PathLike) -> ShardInfo:
        """Write the shard atomically (``GraphStore.save``) and checksum it."""
        path = Path(directory) / shard_name(self.key, self.part)
        store.save(path)
        return ShardInfo(path.name, self.part, self.pages, self.nodes, self.candidates,
                         dict(sorted(self.failures.items())), file_sha256(path),
                         path.stat().st_size)


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_header(path: str | os.PathLike) -> dict:
    """A shard's metadata without loading its arrays; JSON fields decoded, ``pages`` and
    ``nodes`` added."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        meta = dict(handle.metadata() or {})
        ptr = handle.get_slice("page_ptr")
        pages = ptr.get_shape()[0] - 1
        nodes = int(ptr[pages:pages + 1][0]) if pages > 0 else 0
    for name in ("urls", "record_offsets", "failures", "ids"):
        if name in meta:
            meta[name] = json.loads(meta[name])
    meta["pages"], meta["nodes"] = pages, nodes
    return meta


def shard_info(path: str | os.PathLike) -> ShardInfo:
    """``ShardInfo`` of an existing shard (a finished part found again on a rerun)."""
    path = Path(path)
    header = read_header(path)
    return ShardInfo(path.name, int(header.get("part", 0)), header["pages"], header["nodes"],
                     int(header.get("candidates", header["pages"])),
                     dict(header.get("failures") or {}), file_sha256(path), path.stat().st_size)
