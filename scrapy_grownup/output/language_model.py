"""py3langid's language model, loaded from an uncompressed copy kept in the user's cache.

py3langid ships its model as an LZMA-compressed ``.npz`` and decompresses it on every load: most
of a one-page ``grownup extract`` went there. The first load writes the decompressed ``.npz``
under ``<cache_home>/py3langid/`` (named after the model file's size and modification time, so
an upgrade of py3langid never reads a stale copy); later loads read it with
``np.load(allow_pickle=False)``. The arrays, and so every detection, are the ones py3langid's
own loader gives; where the cache cannot be written the model loads as py3langid loads it.
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


def load_identifier():
    """py3langid's ``LanguageIdentifier`` (normalised probabilities) of its shipped model."""
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    source = Path(MODEL_FILE)
    source = source if source.is_absolute() else Path(MODEL_DIR) / source
    try:
        copy = _uncompressed_copy(source)
    except OSError as exc:  # a read-only or full home: the slower load, not a failure
        logger.debug("py3langid model not cached (%s)", exc)
        copy = None
    if copy is None:
        return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    from py3langid.modelio import _to_array

    with np.load(copy, allow_pickle=False) as data:
        return LanguageIdentifier(np.asarray(data["ptc"]), np.asarray(data["pc"]),
                                  data["classes"].tolist(), _to_array(data["nextmove"]),
                                  data["out_feat"].tolist(), norm_probs=True,
                                  tk_row=_to_array(data["nextmove_row"]))


def _uncompressed_copy(source: Path) -> Path | None:
    """The cached decompressed ``.npz`` of ``source`` (written first if missing); None for a
    model whose layout this loader does not know (py3langid's own loader then reads it)."""
    from scrapy_grownup.encoders.disk_cache import cache_home

    stat = source.stat()
    target = cache_home() / "py3langid" / f"model-{stat.st_size}-{int(stat.st_mtime)}.npz"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as out, lzma.open(source) as src:
                shutil.copyfileobj(src, out, length=1 << 20)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    with np.load(target, allow_pickle=False) as data:
        needed = {"ptc", "pc", "classes", "nextmove", "nextmove_row", "out_feat"}
        return target if needed <= set(data.files) else None
