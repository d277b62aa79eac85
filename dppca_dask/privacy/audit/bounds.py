"""Clopper–Pearson ε lower bounds from two samples, and their power against a known law.

For neighbouring inputs D and D' and any event E, (ε, δ)-DP implies
P[E | D] ≤ e^ε·P[E | D'] + δ, so

    ε ≥ ln((P[E | D] − δ) / P[E | D']).

:func:`event_bound` evaluates it for an event fixed before sampling (a public threshold of the
audit's design) on all samples, with a one-sided Clopper–Pearson lower bound on P[E | D] and
upper bound on P[E | D'] at α/2 each: for a mechanism that meets its claim the bound exceeds
the claim with probability at most α, whatever the sample size (Jagielski, Ullman & Oprea 2020;
Nasr et al. 2021). :func:`detection_power` is the exact probability, over the two binomial
counts, that the bound exceeds the claim when the event's probabilities are (p, q): the power
of the audit against a copy whose law is known (e.g. noise × 0.9). :func:`epsilon_lower_bound`
is the exploratory version that picks the event on one half of the samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "AUDIT_ALPHA",
    "AUDIT_POWER",
    "AuditResult",
    "clopper_pearson",
    "cp_arrays",
    "detection_power",
    "epsilon_lower_bound",
    "event_bound",
    "samples_for_power",
]

AUDIT_ALPHA = 1e-6
AUDIT_POWER = 1 - 1e-3
"""The power against noise × 0.9 that every default sample count has (``samples_for_power``):
a copy with 10 % too little noise is caught in at least 999 of 1000 audits."""
"""Default confidence level of the audits: a mechanism that meets its claim is shown above it
with probability at most 1e-6 (by the Clopper–Pearson construction, not by calibration)."""


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


def cp_arrays(k: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`clopper_pearson` for an array of counts k out of n (each bound one-sided α/2)."""
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


def _eps(kx: np.ndarray, nx: int, ky: np.ndarray, ny: int, delta: float,
         alpha: float) -> np.ndarray:
    """ln((CP-lower P[E | D] − δ)/CP-upper P[E | D']) (−inf when the lower bound is ≤ δ)."""
    p_lo, _ = cp_arrays(kx, nx, alpha)
    _, q_hi = cp_arrays(ky, ny, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p_lo > delta, np.log(np.maximum(p_lo - delta, 1e-300) / q_hi), -np.inf)


def _tail(x: np.ndarray, ts: np.ndarray) -> np.ndarray:
    return len(x) - np.searchsorted(np.sort(x), ts, side="right")


def event_bound(
    scores_d: np.ndarray, scores_dprime: np.ndarray, *, threshold: float, delta: float,
    alpha: float = AUDIT_ALPHA,
) -> AuditResult:
    """A (1 − alpha)-confidence lower bound on ε from the fixed event S > ``threshold``.

    ``threshold`` must not depend on the samples (the audits take it from their design).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.laplace(1.0, 1.0, 20000), rng.laplace(0.0, 1.0, 20000)
    >>> res = event_bound(a, b, threshold=1.0, delta=0.0, alpha=0.05)  # ratio e on y > 1
    >>> bool(0.8 < res.epsilon_lower <= 1.0)
    True
    """
    a = np.asarray(scores_d, dtype=np.float64)
    b = np.asarray(scores_dprime, dtype=np.float64)
    ts = np.array([float(threshold)])
    ka, kb = _tail(a, ts), _tail(b, ts)
    eps = float(_eps(ka, len(a), kb, len(b), delta, alpha)[0])
    bound = max(eps, 0.0) if math.isfinite(eps) else 0.0
    return AuditResult(bound, float(threshold), 1, int(ka[0]), int(kb[0]), len(a), alpha)


