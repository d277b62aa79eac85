"""ρ-zero-concentrated differential privacy (zCDP): conversions, the plan and the odometer.

Used by the covariance estimators, which are natively ρ-zCDP (docs/spec/SPEC_covariance.md §2).

* Composition adds ρ (Bun & Steinke 2016, Lemma 2.3).
* A Gaussian mechanism with L2 sensitivity Δ and noise σ is Δ²/(2σ²)-zCDP (Prop. 1.6).
* An exponential mechanism run with parameter ε (selection probability ∝ exp(ε·q/(2Δ_q))) is
  ε-DP and ε²/8-zCDP (Cesar & Rogers 2021, bounded range; the accounting AIM uses).
* Reporting: ρ-zCDP implies (ε, δ)-DP for every δ in (0, 1) with (Canonne, Kamath & Steinke
  2020, "The Discrete Gaussian for Differential Privacy", Prop. 12 and Cor. 13; the conversion
  OpenDP and dp-accounting use)

      ε(ρ, δ) = inf_{α>1}  αρ + (ln(1/δ) + (α − 1)·ln(1 − 1/α) − ln α)/(α − 1)

  (:func:`zcdp_eps`). Every α > 1 gives a valid ε, and the infimum is attained at the unique
  root of ρ(α − 1)² = ln(1/δ) − ln α, found by bisection to the last bit. It is never larger
  than Bun & Steinke's (2016, Prop. 1.3) ρ + 2·√(ρ·ln(1/δ)), the bound without the last two
  terms. A request given as (ε, δ) is converted to the *largest* ρ whose conversion meets it
  (:func:`zcdp_rho`, a bisection that ends on the side that meets it).

Invariants: an :class:`Odometer` never lets the recorded spending exceed its total, summed
exactly (:func:`math.fsum`) or left to right in float; a request that would overshoot only by
floating-point rounding is trimmed to what is left, so the ledger's ρ always sums to at most the
plan's ρ. Nothing here
touches data or draws noise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dppca_dask._validation import bad_param, parse_real
from dppca_dask.errors import BudgetError
from dppca_dask.privacy.accounting import SpendRecord

__all__ = [
    "MAX_CONVERTED_EPS",
    "Odometer",
    "ZCDPPlan",
    "ledger_rho",
    "resolve_zcdp",
    "zcdp_eps",
    "zcdp_order",
    "zcdp_rho",
]

CONVERSION = ("largest rho with eps_CKS(rho, delta) <= eps, eps_CKS = inf over a > 1 of a*rho + "
              "(ln(1/delta) + (a-1)*ln(1-1/a) - ln(a))/(a-1) (Canonne, Kamath & Steinke 2020)")
"""How an (ε, δ) request becomes ρ, as the plan's metadata states it."""

_ROUNDING = 1e-12
"""Relative slack within which an overshooting request is treated as rounding and trimmed."""


def _check_delta(delta: float, owner: str) -> float:
    delta = float(delta)
    if not delta > 0.0:  # also NaN
        raise ValueError(f"{owner} needs delta > 0. Got {delta!r}.")
    return delta


def _cks_eps(rho: float, log_inv_delta: float, alpha: float) -> float:
    """The CKS ε at order ``alpha`` (valid for every α > 1), written with log1p for accuracy:
    αρ + ln(1 − 1/α) + (ln(1/δ) − ln α)/(α − 1)."""
    x = alpha - 1.0
    return alpha * rho + (math.log(x) - math.log1p(x)) + (log_inv_delta - math.log1p(x)) / x


def zcdp_order(rho: float, delta: float) -> float:
    """The Rényi order α* > 1 at which :func:`zcdp_eps` attains its infimum.

    The derivative of the CKS objective in α is ρ − (ln(1/δ) − ln α)/(α − 1)², increasing
    through zero once, so α* = 1 + x with x the root of ρx² + ln(1 + x) = ln(1/δ) in
    (0, √(ln(1/δ)/ρ)]; bisection runs until the bracket is two adjacent floats.

    Examples
    --------
    >>> round(zcdp_order(0.5, 1e-5), 6)
    5.43185
    """
    rho, delta = float(rho), _check_delta(delta, "zcdp_order")
    if not (rho > 0.0 and math.isfinite(rho)) or delta >= 1.0:
        raise ValueError(f"zcdp_order needs a positive finite rho and delta < 1. "
                         f"Got rho = {rho!r}, delta = {delta!r}.")
    log_inv_delta = -math.log(delta)
    lo, hi = 0.0, math.sqrt(log_inv_delta / rho)  # g(lo) < 0 <= g(hi)
    for _ in range(2200):  # each step halves the bracket; far more than the float range needs
        mid = lo + (hi - lo) / 2.0
        if not lo < mid < hi:
            break
        if rho * mid * mid + math.log1p(mid) < log_inv_delta:
            lo = mid
        else:
            hi = mid
    return 1.0 + hi


