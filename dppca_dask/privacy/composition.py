"""Cumulative privacy spend of many releases: basic composition and the tight zCDP figure.

Records that carry ρ (Gaussian mechanisms: ρ = Δ²/(2σ²)) or are pure ε-DP (ρ = ε²/2) compose
in zCDP by adding ρ; the total ρ is converted to (ε, δ). Records with neither (mechanisms with
a δ of their own and no ρ, e.g. the smooth-sensitivity Laplace or the stability histogram) fall
back to basic composition and are added on top: the tight figure at a target δ is

    ε_tight(δ) = ε_zCDP(ρ_total, δ − δ_other) + ε_other

which is never larger than the basic sum Σε (then the basic sum is reported).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.zcdp import zcdp_eps

__all__ = ["Composition", "compose", "record_rho"]


def _getter(record: SpendRecord | dict[str, Any]) -> Any:
    if isinstance(record, dict):
        return record.get
    return lambda name: getattr(record, name)


def record_rho(record: SpendRecord | dict[str, Any]) -> float | None:
    """The zCDP ρ a record's mechanism satisfies, or None when it has none (basic only).

    A stated ρ wins (Gaussian and zCDP mechanisms); a pure ε-DP record (δ = 0) satisfies
    ρ = ε²/2 (Bun & Steinke 2016, Prop. 1.4).
    """
    get = _getter(record)
    if get("status") == "prior":
        return 0.0
    rho = get("rho")
    if rho is not None:
        return float(rho)
    if float(get("delta")) == 0.0:
        return float(get("eps")) ** 2 / 2.0
    return None


@dataclass(frozen=True)
class Composition:
    """The cumulative spend of a set of records, basic and tight."""

    basic_eps: float
    basic_delta: float
    rho: float
    """Total ρ of the records that carry one (or are pure ε-DP)."""
    other_eps: float
    other_delta: float
    """Basic sums of the records without ρ."""

    def tight_eps(self, delta: float) -> float:
        """ε at total δ = ``delta`` (never more than the basic sum when that fits in ``delta``)."""
        left = delta - self.other_delta
        if left <= 0.0:
            return math.inf
        eps = (zcdp_eps(self.rho, left) if self.rho > 0 else 0.0) + self.other_eps
        return min(eps, self.basic_eps) if self.basic_delta <= delta else eps


def compose(records: Iterable[SpendRecord | dict[str, Any]]) -> Composition:
    """Basic sums and the zCDP total of ``records`` (prior releases count for nothing here)."""
    basic_eps, basic_delta, rho, other_eps, other_delta = [], [], [], [], []
    for r in records:
        get = _getter(r)
        if get("status") == "prior":
            continue
        eps, delta = float(get("eps")), float(get("delta"))
        basic_eps.append(eps)
        basic_delta.append(delta)
        value = record_rho(r)
        if value is None:
            other_eps.append(eps)
            other_delta.append(delta)
        else:
            rho.append(value)
    return Composition(math.fsum(basic_eps), math.fsum(basic_delta), math.fsum(rho),
                       math.fsum(other_eps), math.fsum(other_delta))