def epsilon_lower_bound(
    scores_d: np.ndarray,
    scores_dprime: np.ndarray,
    *,
    delta: float,
    alpha: float = 0.05,
    min_tail: int = 10,
) -> AuditResult:
    """A (1 − alpha)-confidence lower bound on ε, the event chosen on half of the samples.

    For a statistic whose best threshold is not known in advance. Candidate events are S > t and
    S ≥ t for t on a quantile grid (and every distinct value of a discrete statistic) of the
    first halves, in both tails; the best on the first halves is evaluated on the second halves.
    The result is never negative.

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
        kx, ky = _tail(xs, ts), _tail(ys, ts)
        eps = np.where(kx >= min_tail, _eps(kx, len(xs), ky, len(ys), delta, alpha), -np.inf)
        i = int(np.argmax(eps))
        if eps[i] > best[0]:
            best = (float(eps[i]), float(ts[i]), direction)
    _, t, direction = best
    x_eval, y_eval = pairs[direction][1]
    kx, ky = _tail(x_eval, np.array([t])), _tail(y_eval, np.array([t]))
    value = float(_eps(kx, len(x_eval), ky, len(y_eval), delta, alpha)[0])
    bound = value if math.isfinite(value) else 0.0
    return AuditResult(max(bound, 0.0), t, direction, int(kx[0]), int(ky[0]), len(x_eval), alpha)


def detection_power(p: float, q: float, n: int, *, claim: float, delta: float,
                    alpha: float = AUDIT_ALPHA) -> float:
    """P[:func:`event_bound` > claim] when the event has probability p under D and q under D'.

    Exact: the sum over the binomial count of D' of the binomial tail of D's count above the
    smallest count that clears the claim (counts beyond 12 standard deviations ignored, < 1e-30).

    Examples
    --------
    >>> round(detection_power(0.5, 0.5 * math.exp(-1.0), 2000, claim=1.0, delta=0.0), 6)
    0.0
    >>> detection_power(0.5, 0.5 * math.exp(-1.5), 20000, claim=1.0, delta=0.0) > 0.999
    True
    """
    def window(r: float) -> np.ndarray:
        sd = math.sqrt(n * r * (1 - r)) + 1.0
        return np.arange(max(0, math.floor(n * r - 12 * sd)), min(n, math.ceil(n * r + 12 * sd)) + 1)

    kp, kq = window(p), window(q)
    p_lo, _ = cp_arrays(kp, n, alpha)
    _, q_hi = cp_arrays(kq, n, alpha)
    need = delta + math.exp(claim) * q_hi  # caught iff p_lo(k_D) > need(k_D')
    first = np.searchsorted(p_lo, need, side="right")  # index in kp of the first catching count
    tail = np.where(first < len(kp), stats.binom.sf(kp[np.minimum(first, len(kp) - 1)] - 1, n, p),
                    0.0)
    return float(np.clip(np.sum(stats.binom.pmf(kq, n, q) * tail), 0.0, 1.0))


def samples_for_power(p: float, q: float, *, claim: float, delta: float, power: float = AUDIT_POWER,
                      alpha: float = AUDIT_ALPHA) -> int:
    """The smallest n (to 2 significant digits, rounded up) whose :func:`detection_power` ≥ power.

    Examples
    --------
    >>> samples_for_power(0.5, 0.5 * math.exp(-1.5), claim=1.0, delta=0.0)
    2800
    """
    gap = math.log((p - delta) / q) - claim
    if not (p > delta and gap > 0):
        raise ValueError(f"The event cannot exceed the claim: p = {p!r}, q = {q!r}.")
    z = stats.norm.isf(alpha / 2) + stats.norm.isf(1 - power)
    var = p * (1 - p) / (p - delta) ** 2 + (1 - q) / q
    n = max(100, int(var * (z / gap) ** 2 * 0.8))
    while True:
        digits = 10 ** max(0, len(str(n)) - 2)
        n = -(-n // digits) * digits
        if detection_power(p, q, n, claim=claim, delta=delta, alpha=alpha) >= power:
            return n
        n = int(n * 1.05) + 1
