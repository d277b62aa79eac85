"""Budget caps and cumulative spend over spend records, for the ledger's cap check.

A cap (E, D) admits a set of releases when their records compose to a tight ε at δ = D of at
most E (:func:`dppca_dask.privacy.composition.compose`, :meth:`~dppca_dask.privacy.composition.
Composition.tight_eps`), or when their basic sums fit it; a ρ cap when every record has a ρ and
the total is at most ρ. A custodian's cap can only be lowered by a run's (:meth:`Cap.lowered_by`:
per coordinate, the stricter one; a stricter (ε, δ) pair implies the looser, since the tight ε
decreases with δ).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dppca_dask.errors import BudgetError
from dppca_dask.privacy.composition import compose

__all__ = ["Basic", "Cap", "Spend", "cumulative", "fits"]

TOLERANCE = 1e-12
"""Relative slack of the cap comparisons (float rounding of sums)."""


@dataclass(frozen=True)
class Basic:
    """Basic-composition sums (ε, δ) of some releases (zero when there are none)."""

    eps: float = 0.0
    delta: float = 0.0

    def __post_init__(self) -> None:
        for name in ("eps", "delta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or value < 0:
                raise BudgetError(f"The {name!r} field of a release's spend must be a finite "
                                  f"float >= 0. Got {value!r} instead.")

    def __add__(self, other: Any) -> Basic:
        return Basic(math.fsum([self.eps, other.eps]), math.fsum([self.delta, other.delta]))


def _finite(value: Any, name: str, upper: float | None = None) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) \
        and value >= 0 and (upper is None or value < upper)
    if not ok:
        rule = f"a float in [0, {upper:g})" if upper is not None else "a finite float >= 0"
        raise BudgetError(f"The {name!r} parameter of the budget cap must be {rule}. "
                          f"Got {value!r} instead.")
    return float(value)


@dataclass(frozen=True)
class Cap:
    """A cap on a dataset's cumulative spend: ``eps`` and ``delta`` together and/or ``rho``."""

    eps: float | None = None
    delta: float | None = None
    rho: float | None = None

    def __post_init__(self) -> None:
        for name, upper in (("eps", None), ("delta", 1.0), ("rho", None)):  # each value first
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _finite(getattr(self, name), name, upper))
        if (self.eps is None) != (self.delta is None):
            raise BudgetError("The 'eps' and 'delta' parameters of the budget cap must be given "
                              f"together. Got eps = {self.eps!r}, delta = {self.delta!r} instead.")
        if self.eps is None and self.rho is None:
            raise BudgetError("The budget cap must give eps and delta, or rho. Got none.")

    def lowered_by(self, run: Cap | None) -> tuple[Cap, list[str]]:
        """The stricter of this (custodian) cap and a run's, per coordinate; the run's looser
        coordinates are listed (they are ignored)."""
        if run is None:
            return self, []
        ignored = []
        values: dict[str, float | None] = {}
        for name in ("eps", "delta", "rho"):
            mine, theirs = getattr(self, name), getattr(run, name)
            if theirs is not None and mine is not None and theirs > mine:
                ignored.append(f"{name} = {theirs:g} (custodian: {mine:g})")
            candidates = [v for v in (mine, theirs) if v is not None]
            values[name] = min(candidates) if candidates else None
        if values["eps"] is None or values["delta"] is None:
            values["eps"] = values["delta"] = None
        return Cap(values["eps"], values["delta"], values["rho"]), ignored

    def describe(self) -> str:
        parts = [] if self.eps is None else [f"eps = {self.eps:g}, delta = {self.delta:g}"]
        return " and ".join(parts + ([] if self.rho is None else [f"rho = {self.rho:g}"]))

    def as_dict(self) -> dict[str, float | None]:
        return {"eps": self.eps, "delta": self.delta, "rho": self.rho}


