"""Laplacian-eigenvector positions of a DOM tree, exact and fast.

``laplacian_positions`` returns the ``k`` eigenvectors of L = I - D^-1/2 A D^-1/2 with the
smallest non-zero eigenvalues. DOM trees are full of repeated siblings (list items, table rows,
menus), which make the spectrum highly degenerate (clusters of 10+ equal eigenvalues among the
lowest 32 are common) and defeat Lanczos/ARPACK, which finds one vector per eigenspace. We use
that symmetry instead of fighting it; every step below is an exact identity, not an
approximation:

1. Ordered-shape hash of every subtree (a polynomial hash of its pre-order size sequence,
   vectorised with prefix sums). Siblings with equal hashes are copies of one shape ``S``.
2. Quotient. For a parent with ``r`` copies of ``S``, every eigenvector of L is either equal on
   all copies or sums to zero across them. The equal ones are the eigenvectors of a weighted
   "quotient" tree keeping one copy (edge weight scaled by sqrt(r)); applied recursively this
   shrinks the tree ~3x. The zero-sum ones are ``a (x) u``: ``a`` any zero-sum unit vector over
   the copies (we use the Helmert basis, so multiplicity r-1 per occurrence of the parent) and
   ``u`` an eigenvector of the principal submatrix of the quotient on one copy (a "Dirichlet"
   problem, shared by every group of the same shape). The union of these spectra is exactly the
   spectrum of L, with the multiplicities made explicit.
3. Each problem is a tree-shaped M = I + W, solved with dense LAPACK on half its size: a tree
   is bipartite, W = [[0, B], [B^T, 0]], so the smallest eigenvalues 1 - s of M come from the
   largest eigenvalues s^2 of B B^T over the smaller colour class. Real pages average ~700
   nodes but their quotients' halves only ~120. Quotients still too big for that (half > 250
   nodes, ~5% of pages) go to ARPACK on the exact inverse of M, applied in O(n) with prefix
   sums (a tree Laplacian is inverted by subtree sums then ancestor sums, both ranges in
   pre-order), with a Sylvester inertia count (an LDL^T eliminating leaves first: no fill-in)
   proving that no repeated eigenvalue lost a copy; if one did, ARPACK reruns in the complement.
4. Lift back to the tree, pick the k smallest, fix signs, and verify ``L v = lambda v`` on the
   result; any failure (e.g. a hash collision) reruns the solver on the unreduced tree.

Everything outside the small dense solves is O(n) vectorised numpy. Single-threaded, on
dragnet pages: ~2-4 ms per page on average (median ~2 ms, 8000-node pages ~30-60 ms), against
~17-21 ms for sparse shift-invert ARPACK on L (which also drops copies of repeated eigenvalues).
Results match dense ``eigh`` to float32 precision.

Sign convention: each column is flipped so that its entry of largest magnitude is positive,
where entries within a relative 1e-6 of that magnitude count as tied and the lowest node index
wins (so symmetric +/- pairs from repeated subtrees get a stable sign). Vectors of a degenerate
eigenvalue are one valid orthonormal basis of its eigenspace (deterministic for a given input).
"""

from __future__ import annotations

import contextlib

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

try:
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - then BLAS keeps its own thread count
    ThreadpoolController = None

_BASE = 0x9E3779B97F4A7C15  # odd, so invertible modulo 2**64
_BINV = pow(_BASE, -1, 1 << 64)
_DENSE_TREE = 48  # whole trees up to this many nodes: plain dense eigh of L
_SMALL = 24  # Dirichlet problems up to this size: batched eigh, padded to powers of 2
_HALF_FULL = 180  # bipartite half up to this size: full eigh is faster than a subset
_HALF_MAX = 250  # beyond: ARPACK on the O(n) inverse (measured crossover)
_SIGMA_MIN = 0.05  # bipartite trick only for eigenvalues <= 1 - this (accurate w = B^T u / s)
_BLAS = []  # the threadpoolctl controller, made on first use


