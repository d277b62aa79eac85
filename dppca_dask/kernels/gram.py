"""Per-block kernel of the private-covariance data pass (NumPy only; no Dask, no randomness).

The covariance estimators release functions of Σ(X) = XᵀX/n of the data *clipped* to public
per-variable bounds [−B_j, B_j] (docs/spec/SPEC_covariance.md §2): clipping is part of the mechanism, so it
happens here, inside the pass, before any product is formed. Summed over row blocks
(:func:`~dppca_dask.graph.passes.row_block_sum`) the block results give XᵀX and the column
sums of the clipped data (PACE-GGM's optional mean entries) and, only when the caller opts in,
the number of clipped values per variable (a non-private diagnostic).

:func:`row_norm_counts` is the pass before a private row-clipping radius: the count of rows whose
L2 norm lies below each point of a public grid (the private quantile search runs on the driver).
"""

from __future__ import annotations

import numpy as np

from dppca_dask.kernels.kendall import check_finite_block

__all__ = ["ROW_SHRINK", "clipped_gram", "row_clipped_gram", "row_norm_counts", "row_norms"]

ROW_SHRINK = 1.0 - 2.0 ** -40
"""A clipped row is scaled to norm R·(1 − 2^-40), so floating-point rounding of the scaling
(a few ulp) can never leave it above R: the sensitivity bound needs ‖x‖ ≤ R exactly."""


def clipped_gram(
    block: np.ndarray, bounds: np.ndarray, count_clipped: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Cᵀ C, column sums of C, clipped counts) of the block C = clip(block, −bounds, bounds).

    The counts (values with |x_j| > B_j, per variable) are zeros unless ``count_clipped``.

    Examples
    --------
    >>> gram, sums, count = clipped_gram(np.array([[3.0, -1.0], [0.5, 2.0]]),
    ...                                  np.array([1.0, 1.0]), count_clipped=True)
    >>> gram.tolist(), sums.tolist(), count.tolist()
    ([[1.25, -0.5], [-0.5, 2.0]], [1.5, 0.0], [1, 1])
    """
    values = np.ascontiguousarray(block, dtype=np.float64)
    check_finite_block(values)
    clipped = np.clip(values, -bounds, bounds)
    if count_clipped:
        count = np.count_nonzero(np.abs(values) > bounds, axis=0).astype(np.int64)
    else:
        count = np.zeros(values.shape[1], dtype=np.int64)
    return clipped.T @ clipped, clipped.sum(axis=0), count


def row_clipped_gram(
    block: np.ndarray, radius: float, count_clipped: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Cᵀ C, column sums of C, clipped counts) of the block whose rows are scaled to L2 norm at
    most ``radius`` (Analyze-Gauss row clipping: x → x·min(1, R/‖x‖); docs/design/
    covariance_sensitivity.md, "Row clipping").

    A row with ‖x‖ > R is scaled to norm R·:data:`ROW_SHRINK` (so ‖x‖ ≤ R holds in floating
    point); other rows are unchanged. The counts (per variable: non-zero values in rows that
    were scaled, i.e. the values clipping changed) are zeros unless ``count_clipped``.

    Examples
    --------
    >>> gram, sums, count = row_clipped_gram(np.array([[3.0, 4.0], [0.5, 0.0]]), 1.0,
    ...                                      count_clipped=True)
    >>> np.round(gram, 6).tolist(), np.round(sums, 6).tolist(), count.tolist()
    ([[0.61, 0.48], [0.48, 0.64]], [1.1, 0.8], [1, 1])
    """
    values = np.ascontiguousarray(block, dtype=np.float64)
    check_finite_block(values)
    norms = np.sqrt(np.einsum("ij,ij->i", values, values))
    over = norms > radius
    factor = np.ones_like(norms)
    factor[over] = (radius * ROW_SHRINK) / norms[over]
    clipped = values * factor[:, None]
    if count_clipped:
        count = np.count_nonzero(values[over] != 0, axis=0).astype(np.int64)
    else:
        count = np.zeros(values.shape[1], dtype=np.int64)
    return clipped.T @ clipped, clipped.sum(axis=0), count


def row_norms(values: np.ndarray) -> np.ndarray:
    """The L2 norm of every row, without overflow or underflow of the squares: each row is
    divided by its largest |x_j| first (a row of zeros has norm 0; a norm beyond the largest
    double is inf).

    Examples
    --------
    >>> np.round(row_norms(np.array([[3e200, 4e200], [3e-200, -4e-200], [0.0, 0.0]])) /
    ...          np.array([1e200, 1e-200, 1.0]), 12).tolist()
    [5.0, 5.0, 0.0]
    """
    values = np.asarray(values, dtype=np.float64)
    top = np.max(np.abs(values), axis=1) if values.shape[1] else np.zeros(values.shape[0])
    safe = np.where(top > 0, top, 1.0)
    scaled = values / safe[:, None]
    with np.errstate(over="ignore"):
        return safe * np.sqrt(np.einsum("ij,ij->i", scaled, scaled)) * (top > 0)


def row_norm_counts(block: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``counts[i] = #{rows x of the block : ‖x‖₂ < grid[i]}`` (strict; ``grid`` increasing).

    Examples
    --------
    >>> row_norm_counts(np.array([[3.0, 4.0], [0.0, 1.0], [0.0, 0.0]]),
    ...                 np.array([0.5, 1.0, 5.0, 6.0])).tolist()
    [1, 1, 2, 3]
    """
    values = np.ascontiguousarray(block, dtype=np.float64)
    check_finite_block(values)
    first_above = np.searchsorted(grid, row_norms(values), side="right")  # grid[i] > ‖x‖
    return np.cumsum(np.bincount(first_above, minlength=grid.size + 1)[:grid.size])
