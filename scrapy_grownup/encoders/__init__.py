"""Sentence encoders for node text, class words and id words.

``get_encoder("static")`` (numpy only, ~256-d, fast) or ``get_encoder("minilm")`` (384-d
all-MiniLM-L6-v2 through sentence-transformers). Instances are shared per process: asking twice
for the same encoder with the same arguments gives the same object, so a model is loaded once.
Nothing heavy (torch, sentence-transformers) is imported until a MiniLM encoder is created.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from scrapy_grownup.errors import ModelLoadError
from scrapy_grownup.encoders.base import DEFAULT_CACHE_SIZE, DEFAULT_MAX_CHARS, CacheInfo, TextEncoder

if TYPE_CHECKING:  # pragma: no cover
    from scrapy_grownup.encoders.minilm import MiniLMEncoder
    from scrapy_grownup.encoders.static import StaticEncoder

ENCODERS: tuple[str, ...] = ("minilm", "static")

_instances: dict[tuple[Any, ...], TextEncoder] = {}
_lock = threading.Lock()


def _create(name: str, kwargs: dict[str, Any]) -> TextEncoder:
    if name == "minilm":
        from scrapy_grownup.encoders.minilm import MiniLMEncoder

        return MiniLMEncoder(**kwargs)
    from scrapy_grownup.encoders.static import StaticEncoder

    return StaticEncoder(**kwargs)


def get_encoder(name: str, **kwargs: Any) -> TextEncoder:
    """The shared encoder ``name`` (one of :data:`ENCODERS`), created on first use.

    Keyword arguments go to the encoder's constructor (``device``, ``batch_size``,
    ``cache_size``, ``max_chars``, ``path``...) and are part of the sharing key. ``device`` is
    ignored by the static encoder, which always runs numpy on the CPU.

    :raises ValueError: for an unknown name.
    :raises ModelLoadError: when the model or asset files are missing or corrupt.
    """
    key_name = name.strip().lower() if isinstance(name, str) else name
    if key_name not in ENCODERS:
        raise ValueError(f"unknown text encoder {name!r}; choose one of {', '.join(ENCODERS)}")
    if key_name == "static":
        kwargs.pop("device", None)
    try:
        key = (key_name, *sorted((k, str(v)) for k, v in kwargs.items()))
    except TypeError:  # pragma: no cover
        key = (key_name, repr(sorted(kwargs.items())))
    with _lock:
        encoder = _instances.get(key)
        if encoder is None:
            encoder = _instances[key] = _create(key_name, kwargs)
        return encoder


def clear_encoders() -> None:
    """Forget the shared instances (mainly for tests)."""
    with _lock:
        _instances.clear()


def __getattr__(name: str) -> Any:
    if name == "MiniLMEncoder":
        from scrapy_grownup.encoders.minilm import MiniLMEncoder

        return MiniLMEncoder
    if name == "StaticEncoder":
        from scrapy_grownup.encoders.static import StaticEncoder

        return StaticEncoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ENCODERS",
    "CacheInfo",
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_MAX_CHARS",
    "MiniLMEncoder",
    "ModelLoadError",
    "StaticEncoder",
    "TextEncoder",
    "clear_encoders",
    "get_encoder",
]
