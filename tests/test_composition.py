"""The CKS zCDP → (ε, δ) conversion and the cumulative spend (privacy/zcdp.py, composition.py).

Independent reference: Google's dp-accounting (PyPI ``dp-accounting``, in the test extra): its
RDP accountant evaluates the same CKS bound (arXiv:2004.00010 Prop. 12) at the orders it is
given, so it gets the optimal order :func:`zcdp_order` found (and a dense grid around it, to check
that order is optimal); its PLD accountant gives the (numerically) exact ε of composed Gaussians.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import common, privacy_loss_distribution
from dp_accounting.rdp import rdp_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st

from dppca_dask.errors import BudgetError, ConfigError
from dppca_dask.privacy import pld
from dppca_dask.privacy.accounting import SpendRecord, ledger_to_dicts
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.composition import Composition, compose, record_rho
from dppca_dask.privacy.gdp import gdp_eps
from dppca_dask.privacy.mechanisms import (
    above_threshold,
    exponential_mechanism,
    gaussian_histogram,
    gaussian_release,
    gaussian_symmetric_matrix,
    gaussian_zcdp,
    gaussian_zcdp_symmetric,
    geometric_histogram,
    laplace_release,
    smooth_laplace,
    stability_histogram,
)
from dppca_dask.privacy.zcdp import zcdp_eps, zcdp_order, zcdp_rho

RHOS = np.geomspace(1e-4, 10.0, 21).tolist()
DELTAS = np.geomspace(1e-12, 1e-2, 11).tolist()
GRID = list(itertools.product(RHOS, DELTAS))


def _loose(rho: float, delta: float) -> float:
    """Bun & Steinke 2016, Prop. 1.3 (the conversion used before CKS)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def _rdp_eps(rho: float, delta: float, orders: list[float]) -> tuple[float, float]:
    """dp-accounting's (ε, optimal order) for one ρ-zCDP event at ``orders``."""
    acc = rdp_privacy_accountant.RdpAccountant(orders=orders)
    acc.compose(dp_event.ZCDpEvent(rho=rho))
    eps, order = acc.get_epsilon_and_optimal_order(delta)
    return float(eps), float(order)


# --- the conversion ----------------------------------------------------------------------------


def test_zcdp_eps__matches_dp_accounting_at_the_optimal_order():
    for rho, delta in GRID:  # 21 x 11 points, ρ in [1e-4, 10], δ in [1e-12, 1e-2]
        ref, _ = _rdp_eps(rho, delta, [zcdp_order(rho, delta)])
        assert zcdp_eps(rho, delta) == pytest.approx(ref, rel=1e-9, abs=1e-300), (rho, delta)


def test_zcdp_order__no_order_nearby_does_better():
    for rho, delta in GRID[::7]:
        alpha = zcdp_order(rho, delta)
        grid = [a for a in (alpha * np.linspace(0.5, 2.0, 3001)).tolist() if a > 1.01]
        ref, order = _rdp_eps(rho, delta, grid)
        eps = zcdp_eps(rho, delta)
        if eps == 0.0:
            assert ref == 0.0
            continue
        assert eps <= ref * (1 + 1e-12)  # nothing on the grid is better
        assert ref <= eps * (1 + 1e-6)  # and the grid's best is next to α*
        assert order == pytest.approx(alpha, rel=2e-3)


def test_zcdp_eps__never_looser_than_bun_steinke():
    for rho, delta in GRID:
        assert 0.0 <= zcdp_eps(rho, delta) < _loose(rho, delta), (rho, delta)


@pytest.mark.parametrize("delta", DELTAS)
def test_zcdp_eps__increasing_in_rho_decreasing_in_delta(delta):
    eps = [zcdp_eps(rho, delta) for rho in RHOS]
    assert all(a < b for a, b in itertools.pairwise(eps))
    at_rho = [zcdp_eps(0.3, d) for d in DELTAS]
    assert all(a > b for a, b in itertools.pairwise(at_rho))


