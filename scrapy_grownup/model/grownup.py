"""``GrownUpModel``: backbone + content head (+ page-type / role heads), saved as safetensors and
JSON.

A saved model is a directory with ``model.safetensors`` (tensors only, optionally fp16) and
``config.json`` (format version, ``ModelConfig``, encoder name/version, feature version, dtype,
tensor shapes and the SHA-256 of the weights file). Nothing is pickled: loading a model cannot
run code. Every failure to load raises ``ModelLoadError`` saying what is wrong.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from scrapy_grownup.errors import ModelLoadError
from scrapy_grownup.model.backbone import GrownUpBackbone, graph_inputs
from scrapy_grownup.model.config import (HeadNames, ModelConfig, model_tensor_name,
                                         saved_tensor_name)
from scrapy_grownup.model.files import (CONFIG_NAME, FORMAT_VERSION, MODEL_TYPE, WEIGHTS_NAME,
                                        check_tensors, header_shapes, open_model,
                                        read_model_config, sha256,
                                        text_length_column)
from scrapy_grownup.model.heads import (ArcFaceHead, ContentPooledReadout, ContextRoleHead, NodeHead, PageBatchNorm,
                    parent_rows)



@dataclass
class ModelOutput:
    node_logits: Tensor                  # [N] content logit per node
    node_features: Tensor                # [N, K]
    page_features: Tensor                # [B, K]
    page_type_logits: Tensor | None = None  # [B, num_page_types] (margin where labels were given)
    role_logits: Tensor | None = None    # [N, num_roles]
    page_type_features: Tensor | None = None  # [B, K] what the page-type head sees (normalised)
    page_type_inputs: Tensor | None = None  # [B, D] before the page-type head's trainable part


class GrownUpModel(HeadNames, nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        k = config.hidden_size
        self.backbone = GrownUpBackbone(config)
        self.node_head = NodeHead(2 * k if config.node_context else k, config.node_head_hidden, 1)
        pooled = bool(config.num_page_types) and config.page_type_readout == "content_pooled"
        self.page_type_readout = _pooled_readout(config) if pooled else None
        page_type_dim = config.page_type_hidden if pooled else k
        self.page_type_head = (ArcFaceHead(page_type_dim, config.num_page_types,
                                           config.arcface_scale, config.arcface_margin)
                               if config.num_page_types else None)
        self.page_type_norm = (PageBatchNorm(k) if config.num_page_types
                               and config.page_type_batchnorm and not pooled else None)
        self.role_head: nn.Module | None = None
        if config.num_roles and config.role_features == "context":
            self.role_head = _context_role_head(config)
        elif config.num_roles:
            self.role_head = NodeHead(k, config.role_head_hidden, config.num_roles)

    def forward(self, batch: Any, page_type_labels: Tensor | None = None) -> ModelOutput:
        """``batch``: a ``Data`` or ``Batch`` with the config's input blocks, ``edge_index`` and
        ``edge_type``. ``page_type_labels`` (training) adds the ArcFace margin to
        ``page_type_logits``."""
        nodes, pages = self.backbone(batch)
        node_logits = self.content_logits(batch, nodes, pages)
        # the heads read where the content is, without moving the content decision
        content = torch.sigmoid(node_logits.detach().float())
        page_type = page_type_features = page_type_inputs = None
        if self.page_type_head is not None:
            page_type_features = page_type_inputs = self.page_type_inputs(batch, nodes, pages,
                                                                          content)
            if self.page_type_readout is not None:
                page_type_features = self.page_type_readout(page_type_features)
            elif self.page_type_norm is not None:
                page_type_features = self.page_type_norm(page_type_features)
            page_type = self.page_type_head(page_type_features, page_type_labels)
        roles = None
        if isinstance(self.role_head, ContextRoleHead) and not self.training \
                and not torch.is_grad_enabled():
            roles = self.role_head.infer(
                nodes, content,
                *(input_block(batch, name) for name in ("x_text", "x_class", "x_id")),
                input_rows(batch, "x_struct"), self._parents(batch, nodes.shape[0]))
        elif self.role_head is not None:
            roles = self.role_head(self.role_inputs(batch, nodes, content))
        return ModelOutput(node_logits, nodes, pages, page_type, roles, page_type_features,
                           page_type_inputs)

    def content_logits(self, batch: Any, nodes: Tensor, pages: Tensor) -> Tensor:
        """``[N]`` content logits of the backbone's ``nodes`` (with ``node_context``, each
        node beside its page's readout ``pages``)."""
        if not self.config.node_context:
            return self.node_head(nodes)
        vec, _, _ = graph_inputs(batch)
        return self.node_head(torch.cat([nodes, pages.to(nodes.dtype)[vec]], dim=1))

    def role_inputs(self, batch: Any, nodes: Tensor, content: Tensor) -> Tensor:
        """What the role head's trainable part reads per node: the node features, or the
        parameter-free context of ``ContextRoleHead`` (training caches it per node)."""
        if not isinstance(self.role_head, ContextRoleHead):
            return nodes
        rows = [input_rows(batch, name) for name in ("x_text", "x_class", "x_id", "x_struct")]
        return self.role_head.inputs(nodes, content, *rows, self._parents(batch, nodes.shape[0]))

    @staticmethod
    def _parents(batch: Any, num_nodes: int) -> Tensor:
        from scrapy_grownup.page.dom import EDGE_PARENT

        return parent_rows(batch.edge_index, batch.edge_type, num_nodes, EDGE_PARENT)

    def page_type_inputs(self, batch: Any, nodes: Tensor, pages: Tensor,
                         content: Tensor) -> Tensor:
        """What the page-type head's trainable part starts from: the page readout, or the
        parameter-free pooling of ``ContentPooledReadout`` (training caches it per page);
        ``content``: the content head's probabilities."""
        if self.page_type_readout is None:
            return pages
        vec, _, num_pages = graph_inputs(batch)
        pooled = self.page_type_readout.pool(
            nodes, content,
            lambda rows: input_rows(batch, "x_text", rows), input_rows(batch, "x_struct"),
            vec, num_pages)
        if not self.config.page_type_signals:
            return pooled
        return torch.cat([pooled, batch_signals(batch, num_pages).to(pooled)], dim=1)

    def head_probabilities(self, output: ModelOutput) -> tuple[Any, Any]:
        """``(roles [N, R], page_type [B, G])`` numpy probabilities of ``output`` (None for a
        head the model lacks). Page type: softmax of the un-margined Li-ArcFace logits."""
        roles = page_type = None
        with torch.no_grad():
            if output.role_logits is not None:
                roles = torch.softmax(output.role_logits.float(), -1).cpu().numpy()
            if self.page_type_head is not None:
                page_type = self.page_type_head.probabilities(
                    output.page_type_features).cpu().numpy()
        return roles, page_type

    # -- persistence ----------------------------------------------------------------------------
    def save_pretrained(self, directory: str | os.PathLike, fp16: bool = False,
                        encoder: str | None = None, encoder_version: str | None = None,
                        feature_version: str | None = None,
                        metadata: dict[str, Any] | None = None) -> Path:
        """Write ``model.safetensors`` + ``config.json`` into ``directory`` (created if needed).

        ``encoder`` / ``encoder_version`` / ``feature_version`` override (and are recorded in)
        the config; ``metadata`` is stored as-is under ``"metadata"`` (JSON-safe values only).
        Files are written to temporary names and renamed, so a crash leaves no half file.
        """
        from safetensors.torch import save_file

        from scrapy_grownup import __version__

        changes = {key: value for key, value in (("encoder", encoder),
                   ("encoder_version", encoder_version), ("feature_version", feature_version))
                   if value is not None}
        if changes:
            self.config = self.config.replace(**changes)
            self.backbone.config = self.config
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        dtype = torch.float16 if fp16 else torch.float32
        # under the names saved files give them (``config.saved_tensor_name``)
        tensors = {saved_tensor_name(name): (t.detach().to(dtype) if t.is_floating_point()
                                             else t.detach()).cpu().contiguous()
                   for name, t in self.state_dict().items()}
        weights_tmp = _temp_path(out, WEIGHTS_NAME)
        config_tmp = _temp_path(out, CONFIG_NAME)
        try:
            save_file(tensors, str(weights_tmp),
                      metadata={"format": "pt", "format_version": str(FORMAT_VERSION)})
            digest = sha256(weights_tmp)
            doc = {
                "model_type": MODEL_TYPE,
                "format_version": FORMAT_VERSION,
                "package_version": __version__,
                "encoder": self.config.encoder,
                "encoder_version": self.config.encoder_version,
                "feature_version": self.config.feature_version,
                "dtype": "float16" if fp16 else "float32",
                "weights_sha256": digest,
                "tensors": {name: list(t.shape) for name, t in tensors.items()},
                "config": self.config.to_dict(),
                "metadata": metadata or {},
            }
            config_tmp.write_text(json.dumps(doc, indent=2, sort_keys=True), encoding="utf-8")
            os.replace(weights_tmp, out / WEIGHTS_NAME)
            os.replace(config_tmp, out / CONFIG_NAME)
        finally:
            weights_tmp.unlink(missing_ok=True)
            config_tmp.unlink(missing_ok=True)
        return out

    @classmethod
    def read_config(cls, directory: str | os.PathLike) -> tuple[ModelConfig, dict[str, Any]]:
        """The ``ModelConfig`` and the whole ``config.json`` document of a saved model."""
        return read_model_config(directory)

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike,
                        map_location: str | torch.device = "cpu",
                        expected_encoder: str | None = None,
                        expected_feature_version: str | None = None,
                        expected_input_blocks: list[tuple[str, int]] | None = None,
                        verify_checksum: bool = True) -> "GrownUpModel":
        """Load a directory written by ``save_pretrained`` (weights become float32, eval mode).

        The ``expected_*`` arguments check that the model fits the featurizer that will feed it.
        """
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        directory = Path(directory)
        config, doc, weights = open_model(directory, expected_encoder, expected_feature_version,
                                          expected_input_blocks, verify_checksum)
        # Before anything is allocated: the shapes config.json implies (a model built on the
        # meta device, no memory) must be those of the weights (their safetensors header). A
        # config whose sizes were edited (a huge hidden_size, no checksum) would otherwise build
        # gigabytes of parameters first.
        _check_shapes(cls, config, weights, directory)
        try:
            tensors = load_file(str(weights), device=str(torch.device(map_location)))
        except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
            raise ModelLoadError(f"{weights}: unreadable safetensors file ({exc})") from exc

        try:
            model = cls(config)
        except (TypeError, ValueError) as exc:
            raise ModelLoadError(f"{directory}: cannot build the model: {exc}") from exc
        expected = model.state_dict()
        check_tensors(weights, _saved_shapes(expected),
                      {name: tuple(t.shape) for name, t in tensors.items()})
        state = {}
        for saved, t in tensors.items():
            name = model_tensor_name(saved)
            state[name] = t.to(expected[name].dtype) if t.is_floating_point() else t
        model.load_state_dict(state, strict=True)
        model.to(torch.device(map_location))
        return model.eval()


