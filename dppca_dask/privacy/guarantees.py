"""Settings outside their guarantee, found from a release's plan before any data is read.

Two checks, both from public quantities (the planned records, n):

* **Classical calibration at ε ≥ 1.** The classical Gaussian σ = Δ·√(2 ln(1.25/δ))/ε is proven
  only for ε < 1 (the seed: "larger eps requires an additional calibration check"). We perform
  that check: the exact ε the classical σ achieves at δ (Balle & Wang's exact privacy curve).
  It passes up to about ε ≈ 8 (the classical σ over-noises there: exact ε 0.75 at a requested
  1, 1.61 at 2) and fails above (10.39 at 10, δ = 1e-5): then it warns. The exact mechanisms
  never release with an under-calibrated σ -- where the classical σ fails they certify a larger
  one -- so the warning states the exact ε of the classical formula, the σ actually used and
  the analytic alternative's σ.
* **δ ≥ 1/n.** A mechanism may then release individual rows outright with probability δ.

:func:`guarantee_warnings` returns the messages; :func:`warn_guarantees` emits them as
:class:`~dppca_dask.errors.PrivacyWarning` (or raises :class:`~dppca_dask.errors.BudgetError`
with ``strict=True``: the CLI's ``--strict``).
"""

from __future__ import annotations

import warnings

from dppca_dask.errors import BudgetError, PrivacyWarning
from dppca_dask.privacy.accounting import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    gaussian_delta,
)
from dppca_dask.privacy.plan import Plan

__all__ = ["classical_exact_eps", "guarantee_warnings", "warn_guarantees"]

_GAUSSIAN = ("gaussian", "gaussian_symmetric_matrix", "gaussian_histogram")


def classical_exact_eps(eps: float, delta: float) -> float:
    """The exact ε (at δ) of the Gaussian mechanism with the classical σ for (ε, δ).

    Scale-free (σ/Δ is what matters). Below 1 it is at most ``eps``; above, it can exceed it.

    Examples
    --------
    >>> round(classical_exact_eps(10.0, 1e-5), 2)
    10.39
    >>> classical_exact_eps(0.5, 1e-5) <= 0.5
    True
    """
    sigma = classical_gaussian_sigma(1.0, eps, delta)
    lo, hi = 0.0, max(2.0 * eps, 1.0)
    while gaussian_delta(sigma, 1.0, hi) > delta:
        hi *= 2.0
    for _ in range(200):  # δ(ε) decreases in ε: bisect for δ(ε) = δ
        mid = 0.5 * (lo + hi)
        if gaussian_delta(sigma, 1.0, mid) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi


def guarantee_warnings(plan: Plan, n: int) -> list[str]:
    """Messages for the planned releases that are outside a stated guarantee (empty: none)."""
    out: list[str] = []
    seen: set[tuple[float, float]] = set()
    for r in plan.records:
        if r.status != "spent" or r.mechanism not in _GAUSSIAN or r.calibration != "classical":
            continue
        if r.eps < 1.0 or (r.eps, r.delta) in seen:
            continue
        seen.add((r.eps, r.delta))
        exact = classical_exact_eps(r.eps, r.delta)
        if exact <= r.eps * (1.0 + 1e-9):  # the check passes: the classical sigma is enough
            continue
        analytic = analytic_gaussian_sigma(1.0, r.eps, r.delta)
        classical = classical_gaussian_sigma(1.0, r.eps, r.delta)
        used = "" if r.scale is None or not r.sensitivity else (
            f"; this release uses the certified sd {r.scale / r.sensitivity:.4g} x sensitivity")
        out.append(
            f"calibration='classical' at eps = {r.eps:.6g} (>= 1, {r.component} "
            f"{r.mechanism}): the classical formula's sd {classical:.4g} x sensitivity gives "
            f"exact eps = {exact:.6g} at delta = {r.delta:.3g}, not {r.eps:.6g}{used}; "
            f"calibration='analytic' needs only {analytic:.4g} x sensitivity")
    deltas = [r.delta for r in plan.records if r.status == "spent" and r.delta > 0]
    if n > 0 and deltas and max(deltas) >= 1.0 / n:
        out.append(f"delta = {max(deltas):.3g} >= 1/n = {1.0 / n:.3g}: with probability delta a "
                   "mechanism may disclose individual rows; choose delta well below 1/n")
    total = plan.total.get("delta", 0.0)
    if n > 0 and total >= 1.0 / n and not (deltas and max(deltas) >= 1.0 / n):
        out.append(f"the release's total delta = {total:.3g} >= 1/n = {1.0 / n:.3g}; choose "
                   "delta well below 1/n")
    return out


def warn_guarantees(plan: Plan, n: int, *, strict: bool = False, stacklevel: int = 3) -> None:
    """Emit :func:`guarantee_warnings` as PrivacyWarnings (``strict``: refuse instead)."""
    messages = guarantee_warnings(plan, n)
    if strict and messages:
        raise BudgetError("Refused (strict): " + " | ".join(messages))
    for message in messages:
        warnings.warn(message, PrivacyWarning, stacklevel=stacklevel)
