"""The floating-point membership attack (Mironov 2012) and the broken float baselines it must catch.

:func:`audit_float_membership` tests whether the released double is an exact product
fl(scale·x), which a textbook float sampler reveals at s = 0.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dppca_dask.privacy.audit.bounds import AuditResult, epsilon_lower_bound

__all__ = ["FLOAT_AUDITS", "audit_float_membership", "float_product_hits", "naive_gaussian",
           "naive_laplace"]


def naive_laplace(value: np.ndarray, *, scale: float, rng: np.random.Generator) -> np.ndarray:
    """BROKEN BASELINE, never use: the textbook float Laplace fl(s + scale·X) (Mironov 2012)."""
    value = np.asarray(value, dtype=np.float64)
    return value + scale * rng.laplace(0.0, 1.0, size=value.shape)


def naive_gaussian(value: np.ndarray, *, scale: float, rng: np.random.Generator) -> np.ndarray:
    """BROKEN BASELINE, never use: the textbook float Gaussian fl(s + σ·Z)."""
    value = np.asarray(value, dtype=np.float64)
    return value + scale * rng.standard_normal(size=value.shape)


def float_product_hits(released: np.ndarray, scale: float, width: int = 2) -> np.ndarray:
    """Whether each released double equals fl(scale·x) for some double x near r/scale.

    A float sampler that returns fl(0 + scale·X) always hits; after adding s ≠ 0 the rounding of
    the sum mostly leaves that set. Post-processing of the output only, so a DP mechanism's hit
    rates differ by at most its ε.

    Examples
    --------
    >>> float_product_hits(np.array([3.0 * 0.32, 3.960299175473342]), 3.0).tolist()
    [True, False]
    """
    r = np.asarray(released, dtype=np.float64).ravel()
    x = r / scale
    lo = hi = x
    hit = x * scale == r
    for _ in range(width):
        lo, hi = np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)
        hit |= (lo * scale == r) | (hi * scale == r)
    return hit


def _float_release(
    name: str, eps: float, delta: float, sensitivity: float
) -> tuple[Callable, float]:
    from dppca_dask.privacy.accounting import gaussian_sigma
    from dppca_dask.privacy.budget import PrivacyBudget
    from dppca_dask.privacy.mechanisms import gaussian_release, laplace_release

    sigma = gaussian_sigma(sensitivity, eps, delta, "analytic")
    b = sensitivity / eps
    if name == "laplace_release":
        return (lambda v, rng: laplace_release(v, sensitivity=sensitivity, eps=eps, rng=rng,
                                               component="audit").value), b
    if name == "gaussian_release":
        budget = PrivacyBudget(eps, delta)
        return (lambda v, rng: gaussian_release(v, sensitivity=sensitivity, budget=budget,
                                                calibration="analytic", rng=rng,
                                                component="audit").value), sigma
    if name == "naive_laplace":
        return lambda v, rng: naive_laplace(v, scale=b, rng=rng), b
    if name == "naive_gaussian":
        return lambda v, rng: naive_gaussian(v, scale=sigma, rng=rng), sigma
    raise ValueError(f"Unknown floating-point audit {name!r}.")


FLOAT_AUDITS = ("laplace_release", "gaussian_release", "naive_laplace", "naive_gaussian")


def audit_float_membership(
    name: str, *, eps: float = 1.0, delta: float = 1e-5, sensitivity: float = 3.0,
    samples: int = 20000, alpha: float = 0.05, rng: np.random.Generator,
) -> AuditResult:
    """The membership attack on a Laplace/Gaussian release at s = 0 vs s = Δ.

    The statistic is the hit indicator of :func:`float_product_hits` with the claimed noise
    scale (Δ = 3 by default so that the Laplace scale Δ/ε is no power of two, for which every
    double would be a product); the release is drawn ``samples`` times per neighbour (as one
    vector). ``name`` is a shipped mechanism of :data:`FLOAT_AUDITS` or a broken baseline
    (``naive_*``). Claim: ε (at δ for the Gaussian); the shipped ones must stay within it.
    """
    release, scale = _float_release(name, eps, delta, sensitivity)
    zero = np.zeros(samples)
    hits_d = float_product_hits(release(zero, rng), scale)
    hits_dp = float_product_hits(release(zero + sensitivity, rng), scale)
    return epsilon_lower_bound(hits_d.astype(float), hits_dp.astype(float),
                               delta=0.0 if name.endswith("laplace") else delta, alpha=alpha)
