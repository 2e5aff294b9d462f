"""``NumpyModel``: the GROWN+UP forward pass for CPU serving, in numpy, without torch.

It computes what ``GrownUpModel`` computes in eval mode (``tests/model/test_numpy_model.py``
checks node scores, role and page-type outputs against it on real pages) for the configs
``supports`` accepts: any number of prelim and graph layers, the LSTM across depth, a mean or
max readout, the content head, the content-pooled page-type readout with its Li-ArcFace head and
the context role head. Transformer blocks (``num_transformer_layers > 0``) stay on torch.

Why numpy rather than a graph runtime: the model is small (a few hundred thousand parameters)
and its graph step is a gather and a segment sum over a tree, which numpy does directly; the
process starts without importing torch, and the weights are read with ``safetensors.numpy``.

The typed gated convolution over a tree, with ``p(i)`` the parent of node ``i``::

    h_i = sigma(B_0 x_i + C_0 x_p(i)) * (W_0 x_p(i) + b_0)                  (from the parent)
        + sum_{c: p(c) = i} sigma(B_1 x_i + C_1 x_c) * (W_1 x_c + b_1)       (from the children)
        + sigma((B_2 + C_2) x_i) * (W_2 x_i + b_2)                          (self loop)

One matmul per layer gives all eight projections of every node; the parent term is a gather,
the children's term one ``np.add.at`` segment sum.
"""

from __future__ import annotations

import logging
import math
import os
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from scrapy_grownup.errors import ModelLoadError
from scrapy_grownup.model.config import (HeadNames, ModelConfig, model_tensor_name,
                                         saved_tensor_name)
from scrapy_grownup.model.files import (WEIGHTS_NAME, check_tensors, header_shapes, open_model,
                                        text_length_column)

ONNX_NAME = "backbone.onnx"  # the backbone and content head for ONNX Runtime (``onnx_export``)
LAYER_NORM_EPS = 1e-5
logger = logging.getLogger(__name__)
BATCH_NORM_EPS = 1e-5
TEXT_BLOCKS = ("x_text", "x_class", "x_id")


