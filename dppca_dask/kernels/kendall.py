"""Per-tile spherical Kendall kernels (NumPy in, NumPy out; no Dask, no randomness).

A tile is a pair of row blocks (A, B). Its partial sum is Σ u uᵀ over the pairs it owns, with
u = (b − a)/‖b − a‖: every (a, b) ∈ A × B for an off-diagonal tile, and the pairs i < j of A for
a diagonal tile (``B is None``). Summed over the tiles I ≤ J and divided by the number of pairs it
gives K̂ = 2/(n(n−1)) Σ_{i<j} u_ij u_ijᵀ (docs/spec/SPEC_dppca.md §4.1).

Two kernels with identical mathematics:

* :func:`tile_reference` -- difference vectors, normalise, accumulate Uᵀ U; O(p²) per pair.
  Plain and obviously correct; ``cpp_option=False`` selects it.
* :func:`tile_blas_unfused` -- the BLAS-3 rewrite of docs/spec/ARCHITECTURE.md §3, unfused (Gram →
  distances → reciprocals → sums → two GEMMs as separate NumPy steps over b×b temporaries); kept
  as the benchmark baseline and a second oracle. The fast path is the fused kernel of
  :mod:`dppca_dask.kernels.kendall_fused`. Mathematics: with w_ij = 1/‖a_i − b_j‖²:
  Σ w (a−b)(a−b)ᵀ = Aᵀ diag(W1) A + Bᵀ diag(Wᵀ1) B − Aᵀ W B − (Aᵀ W B)ᵀ; O(p) per pair.

Numerical scheme of the Gram path (both BLAS kernels; :func:`shift_and_scale`)
-------------------------------------------------------------------------------
*Shift.* Each tile is translated by its *centre* m, the coordinate-wise lower median of a strided
sample of at most ``SHIFT_SAMPLE`` rows of its blocks (a data value, so no arithmetic on it; a
pure function of the tile's data, so the kernels stay deterministic), then scaled by a power of
two to max |x̃| < 1 (no overflow for any finite input; exact for normal numbers). Both are exact
transformations of K̂ (translation and scale invariance) up to the rounding of x − m, below.
The centre matters because cancellation is judged against it: a pair is *near* when both points
are far from m compared to their distance. The tile's mid-range (max + min)/2 used before is set
by the two most extreme values, which on heavy-tailed data or with a few outliers lie far from
the bulk, so 79–98 % of all pairs were near (t(1.5), 1 % outliers at 1e3; docs/performance.md
§1b); the median (breakdown point 1/2) stays in the bulk whatever the tails, and two bulk
points are about as far from each other as from the centre (s/d ≈ 1–4 below).
``centre="midrange"`` keeps the old shift for the benchmark's before/after comparison only.

*Near test and its error bound.* With x̃ the shifted, scaled rows, n = ‖x̃‖², s = n_a + n_b,
g = ã·b̃ and d = s − 2g = ‖ã − b̃‖², floating-point evaluation (unit roundoff u = 2⁻⁵³, any
summation order, γ_k = ku/(1 − ku)) gives |ñ − n| ≤ γ_p n, |g̃ − g| ≤ γ_p Σ_k |ã_k b̃_k| ≤ γ_p s/2,
hence for d̃ = fl(fl(ñ_a + ñ_b) − 2g̃):  |d̃ − d| ≤ u|d̃| + ε_p s + 4p·2⁻¹⁰⁷⁴ with
ε_p = (2p + 2)u(1 + O(pu)) (the last term: products below the normal range). A pair takes the
Gram path only if d̃ > τ s̃ + F, τ = ``NEAR_RATIO`` = 2⁻¹⁰, F ≥ ``NEAR_FLOOR`` = 2⁻⁹⁰⁰. Then
s < d̃/τ (1 + O(pu)) and 4p·2⁻¹⁰⁷⁴ < p·2⁻¹⁷² d̃, so

    |d̃ − d| ≤ ρ_p d̃,   ρ_p = 2¹⁰ (2p + 3) u (1 + O(pu))   (1.1e-13·(2p + 3): 2.6e-12 at p = 10)

for every pair the Gram path keeps -- the bound is stated in the shifted values the test sees, so
it holds for any centre. The pair's weight 1/d̃ is then within ρ_p/(1 − ρ_p) relative, and its
expansion terms aaᵀ, bbᵀ, abᵀ are at most s/d < 2¹⁰ times its own uuᵀ (trace 1), so it adds at
most 2¹⁰ times a unit term's rounding to the GEMM sums. That is the worst case (Wilkinson
bounds, a pair right at the threshold); a pair loses about log2(s/d) bits, and with a robust
centre s/d ≈ 1–4 for nearly every pair, so the observed error is ~1e-16 of the matrix scale
(tests require 1e-12 on Gaussian, t(1.5), t(3), outliers at 1e3 and 1e6, clustered and near-
duplicate data). Pairs failing the test (or with a non-finite d̃) are *near*: they are taken out
of W and recomputed by :func:`exact_pairs` from the *original* rows, in chunks of at most
``max(1, NEAR_CHUNK_ELEMENTS // p)`` pairs, so the kernels' memory does not grow with the number
of near pairs.

*Shift rounding.* fl(x − m) = (x − m)(1 + δ), |δ| ≤ u per coordinate: the Gram path sums the
exact terms of rows moved by at most u|x − m|, i.e. a kept pair's difference vector by at most
u·sqrt(2s) ≤ u·sqrt(2¹¹ d) (45u relative) and its unit vector by ≤ 90u. If x − m overflows (a
tile spanning more than the float range) the halved values x/2 − m/2 are used (exact).

*Duplicates.* F = max(``NEAR_FLOOR``, 4 × the duplicate threshold in scaled units): a kept pair
has d ≥ (1 − ρ_p) F, more than the threshold even after the shift rounding, so every duplicate
(‖b − a‖² ≤ eps, SPEC §4.2) is a near pair and :func:`exact_pairs` raises
:class:`~dppca_dask.errors.DuplicateObservationError` for it. ``NEAR_FLOOR`` only keeps the
bound clear of the subnormal range; it is far below any distance that occurs in practice.

Both raise :class:`~dppca_dask.errors.DuplicateObservationError` for a pair with squared distance
at most machine epsilon (SPEC §4.2) and :class:`~dppca_dask.errors.InputError` for non-finite
input, from inside the data pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dppca_dask.errors import DuplicateObservationError, InputError

__all__ = [
    "DUPLICATE_SQ_THRESHOLD",
    "NEAR_CHUNK_ELEMENTS",
    "NEAR_FLOOR",
    "NEAR_RATIO",
    "SHIFT_SAMPLE",
    "TileStats",
    "check_finite_block",
    "near_chunk_pairs",
    "shift_and_scale",
    "tile_blas_unfused",
    "tile_centre",
    "tile_reference",
]

Centre = Literal["median", "midrange"]

DUPLICATE_SQ_THRESHOLD = float(np.finfo(np.float64).eps)  # ‖d‖ ≤ sqrt(eps) ⇔ ‖d‖² ≤ eps
_DUPLICATE_NORM = float(np.sqrt(DUPLICATE_SQ_THRESHOLD))
NEAR_RATIO = 2.0**-10
"""Pairs with ‖a−b‖² ≤ NEAR_RATIO·(‖a‖²+‖b‖²) (after the shift) are recomputed exactly."""
NEAR_FLOOR = 2.0**-900
"""Squared-distance floor (scaled units, max |x̃| < 1) below which a pair is always recomputed:
keeps the error bound of the Gram path clear of underflow (4p·2⁻¹⁰⁷⁴ ≪ 2⁻⁹⁰⁰·u). A relative
floor: a pair below it is 2⁻⁴⁵⁰ of the tile's extent apart."""
SHIFT_SAMPLE = 1024
"""At most this many rows (a fixed stride over both blocks) give the tile's median centre:
O(SHIFT_SAMPLE·p) per tile (≈ 0.5 ms at p = 100) instead of O(b·p) for the full median."""
NEAR_CHUNK_ELEMENTS = 2**16
"""Near pairs are recomputed in chunks of max(1, NEAR_CHUNK_ELEMENTS // p) pairs: each of the
exact path's chunk × p temporaries is at most 512 KiB, for any number of near pairs."""

