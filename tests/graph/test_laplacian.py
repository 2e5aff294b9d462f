"""Laplacian positions against dense ``numpy.linalg.eigh`` on small hand-made trees."""

import numpy as np
import pytest

import scrapy_grownup.graph.laplacian as lap
from scrapy_grownup.graph.laplacian import laplacian_positions

K = 32


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """The dense references are small: multi-threaded BLAS only slows them down."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(1):
        yield


# ---- trees, all returned as parent arrays in pre-order -------------------------------------


def from_children(children: dict[int, list[int]]) -> np.ndarray:
    """Relabel a tree given as child lists (root 0) into pre-order."""
    out, stack = [], [(0, -1)]
    while stack:
        v, p = stack.pop()
        me = len(out)
        out.append(p)
        stack.extend((c, me) for c in reversed(children.get(v, [])))
    return np.array(out, dtype=np.int32)


def path(n):
    return np.r_[-1, np.arange(n - 1)].astype(np.int32)


def star(n):
    return np.r_[-1, np.zeros(n - 1)].astype(np.int32)


def binary(depth):
    children, count = {}, 1
    frontier = [0]
    for _ in range(depth):
        nxt = []
        for v in frontier:
            children[v] = [count, count + 1]
            nxt += [count, count + 1]
            count += 2
        frontier = nxt
    return from_children(children)


def random_tree(n, seed):
    rng = np.random.default_rng(seed)
    children = {}
    for i in range(1, n):
        children.setdefault(int(rng.integers(0, i)), []).append(i)
    return from_children(children)


def with_copies(sub, r, extra=None):
    """A root holding ``r`` copies of the tree ``sub`` (and then ``extra``): a repeated list."""
    out = [-1]
    for part in [sub] * r + ([extra] if extra is not None else []):
        off = len(out)
        out += [0 if q < 0 else q + off for q in part]
    return np.array(out, dtype=np.int32)


# ---- the reference --------------------------------------------------------------------------


def laplacian(parent):
    n = len(parent)
    a = np.zeros((n, n))
    c = np.arange(1, n)
    a[c, parent[c]] = a[parent[c], c] = 1.0
    s = 1.0 / np.sqrt(a.sum(axis=1))
    return np.eye(n) - s[:, None] * a * s[None, :]


def dense(parent):
    """Eigenvalues and eigenvectors 1..m (skipping the trivial one) from numpy."""
    lam, vec = np.linalg.eigh(laplacian(parent))
    m = min(K, len(parent) - 1)
    return lam, vec[:, 1 : m + 1]


def sign_convention(v):
    """Largest |entry| positive; entries within 1e-6 of the largest tie, lowest index wins."""
    a = np.abs(v)
    lead = np.argmax(a >= a.max(axis=0) * (1 - 1e-6), axis=0)
    return v * np.where(v[lead, np.arange(v.shape[1])] < 0, -1.0, 1.0)


def matches(x, ref, atol=1e-5):
    """Same vectors as ``ref`` once both follow the sign convention."""
    return x.shape == ref.shape and np.allclose(sign_convention(x), sign_convention(ref), atol=atol)


def assert_eigenpairs(parent, x):
    """Orthonormal columns, each an eigenvector, eigenvalues ascending and equal to numpy's."""
    n = len(parent)
    m = min(K, n - 1)
    assert x.shape == (n, K) and x.dtype == np.float32
    assert np.all(x[:, m:] == 0)
    v = x[:, :m].astype(np.float64)
    np.testing.assert_allclose(v.T @ v, np.eye(m), atol=1e-5)
    lap_v = laplacian(parent) @ v
    lam = np.einsum("ij,ij->j", v, lap_v)
    np.testing.assert_allclose(lap_v, v * lam, atol=1e-5)
    assert np.all(np.diff(lam) >= -1e-6)
    ref_lam, _ = dense(parent)
    np.testing.assert_allclose(lam, ref_lam[1 : m + 1], atol=1e-6)
    return lam


# ---- tests ----------------------------------------------------------------------------------

