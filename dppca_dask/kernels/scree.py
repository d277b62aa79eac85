"""Per-block kernels of ``dp_scree`` (NumPy only; no Dask, no randomness, no budget).

Every function takes one row block and small public arguments (the released directions, a
public centre, public grids and levels) and returns a small exact aggregate -- per-component
sums, or integer counts -- so that summing blocks gives the whole-data statistic
(docs/spec/SPEC_dppca.md §5). Scores are computed by :func:`scores` with elementwise operations in column
order (no BLAS), so a row's score, and hence every count below, is bit-identical however the rows
are chunked. Functions that depend on a row's position take the block's first global row index
``start`` (the PMWM half split, the Huber consecutive pairs).

Notation: y = scores (n_b × k), c = centre (k,), w = (y − c)².
"""

from __future__ import annotations

import numpy as np

from dppca_dask.kernels.counts import signed_count_below
from dppca_dask.kernels.scores import project as scores

__all__ = [
    "clipped_sums",
    "huber_sums",
    "m2_bin",
    "m2_counts",
    "radius_stats",
    "score_sums",
    "scores",
    "signed_counts",
    "squared",
    "winsor_sums",
]


def squared(y: np.ndarray, center: np.ndarray) -> np.ndarray:
    """w = (y − c)² per component."""
    d = np.asarray(y, dtype=np.float64) - np.asarray(center, dtype=np.float64)
    return d * d


def _rows(start: int, size: int, begin: int, stop: int) -> slice:
    """The local slice of rows whose global index lies in [begin, stop)."""
    lo = min(max(begin - start, 0), size)
    hi = min(max(stop - start, 0), size)
    return slice(lo, max(lo, hi))


def score_sums(y: np.ndarray) -> np.ndarray:
    """Σ y per component (for the empirical centre)."""
    return np.asarray(y, dtype=np.float64).sum(axis=0)


