"""Gradient-boosted trees evaluated in numpy, so serving needs no scikit-learn.

``grownup lab fit-rescorer`` and ``grownup lab fit-page-type`` fit scikit-learn's
``HistGradientBoostingClassifier`` (``eval`` extra); ``BoostedTrees.from_sklearn`` flattens
its trees into node arrays, which ``raw`` walks for every row and tree at once, one tree level
per step.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BoostedTrees"]


class BoostedTrees:
    """An additive tree ensemble: ``raw(X)[:, k] = bias[k] + sum of the leaves reached in the
    trees of output k``.

    ``feature``/``threshold``/``left``/``right``/``value`` hold every tree's nodes one after
    another (a leaf points to itself on both sides, so walking ``depth`` levels always ends on
    a leaf); ``roots`` is each tree's first node and ``output`` the column it adds to (one
    column for a binary model, one per class for a multi-class one).
    """

    def __init__(self, feature, threshold, left, right, value, roots, bias, depth: int,
                 output=None):
        self.feature = np.asarray(feature, dtype=np.int64)
        self.threshold = np.asarray(threshold, dtype=np.float64)
        self.left = np.asarray(left, dtype=np.int64)
        self.right = np.asarray(right, dtype=np.int64)
        self.value = np.asarray(value, dtype=np.float64)
        self.roots = np.asarray(roots, dtype=np.int64)
        self.bias = np.atleast_1d(np.asarray(bias, dtype=np.float64))
        self.depth = int(depth)
        self.output = (np.zeros(len(self.roots), np.int64) if output is None
                       else np.asarray(output, dtype=np.int64))
        if len(self.output) != len(self.roots) or (len(self.output)
                                                   and self.output.max() >= len(self.bias)):
            raise ValueError("each tree needs an output column below len(bias)")
        # [trees, outputs] one-hot: a matrix product sums each output's leaves
        self._columns = np.zeros((len(self.roots), len(self.bias)))
        self._columns[np.arange(len(self.roots)), self.output] = 1.0
        # For float32 rows: each threshold rounded down to a float32, so that a float32 value
        # is at most it exactly when it is at most the float64 threshold.
        threshold32 = self.threshold.astype(np.float32)
        above = threshold32.astype(np.float64) > self.threshold
        threshold32[above] = np.nextafter(threshold32[above], np.float32(-np.inf))
        # ``raw`` walks node i as 2i: slot 2i holds node i's feature and threshold, and
        # ``_next[2i + (value <= threshold)]`` its right (2i) or left (2i + 1) child, as 2j.
        self._feature2 = np.repeat(self.feature, 2)
        self._threshold2 = np.repeat(self.threshold, 2)
        self._threshold2_32 = np.repeat(threshold32, 2)
        self._next = 2 * np.stack([self.right, self.left], axis=1).ravel()
        self._value2 = np.repeat(self.value, 2)

    @classmethod
    def from_sklearn(cls, model) -> "BoostedTrees":
        """From a fitted ``HistGradientBoostingClassifier`` or ``Regressor`` (numeric
        features, no missing values): one output for a binary classifier or a regressor,
        one per class (``model.classes_`` order) for a multi-class classifier."""
        feature, threshold, left, right, value, roots, output = [], [], [], [], [], [], []
        offset, depth = 0, 0
        for iteration in model._predictors:  # noqa: SLF001 - the fitted trees
            for column, tree in enumerate(iteration):
                nodes = tree.nodes
                k = len(nodes)
                leaf = nodes["is_leaf"].astype(bool)
                own = np.arange(offset, offset + k)
                roots.append(offset)
                output.append(column)
                feature.append(np.where(leaf, 0, nodes["feature_idx"]))
                threshold.append(np.where(leaf, np.inf, nodes["num_threshold"]))
                left.append(np.where(leaf, own, nodes["left"] + offset))
                right.append(np.where(leaf, own, nodes["right"] + offset))
                value.append(np.where(leaf, nodes["value"], 0.0))
                depth = max(depth, int(nodes["depth"].max()))
                offset += k
        return cls(np.concatenate(feature), np.concatenate(threshold), np.concatenate(left),
                   np.concatenate(right), np.concatenate(value), np.array(roots),
                   np.ravel(model._baseline_prediction), depth, np.array(output))

    @property
    def num_trees(self) -> int:
        return len(self.roots)

    @property
    def num_outputs(self) -> int:
        return len(self.bias)

    def raw(self, X: np.ndarray) -> np.ndarray:
        """``[rows, outputs]`` raw scores (log-odds, or softmax logits) of the rows of ``X``."""
        X = np.asarray(X)
        # float32 rows (the rescorer's) are compared in float32, to the rounded thresholds
        threshold = self._threshold2_32 if X.dtype == np.float32 else self._threshold2
        if X.dtype != np.float32:
            X = X.astype(np.float64, copy=False)
        if not len(X):
            return np.zeros((0, self.num_outputs))
        rows, width = X.shape
        flat = X.ravel()
        row = (np.arange(rows) * width)[:, None]  # flat indexing: 2x a 2-D gather
        node = np.tile(2 * self.roots, (rows, 1))  # each node i as 2i (``__init__``)
        feature, following = self._feature2, self._next
        for _ in range(self.depth):
            node = following.take(node + (flat.take(row + feature.take(node))
                                          <= threshold.take(node)))
        leaves = self._value2.take(node)
        if self.num_outputs == 1:
            return self.bias + leaves.sum(axis=1, keepdims=True)
        return self.bias + leaves @ self._columns

    def arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        """The ensemble as named arrays for ``np.savez`` (``prefix`` before each name)."""
        return {f"{prefix}feature": self.feature.astype(np.int16),
                f"{prefix}threshold": self.threshold,
                f"{prefix}left": self.left.astype(np.int32),
                f"{prefix}right": self.right.astype(np.int32),
                f"{prefix}value": self.value.astype(np.float32),
                f"{prefix}roots": self.roots.astype(np.int32),
                f"{prefix}bias": self.bias if len(self.bias) > 1 else self.bias[0],
                f"{prefix}depth": np.array(self.depth),
                f"{prefix}output": self.output.astype(np.int16)}

    @classmethod
    def from_arrays(cls, arrays, prefix: str = "") -> "BoostedTrees":
        """What ``arrays`` wrote (files without ``output`` hold a one-output ensemble)."""
        output = arrays[f"{prefix}output"] if f"{prefix}output" in arrays else None
        return cls(arrays[f"{prefix}feature"], arrays[f"{prefix}threshold"],
                   arrays[f"{prefix}left"], arrays[f"{prefix}right"], arrays[f"{prefix}value"],
                   arrays[f"{prefix}roots"], arrays[f"{prefix}bias"],
                   int(arrays[f"{prefix}depth"]), output)
