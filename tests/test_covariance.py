"""dp_covariance: sensitivities, zCDP accounting, PACE-GGM, baselines, the data pass, results."""

from __future__ import annotations

import json
import math

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dppca_dask import (
    BudgetError,
    CovarianceResult,
    ParameterError,
    clipped_second_moment,
    dp_covariance,
    load_result,
    pace_ggm_control,
)
from dppca_dask.covariance.estimator import covariance_sensitivities, release_covariance
from dppca_dask.covariance.pace_ggm import run_pace_ggm
from dppca_dask.privacy.mechanisms import (
    exponential_mechanism,
    gaussian_zcdp,
    gaussian_zcdp_symmetric,
)
from dppca_dask.privacy.zcdp import Odometer, ledger_rho, resolve_zcdp, zcdp_eps, zcdp_rho
from tests.helpers import benchmark_module, write_store

ALPHA = 1e-6


def _data(seed: int, n: int = 400, d: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(d, d)) / np.sqrt(d)
    return np.clip(rng.normal(size=(n, d)) @ mix, -2.5, 2.5)


# --- sensitivities --------------------------------------------------------------------------


def test_covariance_sensitivities__values():
    s = covariance_sensitivities(np.full(4, 2.0), 100)
    assert s.entry[0, 1] == 2 * 2 * 2 / 100  # 2 B^2 / n
    assert s.entry[2, 2] == 4 / 100  # B^2 / n
    assert s.diagonal == pytest.approx(2 / 100)  # sqrt(d)/n, normalised
    assert s.frobenius == pytest.approx(math.sqrt(2) * 4 / 100)  # sqrt(2) d / n, normalised
    assert s.frobenius_raw == pytest.approx(math.sqrt(2) * 4 * 4 / 100)  # sqrt(2) d B^2 / n


@pytest.mark.parametrize("bounds", [np.ones(4), np.array([0.5, 1.0, 2.0, 3.0])])
def test_covariance_sensitivities__bound_every_neighbour(bounds, global_seed):
    rng = np.random.default_rng(global_seed)
    n, d = 30, bounds.size
    sens = covariance_sensitivities(bounds, n)
    worst_entry = np.zeros((d, d))
    worst = {"diag": 0.0, "frob": 0.0}
    for _ in range(300):
        x = rng.uniform(-1, 1, size=(n, d)) * bounds
        y = x.copy()
        y[rng.integers(n)] = rng.choice([-1.0, 1.0], size=d) * bounds * rng.uniform(0.5, 1, d)
        diff = (y.T @ y - x.T @ x) / n
        worst_entry = np.maximum(worst_entry, np.abs(diff))
        tilde = diff / np.outer(bounds, bounds)
        worst["diag"] = max(worst["diag"], float(np.linalg.norm(np.diag(tilde))))
        worst["frob"] = max(worst["frob"], float(np.linalg.norm(tilde)))
    assert np.all(worst_entry <= sens.entry * (1 + 1e-12))
    assert worst["diag"] <= sens.diagonal * (1 + 1e-12)
    assert worst["frob"] <= sens.frobenius * (1 + 1e-12)


def test_covariance_sensitivities__frobenius_bound_is_attained():
    n, d = 10, 4
    x = np.zeros((n, d))
    y = x.copy()
    x[0] = np.ones(d)
    y[0] = np.array([1.0, -1.0, 1.0, -1.0])  # orthogonal to x[0], same norm
    diff = (y.T @ y - x.T @ x) / n
    assert np.linalg.norm(diff) == pytest.approx(covariance_sensitivities(np.ones(d), n).frobenius)


# --- zCDP accounting ------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(eps=st.floats(1e-4, 50), delta=st.floats(1e-12, 0.5))
def test_zcdp_rho__largest_rho_meeting_the_request(eps, delta):
    rho = zcdp_rho(eps, delta)
    assert zcdp_eps(rho, delta) <= eps
    assert zcdp_eps(rho * (1 + 1e-9), delta) > eps * (1 - 1e-12)


