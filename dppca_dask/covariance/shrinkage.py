"""Shrinkage of a noisy SSP release: ``dp_covariance(method="auto")`` (post-processing only).

The SSP mechanism releases Y = Σ̃ + W in normalised units, where W is exactly a scaled GOE
matrix: i.i.d. N(0, σ²) on the isometric vech (``mechanisms.gaussian_zcdp_symmetric``), i.e. sd σ
on the diagonal and τ = σ/√2 off it, with σ public (the record's ``scale``). Every function here
is a deterministic function of Y and σ -- post-processing of the release, no budget, no data.

``auto_estimate`` mixes two shrinkage estimates by how much off-diagonal signal the release
shows, and keeps the result PSD with its diagonal in [0, 1]:

* **A (entrywise)**: the off-diagonal entries hard-thresholded at the universal threshold
  τ·√(2 ln m) over the m = d(d−1)/2 pairs (Donoho & Johnstone 1994; Bickel & Levina 2008), so
  a strong pair keeps its full size -- shrinking it would lift the near-null direction of a
  nearly collinear pair -- and pure-noise pairs go to 0; the diagonal shrunk towards its own
  mean by the Efron--Morris weight (1 − (d − 3)σ²/Σ(Y_jj − Ȳ)²)₊ (Efron & Morris 1973); then
  the PSD projection;
* **S (spectral, capped)**: Y's eigenvectors with each eigenvalue λ replaced by
  min(ξ, max(λ, 0)), ξ the rotationally invariant estimator for additive Wigner noise (Bun,
  Allez, Bouchaud & Potters 2016), then the congruence D·S·D (D ≥ 1) that raises any variance
  the shrinkage took below A's diagonal back to it. The cap never lifts a direction above raw
  SSP's PSD projection, so it keeps the near-null directions of a nearly singular Σ (which the
  Mahalanobis error divides by) where SSP has them (the congruence after it rescales variables,
  which can move a near-null direction: that step is measured, not bounded);
* the estimate is w·S + (1 − w)·A, w = (1 − (m − 2)τ²/‖Y_off‖²)₊ the positive-part
  James--Stein weight of the off-diagonal entries (James & Stein 1961): S where the release
  shows off-diagonal structure (w near 1), A -- the diagonal-like estimate that wins on nearly
  independent variables -- where it shows none. A convex combination of PSD matrices is PSD,
  and both losses are convex, so it is never worse than the worse of S and A. A final
  congruence caps any variance above 1.

Measured in benchmarks/covariance.py (docs/design/covariance_sensitivity.md, "method='auto'").
"""

from __future__ import annotations

import math

import numpy as np

from dppca_dask.covariance.maxent import psd_project

__all__ = ["auto_estimate", "efron_morris_diagonal", "james_stein_offdiagonal",
           "match_diagonal", "spectral_rie", "universal_threshold"]


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


