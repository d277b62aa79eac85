"""Post-processing of released values: free under differential privacy, no budget, no data.

Eigen-decomposition with ordering by decreasing eigenvalue (SPEC_dppca.md §4.4) and sign
alignment of a non-private reference basis (§4.5).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

__all__ = ["align_signs", "ordered_eigh"]


def ordered_eigh(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues and eigenvectors of a symmetric matrix, by decreasing algebraic eigenvalue.

    Uses LAPACK ``dsyevr`` (R's ``eigen(symmetric=TRUE)``); no re-orthonormalisation (§4.4).

    Examples
    --------
    >>> w, v = ordered_eigh(np.diag([1.0, 3.0, 2.0]))
    >>> w.tolist()
    [3.0, 2.0, 1.0]
    """
    sym = (np.asarray(matrix, dtype=np.float64) + np.asarray(matrix, dtype=np.float64).T) / 2.0
    values, vectors = scipy.linalg.eigh(sym, driver="evr")
    return values[::-1].copy(), vectors[:, ::-1].copy()


def align_signs(basis: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Negate each column of ``basis`` whose inner product with ``reference``'s is negative.

    Examples
    --------
    >>> align_signs(np.eye(2), -np.eye(2)).tolist()
    [[-1.0, -0.0], [-0.0, -1.0]]
    """
    inner = np.einsum("ij,ij->j", basis, reference)
    return basis * np.where(inner < 0, -1.0, 1.0)
