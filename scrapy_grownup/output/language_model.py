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
"""

from __future__ import annotations

import logging
import lzma
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)
ARRAYS = ("ptc", "pc", "classes", "nextmove", "nextmove_row", "out_feat")
MAPPED = ("ptc", "nextmove")  # the big tables: mapped, not read


def load_identifier():
    """py3langid's ``LanguageIdentifier`` (normalised probabilities) of its shipped model."""
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    source = Path(MODEL_FILE)
    source = source if source.is_absolute() else Path(MODEL_DIR) / source
    try:
        copy = _uncompressed_copy(source)
    except (OSError, ValueError) as exc:  # a read-only or full home: the slower load
        logger.debug("py3langid model not cached (%s)", exc)
        copy = None
    if copy is None:
        return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    from py3langid.modelio import _to_array

    data = {name: np.load(copy / f"{name}.npy", allow_pickle=False,
                          mmap_mode="r" if name in MAPPED else None) for name in ARRAYS}
    # the automaton's transitions as a flat memoryview: indexed per byte like py3langid's
    # array.array, without reading the table
    return LanguageIdentifier(data["ptc"], data["pc"], data["classes"].tolist(),
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
