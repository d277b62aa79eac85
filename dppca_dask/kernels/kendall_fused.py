"""The fused spherical Kendall tile kernel: the fast path behind ``cpp_option=True``.

Same contract and mathematics as :func:`~dppca_dask.kernels.kendall.tile_reference`: the partial
sum Σ u uᵀ, u = (b − a)/‖b − a‖, over the pairs a tile owns, and the pair count. The BLAS-3
rewrite of docs/spec/ARCHITECTURE.md §3 with w_ij = 1/‖a_i − b_j‖² is evaluated in *row panels* of
``PANEL_ROWS`` rows of A, so the only tile-sized temporary is one panel (e.g. 256 × 4096 float64
= 8 MiB, which stays in cache) instead of several b × b matrices:

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
   row and vectorises without ``fastmath``).

Then Σ = Saᵀ diag(r) Sa + Sbᵀ diag(c) Sb − M − Mᵀ with M = Saᵀ W Sb, plus the near pairs.
A diagonal tile (``b is None``) uses the strict upper triangle U of W (pairs i < j once):
Σ = Saᵀ diag(U1 + Uᵀ1) Sa − M − Mᵀ, M = Saᵀ U Sa.

Clustered data: when the near pairs pass :data:`SWITCH_FRACTION` of the pairs seen (checked
after each panel, before its exact path), the tile's one centre lies in none of several tight
clusters, and every pair inside a cluster is near. The tile then restarts
(:func:`_per_panel_pass`): the rows of A are grouped by nearest pivot (:func:`cluster_order`),
each group cut into panels, and each panel is shifted, with its columns, to the median of its
own rows and scaled by its own power of two; its sum is expanded in those coordinates (the
expansion is shift- and scale-invariant), so the near test, the same sound bound, now judges
a pair against its own cluster. Measured (docs/performance.md §1b): 4 or 16 clusters 100 sd
apart ran at 0.07–0.34× of the Gaussian speed with 6–25 % of the pairs exact, and now at
0.61–0.79× with none.

Accuracy: the near test is a sound bound in the shifted values: every pair kept on the Gram path
has its squared distance to within ρ_p = 2¹⁰(2p + 3)u relative (worst case) and loses about
log2(s/d) bits, s/d ≈ 1–4 for almost every pair with the median centre (derivation: the module
docstring of :mod:`dppca_dask.kernels.kendall`). The median keeps heavy-tailed data and outliers
on the fast path (measured in docs/performance.md §1b: near pairs 31–98 % → 0 on 4096² tiles).

Determinism: numba runs with ``parallel=False`` and ``fastmath=False``; the centre is a pure
function of the tile's rows and every sum has a fixed order (near pairs in row-major order, in
chunks of a fixed size), so one input gives one result, bit for bit, on one machine and BLAS
thread count. Non-finite input raises :class:`~dppca_dask.errors.InputError` before any
arithmetic.

numba is imported, and the three loops compiled, on the first call (:func:`numba_available`),
so ``import dppca_dask`` works without it. Without numba the kernel falls back to
:func:`~dppca_dask.kernels.kendall.tile_blas_unfused` (same mathematics, same error bound, a
few times slower) with one warning.
"""

from __future__ import annotations

import math
import threading
import warnings
from typing import Any

import numpy as np

from dppca_dask.kernels.kendall import (
    NEAR_RATIO,
    Centre,
    TileStats,
    as_block,
    exact_pairs,
    near_chunk_pairs,
    shift_and_scale,
    tile_blas_unfused,
)

__all__ = ["NO_NUMBA_MESSAGE", "PANEL_ROWS", "TileStats", "cluster_order", "numba_available",
           "tile_fused"]

NO_NUMBA_MESSAGE = ("numba is not installed: the Kendall pass uses the unfused NumPy kernel "
                    "(same results, a few times slower); `pip install numba` for the fused one")