def zcdp_eps(rho: float, delta: float) -> float:
    """ε of the (ε, δ)-DP guarantee implied by ρ-zCDP: the Canonne–Kamath–Steinke conversion.

    ε = inf_{α>1} αρ + (ln(1/δ) + (α−1)·ln(1−1/α) − ln α)/(α−1), evaluated at the optimal order
    (:func:`zcdp_order`) and never below 0; 0 for ρ = 0 or δ ≥ 1, ∞ for ρ = ∞.

    Examples
    --------
    >>> round(zcdp_eps(0.5, 1e-5), 6)
    4.728387
    >>> zcdp_eps(0.5, 1e-5) < 0.5 + 2 * math.sqrt(0.5 * math.log(1e5))  # Bun & Steinke's bound
    True
    """
    rho, delta = float(rho), _check_delta(delta, "zcdp_eps")
    if math.isnan(rho) or rho < 0.0:
        raise ValueError(f"zcdp_eps needs rho >= 0. Got {rho!r}.")
    if rho == 0.0 or delta >= 1.0:
        return 0.0
    if math.isinf(rho):
        return math.inf
    # any α > 1 gives a valid ε, and the objective is flat at α*: an error of a few ulps in α*
    # changes ε far below its own rounding
    return max(0.0, _cks_eps(rho, -math.log(delta), zcdp_order(rho, delta)))


MAX_CONVERTED_EPS = 1e6
"""The largest ε :func:`zcdp_rho` converts (ρ ≈ ε there: no meaningful privacy)."""


def _loose_rho(eps: float, log_inv_delta: float) -> float:
    """The largest ρ with ρ + 2√(ρL) ≤ ε (Bun & Steinke): (√(L+ε) − √L)², cancellation-free."""
    return eps * eps / (math.sqrt(log_inv_delta + eps) + math.sqrt(log_inv_delta)) ** 2


def zcdp_rho(eps: float, delta: float) -> float:
    """The largest ρ whose :func:`zcdp_eps` at ``delta`` is at most ``eps``.

    :func:`zcdp_eps` is continuous and increasing in ρ; Bun & Steinke's ρ (whose loose bound
    meets ``eps``, so CKS does too) starts the bracket, which is doubled until it fails and then
    bisected to adjacent floats; the lower end (which meets ``eps``) is returned.

    Examples
    --------
    >>> rho = zcdp_rho(1.0, 1e-6)
    >>> round(rho, 6), zcdp_eps(rho, 1e-6) <= 1.0
    (0.024356, True)
    """
    eps, delta = float(eps), _check_delta(delta, "zcdp_rho")
    if not (eps > 0.0 and math.isfinite(eps)) or delta >= 1.0:
        raise ValueError(f"zcdp_rho needs a positive finite eps and delta < 1. "
                         f"Got eps = {eps!r}, delta = {delta!r}.")
    if eps > MAX_CONVERTED_EPS:
        raise BudgetError(f"The 'eps' of a zCDP conversion must be at most "
                          f"{MAX_CONVERTED_EPS:g} (beyond it the release has no meaningful "
                          f"privacy and rho overflows). Got eps = {eps!r} instead.")
    lo = _loose_rho(eps, -math.log(delta))
    if not lo > 0.0:
        raise BudgetError(f"The 'eps' of a zCDP conversion is so small that rho underflows to 0 "
                          f"(no finite noise meets it); use eps >= 1e-150. Got eps = {eps!r}.")
    while lo > 0.0 and zcdp_eps(lo, delta) > eps:  # rounding of the closed form
        lo = math.nextafter(lo, 0.0)
    hi = 2.0 * lo
    while zcdp_eps(hi, delta) <= eps:
        lo, hi = hi, 2.0 * hi
    while True:
        mid = lo + (hi - lo) / 2.0
        if not lo < mid < hi:
            return lo
        if zcdp_eps(mid, delta) <= eps:
            lo = mid
        else:
            hi = mid