def test_resolve_zcdp__errors():
    with pytest.raises(BudgetError, match="either rho or eps and delta"):
        resolve_zcdp(rho=1.0, eps=1.0, owner="dp_covariance")
    with pytest.raises(BudgetError, match="needs a privacy budget"):
        resolve_zcdp(owner="dp_covariance")
    with pytest.raises(BudgetError, match="'delta' is missing"):
        resolve_zcdp(eps=1.0, owner="dp_covariance")
    for bad in (0.0, -1.0, math.inf, math.nan, "1", True):
        with pytest.raises(BudgetError, match="'rho' parameter of dp_covariance"):
            resolve_zcdp(rho=bad, owner="dp_covariance")
    with pytest.raises(BudgetError, match="'delta' parameter of dp_covariance"):
        resolve_zcdp(eps=1.0, delta=1.0, owner="dp_covariance")


def test_odometer__never_exceeds_its_total():
    od = Odometer(0.3)
    for _ in range(3):
        od.take(0.1)
    assert math.fsum(od._spent) <= 0.3
    with pytest.raises(BudgetError, match="Refused"):
        od.take(0.01)


def test_mechanisms__zcdp_records():
    rng = np.random.default_rng(0)
    g = gaussian_zcdp(np.zeros(3), sensitivity=0.2, rho=0.5, rng=rng, component="x")
    assert g.record.scale == pytest.approx(0.2 / math.sqrt(1.0))
    assert g.record.rho == 0.5 and g.record.calibration == "zcdp" and g.record.draws == 3
    assert g.record.sensitivity**2 / (2 * g.record.scale**2) == pytest.approx(0.5)
    s = gaussian_zcdp_symmetric(np.eye(3), sensitivity=0.2, rho=0.5, rng=rng, component="ssp")
    assert s.record.draws == 6 and np.array_equal(s.value, s.value.T)
    e = exponential_mechanism(np.array([1.0, 2.0]), epsilon=0.4, sensitivity=0.5, rng=rng,
                              component="select")
    assert e.record.rho == pytest.approx(0.4**2 / 8) and e.record.scale == pytest.approx(2.5)


@pytest.mark.slow
def test_gaussian_zcdp__noise_sd(global_seed):
    rng = np.random.default_rng(global_seed)
    rel = gaussian_zcdp(np.zeros(20_000), sensitivity=0.3, rho=0.2, rng=rng, component="x")
    q = rel.value.size
    stat = float(np.sum(rel.value**2) / rel.record.scale**2)  # ~ chi^2_q
    assert stats.chi2.ppf(ALPHA / 2, q) < stat < stats.chi2.ppf(1 - ALPHA / 2, q)


@pytest.mark.slow
def test_exponential_mechanism__selection_probabilities(global_seed):
    rng = np.random.default_rng(global_seed)
    scores = np.array([0.0, 1.0, 2.0, 4.0])
    eps, sens = 1.5, 1.0
    counts = np.bincount([exponential_mechanism(scores, epsilon=eps, sensitivity=sens, rng=rng,
                                                component="s").value for _ in range(20_000)],
                         minlength=4)
    probs = np.exp(eps * scores / (2 * sens))
    probs /= probs.sum()
    _, p_value = stats.chisquare(counts, probs * counts.sum())
    assert p_value > ALPHA


# --- the ledger of PACE-GGM -----------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(1, 6), n=st.integers(5, 500),
       rho=st.floats(1e-5, 50.0), beta=st.floats(0.01, 0.9), alpha=st.floats(0.05, 0.99),
       rounds=st.integers(1, 20), mean=st.sampled_from(["none", "measure"]))
