"""The fused spherical Kendall tile kernel: the fast path behind ``cpp_option=True``.

Same contract and mathematics as :func:`~dppca_dask.kernels.kendall.tile_reference`: the partial
sum Σ u uᵀ, u = (b − a)/‖b − a‖, over the pairs a tile owns, and the pair count. The BLAS-3
rewrite of docs/spec/ARCHITECTURE.md §3 with w_ij = 1/‖a_i − b_j‖² is evaluated in *row panels* of
``PANEL_ROWS`` rows of A, so the only tile-sized temporary is one panel (e.g. 256 × 4096 float64
= 8 MiB, which stays in cache) instead of several b × b matrices:

1. ``G = Sa_p Sbᵀ`` (BLAS; S = the rows shifted to the tile's mid-range and scaled by a power of
   two, exact by translation and scale invariance: the same ``_shift_and_scale`` as the unfused
   kernel, so any finite input is overflow-safe);
2. one fused pass (:func:`_weights_panel`, numba) over G that forms the squared distance
   ``d = ‖sa‖² + ‖sb‖² − 2 G``, checks it (a pair is *near* when ``d ≤ NEAR_RATIO (‖sa‖² + ‖sb‖²)
   + floor``, or ``d`` is not finite: its weight is set to 0 and it is recomputed exactly from its
   difference vector by the reference kernel's ``exact_pairs``, which also raises the
   duplicate-observation error, SPEC §4.2), overwrites G
   with the reciprocal weight and adds the column sums ``c = Wᵀ1``;
3. ``[Sb | 1]ᵀ Wᵀ`` (BLAS): gives ``(W Sb)ᵀ`` and, from the column of ones, the row sums
   ``r = W1`` in the same product (so the fused pass has no floating-point reduction across a
   row and vectorises without ``fastmath``).

Then Σ = Saᵀ diag(r) Sa + Sbᵀ diag(c) Sb − M − Mᵀ with M = Saᵀ W Sb, plus the near pairs.
A diagonal tile (``b is None``) uses the strict upper triangle U of W (pairs i < j once):
Σ = Saᵀ diag(U1 + Uᵀ1) Sa − M − Mᵀ, M = Saᵀ U Sa.

Determinism: numba runs with ``parallel=False`` and ``fastmath=False``; every sum has a fixed
order, so one input gives one result, bit for bit, on one machine and BLAS thread count. Non-
finite input raises :class:`~dppca_dask.errors.InputError` before any arithmetic.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numba
import numpy as np

from dppca_dask.kernels.kendall import (
    DUPLICATE_SQ_THRESHOLD,
    NEAR_FLOOR,
    NEAR_RATIO,
    as_block,
    exact_pairs,
)

__all__ = ["PANEL_ROWS", "tile_fused"]

PANEL_ROWS = 256
"""Rows of A per panel: a 256 × b weight panel stays in L2/L3 (measured: docs/performance.md)."""


_SCRATCH = threading.local()


def _scratch(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A per-thread reusable buffer (contents undefined) of ``shape``.

    The kernel's tile-sized temporaries (several MiB each) are allocated once per thread and
    reused across tiles: fresh large allocations cost page faults, and Dask's nanny sets
    ``MALLOC_TRIM_THRESHOLD_``, which makes glibc map and unmap every one of them (measured:
    13 % slower kernels in worker processes; docs/performance.md).
    """
    arrays = _SCRATCH.__dict__.setdefault("arrays", {})
    size = math.prod(shape)
    buf = arrays.get(name)
    if buf is None or buf.size < size:
        buf = np.empty(size)
        arrays[name] = buf
    return buf[:size].reshape(shape)