NONFINITE_MESSAGE = "The 'X' parameter must contain only finite, non-missing values."


@dataclass(slots=True)
class TileStats:
    """Counters a kernel adds to when given ``stats=``: diagnostics only, never results.

    ``pairs``: pairs of the tiles seen; ``near``: pairs recomputed exactly (near, duplicate or
    non-finite d̃); ``chunks``: exact-path batches; ``largest_chunk``: the most pairs in one;
    ``switched``: tiles (or pieces) the fused kernel ran on local centres (grouped, or
    restarted with per-panel centres); ``groups``: the local centres of its grouped passes.
    """

    pairs: int = 0
    near: int = 0
    chunks: int = 0
    largest_chunk: int = 0
    switched: int = 0
    groups: int = 0

    @property
    def near_fraction(self) -> float:
        return self.near / self.pairs if self.pairs else 0.0

    def add_chunk(self, size: int) -> None:
        self.near += size
        self.chunks += 1
        self.largest_chunk = max(self.largest_chunk, size)


def near_chunk_pairs(p: int, near_chunk: int | None = None) -> int:
    """Pairs per exact-path chunk: ``near_chunk`` if given, else NEAR_CHUNK_ELEMENTS // p."""
    if near_chunk is not None:
        return max(1, int(near_chunk))
    return max(1, NEAR_CHUNK_ELEMENTS // max(1, p))


def check_finite_block(block: np.ndarray) -> None:
    """Raise :class:`InputError` if ``block`` holds NaN or ±inf."""
    # The sum is finite whenever every entry is (unless it overflows): a cheap first test that
    # allocates nothing block-sized; the elementwise test decides otherwise.
    with np.errstate(over="ignore"):
        if np.size(block) and np.isfinite(np.sum(block)):
            return
    if not np.isfinite(block).all():
        bad = int(np.size(block) - np.count_nonzero(np.isfinite(block)))
        raise InputError(f"{NONFINITE_MESSAGE} Got {bad} non-finite value(s) in a row block.")


def as_block(block: np.ndarray) -> np.ndarray:
    out = np.ascontiguousarray(block, dtype=np.float64)
    check_finite_block(out)
    return out


def exact_pairs(b_rows: np.ndarray, a_rows: np.ndarray) -> np.ndarray:
    """Σ u uᵀ over the pairs (a_rows[k], b_rows[k]) (broadcast), rejecting duplicates.

    Overflow-safe for any finite input: differences are taken of halved values (exact for normal
    numbers) and each difference vector is scaled by its largest entry before squaring; the
    duplicate test ‖b − a‖² ≤ eps is evaluated on the original scale.
    """
    half = b_rows * 0.5 - a_rows * 0.5
    size = np.abs(half).max(axis=1) if half.size else np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = half / size[:, None]
    squared = np.einsum("ij,ij->i", unit, unit)
    # ‖b − a‖ = 2·size·sqrt(squared) ≤ sqrt(eps), evaluated without squaring size (and without
    # multiplying it: 2·size overflows for differences near the float range).
    if size.size and not (size > (0.5 * _DUPLICATE_NORM) / np.sqrt(squared)).all():
        raise DuplicateObservationError()
    return unit.T @ (unit / squared[:, None])


def tile_centre(a: np.ndarray, b: np.ndarray | None = None, centre: Centre = "median") -> np.ndarray:
    """The shift of a tile: the coordinate-wise lower median of a strided row sample (or the
    mid-range, ``centre="midrange"``: the old shift, kept for comparisons).

    Examples
    --------
    >>> x = np.array([[0.0, 1.0], [1.0, 2.0], [2.0, 3.0], [1e9, -1e9]])
    >>> tile_centre(x).tolist(), tile_centre(x, centre="midrange").tolist()
    ([1.0, 1.0], [500000000.0, -499999998.5])
    """
    if centre == "midrange":
        top = a.max(axis=0) if b is None else np.maximum(a.max(axis=0), b.max(axis=0))
        bottom = a.min(axis=0) if b is None else np.minimum(a.min(axis=0), b.min(axis=0))
        return top * 0.5 + bottom * 0.5  # no overflow, inside the range
    if centre != "median":
        raise ValueError(f"unknown centre {centre!r}")
    rows = a.shape[0] + (0 if b is None else b.shape[0])
    step = -(-rows // SHIFT_SAMPLE)
    sample = a[::step] if b is None else np.concatenate([a[::step], b[::step]])
    k = (sample.shape[0] - 1) // 2
    return np.partition(sample, k, axis=0)[k]


def shift_and_scale(
    a: np.ndarray,
    b: np.ndarray | None,
    *,
    centre: Centre = "median",
    out_a: np.ndarray | None = None,
    out_b: np.ndarray | None = None,
    shift: np.ndarray | None = None,
    extra: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Shift the tile to its centre and scale by a power of two to max |x̃| < 1.

    ``b is None``: a diagonal tile (the second result is the first). Writes into ``out_a`` /
    ``out_b`` when given (the fused kernel's scratch buffers). ``shift``: use this centre
    instead of :func:`tile_centre` (the fused kernel's per-panel centres; any finite vector is
    overflow-safe here). ``extra``: float64 rows shifted and scaled in place the same way (they
    do not set the scale, so they may exceed 1 or overflow: the fused kernel's pivots, for its
    labels only). Returns the scaled blocks and the near-pair floor F (module
    docstring): the duplicate threshold in scaled units times 4, at least ``NEAR_FLOOR``;
    ``inf`` when every row equals the centre (all pairs duplicates).
    """
    shift = tile_centre(a, b, centre) if shift is None else shift
    blocks = [(a, out_a)] if b is None else [(a, out_a), (b, out_b)]
    with np.errstate(over="ignore"):
        shifted = [np.subtract(x, shift, out=out) for x, out in blocks]
    largest = max(max(float(s.max()), -float(s.min())) for s in shifted)
    halved = 0
    if not math.isfinite(largest):  # x − m overflowed: shift the halved values (exact)
        halved = 1
        half_shift = shift * 0.5
        for s, (x, _) in zip(shifted, blocks, strict=True):
            np.multiply(x, 0.5, out=s)
            s -= half_shift
        largest = max(max(float(s.max()), -float(s.min())) for s in shifted)
    sa = shifted[0]
    sb = sa if b is None else shifted[1]
    exponent = int(np.frexp(largest)[1]) if largest > 0.0 else 0
    if extra is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            if halved:
                np.multiply(extra, 0.5, out=extra)
                extra -= shift * 0.5
            else:
                extra -= shift
            np.ldexp(extra, -exponent, out=extra)
    if largest == 0.0:
        return sa, sb, np.inf
    for s in shifted:
        np.ldexp(s, -exponent, out=s)
    with np.errstate(over="ignore"):
        duplicate = 4.0 * float(np.ldexp(DUPLICATE_SQ_THRESHOLD, -2 * (exponent + halved)))
    return sa, sb, max(NEAR_FLOOR, duplicate)


def tile_reference(a: np.ndarray, b: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Reference partial sum and pair count of one tile (``b is None``: pairs i < j of ``a``).

    Examples
    --------
    >>> s, m = tile_reference(np.array([[0.0, 0.0], [3.0, 4.0]]))
    >>> m, s.round(2).tolist()
    (1, [[0.36, 0.48], [0.48, 0.64]])
    """
    a = as_block(a)
    p = a.shape[1]
    total = np.zeros((p, p))
    if b is None:
        for i in range(a.shape[0] - 1):
            total += exact_pairs(a[i + 1 :], a[i])
        return total, a.shape[0] * (a.shape[0] - 1) // 2
    b = as_block(b)
    for i in range(a.shape[0]):
        total += exact_pairs(b, a[i])
    return total, a.shape[0] * b.shape[0]


def _weights(
    sa: np.ndarray, sb: np.ndarray, na: np.ndarray, nb: np.ndarray, floor: float
) -> tuple[np.ndarray, np.ndarray]:
    """Reciprocal squared distances W (near pairs zeroed) and the near-pair mask."""
    scale = na[:, None] + nb[None, :]
    sq = sa @ sb.T
    sq *= -2.0
    sq += scale
    near = ~((sq > NEAR_RATIO * scale + floor) & (sq < np.inf))  # non-finite d̃: near
    with np.errstate(divide="ignore"):
        w = np.reciprocal(sq)
    w[near] = 0.0
    return w, near


def exact_pairs_chunked(
    b: np.ndarray, a: np.ndarray, jj: np.ndarray, ii: np.ndarray, chunk: int,
    stats: TileStats | None = None,
) -> np.ndarray:
    """Σ u uᵀ over the pairs (a[ii[k]], b[jj[k]]) by :func:`exact_pairs`, ``chunk`` at a time."""
    total = np.zeros((a.shape[1], a.shape[1]))
    for lo in range(0, ii.size, chunk):
        hi = min(lo + chunk, ii.size)
        total += exact_pairs(b[jj[lo:hi]], a[ii[lo:hi]])
        if stats is not None:
            stats.add_chunk(hi - lo)
    return total


def tile_blas_unfused(
    a: np.ndarray,
    b: np.ndarray | None = None,
    *,
    centre: Centre = "median",
    near_chunk: int | None = None,
    stats: TileStats | None = None,
) -> tuple[np.ndarray, int]:
    """Unfused BLAS-3 partial sum and pair count of one tile; same result as ``tile_reference``.

    ``centre``, ``near_chunk`` (pairs per exact-path chunk) and ``stats`` (a :class:`TileStats`
    to add to) are for benchmarks and tests; the defaults are the production settings.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(30, 4))
    >>> bool(np.allclose(tile_blas_unfused(x)[0], tile_reference(x)[0], rtol=1e-12, atol=1e-13))
    True
    """
    a = as_block(a)
    diagonal = b is None
    b = a if b is None else as_block(b)
    sa, sb, floor = shift_and_scale(a, None if diagonal else b, centre=centre)
    na = np.einsum("ij,ij->i", sa, sa)
    nb = na if diagonal else np.einsum("ij,ij->i", sb, sb)
    w, near = _weights(sa, sb, na, nb, floor)
    if diagonal:
        np.fill_diagonal(w, 0.0)
        np.fill_diagonal(near, False)
        near = np.triu(near, 1)
        # W is symmetric with both triangles filled; each unordered pair counted once:
        # Σ_{i<j} w (a_i−a_j)(a_i−a_j)ᵀ = Aᵀ diag(W1) A − Aᵀ W A.
        r = w.sum(axis=1)
        total = sa.T @ (sa * r[:, None]) - sa.T @ (w @ sa)
        count = a.shape[0] * (a.shape[0] - 1) // 2
    else:
        r = w.sum(axis=1)
        c = w.sum(axis=0)
        m = sa.T @ (w @ sb)
        total = sa.T @ (sa * r[:, None]) + sb.T @ (sb * c[:, None]) - m - m.T
        count = a.shape[0] * b.shape[0]
    if stats is not None:
        stats.pairs += count
    ii, jj = np.nonzero(near)
    if ii.size:
        total += exact_pairs_chunked(b, a, jj, ii, near_chunk_pairs(a.shape[1], near_chunk), stats)
    return (total + total.T) / 2.0, count