def test_pace_ggm__spends_at_most_rho(seed, d, n, rho, beta, alpha, rounds, mean):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, d))
    ctl = pace_ggm_control(diag_fraction=beta, measure_fraction=alpha,
                           rounds_per_variable=rounds, mean=mean,
                           mean_fraction=min(0.1, (1 - beta) / 2), max_rounds=60)
    fit = run_pace_ggm(x.T @ x / n, n=n, rho=rho, control=ctl, rng=rng, mean=x.mean(axis=0))
    spent = ledger_rho(fit.ledger)
    assert spent <= rho
    assert sum(r.rho for r in fit.ledger) <= rho  # also summed naively, left to right
    assert spent == pytest.approx(rho, rel=1e-9)  # the final round spends what is left
    for record in fit.ledger:  # each record's rho matches its own calibration
        if record.mechanism == "gaussian_zcdp":
            assert record.rho == pytest.approx(record.sensitivity**2 / (2 * record.scale**2))
        else:
            assert record.rho == pytest.approx((2 * record.sensitivity / record.scale) ** 2 / 8)


def test_pace_ggm__ledger_layout():
    x = _data(1)
    fit = dp_covariance(x, preset="seed", rho=0.5, bounds=2.5, rng=3)
    ledger = fit.ledger
    assert ledger[0].component == "diagonal" and ledger[0].draws == 5
    rounds = fit.metadata["rounds"]
    assert [r.component for r in ledger[1:]] == ["select", "measure"] * rounds
    assert ledger[0].sensitivity == pytest.approx(math.sqrt(5) / 400)
    assert all(r.sensitivity == pytest.approx(2 / 400) for r in ledger[1:])
    assert fit.metadata["ledger_total"]["rho"] <= 0.5
    allocations = fit.metadata["privacy"]["allocations"]
    assert allocations == pytest.approx({"diagonal": 0.5 * 0.2, "rounds": 0.5 * 0.8})


# --- limits as rho grows ----------------------------------------------------------------------


def test_pace_ggm__converges_to_the_exact_matrix(global_seed):
    x = _data(global_seed, d=4)
    exact = clipped_second_moment(x, bounds=2.5).values
    fit = dp_covariance(x, preset="seed", rho=1e12, bounds=2.5, rng=global_seed,
                        control={"rounds_per_variable": 50})
    assert fit.measured.values.all()  # every entry was eventually measured
    np.testing.assert_allclose(fit.covariance.values, exact, atol=1e-6)


def test_ssp__equals_the_exact_matrix_as_rho_grows(global_seed):
    x = _data(global_seed)
    exact = clipped_second_moment(x, bounds=2.5).values
    fit = dp_covariance(x, rho=1e16, bounds=2.5, method="ssp", rng=global_seed)
    np.testing.assert_allclose(fit.covariance.values, exact, atol=1e-8)
    raw = dp_covariance(x, rho=1e16, bounds=2.5, method="ssp", rng=1, control={"psd": False})
    np.testing.assert_allclose(raw.covariance.values, exact, atol=1e-8)


def test_diagonal__keeps_only_the_diagonal():
    x = _data(0)
    exact = clipped_second_moment(x, bounds=2.5).values
    fit = dp_covariance(x, rho=1e16, bounds=2.5, method="diagonal", rng=0)
    np.testing.assert_allclose(fit.covariance.values, np.diag(np.diag(exact)), atol=1e-8)
    assert fit.measured.values.sum() == 5


def test_pace_ggm__precision_zero_at_unmeasured_entries(global_seed):
    x = _data(global_seed, n=300, d=8)
    fit = dp_covariance(x, preset="seed", rho=2.0, bounds=2.5, rng=global_seed)
    cov = fit.covariance.values
    measured = fit.measured.values
    assert np.linalg.eigvalsh(cov).min() > 0
    inverse = np.linalg.inv(cov)
    scale = np.sqrt(np.outer(np.diag(inverse), np.diag(inverse)))
    assert np.max(np.abs(inverse[~measured]) / scale[~measured]) < 1e-6


