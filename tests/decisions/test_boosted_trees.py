"""The numpy tree ensemble against scikit-learn's own predictions, and its arrays round trip."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_grownup.decisions.boosted_trees import BoostedTrees


def data(classes: int, rows: int = 400, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 6))
    # an interaction (x1 * x2) and a threshold (x0), spread over ``classes`` classes
    y = (np.digitize(X[:, 0] + 2 * (X[:, 1] * X[:, 2] > 0.2),
                     np.quantile(X[:, 0], np.linspace(0, 1, classes + 1)[1:-1]) + 1)
         % classes).astype(int)
    return X, y


@pytest.mark.parametrize("classes", [2, 3, 5])
def test_the_raw_scores_are_scikit_learns(classes):
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y = data(classes)
    assert len(np.unique(y)) == classes
    model = HistGradientBoostingClassifier(max_iter=30, max_leaf_nodes=7,
                                           early_stopping=False, random_state=0).fit(X, y)
    trees = BoostedTrees.from_sklearn(model)
    fresh = np.random.default_rng(1).normal(size=(300, 6))
    outputs = 1 if classes == 2 else classes
    assert trees.num_outputs == outputs and trees.num_trees == 30 * outputs
    raw = trees.raw(fresh)
    theirs = model.decision_function(fresh).reshape(len(fresh), -1)
    np.testing.assert_allclose(raw, theirs, rtol=1e-6, atol=1e-6)
    probs = np.exp(raw - raw.max(1, keepdims=True))
    if classes > 2:
        np.testing.assert_allclose(probs / probs.sum(1, keepdims=True),
                                   model.predict_proba(fresh), atol=1e-6)
    again = BoostedTrees.from_arrays(trees.arrays("x_"), "x_")
    np.testing.assert_allclose(again.raw(fresh), raw, atol=1e-5)  # leaves kept as float32
    assert trees.raw(np.zeros((0, 6))).shape == (0, outputs)


def test_a_regressors_trees_and_a_file_without_outputs():
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, y = data(3)
    model = HistGradientBoostingRegressor(max_iter=20, early_stopping=False,
                                          random_state=0).fit(X, y.astype(float))
    trees = BoostedTrees.from_sklearn(model)
    np.testing.assert_allclose(trees.raw(X)[:, 0], model.predict(X), atol=1e-6)
    arrays = trees.arrays()
    del arrays["output"]  # a block rescorer's file: one output
    np.testing.assert_allclose(BoostedTrees.from_arrays(arrays).raw(X), trees.raw(X), atol=1e-5)
    with pytest.raises(ValueError, match="output column"):
        BoostedTrees(trees.feature, trees.threshold, trees.left, trees.right, trees.value,
                     trees.roots, trees.bias, trees.depth, np.full(trees.num_trees, 1))