def radius_stats(
    y: np.ndarray, center: np.ndarray, grid: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-bin statistics of d_i = y_i − m and r_i = ‖d_i‖₂ on a public grid of radii.

    Returns ``(hist, inside, scaled)``: ``hist[j]`` counts the rows whose radius falls in bin j
    (bin j = [grid[j−1], grid[j]), bin 0 below grid[0], bin G at or above the last point);
    ``inside[j]`` = Σ d_i and ``scaled[j]`` = Σ d_i / r_i over those rows (0 where r_i = 0).
    Cumulative sums give, for every grid radius R, the count #{r < R} (the Durfee search) and the
    sum of the ball-clipped vectors Σ d_i·min(1, R/r_i), without another pass.
    """
    d = np.asarray(y, dtype=np.float64) - np.asarray(center, dtype=np.float64)
    r2 = np.zeros(d.shape[0])
    for col in range(d.shape[1]):  # fixed order: chunking-independent
        r2 += d[:, col] * d[:, col]
    r = np.sqrt(r2)
    grid = np.asarray(grid, dtype=np.float64)
    bins = np.searchsorted(grid, r, side="right")
    size = grid.size + 1
    hist = np.bincount(bins, minlength=size)
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = np.where(r[:, None] > 0, d / r[:, None], 0.0)
    inside = np.stack([np.bincount(bins, weights=d[:, c], minlength=size)
                       for c in range(d.shape[1])], axis=1)
    scaled = np.stack([np.bincount(bins, weights=unit[:, c], minlength=size)
                       for c in range(d.shape[1])], axis=1)
    return hist, inside, scaled


def clipped_sums(y: np.ndarray, center: np.ndarray, clip: float) -> np.ndarray:
    """Σ min(w, C) per component (method "clipped", SPEC §5.2)."""
    return np.minimum(squared(y, center), clip).sum(axis=0)


def signed_counts(
    y: np.ndarray,
    start: int,
    center: np.ndarray,
    grid: np.ndarray,
    beta: float,
    begin: int,
    stop: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Both sides of the two-sided Durfee counts of w over the rows in [begin, stop).

    Shapes (k, len(grid)) each: the quantile set of method "pmwm" (SPEC §5.4, §5.5b).
    """
    rows = _rows(start, len(y), begin, stop)
    w = squared(np.asarray(y)[rows], center)
    return signed_count_below(w, np.asarray(grid, dtype=np.float64), beta)


def winsor_sums(
    y: np.ndarray,
    start: int,
    center: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    begin: int,
    stop: int,
) -> np.ndarray:
    """Σ clip(w, L, U) per component over the rows in [begin, stop) (the PMWM mean set)."""
    rows = _rows(start, len(y), begin, stop)
    w = squared(np.asarray(y)[rows], center)
    return np.clip(w, np.asarray(lower), np.asarray(upper)).sum(axis=0)


def m2_bin(u: np.ndarray, k_min: int, k_max: int) -> np.ndarray:
    """Histogram bin offset of each block median: clamp(⌊log₂ u⌋, k_min, k_max) − k_min.

    u = 0 goes to k_min; negative or non-finite u gives −1 (skipped), as SPEC §5.3 says.

    Examples
    --------
    >>> m2_bin(np.array([0.0, 0.3, 1.0, 5.0, 1e9, -1.0]), -3, 3).tolist()
    [0, 1, 3, 5, 6, -1]
    """
    u = np.asarray(u, dtype=np.float64)
    out = np.full(u.shape, -1, dtype=np.int64)
    ok = np.isfinite(u) & (u >= 0)
    positive = ok & (u > 0)
    with np.errstate(divide="ignore"):
        kappa = np.floor(np.log2(np.where(positive, u, 1.0)))
    kappa = np.clip(kappa, k_min, k_max)
    out[positive] = (kappa[positive] - k_min).astype(np.int64)
    out[ok & (u == 0)] = 0
    return out


def m2_counts(
    y: np.ndarray,
    start: int,
    center: np.ndarray,
    k_min: int,
    k_max: int,
    bounds: np.ndarray,
) -> np.ndarray:
    """Counts of the m₂ histogram over the pair blocks inside this row block (method "huber").

    ``bounds`` are the public global row boundaries of the pair blocks (SPEC §5.3): block j holds
    the rows [bounds[j], bounds[j+1]), an even number of consecutive rows (2i, 2i+1), 0-based,
    each pair giving s_i = (w_2i − w_2i+1)²/2. The row blocks of the pass are cut on these
    boundaries, so every pair block lies inside one row block; its median falls in one dyadic
    bin per component. Rows at or after bounds[-1] (the unpaired last row of an odd n) are
    ignored. Returns (k, k_max − k_min + 1) integer counts.
    """
    y = np.asarray(y, dtype=np.float64)
    k = y.shape[1]
    out = np.zeros((k, k_max - k_min + 1), dtype=np.int64)
    bounds = np.asarray(bounds, dtype=np.int64)
    end = start + y.shape[0]
    first = int(np.searchsorted(bounds, start, side="left"))
    for j in range(first, len(bounds) - 1):
        lo, hi = int(bounds[j]), int(bounds[j + 1])
        if hi > end:
            break
        w = squared(y[lo - start : hi - start], center)
        s = (w[0::2] - w[1::2]) ** 2 / 2.0
        bins = m2_bin(np.median(s, axis=0), k_min, k_max)
        for comp, b in enumerate(bins):
            if b >= 0:
                out[comp, b] += 1
    return out


def huber_sums(
    y: np.ndarray, center: np.ndarray, mu: np.ndarray, tau: np.ndarray
) -> np.ndarray:
    """Σ clip(w − μ, −τ, τ) per component (one noisy gradient step of method "huber")."""
    w = squared(y, center)
    tau = np.asarray(tau, dtype=np.float64)
    return np.clip(w - np.asarray(mu, dtype=np.float64), -tau, tau).sum(axis=0)