def test_zcdp_eps__edges():
    assert zcdp_eps(0.0, 1e-6) == 0.0
    assert zcdp_eps(math.inf, 1e-6) == math.inf
    assert zcdp_eps(0.5, 1.0) == 0.0  # every mechanism is (0, 1)-DP
    assert zcdp_eps(1e-4, 1e-2) == 0.0  # the CKS value is negative: (0, δ)-DP
    for bad_rho, bad_delta in ((-1.0, 1e-6), (math.nan, 1e-6), (0.1, 0.0), (0.1, math.nan)):
        with pytest.raises(ValueError, match="needs"):
            zcdp_eps(bad_rho, bad_delta)


def test_zcdp_rho__inverts_zcdp_eps():
    for rho, delta in GRID[::3]:
        eps = zcdp_eps(rho, delta)
        if eps == 0.0:  # (0, δ) already: no unique inverse
            continue
        back = zcdp_rho(eps, delta)
        assert back == pytest.approx(rho, rel=1e-9)
        assert zcdp_eps(back, delta) <= eps  # the safe side
        assert zcdp_eps(math.nextafter(back, math.inf), delta) > eps  # and the largest float
        ref, _ = _rdp_eps(back, delta, [zcdp_order(back, delta)])
        assert ref <= eps * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(1e-3, 30), delta=st.floats(1e-12, 1e-2))
def test_zcdp_rho__more_rho_than_bun_steinke_allows(eps, delta):
    rho = zcdp_rho(eps, delta)
    loose_rho = eps * eps / (math.sqrt(math.log(1 / delta) + eps)
                             + math.sqrt(math.log(1 / delta))) ** 2
    assert rho > loose_rho and _loose(rho, delta) > eps
    assert zcdp_eps(rho, delta) <= eps


# --- records: the ρ each mechanism states --------------------------------------------------------


def test_record_rho__gaussian_records_state_the_rho_of_their_noise():
    rng = np.random.default_rng(7)
    budget = PrivacyBudget(1.0, 1e-5)
    records = [
        gaussian_release(np.zeros(3), sensitivity=0.2, budget=budget, calibration="analytic",
                         rng=rng, component="v").record,
        gaussian_symmetric_matrix(np.eye(3), sensitivity=0.1, budget=budget,
                                  calibration="classical", rng=rng, component="m").record,
        gaussian_histogram(np.array([3, 0, 5]), budget=budget, calibration="analytic",
                           rng=rng, component="h").record,
        gaussian_zcdp(1.0, sensitivity=0.5, rho=0.05, rng=rng, component="z").record,
        gaussian_zcdp_symmetric(np.eye(2), sensitivity=0.5, rho=0.05, rng=rng,
                                component="zs").record,
    ]
    for r in records:
        # Δ (grid-inflated) and σ actually used: Δ²/(2σ²), at most what the record states
        assert r.sensitivity**2 / (2 * r.scale**2) <= r.rho * (1 + 1e-12)
        assert record_rho(r) == r.rho
    em = exponential_mechanism(np.array([0.0, 1.0]), epsilon=0.6, sensitivity=1.0, rng=rng,
                               component="em").record
    assert record_rho(em) == pytest.approx(0.6**2 / 8)  # bounded range: ε²/8
    # AboveThreshold stated in zCDP (the covariance radius's searches): ε-DP, so ε²/2; the
    # same search stated as pure ε composes to the same ρ
    at = above_threshold(np.arange(5.0), threshold=2.5, eps=0.3, rng=rng, component="r",
                         pure=False).record
    assert (at.rho, at.eps, at.calibration) == (pytest.approx(0.3**2 / 2), 0.0, "zcdp")
    assert record_rho(at) == at.rho
    assert record_rho(above_threshold(np.arange(5.0), threshold=2.5, eps=0.3, rng=rng,
                                      component="r").record) == pytest.approx(at.rho)
    lap = laplace_release(np.zeros(2), sensitivity=1.0, eps=0.4, rng=rng, component="l").record
    assert record_rho(lap) == pytest.approx(0.4**2 / 2)
    sh = stability_histogram(np.array([4, 0]), n=10, budget=budget, rng=rng,
                             component="s").record
    assert record_rho(sh) is None


def test_record_rho__zcdp_record_without_rho_is_refused():
    bad = {"component": "c", "mechanism": "gaussian_zcdp", "eps": 0.0, "delta": 0.0,
           "rho": None, "calibration": "zcdp"}
    with pytest.raises(BudgetError, match="must state its rho"):
        record_rho(bad)
    with pytest.raises(BudgetError, match="must state its rho"):
        compose([bad])


