"""A static (bag of word pieces) encoder distilled from all-MiniLM-L6-v2, numpy-only at run time.

The vectors were made with model2vec's recipe (see :mod:`scrapy_grownup.encoders.distill`): every
word piece of MiniLM's vocabulary went through the transformer on its own, the outputs were
reduced by PCA and scaled by a Zipf/SIF weight. Encoding a string is then: word-piece tokenize it
(no special tokens), average the vectors of its tokens, L2-normalise. Only ``tokenizers``,
``safetensors`` and numpy are needed, no torch.

Asset directory layout (``scrapy_grownup/assets/static-minilm/`` by default):

``tokenizer.json``
    a ``tokenizers`` fast tokenizer, post-processor, padding and truncation removed;
``embeddings.safetensors``
    one float16 tensor ``embeddings`` of shape ``[vocab_size, dim]``, row ``i`` for token id ``i``
    (all-zero rows are tokens dropped at distillation time and are skipped like ``[UNK]``);
``config.json``
    ``dim``, ``vocab_size``, ``unk_token_id``, the source model and distillation parameters, and
    the sha256 of the two other files (checked on load).
"""

from __future__ import annotations

import hashlib
import json
import re
from itertools import chain, filterfalse, repeat
from pathlib import Path
from typing import Any

import numpy as np

from scrapy_grownup.errors import ModelLoadError
from scrapy_grownup.encoders.base import DEFAULT_CACHE_SIZE, DEFAULT_MAX_CHARS, TextEncoder

ASSET_FORMAT = "scrapy-grownup-static"
ASSET_FORMAT_VERSION = 1
TOKENIZER_FILE = "tokenizer.json"
EMBEDDINGS_FILE = "embeddings.safetensors"
CONFIG_FILE = "config.json"
EMBEDDINGS_KEY = "embeddings"
# Distinct words whose token ids are kept (about 100 bytes each); the table restarts when full.
WORD_CACHE_SIZE = 500_000
WORDS_PER_CALL = 1_000  # new words joined into one tokenizer input
# Characters Python's str.split() splits on that the tokenizer's normaliser deletes instead
# (control characters, not Unicode White_Space): words around them would join in the tokenizer.
_SPLIT_MISMATCH = re.compile("[\x1c-\x1f]")
# Joins the texts of a call for one str.split(): not whitespace, so a word of its own between
# two texts; kept in the word table as row 0, a word without tokens.
_SEPARATOR = "\x00"


