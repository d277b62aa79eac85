"""Covariance entry and eigenvalue intervals: simulated coverage of the noise-free clipped
second moment, the public range for unmeasured entries, where they appear."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import binom

from dppca_dask import dp_covariance
from dppca_dask.covariance.estimator import release_covariance
from dppca_dask.privacy.rng import as_rng
from dppca_dask.results.covariance_intervals import LEVEL, covariance_intervals, public_range

RUNS, N, D = 300, 500, 5


def _sigma() -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(7)
    bounds = np.array([4.0, 3.0, 2.0, 2.0, 1.0])
    x = np.clip(g.normal(size=(N, D)) * [2.0, 1.5, 1.0, 0.3, 0.3], -bounds, bounds)
    return x.T @ x / N, bounds


@pytest.mark.parametrize("method", ["ssp", "diagonal"])
def test_covariance_intervals__simultaneous_coverage_of_the_noise_free_entries(method):
    """Independent Gaussian entries: all m intervals cover at once with probability between
    the level (Bonferroni) and (1 - alpha/m)^m; a binomial 0.1 % band either side. The
    eigenvalue intervals (ssp) cover at least at the level's lower band."""
    sigma, bounds = _sigma()
    covered = eig_covered = 0
    for seed in range(RUNS):
        est = release_covariance(sigma, n=N, bounds=bounds, rho=0.05, method=method,
                                 control={"psd": True} if method == "ssp" else None,
                                 rng=as_rng(seed, owner="test").generator)
        out = covariance_intervals(est.measurements, est.weights, bounds, "box")
        mask = np.triu(est.weights > 0)
        covered += bool(np.all(((out["lower"] <= sigma) & (sigma <= out["upper"]))[mask]))
        if method == "ssp":
            ev = np.linalg.eigvalsh(sigma)[::-1]
            eig_covered += bool(np.all((out["eigenvalue_lower"] <= ev)
                                       & (ev <= out["eigenvalue_upper"])))

    m = D * (D + 1) // 2 if method == "ssp" else D
    low = binom.ppf(0.001, RUNS, LEVEL)
    high = binom.isf(0.001, RUNS, (1 - (1 - LEVEL) / m) ** m)
    assert low <= covered <= high, (covered, low, high)
    if method == "ssp":
        assert eig_covered >= binom.ppf(1e-6, RUNS, LEVEL)


def test_covariance_eigenvalues__separated_ones_get_about_the_first_order_width():
    """At a budget where the noise is well below the eigengaps, a separated eigenvalue's
    interval is the first-order z sqrt(2) s plus a small remainder, not Weyl's b (at d = 5
    the first-order term alone is 0.49 b), and the intervals still cover at once (binomial
    1e-6 lower band)."""
    sigma, bounds = _sigma()
    ev = np.linalg.eigvalsh(sigma)[::-1]
    runs, covered, half, weyl = 100, 0, [], []
    for seed in range(runs):
        est = release_covariance(sigma, n=N, bounds=bounds, rho=50.0, method="ssp",
                                 control={"psd": True}, rng=as_rng(seed, owner="test").generator)
        out = covariance_intervals(est.measurements, est.weights, bounds, "box")
        covered += bool(np.all((out["eigenvalue_lower"] <= ev) & (ev <= out["eigenvalue_upper"])))
        half.append((out["eigenvalue_upper"][0] - out["eigenvalue_lower"][0]) / 2)
        weyl.append(out["b"])
    assert covered >= binom.ppf(1e-6, runs, LEVEL)
    assert np.median(half) < 0.65 * np.median(weyl), (np.median(half), np.median(weyl))


def test_covariance_intervals__unmeasured_entries_get_the_public_range():
    lo, hi, trace = public_range(np.array([2.0, 1.0]), "row")
    assert hi.tolist() == [[4.0, 2.0], [2.0, 4.0]] and lo[0, 1] == -2.0 and lo[0, 0] == 0.0
    assert trace == 4.0
    weights = np.diag([1e6, 1e6])
    out = covariance_intervals(np.diag([0.5, 0.2]), weights, np.array([1.0, 1.0]), "box")
    assert out["lower"][0, 1] == -1.0 and out["upper"][0, 1] == 1.0
    assert np.isnan(out["eigenvalue"]).all()


def test_covariance_intervals__in_the_dataset_and_summary():
    x = np.random.default_rng(2).normal(size=(400, 3)) * [2.0, 1.0, 0.1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = dp_covariance(x, rho=0.5, method="ssp", bounds=6.0, rng=1)
    ds = fit.dataset
    assert np.all(ds["covariance_lower"].values <= ds["covariance_upper"].values)
    assert ds["covariance_lower"].attrs["interval_level"] == LEVEL
    assert ds["covariance_eigenvalue_lower"].dims == ("component",)
    assert ds["covariance_eigenvalue_upper"].attrs["long_name"]
    text = repr(fit.summary())
    assert "95% intervals of the noise-free entries (simultaneous" in text
    assert "95% intervals of the noise-free eigenvalues (simultaneous): PC1" in text
    assert "Sampling sd of the entries if the rows were Gaussian with mean 0" in text
    sd = ds["covariance_sampling_sd"].values
    c = ds["covariance"].values
    assert sd[0, 1] == pytest.approx(np.sqrt((c[0, 1] ** 2 + c[0, 0] * c[1, 1]) / 400))
    assert ds["covariance_sampling_sd"].attrs["assumption"] == "Gaussian rows with mean 0"