@dataclass(frozen=True)
class Spend:
    """A dataset's cumulative spend: basic sums, the zCDP ρ part and the tight ε at ``delta``."""

    basic_eps: float
    basic_delta: float
    rho: float
    tight_eps: float
    delta: float
    """The δ the tight figure is stated at (the cap's, else the basic δ)."""

    def describe(self) -> str:
        tight = "inf" if math.isinf(self.tight_eps) else f"{self.tight_eps:.6g}"
        return (f"basic composition eps = {self.basic_eps:.6g}, delta = {self.basic_delta:.6g}; "
                f"tight eps = {tight} at delta = {self.delta:.6g}"
                + (f" (zCDP rho = {self.rho:.6g})" if self.rho > 0 else ""))

    def as_dict(self) -> dict[str, Any]:
        return {"basic": {"eps": self.basic_eps, "delta": self.basic_delta},
                "tight": {"eps": None if math.isinf(self.tight_eps) else self.tight_eps,
                          "delta": self.delta}, "rho": self.rho}


def _zcdp_only(record: dict[str, Any]) -> bool:
    """A record whose guarantee is its ρ alone (calibration "zcdp", or ρ with ε = δ = 0)."""
    if record.get("status") == "prior":
        return False
    if record.get("calibration") == "zcdp":
        return True
    return (record.get("rho") or 0.0) > 0 and float(record.get("eps") or 0.0) == 0.0 \
        and float(record.get("delta") or 0.0) == 0.0


def _for_compose(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records that state only ρ with ε = δ = 0 enter :func:`compose` with ε = ∞ (its mark of
    a record without an (ε, δ) statement), so that no conversion counts them as free."""
    return [{**r, "eps": math.inf} if _zcdp_only(r) and float(r.get("eps") or 0.0) == 0.0
            else r for r in records]


ACCOUNTANTS = ("tight", "pld")
"""The deployment's accountant (``dppca.ledger.accountant``): ``tight`` (the default, a valid
filter for fully adaptive use) or ``pld`` (also the PLD figure: valid only when every release's
mechanism and parameters are fixed before any of them is seen; docs/privacy.md)."""


def cumulative(records: Sequence[dict[str, Any]], basic: Basic,
               delta: float | None = None, accountant: str = "tight") -> Spend:
    """The spend of ``records`` (dicts of spend records) of releases whose basic totals sum to
    ``basic``: the tight ε at ``delta`` (default the basic δ) from :func:`compose` (with
    ``accountant="pld"`` the least of it and the PLD figure); not more than the basic ε when the
    basic sums fit in ``delta`` and cover every record (no record that states only a ρ)."""
    comp = compose(_for_compose(records))
    at = basic.delta if delta is None else delta
    tight = comp.tight_eps(at) if at > 0 else math.inf
    if accountant == "pld" and at > 0:
        tight = min(tight, comp.pld_eps(at))
    covered = not any(_zcdp_only(r) for r in records)
    if covered and basic.delta <= at * (1 + TOLERANCE):  # an (ε, δ) statement at δ = at
        tight = min(tight, basic.eps)
    return Spend(basic.eps, basic.delta, comp.rho, tight, at)


def fits(records: Sequence[dict[str, Any]], basic: Basic, cap: Cap,
         accountant: str = "tight") -> tuple[bool, Spend]:
    """Whether ``records`` (the dataset's counted ones plus the planned release's), whose
    releases' basic totals sum to ``basic``, fit ``cap``: for (E, D) the tight ε at δ = D is at
    most E (see :func:`cumulative`); for ρ the zCDP total is at most ρ and every record has a ρ.
    """
    spend = cumulative(records, basic, cap.delta, accountant)
    ok = True
    if cap.eps is not None:
        ok = spend.tight_eps <= cap.eps * (1 + TOLERANCE)
    if cap.rho is not None:
        comp = compose(_for_compose(records))
        ok = ok and comp.other_eps == 0 and comp.other_delta == 0 \
            and comp.rho <= cap.rho * (1 + TOLERANCE)
    return ok, spend