def universal_threshold(x: np.ndarray, tau: float) -> np.ndarray:
    """``x`` (m entries, each observed with independent N(0, τ²) noise) hard-thresholded at the
    universal threshold t = τ·√(2 ln m): entries with |x| > t are kept as they are, the rest set
    to 0 (Donoho & Johnstone 1994, Biometrika 81(3); for covariance entries Bickel & Levina
    2008, Ann. Statist. 36(6)). Pure noise exceeds t with probability → 0 as m grows, and a kept
    entry is not shrunk, so a strong pair keeps its full size.

    Examples
    --------
    >>> universal_threshold(np.array([10.0, -0.1, 0.2, -10.0]), 0.0).tolist()
    [10.0, -0.1, 0.2, -10.0]
    >>> universal_threshold(np.array([10.0, -0.1, 0.2, 0.05, -10.0]), 0.3).tolist()
    [10.0, 0.0, 0.0, 0.0, -10.0]
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0 or tau <= 0.0:
        return x.copy()
    t = float(tau) * math.sqrt(2.0 * math.log(max(x.size, 2)))
    return np.where(np.abs(x) > t, x, 0.0)


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


def spectral_rie(y: np.ndarray, tau: float) -> np.ndarray:
    """``y`` with its eigenvectors kept and each eigenvalue λ_k replaced by
    min(ξ_k, max(λ_k, 0)), ξ_k the rotationally invariant estimator of u_kᵀΣ̃u_k for additive GOE
    noise of off-diagonal sd ``tau`` (Bun, Allez, Bouchaud & Potters 2016, IEEE Trans. Inf.
    Theory 62(12)): ξ_k = λ_k − 2s²·Re g(z_k) + η·Re g(z_k)/Im g(z_k), s² = dτ², g the
    empirical Stieltjes transform of the spectrum at z_k = λ_k + iη, η = τ (the identity
    ξ = Im(ω(z)g(z))/Im g(z), ω = z − s²g, in real arithmetic). The cap at max(λ, 0) -- the
    eigenvalue SSP's PSD projection keeps -- means no direction is lifted above raw SSP's, so
    the near-null directions that the Mahalanobis error divides by are never inflated.

    Examples
    --------
    >>> y = np.diag([3.0, 0.1])
    >>> spectral_rie(y, 0.0).round(12).tolist()
    [[3.0, 0.0], [0.0, 0.1]]
    >>> bool(spectral_rie(y, 0.5)[1, 1] <= 0.1)
    True
    """
    d = y.shape[0]
    vals, vecs = np.linalg.eigh((y + y.T) / 2.0)
    kept = np.maximum(vals, 0.0)
    if tau > 0.0:
        eta = float(tau)
        diff = vals[:, None] - vals[None, :]
        denom = diff * diff + eta * eta
        re_g = np.mean(diff / denom, axis=1)
        im_g = -eta * np.mean(1.0 / denom, axis=1)  # < 0: never zero for η > 0
        xi = vals - 2.0 * d * tau * tau * re_g + eta * re_g / im_g
        kept = np.minimum(np.maximum(xi, 0.0), kept)
    out = (vecs * kept) @ vecs.T
    return (out + out.T) / 2.0


def match_diagonal(s: np.ndarray, diag: np.ndarray) -> np.ndarray:
    """The congruence D·s·D (D diagonal, so PSD stays PSD) whose diagonal is ``diag`` where
    ``s``'s diagonal is positive (and 0 where it is not).

    Examples
    --------
    >>> match_diagonal(np.array([[4.0, 2.0], [2.0, 1.0]]), np.array([1.0, 1.0])).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    current = np.diag(s)
    safe = np.where(current > 0.0, current, 1.0)
    factor = np.where(current > 0.0, np.sqrt(np.maximum(diag, 0.0) / safe), 0.0)
    out = s * np.outer(factor, factor)
    return (out + out.T) / 2.0


def auto_estimate(y: np.ndarray, sigma: float) -> np.ndarray:
    """The ``method="auto"`` estimate from the noisy normalised SSP matrix ``y`` whose diagonal
    noise sd is ``sigma`` (off-diagonal σ/√2): w·S + (1 − w)·A, w the James--Stein weight of
    the off-diagonal entries, S the capped spectral estimate with any variance below the
    Efron--Morris diagonal raised to it, A the hard-thresholded entrywise estimate (module
    docstring); PSD with diagonal in [0, 1].
    Post-processing only.

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
    weight = james_stein_offdiagonal(y, tau)
    d = y.shape[0]
    upper = np.triu_indices(d, 1)
    entrywise = np.zeros_like(y)
    entrywise[upper] = universal_threshold(y[upper], tau)
    entrywise = entrywise + entrywise.T
    np.fill_diagonal(entrywise, diag)
    spectral = spectral_rie(y, tau)
    spectral = match_diagonal(spectral, np.maximum(diag, np.diag(spectral)))
    out = weight * spectral + (1.0 - weight) * psd_project(entrywise)
    return match_diagonal(out, np.minimum(np.diag(out), 1.0))  # caps any variance above 1