# --- ten Gaussians: basic, loose, CKS and the exact (PLD) figure ---------------------------------


def _pld_eps(records: list[SpendRecord], delta: float) -> float:
    pld = None
    for r in records:
        one = privacy_loss_distribution.from_gaussian_mechanism(
            standard_deviation=r.scale, sensitivity=r.sensitivity,
            value_discretization_interval=1e-4)
        pld = one if pld is None else pld.compose(one)
    assert pld is not None
    return float(pld.get_epsilon_for_delta(delta))


@pytest.mark.parametrize(("calibration", "pld_eps"), [("analytic", 3.12997),
                                                      ("classical", 2.30793)])
def test_tight_eps__ten_gaussians_against_pld(calibration, pld_eps):
    rng = np.random.default_rng(20260101)
    records = [gaussian_release(0.0, sensitivity=1.0, budget=PrivacyBudget(1.0, 1e-5),
                                calibration=calibration, rng=rng, component=f"g{i}").record
               for i in range(10)]
    comp = compose(records)
    delta = 1e-4  # = the sum of the ten δs
    assert comp.basic_delta == pytest.approx(delta, rel=1e-15) and comp.basic_eps == 10.0
    tight, pld = comp.tight_eps(delta), _pld_eps(records, delta)
    assert pld == pytest.approx(pld_eps, rel=1e-4)
    # the composed lattice certificate (Gaussian DP) is the Gaussians' own composed curve up to
    # the lattice terms (a ~ 1e-9): within 1e-4 of the PLD figure (itself within its
    # discretisation of the exact one) and never below the exact continuous curve
    mu = math.sqrt(math.fsum((r.sensitivity / r.scale) ** 2 for r in records))
    assert tight == comp.gdp_eps(delta)
    assert gdp_eps(mu, delta) <= tight <= gdp_eps(mu, delta) * (1 + 1e-6)
    assert tight == pytest.approx(pld, rel=1e-4)
    # CKS, a bound for every rho-zCDP mechanism, is ~10 % above (3.443 analytic, 2.547 classical),
    # the old Bun-Steinke figure (3.997 / 3.014) and the basic 10 further up
    cks = zcdp_eps(math.fsum(r.rho for r in records), delta)
    assert 1.08 * tight < cks < _loose(comp.rho, delta) < comp.basic_eps


def test_gdp_bound__off_lattice_records_add_basically_and_zcdp_only_ones_disable_it():
    rng = np.random.default_rng(7)
    b = PrivacyBudget(1.0, 1e-5)
    gauss = [gaussian_release(0.0, sensitivity=1.0, budget=b, calibration="analytic", rng=rng,
                              component=f"g{i}").record for i in range(4)]
    hist = gaussian_histogram(np.array([3, 1, 4]), budget=b, calibration="analytic", rng=rng,
                              component="hist").record
    lap = laplace_release(np.zeros(2), sensitivity=1.0, eps=0.3, rng=rng, component="l").record
    comp = compose([*gauss, hist, lap])
    assert len(comp.lattice) == 4  # the grid-1 histogram is not in the group
    assert comp.off_lattice_eps == pytest.approx(1.3) and comp.off_lattice_delta == 1e-5
    delta = 1e-4
    mu = math.sqrt(math.fsum((r.sensitivity / r.scale) ** 2 for r in gauss))
    room = delta - 1e-5
    assert comp.gdp_eps(delta) >= gdp_eps(mu, room) + 1.3
    assert comp.gdp_eps(delta) == pytest.approx(gdp_eps(mu, room) + 1.3, rel=1e-6)
    assert comp.tight_eps(delta) <= comp.gdp_eps(delta)
    # too little delta left for the Gaussians: no GDP figure
    assert comp.gdp_eps(1e-5) == math.inf
    # a zCDP-only record outside the group has no (eps, delta) statement to add
    em = SpendRecord("em", "exponential_mechanism", eps=0.0, delta=0.0, rho=0.01,
                     calibration="zcdp")
    with_em = compose([*gauss, em])
    assert with_em.off_lattice_zcdp_only == 1 and with_em.gdp_eps(delta) == math.inf
    assert math.isfinite(with_em.tight_eps(delta))
    # a record without its public fields (e.g. a data-calibrated sensitivity) stays off the lattice
    bare = SpendRecord("c", "gaussian", eps=1.0, delta=1e-5, rho=gauss[0].rho)
    assert compose([bare]).lattice == ()