def laplacian_positions(parent: np.ndarray, k: int = 32) -> np.ndarray:
    """The ``k`` smallest non-trivial eigenvectors of the normalised tree Laplacian, [n, k].

    ``parent`` is a tree in pre-order (``parent[0] == -1``, ``0 <= parent[i] < i``). Columns
    are orthonormal, in ascending eigenvalue order, zero-padded when ``n - 1 < k``.
    """
    parent = np.asarray(parent, dtype=np.int64).ravel()
    n = len(parent)
    out = np.zeros((n, k), dtype=np.float32)
    m = min(k, n - 1)
    if m <= 0:
        return out
    if parent[0] != -1 or np.any(parent[1:] < 0) or np.any(parent[1:] >= np.arange(1, n)):
        raise ValueError("parent must satisfy parent[0] == -1 and 0 <= parent[i] < i")
    end = _subtree_ends(parent)
    if end is None:  # not pre-order: relabel, solve, map back
        order = _preorder(parent)
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n)
        par = np.r_[-1, rank[parent[order[1:]]]]
        return laplacian_positions(par, k)[rank]
    deg = np.bincount(parent[1:], minlength=n).astype(np.float64)
    deg[1:] += 1.0
    with _one_blas_thread():
        vecs = None
        if n > _DENSE_TREE:
            lam, vecs = _reduced(parent, end, deg, m)
            if not _verified(parent, deg, lam, vecs):
                vecs = None
        if vecs is None:  # small tree, or reduction failed verification: solve L itself
            off = np.r_[0.0, -1.0 / np.sqrt(deg[1:] * deg[parent[1:]])]
            vecs = _tree_eigs(parent, off, _depth(end) & 1, m + 1, np.inf, np.sqrt(deg))[1][:, 1:]
    out[:, :m] = _fix_signs(vecs)
    return out


def _one_blas_thread():
    """Run BLAS/LAPACK single-threaded: the matrices here are small, and multi-threaded
    OpenBLAS on a busy machine made this ~30x slower (its threads spin-wait for cores)."""
    if not _BLAS:
        _BLAS.append(ThreadpoolController() if ThreadpoolController is not None else None)
    if _BLAS[0] is None:
        return contextlib.nullcontext()
    return _BLAS[0].limit(limits=1, user_api="blas")