PANEL_ROWS = 256
"""Rows of A per panel: a 256 × b weight panel stays in L2/L3 (measured: docs/performance.md)."""


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
_COMPILED = ("_weights_row", "_weights_panel", "_near_pairs")  # callees first
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


def _weights_panel(g, na, nb, c, floor, diagonal):  # pragma: no cover - compiled
    """Gram panel ``g`` → weights, in place; ``c += Wᵀ1``; returns the number of near pairs.

    ``diagonal``: row i of the panel pairs only with columns j > i (the caller aligns the first
    column with the first row); the others are set to 0 and are not pairs of this tile.
    """
    rows, cols = g.shape
    near = 0
    for i in range(rows):
        start = min(i + 1, cols) if diagonal else 0
        g[i, :start] = 0.0
        far = _weights_row(g[i, start:], na[i], nb[start:], c[start:], floor)
        near += (cols - start) - far
    return near


def _near_pairs(w, diagonal, start, out_i, out_j):  # pragma: no cover - compiled
    """The near pairs of weight panel ``w`` (weight 0; for a diagonal panel only j > i) from
    flat position ``start`` on, in row-major order, into ``out_i``/``out_j`` until they are full.

    Returns (number written, flat position to resume from). A far pair's weight is never 0
    (d < 4p after the scaling, so 1/d > 0).
    """
    rows, cols = w.shape
    cap = out_i.shape[0]
    k = 0
    i0 = start // cols
    for i in range(i0, rows):
        j0 = start - i0 * cols if i == i0 else 0
        if diagonal and j0 < i + 1:
            j0 = i + 1
        for j in range(j0, cols):
            if w[i, j] == 0.0:
                if k == cap:
                    return k, i * cols + j
                out_i[k] = i
                out_j[k] = j
                k += 1
    return k, rows * cols


def _exact_near(
    w: np.ndarray, diagonal: bool, near: int, a: np.ndarray, b: np.ndarray, row0: int, col0: int,
    chunk: int, stats: TileStats | None,
) -> np.ndarray:
    """Σ u uᵀ over the ``near`` near pairs of one panel, recomputed exactly, ``chunk`` at a time.

    Fixed-size buffers: two index vectors and two gathered chunk × p blocks (per thread, reused);
    ``exact_pairs`` holds a few chunk × p temporaries. Nothing grows with ``near``.
    """
    p = a.shape[1]
    idx_i = _scratch("near_i", (chunk,), np.int64)
    idx_j = _scratch("near_j", (chunk,), np.int64)
    rows_a = _scratch("near_a", (chunk, p))
    rows_b = _scratch("near_b", (chunk, p))
    total = np.zeros((p, p))
    pos, end = 0, w.size
    while near > 0 and pos < end:
        k, pos = _near_pairs(w, diagonal, pos, idx_i, idx_j)
        if k == 0:
            break
        idx_i[:k] += row0
        idx_j[:k] += col0
        np.take(a, idx_i[:k], axis=0, out=rows_a[:k])
        np.take(b, idx_j[:k], axis=0, out=rows_b[:k])
        total += exact_pairs(rows_b[:k], rows_a[:k])
        near -= k
        if stats is not None:
            stats.add_chunk(k)
    return total


SWITCH_FRACTION = 1.0 / 64.0
"""A tile whose near pairs exceed this fraction of the pairs seen so far is restarted with
per-panel centres (:func:`_per_panel_pass`); decided after each panel, before its exact path,
so a tile of random row order switches after its first panel and wastes only that panel ..."""
SWITCH_MIN_NEAR = 4096
"""... unless the near pairs projected over the whole tile are fewer than this (then the exact
path costs less than the restart)."""
SWITCHED_PANEL_FACTOR = 2
"""Panels of a switched tile have this many times ``panel_rows`` rows: each panel also shifts
its columns and forms their p × p product, so taller panels amortise that (measured at
b = 4096: per-panel cost over Gaussian 1.73 → 1.52 at p = 50 with 512 rows; 1024 rows gave
1.38 but a 32 MiB panel)."""
PIVOTS = 64
"""Most pivots of :func:`cluster_order` (groups of rows sorted together before the panels)."""
PIVOT_STOP = 2.0 ** -8
""":func:`cluster_order` stops when the next pivot's squared distance to the chosen ones drops
below this fraction of the previous pivot's (the farthest-point radii fall sharply once every
tight cluster has a pivot: one pivot each)."""


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


