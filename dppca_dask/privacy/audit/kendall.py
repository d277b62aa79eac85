"""Audit of ``dp_loading``'s Kendall release on real neighbouring data (``bound="tight"``)."""

from __future__ import annotations

import math

import numpy as np

from dppca_dask.privacy.audit.bounds import AUDIT_ALPHA, AuditResult, event_bound
from dppca_dask.privacy.audit.scenarios import AUDIT_DELTA, AUDIT_EPS

__all__ = ["audit_kendall_release", "kendall_neighbours"]

_T = 1.11  # the event S > 1.11·Δ, as the Gaussian audits of scenarios.py (most powerful at × 0.9)


def _vech_star(m: np.ndarray) -> np.ndarray:
    """The isometric half-vectorisation: diagonal, then √2 × strict lower triangle."""
    rows, cols = np.tril_indices(m.shape[0], -1)
    return np.concatenate([np.diag(m), math.sqrt(2.0) * m[rows, cols]])


def kendall_neighbours(n: int = 40, p: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """A worst-case neighbouring pair for the Kendall release.

    D puts n points on the first axis; D' moves one of them far along the second axis, turning
    its n − 1 pair directions from e₁ to (almost) e₂: ‖K̂(D) − K̂(D')‖_F ≈ 2√2/n, the largest
    possible change (the seed's bound 4/n is not attained).
    """
    d = np.zeros((n, p))
    d[:, 0] = np.arange(n, dtype=np.float64)
    d_prime = d.copy()
    d_prime[0] = 0.0
    d_prime[0, 1 % p] = 1e9
    return d, d_prime


def audit_kendall_release(
    *, eps: float = AUDIT_EPS, delta: float = AUDIT_DELTA, n: int = 40, p: int = 3,
    reps: int = 30000, noise_factor: float = 1.0, alpha: float = AUDIT_ALPHA,
    rng: np.random.Generator,
) -> AuditResult:
    """Audit ``gaussian_symmetric_matrix`` as ``dp_loading`` uses it (``bound="tight"``).

    The Kendall matrices of :func:`kendall_neighbours` differ by exactly the tight sensitivity
    2√2/n; analytic calibration; statistic: the projection on their difference, in units of
    it; event S > 1.11 (one release per sample: about 0.5 ms each).
    """
    # Lazy, upward (privacy -> pca): the audit checks the release on the Kendall matrices the
    # estimator computes; a documented exception of tests/test_layout.py.
    from dppca_dask.pca.loading import kendall_sensitivity, spherical_kendall
    from dppca_dask.privacy.budget import PrivacyBudget
    from dppca_dask.privacy.mechanisms import gaussian_symmetric_matrix

    d, d_prime = kendall_neighbours(n, p)
    k_d, k_dp = spherical_kendall(d).values, spherical_kendall(d_prime).values
    direction = _vech_star(k_dp - k_d)
    change = float(np.linalg.norm(direction))
    direction /= change * change  # projection in units of the change
    budget = PrivacyBudget(eps, delta)
    sensitivity = kendall_sensitivity(n, bound="tight") * noise_factor

    def one(k):
        return _vech_star(gaussian_symmetric_matrix(
            k, sensitivity=sensitivity, budget=budget, calibration="analytic", rng=rng,
            component="audit").value - k_d) @ direction

    a = np.array([one(k_dp) for _ in range(reps)])
    b = np.array([one(k_d) for _ in range(reps)])
    return event_bound(a, b, threshold=_T, delta=delta, alpha=alpha)