# --- compose() on a mixed ledger -------------------------------------------------------------------


def _mixed_ledger() -> list[SpendRecord]:
    rng = np.random.default_rng(3)
    b = PrivacyBudget(0.5, 1e-6)
    return [
        laplace_release(np.zeros(2), sensitivity=1.0, eps=0.3, rng=rng, component="pure").record,
        above_threshold(np.arange(5.0), threshold=2.5, eps=0.2, rng=rng,
                        component="search").record,
        gaussian_release(0.0, sensitivity=1.0, budget=b, calibration="analytic", rng=rng,
                         component="gauss").record,
        gaussian_histogram(np.array([1, 2, 3]), budget=b, calibration="analytic", rng=rng,
                           component="hist").record,
        smooth_laplace(0.0, smooth_sensitivity=1.0, budget=PrivacyBudget(0.4, 1e-7), rng=rng,
                       component="frame").record,
        stability_histogram(np.array([5, 0, 2]), n=10, budget=PrivacyBudget(0.25, 2e-7),
                            rng=rng, component="sparse").record,
        gaussian_zcdp(0.0, sensitivity=1.0, rho=0.02, rng=rng, component="zcdp").record,
        exponential_mechanism(np.zeros(4), epsilon=0.4, sensitivity=1.0, rng=rng,
                              component="select").record,
        SpendRecord("loading", "supplied V_dp", eps=2.0, delta=1e-5, status="prior"),
    ]


def test_compose__mixed_ledger_sorted_by_kind():
    ledger = _mixed_ledger()
    lap, search, gauss, hist, frame, sparse, zg, em, _prior = ledger
    comp = compose(ledger)
    assert comp.pure_eps == pytest.approx(0.5) and comp.pure_rho == pytest.approx(
        (0.3**2 + 0.2**2) / 2)
    assert comp.approx_eps == 1.0 and comp.approx_delta == 2e-6
    # the (eps, delta) lattice Gaussian counts the rho of its public mu: never below its noise's
    stated = math.fsum([gauss.rho, hist.rho])
    assert stated <= comp.approx_rho <= stated * (1 + 1e-9)
    assert comp.other_eps == pytest.approx(0.65) and comp.other_delta == pytest.approx(3e-7)
    assert comp.zcdp_only_records == 2 and comp.zcdp_only_rho == pytest.approx(0.02 + 0.4**2 / 8)
    # basic: the (ε, δ) records only (no prior, no zCDP-only record); it does not cover them all
    assert comp.basic_eps == pytest.approx(2.15) and comp.basic_delta == pytest.approx(2.3e-6)
    assert not comp.basic_covers_all
    assert comp.rho == pytest.approx(comp.pure_rho + comp.approx_rho + comp.zcdp_only_rho)
    # records as dicts (ledgers in JSON) give the same composition
    assert compose(ledger_to_dicts(ledger)) == comp
    # prior records count for nothing
    assert compose(ledger[:-1]) == comp


def test_tight_eps__mixed_ledger_is_the_best_valid_assignment():
    comp = compose(_mixed_ledger())
    delta = 1e-5
    z, a, p, o = comp.zcdp_only_rho, comp.approx_rho, comp.pure_rho, comp.other_delta
    candidates = [
        zcdp_eps(z + a + p, delta - o) + comp.other_eps,  # everything with a ρ in zCDP
        zcdp_eps(z + a, delta - o) + comp.other_eps + comp.pure_eps,
        zcdp_eps(z + p, delta - o - comp.approx_delta) + comp.other_eps + comp.approx_eps,
        zcdp_eps(z, delta - comp.basic_delta) + comp.basic_eps,  # basic + the zCDP-only part
    ]
    tight = comp.tight_eps(delta)
    assert tight == pytest.approx(min(candidates), rel=1e-12)
    assert tight <= comp.basic_eps + zcdp_eps(z, delta - comp.basic_delta)
    # the zCDP-only records are never free: more than the basic sum of the rest alone
    assert tight > comp.other_eps
    assert comp.tight_eps(2e-7) == math.inf  # below the δ the "other" records need
    shown = comp.as_dict(delta)
    assert shown["tight_eps"] == tight and shown["tight_delta"] == delta
    assert shown["basic_eps"] == comp.basic_eps and shown["basic_covers_all"] is False
    assert "Canonne, Kamath & Steinke" in shown["conversion"]
    assert comp.as_dict(2e-7)["tight_eps"] is None


