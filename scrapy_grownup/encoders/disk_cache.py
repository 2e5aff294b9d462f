"""Sentence embeddings kept on disk between runs, so a slow encoder embeds each string once.

Building MiniLM training corpora on a CPU embeds hundreds of thousands of strings (hours on two
cores); the corpora of one dataset's splits, the page-type and role corpora and the evaluation pages
share most of them (a site's boilerplate, class names). :class:`DiskEmbeddingCache` is a folder of
chunks, each a JSON list of strings plus a float32 ``.npy`` of their vectors, written one after
the other while an encoder works: an interrupted build loses at most one chunk, and the next run
picks up where it stopped. The folder is named after the encoder and its weights' version, so a
changed model never reuses stale vectors. Never pickle: ``np.load(..., allow_pickle=False)``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

logger = logging.getLogger(__name__)
DEFAULT_CHUNK_SIZE = 4096


def cache_home() -> Path:
    """The project's cache folder: ``$GROWNUP_CACHE_DIR``, else ``~/.cache/scrapy_grownup``."""
    return Path(os.environ.get("GROWNUP_CACHE_DIR", Path.home() / ".cache" / "scrapy_grownup"))


def default_cache_dir(name: str, version: str) -> Path:
    """``<cache_home>/embeddings/<encoder>-<version>``."""
    return cache_home() / "embeddings" / f"{name}-{version}"


class DiskEmbeddingCache:
    """Vectors of strings, in append-only chunk files under ``directory``.

    :param dim: the vectors' width; a chunk of another width is an error, not a silent mix.
    :param chunk_size: how many new strings are embedded and written at a time.
    """

    def __init__(self, directory: str | os.PathLike, dim: int,
                 chunk_size: int = DEFAULT_CHUNK_SIZE):
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.directory = Path(directory)
        self.dim = int(dim)
        self.chunk_size = int(chunk_size)
        self._chunks: list[np.ndarray] = []
        self._index: dict[str, tuple[int, int]] = {}
        self._lock = threading.RLock()
        self._loaded = False  # read on first use: a run whose corpora are cached never needs it

    def __len__(self) -> int:
        self._load()
        return len(self._index)

    def __contains__(self, text: str) -> bool:
        self._load()
        return text in self._index

    def _chunk_paths(self) -> list[tuple[Path, Path]]:
        if not self.directory.is_dir():
            return []
        pairs = []
        for vectors in sorted(self.directory.glob("chunk-*.npy")):
            strings = vectors.with_suffix(".json")
            if strings.is_file():  # the .npy is renamed into place last: both or neither
                pairs.append((strings, vectors))
        return pairs

    def _load(self) -> None:
        with self._lock:
            if not self._loaded:
                self._read_chunks()
                self._loaded = True

    def _read_chunks(self) -> None:
        for strings_path, vectors_path in self._chunk_paths():
            strings = json.loads(strings_path.read_text(encoding="utf-8"))
            vectors = np.load(vectors_path, allow_pickle=False)
            if vectors.shape != (len(strings), self.dim):
                raise ValueError(f"{vectors_path}: shape {vectors.shape} does not match its "
                                 f"{len(strings)} strings of {self.dim}-d vectors")
            self._add(strings, vectors)
        if self._index:
            logger.info("embedding cache %s: %d strings", self.directory, len(self._index))

    def _add(self, strings: Sequence[str], vectors: np.ndarray) -> None:
        chunk = len(self._chunks)
        self._chunks.append(vectors)
        for row, text in enumerate(strings):
            self._index.setdefault(text, (chunk, row))

    def lookup(self, texts: Sequence[str]) -> tuple[np.ndarray, list[int]]:
        """``(vectors, missing)``: float32 ``[len(texts), dim]`` with the cached rows filled,
        and the positions of ``texts`` not in the cache (their rows are zero)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        missing = []
        self._load()
        with self._lock:
            for i, text in enumerate(texts):
                hit = self._index.get(text)
                if hit is None:
                    missing.append(i)
                else:
                    out[i] = self._chunks[hit[0]][hit[1]]
        return out, missing

    def append(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Write one chunk (strings first, then the vectors renamed into place)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape != (len(texts), self.dim):
            raise ValueError(f"expected {(len(texts), self.dim)} vectors, got {vectors.shape}")
        self._load()
        with self._lock:
            self.directory.mkdir(parents=True, exist_ok=True)
            number = len(self._chunks)  # the chunks read or written so far; no glob per chunk
            stem = self.directory / f"chunk-{number:06d}"
            while stem.with_suffix(".npy").exists() or stem.with_suffix(".json").exists():
                number += 1  # another process wrote this number meanwhile
                stem = self.directory / f"chunk-{number:06d}"
            stem.with_suffix(".json").write_text(json.dumps(list(texts), ensure_ascii=False),
                                                 encoding="utf-8")
            partial = stem.with_name(stem.name + ".npy.part")
            with open(partial, "wb") as f:
                np.save(f, vectors, allow_pickle=False)
            partial.replace(stem.with_suffix(".npy"))
            self._add(list(texts), vectors)

    def embed(self, texts: Sequence[str], encode: Callable[[list[str]], np.ndarray]
              ) -> np.ndarray:
        """Vectors of ``texts``: cached ones read, the others from ``encode`` a chunk at a time,
        each chunk written before the next starts."""
        out, missing = self.lookup(texts)
        if not missing:
            return out
        todo = list(dict.fromkeys(texts[i] for i in missing))
        done: dict[str, np.ndarray] = {}
        for start in range(0, len(todo), self.chunk_size):
            chunk = todo[start:start + self.chunk_size]
            vectors = np.asarray(encode(chunk), dtype=np.float32)
            self.append(chunk, vectors)
            done.update(zip(chunk, vectors))
            if len(todo) > self.chunk_size:
                logger.info("embedding cache %s: %d of %d new strings embedded",
                            self.directory.name, min(start + self.chunk_size, len(todo)),
                            len(todo))
        for i in missing:
            out[i] = done[texts[i]]
        return out