def _check_shapes(cls, config: ModelConfig, weights: Path, directory: Path) -> None:
    """``ModelLoadError`` unless the tensors ``config`` implies are exactly those in the
    header of ``weights``, by name and shape; reads no tensor data, allocates no parameter."""
    found = header_shapes(weights)
    try:
        with torch.device("meta"):
            skeleton = cls(config)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ModelLoadError(f"{directory}: cannot build the model: {exc}") from exc
    check_tensors(weights, _saved_shapes(skeleton.state_dict()), found)


def _saved_shapes(state: dict[str, Tensor]) -> dict[str, tuple[int, ...]]:
    """Shape of each tensor of a state dict, by the name saved weights give it."""
    return {saved_tensor_name(name): tuple(t.shape) for name, t in state.items()}


def input_rows(batch: Any, name: str, rows: Tensor | None = None) -> Tensor:
    """Input block ``name`` of a batch (all nodes, or the ``rows`` given), whether the batch
    holds it dense or as indices into a table of distinct strings."""
    table, index = input_block(batch, name)
    if index is None:
        return table if rows is None else table.index_select(0, rows)
    return table.index_select(0, index if rows is None else index.index_select(0, rows))


def input_block(batch: Any, name: str) -> tuple[Tensor, Tensor | None]:
    """``(table, index)`` of input block ``name``: the distinct strings' vectors and a row per
    node, or ``(dense rows, None)`` when the batch holds the block dense."""
    from scrapy_grownup.model.backbone import INDEX_SUFFIX, TABLE_SUFFIX

    block = getattr(batch, name, None)
    if block is not None:
        return block, None
    index = getattr(batch, name + INDEX_SUFFIX, None)
    table = getattr(batch, name + TABLE_SUFFIX, None)
    if index is None or table is None:
        raise ValueError(f"input block {name!r} is missing from the graph")
    return table, index


