"""Empirical privacy audits: statistical lower bounds on ε from a mechanism's outputs.

For neighbouring datasets D and D' (one row replaced by a worst-case row), run a mechanism many
times on each and reduce every output to a scalar test statistic. For any threshold t,
(ε, δ)-DP implies P[S(D) > t] ≤ e^ε·P[S(D') > t] + δ (and symmetrically), so

    ε ≥ ln((P[S(D) > t] − δ) / P[S(D') > t]).

:func:`epsilon_lower_bound` picks the threshold and direction on one half of the samples and
evaluates that inequality on the other half with Clopper–Pearson bounds (confidence 1 − α
jointly, by Bonferroni), so the reported value is a valid (1 − α)-confidence lower bound on the
mechanism's true ε. A correct mechanism must never be shown to exceed its claimed ε; a broken one
(too little noise) is caught when the bound exceeds it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

__all__ = [
    "MECHANISMS",
    "AuditResult",
    "audit_histogram_release",
    "audit_kendall_release",
    "audit_mechanism",
    "clopper_pearson",
    "epsilon_lower_bound",
    "kendall_neighbours",
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


def _cp_bound(x: np.ndarray, y: np.ndarray, t: float, delta: float, alpha: float) -> float:
    """ln((CP-lower P[x > t] − δ) / CP-upper P[y > t]), or −inf when uninformative."""
    p_lo, _ = clopper_pearson(int(np.sum(x > t)), len(x), alpha)
    _, q_hi = clopper_pearson(int(np.sum(y > t)), len(y), alpha)
    if p_lo <= delta or q_hi <= 0:
        return -math.inf
    return math.log((p_lo - delta) / q_hi)


def epsilon_lower_bound(
    scores_d: np.ndarray,
    scores_dprime: np.ndarray,
    *,
    delta: float,
    alpha: float = 0.05,
    min_tail: int = 10,
) -> AuditResult:
    """A (1 − alpha)-confidence lower bound on ε from samples of S(M(D)) and S(M(D')).

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
        for t in np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, 401))):
            if np.sum(xs > t) < min_tail:
                continue
            eps = _cp_bound(xs, ys, float(t), delta, alpha)
            if eps > best[0]:
                best = (eps, float(t), direction)
    _, t, direction = best
    x_eval, y_eval = pairs[direction][1]
    k_x, k_y = int(np.sum(x_eval > t)), int(np.sum(y_eval > t))
    p_lo, _ = clopper_pearson(k_x, len(x_eval), alpha)  # two-sided at alpha/2 per side each
    _, q_hi = clopper_pearson(k_y, len(y_eval), alpha)
    bound = math.log((p_lo - delta) / q_hi) if p_lo > delta and q_hi > 0 else 0.0
    return AuditResult(max(bound, 0.0), t, direction, k_x, k_y, len(x_eval), alpha)


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
    *,
    eps: float,
    delta: float,
    calibration: str = "classical",
    n: int = 40,
    p: int = 3,
    reps: int = 20000,
    sensitivity_factor: float = 1.0,
    alpha: float = 0.05,
    rng: np.random.Generator,
) -> AuditResult:
    """Audit :func:`~dppca_dask.mechanisms.gaussian_symmetric_matrix` as ``dp_loading`` uses it.

    ``sensitivity_factor < 1`` deliberately under-states the sensitivity (a broken mechanism
    with too little noise) to show that the audit catches it.
    """
    from dppca_dask.budget import PrivacyBudget
    from dppca_dask.loading import kendall_sensitivity, spherical_kendall
    from dppca_dask.mechanisms import gaussian_symmetric_matrix

    d, d_prime = kendall_neighbours(n, p)
    k_d = spherical_kendall(d).values
    k_dp = spherical_kendall(d_prime).values
    direction = _vech_star(k_dp - k_d)
    direction /= np.linalg.norm(direction)
    budget = PrivacyBudget(eps, delta)
    sensitivity = kendall_sensitivity(n) * sensitivity_factor

    def scores(k: np.ndarray) -> np.ndarray:
        out = np.empty(reps)
        for i in range(reps):
            rel = gaussian_symmetric_matrix(k, sensitivity=sensitivity, budget=budget,
                                            calibration=calibration, rng=rng, component="audit")
            out[i] = _vech_star(rel.value - k_d) @ direction
        return out

    return epsilon_lower_bound(scores(k_dp), scores(k_d), delta=delta, alpha=alpha)