def _single_centre_pass(
    a: np.ndarray, b: np.ndarray, diagonal: bool, *, step: int, centre: Centre, chunk: int,
    stats: TileStats | None, switch: bool, count: int,
) -> np.ndarray | None:
    """The tile on one centre (the default path); ``None`` when ``switch`` and the near pairs
    pass :data:`SWITCH_FRACTION` (the caller restarts with per-panel centres)."""
    ra, p = a.shape
    rb = b.shape[0]
    sa, sb, floor = shift_and_scale(
        a, None if diagonal else b, centre=centre,
        out_a=_scratch("sa", a.shape), out_b=None if diagonal else _scratch("sb", b.shape),
    )
    na = np.einsum("ij,ij->i", sa, sa)
    nb = na if diagonal else np.einsum("ij,ij->i", sb, sb)
    sb1t = _scratch("sb1t", (p + 1, rb))  # [Sb | 1]ᵀ: rows 0..p-1 give (W Sb)ᵀ, row p gives W1
    sb1t[:p] = sb.T
    sb1t[p] = 1.0
    ytr = _scratch("ytr", (p + 1, ra))
    c = np.zeros(rb)
    buf = _scratch("panel", (min(step, ra) * rb,))
    exact: np.ndarray | None = None
    near_seen = seen = 0
    for lo in range(0, ra, step):
        hi = min(lo + step, ra)
        col0 = lo if diagonal else 0  # a diagonal panel needs only the columns j ≥ lo
        g = buf[: (hi - lo) * (rb - col0)].reshape(hi - lo, rb - col0)
        np.matmul(sa[lo:hi], sb1t[:p, col0:], out=g)
        near = _weights_panel(g, na[lo:hi], nb[col0:], c[col0:], floor, diagonal)
        near_seen += near
        seen += _panel_pairs(lo, hi, rb, diagonal)
        if switch and near_seen > SWITCH_FRACTION * seen and \
                near_seen * count >= SWITCH_MIN_NEAR * seen:  # projected over the tile
            return None
        if near:
            part = _exact_near(g, diagonal, near, a, b, lo, col0, chunk, stats)
            exact = part if exact is None else exact + part
        ytr[:, lo:hi] = sb1t[:, col0:] @ g.T
    m = ytr[:p] @ sa  # = (Saᵀ W Sb)ᵀ
    r = ytr[p]
    # Saᵀ diag(r) Sa + Sbᵀ diag(c) Sb (the two coincide for a diagonal tile)
    scaled = _scratch("scaled", (p, ra))
    if diagonal:
        total = np.multiply(sa.T, r + c, out=scaled) @ sa
    else:
        total = np.multiply(sa.T, r, out=scaled) @ sa
        total += np.multiply(sb.T, c, out=_scratch("scaled_b", (p, rb))) @ sb
    total -= m
    total -= m.T
    if exact is not None:
        total += exact
    if stats is not None:
        stats.pairs += count
    return total


def _panel_pairs(lo: int, hi: int, rb: int, diagonal: bool) -> int:
    """Pairs of rows lo..hi-1 of a panel: all rb columns, or only j > i on a diagonal tile."""
    rows = hi - lo
    return rows * rb if not diagonal else rows * (rb - 1) - (lo + hi - 1) * rows // 2


