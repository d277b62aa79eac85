"""One worst-case neighbouring pair, statistic, event and exact law per mechanism.

Each :class:`MechanismAudit` releases the pair many times (``sample(f, n, rng)``: n releases per
neighbour, batched into one call wherever the mechanism takes an array: its noise is i.i.d. per
entry, so every entry of a batched release is one sample of the same law), reduces each release
to the Neyman–Pearson statistic of the pair and tests the event S > ``threshold``, fixed by the
design before any sample (the tail where the privacy loss of the × 0.9 copy is most
informative). ``f`` scales the noise: the sensitivity handed to the mechanism (or the budget
whose noise is f×) is multiplied by f. ``law(f)`` is the event's exact (P[E | D], P[E | D'])
(:mod:`~dppca_dask.privacy.audit.laws`), from which ``samples`` was chosen so that
:func:`run_audit` catches f = 0.9 with probability ≥ 1 − 1e-3 (:data:`~dppca_dask.privacy.audit.bounds.AUDIT_POWER`) at α = 1e-6 (or, where that
takes too long, the count and the factor it does catch are stated; docs/privacy.md, "Empirical
audit").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from dppca_dask.privacy.audit import laws
from dppca_dask.privacy.audit.bounds import (
    AUDIT_ALPHA,
    AUDIT_POWER,
    AuditResult,
    detection_power,
    event_bound,
)

__all__ = ["AUDITS", "AUDIT_DELTA", "AUDIT_EPS", "MechanismAudit", "run_audit",
           "weakest_caught_factor"]

AUDIT_EPS, AUDIT_DELTA = 1.0, 0.2
"""Public budget of the (ε, δ) Gaussian audits: a point of the Gaussian privacy curve (fixed by
Δ/σ, so any point tests the same calibration) where the × 0.9 copy is cheapest to catch (39 000
releases per neighbour; 140 000 at (1, 0.05))."""


@dataclass(frozen=True)
class MechanismAudit:
    """One mechanism's worst-case pair, statistic, event S > threshold and claim."""

    name: str
    family: str
    claimed_eps: float
    delta: float
    samples: int  # default number of releases per neighbour
    design: str
    sample: Callable[[float, int, np.random.Generator], tuple[np.ndarray, np.ndarray]]
    threshold: float
    law: Callable[[float], tuple[float, float]]

    def power(self, factor: float = 0.9, samples: int | None = None,
              alpha: float = AUDIT_ALPHA) -> float:
        """Exact probability that :func:`run_audit` shows the copy with noise × ``factor``
        above the claim."""
        p, q = self.law(factor)
        return detection_power(p, q, samples or self.samples, claim=self.claimed_eps,
                               delta=self.delta, alpha=alpha)


def _loop(call: Callable[[], float], n: int) -> np.ndarray:
    return np.array([call() for _ in range(n)], dtype=np.float64)


def _budget(eps: float = AUDIT_EPS, delta: float = AUDIT_DELTA):
    from dppca_dask.privacy.budget import PrivacyBudget

    return PrivacyBudget(eps, delta)


def _sigma() -> float:
    """σ of the analytic Gaussian at (AUDIT_EPS, AUDIT_DELTA) for Δ = 1 (grid-inflated)."""
    from dppca_dask.privacy.mechanisms import gaussian_release_sigma

    return gaussian_release_sigma(1.0, _budget(), "analytic")


def _zcdp_rho() -> float:
    """ρ whose Gaussian (Δ/σ = √(2ρ)) has ε = AUDIT_EPS at δ = AUDIT_DELTA on its exact curve."""
    from dppca_dask.privacy.accounting import analytic_gaussian_sigma

    return 0.5 / analytic_gaussian_sigma(1.0, AUDIT_EPS, AUDIT_DELTA) ** 2


_T_GAUSS = 1.11  # S > 1.11·Δ: the most powerful threshold against σ × 0.9 at (1, 0.2)


def _gauss_law(f: float) -> tuple[float, float]:
    return laws.gaussian_event(1.0, f * _sigma(), _T_GAUSS)


_U = np.array([0.6, 0.8])  # unit shift direction of the vector audits