def test_tight_eps__never_above_basic_without_zcdp_records():
    ledger = [r for r in _mixed_ledger() if r.calibration != "zcdp"]
    comp = compose(ledger)
    assert comp.basic_covers_all
    assert comp.tight_eps(comp.basic_delta) <= comp.basic_eps
    assert comp.tight_eps(1.0) == comp.other_eps  # records without ρ always count their ε
    pure = compose([r for r in ledger if r.delta == 0])
    assert pure.tight_eps(0.0) == pure.basic_eps == pytest.approx(0.5)
    assert compose([]).tight_eps(0.0) == 0.0


def test_tight_eps__ledger_marks_zcdp_records_with_infinite_eps():
    """A ledger that writes ε = ∞ on records that state only ρ gets the zCDP-only kind."""
    zg = _mixed_ledger()[6].as_dict()
    for marked in ({**zg, "eps": math.inf}, {**zg, "eps": math.inf, "calibration": None}):
        comp = compose([marked])
        assert comp.zcdp_only_records == 1 and comp.basic_eps == 0.0
        # a zCDP Gaussian is a lattice Gaussian too: its own curve beats the CKS conversion
        assert len(comp.lattice) == 1
        assert comp.tight_eps(1e-6) == comp.gdp_eps(1e-6) < zcdp_eps(0.02, 1e-6)
        assert comp.gdp_eps(1e-6) >= gdp_eps(math.sqrt(0.04), 1e-6)


@settings(max_examples=40, deadline=None)
@given(eps=st.lists(st.floats(1e-3, 2.0), min_size=1, max_size=6),
       delta=st.floats(1e-9, 1e-3))
def test_tight_eps__monotone_in_delta_and_at_most_basic(eps, delta):
    records = [SpendRecord("c", "laplace", eps=e, delta=0.0) for e in eps]
    records += [SpendRecord("g", "gaussian", eps=e, delta=delta / 10, rho=e * e / 20)
                for e in eps]
    comp = compose(records)
    values = [comp.tight_eps(d) for d in (delta, 2 * delta, 10 * delta)]
    assert values[0] >= values[1] >= values[2]
    assert values[0] <= comp.basic_eps


def test_composition__validates_itself():
    with pytest.raises(BudgetError, match="'pure_eps' field of Composition"):
        Composition(0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0, 0.0, 0.0)
    with pytest.raises(BudgetError, match="'zcdp_only_records' field"):
        Composition(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1, 0.0, 0.0)
    with pytest.raises(BudgetError, match="'eps' field of a spend record"):
        compose([{"component": "c", "mechanism": "m", "eps": math.nan, "delta": 0.0}])
    with pytest.raises(ValueError, match="delta >= 0"):
        compose([]).tight_eps(math.nan)


@pytest.mark.parametrize("eps", [1e-308, 1e-200, 1e7, 1e308])
def test_zcdp_rho__extreme_eps_is_a_clear_error_at_once(eps):
    """No hang (1e-308 used to loop forever) and no math domain error (1e308)."""
    with pytest.raises(BudgetError, match="'eps' of a zCDP conversion"):
        zcdp_rho(eps, 1e-5)
    assert zcdp_rho(1e-100, 1e-5) > 0 and zcdp_rho(1e6, 1e-5) > 9e5


# --- PLD composition (privacy/pld.py): each mapping against dp-accounting built here ----------

PLD_TOL = 1e-3  # the brief's tolerance to dp-accounting at its default discretisation (1e-4)


def _ref(parts: list) -> float:
    """Compose reference PLDs (dp-accounting defaults: pessimistic, discretisation 1e-4)."""
    out = parts[0]
    for p in parts[1:]:
        out = out.compose(p)
    return out