def audit_histogram_release(
    *,
    method: str,
    eps: float,
    delta: float,
    calibration: str = "classical",
    n: int = 1000,
    reps: int = 20000,
    misstate: float = 1.0,
    alpha: float = 0.05,
    rng: np.random.Generator,
) -> AuditResult:
    """Audit the dp_score histogram mechanisms on worst-case neighbouring count vectors.

    One observation moves from cell A to cell B (replace-one). ``"add"``: A = B = 50 vs
    49 / 51; the statistic is released(B) − released(A). ``"sparse"``: A = 10, B = 0 vs 9 / 1, so
    B can appear only under D' (the δ part), and the statistic is released(B) (values below the
    sampled quantile grid cannot be picked; released(B) > 0 is the event). ``misstate > 1``
    breaks the mechanism on purpose: ``"add"`` is calibrated to misstate·ε; ``"sparse"`` uses a
    threshold computed for δ·misstate.
    """
    from dppca_dask.budget import PrivacyBudget
    from dppca_dask.mechanisms import gaussian_histogram, stability_histogram

    cells = 8
    if method == "add":
        d = np.zeros(cells)
        d[:2] = 50
        d_prime = d.copy()
        d_prime[0], d_prime[1] = 49, 51
        budget = PrivacyBudget(eps * misstate, delta)

        def stat(counts: np.ndarray) -> float:
            out = gaussian_histogram(counts, budget=budget, calibration=calibration, rng=rng,
                                     component="audit").value
            return float(out[1] - out[0])
    elif method == "sparse":
        d = np.zeros(cells)
        d[0] = 10
        d_prime = d.copy()
        d_prime[0], d_prime[1] = 9, 1
        budget = PrivacyBudget(eps, min(delta * misstate, 0.999))

        def stat(counts: np.ndarray) -> float:
            out = stability_histogram(counts / n, n=n, budget=budget, rng=rng,
                                      component="audit").value
            return float(out[1] > 0) + float(out[1])
    else:
        raise ValueError(f"Unknown histogram method {method!r}.")
    scores_dp = np.array([stat(d_prime) for _ in range(reps)])
    scores_d = np.array([stat(d) for _ in range(reps)])
    if method == "sparse":  # the event "B released": compare its frequencies directly
        k_x, k_y = int(np.sum(scores_dp > 0)), int(np.sum(scores_d > 0))
        p_lo, _ = clopper_pearson(k_x, reps, alpha)
        _, q_hi = clopper_pearson(k_y, reps, alpha)
        bound = math.log((p_lo - delta) / q_hi) if p_lo > delta else 0.0
        shift = epsilon_lower_bound(scores_dp, scores_d, delta=delta, alpha=alpha)
        if shift.epsilon_lower > bound:
            return shift
        return AuditResult(max(bound, 0.0), 0.0, 1, k_x, k_y, reps, alpha)
    return epsilon_lower_bound(scores_dp, scores_d, delta=delta, alpha=alpha)


def _scalar_audit(
    draw: Any, value_d: Any, value_dprime: Any, *, delta: float, reps: int, alpha: float
) -> AuditResult:
    a = np.array([draw(value_dprime) for _ in range(reps)], dtype=np.float64)
    b = np.array([draw(value_d) for _ in range(reps)], dtype=np.float64)
    return epsilon_lower_bound(a, b, delta=delta, alpha=alpha)


def audit_mechanism(
    name: str,
    *,
    eps: float,
    delta: float,
    reps: int = 20000,
    broken: bool = False,
    alpha: float = 0.05,
    rng: np.random.Generator,
) -> AuditResult:
    """Audit one mechanism of :mod:`dppca_dask.mechanisms` at its stated sensitivity.

    Worst-case neighbouring inputs for each (Δ = 1 unless said otherwise):

    * ``gaussian_release`` / ``laplace_release``: value 0 vs Δ (the scree mechanisms);
    * ``gaussian_zcdp``: value 0 vs Δ at ρ with ρ + 2√(ρ ln(1/δ)) = ε (the covariance ones);
    * ``exponential_mechanism``: scores (0, Δ) vs (Δ, 0), which attains ε exactly;
    * ``above_threshold``: counts c_i = i vs c_i + 1 (the Durfee searches); statistic: the
      stopping index.

    ``broken=True`` under-states the sensitivity (or over-states ε) ten-fold.
    """
    from dppca_dask.budget import PrivacyBudget
    from dppca_dask.mechanisms import (
        above_threshold,
        exponential_mechanism,
        gaussian_release,
        gaussian_zcdp,
        laplace_release,
    )
    from dppca_dask.zcdp import zcdp_rho

    factor = 0.1 if broken else 1.0
    kw = {"delta": delta, "reps": reps, "alpha": alpha}
    if name == "gaussian_release":
        budget = PrivacyBudget(eps, delta)
        return _scalar_audit(lambda v: gaussian_release(
            np.array([v]), sensitivity=factor, budget=budget, calibration="analytic", rng=rng,
            component="audit").value[0], 0.0, 1.0, **kw)
    if name == "laplace_release":
        return _scalar_audit(lambda v: laplace_release(
            np.array([v]), sensitivity=factor, eps=eps, rng=rng, component="audit").value[0],
            0.0, 1.0, **kw)
    if name == "gaussian_zcdp":
        rho = zcdp_rho(eps, delta)
        return _scalar_audit(lambda v: np.asarray(gaussian_zcdp(
            np.array([v]), sensitivity=factor, rho=rho, rng=rng, component="audit").value)[0],
            0.0, 1.0, **kw)
    if name == "exponential_mechanism":
        return _scalar_audit(lambda s: float(exponential_mechanism(
            np.asarray(s), epsilon=eps, sensitivity=factor, rng=rng, component="audit"
        ).value == 0), (0.0, 1.0), (1.0, 0.0), **kw)
    if name == "above_threshold":
        base = np.arange(200, dtype=np.float64)
        return _scalar_audit(lambda c: float(above_threshold(
            c, threshold=100.0, eps=eps / factor, rng=rng, component="audit").value[0]),
            base + 1.0, base, **kw)
    raise ValueError(f"Unknown mechanism {name!r}.")


MECHANISMS = ("gaussian_release", "laplace_release", "gaussian_zcdp", "exponential_mechanism",
              "above_threshold")
