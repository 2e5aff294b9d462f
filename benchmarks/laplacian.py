"""Laplacian positions per page: ours vs sparse shift-invert ARPACK, one core; one JSON line.

    python benchmarks/laplacian.py [--pages N]

Also reports how often ARPACK's answer differs from ours (it drops copies of repeated
eigenvalues, which DOM trees are full of).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from _common import dragnet_test_pages, pin_single_core

pin_single_core()


def arpack_positions(parent: np.ndarray, k: int = 32) -> np.ndarray:
    import scipy.sparse as sp
    from scipy.sparse.linalg import eigsh

    n = len(parent)
    child = np.nonzero(parent >= 0)[0]
    rows = np.concatenate([child, parent[child]])
    cols = np.concatenate([parent[child], child])
    adj = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    dinv = sp.diags(1.0 / np.sqrt(np.asarray(adj.sum(axis=1)).ravel()))
    lap = (sp.identity(n) - dinv @ adj @ dinv).tocsc()
    vals, _ = eigsh(lap, k=k + 1, sigma=-1e-3, which="LM")
    return np.sort(vals)[1:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=None)
    args = parser.parse_args()
    from scrapy_grownup.page.dom import parse_page
    from scrapy_grownup.graph.laplacian import laplacian_positions

    parents = [parse_page(body, positions=False).parent for _, body in
               dragnet_test_pages(args.pages)]
    parents = [p for p in parents if len(p) > 40]
    ours, theirs, differ = [], [], 0
    for parent in parents:
        start = time.perf_counter()
        vectors = laplacian_positions(parent)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        arpack_vals = arpack_positions(parent)
        theirs.append(time.perf_counter() - start)
        # Our eigenvalues from the Rayleigh quotients of our (verified) vectors.
        n = len(parent)
        child = np.nonzero(parent >= 0)[0]
        deg = np.bincount(np.concatenate([child, parent[child]]), minlength=n).astype(float)
        v = vectors.astype(np.float64) / np.sqrt(deg)[:, None]
        diff = v[child] - v[parent[child]]
        ours_vals = (diff ** 2).sum(0) / (deg[:, None] * v ** 2).sum(0)
        differ += not np.allclose(np.sort(ours_vals), arpack_vals, atol=1e-4)
    ms = lambda xs: {"mean": round(1e3 * float(np.mean(xs)), 2),  # noqa: E731
                     "p95": round(1e3 * float(np.percentile(xs, 95)), 2)}
    print(json.dumps({"benchmark": "laplacian", "pages": len(parents),
                      "mean_nodes": round(float(np.mean([len(p) for p in parents])), 1),
                      "ours_ms": ms(ours), "arpack_shift_invert_ms": ms(theirs),
                      "pages_where_arpack_eigenvalues_differ": differ}))


if __name__ == "__main__":
    main()