def _reduced(parent, end, deg, m):
    """The m smallest non-trivial eigenpairs via the symmetry quotient (steps 1, 2 and 4)."""
    n = len(parent)
    idx = np.arange(n)
    size = end - idx
    # 1. hash of each subtree's size sequence: (P[end] - P[v]) * BASE^-v  (mod 2^64)
    with np.errstate(over="ignore"):
        pw, ipw = np.full(n, _BASE, np.uint64), np.full(n, _BINV, np.uint64)
        pw[0] = ipw[0] = 1
        pw, ipw = np.cumprod(pw), np.cumprod(ipw)
        pref = np.zeros(n + 1, np.uint64)
        np.cumsum(_mix(size.astype(np.uint64)) * pw, out=pref[1:])
        h = (pref[end] - pref[:n]) * ipw
    # 2. siblings with the same hash form a group; rep = first. Each node maps to the quotient
    # node at the same offset inside the representative copies: add (rep - self) of every
    # ancestor-or-self, a range-add over pre-order subtree ranges.
    ch = idx[1:]
    o = np.lexsort((h[ch], parent[ch]))
    sc = ch[o]
    new = np.r_[True, (parent[sc[1:]] != parent[sc[:-1]]) | (h[sc[1:]] != h[sc[:-1]])]
    first = sc[new][np.cumsum(new) - 1]
    delta = np.zeros(n)
    delta[sc] = first - sc
    shift = np.cumsum(np.r_[delta, 0.0] - np.bincount(end, weights=delta, minlength=n + 1))[:n]
    qrep = idx + shift.astype(np.int64)
    qnodes = np.flatnonzero(qrep == idx)
    nq = len(qnodes)
    qid = np.full(n, -1, np.int64)
    qid[qnodes] = np.arange(nq)
    qi = qid[qrep]  # quotient node of every tree node
    mult = np.bincount(qi, minlength=nq).astype(np.float64)  # tree nodes per quotient node
    qpar = np.r_[-1, qid[parent[qnodes[1:]]]]
    r = np.r_[1.0, mult[1:] / mult[qpar[1:]]]  # copies per group
    qdeg = deg[qnodes]
    qoff = np.r_[0.0, -np.sqrt(r[1:] / (qdeg[1:] * qdeg[qpar[1:]]))]
    qodd = _depth(end)[qnodes] & 1
    zq = np.sqrt(mult * qdeg)  # the trivial eigenvector, restricted to the quotient
    lamq, uq = _tree_eigs(qpar, qoff, qodd, m + 1, np.inf, zq)
    cut = lamq[m] if len(lamq) > m else np.inf
    nsym = len(lamq) - 1
    # candidates: eigenvalue, source problem (-1: the quotient), eigenvector, zero-sum mode
    lams, srcs, js, modes_ = [lamq[1:]], [np.full(nsym, -1)], [np.arange(1, nsym + 1)], [nsym * [0]]
    # Dirichlet problems: one per distinct shape that has repeated copies somewhere.
    reps = np.flatnonzero(r >= 2)
    qend = np.searchsorted(qnodes, end[qnodes])
    probs = []  # (Dirichlet eigenvectors kept, the group representatives of that shape)
    if len(reps):
        _, fi, inv = np.unique(h[qnodes[reps]], return_index=True, return_inverse=True)
        starts = reps[fi]
        sizes = qend[starts] - starts
        modes = np.bincount(inv, weights=mult[reps] - mult[qpar[reps]]).astype(np.int64)
        pow2 = 1 << (np.log2(sizes - 0.5).astype(int) + 1)  # smallest power of 2 >= size
        bucket = np.where(sizes <= _SMALL, np.minimum(pow2, _SMALL), sizes)
        for bs in np.unique(bucket):
            sel = np.flatnonzero(bucket == bs)
            if bs <= _SMALL:
                sols = _batched_eigs(starts[sel], sizes[sel], bs, qpar, qoff)
            else:
                s, sols = bs, []
                for a in starts[sel]:
                    lp = np.r_[-1, qpar[a + 1 : a + s] - a]
                    g = -qoff[a] * zq[a] * zq[qpar[a]]
                    sols.append(_tree_eigs(lp, np.r_[0.0, qoff[a + 1 : a + s]], qodd[a : a + s],
                                           min(m, s), cut, zq[a : a + s], g))
            for c, (lam, u) in zip(sel, sols):
                keep = lam <= min(cut, 2.5)  # (drops the padding of batched problems)
                if keep.any():
                    nk, cnt = int(keep.sum()), min(int(modes[c]), m)  # eigenvalues, copies
                    lams.append(np.repeat(lam[keep], cnt))
                    srcs.append(np.full(nk * cnt, len(probs)))
                    js.append(np.repeat(np.arange(nk), cnt))
                    modes_.append(np.tile(np.arange(cnt), nk))
                    probs.append((u[:, keep], reps[inv == c]))
    # 4. the m smallest over all problems, lifted back to the tree
    pick = np.argsort(np.concatenate(lams), kind="stable")[:m]
    lam = np.concatenate(lams)[pick]
    src, jj, mode = (np.concatenate(a)[pick] for a in (srcs, js, modes_))
    vecs = np.zeros((n, m))
    symm = src < 0
    vecs[:, symm] = (uq[:, jj[symm]] / np.sqrt(mult)[:, None])[qi]
    for col in np.flatnonzero(~symm):
        u, groups = probs[src[col]]
        _lift_mode(vecs[:, col], u[:, jj[col]], groups, mode[col], qnodes, qi, mult, size, r)
    return lam, vecs


