"""The GROWN+UP model (imports torch, not torch_geometric; ``import scrapy_grownup`` imports
neither)."""

from scrapy_grownup.model.augment import random_flip_positions
from scrapy_grownup.model.backbone import GrownUpBackbone, plan_attention_groups
from scrapy_grownup.model.config import ENCODER_DIMS, PRESETS, ModelConfig, count_parameters
from scrapy_grownup.model.grownup import FORMAT_VERSION, GrownUpModel, ModelOutput
from scrapy_grownup.model.heads import (ArcFaceHead, NodeHead, PageBatchNorm, masked_cross_entropy,
                    weighted_bce_with_smoothing)
from scrapy_grownup.model.layers import GraphBlock, GraphConvGated, LinearOnly, QuickGELU, TransformerBlock

__all__ = [
    "ArcFaceHead", "ENCODER_DIMS", "FORMAT_VERSION", "GraphBlock", "GraphConvGated",
    "GrownUpBackbone", "GrownUpModel", "LinearOnly", "ModelConfig", "ModelOutput", "NodeHead",
    "PageBatchNorm",
    "PRESETS", "QuickGELU", "TransformerBlock", "count_parameters", "masked_cross_entropy",
    "plan_attention_groups", "random_flip_positions", "weighted_bce_with_smoothing",
]
