"""Base class of the sentence encoders: deduplication, an LRU cache, empty strings, length caps.

Every DOM node gets three sentence embeddings (its own text, its class words, its id words), and
on a typical page most of those strings repeat (empty ids, the same class on every list item,
boilerplate that recurs page after page on one site). :class:`TextEncoder` handles all of that
once, so a concrete encoder only implements :meth:`TextEncoder._encode_uncached` on a list of
distinct, non-empty, length-capped strings.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np

DEFAULT_CACHE_SIZE = 50_000
DEFAULT_MAX_CHARS = 2_000


@dataclass(frozen=True)
class CacheInfo:
    """Counters of an encoder's cache since it was created (or since :meth:`clear_cache`).

    ``hits`` counts non-empty input strings that did not need the model (found in the cache, or
    a repeat of a string earlier in the same call); ``misses`` counts the strings that were sent
    to the model; ``empty`` counts inputs that were blank and mapped to the zero vector without
    any lookup.
    """

    hits: int
    misses: int
    empty: int
    size: int
    maxsize: int

    @property
    def hit_rate(self) -> float:
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


def file_digest(path: str | Path, length: int = 12) -> str:
    """A short hex sha256 of a file, used as an encoder ``version``."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:length]


class TextEncoder:
    """Maps strings to float32 sentence embeddings of a fixed width.

    Subclasses set ``name``, ``dim`` and ``version`` and implement :meth:`_encode_uncached`.
    :meth:`encode` is safe to call from several threads: the cache is guarded by a lock and the
    model itself is only ever called by one thread at a time.

    :param cache_size: how many distinct strings the LRU cache keeps (0 disables it). Memory is
        about ``cache_size * dim * 4`` bytes (77 MB for 50,000 MiniLM vectors).
    :param max_chars: strings are stripped and cut to this many characters before encoding and
        before the cache lookup, so one huge text node cannot blow up encoding time.
    """

    name: ClassVar[str] = "abstract"
    dim: int
    version: str

    def __init__(self, cache_size: int = DEFAULT_CACHE_SIZE, max_chars: int = DEFAULT_MAX_CHARS):
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        if max_chars < 1:
            raise ValueError(f"max_chars must be >= 1, got {max_chars}")
        self.cache_size = int(cache_size)
        self.max_chars = int(max_chars)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._empty = 0

    # -- to implement -------------------------------------------------------------------------

    def _encode_uncached(self, texts: list[str]) -> np.ndarray:
        """Encode distinct, non-empty, stripped, capped strings: float32 ``[len(texts), dim]``."""
        raise NotImplementedError

    # -- public API ---------------------------------------------------------------------------

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: float32 ``[len(texts), dim]``; blank strings give all-zero rows."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        n = len(texts)
        # Row 0 of `table` is the zero vector; index[i] points at the row of texts[i].
        index = np.zeros(n, dtype=np.int64)
        keys: dict[str, int] = {}
        empty = 0
        for i, text in enumerate(texts):
            key = text.strip()
            if not key:
                empty += 1
                continue
            if len(key) > self.max_chars:
                key = key[: self.max_chars].rstrip()
            row = keys.get(key)
            if row is None:
                row = keys[key] = len(keys) + 1
            index[i] = row

        unique = list(keys)
        table = np.zeros((len(unique) + 1, self.dim), dtype=np.float32)
        missing: list[int] = []
        with self._cache_lock:
            self._empty += empty
            for row, key in enumerate(unique, start=1):
                vec = self._cache.get(key)
                if vec is None:
                    missing.append(row)
                else:
                    self._cache.move_to_end(key)
                    table[row] = vec
            self._misses += len(missing)
            self._hits += (n - empty) - len(missing)

        if missing:
            todo = [unique[row - 1] for row in missing]
            with self._model_lock:
                vectors = self._encode_uncached(todo)
            vectors = np.asarray(vectors, dtype=np.float32)
            if vectors.shape != (len(todo), self.dim):
                raise RuntimeError(
                    f"{type(self).__name__}._encode_uncached returned shape {vectors.shape}, "
                    f"expected {(len(todo), self.dim)}"
                )
            table[missing] = vectors
            if self.cache_size:
                with self._cache_lock:
                    for row, key in zip(missing, todo):
                        vec = table[row].copy()
                        vec.setflags(write=False)
                        self._cache[key] = vec
                        self._cache.move_to_end(key)
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
        return table[index]

    def cache_info(self) -> CacheInfo:
        with self._cache_lock:
            return CacheInfo(
                self._hits, self._misses, self._empty, len(self._cache), self.cache_size
            )

    def clear_cache(self) -> None:
        """Drop every cached vector and reset the counters."""
        with self._cache_lock:
            self._cache.clear()
            self._hits = self._misses = self._empty = 0

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, dim={getattr(self, 'dim', '?')}, "
            f"version={getattr(self, 'version', '?')!r})"
        )