def _shift_scale_into(a: np.ndarray, b: np.ndarray, diagonal: bool) -> tuple[np.ndarray, np.ndarray, float]:
    """The reference kernel's ``_shift_and_scale`` written into scratch buffers (same values)."""
    top = a.max(axis=0) if diagonal else np.maximum(a.max(axis=0), b.max(axis=0))
    bottom = a.min(axis=0) if diagonal else np.minimum(a.min(axis=0), b.min(axis=0))
    shift = top * 0.5 + bottom * 0.5
    sa = np.subtract(a, shift, out=_scratch("sa", a.shape))
    sb = sa if diagonal else np.subtract(b, shift, out=_scratch("sb", b.shape))
    largest = max(float(sa.max()), -float(sa.min()), float(sb.max()), -float(sb.min()))
    if largest == 0.0:
        return sa, sb, np.inf
    exponent = int(np.frexp(largest)[1])
    np.ldexp(sa, -exponent, out=sa)
    if not diagonal:
        np.ldexp(sb, -exponent, out=sb)
    with np.errstate(over="ignore"):
        floor = max(NEAR_FLOOR, 4.0 * float(np.ldexp(DUPLICATE_SQ_THRESHOLD, -2 * exponent)))
    return sa, sb, floor


_JIT: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy", "boundscheck": False}
# error_model="numpy": 1/0 gives inf instead of raising, so the division vectorises (0 never
# reaches it: such a pair is near).  No fastmath, no parallel: results are bit-reproducible.


@numba.njit(**_JIT)
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


@numba.njit(**_JIT)
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


def tile_fused(
    a: np.ndarray, b: np.ndarray | None = None, *, panel_rows: int = PANEL_ROWS
) -> tuple[np.ndarray, int]:
    """Fused partial sum and pair count of one tile; same result as ``tile_reference``.

    ``b is None``: the pairs i < j of ``a``; otherwise every pair in ``a × b``.

    Examples
    --------
    >>> from dppca_dask.kernels.kendall import tile_reference
    >>> x = np.random.default_rng(0).normal(size=(30, 4)) + 1e6
    >>> s, m = tile_fused(x)
    >>> m, bool(np.allclose(s, tile_reference(x)[0], rtol=0, atol=1e-12 * m))
    (435, True)
    """
    a = as_block(a)
    diagonal = b is None
    b = a if b is None else as_block(b)
    ra, p = a.shape
    rb = b.shape[0]
    count = ra * (ra - 1) // 2 if diagonal else ra * rb
    if count == 0:
        return np.zeros((p, p)), 0
    sa, sb, floor = _shift_scale_into(a, b, diagonal)
    na = np.einsum("ij,ij->i", sa, sa)
    nb = na if diagonal else np.einsum("ij,ij->i", sb, sb)
    sb1t = _scratch("sb1t", (p + 1, rb))  # [Sb | 1]ᵀ: rows 0..p-1 give (W Sb)ᵀ, row p gives W1
    sb1t[:p] = sb.T
    sb1t[p] = 1.0
    ytr = _scratch("ytr", (p + 1, ra))
    c = np.zeros(rb)
    step = max(1, int(panel_rows))
    buf = _scratch("panel", (min(step, ra) * rb,))
    near_a: list[np.ndarray] = []
    near_b: list[np.ndarray] = []
    for lo in range(0, ra, step):
        hi = min(lo + step, ra)
        col0 = lo if diagonal else 0  # a diagonal panel needs only the columns j ≥ lo
        g = buf[: (hi - lo) * (rb - col0)].reshape(hi - lo, rb - col0)
        np.matmul(sa[lo:hi], sb1t[:p, col0:], out=g)
        near = _weights_panel(g, na[lo:hi], nb[col0:], c[col0:], floor, diagonal)
        if near:
            mask = g == 0.0
            ii, jj = np.nonzero(np.triu(mask, 1) if diagonal else mask)
            near_a.append(ii + lo)
            near_b.append(jj + col0)
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
    if near_a:
        ii, jj = np.concatenate(near_a), np.concatenate(near_b)
        total += exact_pairs(b[jj], a[ii])
    return (total + total.T) / 2.0, count