def supports(config: ModelConfig) -> bool:
    """Whether ``NumpyModel`` computes this config's forward pass (else: torch)."""
    return (config.num_transformer_layers == 0 and not config.node_context
            and not config.node_head_hidden
            and config.readout in ("mean", "max")
            and (not config.num_page_types or config.page_type_readout == "content_pooled")
            and (not config.num_roles or config.role_features == "context"))


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Name and shape of every tensor a model of ``config`` (one ``supports`` accepts) has, as
    ``GrownUpModel.state_dict()`` names them."""
    k = config.hidden_size
    shapes: dict[str, tuple[int, ...]] = {}

    def block(prefix: str, a: int, b: int, kind: str) -> None:
        if kind == "linear":
            shapes.update({f"{prefix}.op.lin.weight": (b, a), f"{prefix}.op.lin.bias": (b,)})
        else:
            gates = b if config.shared_target_gate else 3 * b
            shapes.update({f"{prefix}.op.lin_msg.weight": (3 * b, a),
                           f"{prefix}.op.lin_msg.bias": (3 * b,),
                           f"{prefix}.op.lin_gate_dst.weight": (gates, a),
                           f"{prefix}.op.lin_gate_src.weight": (3 * b, a)})
        for name in ("norm1.weight", "norm1.bias", "lin2.bias", "norm2.weight", "norm2.bias"):
            shapes[f"{prefix}.{name}"] = (b,)
        shapes[f"{prefix}.lin2.weight"] = (b, b)
        if a != b:
            shapes.update({f"{prefix}.residual.0.weight": (b, a),
                           f"{prefix}.residual.0.bias": (b,),
                           f"{prefix}.residual.1.weight": (b,),
                           f"{prefix}.residual.1.bias": (b,)})

    def batch_norm(prefix: str, width: int) -> None:
        shapes.update({f"{prefix}.running_mean": (width,), f"{prefix}.running_var": (width,),
                       f"{prefix}.num_batches_tracked": ()})

    dims = [config.input_dim, *config.prelim_sizes]
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        block(f"backbone.prelim.{i}", a, b, "linear")
    width = dims[-1]
    for i in range(config.num_layers):
        block(f"backbone.layers.{i}.0", width, k, "conv")
        block(f"backbone.layers.{i}.1", k, k, "linear")
        width = k
    if config.use_lstm and config.num_layers:
        shapes.update({"backbone.lstm.weight_ih": (4 * k, k), "backbone.lstm.weight_hh": (4 * k, k),
                       "backbone.lstm.bias_ih": (4 * k,), "backbone.lstm.bias_hh": (4 * k,)})
    shapes.update({"node_head.net.weight": (1, k), "node_head.net.bias": (1,)})
    widths = dict(config.input_blocks)
    if config.num_page_types:
        from scrapy_grownup.graph.signals import SIGNAL_DIM

        pooled = 3 * k + 2 * widths["x_text"] + 2 * widths["x_struct"] + 4 \
            + (SIGNAL_DIM if config.page_type_signals else 0)
        hidden = config.page_type_hidden
        batch_norm("page_type_readout.norm", pooled)
        shapes.update({"page_type_readout.net.1.weight": (hidden, pooled),
                       "page_type_readout.net.1.bias": (hidden,),
                       "page_type_readout.net.2.weight": (hidden,),
                       "page_type_readout.net.2.bias": (hidden,),
                       "page_type_head.weight": (config.num_page_types, hidden)})
    if config.num_roles:
        inputs = k + 1 + widths["x_text"] + 3 * widths["x_class"] + widths["x_struct"]
        hidden = config.role_head_hidden
        batch_norm("role_head.norm", inputs)
        shapes.update({"role_head.net.1.weight": (hidden, inputs),
                       "role_head.net.1.bias": (hidden,),
                       "role_head.net.4.weight": (config.num_roles, hidden),
                       "role_head.net.4.bias": (config.num_roles,)})
    return shapes


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function, in place on ``x`` (a temporary of the caller)."""
    np.negative(x, out=x)
    np.exp(x, out=x)
    x += 1.0
    return np.reciprocal(x, out=x)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``LayerNorm`` over the last axis: a new array, ``x`` left as it is."""
    centred = x - x.mean(axis=1, keepdims=True)
    var = np.einsum("ij,ij->i", centred, centred)
    var /= x.shape[1]
    var += LAYER_NORM_EPS
    centred *= (1.0 / np.sqrt(var))[:, None]
    centred *= weight
    centred += bias
    return centred


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0, out=x)


def _row_max(x: np.ndarray) -> np.ndarray:
    """``x.max(axis=-1, keepdims=True)`` column by column: the same maxima (a max is exact in
    any order), where numpy's reduction over a short last axis of many rows costs more."""
    top = x[..., 0].copy()
    for j in range(1, x.shape[-1]):
        np.maximum(top, x[..., j], out=top)
    return top[..., None]


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - (_row_max(x) if len(x) > x.shape[-1] else x.max(axis=-1, keepdims=True)))
    return e / e.sum(axis=-1, keepdims=True)


