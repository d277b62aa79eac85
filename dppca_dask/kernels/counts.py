"""Per-block counting kernels on fixed public grids (NumPy only; no Dask, no randomness).

The Durfee quantile search (docs/spec/SPEC_dppca.md §5.5b) needs, for each public grid point t_i, the count
#{x_j < t_i} (strict). One pass over the data yields every count at once; the noisy search then
runs on the driver over the count vector.
"""

from __future__ import annotations

import numpy as np

from dppca_dask.kernels.kendall import check_finite_block

__all__ = ["count_below", "signed_count_below"]


def count_below(values: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``counts[..., i] = #{v : v < points[i]}`` for each column of ``values`` (strict).

    ``values`` is 1-D, or 2-D with one count vector per column; ``points`` is non-decreasing.

    Examples
    --------
    >>> count_below(np.array([0.0, 1.0, 1.0, 3.0]), np.array([0.5, 1.0, 2.0, 10.0])).tolist()
    [1, 1, 3, 4]
    """
    values = np.asarray(values, dtype=np.float64)
    check_finite_block(values)
    points = np.asarray(points, dtype=np.float64)
    m = points.size
    columns = values[:, None] if values.ndim == 1 else values
    out = np.empty((columns.shape[1], m), dtype=np.int64)
    for c in range(columns.shape[1]):
        first_above = np.searchsorted(points, columns[:, c], side="right")  # points[i] > v
        hist = np.bincount(first_above, minlength=m + 1)[:m]
        out[c] = np.cumsum(hist)
    return out[0] if values.ndim == 1 else out


def signed_count_below(
    values: np.ndarray, points: np.ndarray, beta: float
) -> tuple[np.ndarray, np.ndarray]:
    """Counts for both sides of the two-sided Durfee quantile (Durfee 2023, Algorithm 4).

    Positive side: ``y = max(βx + β − 1, 0)``; negative side: ``y = max(−βx + β − 1, 0)``; each
    counted below ``points`` (the grid β^i − 1, i = 1, 2, …) as docs/spec/SPEC_dppca.md §5.5b states.
    """
    values = np.asarray(values, dtype=np.float64)
    check_finite_block(values)
    pos = np.maximum(beta * values + beta - 1.0, 0.0)
    neg = np.maximum(-beta * values + beta - 1.0, 0.0)
    return count_below(pos, points), count_below(neg, points)