def test_pace_ggm__mean_option_is_exact_with_a_huge_budget():
    x = _data(2, d=4) + 0.7  # uncentred
    exact = clipped_second_moment(x, bounds=3.5).values
    fit = dp_covariance(x, preset="seed", rho=1e12, bounds=3.5, rng=0,
                        control={"mean": "measure", "rounds_per_variable": 50})
    np.testing.assert_allclose(fit.covariance.values, exact, atol=1e-5)
    np.testing.assert_allclose(fit.dataset["mean_measurement"].values,
                               np.clip(x, -3.5, 3.5).mean(axis=0), atol=1e-6)


def test_pace_ggm__pgd_solver_runs():
    fit = dp_covariance(_data(0), preset="seed", rho=1.0, bounds=2.5, rng=0, control={"solver": "pgd"})
    assert np.linalg.eigvalsh(fit.covariance.values).min() > 0


# --- the data pass: clipping, Dask vs NumPy -------------------------------------------------


@pytest.mark.parametrize("chunks", [(7, 3), (1, 3), (50, 3), (13, 2)])
def test_clipped_second_moment__dask_equals_numpy(chunks):
    x = np.random.default_rng(4).normal(scale=2.0, size=(50, 3))
    bounds = np.array([1.0, 2.0, 3.0])
    clipped = np.clip(x, -bounds, bounds)
    got = clipped_second_moment(da.from_array(x, chunks=chunks), bounds=bounds.tolist())
    np.testing.assert_allclose(got.values, clipped.T @ clipped / 50, rtol=1e-13)
    assert got.attrs["private"] == 0


def test_dp_covariance__clipping_enforces_the_bounds():
    x = np.random.default_rng(5).normal(scale=3.0, size=(200, 3))
    fit = dp_covariance(x, rho=1e14, bounds={"X1": 1.0, "X2": 0.5, "X3": 2.0}, method="ssp",
                        rng=0, report_clipping=True)
    bounds = np.array([1.0, 0.5, 2.0])
    clipped = np.clip(x, -bounds, bounds)
    np.testing.assert_allclose(fit.covariance.values, clipped.T @ clipped / 200, atol=1e-7)
    assert np.all(np.abs(fit.covariance.values) <= np.outer(bounds, bounds) + 1e-7)
    np.testing.assert_array_equal(fit.dataset["clipped_count"].values,
                                  (np.abs(x) > bounds).sum(axis=0))
    assert fit.dataset["clipped_count"].attrs["description"].startswith("NOT PRIVATE")
    assert "clipped_count" not in dp_covariance(x, preset="seed", rho=1.0, bounds=1.0, rng=0).dataset


def test_dp_covariance__one_compute_and_same_release_as_the_driver_core():
    x = _data(6)
    with dask.config.set(scheduler="sync"):
        calls = []
        original = dask.compute

        def counting(*args, **kwargs):
            calls.append(1)
            return original(*args, **kwargs)

        dask.compute = counting
        try:
            fit = dp_covariance(da.from_array(x, chunks=(37, 5)), preset="seed", rho=0.3, bounds=2.5, rng=11)
        finally:
            dask.compute = original
    assert len(calls) == 1
    clipped = np.clip(x, -2.5, 2.5)
    core = release_covariance(clipped.T @ clipped / 400, n=400, bounds=np.full(5, 2.5), rho=0.3,
                              method="pace_ggm", control=pace_ggm_control(),
                              rng=np.random.default_rng(11))
    np.testing.assert_allclose(fit.covariance.values, core.covariance, rtol=1e-9)


def test_dp_covariance__nonfinite_data_is_refused_inside_the_pass():
    x = da.from_array(np.array([[0.0, 1.0], [np.nan, 0.0], [1.0, 1.0]]), chunks=(1, 2))
    with pytest.raises(Exception, match="finite"):
        dp_covariance(x, preset="seed", rho=1.0, bounds=1.0)