DISTINCT = {
    "path40": path(40),
    "path300": path(300),
    "random150": random_tree(150, seed=1),
    "random400": random_tree(400, seed=3),
    "broom": np.r_[path(120), np.full(5, 119)].astype(np.int32),  # 5 leaf twins at the end
}


@pytest.mark.parametrize("name", sorted(DISTINCT))
def test_matches_dense_when_eigenvalues_are_distinct(name):
    parent = DISTINCT[name]
    lam, ref = dense(parent)
    m = ref.shape[1]
    assert np.diff(lam[: m + 2]).min() > 1e-5  # the comparison below is meaningful
    x = laplacian_positions(parent, K)
    assert_eigenpairs(parent, x)
    assert matches(x[:, :m], ref)
    # ... and would fail for a wrong answer: swapped columns, or another tree's vectors.
    assert not matches(x[:, :m][:, [1, 0] + list(range(2, m))], ref)
    other = parent.copy()  # the last leaf moved
    other[-1] = len(parent) - 2 if parent[-1] != len(parent) - 2 else 0
    assert not matches(laplacian_positions(other, K)[:, :m], ref)


@pytest.mark.parametrize(
    "parent",
    [star(10), star(200), binary(4), binary(7), with_copies(path(3), 40),
     with_copies(random_tree(30, seed=4), 6, extra=path(9)),
     with_copies(with_copies(binary(2), 4, extra=path(5)), 5, extra=random_tree(40, seed=5))],
    ids=["star10", "star200", "binary4", "binary7", "list_of_40", "six_copies", "nested"],
)
def test_degenerate_spectra_give_an_orthonormal_eigenbasis(parent):
    """Repeated subtrees repeat eigenvalues: any orthonormal basis of each eigenspace will do,
    but it must be one of the right eigenspaces (the span matches numpy's)."""
    x = laplacian_positions(parent, K)
    lam = assert_eigenpairs(parent, x)
    ref_lam, ref_vec = np.linalg.eigh(laplacian(parent))
    m = len(lam)
    for j in range(m):
        same = np.abs(ref_lam - lam[j]) < 1e-6
        proj = ref_vec[:, same] @ (ref_vec[:, same].T @ x[:, j])
        np.testing.assert_allclose(proj, x[:, j], atol=1e-5)


@pytest.mark.parametrize("settings", [
    dict(_DENSE_TREE=10**9),  # plain dense eigh of L
    dict(_HALF_FULL=0),  # bipartite half with a subset eigh
    dict(_HALF_MAX=5),  # ARPACK on the O(n) exact inverse (the path for big quotients)
    dict(_SMALL=0),  # no batching of the small repeated-subtree problems
], ids=["dense", "subset", "sparse", "unbatched"])
def test_every_solver_path_agrees(monkeypatch, settings):
    for name, value in settings.items():
        monkeypatch.setattr(lap, name, value)
    real, sparse_calls = lap._sparse_tree_eigs, []
    monkeypatch.setattr(lap, "_sparse_tree_eigs", lambda *a: sparse_calls.append(1) or real(*a))
    for parent in [random_tree(200, seed=6), with_copies(random_tree(60, seed=7), 3, path(20))]:
        assert_eigenpairs(parent, laplacian_positions(parent, K))
    parent = DISTINCT["random150"]
    assert matches(laplacian_positions(parent, K), dense(parent)[1])
    assert bool(sparse_calls) == ("_HALF_MAX" in settings)


