"""The fused spherical Kendall tile kernel: the fast path behind ``cpp_option=True``.

Same contract and mathematics as :func:`~dppca_dask.kernels.kendall.tile_reference`: the partial
sum Σ u uᵀ, u = (b − a)/‖b − a‖, over the pairs a tile owns, and the pair count. The BLAS-3
rewrite of docs/spec/ARCHITECTURE.md §3 with w_ij = 1/‖a_i − b_j‖² is evaluated in *row panels* of
``PANEL_ROWS`` rows of A, each in chunks of ``PANEL_COLS`` columns, so the only tile-sized
temporary is one panel chunk (256 × 1024 float64 = 2 MiB, which stays in cache) instead of
several b × b matrices; per chunk:

1. ``G = Sa_p Sbᵀ`` (BLAS; S = the rows shifted to the tile's robust centre -- the coordinate-
   wise median of a row sample -- and scaled by a power of two: the same
   :func:`~dppca_dask.kernels.kendall.shift_and_scale` as the unfused kernel, so any finite input
   is overflow-safe);
2. one fused pass (:func:`_weights_panel`, numba) over G that forms the squared distance
   ``d = ‖sa‖² + ‖sb‖² − 2 G``, checks it (a pair is *near* unless ``d > NEAR_RATIO (‖sa‖² +
   ‖sb‖²) + F`` and ``d`` is finite: its weight is set to 0), overwrites G with the reciprocal
   weight and adds the column sums ``c = Wᵀ1``;
3. if the panel has near pairs, :func:`_near_pairs` (numba) lists them into fixed-size index
   buffers, a chunk of at most ``max(1, NEAR_CHUNK_ELEMENTS // p)`` pairs at a time, and each
   chunk is recomputed exactly from the original rows by the reference kernel's
   ``exact_pairs`` (which also raises the duplicate-observation error, SPEC §4.2): the memory of
   the exact path is bounded by the chunk, whatever the number of near pairs;
4. ``[Sb | 1]ᵀ Wᵀ`` (BLAS): gives ``(W Sb)ᵀ`` and, from the column of ones, the row sums
   ``r = W1`` in the same product (so the fused pass has no floating-point reduction across a
   row and vectorises without ``fastmath``); a panel's chunks add theirs in column order.

Then Σ = Saᵀ diag(r) Sa + Sbᵀ diag(c) Sb − M − Mᵀ with M = Saᵀ W Sb, plus the near pairs.
A diagonal tile (``b is None``) uses the strict upper triangle U of W (pairs i < j once):
Σ = Saᵀ diag(U1 + Uᵀ1) Sa − M − Mᵀ, M = Saᵀ U Sa. A work unit's piece of a tile
(``rows=(lo, hi)``, :mod:`~dppca_dask.graph.kendall_units`) is one call: rows lo:hi against B,
or, on a diagonal tile, against the rows after each of them (a window of rows lo: whose first
rows are the piece's).

Clustered data and point masses: a tight cluster or a point mass far from the tile's one
centre makes every pair inside it near, and the exact path is ~40-100x slower per pair. Before
the pass, :func:`_tile_context` analyses a row sample of the tile (the centre's own sample): if
its pairs are near on the centre, pivots are chosen from it greedily by near partners (one per
cluster or point mass; :func:`_analyse`), and each group is analysed again on its pivot
(groups within groups: a point mass inside a cluster). This is a function of the tile's
sample alone, remembered per thread, so every work unit's piece of a tile (``rows=``) uses
the same centre and groups without redoing it. A grouped pass (:func:`_solve`) labels every
row with its nearest of the centre and the pivots, sorts by label, sums all the pairs
across groups on the tile's centre as above, with each row's own group left out (the GEMMs
skip it where a panel holds one group), and each panel then sums its rows' pairs inside their
group in the group's local coordinates (shifted to the pivot, scaled by the group's own power
of two; BLAS for a block of real size, one compiled loop for the tiny ones). The expansion is
shift- and scale-invariant, so the near test, the same sound bound, judges a pair against its
own group's centre. If the sample missed the structure, a one-centre pass whose near pairs
pass :data:`SWITCH_FRACTION` still restarts with one centre per panel (:func:`_per_panel_pass`,
the fallback). Measured in docs/performance.md §1b.

Accuracy: the near test is a sound bound in the shifted values: every pair kept on the Gram path
has its squared distance to within ρ_p = 2¹⁰(2p + 3)u relative (worst case) and loses about
log2(s/d) bits, s/d ≈ 1–4 for almost every pair with the median centre (derivation: the module
docstring of :mod:`dppca_dask.kernels.kendall`). The median keeps heavy-tailed data and outliers
on the fast path (measured in docs/performance.md §1b: near pairs 31–98 % → 0 on 4096² tiles).

Determinism: numba runs with ``parallel=False`` and ``fastmath=False``; the centre, the groups
and the labels are pure functions of the tile's rows (the per-thread memory of tile contexts
is keyed by the exact bytes of the sample they are computed from) and every sum has a fixed
order (near pairs in row-major order within each panel chunk, in chunks of a fixed size;
a panel's column chunks in column order), so one input gives one
result, bit for bit, on one machine and BLAS thread count. Non-finite input raises :class:`~dppca_dask.errors.InputError` before any
arithmetic.

numba is imported, and the loops compiled, on the first call (:func:`numba_available`),
so ``import dppca_dask`` works without it. Without numba the kernel falls back to
:func:`~dppca_dask.kernels.kendall.tile_blas_unfused` (same mathematics, same error bound, a
few times slower) with one warning.
"""

from __future__ import annotations

import itertools
import math
import threading
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from dppca_dask.kernels.kendall import (
    DUPLICATE_SQ_THRESHOLD,
    NEAR_FLOOR,
    NEAR_RATIO,
    SHIFT_SAMPLE,
    Centre,
    TileStats,
    as_block,
    exact_pairs,
    near_chunk_pairs,
    shift_and_scale,
    tile_blas_unfused,
    tile_centre,
)

__all__ = ["NO_NUMBA_MESSAGE", "PANEL_ROWS", "TileStats", "cluster_order", "numba_available",
           "tile_fused"]

NO_NUMBA_MESSAGE = ("numba is not installed: the Kendall pass uses the unfused NumPy kernel "
                    "(same results, a few times slower); `pip install numba` for the fused one")

PANEL_ROWS = 256
"""Rows of A per panel (measured: docs/performance.md §1)."""
PANEL_COLS = 1024
"""Columns per chunk of a panel: the GEMMs, the weight pass and the exact path run on
``PANEL_ROWS × PANEL_COLS`` chunks (2 MiB) of the panel, which stay in the core's share of the
cache while the second GEMM reads them; a whole 256 × 4096 panel (8 MiB) was 1.0–1.25× slower
on 2 threads (two kernels sharing the L3), 1.0–1.2× on one (docs/performance.md §1)."""


_SCRATCH = threading.local()


