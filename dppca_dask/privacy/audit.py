"""Empirical privacy audits: statistical lower bounds on ε from a mechanism's outputs.

For neighbouring inputs D and D' (a statistic s and s + Δ along the worst direction), run a
mechanism many times on each and reduce every output to a scalar test statistic, the
Neyman–Pearson likelihood-ratio statistic for that pair. For any threshold t, (ε, δ)-DP implies
P[S(D) > t] ≤ e^ε·P[S(D') > t] + δ (and symmetrically), so

    ε ≥ ln((P[S(D) > t] − δ) / P[S(D') > t]).

:func:`epsilon_lower_bound` picks the threshold and direction on one half of the samples and
evaluates that inequality on the other half with Clopper–Pearson bounds (each one-sided at α/2,
jointly 1 − α by Bonferroni), so the value is a (1 − α)-confidence lower bound on the true ε
(Jagielski, Ullman & Oprea 2020; Nasr et al. 2021). :data:`AUDITS` defines one worst-case pair
and statistic per mechanism (designs in docs/privacy.md, "Empirical audit"); ``noise_factor``
(e.g. 0.7) runs a deliberately under-noised copy, which a powerful audit must catch.
:func:`audit_float_membership` is the floating-point attack (Mironov 2012): it tests whether the
released double is an exact product fl(scale·x), which a textbook float sampler reveals at s = 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

__all__ = [
    "AUDITS",
    "FLOAT_AUDITS",
    "AuditResult",
    "MechanismAudit",
    "audit_float_membership",
    "audit_kendall_release",
    "clopper_pearson",
    "epsilon_lower_bound",
    "float_product_hits",
    "kendall_neighbours",
    "naive_gaussian",
    "naive_laplace",
    "run_audit",
]


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Exact two-sided (1 − alpha) confidence interval for a binomial proportion k/n.

    Examples
    --------
    >>> lo, hi = clopper_pearson(0, 100, 0.05)
    >>> lo, round(hi, 4)
    (0.0, 0.0362)
    """
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def _cp_arrays(k: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(k, dtype=np.float64)
    lo = np.where(k > 0, stats.beta.ppf(alpha / 2, np.maximum(k, 1), n - k + 1), 0.0)
    hi = np.where(k < n, stats.beta.ppf(1 - alpha / 2, k + 1, np.maximum(n - k, 1)), 1.0)
    return lo, hi


@dataclass(frozen=True)
class AuditResult:
    """An ε lower bound with the threshold and counts that produced it."""

    epsilon_lower: float
    threshold: float
    direction: int  # +1: tail S > t of D vs D'; -1: tail S < t (roles swapped)
    tail_d: int
    tail_dprime: int
    n_eval: int
    alpha: float


def _bounds(x: np.ndarray, y: np.ndarray, ts: np.ndarray, delta: float,
            alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ln((CP-lower P[x > t] − δ)/CP-upper P[y > t]) for each t (−inf when uninformative)."""
    kx = len(x) - np.searchsorted(np.sort(x), ts, side="right")
    ky = len(y) - np.searchsorted(np.sort(y), ts, side="right")
    p_lo, _ = _cp_arrays(kx, len(x), alpha)
    _, q_hi = _cp_arrays(ky, len(y), alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.where(p_lo > delta, np.log(np.maximum(p_lo - delta, 1e-300) / q_hi), -np.inf)
    return eps, kx, ky


def epsilon_lower_bound(
    scores_d: np.ndarray,
    scores_dprime: np.ndarray,
    *,
    delta: float,
    alpha: float = 0.05,
    min_tail: int = 10,
) -> AuditResult:
    """A (1 − alpha)-confidence lower bound on ε from samples of S(M(D)) and S(M(D')).

    Candidate events are S > t and S ≥ t for t on a quantile grid (and every distinct value of
    a discrete statistic) of the first halves; the best on the first halves is evaluated on the
    second halves. The result is never negative.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.normal(1.0, 1.0, 20000), rng.normal(0.0, 1.0, 20000)
    >>> res = epsilon_lower_bound(a, b, delta=1e-5)
    >>> bool(0.5 < res.epsilon_lower < 4.0)  # a unit mean shift of unit-variance noise
    True
    """
    a = np.asarray(scores_d, dtype=np.float64)
    b = np.asarray(scores_dprime, dtype=np.float64)
    a1, a2 = a[: len(a) // 2], a[len(a) // 2 :]
    b1, b2 = b[: len(b) // 2], b[len(b) // 2 :]
    # direction +1 tests the upper tail of D against D'; -1 the lower tail of D' against D.
    pairs = {1: ((a1, b1), (a2, b2)), -1: ((-b1, -a1), (-b2, -a2))}
    best = (-math.inf, 0.0, 1)
    for direction, ((xs, ys), _) in pairs.items():
        pooled = np.concatenate([xs, ys])
        grid = np.unique(pooled)
        if len(grid) > 801:
            grid = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, 801)))
        ts = np.concatenate([grid, np.nextafter(grid, -np.inf)])  # S > t and S ≥ t events
        eps, kx, _ = _bounds(xs, ys, ts, delta, alpha)
        eps = np.where(kx >= min_tail, eps, -np.inf)
        i = int(np.argmax(eps))
        if eps[i] > best[0]:
            best = (float(eps[i]), float(ts[i]), direction)
    _, t, direction = best
    x_eval, y_eval = pairs[direction][1]
    eps, kx, ky = _bounds(x_eval, y_eval, np.array([t]), delta, alpha)
    bound = float(eps[0]) if math.isfinite(eps[0]) else 0.0
    return AuditResult(max(bound, 0.0), t, direction, int(kx[0]), int(ky[0]), len(x_eval), alpha)


# --- floating-point membership attack -------------------------------------------------------------


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


# --- worst-case pairs per mechanism ---------------------------------------------------------------

AUDIT_EPS, AUDIT_DELTA = 1.0, 0.05
"""Public budget of the (ε, δ) Gaussian audits: a point of the Gaussian privacy curve (fixed by
Δ/σ) where the optimal rejection region has probability ≈ 0.1, so the claimed ε is reachable."""


@dataclass(frozen=True)
class MechanismAudit:
    """One mechanism's worst-case pair, statistic and claim."""

    name: str
    family: str
    claimed_eps: float
    delta: float
    samples: int  # default number of releases per neighbour
    design: str
    sample: Callable[[float, int, np.random.Generator], tuple[np.ndarray, np.ndarray]]


def _loop(call: Callable, n: int) -> np.ndarray:
    return np.array([call() for _ in range(n)], dtype=np.float64)


def _vech_star(m: np.ndarray) -> np.ndarray:
    """The isometric half-vectorisation: diagonal, then √2 × strict lower triangle."""
    rows, cols = np.tril_indices(m.shape[0], -1)
    return np.concatenate([np.diag(m), math.sqrt(2.0) * m[rows, cols]])


_U = np.array([0.6, 0.8])  # unit shift direction of the vector audits
_E = np.array([[2.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]) / math.sqrt(6.0)  # ‖E‖_F = 1
_M0 = np.eye(3) / 3.0


def _gaussian_budget():
    from dppca_dask.privacy.budget import PrivacyBudget

    return PrivacyBudget(AUDIT_EPS, AUDIT_DELTA)


def _zcdp_rho() -> float:
    """ρ whose Gaussian (Δ/σ = √(2ρ)) has ε = AUDIT_EPS at δ = AUDIT_DELTA on its exact curve."""
    from dppca_dask.privacy.accounting import analytic_gaussian_sigma

    return 0.5 / analytic_gaussian_sigma(1.0, AUDIT_EPS, AUDIT_DELTA) ** 2


def _s_gauss_scalar(f, n, rng):
    from dppca_dask.privacy.mechanisms import gaussian_release

    def one(v):
        return lambda: gaussian_release(v, sensitivity=f, budget=_gaussian_budget(),
                                        calibration="analytic", rng=rng, component="audit").value
    return _loop(one(1.0), n), _loop(one(0.0), n)


def _s_gauss_vector(f, n, rng):
    from dppca_dask.privacy.mechanisms import gaussian_release

    def rel(shift):  # n independent 2-vector releases in one call (noise is i.i.d. per entry)
        v = np.zeros((n, 2)) + shift * _U
        return gaussian_release(v, sensitivity=f, budget=_gaussian_budget(),
                                calibration="analytic", rng=rng, component="audit").value @ _U
    return rel(1.0), rel(0.0)


def _s_gauss_matrix(f, n, rng, zcdp=False):
    from dppca_dask.privacy.mechanisms import gaussian_symmetric_matrix, gaussian_zcdp_symmetric

    u = _vech_star(_E)

    def one(m):
        if zcdp:
            return lambda: _vech_star(gaussian_zcdp_symmetric(
                m, sensitivity=f, rho=_zcdp_rho(), rng=rng, component="audit").value - _M0) @ u
        return lambda: _vech_star(gaussian_symmetric_matrix(
            m, sensitivity=f, budget=_gaussian_budget(), calibration="analytic", rng=rng,
            component="audit").value - _M0) @ u
    return _loop(one(_M0 + _E), n), _loop(one(_M0), n)


def _s_zcdp(f, n, rng):
    from dppca_dask.privacy.mechanisms import gaussian_zcdp

    def rel(shift):
        v = np.zeros((n, 2)) + shift * _U
        return np.asarray(gaussian_zcdp(v, sensitivity=f, rho=_zcdp_rho(), rng=rng,
                                        component="audit").value) @ _U
    return rel(1.0), rel(0.0)


def _s_gauss_histogram(f, n, rng):
    from dppca_dask.privacy.budget import PrivacyBudget
    from dppca_dask.privacy.mechanisms import gaussian_histogram, histogram_noise_sigma

    budget = _gaussian_budget()
    if f != 1.0:  # the same mechanism calibrated to the ε whose σ is f times the claimed one
        target = f * histogram_noise_sigma(budget, "analytic")
        eps = optimize.brentq(lambda e: histogram_noise_sigma(
            PrivacyBudget(e, budget.delta), "analytic") - target, budget.eps, 50 * budget.eps)
        budget = PrivacyBudget(eps, budget.delta)

    def rel(counts):  # n two-cell histograms (cells A, B) in one call
        out = gaussian_histogram(np.tile(counts, (n, 1)), budget=budget, calibration="analytic",
                                 rng=rng, component="audit").value
        return (out[:, 1] - out[:, 0]) / math.sqrt(2.0)
    return rel(np.array([49.0, 51.0])), rel(np.array([50.0, 50.0]))


def _laplace_loss(y: np.ndarray, s: np.ndarray, s_prime: np.ndarray, b: float) -> np.ndarray:
    """The privacy loss ln p_{s'}(y)/p_s(y) of i.i.d. Laplace(b) noise (the NP statistic).

    Rounded to 1e-9: its atom at the maximum would otherwise split by rounding patterns of the
    float release (a floating-point leak that :func:`audit_float_membership` measures instead).
    """
    return np.round((np.abs(y - s) - np.abs(y - s_prime)).sum(axis=-1) / b, 9)


def _s_laplace(f, n, rng):
    from dppca_dask.privacy.mechanisms import laplace_release

    s, s_prime = np.zeros(2), np.full(2, 0.5)  # L1 shift Δ = 1 split over two entries

    def rel(v):
        y = laplace_release(np.tile(v, (n, 1)), sensitivity=f, eps=1.0, rng=rng,
                            component="audit").value
        return _laplace_loss(y, s, s_prime, 1.0)
    return rel(s_prime), rel(s)


_SPARSE_N = 1000


def _s_sparse(f, n, rng):
    from dppca_dask.privacy.budget import PrivacyBudget
    from dppca_dask.privacy.mechanisms import stability_histogram, stability_histogram_parameters

    budget = PrivacyBudget(1.0, 1e-5)
    b, _ = stability_histogram_parameters(_SPARSE_N, budget)  # in proportions (output units)
    s, s_prime = np.array([50.0, 50.0]), np.array([49.0, 51.0])

    def rel(counts):  # n two-cell histograms in one call: one draw per cell
        y = stability_histogram(np.tile(counts, (n, 1)), n=_SPARSE_N,
                                budget=PrivacyBudget(budget.eps / f, budget.delta), rng=rng,
                                component="audit").value
        return _laplace_loss(y, s / _SPARSE_N, s_prime / _SPARSE_N, b)
    return rel(s_prime), rel(s)


def _s_geometric(f, n, rng):
    from dppca_dask.privacy.mechanisms import geometric_histogram, geometric_histogram_scale

    b = float(geometric_histogram_scale(1.0))  # the claimed scale 2/ε at ε = 1
    s, s_prime = np.array([50.0, 50.0]), np.array([49.0, 51.0])

    def rel(counts):  # n two-cell histograms in one call; ε = 1/f gives the scale f·b
        y = geometric_histogram(np.tile(counts, (n, 1)), eps=1.0 / f, rng=rng,
                                component="audit").value
        return _laplace_loss(y, s, s_prime, b)
    return rel(s_prime), rel(s)


def _s_smooth(f, n, rng):
    from dppca_dask.privacy.budget import PrivacyBudget
    from dppca_dask.privacy.mechanisms import smooth_laplace

    budget = PrivacyBudget(1.0, 1e-5)

    def one(v):
        return lambda: smooth_laplace(v, smooth_sensitivity=f, budget=budget, rng=rng,
                                      component="audit").value
    return _loop(one(1.0), n), _loop(one(0.0), n)


_EM_K = 8  # candidates: the pair's true ε is ln(1/K + (1 − 1/K)e^ε), → ε as K grows


def _s_exponential(f, n, rng):
    from dppca_dask.privacy.mechanisms import exponential_mechanism

    d = np.zeros(_EM_K)  # P[0 | D] = 1/K for every ε, so the × 0.7 copy keeps the same tail
    d_prime = np.ones(_EM_K)
    d_prime[0] = -1.0  # candidate 0 falls by Δ = 1, every other rises by Δ

    def one(scores):
        return lambda: float(exponential_mechanism(scores, epsilon=1.0, sensitivity=f, rng=rng,
                                                   component="audit").value == 0)
    return _loop(one(d), n), _loop(one(d_prime), n)


_AT_TIES, _AT_T = 3, 100.5  # the pair's true ε is 0.983 (exact quadrature), → ε as ties grow


def _s_above_threshold(f, n, rng):
    from dppca_dask.privacy.mechanisms import above_threshold

    tail = [101.0, 1e6]
    d = np.array([100.0] * _AT_TIES + tail)  # m tied counts T − ½, then T + ½
    d_prime = np.array([101.0] * _AT_TIES + tail)  # one observation moved below those grid points

    def one(counts):
        return lambda: float(above_threshold(counts, threshold=_AT_T, eps=1.0 / f, rng=rng,
                                             component="audit").value[0] == _AT_TIES)
    return _loop(one(d), n), _loop(one(d_prime), n)


_G = f"(ε, δ) = ({AUDIT_EPS:g}, {AUDIT_DELTA:g}) analytic"
AUDITS: dict[str, MechanismAudit] = {a.name: a for a in (
    MechanismAudit("gaussian_release (scalar)", "Gaussian", AUDIT_EPS, AUDIT_DELTA, 10000,
                   f"{_G}; 1 vs 0; statistic: the output", _s_gauss_scalar),
    MechanismAudit("gaussian_release (vector)", "Gaussian", AUDIT_EPS, AUDIT_DELTA, 20000,
                   f"{_G}; 2-vector s + u vs s, ‖u‖ = 1; statistic: projection on u",
                   _s_gauss_vector),
    MechanismAudit("gaussian_symmetric_matrix", "Gaussian", AUDIT_EPS, AUDIT_DELTA, 10000,
                   f"{_G}; 3×3 M + E vs M, ‖E‖_F = 1 (diagonal and off-diagonal); "
                   "statistic: ⟨vech*(R − M), vech*(E)⟩", _s_gauss_matrix),
    MechanismAudit("gaussian_zcdp", "Gaussian", AUDIT_EPS, AUDIT_DELTA, 20000,
                   "ρ = Δ²/(2σ²) with the Gaussian curve through (1, 0.05); 2-vector s + u vs s; "
                   "statistic: projection on u", _s_zcdp),
    MechanismAudit("gaussian_zcdp_symmetric", "Gaussian", AUDIT_EPS, AUDIT_DELTA, 10000,
                   "ρ as gaussian_zcdp; 3×3 M + E vs M; statistic as gaussian_symmetric_matrix",
                   lambda f, n, rng: _s_gauss_matrix(f, n, rng, zcdp=True)),
    MechanismAudit("gaussian_histogram", "histogram", AUDIT_EPS, AUDIT_DELTA, 20000,
                   f"{_G}; cells (A, B) = (49, 51) vs (50, 50); statistic: (B − A)/√2",
                   _s_gauss_histogram),
    MechanismAudit("laplace_release", "Laplace", 1.0, 0.0, 20000,
                   "ε = 1, Δ₁ = 1; (½, ½) vs (0, 0); statistic: the Laplace privacy loss",
                   _s_laplace),
    MechanismAudit("stability_histogram", "histogram", 1.0, 1e-5, 20000,
                   "(ε, δ) = (1, 1e-5), n = 1000; cells (49, 51) vs (50, 50) (both non-empty: "
                   "the ε part); statistic: the Laplace privacy loss", _s_sparse),
    MechanismAudit("geometric_histogram", "histogram", 1.0, 0.0, 20000,
                   "ε = 1 (scale b = 2); cells (49, 51) vs (50, 50): one observation moved "
                   "between two cells; statistic: the two-sided geometric privacy loss "
                   "(attains ε on {y_A ≤ 49, y_B ≥ 51})", _s_geometric),
    MechanismAudit("smooth_laplace", "Laplace", 0.5, 0.0, 10000,
                   "ε = 1, SS = 1; value 1 vs 0 at equal SS: the sliding half of NRS's analysis, "
                   "claim ε/2; statistic: the output", _s_smooth),
    MechanismAudit("exponential_mechanism", "exponential", 1.0, 0.0, 40000,
                   f"ε = 1, Δ = 1; {_EM_K} scores 0 vs (−1, 1, …, 1); "
                   "statistic: candidate 0 selected", _s_exponential),
    MechanismAudit("above_threshold", "AboveThreshold", 1.0, 0.0, 25000,
                   f"ε = 1, T = 100.5; counts ({_AT_TIES}×100, 101, 10⁶) vs ({_AT_TIES}×101, 101, "
                   f"10⁶); statistic: stops at index {_AT_TIES}", _s_above_threshold),
)}


def run_audit(
    name: str, *, noise_factor: float = 1.0, samples: int | None = None, alpha: float = 0.05,
    rng: np.random.Generator,
) -> AuditResult:
    """Audit one entry of :data:`AUDITS`, its noise scaled by ``noise_factor`` (1: as shipped).

    Examples
    --------
    >>> res = run_audit("laplace_release", noise_factor=0.7, rng=np.random.default_rng(1))
    >>> bool(res.epsilon_lower > AUDITS["laplace_release"].claimed_eps)  # × 0.7 noise caught
    True
    """
    audit = AUDITS[name]
    a, b = audit.sample(noise_factor, samples or audit.samples, rng)
    return epsilon_lower_bound(a, b, delta=audit.delta, alpha=alpha)


# --- dp_loading's Kendall release on real neighbouring data ---------------------------------------


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
    reps: int = 10000, noise_factor: float = 1.0, alpha: float = 0.05,
    rng: np.random.Generator,
) -> AuditResult:
    """Audit ``gaussian_symmetric_matrix`` as ``dp_loading`` uses it (``bound="tight"``).

    The Kendall matrices of :func:`kendall_neighbours` differ by exactly the tight sensitivity
    2√2/n; analytic calibration; statistic: the projection on their difference.
    """
    from dppca_dask.pca.loading import kendall_sensitivity, spherical_kendall
    from dppca_dask.privacy.budget import PrivacyBudget
    from dppca_dask.privacy.mechanisms import gaussian_symmetric_matrix

    d, d_prime = kendall_neighbours(n, p)
    k_d, k_dp = spherical_kendall(d).values, spherical_kendall(d_prime).values
    direction = _vech_star(k_dp - k_d)
    direction /= np.linalg.norm(direction)
    budget = PrivacyBudget(eps, delta)
    sensitivity = kendall_sensitivity(n, bound="tight") * noise_factor

    def one(k):
        return lambda: _vech_star(gaussian_symmetric_matrix(
            k, sensitivity=sensitivity, budget=budget, calibration="analytic", rng=rng,
            component="audit").value - k_d) @ direction
    return epsilon_lower_bound(_loop(one(k_dp), reps), _loop(one(k_d), reps), delta=delta,
                               alpha=alpha)
