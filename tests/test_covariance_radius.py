"""dp_covariance's private row-clipping radius (radius="private", the default) and the presets."""

from __future__ import annotations

import math

import dask.array as da
import numpy as np
import pytest

from dppca_dask import dp_covariance
from dppca_dask.covariance.estimator import plan_covariance, resolve_preset
from dppca_dask.covariance.radius import (
    COARSE,
    RADIUS_SHARE,
    STEPS_PER_OCTAVE,
    WINDOW,
    radius_grid,
    radius_records,
    radius_rule,
    release_radius,
    split_rho,
)
from dppca_dask.errors import BudgetError, ParameterError
from dppca_dask.kernels.gram import row_norm_counts
from dppca_dask.privacy.plan import records_match
from dppca_dask.privacy.zcdp import resolve_zcdp
from tests.helpers import write_store

STEP = 2.0 ** (1.0 / STEPS_PER_OCTAVE)
Z_ALPHA = 4.9  # two-sided normal quantile at alpha ~ 1e-6


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


@pytest.mark.parametrize("scale", [1e-4, 1e4, 1e-6, 1e6])
def test_private_radius__equivariant_to_units(scale):
    x = _data(3)
    ref = dp_covariance(x, rho=1.0, rng=7)
    fit = dp_covariance(x * scale, rho=1.0, rng=7)
    ratio = fit.metadata["radius"] / (scale * ref.metadata["radius"])
    # the released value is the upper end of the selected interval: a scale off the grid's
    # lattice moves it by the grid's alignment (under one step) and the interval (one step)
    assert STEP ** -2 * (1 - 1e-12) <= ratio <= STEP ** 2 * (1 + 1e-12)
    # and so is the release, up to the radius's step (normalised units are the same)
    np.testing.assert_allclose(fit.covariance.values / scale**2, ref.covariance.values,
                               rtol=0.2, atol=0.05 * float(np.max(ref.covariance.values)))
    # a public radius does not follow the units: the same R on rescaled data clips everything
    assert ref.metadata["radius"] > 1.0 and ref.metadata["radius_private"] is True


def _exact_law(counts: np.ndarray, n: int, d: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """The exact output law of :func:`release_radius` on ``counts``: (grid indices, probabilities);
    each selection is the exponential mechanism over the intervals between grid points."""
    grid = radius_grid()
    scale_rho, radius_rho, _ = split_rho(rho)
    eps1, eps2 = math.sqrt(8 * scale_rho), math.sqrt(8 * radius_rho)
    q = radius_rule(n, d, rho).q
    coarse = np.arange(0, grid.size, COARSE)
    def interval_scores(c: np.ndarray, target: float) -> np.ndarray:
        lo, hi = np.r_[0.0, c], np.r_[c, float(n)]  # interval j = [t_(j-1), t_j)
        return -np.maximum(0.0, np.maximum(lo - target, target - hi))

    logits = eps1 * interval_scores(counts[coarse], 0.5 * n) / 2
    first = np.exp(logits - logits.max())
    first /= first.sum()
    law = np.zeros(grid.size)
    size = (WINDOW[0] + WINDOW[1]) * STEPS_PER_OCTAVE + 1
    for j in np.flatnonzero(first > 1e-16):
        centre = coarse[min(j, coarse.size - 1)]  # the released value: the interval's upper end
        start = min(max(centre - WINDOW[0] * STEPS_PER_OCTAVE, 0), grid.size - size)
        scores = eps2 * interval_scores(counts[start:start + size], q * n) / 2
        second = np.exp(scores - scores.max())
        second /= second.sum()
        np.add.at(law, start + np.minimum(np.arange(size + 1), size - 1), first[j] * second)
    return np.flatnonzero(law), law[law > 0]


def test_private_radius__hits_the_targeted_quantile():
    n, d, rho = 4000, 6, 0.5
    x = _data(4, n=n, d=d)
    counts = row_norm_counts(x, radius_grid())
    q = radius_rule(n, d, rho).q
    index, prob = _exact_law(counts, n, d, rho)
    hit = counts[index] / n  # the fraction of rows strictly inside the released radius
    mean = float(prob @ hit)
    sd = math.sqrt(float(prob @ (hit - mean) ** 2))
    # the law puts its mass near q: within the search's rank error (the rule's search floor is
    # built so that leaving [q - 2k_s/n, q + 2k_s/n] has probability ~1e-3 or less) and the
    # rows of one grid step
    eps2 = math.sqrt(8 * split_rho(rho)[1])
    k_search = 2 * (math.log(161) + 7) / eps2
    step_rows = float(np.max(np.diff(counts[index]))) if index.size > 1 else 0.0
    near = np.abs(hit - q) <= (2 * k_search + step_rows) / n
    assert float(prob[near].sum()) >= 1 - 1e-3
    # and the mechanism draws from that law: the mean fraction inside over m seeded draws is
    # within z_alpha standard errors of the exact mean
    m = 300
    grid = radius_grid()
    draws = []
    for seed in range(m):
        rel = release_radius(counts, n=n, d=d, rho=rho, rng=np.random.default_rng([5, seed]))
        draws.append(np.count_nonzero(np.linalg.norm(x, axis=1) < rel.radius) / n)
        assert rel.radius in grid
    assert abs(np.mean(draws) - mean) <= Z_ALPHA * sd / math.sqrt(m) + 1e-12
    assert abs(mean - q) <= 3 * (1 - q) / 4  # the target, not the median or the maximum


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
    assert [r.rho for r in radius] == [r.rho for r in radius_records(rho)]
    assert math.fsum(r.rho for r in radius) == pytest.approx(RADIUS_SHARE * rho, rel=1e-12)
    assert list(fit.ledger[:2]) == radius  # drawn first
    assert fit.metadata["clip"] == "row" and fit.metadata["radius_private"] is True
    assert fit.dataset["bound"].attrs["private"] == 1
    assert {"radius", "radius_scale", "bounds"} <= set(fit.metadata["post_processing"])


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

    assert radius_rule(100, 3, 0.01).binding == "half"
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
