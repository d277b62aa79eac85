"""Post-processing of released values: free under differential privacy, no budget, no data.

Eigen-decomposition with ordering by decreasing eigenvalue (docs/spec/SPEC_dppca.md §4.4), sign
alignment of a non-private reference basis (§4.5), and the scree post-processing of §5.1:
monotone (PAVA) smoothing and proportions of variance explained.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

__all__ = [
    "align_signs",
    "monotone_scree",
    "ordered_eigh",
    "pava_nonincreasing",
    "scree_to_pve",
]


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


def pava_nonincreasing(values: np.ndarray) -> np.ndarray:
    """Least-squares non-increasing fit with equal weights (pool adjacent violators).

    R's ``-isoreg(seq_along(x), -x)$yf`` (docs/spec/SPEC_dppca.md §5.1, §16).

    Examples
    --------
    >>> pava_nonincreasing(np.array([3.0, 1.0, 2.0, 0.5])).tolist()
    [3.0, 1.5, 1.5, 0.5]
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    means: list[float] = []
    sizes: list[int] = []
    for value in x:
        means.append(float(value))
        sizes.append(1)
        while len(means) > 1 and means[-2] < means[-1]:  # a violation of non-increase: pool
            size = sizes[-2] + sizes[-1]
            mean = (means[-2] * sizes[-2] + means[-1] * sizes[-1]) / size
            means[-2:] = [mean]
            sizes[-2:] = [size]
    return np.repeat(np.array(means), sizes)


def monotone_scree(values: np.ndarray) -> np.ndarray:
    """max(·, 0), then the non-increasing PAVA fit, then max(·, 0) again (SPEC §5.1 item 5).

    Examples
    --------
    >>> monotone_scree(np.array([1.1695147, 1.2228114])).round(7).tolist()
    [1.196163, 1.196163]
    """
    return np.maximum(pava_nonincreasing(np.maximum(np.asarray(values, dtype=np.float64), 0.0)),
                      0.0)


def scree_to_pve(values: np.ndarray) -> np.ndarray:
    """Proportions of variance explained over the k given values; zeros if the sum is not > 0.

    Examples
    --------
    >>> scree_to_pve(np.array([2.061105, 1.771498])).round(6).tolist()
    [0.537782, 0.462218]
    >>> scree_to_pve(np.zeros(2)).tolist()
    [0.0, 0.0]
    """
    x = np.asarray(values, dtype=np.float64)
    total = float(np.sum(x))
    if not np.isfinite(total) or total <= 0:
        return np.zeros_like(x)
    return x / total