# --- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize("bounds", [None, 0.0, -1.0, math.inf, math.nan, "1", True, [1.0, 2.0],
                                    [1.0, -1.0, 1.0], {"X1": 1.0}, {"X1": 1, "X2": 1, "Z": 1}])
def test_dp_covariance__bad_bounds(bounds):
    with pytest.raises(ParameterError, match="'bounds' parameter of dp_covariance"):
        dp_covariance(np.zeros((5, 3)), preset="seed", rho=1.0, bounds=bounds)


def test_dp_covariance__bounds_are_required():
    # box clipping (the default) needs public bounds; row clipping a radius (test_row_clip.py)
    with pytest.raises(ParameterError, match="'bounds' parameter of dp_covariance.*required"):
        dp_covariance(np.zeros((5, 3)), preset="seed", rho=1.0)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rho": -1.0}, "'rho' parameter"),
    ({"rho": 0.0}, "'rho' parameter"),
    ({"rho": math.inf}, "'rho' parameter"),
    ({}, "needs a privacy budget"),
    ({"rho": 1.0, "eps": 1.0, "delta": 1e-6}, "either rho or eps and delta"),
    ({"eps": 1.0}, "'delta' is missing"),
    ({"eps": -1.0, "delta": 1e-6}, "'eps' parameter"),
])
def test_dp_covariance__bad_budget(kwargs, match):
    with pytest.raises(BudgetError, match=match):
        dp_covariance(np.zeros((5, 3)), preset="seed", bounds=1.0, **kwargs)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"method": "adaptive"}, "'method' parameter"),
    ({"control": {"psd": True}}, "'diag_fraction'|'control' parameter"),
    ({"control": {"diag_fraction": 1.5}}, "'diag_fraction' parameter of pace_ggm_control"),
    ({"method": "ssp", "control": {"diag_fraction": 0.1}}, "'control' parameter"),
    ({"method": "diagonal", "control": {"psd": True}}, "'control' parameter"),
    ({"report_clipping": "yes"}, "'report_clipping' parameter"),
])
def test_dp_covariance__bad_parameters(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        dp_covariance(np.zeros((5, 3)), preset="seed", rho=1.0, bounds=1.0, **kwargs)


def test_pace_ggm_control__budget_left_for_rounds():
    with pytest.raises(ParameterError, match="'mean_fraction' parameter"):
        pace_ggm_control(mean="measure", diag_fraction=0.5, mean_fraction=0.5)


# --- the result -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fit() -> CovarianceResult:
    return dp_covariance(_data(8), preset="seed", eps=1.0, delta=1e-6, bounds=2.5, rng=424242)


def test_dp_covariance__result_schema(fit):
    ds = fit.dataset
    assert ds["covariance"].dims == ("variable", "variable_")
    assert list(ds["variable"].values) == ["X1", "X2", "X3", "X4", "X5"]
    assert ds["measured"].dtype == bool and ds["measured"].values.diagonal().all()
    assert np.all((ds["precision_weight"].values > 0) == ds["measured"].values)
    assert np.isnan(ds["measurement"].values[~ds["measured"].values]).all()
    meta = fit.metadata
    assert meta["rng"]["seeded"] is True and "424242" not in ds.attrs["dppca_metadata"]
    assert meta["privacy"]["rho"] == pytest.approx(zcdp_rho(1.0, 1e-6))
    assert meta["ledger_total"]["eps"] <= 1.0
    assert meta["ledger_total"]["delta"] == 1e-6
    json.dumps(meta)


def test_dp_covariance__print_and_summary(fit):
    text = repr(fit)
    assert text.startswith("Differentially Private Covariance (PACE-GGM)\n"
                           "Data: 400 observations x 5 variables\nMeasured: ")
    assert "Total privacy budget: eps = 1 ; delta = 1e-06 (as rho = " in text
    assert text.endswith("Bounds: |x_j| <= 2.5 (public)")
    summary = repr(fit.summary())
    assert summary.startswith("DP Covariance Summary\n")
    assert "Private covariance  (first 5 variables x first 4 variables):" in summary
    assert "Privacy spent (rho, zCDP): diagonal " in summary


def test_dp_covariance__zarr_round_trip(fit, tmp_path):
    path = fit.to_zarr(tmp_path / "cov.zarr")
    back = load_result(path)
    assert isinstance(back, CovarianceResult)
    np.testing.assert_array_equal(back.covariance.values, fit.covariance.values)
    np.testing.assert_array_equal(back.measured.values, fit.measured.values)
    assert back.metadata == fit.metadata
    assert back.ledger == fit.ledger
    assert repr(back) == repr(fit) and repr(back.summary()) == repr(fit.summary())


# --- the covariance task of a run config ----------------------------------------------------


@pytest.fixture
def zarr_input(tmp_path):
    x = _data(9, n=240, d=4) * 2.0
    return write_store(tmp_path / "data.zarr", x, names=list("abcd"), chunk=70), x


def _run_config(tmp_path, data, **covariance):
    import yaml

    cfg = {
        "input": {"path": str(data), "array": "X"},
        "task": "covariance",
        "privacy": {"eps": 1e6, "delta": 1e-5},
        "covariance": {"bounds": 4.0, **covariance},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(tmp_path / "out"), "formats": ["zarr"]},
        "rng": 3,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_cli_covariance__plan_and_run(tmp_path, zarr_input):
    from click.testing import CliRunner

    from dppca_dask.cli import main

    data, x = zarr_input
    config = _run_config(tmp_path, data, method="ssp")
    runner = CliRunner()
    planned = runner.invoke(main, ["plan", str(config)])
    assert planned.exit_code == 0, planned.output
    assert "-> rho = " in planned.output and "ssp: rho = " in planned.output
    assert "Work (second-moment pass):" in planned.output
    result = runner.invoke(main, ["run", str(config), "--quiet"])
    assert result.exit_code == 0, result.output
    back = load_result(tmp_path / "out" / "covariance.zarr")
    assert isinstance(back, CovarianceResult)
    clipped = np.clip(x, -4.0, 4.0)
    np.testing.assert_allclose(back.covariance.values, clipped.T @ clipped / 240, atol=1e-3)
    assert back.metadata["privacy"]["eps"] == 1e6
    assert "DP Covariance Summary" in (tmp_path / "out" / "summary.txt").read_text()
    inspected = runner.invoke(main, ["inspect", str(tmp_path / "out")])
    assert inspected.exit_code == 0 and "Differentially Private Covariance (SSP)" in inspected.output


def test_cli_covariance__row_clipping_equals_the_python_release(tmp_path, zarr_input):
    """covariance.clip: row with covariance.radius runs Analyze-Gauss as dp_covariance does."""
    from click.testing import CliRunner

    from dppca_dask.cli import main

    data, x = zarr_input
    import yaml

    config = _run_config(tmp_path, data, method="ssp")
    settings = yaml.safe_load(config.read_text())
    settings["covariance"] = {"method": "ssp", "clip": "row", "radius": 5.0}
    settings["privacy"] = {"eps": 1.0, "delta": 1e-5}
    config.write_text(yaml.safe_dump(settings))
    runner = CliRunner()
    planned = runner.invoke(main, ["plan", str(config)])
    assert planned.exit_code == 0, planned.output
    assert "rows clipped to L2 norm 5 (Analyze-Gauss)" in planned.output
    result = runner.invoke(main, ["run", str(config), "--quiet"])
    assert result.exit_code == 0, result.output
    back = load_result(tmp_path / "out" / "covariance.zarr")
    direct = dp_covariance(x, eps=1.0, delta=1e-5, method="ssp", clip="row", radius=5.0, rng=3)
    np.testing.assert_array_equal(back.covariance.values, direct.covariance.values)
    assert "rows clipped to ||x|| <= 5" in (tmp_path / "out" / "summary.txt").read_text()
    for bad, key in (({"clip": "row", "radius": "median"}, "covariance.radius"),
                     ({"clip": "row", "radius": 5.0, "bounds": 4.0}, "covariance.bounds"),
                     ({"bounds": 4.0, "radius": 5.0}, "covariance.radius")):
        settings["covariance"] = {"method": "ssp", **bad}
        config.write_text(yaml.safe_dump(settings))
        refused = runner.invoke(main, ["plan", str(config)])
        assert refused.exit_code == 1 and key in refused.output, refused.output


def test_cli_covariance__config_errors(tmp_path, zarr_input):
    from click.testing import CliRunner

    from dppca_dask.cli import main

    data, _ = zarr_input
    runner = CliRunner()
    bad = runner.invoke(main, ["plan", str(_run_config(tmp_path, data, bounds=-1.0))])
    assert bad.exit_code == 1 and "covariance.bounds" in bad.output
    bad = runner.invoke(main, ["plan", str(_run_config(tmp_path, data,
                                                       control={"diag_fraction": 2}))])
    assert bad.exit_code == 1 and "diag_fraction" in bad.output
    bad = runner.invoke(main, ["plan", str(_run_config(tmp_path, data, bounds=[1.0, 2.0]))])
    assert bad.exit_code == 1 and "'covariance.bounds' config key" in bad.output
    import yaml

    config = _run_config(tmp_path, data)
    settings = yaml.safe_load(config.read_text())
    del settings["covariance"]
    config.write_text(yaml.safe_dump(settings))
    bad = runner.invoke(main, ["plan", str(config)])
    assert bad.exit_code == 1 and "config key 'covariance' is required" in bad.output


def test_configs_covariance_yaml__is_valid():
    from pathlib import Path

    from dppca_dask.pipeline.config import load_config

    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "covariance.yaml")
    assert cfg.task == "covariance" and cfg.covariance is not None
    assert cfg.covariance.method == "auto" and cfg.covariance.clip == "row"
    assert cfg.covariance.radius == "private" and cfg.covariance.bounds is None


