"""``ModelConfig``: every size that defines a GROWN+UP model, JSON-safe, plus named presets.

Importing this module does not import torch (``count_parameters`` only touches the model it is
given), so configs can be read and checked anywhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

# Width of a text block per encoder name (the featurizer's encoders).
ENCODER_DIMS = {"minilm": 384, "static": 256}
READOUTS = ("cls", "mean", "max")
PAGE_TYPE_READOUTS = ("page", "content_pooled")
ROLE_FEATURES = ("nodes", "context")
ACTIVATIONS = ("quick_gelu", "gelu")

# Saved files name the page type as the package first did, "genre": the keys of a saved
# ``config.json`` and the names of ``model.safetensors``' tensors keep that spelling, so every
# saved model loads whichever version wrote it, and saving writes it too. This is the one
# translation between the two: the config keys below (``ModelConfig.to_dict`` / ``from_dict``,
# ``saved_config_keys``) and the modules whose tensors carry the page-type prefix
# (``saved_tensor_name`` / ``model_tensor_name``, where state dicts are written and read).
SAVED_CONFIG_KEYS = {  # ModelConfig field -> config.json key
    "num_page_types": "num_genres",
    "page_type_batchnorm": "genre_batchnorm",
    "page_type_readout": "genre_readout",
    "page_type_hidden": "genre_hidden",
    "page_type_dropout": "genre_dropout",
    "page_type_signals": "genre_signals",
    "page_type_names": "genre_names",
}
SAVED_MODULE_NAMES = {  # module of ``GrownUpModel`` -> its tensors' prefix in saved weights
    "page_type_head": "genre_head",
    "page_type_readout": "genre_readout",
    "page_type_norm": "genre_norm",
}
_FIELD_OF_KEY = {saved: name for name, saved in SAVED_CONFIG_KEYS.items()}
_MODULE_OF_PREFIX = {saved: name for name, saved in SAVED_MODULE_NAMES.items()}


def saved_config_keys(data: dict[str, Any]) -> dict[str, Any]:
    """A saved config's values under ``ModelConfig``'s field names (keys written either way
    are read; other keys pass unchanged, unchecked)."""
    return {_FIELD_OF_KEY.get(key, key): value for key, value in data.items()}


def saved_tensor_name(name: str) -> str:
    """The name a saved weights file gives the tensor (or module) ``GrownUpModel`` calls
    ``name``."""
    module, dot, rest = name.partition(".")
    return SAVED_MODULE_NAMES.get(module, module) + dot + rest


def model_tensor_name(name: str) -> str:
    """``GrownUpModel``'s name of the tensor (or module) a saved weights file calls ``name``
    (the inverse of ``saved_tensor_name``; a name already in the model's spelling is kept)."""
    module, dot, rest = name.partition(".")
    return _MODULE_OF_PREFIX.get(module, module) + dot + rest


@dataclass
class ModelConfig:
    """Sizes and options of a GROWN+UP model.

    ``input_blocks`` lists ``(batch attribute, width)`` in concatenation order; the model checks
    every batch against it, so a graph built with another encoder or feature version fails
    loudly instead of being silently misread.
    """

    input_blocks: list[tuple[str, int]] = field(default_factory=list)
    encoder: str = "static"
    encoder_version: str | None = None
    feature_version: str = "1"
    hidden_size: int = 256          # K
    num_layers: int = 5             # S: [GraphConvGated block, LinearOnly block] + shared LSTM
    num_transformer_layers: int = 5  # T
    num_heads: int = 4
    mlp_ratio: int = 4
    transformer_activation: str = "quick_gelu"
    prelim_sizes: list[int] = field(default_factory=lambda: [768, 256])
    dropout: float = 0.2
    attention_dropout: float = 0.0
    readout: str = "cls"            # page features: "cls" (needs T > 0), "mean" or "max"
    use_lstm: bool = True
    shared_target_gate: bool = False  # True: one target-gate matrix for all edge types (ref. code)
    node_head_hidden: int = 0       # 0: Linear(K, 1); else Linear(K, h) -> ReLU -> Linear(h, 1)
    # The content head also reads its page's readout (``[node, page]``, 2K wide): a forum's
    # replies and a news story's comments look alike a few hops around them, not page-wide.
    node_context: bool = False
    num_page_types: int = 0         # > 0 adds a Li-ArcFace page-type head on the page features
    arcface_scale: float = 5.0
    arcface_margin: float = 0.3
    # Standardise the page features over the batch (BatchNorm, no affine) before the page-type
    # head: mean readouts of different pages are nearly parallel (cosine ~0.98 at init), which
    # a cosine classifier cannot separate without it.
    page_type_batchnorm: bool = True
    # What the page-type head sees: "page" (the readout above: CLS or mean) or "content_pooled"
    # (``heads.ContentPooledReadout``: node features, text and structure pooled separately
    # over content and boilerplate by the content head's scores, projected to page_type_hidden).
    page_type_readout: str = "page"
    page_type_hidden: int = 128
    page_type_dropout: float = 0.5
    # "" or the ``page_signals.SIGNAL_VERSION`` whose page signals (URL, JSON-LD types, forms,
    # prices, repeated siblings, class words) the content-pooled page-type head also reads.
    page_type_signals: str = ""
    role_head_hidden: int = 0       # 0: Linear(K, R); else Linear(K, h) -> ReLU -> Linear(h, R)
    # What the role head sees: "nodes" (the node features) or "context"
    # (``heads.ContextRoleHead``: also the node's own inputs and its ancestors' class / id).
    role_features: str = "nodes"
    num_roles: int = 0              # > 0 adds a multi-class per-node role head
    page_type_names: list[str] = field(default_factory=list)  # class names of the page-type head
    role_names: list[str] = field(default_factory=list)   # class names of the role head

    def __post_init__(self) -> None:
        self.input_blocks = [(str(name), int(size)) for name, size in self.input_blocks]
        self.prelim_sizes = [int(s) for s in self.prelim_sizes]
        self.page_type_names = [str(n) for n in self.page_type_names]
        self.role_names = [str(n) for n in self.role_names]
        self.validate()

    # -- checks ---------------------------------------------------------------------------------
    def validate(self) -> None:
        problems = []
        names = [name for name, _ in self.input_blocks]
        if not self.input_blocks:
            problems.append("input_blocks is empty")
        if len(set(names)) != len(names):
            problems.append(f"duplicate input block names {names}")
        if any(size <= 0 for _, size in self.input_blocks):
            problems.append(f"input block widths must be positive: {self.input_blocks}")
        for name in ("hidden_size", "num_heads", "mlp_ratio"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive")
        for name in ("num_layers", "num_transformer_layers", "node_head_hidden", "num_page_types",
                     "num_roles", "role_head_hidden"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0")
        for classes, count, what in ((self.page_type_names, self.num_page_types, "page_type"),
                                     (self.role_names, self.num_roles, "role")):
            if classes and len(classes) != count:
                problems.append(f"{len(classes)} {what}_names for num_{what}s={count}")
            if len(set(classes)) != len(classes):
                problems.append(f"duplicate {what}_names {classes}")
        if self.num_page_types and self.arcface_scale <= 0:
            problems.append("arcface_scale must be positive")
        if any(s <= 0 for s in self.prelim_sizes):
            problems.append(f"prelim_sizes must be positive: {self.prelim_sizes}")
        if self.num_transformer_layers and self.hidden_size % self.num_heads:
            problems.append(f"hidden_size {self.hidden_size} not divisible by "
                            f"num_heads {self.num_heads}")
        if self.page_type_readout not in PAGE_TYPE_READOUTS:
            problems.append(f"page_type_readout {self.page_type_readout!r} not in "
                            f"{PAGE_TYPE_READOUTS}")
        if self.page_type_signals and self.page_type_readout != "content_pooled":
            problems.append("page_type_signals needs page_type_readout 'content_pooled'")
        if self.page_type_hidden <= 0 or not 0.0 <= self.page_type_dropout < 1.0:
            problems.append("page_type_hidden must be positive and page_type_dropout in [0, 1)")
        if self.role_features not in ROLE_FEATURES:
            problems.append(f"role_features {self.role_features!r} not in {ROLE_FEATURES}")
        if self.role_features == "context" and self.num_roles and not self.role_head_hidden:
            problems.append("role_features 'context' needs role_head_hidden > 0")
        if self.readout not in READOUTS:
            problems.append(f"readout {self.readout!r} not in {READOUTS}")
        if self.readout == "cls" and self.num_transformer_layers == 0:
            problems.append("readout 'cls' needs num_transformer_layers > 0")
        if self.transformer_activation not in ACTIVATIONS:
            problems.append(f"transformer_activation {self.transformer_activation!r} "
                            f"not in {ACTIVATIONS}")
        if not 0.0 <= self.dropout < 1.0 or not 0.0 <= self.attention_dropout < 1.0:
            problems.append("dropout rates must be in [0, 1)")
        prelim_out = self.prelim_sizes[-1] if self.prelim_sizes else self.input_dim
        if self.num_layers == 0 and prelim_out != self.hidden_size:
            problems.append("with num_layers == 0 the last prelim size must equal hidden_size")
        if problems:
            raise ValueError("invalid ModelConfig: " + "; ".join(problems))

    @property
    def input_dim(self) -> int:
        return sum(size for _, size in self.input_blocks)

    # -- (de)serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The config as saved in ``config.json`` (page-type fields under their saved keys,
        ``SAVED_CONFIG_KEYS``)."""
        out = {SAVED_CONFIG_KEYS.get(key, key): value
               for key, value in dataclasses.asdict(self).items()}
        out["input_blocks"] = [[name, size] for name, size in self.input_blocks]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        if not isinstance(data, dict):
            raise ValueError(f"model config must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(key for key in data if _FIELD_OF_KEY.get(key, key) not in known)
        if unknown:
            raise ValueError(f"unknown model config keys {unknown} (written by a newer version?)")
        twice = sorted(key for key in data if key in SAVED_CONFIG_KEYS
                       and SAVED_CONFIG_KEYS[key] in data)
        if twice:
            raise ValueError(f"model config keys given twice: {twice} and their saved names")
        data = saved_config_keys(data)
        if "input_blocks" in data:
            try:
                data["input_blocks"] = [(str(n), int(s)) for n, s in data["input_blocks"]]
            except (TypeError, ValueError) as exc:
                raise ValueError(f"bad input_blocks {data['input_blocks']!r}") from exc
        return cls(**data)

    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)

    # -- presets --------------------------------------------------------------------------------
    @classmethod
    def preset(cls, name: str, encoder: str = "minilm", text_dim: int | None = None,
               input_blocks: list[tuple[str, int]] | None = None,
               feature_version: str | None = None, **overrides: Any) -> "ModelConfig":
        """A named preset (see ``PRESETS``) for the featurizer's blocks with ``encoder``.

        ``text_dim`` defaults to the encoder's known width; ``input_blocks`` overrides the block
        layout entirely (tests use narrow blocks).
        """
        try:
            values = dict(PRESETS[name])
        except KeyError:
            raise ValueError(f"unknown preset {name!r}; known: {sorted(PRESETS)}") from None
        if input_blocks is None or feature_version is None:
            from scrapy_grownup.graph.featurizer import FEATURE_VERSION, feature_blocks

            if input_blocks is None:
                if text_dim is None:
                    if encoder not in ENCODER_DIMS:
                        raise ValueError(f"unknown encoder {encoder!r}: pass text_dim")
                    text_dim = ENCODER_DIMS[encoder]
                input_blocks = feature_blocks(text_dim)
            if feature_version is None:
                feature_version = FEATURE_VERSION
        values.update(encoder=encoder, input_blocks=list(input_blocks),
                      feature_version=feature_version)
        values.update(saved_config_keys(overrides))  # ``--model-overrides`` may use saved keys
        return cls(**values)


PRESETS: dict[str, dict[str, Any]] = {
    # The paper's default (S=5, T=5, K=256) with the reference's prelim blocks and dropout.
    "paper_s5_t5_k256": dict(hidden_size=256, num_layers=5, num_transformer_layers=5,
                             num_heads=4, prelim_sizes=[768, 256], dropout=0.2, readout="cls"),
    # The paper's graph-only variant: S=10, no Transformer, mean readout for page features.
    "paper_s10_k256": dict(hidden_size=256, num_layers=10, num_transformer_layers=0,
                           prelim_sizes=[768, 256], dropout=0.2, readout="mean"),
    # The shipped MiniLM model: wide enough for 384-d sentence embeddings, graph-only (a
    # Transformer block over pages of thousands of nodes doubles the epoch time on a CPU), small
    # enough to train on a 2-core CPU in about an hour.
    "medium": dict(hidden_size=128, num_layers=4, num_transformer_layers=0, num_heads=4,
                   prelim_sizes=[256, 128], dropout=0.1, readout="mean"),
    # A CPU model for fast inference.
    "small": dict(hidden_size=64, num_layers=3, num_transformer_layers=1, num_heads=2,
                  prelim_sizes=[64], dropout=0.1, readout="cls"),
    # For tests only.
    "tiny": dict(hidden_size=16, num_layers=2, num_transformer_layers=1, num_heads=4,
                 prelim_sizes=[32], dropout=0.0, readout="cls"),
}


def count_parameters(model: Any, trainable_only: bool = False) -> int:
    """Number of scalar parameters of a ``torch.nn.Module``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


class HeadNames:
    """The class names of a model's heads, for every form of the model (torch, numpy, the
    weightless card): the config's own, else ``page_type_<i>`` / ``role_<i>``."""

    config: ModelConfig

    @property
    def page_type_names(self) -> list[str]:
        """Names of the page-type head's classes."""
        return self.config.page_type_names or [f"page_type_{i}"
                                                for i in range(self.config.num_page_types)]

    @property
    def role_names(self) -> list[str]:
        """Names of the role head's classes."""
        return self.config.role_names or [f"role_{i}" for i in range(self.config.num_roles)]


__all__ = ["HeadNames", "ModelConfig", "PRESETS", "ENCODER_DIMS", "SAVED_CONFIG_KEYS", "SAVED_MODULE_NAMES",
           "count_parameters", "model_tensor_name", "saved_config_keys", "saved_tensor_name"]