def _pooled_readout(config: ModelConfig) -> ContentPooledReadout:
    widths = dict(config.input_blocks)
    missing = {"x_text", "x_struct"} - set(widths)
    if missing:
        raise ValueError(f"page_type_readout 'content_pooled' needs input blocks "
                         f"{sorted(missing)}")
    extra = 0
    if config.page_type_signals:
        from scrapy_grownup.graph.signals import SIGNAL_DIM, SIGNAL_VERSION

        if config.page_type_signals != SIGNAL_VERSION:
            raise ValueError(f"the page-type head reads page signals version "
                             f"{config.page_type_signals!r}; this package computes "
                             f"{SIGNAL_VERSION!r}")
        extra = SIGNAL_DIM
    return ContentPooledReadout(config.hidden_size, widths["x_text"], widths["x_struct"],
                                text_length_column(), config.page_type_hidden,
                                config.page_type_dropout, extra_dim=extra)


def batch_signals(batch: Any, num_pages: int) -> Tensor:
    """``[B, SIGNAL_DIM]`` page signals of a batch: its ``x_signals`` (training sets them from
    cached values) or computed from the parsed pages it carries (``GraphBatch.pages``, or the
    ``page`` of each ``build_graph`` graph)."""
    given = getattr(batch, "x_signals", None)
    if given is not None:
        return given.float()
    pages = getattr(batch, "pages", None)
    if pages is None:
        pages = getattr(batch, "page", None)
        if pages is not None and not isinstance(pages, (list, tuple)):
            pages = [pages]
    if pages is None or len(pages) != num_pages:
        raise ValueError("this page-type head reads page signals: the batch needs x_signals or "
                         "the parsed pages (Featurizer.batch / build_graph)")
    return torch.from_numpy(np.stack([page.signals for page in pages]))


def _context_role_head(config: ModelConfig) -> ContextRoleHead:
    widths = dict(config.input_blocks)
    missing = {"x_text", "x_class", "x_id", "x_struct"} - set(widths)
    if missing or widths.get("x_class") != widths.get("x_id"):
        raise ValueError(f"role_features 'context' needs input blocks x_text, x_class, x_id "
                         f"(as wide as x_class) and x_struct; have {config.input_blocks}")
    return ContextRoleHead(config.hidden_size, widths["x_text"], widths["x_class"],
                           widths["x_struct"], config.role_head_hidden, config.num_roles)


def _temp_path(directory: Path, name: str) -> Path:
    fd, path = tempfile.mkstemp(prefix=f".tmp-{name}.", dir=directory)
    os.close(fd)
    os.chmod(path, 0o644)  # mkstemp makes 0600; saved models are meant to be shared and shipped
    return Path(path)


__all__ = ["GrownUpModel", "ModelOutput", "FORMAT_VERSION"]