def _per_panel_pass(
    a: np.ndarray, b: np.ndarray, diagonal: bool, *, step: int, chunk: int,
    stats: TileStats | None, count: int,
) -> np.ndarray:
    """The tile with one centre per panel: the rows of A in :func:`cluster_order` (for a
    diagonal tile, both sides: the same pairs), each group of rows cut into panels of at most
    ``step`` rows (so a panel holds one group), each panel shifted, with its columns, to the
    coordinate-wise median of its own rows and scaled by its own power of two.

    Each panel's sum Σ w (a − b)(a − b)ᵀ is expanded in its own coordinates (the expansion is
    shift- and scale-invariant; its rounding is bounded by the same near test, now against the
    panel's centre), so pairs inside a tight cluster far from the tile's centre stay on the
    Gram path once their panel sits in that cluster. Costs about p/256 more per panel than
    :func:`_single_centre_pass` (each panel's column-side p × p product), paid only by tiles
    that switched.
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
        near = _weights_panel(g, na, nb, c, floor, diagonal)
        if near:
            total += _exact_near(g, diagonal, near, a, b, lo, col0, chunk, stats)
        ytr = sbt @ g.T  # (p + 1) × rows: (W Sb)ᵀ and W1
        m = ytr[:p] @ sa
        total += (sa.T * ytr[p]) @ sa
        total += (sb.T * c) @ sb
        total -= m
        total -= m.T
    if stats is not None:
        stats.pairs += count
        stats.switched += 1
    return total


def tile_fused(
    a: np.ndarray,
    b: np.ndarray | None = None,
    *,
    panel_rows: int = PANEL_ROWS,
    centre: Centre = "median",
    near_chunk: int | None = None,
    stats: TileStats | None = None,
    switch: bool = True,
) -> tuple[np.ndarray, int]:
    """Fused partial sum and pair count of one tile; same result as ``tile_reference``.

    ``b is None``: the pairs i < j of ``a``; otherwise every pair in ``a × b``. The keywords are
    for tests and benchmarks; their defaults are the production settings: ``panel_rows`` rows
    of A per panel; ``centre`` the tile's shift (``"midrange"``: the old shift, comparisons
    only; it never switches); ``near_chunk`` pairs per exact-path chunk (default
    ``NEAR_CHUNK_ELEMENTS // p``); ``stats`` a :class:`~dppca_dask.kernels.kendall.TileStats`
    the kernel adds its pair, near-pair and chunk counts to (diagnostics: the result does not
    depend on it); ``switch``: whether a tile with many near pairs (clustered data:
    :data:`SWITCH_FRACTION`) restarts with per-panel centres (:func:`_per_panel_pass`).

    Examples
    --------
    >>> from dppca_dask.kernels.kendall import tile_reference
    >>> x = np.random.default_rng(0).normal(size=(30, 4)) + 1e6
    >>> s, m = tile_fused(x)
    >>> m, bool(np.allclose(s, tile_reference(x)[0], rtol=0, atol=1e-12 * m))
    (435, True)
    >>> stats = TileStats()
    >>> _ = tile_fused(np.random.default_rng(1).standard_t(1.5, size=(200, 5)), stats=stats)
    >>> stats.pairs, stats.near_fraction < 0.01
    (19900, True)
    """
    if not numba_available():
        return tile_blas_unfused(a, b, centre=centre, near_chunk=near_chunk, stats=stats)
    a = as_block(a)
    diagonal = b is None
    b = a if b is None else as_block(b)
    ra, p = a.shape
    rb = b.shape[0]
    count = ra * (ra - 1) // 2 if diagonal else ra * rb
    if count == 0:
        if stats is not None:
            stats.pairs += count
        return np.zeros((p, p)), 0
    step = max(1, int(panel_rows))
    chunk = near_chunk_pairs(p, near_chunk)
    total = _single_centre_pass(a, b, diagonal, step=step, centre=centre, chunk=chunk,
                                stats=stats, switch=switch and centre == "median", count=count)
    if total is None:  # per-panel centres: panels of twice the rows halve their column work
        total = _per_panel_pass(a, b, diagonal, step=SWITCHED_PANEL_FACTOR * step, chunk=chunk,
                                stats=stats, count=count)
    return (total + total.T) / 2.0, count
