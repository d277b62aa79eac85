"""Public grids of the equivariant score frame (NumPy only; no Dask, no randomness).

The ranged frame (:mod:`dppca_dask.pca.frame`, docs/design/frame.md) counts scores below the
points of three kinds of grid. Each is a pure function of a few public numbers, built
identically on the driver and in every block task (so the graph carries the numbers, not the
grids), and cached:

* :func:`log_points` -- 2^(i/s), i = −s·o … s·o: magnitudes from 2^−o to 2^o, s per octave;
  scaling the data by a power of 2^(1/s) moves every count by whole steps (units equivariance);
* :func:`signed_log_points` -- −log_points reversed, then log_points: both signs, no point at 0
  (the interval [−2^−o, 2^−o) holds 0);
* :func:`window_points` -- ``parts + 1`` evenly spaced points from ``low`` to ``low + width``: a
  window placed by an earlier release (a function of released values only).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["log_points", "signed_log_points", "window_points"]


@lru_cache(maxsize=16)
def _log_points(steps: int, octaves: int) -> np.ndarray:
    points = np.exp2(np.arange(-steps * octaves, steps * octaves + 1, dtype=np.float64) / steps)
    points.setflags(write=False)
    return points


def log_points(steps: int, octaves: int) -> np.ndarray:
    """2^(i/steps) for i = −steps·octaves … steps·octaves (read-only, cached).

    Examples
    --------
    >>> log_points(2, 1).tolist() == [0.5, 2 ** -0.5, 1.0, 2 ** 0.5, 2.0]
    True
    """
    return _log_points(int(steps), int(octaves))


@lru_cache(maxsize=16)
def _signed_log_points(steps: int, octaves: int) -> np.ndarray:
    magnitudes = _log_points(steps, octaves)
    points = np.concatenate([-magnitudes[::-1], magnitudes])
    points.setflags(write=False)
    return points


def signed_log_points(steps: int, octaves: int) -> np.ndarray:
    """−:func:`log_points` reversed, then :func:`log_points` (read-only, cached).

    Examples
    --------
    >>> signed_log_points(1, 1).tolist()
    [-2.0, -1.0, -0.5, 0.5, 1.0, 2.0]
    """
    return _signed_log_points(int(steps), int(octaves))


def window_points(low: float, width: float, parts: int) -> np.ndarray:
    """``low + width·k/parts`` for k = 0 … parts (the last point is ``low + width``).

    Examples
    --------
    >>> window_points(1.0, 2.0, 4).tolist()
    [1.0, 1.5, 2.0, 2.5, 3.0]
    """
    k = np.arange(int(parts) + 1, dtype=np.float64)
    return float(low) + float(width) * (k / int(parts))
