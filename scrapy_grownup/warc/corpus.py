"""Reading a finished corpus directory: ``load_corpus(dir)``.

Pages are numbered globally in ``index.json`` order (``first_page`` of each shard); the pairs
refer to those numbers. Shards are safetensors ``GraphStore`` files: loading one never unpickles
anything, and each can be checked against the SHA-256 recorded in the index.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import numpy as np

from scrapy_grownup.errors import GrownupError
from scrapy_grownup.data.store import GraphStore
from scrapy_grownup.warc.manifest import CORPUS_FORMAT, INDEX_FILE, MANIFEST_FILE, read_json
from scrapy_grownup.warc.pairs import read_pairs
from scrapy_grownup.warc.shards import file_sha256


@dataclass(frozen=True)
class CorpusShard:
    path: Path
    pages: int
    nodes: int
    first_page: int
    sha256: str
    source: str


class Corpus:
    """A pre-training corpus written by the WARC spider."""

    def __init__(self, directory: str | os.PathLike, cache_shards: int = 4):
        self.directory = Path(directory)
        index_path = self.directory / INDEX_FILE
        if not index_path.is_file():
            raise GrownupError(f"{self.directory}: no {INDEX_FILE}; run the WARC spider (or "
                               f"`grownup warc --finalize-only --output DIR`) first")
        self.index = read_json(index_path)
        if self.index.get("format") != CORPUS_FORMAT:
            raise GrownupError(f"{index_path}: not a {CORPUS_FORMAT} index")
        manifest = self.directory / MANIFEST_FILE
        self.manifest = read_json(manifest) if manifest.is_file() else {}
        self.shards = [CorpusShard(self.directory / s["file"], s["pages"], s["nodes"],
                                   s["first_page"], s["sha256"], s["source"])
                       for s in self.index["shards"]]
        self._firsts = [s.first_page for s in self.shards]
        self.load_shard = lru_cache(maxsize=cache_shards)(self._load_shard)

    @property
    def num_pages(self) -> int:
        return int(self.index["pages"])

    @property
    def encoder(self) -> str | None:
        return self.index.get("encoder")

    def _load_shard(self, i: int, verify: bool = False) -> GraphStore:
        shard = self.shards[i]
        if verify and file_sha256(shard.path) != shard.sha256:
            raise GrownupError(f"{shard.path}: checksum mismatch (damaged or replaced shard)")
        return GraphStore.load(shard.path)

    def iter_shards(self, verify: bool = False) -> Iterator[tuple[CorpusShard, GraphStore]]:
        """Each shard and its ``GraphStore``, in index order, one in memory at a time."""
        for i, shard in enumerate(self.shards):
            yield shard, self._load_shard(i, verify)

    def locate(self, page: int) -> tuple[int, int]:
        """``(shard index, row in that shard)`` of a global page number."""
        if not 0 <= page < self.num_pages:
            raise IndexError(f"page {page} out of range 0..{self.num_pages - 1}")
        i = bisect.bisect_right(self._firsts, page) - 1
        return i, page - self.shards[i].first_page

    def pairs(self) -> dict[str, np.ndarray]:
        """``pairs`` int64 [P, 2] (global page numbers), ``site`` int64 [P], ``depth`` int32."""
        return read_pairs(self.directory / self.index["pairs"]["file"])

    def iter_pair_batches(self, batch_size: int, seed: int | None = 0
                          ) -> Iterator[dict[str, np.ndarray]]:
        """Shuffled batches of pairs (``seed=None`` keeps file order); use ``batch_negatives``
        on ``site`` of each batch to make its negatives."""
        data = self.pairs()
        order = np.arange(len(data["pairs"]))
        if seed is not None:
            np.random.default_rng(seed).shuffle(order)
        for start in range(0, len(order), batch_size):
            take = order[start:start + batch_size]
            yield {name: array[take] for name, array in data.items()}

    def verify(self) -> list[str]:
        """Files whose checksum differs from the index (empty when all are intact)."""
        bad = [str(s.path) for s in self.shards
               if not s.path.is_file() or file_sha256(s.path) != s.sha256]
        pairs = self.directory / self.index["pairs"]["file"]
        if not pairs.is_file() or file_sha256(pairs) != self.index["pairs"]["sha256"]:
            bad.append(str(pairs))
        return bad


def load_corpus(directory: str | os.PathLike, cache_shards: int = 4) -> Corpus:
    """Open a pre-training corpus written by ``grownup warc`` or the WARC spider.

    Only the index is read now; shards are loaded when asked for, so a corpus larger than
    memory can be walked one shard at a time.

    Args:
        directory: the corpus directory (``index.json``, ``shards/``, ``pairs.safetensors``).
        cache_shards: how many loaded shards ``Corpus.load_shard`` keeps in memory.

    Returns:
        The corpus: ``shards``, ``iter_shards()``, ``load_shard(i)``, ``locate(page)``,
        ``pairs()``, ``iter_pair_batches()`` and ``verify()``.

    Raises:
        GrownupError: the directory has no ``index.json`` (the corpus was not finalized) or
            holds another format.
    """
    return Corpus(directory, cache_shards)