def _rr(eps: float, delta: float = 0.0):
    return privacy_loss_distribution.from_privacy_parameters(
        common.DifferentialPrivacyParameters(eps, delta))


def _five_and_five() -> list[SpendRecord]:
    rng = np.random.default_rng(11)
    gauss = [gaussian_release(0.0, sensitivity=1.0, budget=PrivacyBudget(1.0, 1e-5),
                              calibration="analytic", rng=rng, component=f"g{i}").record
             for i in range(5)]
    lap = [laplace_release(0.0, sensitivity=1.0, eps=0.5, rng=rng, component=f"l{i}").record
           for i in range(5)]
    return gauss + lap


def test_pld_eps__mixed_gaussian_laplace_ledger_against_dp_accounting():
    records = _five_and_five()
    comp = compose(records)
    ref = _ref([privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=r.scale, sensitivity=r.sensitivity) for r in records[:5]]
        + [privacy_loss_distribution.from_laplace_mechanism(
            parameter=r.scale, sensitivity=r.sensitivity) for r in records[5:]])
    expected = float(ref.get_epsilon_for_delta(1e-5))
    got = comp.pld_eps(1e-5)
    assert expected == pytest.approx(4.45697, abs=1e-4)
    # never below the reference by more than float noise (the record's mu is an upper bound and
    # the bridges only add), within the brief's 1e-3 above it
    assert expected - 1e-9 <= got <= expected + PLD_TOL
    # the ledger's cap figure does not use it (not a valid filter): still the CKS/GDP figure
    assert comp.tight_eps(1e-5) == pytest.approx(4.94208, abs=1e-4)
    # the same multiset in another order gives the same figure (the cache key is the multiset)
    assert compose(records[::-1]).pld_eps(1e-5) == got


def test_pld_eps__ten_gaussians_match_the_gdp_figure():
    rng = np.random.default_rng(20260101)
    records = [gaussian_release(0.0, sensitivity=1.0, budget=PrivacyBudget(1.0, 1e-5),
                                calibration="analytic", rng=rng, component=f"g{i}").record
               for i in range(10)]
    comp = compose(records)
    got, ref = comp.pld_eps(1e-4), _pld_eps(records, 1e-4)
    assert ref - 1e-9 <= got <= ref + PLD_TOL
    assert round(got, 3) == round(comp.tight_eps(1e-4), 3) == 3.130


def test_pld_eps__scalar_laplace_and_the_generic_pair_for_the_rest():
    rng = np.random.default_rng(5)
    scalar = [laplace_release(0.0, sensitivity=2.0, eps=0.3, rng=rng, component="s").record
              for _ in range(8)]
    vector = laplace_release(np.zeros(3), sensitivity=1.0, eps=0.3, rng=rng,
                             component="v").record
    ref = _ref([privacy_loss_distribution.from_laplace_mechanism(parameter=1 / 0.3)] * 8)
    got = compose(scalar).pld_eps(1e-6)
    assert float(ref.get_epsilon_for_delta(1e-6)) - 1e-9 <= got
    assert got <= float(ref.get_epsilon_for_delta(1e-6)) + PLD_TOL
    # a multivariate Laplace is not claimed dominated by the 1-D Laplace: the generic RR pair
    both = _ref([*[privacy_loss_distribution.from_laplace_mechanism(parameter=1 / 0.3)] * 8,
                 _rr(0.3)])
    assert compose([*scalar, vector]).pld_eps(1e-6) == pytest.approx(
        float(both.get_epsilon_for_delta(1e-6)), abs=PLD_TOL)


def test_pld_eps__generic_eps_delta_records():
    rng = np.random.default_rng(9)
    records = [
        stability_histogram(np.array([5, 0, 2]), n=10, budget=PrivacyBudget(0.25, 2e-7),
                            rng=rng, component="sparse").record,
        smooth_laplace(0.0, smooth_sensitivity=1.0, budget=PrivacyBudget(0.4, 1e-7), rng=rng,
                       component="frame").record,
        above_threshold(np.arange(5.0), threshold=2.5, eps=0.2, rng=rng,
                        component="search").record,
    ] * 3
    ref = _ref([_rr(r.eps, r.delta) for r in records])
    for delta in (1e-6, 1e-5):
        expected = float(ref.get_epsilon_for_delta(delta))
        assert expected - 1e-9 <= compose(records).pld_eps(delta) <= expected + PLD_TOL
    # at the basic delta, never above the basic sum by more than the discretisation
    comp = compose(records)
    slack = len(records) * pld.FINE_DISCRETISATION
    assert comp.pld_eps(comp.basic_delta) <= comp.basic_eps + slack


