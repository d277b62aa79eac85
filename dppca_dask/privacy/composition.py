"""Cumulative privacy spend of many releases: basic composition and the tight zCDP figure.

Every spent record falls in one of four kinds (``status="prior"`` records describe releases
counted elsewhere and are left out):

* **(ε, δ) with ρ** -- calibrated to an (ε, δ) pair and also ρ-zCDP: the Gaussian mechanisms
  (``gaussian``, ``gaussian_symmetric_matrix``, ``gaussian_histogram``) state
  ρ = Δ²/(2σ²) for the grid-inflated sensitivity Δ and the noise sd σ they actually used
  (Canonne, Kamath & Steinke 2020, Thm 14: exactly the continuous value for the discrete
  Gaussian); a ``gaussian``/``gaussian_symmetric_matrix`` record stating its draws counts
  μ²/2 for the μ its (ε, δ, calibration) gives (:func:`~dppca_dask.privacy.gdp.release_mu`, at
  most 1e-9 above the stated ρ), so a plan composes exactly as its release even where the data
  calibrated the sensitivity;
* **pure ε** (δ = 0, no stated ρ: ``laplace``, ``durfee_above_threshold``): ε-DP, hence
  ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4);
* **zCDP only** (calibration ``"zcdp"``: ``gaussian_zcdp``, ``gaussian_zcdp_symmetric``,
  ``exponential_mechanism`` with ρ = ε²/8 (Cesar & Rogers 2021), ``durfee_above_threshold``
  stated as ρ = ε²/2 (the covariance radius's searches); also any record stating ρ with
  ε = δ = 0 or ε = ∞): their ``eps``/``delta`` fields state no guarantee; only ρ does;
* **other** -- (ε, δ) with δ > 0 and no ρ (``smooth_sensitivity_laplace``,
  ``stability_histogram``): basic composition only.

**Basic** (``basic_eps``, ``basic_delta``) is Σε, Σδ over the records calibrated to an (ε, δ)
pair, i.e. all but the zCDP-only ones. It is a guarantee for the whole ledger only when there
are no zCDP-only records (``basic_covers_all``); with them it leaves their ρ out, and only the
tight figure covers everything.

**Tight** (:meth:`Composition.tight_eps`, the figure a cap is checked against): a group of
records is composed in zCDP (ρ adds, Bun & Steinke 2016, Lemma 2.3) and converted with the CKS
bound (:func:`~dppca_dask.privacy.zcdp.zcdp_eps`); the rest add up by basic composition, so

    ε_tight(δ) = ε_CKS(ρ_group, δ − δ_rest) + ε_rest.

Mixing the two is valid under adaptive composition because an (ε, δ)-DP mechanism is
δ-approximately (ε, 0)-zCDP, approximate zCDP composes by adding (ξ, ρ, δ), and δ-approximate
(ξ, ρ)-zCDP gives (ξ + ε_CKS(ρ, δ′), δ + δ′)-DP (Bun & Steinke 2016, §8; the accounting of
dp-accounting's ``ZCDpEvent(rho, xi)``). zCDP-only records are always in the group, "other"
records never; the (ε, δ)-with-ρ records and the pure-ε records each go all in or all out, and
the smallest of these four valid bounds -- and of a fifth, the Gaussian-DP composition of the
fully stated lattice Gaussians with a composed lattice certificate plus the basic sum of the other
records (:mod:`~dppca_dask.privacy.gdp`; exact for composed Gaussians, ~10 % below CKS) -- is
reported (with no zCDP-only records one of them is the basic sum). Every figure is an upper bound: any assignment and any Rényi order give a valid
ε, and δ − δ_rest is rounded down.

**PLD** (:meth:`Composition.pld_eps`, :mod:`~dppca_dask.privacy.pld`): every record mapped to a
dominating pair for its mechanism as implemented and the pairs composed with dp-accounting's
PLD accountant (pessimistic). It is the tightest figure for a list of releases fixed in advance
(5 Gaussians at (1, 1e-5) and 5 scalar Laplace at ε = 0.5: 4.457 at δ = 1e-5 against 4.942
here), but a ledger whose next release is chosen after earlier outputs cannot stop on it (natural
f-DP / PLD filters are invalid under fully adaptive composition: Regehr et al. 2026, Honkela et
al. 2026), so :meth:`Composition.tight_eps` -- the ledger's cap figure -- does not use it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dppca_dask.errors import BudgetError
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.gdp import LatticeGaussian, composed_lattice_eps, lattice_gaussian
from dppca_dask.privacy.pld import NO_TERMS, PLDTerms, pld_terms
from dppca_dask.privacy.pld import pld_eps as composed_pld_eps
from dppca_dask.privacy.zcdp import zcdp_eps

__all__ = ["CONVERSION", "Composition", "compose", "record_rho"]

CONVERSION = ("tight: zCDP composition (rho adds) converted with eps = inf over a > 1 of a*rho + "
              "(ln(1/delta) + (a-1)*ln(1-1/a) - ln(a))/(a-1) (Canonne, Kamath & Steinke 2020), "
              "plus basic composition of the records without rho; or, when smaller, Gaussian-DP "
              "composition of the lattice Gaussians (mu^2 adds; Dong, Roth & Su 2022) with their "
              "composed lattice certificate, plus basic composition of the other records")
"""How :meth:`Composition.as_dict` describes its tight figure."""


def _getter(record: SpendRecord | dict[str, Any]) -> Any:
    if isinstance(record, dict):
        return record.get
    return lambda name: getattr(record, name)


def _amount(get: Any, name: str) -> float:
    value = get(name)
    ok = isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) and value >= 0 and (name != "delta" or value < 1)
    if not ok:
        rule = "a float in [0, 1)" if name == "delta" else "a finite float >= 0"
        raise BudgetError(f"The {name!r} field of a spend record must be {rule}. "
                          f"Got {value!r} instead.")
    return float(value)


def _is_zcdp(get: Any) -> bool:
    """A zCDP-only record: calibration "zcdp", or a stated ρ with no finite (ε, δ) statement
    (ε = δ = 0, or ε = ∞ as a ledger may mark such records)."""
    if get("calibration") == "zcdp":
        return True
    if get("rho") is None:
        return False
    eps, delta = get("eps"), get("delta")
    return (eps == 0 and delta == 0) or eps == math.inf


def record_rho(record: SpendRecord | dict[str, Any]) -> float | None:
    """The zCDP ρ a record's mechanism satisfies, or None when it has none (basic only).

    A stated ρ wins (Gaussian and zCDP mechanisms: the ρ the mechanism's actual noise gives); a
    pure ε-DP record (δ = 0) satisfies ρ = ε²/2 (Bun & Steinke 2016, Prop. 1.4); a record with
    a δ of its own and no ρ has none. A prior record counts 0 (it was spent elsewhere); a
    zCDP-calibrated record without ρ cannot be accounted and raises BudgetError.

    Examples
    --------
    >>> record_rho(SpendRecord("c", "laplace", eps=0.5, delta=0.0))
    0.125
    >>> record_rho(SpendRecord("c", "stability_histogram", eps=1.0, delta=1e-6)) is None
    True
    """
    get = _getter(record)
    if get("status") == "prior":
        return 0.0
    rho = get("rho")
    if rho is not None:
        return _amount(get, "rho")
    if _is_zcdp(get):
        raise BudgetError(f"A zCDP record must state its rho; the record of "
                          f"{get('mechanism')!r} ({get('component')!r}) has none.")
    if _amount(get, "delta") == 0.0:
        return _amount(get, "eps") ** 2 / 2.0
    return None


def _sum(*values: float) -> float:
    return math.fsum(values)


@dataclass(frozen=True)
class Composition:
    """The cumulative spend of a set of records, by kind (see the module docstring).

    Build it with :func:`compose`. Fields are the per-kind sums; ``basic_eps``,
    ``basic_delta`` and ``rho`` are derived from them.
    """

    approx_eps: float
    approx_delta: float
    approx_rho: float
    """(ε, δ) records with δ > 0 that carry a ρ (the (ε, δ) Gaussians)."""
    pure_eps: float
    pure_rho: float
    """Pure ε-DP records (δ = 0): Σε and their ρ (ε²/2 each unless stated)."""
    zcdp_only_rho: float
    zcdp_only_records: int
    """Records calibrated in zCDP (no (ε, δ) statement): their ρ and how many there are."""
    other_eps: float
    other_delta: float
    """Records with a δ and no ρ (basic composition only)."""
    lattice: tuple[LatticeGaussian, ...] = ()
    """The fully stated lattice Gaussian releases (:mod:`~dppca_dask.privacy.gdp`)."""
    off_lattice_eps: float = 0.0
    off_lattice_delta: float = 0.0
    off_lattice_zcdp_only: int = 0
    """The other records: basic Σε, Σδ of those with an (ε, δ) statement, and how many are
    zCDP-only (then the Gaussian-DP bound is not used)."""
    pld: PLDTerms = NO_TERMS
    """Every spent record's dominating pair (:mod:`~dppca_dask.privacy.pld`)."""

    def __post_init__(self) -> None:
        """Every sum finite and non-negative, δ sums below 1, however it was built."""
        for name in ("approx_eps", "approx_delta", "approx_rho", "pure_eps", "pure_rho",
                     "zcdp_only_rho", "other_eps", "other_delta", "off_lattice_eps",
                     "off_lattice_delta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or value < 0:
                raise BudgetError(f"The {name!r} field of Composition must be a finite float "
                                  f">= 0. Got {value!r} instead.")
        for name in ("zcdp_only_records", "off_lattice_zcdp_only"):
            count = getattr(self, name)
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise BudgetError(f"The {name!r} field of Composition must be an int >= 0. "
                                  f"Got {count!r} instead.")
        if not all(isinstance(g, LatticeGaussian) for g in self.lattice):
            raise BudgetError("The 'lattice' field of Composition must hold LatticeGaussians.")
        if not isinstance(self.pld, PLDTerms):
            raise BudgetError("The 'pld' field of Composition must be a PLDTerms.")

    @property
    def basic_eps(self) -> float:
        """Σε over the records calibrated to an (ε, δ) pair (zCDP-only records left out)."""
        return _sum(self.approx_eps, self.pure_eps, self.other_eps)

    @property
    def basic_delta(self) -> float:
        """Σδ over the records calibrated to an (ε, δ) pair (zCDP-only records left out)."""
        return _sum(self.approx_delta, self.other_delta)

    @property
    def basic_covers_all(self) -> bool:
        """Whether (``basic_eps``, ``basic_delta``) is a guarantee for every record (no
        zCDP-only records)."""
        return self.zcdp_only_records == 0

    @property
    def rho(self) -> float:
        """Total ρ of the records that have one (stated, or ε²/2 for pure ε)."""
        return _sum(self.approx_rho, self.pure_rho, self.zcdp_only_rho)

    def tight_eps(self, delta: float) -> float:
        """The smallest ε this accounting proves at total δ = ``delta`` (∞ if none fits).

        The minimum over the four assignments of the module docstring; with no zCDP-only
        records it is never more than ``basic_eps`` once ``basic_delta`` ≤ ``delta``.

        Examples
        --------
        >>> comp = compose([SpendRecord("c", "laplace", eps=0.01, delta=0.0)] * 100)
        >>> comp.basic_eps, round(comp.tight_eps(1e-6), 4)
        (1.0, 0.4299)
        """
        delta = float(delta)
        if not delta >= 0.0:  # also NaN
            raise ValueError(f"tight_eps needs delta >= 0. Got {delta!r}.")
        best = math.inf
        for approx_in in (True, False):
            for pure_in in (True, False):
                rho = _sum(self.zcdp_only_rho, self.approx_rho if approx_in else 0.0,
                           self.pure_rho if pure_in else 0.0)
                rest_eps = _sum(self.other_eps, 0.0 if approx_in else self.approx_eps,
                                0.0 if pure_in else self.pure_eps)
                rest_delta = _sum(self.other_delta, 0.0 if approx_in else self.approx_delta)
                if rho == 0.0:
                    if rest_delta <= delta:
                        best = min(best, rest_eps)
                    continue
                left = delta - rest_delta
                while left > 0.0 and left + rest_delta > delta:  # round the remainder down
                    left = math.nextafter(left, 0.0)
                if left > 0.0:
                    best = min(best, zcdp_eps(rho, left) + rest_eps)
        return min(best, self.gdp_eps(delta))

    def gdp_eps(self, delta: float) -> float:
        """The composed lattice certificate's ε at ``delta`` (:mod:`~dppca_dask.privacy.gdp`;
        ∞ without lattice Gaussians or with zCDP-only records outside them)."""
        if not self.lattice or self.off_lattice_zcdp_only:
            return math.inf
        return composed_lattice_eps(self.lattice, self.off_lattice_eps, self.off_lattice_delta,
                                    float(delta))

    def pld_eps(self, delta: float) -> float:
        """The PLD composition's ε at total ``delta`` (:mod:`~dppca_dask.privacy.pld`): valid for
        these records as a sequence fixed in advance, *not* as a ledger's filter, so
        :meth:`tight_eps` does not use it. ∞ when it has no figure (a zCDP-only record it cannot
        map, too little δ, losses too wide).

        Examples
        --------
        >>> comp = compose([SpendRecord("c", "laplace", eps=0.25, delta=0.0, draws=1)] * 40)
        >>> round(comp.pld_eps(1e-5), 3), round(comp.tight_eps(1e-5), 3), comp.basic_eps
        (6.782, 8.078, 10.0)
        """
        delta = float(delta)
        if not delta >= 0.0:  # also NaN
            raise ValueError(f"pld_eps needs delta >= 0. Got {delta!r}.")
        return composed_pld_eps(self.pld, delta)

    def as_dict(self, delta: float) -> dict[str, Any]:
        """Both figures for display: the basic sums (and whether they cover every record), the
        total ρ, and the tight ε at ``delta`` (None when no ε fits that δ)."""
        tight = self.tight_eps(delta)
        return {
            "basic_eps": self.basic_eps,
            "basic_delta": self.basic_delta,
            "basic_covers_all": self.basic_covers_all,
            "rho": self.rho,
            "zcdp_only_rho": self.zcdp_only_rho,
            "zcdp_only_records": self.zcdp_only_records,
            "tight_eps": tight if math.isfinite(tight) else None,
            "tight_delta": float(delta),
            "conversion": CONVERSION,
        }


def compose(records: Iterable[SpendRecord | dict[str, Any]]) -> Composition:
    """Sort the spent ``records`` (SpendRecords or their dicts) into the four kinds and sum
    each kind exactly (:func:`math.fsum`); prior releases count for nothing here.

    Examples
    --------
    >>> comp = compose([SpendRecord("a", "laplace", eps=0.5, delta=0.0),
    ...                 SpendRecord("b", "gaussian_zcdp", eps=0.0, delta=0.0, rho=0.1,
    ...                             calibration="zcdp")])
    >>> comp.basic_eps, comp.basic_covers_all, comp.rho
    (0.5, False, 0.225)
    """
    sums: dict[str, list[float]] = {name: [] for name in (
        "approx_eps", "approx_delta", "approx_rho", "pure_eps", "pure_rho", "zcdp_only_rho",
        "other_eps", "other_delta")}
    zcdp_only = 0
    lattice: list[LatticeGaussian] = []
    off: dict[str, list[float]] = {"eps": [], "delta": []}
    off_zcdp_only = 0
    spent = []
    for r in records:
        get = _getter(r)
        if get("status") == "prior":
            continue
        spent.append(get)
        rho = record_rho(r)
        release = lattice_gaussian(get)
        if release is not None and not _is_zcdp(get):
            # an (eps, delta) lattice Gaussian: the rho of its public mu (an upper bound on the
            # stated one, equal in a plan and its release, whatever the data calibrated)
            rho = release.mu ** 2 / 2.0
        if release is not None:
            lattice.append(release)
        elif _is_zcdp(get):
            off_zcdp_only += 1
        else:
            off["eps"].append(_amount(get, "eps"))
            off["delta"].append(_amount(get, "delta"))
        if _is_zcdp(get):
            assert rho is not None  # record_rho raises for a zCDP record without rho
            sums["zcdp_only_rho"].append(rho)
            zcdp_only += 1
            continue
        eps, delta = _amount(get, "eps"), _amount(get, "delta")
        if rho is None:
            sums["other_eps"].append(eps)
            sums["other_delta"].append(delta)
        elif delta == 0.0:
            sums["pure_eps"].append(eps)
            sums["pure_rho"].append(rho)
        else:
            sums["approx_eps"].append(eps)
            sums["approx_delta"].append(delta)
            sums["approx_rho"].append(rho)
    t = {name: math.fsum(values) for name, values in sums.items()}
    return Composition(t["approx_eps"], t["approx_delta"], t["approx_rho"], t["pure_eps"],
                       t["pure_rho"], t["zcdp_only_rho"], zcdp_only, t["other_eps"],
                       t["other_delta"], tuple(lattice), math.fsum(off["eps"]),
                       math.fsum(off["delta"]), off_zcdp_only, pld_terms(spent))
