"""The exact law of each audit's event under a mechanism whose noise is scaled by a factor f.

Each function returns (p, q) = (P[E | D], P[E | D']) for the event that the audit's scenario
(:mod:`dppca_dask.privacy.audit.scenarios`) tests, computed from the mechanism's documented
noise law, not from samples: :func:`~dppca_dask.privacy.audit.bounds.detection_power` turns it
into the audit's power against the f-scaled copy and its default sample count.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import integrate, stats

__all__ = [
    "above_threshold_stops",
    "discrete_gaussian_pmf",
    "discrete_laplace_sf",
    "exponential_event",
    "gaussian_event",
    "laplace_event",
]


def gaussian_event(shift: float, sigma: float, threshold: float) -> tuple[float, float]:
    """Event S > t for S = shift + N(0, σ²) under D and N(0, σ²) under D' (the lattice
    Gaussians' grids are below 2^-30 of σ: continuous to that precision)."""
    return (float(stats.norm.sf((threshold - shift) / sigma)),
            float(stats.norm.sf(threshold / sigma)))


def laplace_event(shift: float, scale: float) -> tuple[float, float]:
    """Event Y ≥ shift for Y = shift + Laplace(b) under D and Laplace(b) under D' (the corner
    where the loss is largest: ratio e^{shift/b})."""
    return 0.5, 0.5 * math.exp(-shift / scale)


def discrete_laplace_sf(k: int, scale: float) -> float:
    """P[Z ≥ k] for Z discrete Laplace, P(z) ∝ exp(−|z|/b): q^k/(1 + q) for k ≥ 1, q = e^{−1/b}.

    Examples
    --------
    >>> round(discrete_laplace_sf(0, 2.0) + discrete_laplace_sf(1, 2.0), 12)  # P[Z ≥ 0] + P[Z ≤ −1]
    1.0
    """
    q = math.exp(-1.0 / scale)
    if k >= 1:
        return q ** k / (1 + q)
    return 1.0 - q ** (1 - k) / (1 + q)


def discrete_gaussian_pmf(s2: float, width: float = 40.0) -> tuple[np.ndarray, np.ndarray]:
    """Support and pmf of the discrete Gaussian N_Z(0, s²), P(z) ∝ exp(−z²/(2s²)), cut at
    ``width``·s (the mass beyond is below 1e-300)."""
    s = math.sqrt(s2)
    z = np.arange(-math.ceil(width * s) - 1, math.ceil(width * s) + 2)
    w = np.exp(-(z.astype(np.float64) ** 2) / (2.0 * s2))
    return z, w / w.sum()


def exponential_event(eps: float, candidates: int, f: float) -> tuple[float, float]:
    """Candidate 0 chosen, scores 0 (D) vs (−1, +1, …, +1) (D'), sensitivity f·1 at ε."""
    return 1.0 / candidates, 1.0 / (1.0 + (candidates - 1) * math.exp(eps / f))


def above_threshold_stops(counts: np.ndarray, threshold: float, eps: float, index: int) -> float:
    """P[:func:`~dppca_dask.privacy.mechanisms.above_threshold` stops at ``index``] by
    quadrature over the noisy threshold τ = T + Exp(λ), λ = ε/2: step i passes with probability
    1 − e^{−λ(τ − c_i)₊} and stops with the rest."""
    lam = eps / 2.0
    c = np.asarray(counts, dtype=np.float64)

    def density(u: float) -> float:
        tau = threshold + u
        stop = np.exp(-lam * np.maximum(tau - c, 0.0))
        return float(lam * math.exp(-lam * u) * np.prod(1.0 - stop[:index]) * stop[index])

    end = 80.0 / lam  # e^{-80} of the threshold's mass lies beyond
    knots = sorted({float(v) - threshold for v in c if 0.0 < float(v) - threshold < end})
    edges = [0.0, *knots, end]
    return float(sum(integrate.quad(density, lo, hi, limit=200, epsabs=1e-15)[0]
                     for lo, hi in itertools.pairwise(edges)))