@dataclass(frozen=True)
class ZCDPPlan:
    """A resolved ρ-zCDP budget: the total ρ, how it was requested, and its allocations.

    ``eps``/``delta`` are the request when it was given as (ε, δ); otherwise ``delta`` is
    ``None`` and only ρ is stated. ``allocations`` names the parts of ρ the estimator plans to
    spend (they sum to ``rho``).
    """

    owner: str
    rho: float
    eps: float | None = None
    delta: float | None = None
    allocations: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        """ρ positive and finite, allocations non-negative and within ρ, however it was built."""
        if isinstance(self.rho, bool) or not isinstance(self.rho, int | float) \
                or not math.isfinite(self.rho) or self.rho <= 0:
            raise BudgetError(f"The 'rho' field of ZCDPPlan must be a positive finite float. "
                              f"Got {self.rho!r} instead.")
        parts = [r for _, r in self.allocations]
        if any(not math.isfinite(r) or r < 0 for r in parts) \
                or math.fsum(parts) > self.rho * (1.0 + _ROUNDING):
            raise BudgetError(f"The allocations of ZCDPPlan must be non-negative and add up to "
                              f"at most rho = {self.rho!r}. Got {dict(self.allocations)} instead.")

    @property
    def requested(self) -> str:
        return "rho" if self.delta is None else "eps_delta"

    def with_allocations(self, allocations: Iterable[tuple[str, float]]) -> ZCDPPlan:
        parts = tuple((name, float(r)) for name, r in allocations)
        if math.fsum(r for _, r in parts) > self.rho * (1.0 + _ROUNDING):
            raise BudgetError(f"{self.owner}: the allocations {dict(parts)} exceed rho = "
                              f"{self.rho!r}.")
        return ZCDPPlan(self.owner, self.rho, self.eps, self.delta, parts)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "owner": self.owner,
            "accounting": "zCDP",
            "rho": self.rho,
            "requested": self.requested,
            "allocations": dict(self.allocations),
        }
        if self.delta is not None:
            out["eps"] = self.eps
            out["delta"] = self.delta
            out["conversion"] = CONVERSION
        return out


def resolve_zcdp(
    *, rho: Any = None, eps: Any = None, delta: Any = None, owner: str
) -> ZCDPPlan:
    """Validate a budget given as ``rho`` or as ``eps`` and ``delta`` (converted to ρ).

    Examples
    --------
    >>> resolve_zcdp(rho=0.1, owner="dp_covariance").rho
    0.1
    >>> plan = resolve_zcdp(eps=1.0, delta=1e-6, owner="dp_covariance")
    >>> round(plan.rho, 6), plan.requested
    (0.024356, 'eps_delta')
    """
    if rho is not None:
        if eps is not None or delta is not None:
            raise BudgetError(f"{owner} takes either rho or eps and delta, not both.")
        value = parse_real(rho, "rho", owner, low=0.0, cls=BudgetError)
        if not math.isfinite(value):
            raise bad_param("rho", owner, "a float in the range (0, inf)", rho,
                            cls=BudgetError)
        return ZCDPPlan(owner, value)
    if eps is None and delta is None:
        raise BudgetError(f"{owner} needs a privacy budget: rho (zCDP), or eps and delta.")
    if eps is None or delta is None:
        missing = "eps" if eps is None else "delta"
        raise BudgetError(f"{owner} needs both eps and delta when rho is not given; "
                          f"{missing!r} is missing.")
    e = parse_real(eps, "eps", owner, low=0.0, cls=BudgetError)
    if not math.isfinite(e):
        raise bad_param("eps", owner, "a float in the range (0, inf)", eps, cls=BudgetError)
    d = parse_real(delta, "delta", owner, low=0.0, high=1.0, cls=BudgetError)
    return ZCDPPlan(owner, zcdp_rho(e, d), e, d)


class Odometer:
    """Tracks ρ spent against a total; refuses (or trims rounding) so the total is never exceeded.

    Examples
    --------
    >>> od = Odometer(1.0)
    >>> od.take(0.3), od.take(0.7 + 1e-17), od.remaining
    (0.3, 0.7, 0.0)
    """

    def __init__(self, total: float) -> None:
        self.total = float(total)
        self._spent: list[float] = []
        self._running = 0.0  # the plain left-to-right sum a reader of the ledger would compute

    @property
    def spent(self) -> float:
        return math.fsum(self._spent)

    @property
    def remaining(self) -> float:
        return max(0.0, self.total - self.spent)

    def take(self, rho: float) -> float:
        """Record spending ``rho`` (trimmed to what is left if it overshoots by rounding only)."""
        left = self.remaining
        if rho > left:
            if rho > left + _ROUNDING * self.total:
                raise BudgetError(f"Refused to spend rho = {rho!r}: only {left!r} is left.")
            rho = left
        while rho > 0 and (math.fsum([*self._spent, rho]) > self.total
                           or self._running + rho > self.total):
            rho = math.nextafter(rho, 0.0)
        self._spent.append(rho)
        self._running += rho
        return rho


def ledger_rho(ledger: Iterable[SpendRecord]) -> float:
    """Total ρ of the records spent by this release (zCDP composition; priors excluded)."""
    return math.fsum(r.rho or 0.0 for r in ledger if r.status == "spent")
