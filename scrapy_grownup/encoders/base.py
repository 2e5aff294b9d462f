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
from collections import OrderedDict, deque
from dataclasses import dataclass
from itertools import islice, repeat
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np

from scrapy_grownup.encoders.disk_cache import DEFAULT_CHUNK_SIZE, DiskEmbeddingCache, default_cache_dir

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
        # LRU order of the cached strings, each with its row in ``_store`` (vectors live in one
        # array, so a call copies its hits and stores its misses with one numpy operation).
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._store: np.ndarray | None = None
        self._cache_lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._empty = 0
        self.disk_cache: DiskEmbeddingCache | None = None

    # -- to implement -------------------------------------------------------------------------

    def _encode_uncached(self, texts: list[str]) -> np.ndarray:
        """Encode distinct, non-empty, stripped, capped strings: float32 ``[len(texts), dim]``."""
        raise NotImplementedError

    # -- public API ---------------------------------------------------------------------------

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: float32 ``[len(texts), dim]``; blank strings give all-zero rows."""
        table, index = self.encode_indexed(texts)
        return table[index]

    def encode_indexed(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(table, index)``: ``encode(texts)`` is ``table[index]``. ``table`` float32
        ``[distinct + 1, dim]`` holds each distinct (stripped, capped) string once after an
        all-zero row 0 for blank strings; ``index`` int64 ``[len(texts)]``. Lets a caller work
        on the distinct strings only (the model projects each once)."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        n = len(texts)
        # Row 0 of `table` is the zero vector; rows[s] is the row of the raw string s. Raw
        # strings are deduplicated first (most are blank or repeat), in first-seen order, and
        # each string step runs in C (map, dict): a call sees thousands of strings.
        raws = list(dict.fromkeys(texts))
        keys = list(map(str.strip, raws))
        max_chars = self.max_chars
        if keys and max(map(len, keys)) > max_chars:
            keys = [key if len(key) <= max_chars else key[:max_chars].rstrip() for key in keys]
        first = dict.fromkeys(keys)  # the distinct non-blank keys, first seen first: rows 1, 2..
        first.pop("", None)
        unique = list(first)
        rows = dict(zip(unique, range(1, len(unique) + 1)))
        rows[""] = 0
        if keys != raws:  # str.strip returns a stripped string itself: mostly the same list
            rows = dict(zip(raws, map(rows.__getitem__, keys)))
        index = np.fromiter(map(rows.__getitem__, texts), dtype=np.int64, count=n)
        empty = n - int(np.count_nonzero(index))

        table = np.zeros((len(unique) + 1, self.dim), dtype=np.float32)
        missing: list[int] | np.ndarray = []
        with self._cache_lock:
            self._empty += empty
            cache = self._cache
            slots = np.fromiter(map(cache.get, unique, repeat(-1)), dtype=np.int64,
                                count=len(unique))
            if len(slots) and slots.min() < 0:  # (a string not cached: slot -1)
                found = slots >= 0
                missing = np.flatnonzero(~found) + 1
                hit_rows = np.flatnonzero(found)
                hits = list(map(unique.__getitem__, hit_rows.tolist()))
                hit_slots = slots[hit_rows]
                hit_rows += 1
            else:
                hit_rows, hit_slots, hits = slice(1, None), slots, unique
            deque(map(cache.move_to_end, hits), maxlen=0)  # most recently used, in order
            if len(hit_slots):
                table[hit_rows] = self._store[hit_slots]
            self._misses += len(missing)
            self._hits += (n - empty) - len(missing)

        if len(missing):
            todo = list(map(unique.__getitem__, (missing - 1).tolist()))
            with self._model_lock:
                vectors = (self._encode_uncached(todo) if self.disk_cache is None
                           else self.disk_cache.embed(todo, self._encode_uncached))
            vectors = np.asarray(vectors, dtype=np.float32)
            if vectors.shape != (len(todo), self.dim):
                raise RuntimeError(
                    f"{type(self).__name__}._encode_uncached returned shape {vectors.shape}, "
                    f"expected {(len(todo), self.dim)}"
                )
            table[missing] = vectors
            if self.cache_size:
                with self._cache_lock:
                    self._remember(todo, missing, table)
        return table, index

    def _remember(self, keys: list[str], rows: list[int] | np.ndarray,
                  table: np.ndarray) -> None:
        """Cache ``table[rows]`` under the distinct ``keys`` (caller holds the cache lock),
        evicting the least recently used strings beyond ``cache_size``."""
        cache, size = self._cache, self.cache_size
        if self._store is None:
            # all slots at once: zeros are mapped lazily, so memory grows only with the rows
            # written, and no vector is ever copied to a bigger store
            self._store = np.zeros((size, self.dim), dtype=np.float32)
        base = len(cache)
        if (len(keys) <= size and not any(map(cache.__contains__, keys))
                and len(set(keys)) == len(keys)):  # (one slot per key: distinct keys only)
            # None of the keys is cached (no other thread added one meanwhile): they take the
            # free slots in order, then those of the least recently used strings, as the loop
            # below would give them one key at a time.
            fresh = min(size - base, len(keys))
            slots = list(range(base, base + fresh))
            if fresh < len(keys):  # the least recently used strings' slots, oldest first
                evicted = list(islice(cache, len(keys) - fresh))
                slots += map(cache.__getitem__, evicted)
                deque(map(cache.__delitem__, evicted), maxlen=0)
            cache.update(zip(keys, slots))
            self._store[slice(base, base + fresh) if fresh == len(keys) else slots] = table[rows]
            return
        slot_rows: dict[int, int] = {}  # a slot reused within this call keeps its last row
        for key, row in zip(keys, rows):
            slot = cache.get(key)  # another thread may have added it meanwhile
            if slot is not None:
                cache.move_to_end(key)
            elif len(cache) >= size:
                slot = cache.popitem(last=False)[1]
                cache[key] = slot
            else:
                slot = cache[key] = len(cache)  # slots 0..len-1 are in use until evictions
            slot_rows[slot] = row
        self._store[list(slot_rows)] = table[list(slot_rows.values())]

    def use_disk_cache(self, directory: str | Path | None = None,
                       chunk_size: int = DEFAULT_CHUNK_SIZE) -> DiskEmbeddingCache:
        """Also keep vectors on disk (``DiskEmbeddingCache``), read before the model is asked:
        for slow encoders building training corpora, so a string is embedded once across runs
        and an interrupted build resumes. ``directory`` defaults to one per encoder version."""
        if self.disk_cache is None or (directory is not None
                                       and Path(directory) != self.disk_cache.directory):
            self.disk_cache = DiskEmbeddingCache(
                directory or default_cache_dir(self.name, self.version), self.dim, chunk_size)
        return self.disk_cache

    def cache_info(self) -> CacheInfo:
        with self._cache_lock:
            return CacheInfo(
                self._hits, self._misses, self._empty, len(self._cache), self.cache_size
            )

    def clear_cache(self) -> None:
        """Drop every cached vector and reset the counters."""
        with self._cache_lock:
            self._cache.clear()
            self._store = None
            self._hits = self._misses = self._empty = 0

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, dim={getattr(self, 'dim', '?')}, "
            f"version={getattr(self, 'version', '?')!r})"
        )
