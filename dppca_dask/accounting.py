"""Noise calibration and the privacy ledger.

Gaussian mechanism calibrations for an L2 (or Frobenius) sensitivity ``Δ``:

* ``"classical"`` -- σ = Δ·sqrt(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm A.1). Its guarantee is
  proven only for 0 < ε < 1; for larger ε it is the seed package's formula, kept for fidelity.
* ``"analytic"`` -- the smallest σ whose exact privacy curve satisfies (ε, δ) (Balle & Wang 2018,
  "Improving the Gaussian mechanism for differential privacy", Thm 8 / Alg. 1), valid for every ε:
  δ(σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ).

Every noisy release produces one immutable :class:`SpendRecord`; results carry the tuple of their
records (the ledger). A record states the component, mechanism, sensitivity, noise scale, the
(ε, δ) it was calibrated to and, for Gaussian noise, the zCDP cost ρ = Δ²/(2σ²).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from scipy import optimize, special

from dppca_dask.errors import BudgetError

__all__ = [
    "CALIBRATIONS",
    "SpendRecord",
    "analytic_gaussian_sigma",
    "classical_gaussian_sigma",
    "gaussian_delta",
    "gaussian_sigma",
    "ledger_from_dicts",
    "ledger_to_dicts",
    "ledger_totals",
]

Calibration = Literal["classical", "analytic"]
CALIBRATIONS: tuple[str, ...] = ("classical", "analytic")


def classical_gaussian_sigma(sensitivity: float, eps: float, delta: float) -> float:
    """σ = Δ·sqrt(2 ln(1.25/δ))/ε.

    Examples
    --------
    >>> classical_gaussian_sigma(4 / 50, 0.5, 1e-3)
    0.6042367252254475
    """
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / eps


def gaussian_delta(sigma: float, sensitivity: float, eps: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with noise σ and L2 sensitivity Δ (Balle & Wang)."""
    a = sensitivity / (2.0 * sigma)
    b = eps * sigma / sensitivity
    first = special.log_ndtr(a - b)
    second = eps + special.log_ndtr(-a - b)
    if second >= first:
        return 0.0
    return float(math.exp(first) * -math.expm1(second - first))


@functools.lru_cache(maxsize=1024)
def analytic_gaussian_sigma(sensitivity: float, eps: float, delta: float) -> float:
    """The smallest σ with :func:`gaussian_delta` ≤ δ (Balle & Wang 2018), for every ε > 0.

    Examples
    --------
    >>> s = analytic_gaussian_sigma(1.0, 1.0, 1e-5)
    >>> abs(gaussian_delta(s, 1.0, 1.0) - 1e-5) < 1e-12
    True
    """
    # δ(σ) is decreasing in σ; solve on log σ in units of Δ (the curve depends on σ/Δ only).
    def excess(log_s: float) -> float:
        return math.log(max(gaussian_delta(math.exp(log_s), 1.0, eps), 1e-300)) - math.log(delta)

    lo, hi = -10.0, 10.0
    while excess(lo) < 0:
        lo -= 10.0
    while excess(hi) > 0:
        hi += 10.0
    log_s = optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-15, maxiter=500)
    sigma = math.exp(log_s) * sensitivity
    # Step up to the first σ that satisfies the bound (root finding may land a hair below).
    while gaussian_delta(sigma, sensitivity, eps) > delta:
        sigma = math.nextafter(sigma, math.inf) * (1 + 1e-15)
    return sigma


def gaussian_sigma(sensitivity: float, eps: float, delta: float, calibration: str) -> float:
    """σ of a Gaussian mechanism under the named calibration."""
    if delta <= 0:
        raise BudgetError(f"The Gaussian mechanism needs delta > 0. Got {delta!r}.")
    if calibration == "classical":
        return classical_gaussian_sigma(sensitivity, eps, delta)
    if calibration == "analytic":
        return analytic_gaussian_sigma(sensitivity, eps, delta)
    raise BudgetError(f"Unknown calibration {calibration!r}; use one of {CALIBRATIONS}.")


@dataclass(frozen=True)
class SpendRecord:
    """What one mechanism call spent (or, with ``status="prior"``, what an earlier release spent)."""

    component: str
    mechanism: str
    eps: float
    delta: float
    sensitivity: float | None = None
    sensitivity_norm: str | None = None
    noise: str | None = None
    scale: float | None = None
    rho: float | None = None
    calibration: str | None = None
    draws: int = 0
    status: Literal["spent", "prior"] = "spent"
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def ledger_to_dicts(ledger: Iterable[SpendRecord]) -> list[dict[str, Any]]:
    return [r.as_dict() for r in ledger]


def ledger_from_dicts(items: Iterable[dict[str, Any]]) -> tuple[SpendRecord, ...]:
    return tuple(SpendRecord(**item) for item in items)


def ledger_totals(ledger: Iterable[SpendRecord]) -> dict[str, float]:
    """Basic-composition totals of the records spent by this release (prior releases excluded)."""
    spent = [r for r in ledger if r.status == "spent"]
    return {"eps": math.fsum(r.eps for r in spent), "delta": math.fsum(r.delta for r in spent)}