def default_asset_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "assets" / "static-minilm"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class StaticEncoder(TextEncoder):
    """Mean of distilled word-piece vectors, L2-normalised (256-d for the shipped assets).

    :param path: asset directory; the one shipped in the package by default.
    :param verify: check the sha256 of the files against ``config.json`` (about 20 ms).
    """

    name = "static"

    def __init__(
        self,
        path: str | Path | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        max_chars: int = DEFAULT_MAX_CHARS,
        verify: bool = True,
        device: str | None = None,  # accepted for a uniform signature; always numpy on the CPU
    ):
        super().__init__(cache_size=cache_size, max_chars=max_chars)
        self.path = Path(path) if path is not None else default_asset_dir()
        self.config, self.tokenizer, vectors = _load_assets(self.path, verify=verify)
        self.dim = int(vectors.shape[1])
        self.version = self.config["embeddings_sha256"][:12]
        self._vectors = vectors
        # Tokens that contribute nothing: [UNK] (as in model2vec) and rows left empty by the
        # distillation (tokens removed from the vocabulary, e.g. [unused17]).
        keep = np.any(vectors != 0, axis=1)
        unk = self.config.get("unk_token_id")
        if unk is not None and 0 <= int(unk) < len(keep):
            keep[int(unk)] = False
        self._keep = keep
        self._clear_words()

    def clear_cache(self) -> None:
        super().clear_cache()
        with self._model_lock:
            self._clear_words()

    def _clear_words(self) -> None:
        # Word -> row; row r's token ids are _word_tokens[_word_start[r]:_word_start[r + 1]].
        # Row 0: the separator of texts (``_token_ids``), no tokens.
        self._word_row: dict[str, int] = {_SEPARATOR: 0}
        self._word_start = np.zeros(2, dtype=np.int64)
        self._word_tokens = np.zeros(0, dtype=np.int64)

    def _token_ids(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, lengths)``: the token ids of all ``texts`` concatenated, and per text.

        The same ids as tokenizing each text (BERT normalisation and pre-tokenisation act per
        character and split at whitespace, so a text's tokens are its words' tokens in order),
        but each distinct word is tokenized once and remembered: words repeat far more than
        texts, and all texts are split into words at once. Texts whose split could differ from
        the tokenizer's go to it whole.
        """
        joined = f" {_SEPARATOR} ".join(texts)
        odd = [i for i, text in enumerate(texts) if _SPLIT_MISMATCH.search(text)] \
            if _SPLIT_MISMATCH.search(joined) else []
        if odd:
            whole = self.tokenizer.encode_batch_fast([texts[i] for i in odd],
                                                     add_special_tokens=False)
            odd_ids = dict(zip(odd, (e.ids for e in whole)))
            texts = [text if i not in odd_ids else "" for i, text in enumerate(texts)]
            joined = f" {_SEPARATOR} ".join(texts)
        # All texts' words in one split, a separator between two texts; where a text holds the
        # separator itself (it has no tokens either), each text is split on its own.
        separated = len(texts) > 0 and joined.count(_SEPARATOR) == len(texts) - 1
        if separated:
            flat = joined.split()
        else:
            words = list(map(str.split, texts))
            flat = list(chain.from_iterable(words))
        row_of = self._word_row
        rows = np.fromiter(map(row_of.get, flat, repeat(-1)), dtype=np.int64, count=len(flat))
        absent = np.flatnonzero(rows < 0)
        if len(absent):
            new = list(dict.fromkeys(map(flat.__getitem__, absent.tolist())))
            if len(row_of) + len(new) > WORD_CACHE_SIZE:
                self._clear_words()
                row_of = self._word_row
                new = list(dict.fromkeys(filterfalse(row_of.__contains__, flat)))
                absent = np.arange(len(flat))
            tokens, counts = self._tokenize_words(new)
            base = len(row_of)
            row_of.update(zip(new, range(base, base + len(new))))
            self._word_start = np.concatenate(
                [self._word_start, self._word_start[-1] + np.cumsum(counts)])
            self._word_tokens = np.concatenate([self._word_tokens, tokens])
            rows[absent] = np.fromiter(map(row_of.__getitem__, map(flat.__getitem__,
                                                                   absent.tolist())),
                                       dtype=np.int64, count=len(absent))
        start = self._word_start[rows]
        count = self._word_start[rows + 1] - start
        word_end = np.cumsum(count)  # tokens up to each word, itself included
        total = int(word_end[-1]) if len(word_end) else 0
        # Expand every word to its token range: position p of word w reads start[w] + offset.
        offsets = np.arange(total, dtype=np.int64) - np.repeat(word_end - count, count)
        ids = self._word_tokens[np.repeat(start, count) + offsets]
        # Tokens per text: token count up to each text's end (its separator, or its last
        # word), differenced.
        if separated:
            lengths = np.diff(np.r_[0, word_end[rows == 0], total])
        else:
            text_end = np.cumsum(np.fromiter(map(len, words), dtype=np.int64, count=len(texts)))
            lengths = np.diff(np.r_[0, np.r_[0, word_end][text_end]])
        if odd:
            parts, cursor, out_lengths = [], 0, lengths.copy()
            for i in range(len(texts)):
                if i in odd_ids:
                    parts.append(np.asarray(odd_ids[i], dtype=np.int64))
                    out_lengths[i] = len(odd_ids[i])
                else:
                    parts.append(ids[cursor:cursor + lengths[i]])
                    cursor += lengths[i]
            return np.concatenate(parts) if parts else ids, out_lengths
        return ids, lengths

    def _tokenize_words(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, counts)`` of distinct whitespace-free ``words``: tokenized as a few long
        space-joined texts (the tokenizer's cost is mostly per text), each token assigned to
        its word by the character offset where it starts."""
        chunks = [words[i:i + WORDS_PER_CALL] for i in range(0, len(words), WORDS_PER_CALL)]
        encodings = self.tokenizer.encode_batch([" ".join(chunk) for chunk in chunks],
                                                add_special_tokens=False)
        ids, counts = [], []
        for chunk, encoding in zip(chunks, encodings):
            size = np.fromiter(map(len, chunk), dtype=np.int64, count=len(chunk)) + 1
            starts = np.cumsum(size) - size
            chunk_ids = np.asarray(encoding.ids, dtype=np.int64)
            if len(chunk_ids):
                first = np.fromiter(chain.from_iterable(encoding.offsets), dtype=np.int64,
                                    count=2 * len(chunk_ids))[::2]  # (start, end) pairs
                word = np.searchsorted(starts, first, side="right") - 1
                counts.append(np.bincount(word, minlength=len(chunk)))
            else:
                counts.append(np.zeros(len(chunk), dtype=np.int64))
            ids.append(chunk_ids)
        return np.concatenate(ids), np.concatenate(counts).astype(np.int64)

    def _encode_uncached(self, texts: list[str]) -> np.ndarray:
        from scipy.sparse import csr_matrix

        ids, lengths = self._token_ids(texts)
        mask = self._keep[ids]
        # each text's kept tokens: the kept count up to its end, from a running count
        kept = np.zeros(len(ids) + 1, dtype=np.int32)
        np.cumsum(mask, out=kept[1:])
        ends = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=ends[1:])
        indptr = kept[ends]
        # int32 indices, which scipy would otherwise convert to (the vocabulary is far smaller)
        ids = ids[mask].astype(np.int32)
        # Sum of each text's token vectors as a sparse [texts x vocab] count matrix times the
        # vectors (an order of magnitude faster than np.add.reduceat). The mean differs from
        # the sum by a positive scale only, which the normalisation removes.
        counts = csr_matrix(
            (np.ones(len(ids), dtype=np.float32), ids, indptr),
            shape=(len(texts), self._vectors.shape[0]),
        )
        out = np.asarray(counts @ self._vectors, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def _load_assets(path: Path, verify: bool = True) -> tuple[dict[str, Any], Any, np.ndarray]:
    files = {name: path / name for name in (CONFIG_FILE, TOKENIZER_FILE, EMBEDDINGS_FILE)}
    missing = [name for name, p in files.items() if not p.is_file()]
    if missing:
        raise ModelLoadError(
            f"static encoder assets missing in {path}: {', '.join(missing)} "
            "(run `grownup lab distill-static` to create them)"
        )
    try:
        config = json.loads(files[CONFIG_FILE].read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read {files[CONFIG_FILE]}: {exc}") from exc
    if config.get("format") != ASSET_FORMAT or config.get("format_version") != ASSET_FORMAT_VERSION:
        raise ModelLoadError(
            f"{files[CONFIG_FILE]} is not a {ASSET_FORMAT} v{ASSET_FORMAT_VERSION} config"
        )

    tokenizer_bytes = files[TOKENIZER_FILE].read_bytes()
    # the embeddings are hashed streaming and read through a memory map: the file's bytes are
    # never held besides the float32 table (peak memory of a one-page run)
    digests = {"tokenizer_sha256": _sha256(tokenizer_bytes),
               "embeddings_sha256": _file_sha256(files[EMBEDDINGS_FILE])} \
        if verify or not config.get("embeddings_sha256") else {}
    if verify:
        for label, key in ((TOKENIZER_FILE, "tokenizer_sha256"),
                           (EMBEDDINGS_FILE, "embeddings_sha256")):
            if config.get(key) and digests[key] != config[key]:
                raise ModelLoadError(
                    f"{path / label} is corrupt: sha256 does not match {CONFIG_FILE}"
                )
    if not config.get("embeddings_sha256"):
        config["embeddings_sha256"] = digests["embeddings_sha256"]

    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
    except Exception as exc:
        raise ModelLoadError(f"cannot load {files[TOKENIZER_FILE]}: {exc}") from exc
    tokenizer.no_padding()
    tokenizer.no_truncation()

    try:
        from safetensors import safe_open

        with safe_open(str(files[EMBEDDINGS_FILE]), framework="numpy") as tensors:
            stored = tensors.get_tensor(EMBEDDINGS_KEY)
        vectors = np.asarray(stored, dtype=np.float32)
        del stored
    except Exception as exc:
        raise ModelLoadError(f"cannot load {files[EMBEDDINGS_FILE]}: {exc}") from exc
    if vectors.ndim != 2 or not (np.isfinite(vectors.max()) and np.isfinite(vectors.min())):
        raise ModelLoadError(f"{files[EMBEDDINGS_FILE]} does not hold a finite 2-d matrix")
    if int(config.get("dim", vectors.shape[1])) != vectors.shape[1]:
        raise ModelLoadError(
            f"{files[EMBEDDINGS_FILE]} has {vectors.shape[1]} columns, config says {config['dim']}"
        )
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    if vocab_size > vectors.shape[0]:
        raise ModelLoadError(
            f"tokenizer has {vocab_size} tokens but {files[EMBEDDINGS_FILE]} only "
            f"{vectors.shape[0]} rows"
        )
    return config, tokenizer, vectors