def test_pld_eps__zcdp_only_and_histogram_records():
    rng = np.random.default_rng(13)
    b = PrivacyBudget(0.5, 1e-6)
    zg = gaussian_zcdp(0.0, sensitivity=1.0, rho=0.02, rng=rng, component="z").record
    zs = gaussian_zcdp_symmetric(np.eye(3), sensitivity=1.0, rho=0.01, rng=rng,
                                 component="zs").record
    em = exponential_mechanism(np.zeros(4), epsilon=0.4, sensitivity=1.0, rng=rng,
                               component="select").record
    hist = gaussian_histogram(np.array([1, 2, 3]), budget=b, calibration="analytic", rng=rng,
                              component="hist").record
    geo = geometric_histogram(np.array([4, 0, 1]), eps=0.6, rng=rng, component="geo").record
    at = above_threshold(np.arange(5.0), threshold=2.5, eps=0.25, rng=rng, component="r",
                         pure=False).record  # ε-DP stated as ρ = ε²/2: RR(ε)
    records = [zg, zs, em, hist, geo, at]
    pdist = privacy_loss_distribution
    ref = _ref([pdist.from_gaussian_mechanism(standard_deviation=1 / math.sqrt(2 * 0.02)),
                pdist.from_gaussian_mechanism(standard_deviation=1 / math.sqrt(2 * 0.01)),
                _rr(0.4), *[pdist.from_discrete_gaussian_mechanism(hist.scale)] * 2,
                *[_rr(0.3)] * 2, _rr(0.25)])
    comp = compose(records)
    for delta in (1e-6, 1e-4):
        expected = float(ref.get_epsilon_for_delta(delta))
        assert expected - 1e-9 <= comp.pld_eps(delta) <= expected + PLD_TOL
    assert comp.pld_eps(1e-6) < comp.tight_eps(1e-6)
    # a zCDP record without the fields of a lattice Gaussian has no PLD here
    bare = SpendRecord("z", "gaussian_zcdp", eps=0.0, delta=0.0, rho=0.1, calibration="zcdp")
    assert compose([*records, bare]).pld_eps(1e-4) == math.inf
    assert math.isfinite(compose([*records, bare]).tight_eps(1e-4))


def test_pld_eps__the_bridge_is_needed_for_discrete_laplace():
    """The continuous Laplace does not dominate the discrete one at the same scale and shift
    (why scalar Laplace records carry the dithering bridge): here with k = 2, b = 4."""
    pdist = privacy_loss_distribution
    discrete = pdist.from_discrete_laplace_mechanism(parameter=0.25, sensitivity=2)
    continuous = pdist.from_laplace_mechanism(parameter=4.0, sensitivity=2.0)
    assert discrete.get_delta_for_epsilon(0.45) > continuous.get_delta_for_epsilon(0.45)


def test_pld_eps__geometric_histogram_is_two_randomized_responses():
    """A discrete Laplace shifted by 1 is RR(1/b) exactly: the exact curve of two of them at
    the pld figure is below delta."""
    rec = geometric_histogram(np.array([1, 1]), eps=1.0, rng=np.random.default_rng(2),
                              component="geo").record
    e1 = 1.0 / rec.scale
    p = [math.exp(e1) / (1 + math.exp(e1)), 1 / (1 + math.exp(e1))]
    joint = [(p[i] * p[j], p[1 - i] * p[1 - j]) for i in (0, 1) for j in (0, 1)]
    for delta in (1e-3, 0.05):
        eps = compose([rec]).pld_eps(delta)
        exact = math.fsum(max(a - math.exp(eps) * b, 0.0) for a, b in joint)
        assert exact <= delta