class _Block:
    """``GraphBlock`` of the backbone (``layers.GraphBlock``) in inference form."""

    def __init__(self, w: dict[str, np.ndarray], prefix: str, kind: str, k: int):
        self.kind, self.k = kind, k
        get = lambda name: w[f"{prefix}.{name}"]  # noqa: E731
        self.norm1 = (get("norm1.weight"), get("norm1.bias"))
        self.lin2 = (get("lin2.weight").T.copy(), get("lin2.bias"))
        self.norm2 = (get("norm2.weight"), get("norm2.bias"))
        self.residual = None
        if f"{prefix}.residual.0.weight" in w:
            self.residual = (get("residual.0.weight"), get("residual.0.bias"),
                             get("residual.1.weight"), get("residual.1.bias"))
        if kind == "linear":
            self.lin = (get("op.lin.weight"), get("op.lin.bias"))
            return
        msg, msg_b = get("op.lin_msg.weight"), get("op.lin_msg.bias")
        src, dst = get("op.lin_gate_src.weight"), get("op.lin_gate_dst.weight")
        rows = lambda m, t: m[t * k:(t + 1) * k]  # noqa: E731
        dst_of = (lambda t: dst[:k]) if dst.shape[0] == k else (lambda t: rows(dst, t))
        zeros = np.zeros(k, dtype=np.float32)

        def fused(parts):
            return (np.concatenate([w for w, _ in parts]).T.copy(),
                    np.concatenate([b for _, b in parts]))

        # read at a node's children: [B_0 | C_1 | W_1]; at its parent: [C_0 | W_0 | B_1];
        # at itself: [(B_2 + C_2) | W_2]
        self.at_child = fused([(dst_of(0), zeros), (rows(src, 1), zeros),
                               (rows(msg, 1), rows(msg_b, 1))])
        self.at_parent = fused([(rows(src, 0), zeros), (rows(msg, 0), rows(msg_b, 0)),
                                (dst_of(1), zeros)])
        self.at_self = fused([(rows(src, 2) + dst_of(2), zeros), (rows(msg, 2), rows(msg_b, 2))])

    def finish(self, op_out: np.ndarray, residual: np.ndarray) -> np.ndarray:
        h = _relu(_layer_norm(op_out, *self.norm1))
        h = _layer_norm(h @ self.lin2[0] + self.lin2[1], *self.norm2)
        h += residual
        return _relu(h)

    def residual_of(self, x: np.ndarray) -> np.ndarray:
        if self.residual is None:
            return x
        w, b, nw, nb = self.residual
        return _layer_norm(x @ w.T + b, nw, nb)

    def __call__(self, x: np.ndarray, tree: "_Tree | None" = None) -> np.ndarray:
        if self.kind == "linear":
            return self.finish(x @ self.lin[0].T + self.lin[1], self.residual_of(x))
        return self.finish(self.convolve(x, tree), self.residual_of(x))

    def convolve(self, x: np.ndarray, tree: "_Tree") -> np.ndarray:
        k = self.k
        y = x @ self.at_self[0]
        y += self.at_self[1]
        out = _sigmoid(y[:, :k]) * y[:, k:]
        if not len(tree.child):
            return out
        at_child = x[tree.child] @ self.at_child[0]
        at_child += self.at_child[1]
        at_parent = x[tree.internal] @ self.at_parent[0]
        at_parent += self.at_parent[1]
        at_parent = at_parent[tree.parent_row]  # per child: its parent's projections
        # from the parent: each non-root node receives exactly one message
        gate = at_child[:, :k] + at_parent[:, :k]
        out[tree.child] += _sigmoid(gate) * at_parent[:, k:2 * k]
        # from the children: each node sums the messages of its children
        gate = at_parent[:, 2 * k:] + at_child[:, k:2 * k]
        message = _sigmoid(gate) * at_child[:, 2 * k:]
        out[tree.internal] += np.add.reduceat(message[tree.by_parent], tree.parent_starts,
                                              axis=0)
        return out


class _Tree:
    """The batch's forest: non-root nodes (``child``), the nodes with children
    (``internal``, ascending) and each child's row among them, the children grouped by parent
    for segment sums, and the pages' node ranges. The grouping is computed when first read:
    only the numpy backbone's convolution reads it, not the heads behind ONNX Runtime."""

    def __init__(self, parent: np.ndarray, ptr: np.ndarray):
        self.parent = parent
        self.child = np.flatnonzero(parent >= 0)
        self.parent_of_child = parent[self.child]
        self.ptr = ptr
        self.sizes = np.diff(ptr)

    @cached_property
    def _groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        internal, parent_row = np.unique(self.parent_of_child, return_inverse=True)
        by_parent = np.argsort(parent_row, kind="stable")
        counts = np.bincount(parent_row, minlength=len(internal))
        return internal, parent_row, by_parent, np.concatenate([[0], np.cumsum(counts)[:-1]])

    internal = property(lambda self: self._groups[0])
    parent_row = property(lambda self: self._groups[1])
    by_parent = property(lambda self: self._groups[2])
    parent_starts = property(lambda self: self._groups[3])

    def depth(self) -> np.ndarray:
        """Each node's distance to its root, by pointer doubling: ``up`` jumps to the ancestor
        twice as far each round (a root stays on itself), so the rounds grow with the log of
        the depth."""
        depth = np.zeros(len(self.parent), dtype=np.int64)
        depth[self.child] = 1
        up = np.arange(len(self.parent))
        up[self.child] = self.parent_of_child
        while True:
            further = up[up]
            if np.array_equal(further, up):
                return depth
            depth += depth[up]
            up = further


