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
  Numerical care: a per-tile shift (the tile's column mid-ranges; exact because K̂ is translation
  invariant, and the subtraction itself is exact for values within a factor two of the shift by
  Sterbenz's lemma) and power-of-two scaling (scale invariance; no overflow for any finite
  input), and *near pairs* -- squared distances at most ``NEAR_RATIO`` of
  ‖a‖² + ‖b‖² after the shift, where the Gram identity loses digits -- are taken out of W and
  recomputed exactly from their difference vectors.

Both raise :class:`~dppca_dask.errors.DuplicateObservationError` for a pair with squared distance
at most machine epsilon (SPEC §4.2) and :class:`~dppca_dask.errors.InputError` for non-finite
input, from inside the data pass.
"""

from __future__ import annotations

import numpy as np

from dppca_dask.errors import DuplicateObservationError, InputError

__all__ = [
    "DUPLICATE_SQ_THRESHOLD",
    "NEAR_RATIO",
    "check_finite_block",
    "tile_blas_unfused",
    "tile_reference",
]

DUPLICATE_SQ_THRESHOLD = float(np.finfo(np.float64).eps)  # ‖d‖ ≤ sqrt(eps) ⇔ ‖d‖² ≤ eps
_DUPLICATE_NORM = float(np.sqrt(DUPLICATE_SQ_THRESHOLD))
NEAR_RATIO = 2.0**-10
"""Pairs with ‖a−b‖² ≤ NEAR_RATIO·(‖a‖²+‖b‖²) (after the shift) are recomputed exactly."""
NEAR_FLOOR = 1e-12
"""Absolute squared-distance floor below which a pair is always recomputed (covers duplicates
among rows that all sit near the shift)."""

NONFINITE_MESSAGE = "The 'X' parameter must contain only finite, non-missing values."


def check_finite_block(block: np.ndarray) -> None:
    """Raise :class:`InputError` if ``block`` holds NaN or ±inf."""
    # The sum is finite whenever every entry is (unless it overflows): a cheap first test that
    # allocates nothing block-sized; the elementwise test decides otherwise.
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
    # ‖b − a‖ = 2·size·sqrt(squared) ≤ sqrt(eps), evaluated without squaring size.
    if size.size and not (2.0 * size * np.sqrt(squared) > _DUPLICATE_NORM).all():
        raise DuplicateObservationError()
    return unit.T @ (unit / squared[:, None])


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
    near = sq <= NEAR_RATIO * scale + floor
    with np.errstate(divide="ignore"):
        w = np.reciprocal(sq)
    w[near] = 0.0
    return w, near


def _shift_and_scale(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Centre both blocks on the tile's mid-range and scale by a power of two to max |x| < 1.

    Both steps are exact transformations of K̂ (translation and scale invariance; scaling by
    2^-e is exact for normal numbers). Returns the scaled blocks and the near-pair floor: the
    duplicate threshold in scaled units (at least ``NEAR_FLOOR``).
    """
    both = np.concatenate([a, b]) if a is not b else a
    shift = both.max(axis=0) * 0.5 + both.min(axis=0) * 0.5  # no overflow, inside the range
    sa = a - shift
    sb = sa if b is a else b - shift
    largest = max(float(np.abs(sa).max(initial=0.0)), float(np.abs(sb).max(initial=0.0)))
    if largest == 0.0:
        return sa, sb, np.inf
    exponent = int(np.frexp(largest)[1])
    sa = np.ldexp(sa, -exponent)
    sb = sa if b is a else np.ldexp(sb, -exponent)
    with np.errstate(over="ignore"):
        floor = max(NEAR_FLOOR, 4.0 * float(np.ldexp(DUPLICATE_SQ_THRESHOLD, -2 * exponent)))
    return sa, sb, floor


def tile_blas_unfused(a: np.ndarray, b: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Unfused BLAS-3 partial sum and pair count of one tile; same result as ``tile_reference``.

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
    sa, sb, floor = _shift_and_scale(a, b)
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
    ii, jj = np.nonzero(near)
    if ii.size:
        total += exact_pairs(b[jj], a[ii])
    return (total + total.T) / 2.0, count

