"""Laplacian-eigenvector positions of a DOM tree (placeholder: sparse shift-invert)."""

from __future__ import annotations

import numpy as np


def laplacian_positions(parent: np.ndarray, k: int = 32) -> np.ndarray:
    """The ``k`` smallest non-trivial eigenvectors of the normalised tree Laplacian, [n, k]."""
    import scipy.sparse as sp
    from scipy.linalg import eigh

    n = len(parent)
    out = np.zeros((n, k), dtype=np.float32)
    if n < 3:
        return out
    child = np.nonzero(parent >= 0)[0]
    rows = np.concatenate([child, parent[child]])
    cols = np.concatenate([parent[child], child])
    adj = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    deg = np.asarray(adj.sum(axis=1)).ravel()
    dinv = 1.0 / np.sqrt(deg)
    lap = sp.identity(n) - sp.diags(dinv) @ adj @ sp.diags(dinv)
    m = min(k, n - 1)
    if n <= 300:
        vals, vecs = eigh(lap.toarray(), subset_by_index=[0, m])
    else:
        from scipy.sparse.linalg import eigsh
        vals, vecs = eigsh(lap.tocsc(), k=m + 1, sigma=-1e-3, which="LM")
        order = np.argsort(vals)
        vecs = vecs[:, order]
    vecs = vecs[:, 1 : m + 1]
    idx = np.argmax(np.abs(vecs), axis=0)
    signs = np.sign(vecs[idx, np.arange(vecs.shape[1])])
    out[:, :m] = vecs * signs
    return out
