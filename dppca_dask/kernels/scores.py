"""Per-block score kernels for ``dp_score`` (NumPy only; no Dask, no randomness).

Every function takes one row block of X (n_b × p) and small public arguments (the two released
directions, public grids, the released frame) and returns exact integer counts, so that summing
the blocks in any order gives the same answer (docs/spec/SPEC_dppca.md §6.1, §6.3, §6.5):

* :func:`project` -- the scores s_i = (x_iᵀv_a, x_iᵀv_b), summed over the variables in a fixed
  order so a row's score does not depend on how the rows are chunked;
* :func:`center_counts` -- both sides of the two-sided Durfee search for each axis;
* :func:`radius_counts` -- #{|s_i − c| < t} for each axis on the one-sided grid;
* :func:`signed_log_counts`, :func:`window_counts`, :func:`distance_log_counts` -- the ranged
  frame's three passes (counts below the points of :mod:`dppca_dask.kernels.grids`);
* :func:`bin_counts` -- 2-D histogram counts on the released frame (optionally per group; the
  group codes ride along as the last column of the block).
"""

from __future__ import annotations

import numpy as np

from dppca_dask.kernels.counts import count_below, signed_count_below
from dppca_dask.kernels.grids import log_points, signed_log_points, window_points
from dppca_dask.kernels.kendall import check_finite_block

__all__ = ["bin_counts", "bin_index", "center_counts", "distance_log_counts", "project",
           "radius_counts", "signed_log_counts", "window_counts"]


def project(block: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """Scores of the rows of ``block`` on the columns of ``directions`` (p × m).

    The sum over variables runs in column order with elementwise operations (no BLAS), so each
    row's result is bit-identical whatever the row chunking, and each score column is the same
    whatever other columns are computed beside it. ``directions`` may instead be m integer
    positions: ``block`` then already holds scores (kept by
    :func:`~dppca_dask.graph.kept_scores.keep_scores`) and those columns are returned as they
    are.

    Examples
    --------
    >>> project(np.array([[1.0, 2.0], [3.0, 4.0]]), np.eye(2)[:, ::-1]).tolist()
    [[2.0, 1.0], [4.0, 3.0]]
    >>> project(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1])).tolist()
    [[2.0], [4.0]]
    """
    block = np.asarray(block, dtype=np.float64)
    if np.issubdtype(np.asarray(directions).dtype, np.integer):
        return block[:, np.asarray(directions, dtype=np.intp)]  # X was checked when kept
    check_finite_block(block)
    v = np.asarray(directions, dtype=np.float64)
    out = np.zeros((block.shape[0], v.shape[1]), dtype=np.float64)
    for j in range(block.shape[1]):
        out += block[:, j : j + 1] * v[j]
    return out


def center_counts(
    block: np.ndarray, directions: np.ndarray, grid: np.ndarray, beta: float
) -> tuple[np.ndarray, np.ndarray]:
    """Positive- and negative-side Durfee counts, shape (2, len(grid)) each (one row per axis)."""
    return signed_count_below(project(block, directions), grid, beta)


def radius_counts(
    block: np.ndarray, directions: np.ndarray, centers: np.ndarray, grid: np.ndarray
) -> np.ndarray:
    """``out[a, i] = #{|s_ia − c_a| < grid[i]}``, shape (2, len(grid))."""
    dist = np.abs(project(block, directions) - np.asarray(centers, dtype=np.float64))
    return count_below(dist, grid)


def bin_index(values: np.ndarray, breaks: np.ndarray) -> np.ndarray:
    """0-based bin of each value: ``clip(#{breaks < v} − 1, 0, m − 1)`` with m = len(breaks) − 1.

    Bins are (b_j, b_{j+1}] with the first one closed (R ``cut(right=TRUE,
    include.lowest=TRUE)``); values outside the breaks are clamped into the edge bins.

    Examples
    --------
    >>> bin_index(np.array([-5.0, 0.0, 0.5, 1.0, 1.5, 9.0]), np.array([0.0, 1.0, 2.0])).tolist()
    [0, 0, 0, 0, 1, 1]
    """
    m = len(breaks) - 1
    below = np.searchsorted(np.asarray(breaks, dtype=np.float64), values, side="left")
    return np.clip(below - 1, 0, m - 1)


def bin_counts(
    block: np.ndarray,
    directions: np.ndarray,
    x_breaks: np.ndarray,
    y_breaks: np.ndarray,
    n_groups: int = 0,
) -> np.ndarray:
    """Cell counts on the grid, shape (max(n_groups, 1), m_y, m_x).

    With ``n_groups > 0`` the last column of ``block`` holds each row's group code (0-based, in
    level order) and is not a variable.
    """
    block = np.asarray(block, dtype=np.float64)
    if n_groups > 0:
        codes = block[:, -1].astype(np.int64)
        block = block[:, :-1]
    else:
        codes = np.zeros(block.shape[0], dtype=np.int64)
    s = project(block, directions)
    mx, my = len(x_breaks) - 1, len(y_breaks) - 1
    jx = bin_index(s[:, 0], x_breaks)
    jy = bin_index(s[:, 1], y_breaks)
    g = max(n_groups, 1)
    flat = np.bincount((codes * my + jy) * mx + jx, minlength=g * my * mx)
    return flat.reshape(g, my, mx)


def signed_log_counts(block: np.ndarray, directions: np.ndarray, steps: int,
                      octaves: int) -> np.ndarray:
    """``out[a, i] = #{s_ia < P[i]}`` on P = :func:`~dppca_dask.kernels.grids.signed_log_points`
    (the ranged frame's first centre pass), shape (2, len(P))."""
    return count_below(project(block, directions), signed_log_points(steps, octaves))


def window_counts(block: np.ndarray, directions: np.ndarray, lows: tuple[float, float],
                  widths: tuple[float, float], parts: int) -> np.ndarray:
    """``out[a, k] = #{s_ia < W_a[k]}`` on each axis's released window W_a =
    :func:`~dppca_dask.kernels.grids.window_points` (``lows[a]``, ``widths[a]``, ``parts``),
    shape (2, parts + 1): the ranged frame's second centre pass."""
    s = project(block, directions)
    return np.stack([count_below(s[:, a], window_points(lows[a], widths[a], parts))
                     for a in range(2)])


def distance_log_counts(block: np.ndarray, directions: np.ndarray, centers: np.ndarray,
                        steps: int, octaves: int) -> np.ndarray:
    """``out[a, i] = #{|s_ia − c_a| < t_i}`` on t = :func:`~dppca_dask.kernels.grids.log_points`,
    shape (2, len(t)): the ranged frame's scale pass."""
    return radius_counts(block, directions, centers, log_points(steps, octaves))
