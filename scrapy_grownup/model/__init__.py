"""The GROWN+UP model: ``GrownUpModel`` in torch (training, GPUs, any config) and
``NumpyModel`` (the CPU forward pass of a model without Transformer blocks, no torch).

Importing this package imports neither torch nor torch_geometric: the torch names below are
resolved on first use, so the numpy serving path never pays for torch.
"""

from __future__ import annotations

from typing import Any

from scrapy_grownup.model.config import ENCODER_DIMS, PRESETS, ModelConfig, count_parameters
from scrapy_grownup.model.files import FORMAT_VERSION

__all__ = [
    "ArcFaceHead", "ENCODER_DIMS", "FORMAT_VERSION", "GraphBlock", "GraphConvGated",
    "GrownUpBackbone", "GrownUpModel", "LinearOnly", "ModelConfig", "ModelOutput", "NodeHead",
    "NumpyModel", "PageBatchNorm",
    "PRESETS", "QuickGELU", "TransformerBlock", "count_parameters", "masked_cross_entropy",
    "plan_attention_groups", "random_flip_positions", "weighted_bce_with_smoothing",
]

_LAZY = {
    "random_flip_positions": "augment",
    "GrownUpBackbone": "backbone", "plan_attention_groups": "backbone",
    "GrownUpModel": "grownup", "ModelOutput": "grownup",
    "ArcFaceHead": "heads", "NodeHead": "heads", "PageBatchNorm": "heads",
    "masked_cross_entropy": "heads", "weighted_bce_with_smoothing": "heads",
    "GraphBlock": "layers", "GraphConvGated": "layers", "LinearOnly": "layers",
    "QuickGELU": "layers", "TransformerBlock": "layers",
    "NumpyModel": "numpy_model",
}


def __getattr__(name: str) -> Any:
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'scrapy_grownup.model' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(f"scrapy_grownup.model.{module}"), name)
    globals()[name] = value
    return value