def test_sparse_path_recovers_copies_missed_by_lanczos(monkeypatch):
    """Force the completeness check to fail once: the rerun in the complement must give back
    the same (complete) set of eigenpairs."""
    parent = with_copies(random_tree(120, seed=8), 3)
    n = len(parent)
    deg = np.bincount(parent[1:], minlength=n) + np.r_[0, np.ones(n - 1)]
    off = np.r_[0.0, -1.0 / np.sqrt(deg[1:] * deg[parent[1:]])]
    real, calls = lap._count_below, []

    def count_below(*args):
        calls.append(args)
        return -1 if len(calls) == 1 else real(*args)

    monkeypatch.setattr(lap, "_count_below", count_below)
    depth = np.zeros(n, int)
    for i in range(1, n):
        depth[i] = depth[parent[i]] + 1
    lam, vec = lap._sparse_tree_eigs(parent, off, depth & 1, K + 1, np.sqrt(deg), 0.0)
    assert len(calls) == 2
    ref = np.linalg.eigvalsh(laplacian(parent))
    np.testing.assert_allclose(lam, ref[: K + 1], atol=1e-10)
    np.testing.assert_allclose(vec.T @ vec, np.eye(K + 1), atol=1e-10)
    np.testing.assert_allclose(laplacian(parent) @ vec, vec * lam, atol=1e-10)


def test_failed_verification_falls_back_to_the_unreduced_tree(monkeypatch):
    parent = with_copies(random_tree(50, seed=9), 4)
    monkeypatch.setattr(lap, "_reduced", lambda p, *a: (np.zeros(K), np.ones((len(p), K))))
    assert_eigenpairs(parent, laplacian_positions(parent, K))


def test_sign_convention_is_deterministic():
    parent = DISTINCT["random400"]
    x = laplacian_positions(parent, K)
    assert np.array_equal(x, laplacian_positions(parent.copy(), K))
    a = np.abs(x)
    lead = np.argmax(a >= a.max(axis=0) * (1 - 1e-6), axis=0)
    assert np.all(x[lead, np.arange(K)] > 0)
    _, ref = dense(parent)
    assert np.array_equal(sign_convention(-ref), sign_convention(ref))  # a flip is normalised away
    assert np.allclose(x, sign_convention(ref), atol=1e-5)  # so the output needs no flips
    # Two mirrored arms: the Fiedler vector is +a / -a on mirrored nodes, an exact tie in
    # magnitude; the lowest index takes the positive sign.
    y = laplacian_positions(with_copies(path(4), 2), K)[:, 0]
    lead = int(np.argmax(np.abs(y) >= np.abs(y).max() * (1 - 1e-6)))
    assert 1 <= lead <= 4 and y[lead] > 0 and np.isclose(y[lead + 4], -y[lead])


def test_tiny_trees_and_zero_padding():
    one = laplacian_positions(np.array([-1], np.int32), K)
    assert one.dtype == np.float32 and np.array_equal(one, np.zeros((1, K)))
    two = laplacian_positions(np.array([-1, 0], np.int32), K)
    assert two.shape == (2, K) and two.dtype == np.float32
    np.testing.assert_allclose(two[:, 0], [np.sqrt(0.5), -np.sqrt(0.5)], rtol=1e-6)
    assert np.all(two[:, 1:] == 0)
    for parent in [path(3), star(5), path(10), binary(3), path(33), path(34)]:
        assert_eigenpairs(parent, laplacian_positions(parent, K))
    assert laplacian_positions(path(10), 4).shape == (10, 4)


def test_non_preorder_labels_and_bad_input():
    parent = random_tree(120, seed=11)
    depth = np.zeros(len(parent), int)
    for i in range(1, len(parent)):
        depth[i] = depth[parent[i]] + 1
    order = np.argsort(depth, kind="stable")  # breadth-first labels: parent < child, not pre-order
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    bfs = np.r_[-1, rank[parent[order[1:]]]]
    assert np.array_equal(laplacian_positions(bfs, K)[rank], laplacian_positions(parent, K))
    for bad in ([0, 0], [-1, 1], [-1, 0, 3, 1], [-1, -1]):
        with pytest.raises(ValueError):
            laplacian_positions(np.array(bad), K)


def test_large_random_tree():
    parent = random_tree(5000, seed=12)
    x = laplacian_positions(parent, K)
    assert x.shape == (5000, K) and x.dtype == np.float32 and np.isfinite(x).all()
    v = x.astype(np.float64)
    np.testing.assert_allclose(v.T @ v, np.eye(K), atol=1e-5)