def _scratch(name: str, shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    """A per-thread reusable buffer (contents undefined) of ``shape``.

    The kernel's tile-sized temporaries (several MiB each) are allocated once per thread and
    reused across tiles: fresh large allocations cost page faults, and Dask's nanny sets
    ``MALLOC_TRIM_THRESHOLD_``, which makes glibc map and unmap every one of them (measured:
    13 % slower kernels in worker processes; docs/performance.md).
    """
    arrays = _SCRATCH.__dict__.setdefault("arrays", {})
    size = math.prod(shape)
    buf = arrays.get(name)
    if buf is None or buf.size < size or buf.dtype != dtype:
        buf = np.empty(size, dtype=dtype)
        arrays[name] = buf
    return buf[:size].reshape(shape)


def scratch_sizes() -> dict[str, int]:
    """Bytes of this thread's scratch buffers by name (tests check the exact path's are fixed)."""
    return {k: v.nbytes for k, v in _SCRATCH.__dict__.get("arrays", {}).items()}


_JIT: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy", "boundscheck": False}
# error_model="numpy": 1/0 gives inf instead of raising, so the division vectorises (0 never
# reaches it: such a pair is near).  No fastmath, no parallel: results are bit-reproducible.
_COMPILED = ("_weights_row", "_weights_panel", "_near_pairs", "_group_rows", "_shift_rows",
             "_row_pairs")  # callees first
_STATE: dict[str, bool] = {}
_LOCK = threading.Lock()


def numba_available() -> bool:
    """Whether the fused kernel can run: imports numba and wraps the loops below in
    ``numba.njit`` on the first call (compiled lazily, cached on disk); without numba, warns
    once and returns False (:func:`tile_fused` then uses the unfused kernel)."""
    ready = _STATE.get("ready")
    if ready is not None:
        return ready
    with _LOCK:
        if "ready" not in _STATE:
            try:
                import numba
            except ImportError:
                _STATE["ready"] = False
                warnings.warn(NO_NUMBA_MESSAGE, RuntimeWarning, stacklevel=3)
            else:
                names = globals()
                for name in _COMPILED:  # a compiled caller resolves its callee's global
                    names[name] = numba.njit(**_JIT)(names[name])
                _STATE["ready"] = True
    return _STATE["ready"]


def _weights_row(g, ni, nb, c, floor):  # pragma: no cover - compiled
    """One row: Gram values → weights in place, ``c += w``; returns the number of far pairs.

    A loop from 0 over whole slices: numba's loop vectoriser gives up on a variable start.
    """
    far = 0
    for j in range(g.shape[0]):
        s = ni + nb[j]
        d = s - 2.0 * g[j]
        ok = (d > NEAR_RATIO * s + floor) & (d < np.inf)
        w = 1.0 / d if ok else 0.0
        g[j] = w
        c[j] += w
        far += ok
    return far


def _weights_panel(g, na, nb, c, floor, start, skip_lo, skip_hi):  # pragma: no cover - compiled
    """Gram panel ``g`` → weights, in place; ``c += Wᵀ1``; returns the number of near pairs.

    Row i pairs with the columns ``start[i] ≤ j < cols`` except ``skip_lo[i] ≤ j < skip_hi[i]``
    (a diagonal panel: ``start[i] = i + 1``; a grouped pass: the row's own group, whose pairs
    are summed on the group's centre). The other entries are set to 0 and are not pairs here.
    """
    rows, cols = g.shape
    near = 0
    for i in range(rows):
        s0 = min(max(start[i], 0), cols)
        k = min(max(skip_lo[i], s0), cols)
        m = min(max(skip_hi[i], k), cols)
        g[i, :s0] = 0.0
        far = _weights_row(g[i, s0:k], na[i], nb[s0:k], c[s0:k], floor)
        g[i, k:m] = 0.0
        far += _weights_row(g[i, m:], na[i], nb[m:], c[m:], floor)
        near += (k - s0) + (cols - m) - far
    return near


def _near_pairs(w, start, skip_lo, skip_hi, pos, out_i, out_j):  # pragma: no cover - compiled
    """The near pairs of weight panel ``w`` (weight 0 among each row's pairs, as in
    :func:`_weights_panel`) from flat position ``pos`` on, in row-major order, into
    ``out_i``/``out_j`` until they are full.

    Returns (number written, flat position to resume from). A far pair's weight is never 0
    (d < 4p after the scaling, so 1/d > 0).
    """
    rows, cols = w.shape
    cap = out_i.shape[0]
    k = 0
    i0 = pos // cols
    for i in range(i0, rows):
        j0 = pos - i0 * cols if i == i0 else 0
        s0 = min(max(start[i], 0), cols)
        lo = min(max(skip_lo[i], s0), cols)
        hi = min(max(skip_hi[i], lo), cols)
        for j in range(max(j0, s0), lo):
            if w[i, j] == 0.0:
                if k == cap:
                    return k, i * cols + j
                out_i[k] = i
                out_j[k] = j
                k += 1
        for j in range(max(j0, hi), cols):
            if w[i, j] == 0.0:
                if k == cap:
                    return k, i * cols + j
                out_i[k] = i
                out_j[k] = j
                k += 1
    return k, rows * cols


def _group_rows(sa, na, sw1, swt, nw, lo, hi, floor, c, y, row, end, out_i, out_j, g
                ):  # pragma: no cover - compiled
    """Local pairs of rows ``row`` ≤ i < ``end``: row i of ``sa`` with the columns
    ``lo[i] ≤ j < hi[i]`` of ``sw1`` = [Sw | 1] (its group's rows, shifted to the group's
    centre and scaled by the group's power of two, like ``sa``; ``swt`` = Swᵀ). Adds
    ``c += Wᵀ1`` and ``y += W [Sw | 1]`` (so ``y[:, p]`` = W1); lists the near pairs (the test
    of :func:`_weights_row`, ``floor[i]`` the group's floor) into ``out_i``/``out_j``.
    Stops before a row whose pairs might not fit there; returns (next row, pairs listed).
    ``g``: scratch of at least the longest row.

    The Gram loop runs over j (independent lanes, like :func:`_weights_row`) and the ``y``
    loop over the coordinates, so both vectorise without reassociating a sum.
    """
    p = sa.shape[1]
    cap = out_i.shape[0]
    k = 0
    for i in range(row, end):
        a = lo[i]
        m = hi[i] - a
        if m <= 0:
            continue
        if k + m > cap:
            return i, k
        gi = g[:m]
        gi[:] = 0.0
        for t in range(p):
            ait = sa[i, t]
            col = swt[t, a : a + m]
            for j in range(m):
                gi[j] += ait * col[j]
        ni = na[i]
        fi = floor[i]
        nn = nw[a : a + m]
        cc = c[a : a + m]
        for j in range(m):
            s = ni + nn[j]
            d = s - 2.0 * gi[j]
            ok = (d > NEAR_RATIO * s + fi) & (d < np.inf)
            w = 1.0 / d if ok else 0.0
            gi[j] = w
            cc[j] += w
        yi = y[i]
        for j in range(m):
            w = gi[j]
            if w == 0.0:
                out_i[k] = i
                out_j[k] = a + j
                k += 1
            else:
                wj = sw1[a + j]
                for t in range(p + 1):
                    yi[t] += w * wj[t]
    return end, k


def _shift_rows(x, idx, lab, centres, half, out, largest):  # pragma: no cover - compiled
    """``out[j] = x[idx[j]] − centres[lab[j]]`` (``half``: x/2 − c/2, exact) and
    ``largest[g]`` = the largest |value| of the rows labelled g (inf if one overflowed).
    ``out`` may have more columns than ``x`` (the local window's column of ones): only the
    first ``x.shape[1]`` are written."""
    n = out.shape[0]
    p = x.shape[1]
    for j in range(n):
        xi = x[idx[j]]
        ci = centres[lab[j]]
        oj = out[j]
        top = largest[lab[j]]
        for t in range(p):
            v = xi[t] * 0.5 - ci[t] * 0.5 if half else xi[t] - ci[t]
            oj[t] = v
            top = max(top, abs(v))
        largest[lab[j]] = top


def _exact_near(
    w: np.ndarray, start: np.ndarray, skip_lo: np.ndarray, skip_hi: np.ndarray, near: int,
    a: np.ndarray, b: np.ndarray, row0: int, col0: int, chunk: int, stats: TileStats | None,
    row_map: np.ndarray | None = None, col_map: np.ndarray | None = None,
) -> np.ndarray:
    """Σ u uᵀ over the ``near`` near pairs of one panel, recomputed exactly, ``chunk`` at a time.

    Panel row i is row ``row_map[row0 + i]`` of ``a`` (``row0 + i`` without a map), column j
    row ``col_map[col0 + j]`` of ``b``. Fixed-size buffers: two index vectors and two gathered
    chunk × p blocks (per thread, reused); ``exact_pairs`` holds a few chunk × p temporaries.
    Nothing grows with ``near``.
    """
    p = a.shape[1]
    idx_i = _scratch("near_i", (chunk,), np.int64)
    idx_j = _scratch("near_j", (chunk,), np.int64)
    rows_a = _scratch("near_a", (chunk, p))
    rows_b = _scratch("near_b", (chunk, p))
    total = np.zeros((p, p))
    pos, end = 0, w.size
    while near > 0 and pos < end:
        k, pos = _near_pairs(w, start, skip_lo, skip_hi, pos, idx_i, idx_j)
        if k == 0:
            break
        idx_i[:k] += row0
        idx_j[:k] += col0
        if row_map is not None:
            np.take(row_map, idx_i[:k], out=idx_i[:k])
        if col_map is not None:
            np.take(col_map, idx_j[:k], out=idx_j[:k])
        np.take(a, idx_i[:k], axis=0, out=rows_a[:k])
        np.take(b, idx_j[:k], axis=0, out=rows_b[:k])
        total += exact_pairs(rows_b[:k], rows_a[:k])
        near -= k
        if stats is not None:
            stats.add_chunk(k)
    return total


def _exact_listed(
    ii: np.ndarray, jj: np.ndarray, a: np.ndarray, b: np.ndarray, chunk: int,
    stats: TileStats | None,
) -> np.ndarray:
    """Σ u uᵀ over the pairs (a[ii[k]], b[jj[k]]), recomputed exactly, ``chunk`` at a time."""
    p = a.shape[1]
    rows_a = _scratch("near_a", (chunk, p))
    rows_b = _scratch("near_b", (chunk, p))
    total = np.zeros((p, p))
    for lo in range(0, ii.size, chunk):
        k = min(chunk, ii.size - lo)
        np.take(a, ii[lo : lo + k], axis=0, out=rows_a[:k])
        np.take(b, jj[lo : lo + k], axis=0, out=rows_b[:k])
        total += exact_pairs(rows_b[:k], rows_a[:k])
        if stats is not None:
            stats.add_chunk(k)
    return total


SWITCH_FRACTION = 1.0 / 64.0
"""A one-centre pass whose near pairs exceed this fraction of the pairs seen so far is
restarted with per-panel centres (:func:`_per_panel_pass`); decided after each panel, before
its exact path. A fallback only: the tile's analysis (:func:`_analyse`) groups clustered data
before the pass, so this is reached only when its sample missed the structure ..."""
SWITCH_MIN_NEAR = 4096
"""... and unless the near pairs projected over the whole tile are fewer than this (then the
exact path costs less than the restart)."""
SWITCHED_PANEL_FACTOR = 2
"""Panels of :func:`_per_panel_pass` have this many times ``panel_rows`` rows: each panel also
shifts its columns and forms their p × p product, so taller panels amortise that."""
PIVOTS = 64
"""Most pivots of :func:`cluster_order` (the fallback) and of :func:`_analyse` (local centres
per problem)."""
PIVOT_STOP = 2.0 ** -8
""":func:`cluster_order` stops when the next pivot's squared distance to the chosen ones drops
below this fraction of the previous pivot's."""
CHECK_ROWS = 128
"""Rows of the analysis' first sample: if fewer than :data:`GROUP_FRACTION` of its pairs are
near on the problem's centre (Gaussian data, heavy tails: none), the one-centre pass runs."""
ANALYSIS_ROWS = 512
"""Rows of the sample the pivots are chosen from (≈ 8 rows of each of 64 equal clusters)."""
GROUP_FRACTION = 1.0 / 1024.0
"""Near fraction of the first sample above which the problem is grouped."""
INNER_ROWS = 32
"""A group with at least this many of the sample's rows is analysed again on its pivot
(:func:`_analyse`: groups within groups, up to :data:`MAX_DEPTH`)."""
MAX_DEPTH = 3
"""Nesting of groups within groups (a point mass inside a cluster, clusters of clusters)."""
GROUP_MIN_PAIRS = 2**14
"""A tile's piece of fewer pairs is not analysed (one centre, near pairs exact) ..."""
GROUP_MIN_NEAR = 512
"""... and a problem (a piece, a group with groups inside) is grouped only if its pairs times
the near fraction its analysis' sample showed reach this: grouping costs about as much as the
exact path of this many pairs."""
LOCAL_BLAS_PAIRS = 2048
"""A group's local block of at least this many pairs in a panel is done by BLAS; smaller ones
by the compiled loop :func:`_group_rows` (a BLAS call costs about as much as 2¹¹ pairs)."""


@dataclass(frozen=True)
class Groups:
    """Where a problem needs local centres: the pivots (original units, one row each) and, per
    pivot, the groups inside its group (``None``: one centre there)."""

    pivots: np.ndarray
    inner: tuple[Groups | None, ...]
    near: float = 1.0
    """The fraction of the sample's pairs that were near on the problem's centre."""


def _spread(n: int, m: int) -> np.ndarray:
    """``m`` evenly spaced indices in ``range(n)`` (all of them when m ≥ n)."""
    return np.arange(n) if m >= n else (np.arange(m) * n) // m


def _sample_near(u: np.ndarray, floor: float) -> np.ndarray:
    """The near-pair matrix of sample rows ``u`` (shifted, scaled), without the diagonal: the
    pass's own test (:func:`_weights_panel` on their Gram matrix)."""
    m = u.shape[0]
    g = u @ u.T
    nu = np.einsum("ij,ij->i", u, u)
    diag = np.arange(m)
    _weights_panel(g, nu, nu, np.zeros(m), floor, np.zeros(m, dtype=np.int64), diag, diag + 1)
    near = g == 0.0
    near[diag, diag] = False
    return near


def _analyse(x: np.ndarray, shift: np.ndarray, depth: int = 0) -> Groups | None:
    """Where a problem with sample rows ``x`` (original units) needs local centres on its
    centre ``shift``: ``None`` when :data:`CHECK_ROWS` of them have few near pairs; otherwise
    the pivots, chosen greedily from :data:`ANALYSIS_ROWS` of them -- the sample row with the
    most near partners that none of the pivots so far has as a near partner, until no such row
    has one (at most :data:`PIVOTS`) --, each group's sample rows analysed again on its pivot.

    A tight cluster or a point mass far from the centre makes all its pairs near: its rows
    are one another's near partners, so it gets one pivot, in it. A heuristic for speed only.
    """
    x = x[_spread(x.shape[0], ANALYSIS_ROWS)]
    u, _, floor = shift_and_scale(x, None, shift=shift)
    check = _spread(u.shape[0], CHECK_ROWS)
    m = check.size
    if m < 3 or not math.isfinite(floor) or \
            _sample_near(u[check], floor).sum() < GROUP_FRACTION * m * (m - 1):
        return None
    near = _sample_near(u, floor)
    degree = near.sum(axis=1)
    covered = np.zeros(u.shape[0], dtype=bool)
    pivots: list[int] = []
    for k in np.argsort(-degree, kind="stable").tolist():
        if degree[k] == 0 or len(pivots) == PIVOTS:
            break
        if covered[k]:
            continue
        pivots.append(k)
        covered |= near[k]
        covered[k] = True
    if not pivots:
        return None
    inner: list[Groups | None] = [None] * len(pivots)
    if depth + 1 < MAX_DEPTH:
        labels = _labels(u, u[pivots])
        for g, k in enumerate(pivots):
            rows = x[labels == g + 1]
            if rows.shape[0] >= INNER_ROWS:
                inner[g] = _analyse(rows, x[k], depth + 1)
    return Groups(x[pivots], tuple(inner), float(degree.sum()) / (u.shape[0] * (u.shape[0] - 1)))


CONTEXTS = 8
"""Tile contexts remembered per thread (:func:`_tile_context`)."""


def _tile_context(a: np.ndarray, b: np.ndarray | None, local: bool
                  ) -> tuple[np.ndarray, Groups | None]:
    """The centre of the tile (``a``, ``b``) -- :func:`~dppca_dask.kernels.kendall.tile_centre`
    -- and, if ``local``, :func:`_analyse` of the same row sample on it.

    Both are a function of that sample alone, so every piece of a tile (each work unit that
    holds part of it) uses the same centre and groups; the last :data:`CONTEXTS` are
    remembered per thread, keyed by the sample's bytes (a hit returns what the computation
    would: the results do not depend on the cache).
    """
    rows = a.shape[0] + (0 if b is None else b.shape[0])
    step = -(-rows // SHIFT_SAMPLE)
    sample = a[::step] if b is None else np.concatenate([a[::step], b[::step]])
    k = (sample.shape[0] - 1) // 2
    if not local:
        return np.partition(sample, k, axis=0)[k], None  # = tile_centre(a, b)
    key = (sample.shape, sample.tobytes())
    cache: dict = _SCRATCH.__dict__.setdefault("contexts", {})
    hit = cache.get(key)
    if hit is None:
        centre = np.partition(sample, k, axis=0)[k]
        hit = (centre, _analyse(sample, centre))
        if len(cache) >= CONTEXTS:
            del cache[next(iter(cache))]
        cache[key] = hit
    return hit


def _labels(s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Each row's nearest of the centre (label 0; the origin of the scaled values) and the
    pivots ``q`` (labels 1..k), by ‖x − c‖² − ‖x‖² = ‖c‖² − 2 x·c in single precision (a
    heuristic for speed only: any labels give the same sums; a pivot whose value is not
    finite there is never nearest)."""
    with np.errstate(over="ignore", invalid="ignore"):
        q32 = q.astype(np.float32)
        score = np.einsum("ij,ij->i", q32, q32)[None, :] - 2.0 * (s.astype(np.float32) @ q32.T)
    score[~np.isfinite(score)] = np.inf
    best = np.argmin(score, axis=1)
    nearer = np.take_along_axis(score, best[:, None], axis=1)[:, 0] < 0.0
    return np.where(nearer, best + 1, 0).astype(np.int16)  # (a radix sort sorts int16)


def _pairs(ra: int, rb: int, tri: bool) -> int:
    """Pairs of a problem: rows × window, or row i with the window rows after it (tri)."""
    return ra * (rb - 1) - ra * (ra - 1) // 2 if tri else ra * rb


def _row_pairs(start, skip_lo, skip_hi, cols):  # pragma: no cover - compiled
    """Pairs of a panel's rows, as :func:`_weights_panel` counts them (compiled: the one-centre
    pass counts every chunk's pairs for the switch, and NumPy's clips cost 8 % of a p = 10
    tile)."""
    total = 0
    for i in range(start.shape[0]):
        s0 = min(max(start[i], 0), cols)
        k = min(max(skip_lo[i], s0), cols)
        m = min(max(skip_hi[i], k), cols)
        total += (k - s0) + (cols - m)
    return total


def _plain_panels(ra: int, step: int) -> list[tuple[int, int]]:
    return [(lo, min(lo + step, ra)) for lo in range(0, ra, step)]


def _grouped_panels(sizes: np.ndarray, step: int) -> list[tuple[int, int]]:
    """Row ranges of a grouped pass: a group of at least ``step // 4`` rows gets panels of its
    own (one skipped column range each: the GEMMs skip it), smaller groups share panels of at
    most ``step`` rows (their skipped ranges are zeroed instead); a group is never split
    across two shared panels."""
    out: list[tuple[int, int]] = []
    big = max(1, step // 4)
    lo, mixed = 0, -1
    for size in sizes.tolist():
        if size == 0:
            continue
        end = lo + size
        if mixed >= 0 and (size >= big or end - mixed > step):
            out.append((mixed, lo))
            mixed = -1
        if size >= big:
            out.extend((s, min(s + step, end)) for s in range(lo, end, step))
        elif mixed < 0:
            mixed = lo
        lo = end
    if mixed >= 0:
        out.append((mixed, lo))
    return out


@dataclass
class _Local:
    """The local coordinates of a grouped pass's groups: row i of the (sorted) rows pairs with
    the columns ``lo[i] ≤ j < hi[i]`` of ``sw1`` = [Sw | 1] (its group's window rows, each
    group shifted to its pivot and scaled by its own power of two; ``sa`` the rows alike);
    ``blas[i]``: the row's block goes to BLAS (else :func:`_group_rows`); ``cols`` maps the
    local columns to window rows for the exact path. ``c`` and ``y`` (= W [Sw | 1]) are the
    sums the panels add to."""

    sa: np.ndarray
    na: np.ndarray
    sw1: np.ndarray
    swt: np.ndarray
    nw: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    floor: np.ndarray
    blas: np.ndarray
    loop_hi: np.ndarray
    cols: np.ndarray
    c: np.ndarray
    y: np.ndarray


def _local_part(
    loc: _Local, buf: np.ndarray, lo: int, hi: int, group: np.ndarray, xa: np.ndarray,
    xw: np.ndarray, row_map: np.ndarray, chunk: int, stats: TileStats | None,
) -> np.ndarray | None:
    """The local pairs of panel rows lo:hi (each group's run of rows: BLAS into ``buf``, or
    the compiled loop for the small ones) with their near pairs recomputed exactly."""
    p = loc.sa.shape[1]
    exact: np.ndarray | None = None
    cuts = [lo, *(lo + 1 + np.flatnonzero(group[lo + 1 : hi] != group[lo : hi - 1])).tolist(), hi]
    loop = False
    for s, e in itertools.pairwise(cuts):
        if not loc.blas[s]:
            loop = loop or bool(loc.loop_hi[s] > loc.lo[s])
            continue
        c0, c1 = int(loc.lo[s]), int(loc.hi[s])  # tri: lo[i] = i's position + 1 rises by one
        g = buf[: (e - s) * (c1 - c0)].reshape(e - s, c1 - c0)
        np.matmul(loc.sa[s:e], loc.sw1[c0:c1, :p].T, out=g)
        st = loc.lo[s:e] - c0
        skip = np.full(e - s, c1 - c0, dtype=np.int64)
        near = _weights_panel(g, loc.na[s:e], loc.nw[c0:c1], loc.c[c0:c1], loc.floor[s],
                              st, skip, skip)
        if near:
            part = _exact_near(g, st, skip, skip, near, xa, xw, s, c0, chunk, stats,
                               row_map, loc.cols)
            exact = part if exact is None else exact + part
        loc.y[s:e] += g @ loc.sw1[c0:c1]
    if loop:
        cap = max(chunk, int((loc.loop_hi[lo:hi] - loc.lo[lo:hi]).max()))
        out_i = _scratch("group_i", (cap,), np.int64)
        out_j = _scratch("group_j", (cap,), np.int64)
        row = lo
        while row < hi:
            row, k = _group_rows(loc.sa, loc.na, loc.sw1, loc.swt, loc.nw, loc.lo, loc.loop_hi,
                                 loc.floor, loc.c, loc.y, row, hi, out_i, out_j,
                                 _scratch("group_g", (cap,)))
            if k:
                part = _exact_listed(row_map[out_i[:k]], loc.cols[out_j[:k]], xa, xw, chunk,
                                     stats)
                exact = part if exact is None else exact + part
    return exact


def _gram_pass(
    sa: np.ndarray, sw: np.ndarray, tri: bool, xa: np.ndarray, xw: np.ndarray,
    start: np.ndarray, skip_lo: np.ndarray, skip_hi: np.ndarray, floor: float,
    panels: list[tuple[int, int]], *, chunk: int, stats: TileStats | None,
    row_map: np.ndarray | None = None, col_map: np.ndarray | None = None,
    switch_pairs: int = 0, local: _Local | None = None, group: np.ndarray | None = None,
    panel_cols: int = PANEL_COLS,
) -> np.ndarray | None:
    """Σ w (a − b)(a − b)ᵀ over the pairs of rows ``sa`` × window ``sw`` (shifted, scaled) that
    :func:`_weights_panel` keeps for ``start``/``skip_lo``/``skip_hi`` (window columns), plus
    their near pairs recomputed exactly from ``xa``/``xw`` (through ``row_map``/``col_map``),
    plus, with ``local``, each panel's local pairs (:func:`_local_part`; ``group`` the rows'
    labels) -- their sums stay in ``local``.

    ``tri``: the rows are the first rows of the window (``sa`` a view of ``sw``).
    ``switch_pairs`` > 0: return ``None`` once the near pairs pass :data:`SWITCH_FRACTION` of
    those seen (and project to :data:`SWITCH_MIN_NEAR` over that many pairs).
    """
    ra, p = sa.shape
    rb = sw.shape[0]
    xr = xw if tri else xa
    nw = np.einsum("ij,ij->i", sw, sw)
    na = nw[:ra] if tri else np.einsum("ij,ij->i", sa, sa)
    sw1t = _scratch("sb1t", (p + 1, rb))  # [Sw | 1]ᵀ: rows 0..p-1 give (W Sw)ᵀ, row p gives W1
    sw1t[:p] = sw.T
    sw1t[p] = 1.0
    ytr = _scratch("ytr", (p + 1, ra))
    c = np.zeros(rb)
    buf = _scratch("panel", (max(hi - lo for lo, hi in panels) * rb,))
    exact: np.ndarray | None = None
    near_seen = seen = 0
    step = max(1, int(panel_cols))
    for lo, hi in panels:
        first = True
        # the panel needs only the columns j ≥ min(start); they are done in chunks of ``step``
        for c0 in range(min(int(start[lo:hi].min()), rb), rb, step):
            cols = min(step, rb - c0)
            st, kl, kh = start[lo:hi] - c0, skip_lo[lo:hi] - c0, skip_hi[lo:hi] - c0
            g = buf[: (hi - lo) * cols].reshape(hi - lo, cols)
            k0, k1 = min(max(int(kl[0]), 0), cols), min(max(int(kh[0]), 0), cols)
            split = k1 > k0 and (kl == kl[0]).all() and (kh == kh[0]).all()
            if split and k0 == 0 and k1 == cols:
                continue  # the chunk is the panel's skipped range: no pairs here
            if split:  # one skipped range for the whole panel: the GEMMs leave it out
                np.matmul(sa[lo:hi], sw1t[:p, c0 : c0 + k0], out=g[:, :k0])
                np.matmul(sa[lo:hi], sw1t[:p, c0 + k1 : c0 + cols], out=g[:, k1:])
            else:
                np.matmul(sa[lo:hi], sw1t[:p, c0 : c0 + cols], out=g)
            near = _weights_panel(g, na[lo:hi], nw[c0 : c0 + cols], c[c0 : c0 + cols], floor,
                                  st, kl, kh)
            if switch_pairs:
                near_seen += near
                seen += int(_row_pairs(st, kl, kh, cols))
                if near_seen > SWITCH_FRACTION * seen and \
                        near_seen * switch_pairs >= SWITCH_MIN_NEAR * seen:  # projected
                    return None
            if near:
                part = _exact_near(g, st, kl, kh, near, xr, xw, lo, c0, chunk, stats, row_map,
                                   col_map)
                exact = part if exact is None else exact + part
            if split:
                y = sw1t[:, c0 : c0 + k0] @ g[:, :k0].T
                y += sw1t[:, c0 + k1 : c0 + cols] @ g[:, k1:].T
            else:
                y = sw1t[:, c0 : c0 + cols] @ g.T
            if first:
                ytr[:, lo:hi] = y
            else:
                ytr[:, lo:hi] += y
            first = False
        if first:  # no pairs on this centre (every chunk skipped, or none left)
            ytr[:, lo:hi] = 0.0
        if local is not None:  # the panel buffer is free again
            assert row_map is not None
            assert group is not None
            local_part = _local_part(local, buf, lo, hi, group, xr, xw, row_map, chunk, stats)
            if local_part is not None:
                exact = local_part if exact is None else exact + local_part
    m = ytr[:p] @ sa  # = (Saᵀ W Sw)ᵀ
    r = ytr[p]
    # Saᵀ diag(r) Sa + Swᵀ diag(c) Sw (one product when the rows are the window's first rows)
    if tri:
        c[:ra] += r
        total = np.multiply(sw.T, c, out=_scratch("scaled_b", (p, rb))) @ sw
    else:
        total = np.multiply(sa.T, r, out=_scratch("scaled", (p, ra))) @ sa
        total += np.multiply(sw.T, c, out=_scratch("scaled_b", (p, rb))) @ sw
    total -= m
    total -= m.T
    if exact is not None:
        total += exact
    return total


def _local_coordinates(
    xa: np.ndarray, xw: np.ndarray, tri: bool, pivots: np.ndarray, flat: np.ndarray,
    perm_r: np.ndarray, perm_w: np.ndarray, group: np.ndarray, wgroup: np.ndarray,
) -> _Local:
    """:class:`_Local` for the groups whose label ``flat`` marks (``flat[0]``, the centre's,
    is False); ``pivots[g]`` is group g's pivot, ``group``/``wgroup`` the labels of the
    sorted rows/window.

    The local window holds, group after group, the group's window rows (``tri``: its rows,
    then its later window rows, so row i's local pairs are one range: the rows after it in its
    own segment). Shifted to the group's pivot (the halved values if that overflows anywhere)
    and scaled by the group's own power of two; the near floor per group as in
    :func:`~dppca_dask.kernels.kendall.shift_and_scale`.
    """
    ra, p = xa.shape
    k1 = flat.size
    if tri:  # a stable sort by label keeps each group's rows before its later window rows
        order = np.argsort(wgroup, kind="stable")
        order = order[flat[wgroup[order]]]
    else:
        order = np.flatnonzero(flat[wgroup])
    cols = perm_w[order]
    lab = wgroup[order]
    count = np.bincount(lab, minlength=k1)
    seg = np.concatenate([[0], np.cumsum(count)])
    rows_at = np.flatnonzero(flat[group])
    rlab = group[rows_at]
    largest = np.zeros(k1)
    sw1 = np.empty((cols.size, p + 1))
    sr = None if tri else np.empty((rows_at.size, p))
    src = None if tri else perm_r[rows_at]
    halved = False
    for half in (False, True):  # x − c overflowed somewhere: the halved values (exact)
        largest[:] = 0.0
        _shift_rows(xw, cols, lab, pivots, half, sw1, largest)
        if sr is not None:
            _shift_rows(xa, src, rlab, pivots, half, sr, largest)
        if np.isfinite(largest).all():
            halved = half
            break
    exponent = np.where(largest > 0, np.frexp(largest)[1], 0)
    with np.errstate(over="ignore"):
        duplicate = 4.0 * np.ldexp(DUPLICATE_SQ_THRESHOLD, -2 * (exponent + int(halved)))
    floors = np.where(largest > 0, np.maximum(NEAR_FLOOR, duplicate), np.inf)
    np.ldexp(sw1[:, :p], -exponent[lab][:, None], out=sw1[:, :p])
    sw1[:, p] = 1.0
    sa = np.zeros((ra, p))
    lo = np.zeros(ra, dtype=np.int64)
    hi = np.zeros(ra, dtype=np.int64)
    if tri:
        where = np.empty(xw.shape[0], dtype=np.int64)
        where[order] = np.arange(order.size)
        pos = where[rows_at]  # the rows' own places in the local window
        sa[rows_at] = sw1[pos, :p]
        lo[rows_at] = pos + 1
    else:
        assert sr is not None
        sa[rows_at] = np.ldexp(sr, -exponent[rlab][:, None])
        lo[rows_at] = seg[rlab]
    hi[rows_at] = seg[rlab + 1]
    floor = np.zeros(ra)
    floor[rows_at] = floors[rlab]
    # BLAS for the groups whose block has LOCAL_BLAS_PAIRS pairs, the compiled loop otherwise
    n_rows = np.bincount(rlab, minlength=k1)
    pairs = n_rows * (count - 1) - n_rows * (n_rows - 1) // 2 if tri else n_rows * count
    blas = np.zeros(ra, dtype=bool)
    blas[rows_at] = (pairs >= LOCAL_BLAS_PAIRS)[rlab]
    loop = not blas[rows_at].all()  # Swᵀ only for the compiled loop
    swt = np.ascontiguousarray(sw1[:, :p].T) if loop else np.zeros((p, 0))
    return _Local(
        sa=sa, na=np.einsum("ij,ij->i", sa, sa), sw1=sw1, swt=swt,
        nw=np.einsum("ij,ij->i", sw1[:, :p], sw1[:, :p]), lo=lo, hi=hi, floor=floor,
        blas=blas, loop_hi=np.where(blas, lo, hi), cols=cols, c=np.zeros(cols.size),
        y=np.zeros((ra, p + 1)),
    )


def _solve(
    xa: np.ndarray, xw: np.ndarray, tri: bool, *, shift: np.ndarray, groups: Groups | None,
    step: int, chunk: int, stats: TileStats | None, depth: int, switch: bool = False,
    panel_cols: int = PANEL_COLS,
) -> np.ndarray:
    """Σ u uᵀ over the pairs of rows ``xa`` × window ``xw`` (``tri``: ``xa`` is the first rows
    of ``xw`` and row i pairs with the window rows after it), not yet symmetrised, on the
    centre ``shift``.

    ``groups is None``: one pass on that centre (:func:`_gram_pass`). Otherwise the grouped
    pass (the tile's groups from :func:`_tile_context`):

    1. every row and window row is labelled with its nearest of the centre and the pivots
       (:func:`_labels`), and both are sorted by label (``tri``: the rows among themselves and
       the later window rows among themselves, which keeps the set of pairs);
    2. one pass over the pairs on the problem's centre, except those inside a pivot's group
       (each row's group is its skipped range of columns; panels of a big group leave it out
       of the GEMMs), which each panel then sums on the group's pivot as its centre, in the
       group's local coordinates (:func:`_local_coordinates`, :func:`_local_part`);
    3. a group with groups inside it (:attr:`Groups.inner`) is a problem of its own, on its
       pivot.

    ``switch`` (a one-centre pass only): restart with :func:`_per_panel_pass` when the near
    pairs pass :data:`SWITCH_FRACTION` (the analysis' sample missed them).
    """
    ra = xa.shape[0]
    rb = xw.shape[0]
    q = None if groups is None else np.array(groups.pivots, dtype=np.float64)
    if tri:
        sw, _, floor = shift_and_scale(xw, None, shift=shift, out_a=_scratch("sb", xw.shape),
                                       extra=q)
        sa = sw[:ra]
    else:
        sa, sw, floor = shift_and_scale(xa, xw, shift=shift, out_a=_scratch("sa", xa.shape),
                                        out_b=_scratch("sb", xw.shape), extra=q)
    if groups is not None and q is not None and math.isfinite(floor) and \
            _pairs(ra, rb, tri) * groups.near >= GROUP_MIN_NEAR:
        if stats is not None and depth == 0:
            stats.switched += 1
        return _grouped(xa, xw, tri, sa, sw, floor, q, groups, step=step, chunk=chunk,
                        stats=stats, depth=depth, panel_cols=panel_cols)
    start = np.arange(1, ra + 1) if tri else np.zeros(ra, dtype=np.int64)
    skip = np.full(ra, rb, dtype=np.int64)
    total = _gram_pass(sa, sw, tri, xa, xw, start, skip, skip, floor, _plain_panels(ra, step),
                       chunk=chunk, stats=stats, panel_cols=panel_cols,
                       switch_pairs=_pairs(ra, rb, tri) if switch else 0)
    if total is not None:
        return total
    if stats is not None:
        stats.switched += 1
    panel = SWITCHED_PANEL_FACTOR * step
    if not tri:
        return _per_panel_pass(xa, xw, False, step=panel, chunk=chunk, stats=stats)
    total = _per_panel_pass(xa, xa, True, step=panel, chunk=chunk, stats=stats)
    if rb > ra:
        total += _per_panel_pass(xa, xw[ra:], False, step=panel, chunk=chunk, stats=stats)
    return total


def _grouped(
    xa: np.ndarray, xw: np.ndarray, tri: bool, sa: np.ndarray, sw: np.ndarray, floor: float,
    q: np.ndarray, groups: Groups, *, step: int, chunk: int, stats: TileStats | None,
    depth: int, panel_cols: int = PANEL_COLS,
) -> np.ndarray:
    """The grouped pass of :func:`_solve` (steps 1–3); ``q`` the pivots shifted and scaled
    like ``sa``/``sw``."""
    ra = xa.shape[0]
    rb = xw.shape[0]
    k = q.shape[0]
    lw = _labels(sw, q)
    if tri:
        lr = lw[:ra]
        perm_r = np.argsort(lr, kind="stable")
        perm_w = np.concatenate([perm_r, ra + np.argsort(lw[ra:], kind="stable")])
        wbound = ra + np.concatenate([[0], np.cumsum(np.bincount(lw[ra:], minlength=k + 1))])
    else:
        lr = _labels(sa, q)
        perm_r = np.argsort(lr, kind="stable")
        perm_w = np.argsort(lw, kind="stable")
        wbound = np.concatenate([[0], np.cumsum(np.bincount(lw, minlength=k + 1))])
    count_r = np.bincount(lr, minlength=k + 1)
    rbound = np.concatenate([[0], np.cumsum(count_r)])
    group = np.repeat(np.arange(k + 1, dtype=np.int16), count_r)
    rest = group == 0
    if tri:  # a group's rows pair, on this centre, with the later groups' rows only
        start = np.where(rest, np.arange(1, ra + 1), rbound[group + 1])
    else:
        start = np.zeros(ra, dtype=np.int64)
    skip_lo = np.where(rest, rb, wbound[group])
    skip_hi = np.where(rest, rb, wbound[group + 1])
    n_win = np.diff(wbound) + (count_r if tri else 0)  # each group's window rows
    present = (count_r > 0) & (n_win > (1 if tri else 0))  # groups with pairs
    present[0] = False
    nested = np.array([False, *(inner is not None for inner in groups.inner)]) & present
    flat = present & ~nested
    if stats is not None:
        stats.groups += int(present.sum())
    local = None
    if flat.any():
        wgroup = np.concatenate([group, np.repeat(np.arange(k + 1, dtype=np.int16), np.diff(wbound))]) if tri \
            else np.repeat(np.arange(k + 1, dtype=np.int16), np.diff(wbound))
        local = _local_coordinates(xa, xw, tri, np.concatenate([groups.pivots[:1], groups.pivots]),
                                   flat, perm_r, perm_w, group, wgroup)
    sw_s = np.take(sw, perm_w, axis=0, out=_scratch("sw_sorted", sw.shape))
    sa_s = sw_s[:ra] if tri else np.take(sa, perm_r, axis=0, out=_scratch("sa_sorted", sa.shape))
    total = _gram_pass(sa_s, sw_s, tri, xa, xw, start, skip_lo, skip_hi, floor,
                       _grouped_panels(count_r, step), chunk=chunk, stats=stats,
                       row_map=perm_r, col_map=perm_w, local=local, group=group,
                       panel_cols=panel_cols)
    assert total is not None
    if local is not None:
        p = sa.shape[1]
        m = local.sa.T @ local.y[:, :p]
        sw_l = local.sw1[:, :p]
        c = local.c
        if tri:  # the rows are local window rows: their r goes with the window's c
            pos = local.lo[local.hi > 0] - 1
            c[pos] += local.y[local.hi > 0, p]
        else:
            total += (local.sa.T * local.y[:, p]) @ local.sa
        total += (sw_l.T * c) @ sw_l
        total -= m
        total -= m.T
    for g in np.flatnonzero(nested).tolist():
        rows = perm_r[rbound[g] : rbound[g + 1]]
        cols = perm_w[wbound[g] : wbound[g + 1]]
        if tri:
            sub_w = xw[np.concatenate([rows, cols])]
            sub_a = sub_w[: rows.size]
        else:
            sub_w, sub_a = xw[cols], xa[rows]
        total += _solve(sub_a, sub_w, tri, shift=groups.pivots[g - 1],
                        groups=groups.inner[g - 1], step=step, chunk=chunk, stats=stats,
                        depth=depth + 1, panel_cols=panel_cols)
    return total


def cluster_order(x: np.ndarray, pivots: int = PIVOTS) -> tuple[np.ndarray, np.ndarray]:
    """A row order that puts rows near one another in the same panels: each row is assigned to
    its nearest of up to ``pivots`` pivot rows (farthest-point traversal of a strided sample of
    at most 1024 rows, from the row farthest from the sample's coordinate-wise median, until
    the radius drops by :data:`PIVOT_STOP`), and the rows are sorted stably by pivot. Returns the order and the number of rows per pivot.

    A heuristic for speed only: any order gives the same pairs and the same sum up to
    rounding. Distances are taken of shifted values scaled by a power of two, so any finite
    input is safe (a non-finite distance only spoils the grouping).

    Examples
    --------
    >>> x = np.array([[0.0], [100.0], [0.5], [100.5], [1.0]])
    >>> order, sizes = cluster_order(x)
    >>> order.tolist(), sizes.tolist()
    ([1, 3, 0, 2, 4], [2, 3])
    """
    rows = x.shape[0]
    step = -(-rows // 1024)
    centre = np.median(x[::step], axis=0)
    with np.errstate(over="ignore", invalid="ignore"):
        shifted = x * 0.5 - centre * 0.5
        largest = float(np.abs(shifted).max()) if shifted.size else 0.0
        if largest > 0 and math.isfinite(largest):
            shifted = np.ldexp(shifted, -int(np.frexp(largest)[1]))
        sample = shifted[::step]
        far = np.einsum("ij,ij->i", sample, sample)
        chosen = [int(np.argmax(far))]
        radius = far[chosen[0]]
        nearest = np.full(sample.shape[0], np.inf)
        for _ in range(max(1, int(pivots)) - 1):
            diff = sample - sample[chosen[-1]]
            nearest = np.minimum(nearest, np.einsum("ij,ij->i", diff, diff))
            nxt = int(np.argmax(nearest))
            if not nearest[nxt] > PIVOT_STOP * radius:  # a sharp drop: inside the clusters now
                break
            chosen.append(nxt)
            radius = nearest[nxt]
        piv = sample[chosen]
        # ‖x − q‖² up to the row's own ‖x‖² (the same for every pivot): −2 x·q + ‖q‖²
        score = np.einsum("ij,ij->i", piv, piv)[None, :] - 2.0 * (shifted @ piv.T)
    labels = np.argmin(np.nan_to_num(score, nan=np.inf), axis=1)
    return np.argsort(labels, kind="stable"), np.bincount(labels, minlength=len(chosen))


def _group_panels(sizes: np.ndarray, step: int) -> list[tuple[int, int]]:
    """Row ranges of the panels: each group of sorted rows split into runs of ≤ ``step``."""
    out: list[tuple[int, int]] = []
    lo = 0
    for size in sizes.tolist():
        end = lo + size
        out.extend((start, min(start + step, end)) for start in range(lo, end, step))
        lo = end
    return out

def _per_panel_pass(
    a: np.ndarray, b: np.ndarray, diagonal: bool, *, step: int, chunk: int,
    stats: TileStats | None,
) -> np.ndarray:
    """The fallback of a one-centre pass whose near pairs passed :data:`SWITCH_FRACTION`: one
    centre per panel. The rows of A in :func:`cluster_order` (for a diagonal tile, both sides:
    the same pairs), each group of rows cut into panels of at most ``step`` rows (so a panel
    holds one group), each panel shifted, with its columns, to the coordinate-wise median of
    its own rows and scaled by its own power of two.

    Each panel's sum Σ w (a − b)(a − b)ᵀ is expanded in its own coordinates (the expansion is
    shift- and scale-invariant; its rounding is bounded by the same near test, now against the
    panel's centre). Costs about p/(2·rows) more per panel than a one-centre pass (each
    panel's column-side p × p product).
    """
    order, sizes = cluster_order(a)
    a = a[order]
    if diagonal:
        b = a
    ra, p = a.shape
    rb = b.shape[0]
    sb_buf = _scratch("sbp", (rb, p))
    sa_buf = _scratch("sap", (min(step, ra), p))
    sb1t = _scratch("sb1t", (p + 1, rb))
    buf = _scratch("panel", (min(step, ra) * rb,))
    total = np.zeros((p, p))
    for lo, hi in _group_panels(sizes, step):
        col0 = lo if diagonal else 0
        cols = rb - col0
        shift = np.median(a[lo:hi], axis=0)
        sa, sb, floor = shift_and_scale(a[lo:hi], b[col0:], shift=shift,
                                        out_a=sa_buf[: hi - lo], out_b=sb_buf[:cols])
        na = np.einsum("ij,ij->i", sa, sa)
        nb = np.einsum("ij,ij->i", sb, sb)
        sbt = sb1t[:, :cols]
        sbt[:p] = sb.T
        sbt[p] = 1.0
        c = np.zeros(cols)
        g = buf[: (hi - lo) * cols].reshape(hi - lo, cols)
        np.matmul(sa, sbt[:p], out=g)
        start = np.arange(1, hi - lo + 1) if diagonal else np.zeros(hi - lo, dtype=np.int64)
        skip = np.full(hi - lo, cols, dtype=np.int64)
        near = _weights_panel(g, na, nb, c, floor, start, skip, skip)
        if near:
            total += _exact_near(g, start, skip, skip, near, a, b, lo, col0, chunk, stats)
        ytr = sbt @ g.T  # (p + 1) × rows: (W Sb)ᵀ and W1
        m = ytr[:p] @ sa
        total += (sa.T * ytr[p]) @ sa
        total += (sb.T * c) @ sb
        total -= m
        total -= m.T
    return total


def _unfused_rows(
    a: np.ndarray, b: np.ndarray | None, rows: tuple[int, int] | None, centre: Centre,
    near_chunk: int | None, stats: TileStats | None,
) -> tuple[np.ndarray, int]:
    """:func:`tile_fused` without numba: the unfused kernel, on the rows' pairs."""
    kw: dict[str, Any] = {"centre": centre, "near_chunk": near_chunk, "stats": stats}
    if rows is None:
        return tile_blas_unfused(a, b, **kw)
    lo, hi = rows
    if b is not None:
        return tile_blas_unfused(a[lo:hi], b, **kw)
    total, count = tile_blas_unfused(a[lo:hi], **kw)
    if hi < a.shape[0]:
        s, m = tile_blas_unfused(a[lo:hi], a[hi:], **kw)
        total, count = total + s, count + m
    return total, count


def tile_fused(
    a: np.ndarray,
    b: np.ndarray | None = None,
    *,
    rows: tuple[int, int] | None = None,
    panel_rows: int = PANEL_ROWS,
    panel_cols: int = PANEL_COLS,
    centre: Centre = "median",
    near_chunk: int | None = None,
    stats: TileStats | None = None,
    switch: bool = True,
) -> tuple[np.ndarray, int]:
    """Fused partial sum and pair count of one tile; same result as ``tile_reference``.

    ``b is None``: the pairs i < j of ``a``; otherwise every pair in ``a × b``. ``rows=(lo,
    hi)``: only the pairs of rows lo:hi of ``a`` -- against every row of ``b``, or (``b is
    None``) against the rows of ``a`` after each of them: a work unit's piece of a tile, in
    one call. The other keywords are for tests and benchmarks; their defaults are the
    production settings: ``panel_rows`` rows per panel, ``panel_cols`` columns per chunk of a
    panel (the one-centre and grouped passes; the per-panel fallback uses whole panels);
    ``centre`` the tile's shift
    (``"midrange"``: the old shift, comparisons only; it never uses local centres);
    ``near_chunk`` pairs per exact-path chunk (default ``NEAR_CHUNK_ELEMENTS // p``); ``stats``
    a :class:`~dppca_dask.kernels.kendall.TileStats` the kernel adds its pair, near-pair, chunk,
    switch and group counts to (diagnostics: the result does not depend on it); ``switch``:
    whether a tile whose pairs are near on its one centre (clustered data, a point mass) may
    use local centres (the grouped pass, or the per-panel fallback); ``False``: one centre.

    Examples
    --------
    >>> from dppca_dask.kernels.kendall import tile_reference
    >>> x = np.random.default_rng(0).normal(size=(30, 4)) + 1e6
    >>> s, m = tile_fused(x)
    >>> m, bool(np.allclose(s, tile_reference(x)[0], rtol=0, atol=1e-12 * m))
    (435, True)
    >>> top, n = tile_fused(x, rows=(0, 10))
    >>> n, bool(np.allclose(top + tile_fused(x, rows=(10, 30))[0], s, rtol=0, atol=1e-12 * m))
    (245, True)
    >>> stats = TileStats()
    >>> _ = tile_fused(np.random.default_rng(1).standard_t(1.5, size=(200, 5)), stats=stats)
    >>> stats.pairs, stats.near_fraction < 0.01
    (19900, True)
    """
    if not numba_available():
        return _unfused_rows(a, b, rows, centre, near_chunk, stats)
    a = as_block(a)
    diagonal = b is None
    ra, p = a.shape
    lo, hi = (0, ra) if rows is None else (int(rows[0]), int(rows[1]))
    if not 0 <= lo <= hi <= ra:
        raise ValueError(f"rows must be a range within the {ra} rows of a. Got {rows!r}.")
    xa = a[lo:hi]
    xw = a[lo:] if b is None else as_block(b)
    count = _pairs(hi - lo, xw.shape[0], diagonal)
    if stats is not None:
        stats.pairs += count
    if count == 0:
        return np.zeros((p, p)), 0
    if centre == "median":
        shift, groups = _tile_context(a, None if diagonal else xw,
                                      switch and count >= GROUP_MIN_PAIRS)
    else:
        shift, groups = tile_centre(a, None if diagonal else xw, centre), None
    total = _solve(xa, xw, diagonal, shift=shift, groups=groups, step=max(1, int(panel_rows)),
                   chunk=near_chunk_pairs(p, near_chunk), stats=stats, depth=0,
                   switch=switch and centre == "median", panel_cols=max(1, int(panel_cols)))
    return (total + total.T) / 2.0, count