@pytest.mark.slow
def test_benchmark_covariance__quick_mode_runs(tmp_path):
    with benchmark_module("covariance", "bench_covariance") as bench:
        rows = bench.main(["--quick", "--out", str(tmp_path)])
    assert {r["method"] for r in rows} == {"pace_ggm", "pace_ggm_row", "ssp", "ssp_row",
                                         "diagonal", "diagonal_row"}
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "results.csv", "summary.md", "synthetic16.md", "synthetic16.png"]


def test_benchmark_covariance__designed_families():
    # Every designed family loads by name (standardised, reproducible) and has the structure
    # its docstring names, read off the sample correlations.
    with benchmark_module("covariance", "bench_covariance_families") as bench:
        corr = {}
        for kind in bench.FAMILIES:
            data = bench.load_dataset(f"synthetic-{kind}12", "standardize")
            assert data.x.shape == (2000, 12) and np.all(np.isfinite(data.x))
            np.testing.assert_allclose(data.x.std(axis=0), 1.0, rtol=1e-12)
            np.testing.assert_array_equal(bench.family(kind, 12), bench.family(kind, 12))
            corr[kind] = np.corrcoef(bench.family(kind, 12), rowvar=False)
    # 2000 rows: a sample correlation's sd is at most about 1/sqrt(2000) = 0.022
    assert abs(corr["blocks"][0, 5] - 0.6) < 0.1 and abs(corr["blocks"][0, 6]) < 0.1
    assert corr["chain"][0, 1] < -0.3 and abs(corr["chain"][0, 11]) < 0.1
    assert corr["collinear"][0, 1] > 0.99
    assert 0.3 < corr["equicorr"][0, 11] < 0.7 and 0.3 < corr["lognormal"][0, 11] < 0.7
    assert abs(corr["independent"][0, 1]) < 0.1
    with pytest.raises(ValueError, match="needs d >= 4"):
        bench.family("collinear", 3)
