"""A saved model directory, read without torch: ``config.json`` and the checks on loading.

Both runtimes (``GrownUpModel`` in torch, ``NumpyModel``) load through these, so a model is
refused for the same reasons, with the same ``ModelLoadError`` lines, whichever runs it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from scrapy_grownup.errors import ModelLoadError
from scrapy_grownup.model.config import ModelConfig

FORMAT_VERSION = 1
WEIGHTS_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
MODEL_TYPE = "grownup"


def read_model_config(directory: str | os.PathLike) -> tuple[ModelConfig, dict[str, Any]]:
    """The ``ModelConfig`` and the whole ``config.json`` document of a saved model directory,
    read without torch; every failure is a ``ModelLoadError`` that says what is wrong."""
    path = Path(directory) / CONFIG_NAME
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelLoadError(
            f"{path}: missing (not a saved GROWN+UP model directory)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{path}: unreadable or not JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("model_type") != MODEL_TYPE:
        raise ModelLoadError(f"{path}: not a GROWN+UP model config (model_type "
                             f"{doc.get('model_type') if isinstance(doc, dict) else None!r})")
    version = doc.get("format_version")
    if version != FORMAT_VERSION:
        raise ModelLoadError(f"{path}: format_version {version!r} is not supported "
                             f"(this package reads {FORMAT_VERSION})")
    try:
        config = ModelConfig.from_dict(doc.get("config"))
    except (TypeError, ValueError) as exc:
        raise ModelLoadError(f"{path}: invalid model config: {exc}") from exc
    return config, doc


def check_match(directory: Path, config: ModelConfig, encoder: str | None,
                feature_version: str | None, input_blocks: list | None) -> None:
    """``ModelLoadError`` unless the model reads what the featurizer that feeds it computes
    (each ``None`` is not checked)."""
    mismatches = []
    if encoder is not None and config.encoder != encoder:
        mismatches.append(f"encoder {config.encoder!r} != expected {encoder!r}")
    if feature_version is not None and str(config.feature_version) != str(feature_version):
        mismatches.append(f"feature version {config.feature_version!r} != expected "
                          f"{feature_version!r}")
    if input_blocks is not None and \
            [tuple(b) for b in input_blocks] != list(config.input_blocks):
        mismatches.append(f"input blocks {config.input_blocks} != expected "
                          f"{[tuple(b) for b in input_blocks]}")
    if mismatches:
        raise ModelLoadError(f"{directory}: model does not match the featurizer: "
                             + "; ".join(mismatches))


def open_model(directory: str | os.PathLike, expected_encoder: str | None,
               expected_feature_version: str | None, expected_input_blocks: list | None,
               verify_checksum: bool) -> tuple[ModelConfig, dict[str, Any], Path]:
    """``(config, config.json document, weights path)`` of a saved model, after the checks
    both runtimes make before reading a tensor: the config, the featurizer match, the weights
    file's presence and checksum."""
    directory = Path(directory)
    config, doc = read_model_config(directory)
    check_match(directory, config, expected_encoder, expected_feature_version,
                expected_input_blocks)
    weights = directory / WEIGHTS_NAME
    if not weights.is_file():
        raise ModelLoadError(f"{weights}: missing")
    digest = doc.get("weights_sha256")
    if verify_checksum and digest and sha256(weights) != digest:
        raise ModelLoadError(f"{weights}: checksum mismatch (file corrupt, truncated or "
                             f"not the one config.json was written with)")
    return config, doc, weights


def header_shapes(weights: Path) -> dict[str, tuple[int, ...]]:
    """Name and shape of every tensor in a safetensors file, from its header alone."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(weights), framework="numpy") as handle:
            return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise ModelLoadError(f"{weights}: unreadable safetensors file ({exc})") from exc


def check_tensors(weights: Path, expected: dict[str, tuple], found: dict[str, tuple]) -> None:
    """``ModelLoadError`` unless ``found`` (name -> shape) is exactly ``expected``."""
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    wrong = [f"{name} {found[name]} != {shape}" for name, shape in expected.items()
             if name in found and tuple(found[name]) != tuple(shape)]
    if missing or unexpected or wrong:
        parts = []
        if missing:
            parts.append(f"missing tensors {_abbrev(missing)}")
        if unexpected:
            parts.append(f"unexpected tensors {_abbrev(unexpected)}")
        if wrong:
            parts.append(f"wrong shapes {_abbrev(wrong)}")
        raise ModelLoadError(f"{weights}: does not match config.json: " + "; ".join(parts))


def _abbrev(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def read_side_file(path: Path, load):
    """``load(path)`` for one of a model directory's side files (rescorer, confidence): a
    file that cannot be read, or was made for other features, is one ``ModelLoadError``
    naming it."""
    try:
        return load(path)
    except (OSError, ValueError, KeyError) as exc:
        message = str(exc)
        raise ModelLoadError(message if str(path) in message else f"{path}: {message}") \
            from None


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def text_length_column() -> int:
    """Column of ``log(1 + own text length) / 8`` in the structural block."""
    from scrapy_grownup.page.dom import STRUCT_BLOCKS

    offset = 0
    for name, size in STRUCT_BLOCKS:
        if name == "text_length":
            return offset
        offset += size
    raise RuntimeError("the structural block has no text_length column")
