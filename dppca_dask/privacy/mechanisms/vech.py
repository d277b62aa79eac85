"""The isometric vech of a symmetric matrix (docs/spec/SPEC_dppca.md §4.3): how the matrix
mechanisms (:func:`~dppca_dask.privacy.mechanisms.gaussian.gaussian_symmetric_matrix`,
:func:`~dppca_dask.privacy.mechanisms.zcdp.gaussian_zcdp_symmetric`) lay p(p+1)/2 noisy values
out as a matrix and back. No randomness here."""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "mat2vec",
    "vec2mat",
]


def _strict_lower(p: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the strict lower triangle in column-major order ((2,1), (3,1), …)."""
    rows, cols = np.tril_indices(p, -1)
    order = np.lexsort((rows, cols))  # sort by column, then row
    return rows[order], cols[order]


def vec2mat(values: np.ndarray, p: int) -> np.ndarray:
    """Lay ``p(p+1)/2`` values out as a symmetric matrix (docs/spec/SPEC_dppca.md §4.3).

    The first ``p`` values form the diagonal; the rest fill the strict lower triangle in
    column-major order ((2,1), (3,1), …, (p,1), (3,2), …) divided by √2, mirrored to the upper
    triangle. With i.i.d. N(0, σ²) input, ‖E‖_F² ~ σ²χ²_q (the vech/√2 isometry).

    Examples
    --------
    >>> vec2mat(np.arange(1.0, 7.0), 3) * np.sqrt(2)  # doctest: +NORMALIZE_WHITESPACE
    array([[1.41421356, 4.        , 5.        ],
           [4.        , 2.82842712, 6.        ],
           [5.        , 6.        , 4.24264069]])
    """
    values = np.asarray(values, dtype=np.float64)
    q = p * (p + 1) // 2
    if values.shape != (q,):
        raise ValueError(f"vec2mat needs {q} values for p = {p}; got shape {values.shape}.")
    out = np.diag(values[:p])
    rows, cols = _strict_lower(p)
    off = values[p:] / math.sqrt(2.0)
    out[rows, cols] = off
    out[cols, rows] = off
    return out


def mat2vec(matrix: np.ndarray) -> np.ndarray:
    """The isometric vech of a symmetric matrix, the inverse of :func:`vec2mat`: the diagonal,
    then √2 × the strict lower triangle in column-major order (‖vech‖₂ = ‖matrix‖_F).

    Examples
    --------
    >>> m = vec2mat(np.arange(1.0, 7.0), 3)
    >>> bool(np.allclose(mat2vec(m), np.arange(1.0, 7.0)))
    True
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    rows, cols = _strict_lower(matrix.shape[0])
    return np.concatenate([np.diag(matrix), math.sqrt(2.0) * matrix[rows, cols]])
