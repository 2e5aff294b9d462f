"""py3langid's language model, read from an uncompressed copy in the user's cache, memory-mapped.

py3langid ships its model as an LZMA-compressed ``.npz``, decompresses it on every load and
copies its two big tables (the byte automaton's transitions and the per-feature class weights)
into memory: most of a one-page ``grownup extract`` went there, in time and in peak memory. The
first load here writes the decompressed arrays as ``.npy`` files under
``<cache_home>/py3langid/`` (named after the model file's size and modification time, so an
upgrade of py3langid never reads a stale copy); later loads map the two big tables read-only,
so a process reads only the pages a detection visits and the page workers of a crawl share one
copy in the page cache. The arrays, and so every detection, are the ones py3langid's own loader
gives; where the cache cannot be written the model loads as py3langid loads it.

Detection itself (``Identifier``) walks py3langid's byte automaton and sums its feature weights
in numpy where py3langid loops over the bytes in Python: the same feature counts in the same
order and the same float32 sums, so every score is py3langid's own.
"""

from __future__ import annotations

import logging
import lzma
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
from py3langid.langid import LanguageIdentifier

logger = logging.getLogger(__name__)
ARRAYS = ("ptc", "pc", "classes", "nextmove", "nextmove_row", "out_feat")
MAPPED = ("ptc", "nextmove")  # the big tables: mapped, not read
# Passes over a text's bytes before ``Identifier`` leaves the walk to py3langid: a state of its
# automaton depends on the last few bytes only (the longest feature), so the walk settles in
# a few passes.
MAX_PASSES = 16


class Identifier(LanguageIdentifier):
    """py3langid's ``LanguageIdentifier``, its scores computed in numpy.

    py3langid steps its automaton through a text one byte at a time in Python, then casts the
    float16 weights of the features it met to float32 for their weighted sum. Here every byte
    steps at once, from the state its predecessor had in the pass before: once a pass changes
    no state, each state is the step from its predecessor's, which makes them the sequential
    walk's states exactly. The features are counted in the order py3langid's ``Counter`` holds
    them (first visit) and the weights widened through a table of every float16 value, so the
    sum is the same float32 product py3langid computes."""

    __slots__ = ("_features", "_moves", "_pairs", "_row_start", "_widen")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._moves = np.asarray(self.tk_nextmove)  # a view: the mapped table stays mapped
        self._row_start = np.asarray(self.tk_row, dtype=np.intp) << 8
        # the state two bytes take the walk to from its start, by (first << 8 | second): the
        # first pass starts there
        first = self._moves[self._row_start[0] + np.arange(256)]
        self._pairs = self._moves[(self._row_start[first][:, None] + np.arange(256)).ravel()]
        self._features = np.asarray(self.tk_output, dtype=np.intp)
        # float16 bit pattern -> the float32 that numpy's cast gives
        self._widen = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)

    def _raw_score(self, text):
        counted = self._feature_counts(text)
        if counted is None:  # no feature, or a walk that did not settle: py3langid's own
            return super()._raw_score(text)
        features, counts = counted
        weights = self.nb_ptc.take(features, axis=0)  # py3langid's nb_ptc[features]
        if weights.dtype == np.float16:
            weights = self._widen.take(weights.view(np.uint16))
        return np.log1p(counts) @ weights + self.nb_pc

    def _feature_counts(self, text) -> tuple[np.ndarray, np.ndarray] | None:
        """The features the automaton visits in ``text`` (bytes) by first visit and their
        float32 counts: py3langid's ``visit_counts``; None for none, or where the states do
        not settle within ``MAX_PASSES``, or for input other than bytes (py3langid walks any
        iterable of byte values)."""
        if not isinstance(text, (bytes, bytearray, memoryview)):
            return None
        letters = np.frombuffer(text, dtype=np.uint8)
        n = len(letters)
        if not n:
            return None
        moves, row_start = self._moves, self._row_start
        state = np.empty(n, dtype=moves.dtype)
        state[0] = moves[row_start[0] + letters[0]]
        state[1:] = self._pairs[(letters[:-1].astype(np.intp) << 8) | letters[1:]]
        row = np.empty(n, dtype=np.intp)
        row[0] = row_start[0]  # the walk starts in state 0
        for _ in range(MAX_PASSES):
            row[1:] = row_start[state[:-1]]
            following = moves[row + letters]
            if np.array_equal(following, state):
                break
            state = following
        else:
            return None
        visited = self._features[state]
        visited = visited[visited >= 0]
        if not len(visited):
            return None
        # each feature's first visit (np.unique sorts: slower), then the visits by feature
        at = np.arange(len(visited), dtype=np.int32)
        first = np.full(len(self.nb_ptc), len(visited), dtype=np.int32)
        np.minimum.at(first, visited, at)
        first = first[visited]
        new = first == at
        group = np.cumsum(new) - 1  # a first visit's place among the first visits
        return visited[new], np.bincount(group[first]).astype(np.float32)



def load_identifier():
    """py3langid's ``LanguageIdentifier`` (normalised probabilities) of its shipped model, as
    an ``Identifier``."""
    from py3langid.langid import MODEL_DIR, MODEL_FILE

    source = Path(MODEL_FILE)
    source = source if source.is_absolute() else Path(MODEL_DIR) / source
    try:
        copy = _uncompressed_copy(source)
    except (OSError, ValueError) as exc:  # a read-only or full home: the slower load
        logger.debug("py3langid model not cached (%s)", exc)
        copy = None
    if copy is None:
        return Identifier.from_model_file(MODEL_FILE, norm_probs=True)
    from py3langid.modelio import _to_array

    data = {name: np.load(copy / f"{name}.npy", allow_pickle=False,
                          mmap_mode="r" if name in MAPPED else None) for name in ARRAYS}
    # the automaton's transitions as a flat memoryview: indexed per byte like py3langid's
    # array.array, without reading the table
    return Identifier(data["ptc"], data["pc"], data["classes"].tolist(),
                              memoryview(data["nextmove"]), data["out_feat"].tolist(),
                              norm_probs=True, tk_row=_to_array(data["nextmove_row"]))


def _uncompressed_copy(source: Path) -> Path | None:
    """The cached folder of decompressed ``.npy`` arrays of ``source`` (written first if
    missing); None for a model whose layout this loader does not know (py3langid's own loader
    then reads it)."""
    from scrapy_grownup.encoders.disk_cache import cache_home

    stat = source.stat()
    target = cache_home() / "py3langid" / f"model-{stat.st_size}-{int(stat.st_mtime)}"
    if not all((target / f"{name}.npy").is_file() for name in ARRAYS):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
        try:
            with tempfile.TemporaryFile() as npz:
                with lzma.open(source) as src:
                    shutil.copyfileobj(src, npz, length=1 << 20)
                npz.seek(0)
                with np.load(npz, allow_pickle=False) as arrays:
                    if not set(ARRAYS) <= set(arrays.files):
                        return None
                    for name in ARRAYS:
                        np.save(tmp / f"{name}.npy", arrays[name], allow_pickle=False)
            if target.exists():  # damaged: copies are only ever renamed into place whole
                shutil.rmtree(target, ignore_errors=True)
            try:
                os.replace(tmp, target)
            except OSError:  # another process wrote it first (or left a partial folder)
                if not all((target / f"{name}.npy").is_file() for name in ARRAYS):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target
