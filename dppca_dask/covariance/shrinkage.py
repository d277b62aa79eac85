"""Shrinkage of a noisy SSP release: ``dp_covariance(method="auto")`` (post-processing only).

The SSP mechanism releases Y = Σ̃ + W in normalised units, where W is exactly a scaled GOE
matrix: i.i.d. N(0, σ²) on the isometric vech (``mechanisms.gaussian_zcdp_symmetric``), i.e. sd σ
on the diagonal and τ = σ/√2 off it, with σ public (the record's ``scale``). Every function here
is a deterministic function of Y and σ -- post-processing of the release, no budget, no data.

``auto_estimate`` averages two classical shrinkage estimators and projects onto [0, 1]-diagonal
PSD matrices:

* **A (entrywise)**: the off-diagonal entries shrunk towards 0 by one positive-part
  James--Stein weight w = (1 − (m − 2)τ²/‖Y_off‖²)₊ over the m = d(d−1)/2 pairs (James & Stein
  1961), the diagonal shrunk towards its own mean by the Efron--Morris weight
  (1 − (d − 3)σ²/Σ(Y_jj − Ȳ)²)₊ (Efron & Morris 1973);
* **B (spectral)**: each eigenvalue λ of Y replaced by the Frobenius-optimal shrinker of the spiked
  Wigner model, θ·(1 − dτ²/θ²)₊ with θ = (λ + √(λ² − 4dτ²))/2 for λ above the bulk edge
  2τ√d and 0 below it (Baik, Ben Arous & Péché 2005; Donoho, Gavish & Johnstone 2018,
  Ann. Statist. 46(4)), then the Efron--Morris diagonal of A.

A wins on well-conditioned matrices whose spectrum lies inside the noise bulk, B on
approximately low-rank ones. Their average is never worse than the worse of the two in Frobenius
or Mahalanobis error (both losses are convex in the estimate: ‖(A + B)/2 − Σ‖ ≤ (‖A − Σ‖ +
‖B − Σ‖)/2) and the average of two PSD matrices is PSD. Measured in benchmarks/covariance.py
(docs/design/covariance_sensitivity.md, "method='auto'").
"""

from __future__ import annotations

import math

import numpy as np

from dppca_dask.covariance.maxent import psd_project

__all__ = ["auto_estimate", "efron_morris_diagonal", "james_stein_offdiagonal",
           "spectral_shrink"]


def james_stein_offdiagonal(y: np.ndarray, tau: float) -> float:
    """The positive-part James--Stein weight of the off-diagonal entries of ``y`` (towards 0).

    Examples
    --------
    >>> y = np.array([[1.0, 0.1, 0.0], [0.1, 1.0, 0.1], [0.0, 0.1, 1.0]])
    >>> james_stein_offdiagonal(y, 0.0), james_stein_offdiagonal(y, 10.0)
    (1.0, 0.0)
    """
    d = y.shape[0]
    off = y[np.triu_indices(d, 1)]
    m = off.size
    if m <= 2:
        return 1.0
    energy = float(np.sum(off * off))
    if energy <= 0.0:
        return 0.0
    return max(0.0, 1.0 - (m - 2) * tau * tau / energy)


def efron_morris_diagonal(y: np.ndarray, sigma: float) -> np.ndarray:
    """The diagonal of ``y`` shrunk towards its mean (positive-part Efron--Morris), in [0, 1].

    Examples
    --------
    >>> efron_morris_diagonal(np.diag([0.5, 0.7, 0.6, 0.6]), 10.0).round(6).tolist()
    [0.6, 0.6, 0.6, 0.6]
    >>> efron_morris_diagonal(np.diag([0.5, 0.7, 0.6, 0.6]), 0.0).round(6).tolist()
    [0.5, 0.7, 0.6, 0.6]
    """
    diag = np.diag(y).astype(np.float64)
    d = diag.size
    mean = float(diag.mean())
    spread = float(np.sum((diag - mean) ** 2))
    if d <= 3:
        weight = 1.0
    elif spread <= 0.0:
        weight = 0.0
    else:
        weight = max(0.0, 1.0 - (d - 3) * sigma * sigma / spread)
    return np.clip(mean + weight * (diag - mean), 0.0, 1.0)


def spectral_shrink(y: np.ndarray, tau: float) -> np.ndarray:
    """``y`` with every eigenvalue replaced by the spiked-Wigner Frobenius shrinker (GOE noise of
    off-diagonal sd ``tau``): 0 inside the bulk [−2τ√d, 2τ√d], θ(1 − dτ²/θ²) above it.

    Examples
    --------
    >>> y = np.diag([3.0, 0.1])
    >>> spectral_shrink(y, 0.0).round(12).tolist()
    [[3.0, 0.0], [0.0, 0.1]]
    >>> bool(np.allclose(spectral_shrink(y, 0.5)[1, 1], 0.0))
    True
    """
    d = y.shape[0]
    vals, vecs = np.linalg.eigh((y + y.T) / 2.0)
    t2 = tau * tau * d
    edge = 2.0 * math.sqrt(t2)
    shrunk = np.zeros_like(vals)
    above = vals > edge
    theta = (vals[above] + np.sqrt(vals[above] ** 2 - 4.0 * t2)) / 2.0
    shrunk[above] = theta * np.maximum(0.0, 1.0 - t2 / theta**2)
    out = (vecs * shrunk) @ vecs.T
    return (out + out.T) / 2.0


def auto_estimate(y: np.ndarray, sigma: float) -> np.ndarray:
    """The ``method="auto"`` estimate from the noisy normalised SSP matrix ``y`` whose diagonal
    noise sd is ``sigma`` (off-diagonal σ/√2): the PSD average of the entrywise and the spectral
    shrinkage estimates (module docstring). Post-processing only.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> truth = np.array([[0.5, 0.2], [0.2, 0.5]])
    >>> est = auto_estimate(truth, 0.0)
    >>> bool(np.allclose(est, truth))
    True
    >>> bool(np.all(np.linalg.eigvalsh(auto_estimate(rng.normal(size=(5, 5)), 1.0)) >= -1e-12))
    True
    """
    y = (y + y.T) / 2.0
    tau = sigma / math.sqrt(2.0)
    diag = efron_morris_diagonal(y, sigma)
    entrywise = y * james_stein_offdiagonal(y, tau)
    np.fill_diagonal(entrywise, diag)
    spectral = spectral_shrink(y, tau)
    np.fill_diagonal(spectral, diag)
    out = 0.5 * psd_project(entrywise) + 0.5 * psd_project(spectral)
    return (out + out.T) / 2.0