def _s_gauss_scalar(f, n, rng):
    from dppca_dask.privacy.mechanisms import gaussian_release

    def one(v):
        return lambda: gaussian_release(v, sensitivity=f, budget=_budget(),
                                        calibration="analytic", rng=rng, component="audit").value
    return _loop(one(1.0), n), _loop(one(0.0), n)


def _s_gauss_vector(f, n, rng, zcdp=False):
    from dppca_dask.privacy.mechanisms import gaussian_release, gaussian_zcdp

    def rel(shift):  # n independent 2-vector releases in one call (noise is i.i.d. per entry)
        v = np.zeros((n, 2)) + shift * _U
        if zcdp:
            out = gaussian_zcdp(v, sensitivity=f, rho=_zcdp_rho(), rng=rng, component="audit")
        else:
            out = gaussian_release(v, sensitivity=f, budget=_budget(), calibration="analytic",
                                   rng=rng, component="audit")
        return np.asarray(out.value) @ _U
    return rel(1.0), rel(0.0)


_P = 100  # side of the batched symmetric matrices: q = 5050 released values per call


def _s_gauss_matrix(f, n, rng, zcdp=False):
    """p × p releases of S (vech*(S) = all ones: diagonal 1, off-diagonal 1/√2) vs 0; every
    coordinate of vech*(R) is one sample (diagonal and off-diagonal alike have sd σ there)."""
    from dppca_dask.privacy.mechanisms import (
        gaussian_symmetric_matrix,
        gaussian_zcdp_symmetric,
        mat2vec,
        vec2mat,
    )

    q = _P * (_P + 1) // 2
    calls = -(-n // q)

    def rel(m):
        if zcdp:
            return gaussian_zcdp_symmetric(m, sensitivity=f, rho=_zcdp_rho(), rng=rng,
                                           component="audit").value
        return gaussian_symmetric_matrix(m, sensitivity=f, budget=_budget(),
                                         calibration="analytic", rng=rng,
                                         component="audit").value

    def many(m):
        return np.concatenate([mat2vec(rel(m)) for _ in range(calls)])[:n]
    return many(vec2mat(np.ones(q), _P)), many(np.zeros((_P, _P)))


def _hist_law(f: float) -> tuple[float, float]:
    """Event B − A ≥ 3 of :func:`_s_gauss_histogram` (difference of two discrete Gaussians)."""
    from dppca_dask.privacy.mechanisms import histogram_noise_sigma

    z, w = laws.discrete_gaussian_pmf(histogram_noise_sigma(_hist_budget(f), "analytic") ** 2)
    diff = np.convolve(w, w)  # pmf of Z_B − Z_A on 2·z[0], …, 2·z[-1]
    support = np.arange(2 * z[0], 2 * z[-1] + 1)
    return float(diff[support + 2 >= _T_HIST].sum()), float(diff[support >= _T_HIST].sum())


_T_HIST = 2.5  # B − A ≥ 3 (an integer, shifted by 2): the exact curve is tight there (ε = 1)


def _hist_budget(f: float):
    """The budget whose histogram σ is f times the claimed one (the same budget at f = 1)."""
    from dppca_dask.privacy.mechanisms import histogram_noise_sigma

    budget = _budget()
    if f == 1.0:
        return budget
    target = f * histogram_noise_sigma(budget, "analytic")
    eps = optimize.brentq(lambda e: histogram_noise_sigma(_budget(e), "analytic") - target,
                          budget.eps, 50 * budget.eps)
    return _budget(eps)


def _s_gauss_histogram(f, n, rng):
    from dppca_dask.privacy.mechanisms import gaussian_histogram

    budget = _hist_budget(f)

    def rel(counts):  # n two-cell histograms (cells A, B) in one call
        out = gaussian_histogram(np.tile(counts, (n, 1)), budget=budget, calibration="analytic",
                                 rng=rng, component="audit").value
        return out[:, 1] - out[:, 0]
    return rel(np.array([49.0, 51.0])), rel(np.array([50.0, 50.0]))


def _laplace_loss(y: np.ndarray, s: np.ndarray, s_prime: np.ndarray, b: float) -> np.ndarray:
    """The privacy loss ln p_{s'}(y)/p_s(y) of i.i.d. Laplace(b) noise (the NP statistic).

    Rounded to 1e-9: its atom at the maximum would otherwise split by rounding patterns of the
    float release (a floating-point leak that the membership attack measures instead).
    """
    return np.round((np.abs(y - s) - np.abs(y - s_prime)).sum(axis=-1) / b, 9)


_EPS_LAPLACE = 2.0  # pure-ε audits at ε = 2: the × 0.9 copy is cheapest to catch near ε ≈ 2


def _s_laplace(f, n, rng):
    from dppca_dask.privacy.mechanisms import laplace_release

    b = 1.0 / _EPS_LAPLACE

    def rel(v):  # n scalar releases in one call: 0 vs Δ₁ = 1
        y = laplace_release(np.full((n, 1), v), sensitivity=f, eps=_EPS_LAPLACE, rng=rng,
                            component="audit").value
        return _laplace_loss(y, np.zeros(1), np.ones(1), b)
    return rel(1.0), rel(0.0)


_SPARSE_N = 1000
_CELLS_D, _CELLS_DP = np.array([49.0, 51.0]), np.array([50.0, 50.0])


def _two_cell_law(scale: float) -> tuple[float, float]:
    """The corner {y_A ≤ 49, y_B ≥ 51} of two discrete Laplace(b) cells: (49, 51) vs (50, 50)."""
    return laws.discrete_laplace_sf(0, scale) ** 2, laws.discrete_laplace_sf(1, scale) ** 2


def _hist_scale(f: float) -> float:
    from dppca_dask.privacy.mechanisms import geometric_histogram_scale

    return float(geometric_histogram_scale(_EPS_LAPLACE / f))  # 2f/ε rounded up


def _s_sparse(f, n, rng):
    from dppca_dask.privacy.mechanisms import stability_histogram

    budget = _budget(_EPS_LAPLACE, 1e-5)
    b = 2.0 / _EPS_LAPLACE / _SPARSE_N  # claimed scale in proportions (output units)

    def rel(counts):  # n two-cell histograms in one call: one draw per cell
        y = stability_histogram(np.tile(counts, (n, 1)), n=_SPARSE_N,
                                budget=_budget(budget.eps / f, budget.delta), rng=rng,
                                component="audit").value
        return _laplace_loss(y, _CELLS_DP / _SPARSE_N, _CELLS_D / _SPARSE_N, b)
    return rel(_CELLS_D), rel(_CELLS_DP)


def _s_geometric(f, n, rng):
    from dppca_dask.privacy.mechanisms import geometric_histogram

    b = 2.0 / _EPS_LAPLACE

    def rel(counts):  # n two-cell histograms in one call; ε/f gives the scale f·b
        y = geometric_histogram(np.tile(counts, (n, 1)), eps=_EPS_LAPLACE / f, rng=rng,
                                component="audit").value
        return _laplace_loss(y, _CELLS_DP, _CELLS_D, b)
    return rel(_CELLS_D), rel(_CELLS_DP)


_EPS_SMOOTH = 4.0  # claim ε/2 = 2 for the sliding half


def _s_smooth(f, n, rng):
    from dppca_dask.privacy.mechanisms import smooth_laplace

    budget = _budget(_EPS_SMOOTH, 1e-5)

    def one(v):
        return lambda: smooth_laplace(v, smooth_sensitivity=f, budget=budget, rng=rng,
                                      component="audit").value
    return _loop(one(1.0), n), _loop(one(0.0), n)


_EM_EPS, _EM_K = 3.0, 8  # the pair's ε is ln(1/K + (1 − 1/K)e^ε) (2.874; × 0.9: 3.205)


def _s_exponential(f, n, rng):
    from dppca_dask.privacy.mechanisms import exponential_mechanism

    d = np.zeros(_EM_K)  # P[0 | D] = 1/K for every f
    d_prime = np.ones(_EM_K)
    d_prime[0] = -1.0  # candidate 0 falls by Δ = 1, every other rises by Δ

    def one(scores):
        return lambda: float(exponential_mechanism(scores, epsilon=_EM_EPS, sensitivity=f,
                                                   rng=rng, component="audit").value == 0)
    return _loop(one(d), n), _loop(one(d_prime), n)


_AT_EPS, _AT_TIES, _AT_T = 2.0, 6, 100.5  # the pair's ε is 1.949 (quadrature); × 0.9: 2.173
_AT_D = np.array([100.0] * _AT_TIES + [101.0, 1e6])  # m tied counts T − ½, then T + ½
_AT_DP = np.array([101.0] * _AT_TIES + [101.0, 1e6])  # one observation moved below them


def _at_law(f: float) -> tuple[float, float]:
    return (laws.above_threshold_stops(_AT_D, _AT_T, _AT_EPS / f, _AT_TIES),
            laws.above_threshold_stops(_AT_DP, _AT_T, _AT_EPS / f, _AT_TIES))


def _s_above_threshold(f, n, rng):
    from dppca_dask.privacy.mechanisms import above_threshold

    def one(counts):
        return lambda: float(above_threshold(counts, threshold=_AT_T, eps=_AT_EPS / f, rng=rng,
                                             component="audit").value[0] == _AT_TIES)
    return _loop(one(_AT_D), n), _loop(one(_AT_DP), n)


_MAX = 1.0 - 1e-6  # "the loss is at its maximum" (loss in units of the claimed ε)
_G = f"(ε, δ) = ({AUDIT_EPS:g}, {AUDIT_DELTA:g}) analytic"
_GE = f"event S > {_T_GAUSS}"
_LAP = "event: the loss at its maximum ε (the corner where the ratio is e^ε)"
AUDITS: dict[str, MechanismAudit] = {a.name: a for a in (
    MechanismAudit("gaussian_release (scalar)", "Gaussian", AUDIT_EPS, AUDIT_DELTA, 30000,
                   f"{_G}; 1 vs 0; statistic: the output; {_GE}", _s_gauss_scalar,
                   _T_GAUSS, _gauss_law),
    MechanismAudit("gaussian_release (vector)", "Gaussian", AUDIT_EPS, AUDIT_DELTA, 30000,
                   f"{_G}; 2-vector s + u vs s, ‖u‖ = 1; statistic: projection on u; {_GE}",
                   _s_gauss_vector, _T_GAUSS, _gauss_law),
    MechanismAudit("gaussian_symmetric_matrix", "Gaussian", AUDIT_EPS, AUDIT_DELTA, 30000,
                   f"{_G}; {_P}×{_P} S vs 0, vech*(S) all ones; statistic: each coordinate "
                   f"of vech*(R) (diagonal and off-diagonal); {_GE}", _s_gauss_matrix,
                   _T_GAUSS, _gauss_law),
    MechanismAudit("gaussian_zcdp", "Gaussian", AUDIT_EPS, AUDIT_DELTA, 30000,
                   f"ρ = Δ²/(2σ²) with the Gaussian curve through ({AUDIT_EPS:g}, "
                   f"{AUDIT_DELTA:g}); 2-vector s + u vs s; statistic: projection on u; {_GE}",
                   lambda f, n, rng: _s_gauss_vector(f, n, rng, zcdp=True), _T_GAUSS,
                   _gauss_law),
    MechanismAudit("gaussian_zcdp_symmetric", "Gaussian", AUDIT_EPS, AUDIT_DELTA, 30000,
                   f"ρ as gaussian_zcdp; {_P}×{_P} S vs 0; statistic as "
                   f"gaussian_symmetric_matrix; {_GE}",
                   lambda f, n, rng: _s_gauss_matrix(f, n, rng, zcdp=True), _T_GAUSS,
                   _gauss_law),
    MechanismAudit("gaussian_histogram", "histogram", AUDIT_EPS, AUDIT_DELTA, 38000,
                   f"{_G}; cells (A, B) = (49, 51) vs (50, 50); statistic: B − A; event "
                   "B − A ≥ 3", _s_gauss_histogram, _T_HIST, _hist_law),
    MechanismAudit("laplace_release", "Laplace", _EPS_LAPLACE, 0.0, 30000,
                   f"ε = {_EPS_LAPLACE:g}, Δ₁ = 1; 1 vs 0; statistic: the Laplace privacy "
                   f"loss; {_LAP}", _s_laplace, _EPS_LAPLACE * _MAX,
                   lambda f: laws.laplace_event(1.0, f / _EPS_LAPLACE)),
    MechanismAudit("stability_histogram", "histogram", _EPS_LAPLACE, 1e-5, 26000,
                   f"(ε, δ) = ({_EPS_LAPLACE:g}, 1e-5), n = {_SPARSE_N}; cells (49, 51) vs "
                   "(50, 50) (both non-empty: the ε part); statistic: the Laplace privacy loss; "
                   f"{_LAP}", _s_sparse, _EPS_LAPLACE * _MAX,
                   lambda f: _two_cell_law(_hist_scale(f))),
    MechanismAudit("geometric_histogram", "histogram", _EPS_LAPLACE, 0.0, 26000,
                   f"ε = {_EPS_LAPLACE:g} (scale b = 1); cells (49, 51) vs (50, 50): one "
                   "observation moved between two cells; statistic: the two-sided geometric "
                   f"privacy loss; {_LAP}", _s_geometric, _EPS_LAPLACE * _MAX,
                   lambda f: _two_cell_law(_hist_scale(f))),
    MechanismAudit("smooth_laplace", "Laplace", _EPS_SMOOTH / 2, 0.0, 30000,
                   f"ε = {_EPS_SMOOTH:g}, SS = 1; value 1 vs 0 at equal SS: the sliding half of "
                   "NRS's analysis, claim ε/2; statistic: the output; event: output ≥ 1",
                   _s_smooth, 1.0 - 2.0 ** -41,
                   lambda f: laws.laplace_event(1.0, 2.0 * f / _EPS_SMOOTH)),
    MechanismAudit("exponential_mechanism", "exponential", _EM_EPS, 0.0, 360000,
                   f"ε = {_EM_EPS:g}, Δ = 1; {_EM_K} scores 0 vs (−1, 1, …, 1); "
                   "statistic: candidate 0 selected", _s_exponential, 0.5,
                   lambda f: laws.exponential_event(_EM_EPS, _EM_K, f)),
    MechanismAudit("above_threshold", "AboveThreshold", _AT_EPS, 0.0, 300000,
                   f"ε = {_AT_EPS:g}, T = {_AT_T}; counts ({_AT_TIES}×100, 101, 10⁶) vs "
                   f"({_AT_TIES}×101, 101, 10⁶); statistic: stops at index {_AT_TIES}",
                   _s_above_threshold, 0.5, _at_law),
)}


def run_audit(
    name: str, *, noise_factor: float = 1.0, samples: int | None = None,
    alpha: float = AUDIT_ALPHA, rng: np.random.Generator,
) -> AuditResult:
    """Audit one entry of :data:`AUDITS`, its noise scaled by ``noise_factor`` (1: as shipped).

    The bound is a (1 − alpha)-confidence lower bound on the pair's ε from the design's fixed
    event: a mechanism that meets its claim is shown above it with probability ≤ alpha.

    Examples
    --------
    >>> res = run_audit("laplace_release", noise_factor=0.9, rng=np.random.default_rng(1))
    >>> bool(res.epsilon_lower > AUDITS["laplace_release"].claimed_eps)  # × 0.9 noise caught
    True
    """
    audit = AUDITS[name]
    a, b = audit.sample(noise_factor, samples or audit.samples, rng)
    return event_bound(a, b, threshold=audit.threshold, delta=audit.delta, alpha=alpha)


def weakest_caught_factor(audit: MechanismAudit, *, power: float = AUDIT_POWER,
                          samples: int | None = None) -> float:
    """The largest noise factor f < 1 that the audit catches with at least ``power`` at its
    default count (to 1e-3): its resolution."""
    lo, hi = 0.3, 1.0  # caught at lo, not at hi
    while hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        p, q = audit.law(mid)
        ok = (p > audit.delta and math.log((p - audit.delta) / q) > audit.claimed_eps
              and audit.power(mid, samples) >= power)
        lo, hi = (mid, hi) if ok else (lo, mid)
    return math.floor(lo * 1000) / 1000
