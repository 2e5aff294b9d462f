"""Self-supervised pre-training of the GROWN+UP backbone (paper section 2.4).

Modules: ``masking`` (choosing and zeroing nodes, their targets), ``heads`` (the pre-training
heads, losses and the paper's weights), ``data`` (batches of same-website pairs and single pages
from a ``grownup warc`` corpus), ``trainer`` (``grownup pretrain``: the loop, checkpoints and
resume), ``init`` (``grownup train --init``: loading a pre-trained backbone), ``command``
(the CLI arguments). Importing this package does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["PAPER_WEIGHTS", "PretrainConfig", "load_pretrained", "pretrain"]

_LAZY = {
    "PAPER_WEIGHTS": ("scrapy_grownup.pretraining.defaults", "PAPER_WEIGHTS"),
    "PretrainConfig": ("scrapy_grownup.pretraining.trainer", "PretrainConfig"),
    "pretrain": ("scrapy_grownup.pretraining.trainer", "pretrain"),
    "load_pretrained": ("scrapy_grownup.pretraining.init", "load_pretrained"),
}

if TYPE_CHECKING:  # pragma: no cover
    from scrapy_grownup.pretraining.defaults import PAPER_WEIGHTS
    from scrapy_grownup.pretraining.init import load_pretrained
    from scrapy_grownup.pretraining.trainer import PretrainConfig, pretrain


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'scrapy_grownup.pretraining' has no attribute "
                             f"{name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