def _range_sums(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sum of ``values[starts[j]:ends[j]]`` per range ``j`` (0 for an empty range): one
    ``reduceat`` over the bounds ``s_0, e_0, s_1, e_1...``, keeping every other sum."""
    out = np.zeros((len(starts),) + values.shape[1:], dtype=np.float32)
    full = ends > starts
    if full.any():
        bounds = np.stack([starts[full], ends[full]], axis=1).reshape(-1)
        if bounds[-1] == len(values):
            bounds = bounds[:-1]
        out[full] = np.add.reduceat(values, bounds, axis=0)[::2]
    return out


class NumpyModel(HeadNames):
    """A saved GROWN+UP model's inference in numpy: ``predict(arrays)`` on the arrays of
    ``Featurizer.batch_arrays`` gives per page the content probability of every node, the role
    probabilities, the page-type head's probabilities and its pooled inputs."""

    runtime = "numpy"  # what ``ArticleExtractor`` tells the two runtimes apart by
    # what runs the backbone: "onnxruntime" (the model's ``backbone.onnx``) or "numpy"
    backend = "numpy"
    _session = None
    _onnx_inputs: list[str] = []

    def __init__(self, config: ModelConfig, weights: dict[str, np.ndarray]):
        if not supports(config):
            raise ValueError("this model config needs torch (Transformer blocks, node context, "
                             "or a head numpy does not run)")
        self.config = config
        k = config.hidden_size
        w = {name: np.asarray(t, dtype=np.float32) for name, t in weights.items()
             if np.issubdtype(t.dtype, np.floating)}
        self.prelim = [_Block(w, f"backbone.prelim.{i}", "linear", k)
                       for i in range(len(config.prelim_sizes))]
        self.layers = [(_Block(w, f"backbone.layers.{i}.0", "conv", k),
                        _Block(w, f"backbone.layers.{i}.1", "linear", k))
                       for i in range(config.num_layers)]
        self.lstm = None
        if config.use_lstm and config.num_layers:
            # the cell gate's rows doubled: one sigmoid over all gates gives sigmoid(2 g),
            # and tanh(g) = 2 sigmoid(2 g) - 1 (numpy's tanh is several times slower)
            scale = np.ones((4 * k, 1), dtype=np.float32)
            scale[2 * k:3 * k] = 2.0
            self.lstm = ((w["backbone.lstm.weight_ih"] * scale).T.copy(),
                         (w["backbone.lstm.weight_hh"] * scale).T.copy(),
                         (w["backbone.lstm.bias_ih"] + w["backbone.lstm.bias_hh"]) * scale[:, 0])
        self.node_head = (w["node_head.net.weight"].T.copy(), w["node_head.net.bias"])
        self.page_type_head = self.page_type_readout = None
        if config.num_page_types:
            self.page_type_readout = self._pooled_readout(w)
            self.page_type_head = w["page_type_head.weight"]
            head = self.page_type_head  # the class centres as unit vectors (Li-ArcFace)
            self._page_type_unit = head / np.maximum(np.linalg.norm(head, axis=1, keepdims=True),
                                                     1e-12)
        self.role_head = self._role_head(w) if config.num_roles else None

    # -- loading ----------------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike,
                        expected_encoder: str | None = None,
                        expected_feature_version: str | None = None,
                        expected_input_blocks: list[tuple[str, int]] | None = None,
                        verify_checksum: bool = True, threads: int | None = 1,
                        onnx: bool = True) -> "NumpyModel":
        """Load a directory written by ``GrownUpModel.save_pretrained``, with the checks of
        ``GrownUpModel.from_pretrained`` (config, featurizer match, checksum, tensors).
        ``onnx``: run the backbone with ONNX Runtime where the directory has its graph
        (``backbone.onnx``) and ``onnxruntime`` is installed, on ``threads`` threads."""
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        directory = Path(directory)
        config, doc, weights = open_model(directory, expected_encoder,
                                          expected_feature_version, expected_input_blocks,
                                          verify_checksum)
        digest = doc.get("weights_sha256")
        if not supports(config):
            raise ModelLoadError(f"{directory}: the numpy runtime does not run this model "
                                 "(Transformer blocks or node context): load it with torch")
        # before any tensor is read: the shapes the config implies are those of the header
        # (by the names saved files give the tensors: ``config.saved_tensor_name``)
        check_tensors(weights, {saved_tensor_name(name): shape
                                for name, shape in expected_shapes(config).items()},
                      header_shapes(weights))
        try:
            tensors = {model_tensor_name(name): t for name, t in load_file(str(weights)).items()}
        except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
            raise ModelLoadError(f"{weights}: unreadable safetensors file ({exc})") from exc
        model = cls(config, tensors)
        if onnx:
            model._load_onnx(directory / ONNX_NAME, digest or "", threads)
        return model

    def _load_onnx(self, path: Path, digest: str, threads: int | None) -> None:
        """Run the backbone with ONNX Runtime where the model has a graph of these weights and
        ``onnxruntime`` is installed; otherwise (said at debug level) numpy runs it."""
        if not path.is_file():
            return
        try:
            import onnxruntime
        except ImportError:
            logger.debug("%s: onnxruntime is not installed; the backbone runs on numpy", path)
            return
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or 0
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            session = onnxruntime.InferenceSession(str(path), options,
                                                   providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - a broken graph file: numpy serves instead
            logger.warning("%s: unreadable ONNX graph (%s); the backbone runs on numpy",
                           path, str(exc).splitlines()[0][:200])
            return
        recorded = session.get_modelmeta().custom_metadata_map.get("weights_sha256", "")
        if recorded != digest:
            logger.warning("%s was exported from other weights than %s; the backbone runs on "
                           "numpy (grownup lab export-onnx writes a new one)", path, WEIGHTS_NAME)
            return
        self._session = session
        self._onnx_inputs = [i.name for i in session.get_inputs()]
        self.backend = "onnxruntime"

    def _pooled_readout(self, w: dict[str, np.ndarray]) -> dict[str, Any]:
        var = w["page_type_readout.norm.running_var"]
        return {"mean": w["page_type_readout.norm.running_mean"],
                "scale": 1.0 / np.sqrt(var + BATCH_NORM_EPS),
                "lin": (w["page_type_readout.net.1.weight"].T.copy(),
                        w["page_type_readout.net.1.bias"]),
                "norm": (w["page_type_readout.net.2.weight"], w["page_type_readout.net.2.bias"]),
                "length_column": text_length_column()}

    def _role_head(self, w: dict[str, np.ndarray]) -> dict[str, Any]:
        """The context role head with its batch norm folded into the first layer, split by
        input part (``heads.ContextRoleHead.infer``)."""
        widths = dict(self.config.input_blocks)
        parts = (self.config.hidden_size, 1, widths["x_text"], widths["x_class"],
                 widths["x_id"], widths["x_struct"], widths["x_class"])
        scale = 1.0 / np.sqrt(w["role_head.norm.running_var"] + BATCH_NORM_EPS)
        weight = w["role_head.net.1.weight"] * scale
        bias = w["role_head.net.1.bias"] - weight @ w["role_head.norm.running_mean"]
        split = np.split(weight, np.cumsum(parts)[:-1], axis=1)
        return {"bias": bias, "parts": [s.T.copy() for s in split],
                "last": (w["role_head.net.4.weight"].T.copy(), w["role_head.net.4.bias"])}

    # -- forward ----------------------------------------------------------------------------------
    def predict(self, arrays: dict[str, np.ndarray], page_types: bool = True) -> list[dict]:
        """Per page of the batch: ``content`` [n], ``roles`` [n, R] or None, ``page_type`` [G]
        or None, ``page_type_inputs`` [D] or None (as ``extractor.node_probabilities``).
        ``page_types=False``: ``page_type`` None, the head's pooled inputs only, for a caller
        whose page-type classifier replaces the head's probabilities."""
        tree = _Tree(arrays["parent"], arrays["ptr"])
        if self._session is not None:
            logits, nodes = self._session.run(None, {name: arrays[name]
                                                     for name in self._onnx_inputs})
        else:
            nodes = self.backbone(arrays, tree)
            logits = (nodes @ self.node_head[0])[:, 0] + self.node_head[1][0]
        content = _sigmoid(logits.astype(np.float32))
        roles = self.roles(arrays, nodes, content, tree) if self.role_head is not None else None
        page_type = inputs = None
        if self.page_type_readout is not None:
            inputs = self.page_type_inputs(arrays, nodes, content, tree)
            page_type = self.page_type_probabilities(inputs) if page_types else None
        ptr = tree.ptr.tolist()
        return [{"content": content[a:b],
                 "roles": roles[a:b] if roles is not None else None,
                 "page_type": page_type[j] if page_type is not None else None,
                 "page_type_inputs": inputs[j] if inputs is not None else None}
                for j, (a, b) in enumerate(zip(ptr[:-1], ptr[1:]))]

    def backbone(self, arrays: dict[str, np.ndarray], tree: _Tree) -> np.ndarray:
        """``[N, K]`` node features (the readout over pages is the heads' business here)."""
        prelim = list(self.prelim)
        if prelim and prelim[0].residual is not None:
            x = self._first_block(prelim.pop(0), arrays)
        else:
            x = self._dense_inputs(arrays)
        for block in prelim:
            x = block(x)
        state = None
        for conv, linear in self.layers:
            x = linear(conv(x, tree))
            if self.lstm is not None:
                state = self._lstm_step(x, state)
                x = state[0]
        return x

    def _block(self, arrays: dict[str, np.ndarray], name: str) -> tuple[np.ndarray, Any]:
        """``(table, index)`` of a text block (index None: a dense block)."""
        if name + "_table" in arrays:
            return arrays[name + "_table"], arrays[name + "_index"]
        if name not in arrays:
            raise ValueError(f"input block {name!r} is missing from the batch; the model "
                             f"expects blocks {self.config.input_blocks}")
        return arrays[name], None

    def _dense_inputs(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        parts = []
        for name, _ in self.config.input_blocks:
            table, index = self._block(arrays, name)
            parts.append(table if index is None else table[index])
        return np.concatenate([p.astype(np.float32, copy=False) for p in parts], axis=1)

    def _first_block(self, block: _Block, arrays: dict[str, np.ndarray]) -> np.ndarray:
        """The first prelim block, projecting each distinct string once and gathering."""
        out = block.lin[0].shape[0]
        weight = np.concatenate([block.lin[0], block.residual[0]])
        bias = np.concatenate([block.lin[1], block.residual[1]])
        n = len(arrays["parent"])
        y = np.broadcast_to(bias, (n, len(bias))).copy()
        start = 0
        for name, size in self.config.input_blocks:
            table, index = self._block(arrays, name)
            if table.shape[1] != size or (index is not None and index.shape != (n,)) \
                    or (index is None and table.shape[0] != n):
                raise ValueError(f"input block {name!r} has shape {table.shape}, the model "
                                 f"expects width {size} for {n} nodes")
            w = weight[:, start:start + size].T
            start += size
            projected = table.astype(np.float32, copy=False) @ w
            y += projected if index is None else projected[index]
        residual = _layer_norm(y[:, out:], block.residual[2], block.residual[3])
        return block.finish(y[:, :out].copy(), residual)

    def _lstm_step(self, x: np.ndarray, state):
        """One ``LSTMCell`` step (``state`` None: zeros, whose recurrent matmul is skipped)."""
        w_ih, w_hh, bias = self.lstm
        k = self.config.hidden_size
        gates = x @ w_ih
        gates += bias
        if state is not None:
            gates += state[0] @ w_hh
        gates = _sigmoid(gates)
        i, f, g, o = (gates[:, a * k:(a + 1) * k] for a in range(4))
        g = g * 2.0
        g -= 1.0
        c = i * g
        if state is not None:
            c += f * state[1]
        h = _sigmoid(c * 2.0)
        h *= 2.0
        h -= 1.0
        h *= o
        return h, c

    # -- heads ------------------------------------------------------------------------------------
    def page_type_inputs(self, arrays: dict[str, np.ndarray], nodes: np.ndarray,
                         content: np.ndarray, tree: _Tree) -> np.ndarray:
        """``[B, D]`` content-pooled page features (``heads.ContentPooledReadout.pool``), then
        the page signals."""
        readout = self.page_type_readout
        starts, ends = tree.ptr[:-1], tree.ptr[1:]
        struct = arrays["x_struct"].astype(np.float32, copy=False)
        length = struct[:, readout["length_column"]] * 8.0
        has_text = np.flatnonzero(length > 0)
        table, index = self._block(arrays, "x_text")
        text_rows = (np.take(table, index[has_text], axis=0) if index is not None
                     else table[has_text]).astype(np.float32, copy=False)
        # the pages' ranges among the rows with text (``has_text`` is ascending)
        text_starts, text_ends = np.searchsorted(has_text, starts), np.searchsorted(has_text, ends)
        is_content = (content > 0.5).astype(np.float32)
        count = np.maximum(tree.sizes, 1).astype(np.float32)
        # The weighted sums over a page's nodes in one ``_range_sums``, those over its text rows
        # in another: a column's sum does not depend on the columns beside it (``reduceat``
        # sums each column on its own), so these are the sums of separate weighted means.
        # Unweighted means divide by the node count (float32 ones would sum to it exactly).
        k, d = nodes.shape[1], struct.shape[1]
        weighted = np.empty((len(nodes), k + d + 3), dtype=np.float32)
        np.multiply(nodes, content[:, None], out=weighted[:, :k])
        np.multiply(struct, content[:, None], out=weighted[:, k:k + d])
        weighted[:, -3] = content
        weighted[:, -2] = is_content
        np.multiply(np.expm1(length), is_content, out=weighted[:, -1])
        sums = _range_sums(weighted, starts, ends)
        content_sum = sums[:, -3]
        text_content = length[has_text] * content[has_text]
        text_other = length[has_text] - text_content
        w = text_rows.shape[1]
        text_parts = np.empty((len(has_text), 2 * w + 2), dtype=np.float32)
        np.multiply(text_rows, text_content[:, None], out=text_parts[:, :w])
        np.multiply(text_rows, text_other[:, None], out=text_parts[:, w:2 * w])
        text_parts[:, -2] = text_content
        text_parts[:, -1] = text_other
        text_sums = _range_sums(text_parts, text_starts, text_ends)
        nodes_norm = np.maximum((ends - starts).astype(np.float32), 1e-6)[:, None]
        content_norm = np.maximum(content_sum, 1e-6)[:, None]
        scalars = np.stack([
            np.log(count),
            content_sum / nodes_norm[:, 0],
            sums[:, -2] / nodes_norm[:, 0],
            np.log1p(sums[:, -1]),
        ], axis=1)
        pooled = [
            _range_sums(nodes, starts, ends) / nodes_norm,
            sums[:, :k] / content_norm,
            np.maximum.reduceat(nodes, starts, axis=0),
            text_sums[:, :w] / np.maximum(text_sums[:, -2], 1e-6)[:, None],
            text_sums[:, w:2 * w] / np.maximum(text_sums[:, -1], 1e-6)[:, None],
            _range_sums(struct, starts, ends) / nodes_norm,
            sums[:, k:k + d] / content_norm,
            scalars,
        ]
        num_pages = len(starts)
        if self.config.page_type_signals:
            pooled.append(self._signals(arrays, num_pages))
        return np.concatenate(pooled, axis=1).astype(np.float32)

    def _signals(self, arrays: dict[str, np.ndarray], num_pages: int) -> np.ndarray:
        signals = arrays.get("x_signals")
        if signals is None:
            raise ValueError("this page-type head reads page signals: the batch needs "
                             "x_signals (Featurizer.batch_arrays with signals=True)")
        if len(signals) != num_pages:
            raise ValueError(f"x_signals has {len(signals)} rows for {num_pages} pages")
        return signals.astype(np.float32, copy=False)

    def page_type_probabilities(self, inputs: np.ndarray) -> np.ndarray:
        """``[B, G]`` page-type probabilities: softmax of the Li-ArcFace logits."""
        readout = self.page_type_readout
        x = (inputs - readout["mean"]) * readout["scale"]
        x = _relu(_layer_norm(x @ readout["lin"][0] + readout["lin"][1], *readout["norm"]))
        f = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        cos = np.clip(f @ self._page_type_unit.T, -1.0 + 1e-6, 1.0 - 1e-6)
        logits = self.config.arcface_scale * (math.pi - 2.0 * np.arccos(cos)) / math.pi
        return _softmax(logits.astype(np.float32))

    def roles(self, arrays: dict[str, np.ndarray], nodes: np.ndarray, content: np.ndarray,
              tree: _Tree) -> np.ndarray:
        """``[N, R]`` block-role probabilities (``heads.ContextRoleHead.infer``)."""
        head = self.role_head
        w_nodes, w_content, w_text, w_class, w_id, w_struct, w_anc = head["parts"]

        def project(name: str, w: np.ndarray) -> np.ndarray:
            table, index = self._block(arrays, name)
            out = table.astype(np.float32, copy=False) @ w
            return out if index is None else np.take(out, index, axis=0)

        hidden = nodes @ w_nodes
        hidden += head["bias"]
        hidden += content[:, None] * w_content[0]
        text = project("x_text", w_text)  # text + class + id, summed in place in that order
        text += project("x_class", w_class)
        text += project("x_id", w_id)
        hidden += text
        hidden += arrays["x_struct"].astype(np.float32, copy=False) @ w_struct
        attrs = project("x_class", w_anc)
        attrs += project("x_id", w_anc)
        hidden += self._ancestor_sum(attrs, tree)
        logits = _relu(hidden) @ head["last"][0] + head["last"][1]
        return _softmax(logits)

    @staticmethod
    def _ancestor_sum(values: np.ndarray, tree: _Tree, decay: float = 0.7) -> np.ndarray:
        """``a(v) = values(parent(v)) + decay * a(parent(v))`` (0 at roots), level by level."""
        out = np.zeros_like(values)
        if not len(tree.child):
            return out
        depth = tree.depth()
        # the nodes level by level (a depth is below the node count: 16 bits sort by radix)
        key = depth.astype(np.int16) if len(depth) < 2 ** 15 else depth
        order = np.argsort(key, kind="stable")
        counts = np.bincount(depth).tolist()
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        # ``out`` in level order: a level's rows are a slice, their parents' rows lie above it
        roots = counts[0]
        up = tree.parent[order[roots:]]
        up_rank = rank[up]
        from_parent = np.take(values, up, axis=0)  # (faster than values[up], the same rows)
        start = roots
        for count in counts[1:]:
            level = slice(start - roots, start - roots + count)
            row = out[start:start + count]
            np.multiply(np.take(out, up_rank[level], axis=0), decay, out=row)
            row += from_parent[level]
            start += count
        return np.take(out, rank, axis=0)


__all__ = ["NumpyModel", "supports"]
