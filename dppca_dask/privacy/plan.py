"""A release's plan as data: the spend records it will write, their total and its data passes.

Every estimator has a planning function computed from public quantities only (n, p, options,
budget) -- :func:`~dppca_dask.pca.loading.plan_loading`, :func:`~dppca_dask.pca.scree.plan_scree`,
:func:`~dppca_dask.pca.score.plan_score`, :func:`~dppca_dask.pca.pca.plan_pca`,
:func:`~dppca_dask.covariance.estimator.plan_covariance`. Its records are the ledger the fit
writes: the same mechanisms with the same ε, δ (or ρ) (:func:`records_match`); sensitivities and
noise scales are filled in where they are public (they are ``None`` where the noise is
calibrated to a released intermediate value, e.g. the PMWM cut-offs or the Huber τ).
``dppca-dask plan`` renders the plan (``--json``: :meth:`Plan.as_dict`) and the persistent ledger
reserves :attr:`Plan.total`.

Adaptive mechanisms whose number of calls is itself a private outcome (PACE-GGM's rounds) are
planned as one record carrying their whole allocation; :func:`records_match` compares such a
record with the sum of the calls it stands for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from dppca_dask.errors import BudgetError
from dppca_dask.privacy.accounting import SpendRecord, ledger_totals

__all__ = ["ADAPTIVE", "Plan", "concat", "planned", "records_match"]


@dataclass(frozen=True)
class Plan:
    """The planned spend records of one release, their composed total and the passes over X.

    ``accounting``: ``"basic"`` (ε and δ add up) or ``"zcdp"`` (ρ adds up; ``eps_delta`` is the
    (ε, δ) the total ρ was converted from or is reported as, when there is one).
    """

    records: tuple[SpendRecord, ...]
    passes: int | None = None
    accounting: Literal["basic", "zcdp"] = "basic"
    eps_delta: tuple[float, float] | None = None
    adaptive: frozenset[str] = field(default_factory=frozenset)
    """Components planned as one record for a data-dependent number of mechanism calls."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", tuple(self.records))
        for record in self.records:
            if not isinstance(record, SpendRecord):
                raise BudgetError("The 'records' field of Plan must hold SpendRecord values. "
                                  f"Got {type(record).__name__} instead.")
        if self.accounting not in ("basic", "zcdp"):
            raise BudgetError("The 'accounting' field of Plan must be 'basic' or 'zcdp'. "
                              f"Got {self.accounting!r} instead.")
        if self.passes is not None and (not isinstance(self.passes, int) or self.passes < 0):
            raise BudgetError("The 'passes' field of Plan must be None or an int >= 0. "
                              f"Got {self.passes!r} instead.")

    @property
    def total(self) -> dict[str, float]:
        """What the release spends: ``{"eps", "delta"}`` (and ``"rho"`` under zCDP)."""
        if self.accounting == "basic":
            return ledger_totals(self.records)
        rho = math.fsum(r.rho or 0.0 for r in self.records if r.status == "spent")
        out = {"rho": rho}
        if self.eps_delta is not None:
            out["eps"], out["delta"] = self.eps_delta
        return out

    def first(self, component: str, mechanism: str) -> SpendRecord:
        """The first planned record of ``mechanism`` for ``component`` (what plans print)."""
        for record in self.records:
            if (record.component, record.mechanism) == (component, mechanism):
                return record
        raise KeyError(f"no planned {mechanism!r} record for {component!r}")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``records`` (each as a dict), ``total``, ``passes``, ``accounting``."""
        return {"records": [r.as_dict() for r in self.records], "total": self.total,
                "passes": self.passes, "accounting": self.accounting,
                "adaptive": sorted(self.adaptive)}


def _key(record: SpendRecord) -> tuple[str, str, str]:
    return (record.component, record.mechanism, record.status)


ADAPTIVE = "adaptive rounds"
"""Mechanism name of a planned record that stands for a data-dependent number of calls."""


def records_match(plan: Plan, ledger: Sequence[SpendRecord], *, tol: float = 1e-12) -> list[str]:
    """Differences between ``plan.records`` and a fit's ledger (empty list: they match).

    The records are compared as multisets (stages that run side by side interleave their
    calls) on component, mechanism, status, ε, δ (and ρ under zCDP; to ``tol``, relative), and on
    every other field the plan states: sensitivity, its norm, the noise, its scale, ρ, the
    calibration, the grid and the number of draws (the Gaussian-DP composition of the
    persistent ledger needs them to count a lattice Gaussian). The plans' records come from the
    mechanisms' record builders, so these agree by construction; this check keeps them so. The ledger records of the components in
    ``plan.adaptive`` are summed into the one planned :data:`ADAPTIVE` record (component
    ``"rounds"``).
    """
    def close(a: float | None, b: float | None) -> bool:
        if a is None or b is None:
            return a is None and b is None
        return abs(a - b) <= tol * max(1.0, abs(a), abs(b))

    actual = [r for r in ledger if r.component not in plan.adaptive]
    merged = [r for r in ledger if r.component in plan.adaptive]
    if merged:
        calibrations = {r.calibration for r in merged}
        actual.append(SpendRecord("rounds", ADAPTIVE, math.fsum(r.eps for r in merged),
                                  math.fsum(r.delta for r in merged),
                                  rho=math.fsum(r.rho or 0.0 for r in merged),
                                  calibration=calibrations.pop() if len(calibrations) == 1
                                  else None))

    def order(r: SpendRecord) -> tuple[Any, ...]:
        return (*_key(r), round(r.eps, 9), round(r.delta, 15), round(r.rho or 0.0, 9))

    want_all, got_all = sorted(plan.records, key=order), sorted(actual, key=order)
    problems: list[str] = []
    if len(want_all) != len(got_all):
        problems.append(f"{len(want_all)} planned records, {len(got_all)} in the ledger: "
                        f"planned {[_key(r) for r in plan.records]}, "
                        f"ledger {[_key(r) for r in actual]}")
        return problems
    for want, got in zip(want_all, got_all, strict=True):
        if _key(want) != _key(got):
            problems.append(f"planned {_key(want)}, ledger {_key(got)}")
            continue
        for name in ("eps", "delta", "rho") if plan.accounting == "zcdp" else ("eps", "delta"):
            if not close(getattr(want, name), getattr(got, name)):
                problems.append(f"{_key(want)}: planned {name} {getattr(want, name)!r}, "
                                f"ledger {getattr(got, name)!r}")
        for name in ("sensitivity", "scale", "grid", "rho"):
            if getattr(want, name) is not None and not close(getattr(want, name),
                                                             getattr(got, name)):
                problems.append(f"{_key(want)}: planned {name} {getattr(want, name)!r}, "
                                f"ledger {getattr(got, name)!r}")
        for name in ("sensitivity_norm", "noise", "calibration"):
            if getattr(want, name) is not None and getattr(want, name) != getattr(got, name):
                problems.append(f"{_key(want)}: planned {name} {getattr(want, name)!r}, "
                                f"ledger {getattr(got, name)!r}")
        if want.draws and want.draws != got.draws:
            problems.append(f"{_key(want)}: planned draws {want.draws!r}, ledger {got.draws!r}")
    return problems


def planned(component: str, mechanism: str, eps: float, delta: float = 0.0, *,
            note: str = "", status: Literal["spent", "prior"] = "spent",
            **fields: Any) -> SpendRecord:
    """One planned record (a :class:`SpendRecord` with the public fields known in advance)."""
    return SpendRecord(component=component, mechanism=mechanism, eps=eps, delta=delta,
                       status=status, note=note, **fields)


def concat(*parts: Iterable[SpendRecord]) -> tuple[SpendRecord, ...]:
    """The records of several planned parts, in order."""
    return tuple(r for part in parts for r in part)
