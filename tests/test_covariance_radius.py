"""dp_covariance's private row-clipping radius (radius="private", the default) and the presets."""

from __future__ import annotations

import math

import dask.array as da
import numpy as np
import pytest
from scipy import stats

from dppca_dask import dp_covariance
from dppca_dask.covariance.estimator import plan_covariance, resolve_preset
from dppca_dask.covariance.radius import (
    RADIUS_SHARE,
    STEPS_PER_OCTAVE,
    radius_grid,
    radius_records,
    radius_rule,
    release_radius,
    search_epsilons,
)
from dppca_dask.errors import BudgetError, ParameterError
from dppca_dask.kernels.gram import row_norm_counts
from dppca_dask.privacy.plan import records_match
from dppca_dask.privacy.zcdp import resolve_zcdp
from tests.helpers import write_store

STEP = 2.0 ** (1.0 / STEPS_PER_OCTAVE)
ALPHA = 1e-6  # every statistical check below fails a correct implementation with at most this


def _data(seed: int, n: int = 3000, d: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ (np.eye(d) + rng.normal(size=(d, d)) / math.sqrt(d))


def test_row_norm_counts__strict_overflow_safe_and_chunked():
    x = np.array([[3e200, 4e200], [3e-200, 4e-200], [0.0, 0.0], [3.0, 4.0]])
    grid = np.array([1e-300, 6e-200, 4.0, 5.0, 5.0 + 1e-9, 6e200])
    assert row_norm_counts(x, grid).tolist() == [1, 2, 2, 2, 3, 4]
    y = _data(1, n=101) * 1e3
    whole = row_norm_counts(y, radius_grid())
    parts = sum(row_norm_counts(y[i:i + 7], radius_grid()) for i in range(0, 101, 7))
    np.testing.assert_array_equal(whole, parts)


def test_private_radius__counts_shift_by_whole_steps_under_powers_of_two():
    # The grid is 2^(i/32): data scaled by 2^k give the counts shifted by 32k, so the
    # mechanism's scores -- and its whole output distribution -- move by exactly k octaves.
    x = _data(2, n=500)
    base = row_norm_counts(x, radius_grid())
    for k in (-20, -13, 13, 20):
        scaled = row_norm_counts(x * 2.0 ** k, radius_grid())
        shift = 32 * k
        if k > 0:
            np.testing.assert_array_equal(scaled[shift:], base[:base.size - shift])
        else:
            np.testing.assert_array_equal(scaled[:shift], base[-shift:])


def _draws(counts: np.ndarray, n: int, d: int, rho: float, seeds: range, salt: int
           ) -> np.ndarray:
    """The released grid indices of :func:`release_radius` over seeded draws."""
    grid = radius_grid()
    return np.array([int(np.searchsorted(grid, release_radius(
        counts, n=n, d=d, rho=rho, rng=np.random.default_rng([salt, s]), warn=False).radius))
        for s in seeds])


@pytest.mark.parametrize("k", [-20, 13])
def test_private_radius__law_moves_by_whole_steps_under_powers_of_two(k):
    # counts of x * 2^k are those of x shifted by 32k grid points (above), so the searches' law
    # -- a function of the counts alone, up to the chance of stopping on the 32|k| extra empty
    # points below the data, here below e^-40 -- is the same law shifted by 32k: two samples of
    # released indices (minus the shift) pass a two-sample KS test at ALPHA
    n, d, rho = 600, 4, 1.0
    x = _data(2, n=n, d=d)
    base = _draws(row_norm_counts(x, radius_grid()), n, d, rho, range(150), 1)
    moved = _draws(row_norm_counts(x * 2.0 ** k, radius_grid()), n, d, rho, range(150), 2)
    assert stats.ks_2samp(base, moved - STEPS_PER_OCTAVE * k).pvalue > ALPHA


@pytest.mark.parametrize("scale", [1e-6, 1e6])
def test_private_radius__follows_the_data_in_any_units(scale):
    x = _data(3)
    ref = dp_covariance(x, rho=1.0, rng=7)
    fit = dp_covariance(x * scale, rho=1.0, rng=7)
    norms = np.linalg.norm(x, axis=1)
    for release, unit in ((ref, 1.0), (fit, scale)):
        outside = float(np.mean(norms * unit >= release.metadata["radius"]))
        rule = radius_rule(3000, 5, 1.0)
        # the released radius sits among the data's norms, clipping about the rule's share of
        # the rows (a generous band around 1 - q: the search's rank error at this n and rho is
        # a few tens of rows, the bound of the next test)
        assert 0.0 < outside < 3 * (1 - rule.q)
    # and the releases agree in normalised units, up to the radius's own draw
    np.testing.assert_allclose(fit.covariance.values / scale**2, ref.covariance.values,
                               rtol=0.2, atol=0.05 * float(np.max(ref.covariance.values)))
    # a public radius does not follow the units: the same R on rescaled data clips everything
    assert ref.metadata["radius"] > 1.0 and ref.metadata["radius_private"] is True


def _miss_bound(counts: np.ndarray, target: float, eps: float, t: float) -> tuple[int, float]:
    """AboveThreshold (threshold T + E_0, step i passes with c_i + E_i, E ~ Exp(rate eps/2)) on
    ``counts``: the first index j with c_j >= T + t, and an upper bound on the probability that
    it stops anywhere but at an index i <= j with c_i > T - t. Stopping at some i with
    c_i <= T - t needs E_i - E_0 >= T - c_i, probability e^{-lam (T - c_i)}/2 (a difference of
    two i.i.d. exponentials); passing j needs E_0 - E_j > c_j - T >= t, at most e^{-lam t}/2."""
    lam = eps / 2.0
    low = counts <= target - t
    early = 0.5 * float(np.sum(np.exp(-lam * (target - counts[low]))))
    j = int(np.argmax(counts >= target + t))
    return j, early + 0.5 * math.exp(-lam * t)


def _binomial_limit(m: int, p: float) -> int:
    """The largest count of misses among m draws that a miss probability <= p explains at
    ALPHA (one-sided binomial upper quantile)."""
    return int(stats.binom.ppf(1 - ALPHA, m, min(p, 1.0)))


@pytest.mark.parametrize("kind", ["bulk", "point mass"])
def test_private_radius__robust_search_stops_near_its_target(kind):
    # The robust search is AboveThreshold from the bottom of the grid at q_robust * n. With a
    # point mass (20 % of the rows at one point beyond the bulk, the target inside it) every
    # grid point above the mass has the same count n; the search stops at the first of them
    # (the interval search of the previous version could, and a point search did, pick any).
    n, d, rho = 2000, 5, 0.3
    rng = np.random.default_rng(11)
    x = rng.normal(size=(n, d))
    if kind == "point mass":
        x[rng.random(n) < 0.2] = np.full(d, 2.0)  # norm 2 sqrt(5): beyond the bulk's norms
    grid = radius_grid()
    counts = row_norm_counts(x, grid)
    rule = radius_rule(n, d, rho)
    eps = search_epsilons(rho)[0]
    target = rule.q_robust * n
    # the narrowest band (T - t, first c_j >= T + t] whose miss bound is at most 1e-3
    t = next(t for t in np.arange(1.0, n, 1.0) if _miss_bound(counts, target, eps, t)[1] <= 1e-3)
    j, bound = _miss_bound(counts, target, eps, t)
    ok = np.zeros(grid.size, dtype=bool)
    ok[:j + 1] = counts[:j + 1] > target - t
    if kind == "point mass":  # the only allowed stop is the first point above the mass
        assert np.flatnonzero(ok).tolist() == [j] and grid[j - 1] <= 2 * math.sqrt(d) < grid[j]
    else:  # a band of a few grid steps around the target quantile
        assert t < 0.05 * n and 1 <= np.count_nonzero(ok) <= 10
    m = 300
    robust = [release_radius(counts, n=n, d=d, rho=rho, rng=np.random.default_rng([12, s]),
                             warn=False).robust for s in range(m)]
    misses = sum(not ok[int(np.searchsorted(grid, r))] for r in robust)
    assert misses <= _binomial_limit(m, bound)


def test_private_radius__far_outliers_are_found_beyond_a_gap():
    # 4 % of the rows 2^4 beyond the bulk: the tail quantile lies in them, the gap test's window
    # (2^2 above the robust radius) ends in the empty stretch below them, so it runs off and the
    # release keeps the robust radius; without them the tail radius is used
    n, d, rho = 20000, 5, 1.0
    rng = np.random.default_rng(13)
    x = rng.normal(size=(n, d))
    rule = radius_rule(n, d, rho)
    assert rule.binding == "tail" and 1 - rule.q_gap < 0.04 < 1 - rule.q_robust
    far = x.copy()
    far[: n // 25] = 16.0 * math.sqrt(d) * np.eye(d)[0] + rng.normal(size=(n // 25, d))
    grid = radius_grid()
    for data, gap in ((x, False), (far, True)):
        counts = row_norm_counts(data, grid)
        found = [release_radius(counts, n=n, d=d, rho=rho, rng=np.random.default_rng([14, s]),
                                warn=False) for s in range(40)]
        assert all(f.gap is gap for f in found)
        norms = np.linalg.norm(data, axis=1)
        for f in found:
            outside = float(np.mean(norms >= f.radius))
            # with the gap: about the robust share outside; without: about the tail share
            share = 1 - (rule.q_robust if gap else rule.q)
            assert share / 2 < outside < 2 * share
            assert f.radius == f.robust if gap else f.radius > f.robust


@pytest.mark.parametrize("method", ["auto", "ssp", "diagonal", "pace_ggm"])
@pytest.mark.parametrize("budget", [{"rho": 0.4}, {"eps": 2.0, "delta": 1e-5}])
def test_private_radius__plan_equals_the_ledger(method, budget):
    x = _data(6, n=800, d=4)
    fit = dp_covariance(x, method=method, rng=3, **budget)
    plan = plan_covariance(4, resolve_zcdp(owner="dp_covariance", **budget), method=method)
    assert records_match(plan, fit.ledger) == []
    assert plan.passes == 2
    rho = plan.total["rho"]
    assert fit.metadata["ledger_total"]["rho"] == pytest.approx(rho, rel=1e-12)
    radius = [r for r in fit.ledger if r.component == "radius"]
    budget_rho = resolve_zcdp(owner="dp_covariance", **budget).rho
    assert radius == list(radius_records(budget_rho))  # every field: one builder for both
    assert [r.mechanism for r in radius] == ["durfee_above_threshold"] * 3
    assert [r.rho for r in radius] == [e * e / 2 for e in search_epsilons(budget_rho)]
    assert math.fsum(r.rho for r in radius) == pytest.approx(RADIUS_SHARE * rho, rel=1e-12)
    assert list(fit.ledger[:3]) == radius  # drawn first
    assert fit.metadata["clip"] == "row" and fit.metadata["radius_private"] is True
    assert fit.dataset["bound"].attrs["private"] == 1
    assert {"radius", "radius_robust", "radius_gap", "bounds"} <= set(
        fit.metadata["post_processing"])


def test_private_radius__a_public_radius_plans_no_search():
    fit = dp_covariance(_data(6, n=300, d=4), rho=0.4, radius=3.0, rng=1)
    plan = plan_covariance(4, resolve_zcdp(rho=0.4, owner="dp_covariance"), radius=3.0)
    assert records_match(plan, fit.ledger) == [] and plan.passes == 1
    assert [r.component for r in fit.ledger] == ["ssp"]
    assert fit.dataset["bound"].attrs["private"] == 0


@pytest.mark.parametrize("chunks", [(1, 5), (37, 2), (1000, 5)])
def test_private_radius__dask_chunkings_equal_numpy(chunks):
    x = _data(7, n=400)
    ref = dp_covariance(x, rho=0.5, rng=11)
    fit = dp_covariance(da.from_array(x, chunks=chunks), rho=0.5, rng=11)
    assert fit.metadata["radius"] == ref.metadata["radius"]
    np.testing.assert_array_equal(fit.covariance.values, ref.covariance.values)


def test_presets__defaults_and_explicit_arguments_win():
    x = _data(8, n=300, d=3)
    fit = dp_covariance(x, rho=0.5, rng=1)
    assert (fit.method, fit.metadata["clip"]) == ("auto", "row")
    seed = dp_covariance(x, rho=0.5, bounds=4.0, preset="seed", rng=1)
    assert (seed.method, seed.metadata["clip"]) == ("pace_ggm", "box")
    boxed = dp_covariance(x, rho=0.5, bounds=4.0, rng=1)  # bounds select the box
    assert (boxed.method, boxed.metadata["clip"]) == ("auto", "box")
    ssp = dp_covariance(x, rho=0.5, method="ssp", preset="seed", clip="row", rng=1)
    assert (ssp.method, ssp.metadata["clip"], ssp.metadata["radius_private"]) == \
        ("ssp", "row", True)
    assert resolve_preset("seed", method=None, clip="row", bounds=None, radius=2.0) == \
        ("pace_ggm", "row", 2.0)


@pytest.mark.parametrize(("kwargs", "param", "rule"), [
    ({"radius": "median"}, "radius", "or 'private'"),
    ({"radius": -1.0}, "radius", "positive finite float"),
    ({"radius": "private", "clip": "box", "bounds": 1.0}, "radius", "None with clip='box'"),
    ({"radius": "private", "bounds": 1.0}, "radius", "None with clip='box'"),
    ({"preset": "fast"}, "preset", "one of 'recommended', 'seed'"),
    ({"preset": None}, "preset", "one of 'recommended', 'seed'"),
    ({"preset": "seed"}, "bounds", "public bounds are required"),
])
def test_private_radius__bad_values_name_the_parameter(kwargs, param, rule):
    with pytest.raises(ParameterError) as info:
        dp_covariance(np.zeros((20, 3)), rho=1.0, **kwargs)
    message = str(info.value)
    assert f"The '{param}' parameter of dp_covariance must be" in message
    assert rule in message and "Got" in message
    with pytest.raises(ParameterError, match="'preset' parameter of dp_covariance"):
        plan_covariance(3, resolve_zcdp(rho=1.0, owner="dp_covariance"), preset="fast")


def test_private_radius__small_n_warns_from_public_quantities():
    from dppca_dask.errors import UtilityWarning

    assert radius_rule(100, 3, 0.01).binding == "robust"
    assert radius_rule(20, 50, 0.01).binding == "half"
    with pytest.warns(UtilityWarning, match="private radius"):
        dp_covariance(_data(9, n=100, d=3), rho=0.01, rng=1)
    with pytest.raises(BudgetError):
        dp_covariance(_data(9, n=100, d=3), rng=1)


def test_cli_covariance__default_section_is_the_recommended_release(tmp_path):
    from dppca_dask.pipeline.config import RunConfig
    from dppca_dask.pipeline.runner import execute, plan_run

    x = _data(10, n=2000, d=4)
    path = tmp_path / "data.npy"
    np.save(path, x)
    write_store(tmp_path / "data.zarr", x)
    settings = {
        "input": {"path": str(tmp_path / "data.zarr"), "array": "X"}, "task": "covariance",
        "privacy": {"eps": 2.0, "delta": 1e-5}, "covariance": {},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(tmp_path / "out")}, "rng": 5,
    }
    cfg = RunConfig.from_dict(settings)
    planned = plan_run(cfg)
    outcome = execute(cfg, progress=False)
    assert records_match(planned.release, outcome.result.ledger) == []
    assert outcome.result.metadata["radius_private"] is True
    assert len(outcome.passes) == 2
    for bad in ({"preset": "fast"}, {"radius": "median"}, {"preset": "seed"}):
        with pytest.raises(Exception, match="covariance"):
            RunConfig.from_dict({**settings, "covariance": bad})


def test_benchmark_covariance_radius__equals_dp_covariance():
    from tests.helpers import benchmark_module

    with benchmark_module("covariance_radius", "bench_covariance_radius") as bench:
        x = bench.sample("t4", 1500, np.random.default_rng(1), bench.population(6))
        cov, radius = bench.private_release(x, rho=0.5, method="auto",
                                            rng=np.random.default_rng(4))
        fit = dp_covariance(x, rho=0.5, rng=np.random.default_rng(4))
        assert radius == fit.metadata["radius"]
        np.testing.assert_allclose(cov, fit.covariance.values, rtol=0, atol=1e-9)
        res = bench.run(1, 2, rhos=(1.0,), families=("outliers",), units=(1.0, 1e3),
                        log=lambda _: None)
        text, misses = bench.table(res, (1.0,), ("outliers",), (1.0, 1e3))
        assert "SSP (row, 1.5√d literal)" in text and isinstance(misses, list)
        held = bench.heldout_run(1, 2, sizes=((600, 3),), kinds=("point mass", "t4 x1e3"),
                                 rhos=(1.0,), log=lambda _: None)
        text, misses = bench.heldout_table(held)
        assert "| point mass | 600 | 3 | 1 |" in text and "| t4 x1e3 | 600 | 3 | 1 |" in text
        assert isinstance(misses, list)
        # a kind in other units is its base kind's data, rescaled: the same estimand
        x, m, unit = bench.heldout_sample("t4 x1e3", 50, 3, np.random.default_rng(5), 2)
        y, m4, _ = bench.heldout_sample("t4", 50, 3, np.random.default_rng(5), 2)
        assert unit == 1e3 and np.array_equal(x, y * 1e3) and np.array_equal(m, m4)