@settings(max_examples=15, deadline=None)
@given(picks=st.lists(st.integers(0, 9), min_size=1, max_size=6), extra=st.integers(0, 9))
def test_pld_eps__adding_a_record_never_lowers_it(picks, extra):
    pool = [*_five_and_five()[::2], *_mixed_ledger()[:6]]
    pool = [r for r in pool if r.status == "spent"][:10]
    base = [pool[i % len(pool)] for i in picks]
    before = compose(base).pld_eps(1e-4)
    after = compose([*base, pool[extra % len(pool)]]).pld_eps(1e-4)
    assert after >= before - 1e-12


def test_pld_eps__edges():
    assert compose([]).pld_eps(0.0) == compose([]).pld_eps(1e-5) == 0.0
    lap = SpendRecord("c", "laplace", eps=0.5, delta=0.0, draws=1)
    one = compose([lap])
    assert one.pld_eps(0.0) == 0.5  # delta = 0: the pure sum
    assert 0.5 - 1e-3 <= one.pld_eps(1e-300) <= 0.5  # never above the pure sum, monotone
    gauss = _five_and_five()[0]
    assert compose([gauss]).pld_eps(0.0) == math.inf
    assert compose([gauss]).pld_eps(1e-5) <= 1.0 + PLD_TOL  # its own (1, 1e-5) guarantee
    # very large eps: no overflow, no huge array, an answer at once (inf or the pure sum)
    huge = SpendRecord("c", "stability_histogram", eps=1e6, delta=1e-6)
    assert compose([huge, gauss]).pld_eps(1e-5) == math.inf
    assert compose([SpendRecord("c", "laplace", eps=1e6, delta=0.0)]).pld_eps(1e-5) == 1e6
    # records at delta near 1: the curve of the generic pair
    near = SpendRecord("c", "smooth_sensitivity_laplace", eps=0.5, delta=0.999999)
    assert compose([near]).pld_eps(0.999999) == math.inf or \
        compose([near]).pld_eps(0.999999) <= 0.5 + PLD_TOL
    assert compose([near]).pld_eps(0.9999995) == 0.0  # TV <= delta + (1 - delta) tanh(eps/2)
    with pytest.raises(ValueError, match="delta >= 0"):
        one.pld_eps(-1.0)


def test_pld__import_stays_lazy():
    """`import dppca_dask` and compose() do not import dp-accounting (~1 s)."""
    code = ("import sys, dppca_dask; from dppca_dask.privacy.composition import compose; "
            "from dppca_dask.privacy.accounting import SpendRecord; "
            "compose([SpendRecord('c', 'laplace', eps=1.0, delta=0.0)]); "
            "assert 'dp_accounting' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ledger__pld_accountant_is_the_custodians_opt_in(tmp_path):
    """The mixed ledger admits at the PLD figure only where the deployment chose
    ``dppca.ledger.accountant: pld`` (pre-registered batches); the default keeps the figure that
    is a valid filter under fully adaptive use."""
    import dask

    from dppca_dask.io.identity import DatasetIdentity
    from dppca_dask.pipeline.budget_cap import Basic, Cap
    from dppca_dask.pipeline.deployment import deployment_settings, open_deployment_ledger

    records = [r.as_dict() for r in _five_and_five()]
    basic = Basic(sum(r["eps"] for r in records), sum(r["delta"] for r in records))
    identity = DatasetIdentity(location="python:mixed")
    for accountant, admitted in (("tight", False), ("pld", True)):
        with dask.config.set({"dppca.ledger.accountant": accountant}):
            settings = deployment_settings()
            assert settings.accountant == accountant
            ledger = open_deployment_ledger(tmp_path / f"{accountant}.sqlite", settings)
        ledger.set_cap(identity, Cap(4.5, 1e-5, None))
        if admitted:
            ledger.reserve(identity, records, basic)
            spent = ledger.spent(identity.dataset_id)
            assert spent is not None and spent.tight_eps == pytest.approx(4.45697, abs=1e-3)
        else:
            with pytest.raises(BudgetError, match="past the custodian's cap"):
                ledger.reserve(identity, records, basic)
    with (dask.config.set({"dppca.ledger.accountant": "exact"}),
          pytest.raises(ConfigError, match="'dppca.ledger.accountant'.*'exact'")):
        deployment_settings()