def _lift_mode(x, u, groups, mode, qnodes, qi, mult, size, r):
    """Write the ``mode``-th zero-sum lift of Dirichlet vector ``u`` (over groups' copies)."""
    for g in groups:
        rr = int(r[g])
        copies = np.flatnonzero(qi == g)  # r consecutive copies per occurrence of the parent
        per = (len(copies) // rr) * (rr - 1)
        if mode >= per:
            mode -= per
            continue
        occ, j = divmod(mode, rr - 1)
        j += 1
        c0, s = qnodes[g], size[qnodes[g]]
        q = qi[c0 : c0 + s]
        tmpl = u[q - g] * np.sqrt(mult[g] / mult[q]) / np.sqrt(j * (j + 1.0))
        cs = copies[occ * rr : occ * rr + j + 1]
        for i, c in enumerate(cs):
            x[c : c + s] = tmpl * (-j if i == j else 1.0)
        return


def _tree_eigs(par, off, odd, want, cut, z, ground=0.0):
    """Smallest eigenpairs (at most ``want``, only eigenvalues <= cut) of M = I + W.

    W is symmetric with the sparsity of the tree ``par`` (pre-order), W[v, par[v]] = off[v];
    ``z`` and ``ground`` are as in ``_sparse_tree_eigs``.
    """
    s = len(par)
    want = min(want, s)
    ch = np.arange(1, s)
    odd = np.asarray(odd, bool)
    n_odd = int(odd.sum())
    half = min(n_odd, s - n_odd)
    if s > _DENSE_TREE and half <= _HALF_MAX:
        side = odd if n_odd <= s - n_odd else ~odd
        E, O = np.flatnonzero(side), np.flatnonzero(~side)
        pos = np.empty(s, np.int64)
        pos[E] = np.arange(len(E))
        pos[O] = np.arange(len(O))
        ce = side[ch]
        B = np.zeros((len(E), len(O)))
        B[pos[ch[ce]], pos[par[ch[ce]]]] = off[ch[ce]]
        B[pos[par[ch[~ce]]], pos[ch[~ce]]] = off[ch[~ce]]
        C = B @ B.T
        w2 = min(want, half)
        if half <= _HALF_FULL:
            mu, U = np.linalg.eigh(C)
            mu, U = mu[::-1][:w2], U[:, ::-1][:, :w2]
        else:
            mu, U = sla.eigh(C, subset_by_index=[half - w2, half - 1], driver="evr")
            mu, U = mu[::-1], U[:, ::-1]
        sig = np.sqrt(np.clip(mu, 0.0, None))
        lam = np.clip(1.0 - mu, 0.0, None) / (1.0 + sig)
        if cut < 1.0 - _SIGMA_MIN:
            need = int(np.sum(lam <= cut))
        else:
            need = want if w2 == want and sig[-1] >= _SIGMA_MIN else -1
        if need >= 0:
            V = np.empty((s, need))
            V[E] = U[:, :need] * np.sqrt(0.5)
            V[O] = (B.T @ U[:, :need]) * (-np.sqrt(0.5) / sig[:need])
            return lam[:need], V
    if s <= 2 * _HALF_MAX or want >= s - 1:
        M = np.eye(s)
        M[ch, par[ch]] = off[ch]
        M[par[ch], ch] = off[ch]
        if s <= 2 * _HALF_FULL:
            lam, V = np.linalg.eigh(M)
            return lam[:want], V[:, :want]
        return sla.eigh(M, subset_by_index=[0, want - 1], driver="evr")
    return _sparse_tree_eigs(par, off, odd, want, z, ground)


def _sparse_tree_eigs(par, off, odd, want, z, ground):
    """ARPACK on the exact inverse of M restricted to one colour class, applied in O(s).

    ``z`` > 0 has (M z)_v = 0 for v > 0, so Z M Z is a weighted tree Laplacian (plus ``ground``
    at the root; if 0, M is singular with kernel z and we use the pseudo-inverse): M x = b is
    solved by subtree sums then ancestor sums, both prefix sums over pre-order ranges. The block
    of M^+ on the smaller colour class E is (I - B B^T)^+, whose top eigenvectors u give those
    of M as (u, -B^T u / s) / sqrt(2), s = 1 - lambda: half-length Lanczos vectors. Lanczos
    finds one vector per eigenspace (extra copies only through rounding), so a Sylvester
    inertia count checks completeness, and a rerun in the complement finds any missing copy.
    """
    from scipy.sparse.linalg import ArpackError, LinearOperator, eigsh

    s, sing = len(par), ground <= 0
    end = _subtree_ends(par)
    w = np.r_[np.inf if sing else ground, -z[1:] * z[par[1:]] * off[1:]]
    zn = z / np.linalg.norm(z)
    side = odd.astype(bool) if 2 * odd.sum() <= s else ~odd.astype(bool)
    E, O = np.flatnonzero(side), np.flatnonzero(~side)
    ze = zn[E] / np.linalg.norm(zn[E])
    cs, full = np.zeros(s + 1), np.zeros(s)

    def op(u):
        u = u - basis @ (basis.T @ u)
        full[E] = u
        np.cumsum(z * full, out=cs[1:])
        t = (cs[end] - cs[:-1]) / w
        y = z * np.cumsum(t - np.bincount(end, weights=t, minlength=s + 1)[:s])
        if sing:
            y -= zn * (zn @ y)
        y = y[E]
        return y - basis @ (basis.T @ y)

    basis = ze[:, None] if sing else np.zeros((len(E), 0))
    lam, vecs = np.zeros(0), np.zeros((len(E), 0))
    A = LinearOperator((len(E), len(E)), matvec=op, dtype=np.float64)
    rng = np.random.default_rng(0)
    for attempt in range(4):
        kk = want - sing
        if kk >= len(E) - basis.shape[1]:  # eigenvalues >= 1 wanted: not on one colour class
            break
        try:
            th, U = eigsh(A, k=kk, which="LA", v0=rng.standard_normal(len(E)), tol=1e-11,
                          ncv=min(len(E) - basis.shape[1], max(2 * kk + 1, 40)), maxiter=100)
        except ArpackError:
            break
        inv = 1.0 / th  # = lambda (2 - lambda)
        lam = np.r_[lam, inv / (1.0 + np.sqrt(np.clip(1.0 - inv, 0.0, None)))]
        vecs = np.hstack([vecs, U])
        o = np.argsort(lam, kind="stable")[: want - sing]
        lam, vecs = lam[o], vecs[:, o]
        c = lam[-1] * (1.0 - 1e-8) - 1e-14  # any copy missed below the top one shows here
        done = _count_below(par, off, c) == int(np.sum(lam < c)) + sing
        if done or (attempt == 3 and s > 2000):  # (valid if maybe not smallest: never hang)
            if 1.0 - lam[-1] < _SIGMA_MIN:
                break
            ch = np.arange(1, s)
            pos = np.empty(s, np.int64)
            pos[E], pos[O] = np.arange(len(E)), np.arange(len(O))
            ce = side[ch]
            bt = sp.csr_matrix((off[ch], (pos[np.where(ce, par[ch], ch)],
                                          pos[np.where(ce, ch, par[ch])])), shape=(len(O), len(E)))
            V = np.empty((s, len(lam)))
            V[E] = vecs * np.sqrt(0.5)
            V[O] = (bt @ vecs) * (-np.sqrt(0.5) / (1.0 - lam))
            if sing:
                lam, V = np.r_[0.0, lam], np.hstack([zn[:, None], V])
            return lam, V
        basis = np.hstack([basis, U])  # rerun in the complement of what was found
    M = np.eye(s)
    M[np.arange(1, s), par[1:]] = M[par[1:], np.arange(1, s)] = off[1:]
    return sla.eigh(M, subset_by_index=[0, want - 1], driver="evr")


def _count_below(par, off, c):
    """Number of eigenvalues of M below c: negative pivots of an LDL^T taken leaves-first
    (reverse pre-order is a perfect elimination order for a tree, so no fill-in)."""
    from scipy.sparse.linalg import splu

    s = len(par)
    rev = s - 1 - np.arange(s)  # position of node v in the reversed order
    ch = np.arange(1, s)
    A = sp.csc_matrix((np.r_[np.full(s, 1.0 - c), off[ch], off[ch]],
                       (np.r_[rev, rev[ch], rev[par[ch]]], np.r_[rev, rev[par[ch]], rev[ch]])),
                      shape=(s, s))
    lu = splu(A, permc_spec="NATURAL", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
    if np.any(lu.perm_r != np.arange(s)):
        return -1
    return int(np.sum(lu.U.diagonal() < 0))


def _batched_eigs(starts, sizes, bs, qpar, qoff):
    """Full eigendecompositions of many small quotient subtrees at once, padded to ``bs``
    nodes; the padding is decoupled with eigenvalue 1e3."""
    nb = len(starts)
    M = np.zeros((nb, bs, bs))
    t = np.arange(bs)
    M[:, t, t] = np.where(t < sizes[:, None], 1.0, 1e3)
    if bs > 1:
        rows = starts[:, None] + t[1:]
        ok = t[1:] < sizes[:, None]
        rows = np.where(ok, rows, starts[:, None])
        bi, ci = np.nonzero(ok)
        lp = qpar[rows[bi, ci]] - starts[bi]
        M[bi, ci + 1, lp] = M[bi, lp, ci + 1] = qoff[rows[bi, ci]]
    lam, V = np.linalg.eigh(M)
    return list(zip(lam, V))


def _verified(parent, deg, lam, vecs, tol=1e-7):
    """Check L v = lambda v for all columns at once, on one generic combination of them (square
    roots of distinct integers: a wrong column cannot cancel out); guards the hash reduction."""
    g = np.sqrt(np.arange(2.0, vecs.shape[1] + 2.0))
    x = vecs @ g
    y = x / np.sqrt(deg)
    ay = np.bincount(parent[1:], weights=y[1:], minlength=len(y))  # A y: the children ...
    ay[1:] += y[parent[1:]]  # ... and the parent
    res = x - ay / np.sqrt(deg) - vecs @ (lam * g)
    return bool(np.isfinite(res).all() and np.abs(res).max() <= tol * np.abs(g).max())


def _fix_signs(vecs):
    a = np.abs(vecs)
    lead = np.argmax(a >= a.max(axis=0) * (1.0 - 1e-6), axis=0)
    sgn = np.where(vecs[lead, np.arange(vecs.shape[1])] < 0, -1.0, 1.0)
    return vecs * sgn


def _mix(x):
    """splitmix64 finaliser (uint64 arithmetic wraps)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _subtree_ends(parent):
    """end[v] such that v's subtree is the range [v, end[v]), or None if not in pre-order.

    The last node of a subtree is found by following last-child pointers (pointer doubling);
    the ranges are then checked to nest and to hold 1 + the children's sizes, which holds
    exactly when the labels are a pre-order.
    """
    n = len(parent)
    last = np.arange(n)
    np.maximum.at(last, parent[1:], np.arange(1, n))
    while True:
        nxt = last[last]
        if np.array_equal(nxt, last):
            break
        last = nxt
    end = last + 1
    size = end - np.arange(n)
    kids = np.bincount(parent[1:], weights=size[1:], minlength=n)
    if np.any(kids + 1 != size) or np.any(end[1:] > end[parent[1:]]):
        return None
    return end


def _depth(end):
    """Depth from pre-order subtree ranges: the number of ranges [a, end[a]) holding v, less 1."""
    n = len(end)
    return np.cumsum(1 - np.bincount(end, minlength=n + 1)[:n]) - 1


def _preorder(parent):
    """A pre-order of the tree (children visited in index order)."""
    kids = [[] for _ in range(len(parent))]
    for i, p in enumerate(parent.tolist()[1:], 1):
        kids[p].append(i)
    order, stack = [], [0]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(reversed(kids[v]))
    return np.array(order, dtype=np.int64)
