"""Score-histogram cell intervals: simulated coverage of the noise-free counts and
probabilities for add, sparse and geometric (the projection included), the exact noise
quantiles, where they appear."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import binom, norm

from dppca_dask import dp_score, privacy_control
from dppca_dask.pca.histograms import release_histograms
from dppca_dask.privacy.accounting import ledger_to_dicts
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.rng import as_rng
from dppca_dask.results.histogram_intervals import (
    LEVEL,
    discrete_gaussian_quantile,
    discrete_laplace_quantile,
    histogram_interval_variables,
)

RUNS = 300


def _counts() -> np.ndarray:
    g = np.random.default_rng(5)
    c = np.zeros(36, dtype=np.int64)
    np.add.at(c, np.minimum(g.geometric(0.25, size=400) - 1, 35), 1)  # many small cells
    return c.reshape(1, 6, 6)


@pytest.mark.parametrize("method", ["add", "sparse", "geometric"])
def test_histogram_intervals__simultaneous_coverage_of_the_noise_free_cells(method):
    counts = _counts()
    n = int(counts.sum())
    covered = 0
    for seed in range(RUNS):
        hist = release_histograms(counts, np.array([n]), methods=[method],
                                  budget=PrivacyBudget(0.5, 1e-5), calibration="analytic",
                                  rng=as_rng(seed, owner="test").generator)
        out = histogram_interval_variables(hist.methods, hist.probability, hist.total,
                                           np.array([n]), ledger_to_dicts(hist.records),
                                           ("mechanism", "y_bin", "x_bin"))
        lo, hi = out["count_lower"][1][0], out["count_upper"][1][0]
        plo, phi = out["probability_lower"][1][0], out["probability_upper"][1][0]
        ok = np.all((lo <= counts[0]) & (counts[0] <= hi))
        ok &= np.all((plo <= counts[0] / n + 1e-15) & (counts[0] / n - 1e-15 <= phi))
        covered += bool(ok)
    assert covered >= binom.ppf(0.001, RUNS, LEVEL), covered


def test_noise_quantiles__exact_tails():
    t = discrete_gaussian_quantile(3.0, 0.01)
    y = np.arange(-60, 61)
    w = np.exp(-y ** 2 / 18.0)
    w /= w.sum()
    assert w[np.abs(y) > t].sum() <= 0.01 < w[np.abs(y) > t - 1].sum()
    assert abs(t - norm.isf(0.005) * 3.0) < 1.5
    q = math.exp(-1 / 4.0)
    t = discrete_laplace_quantile(4.0, 0.001)
    assert 2 * q ** (t + 1) / (1 + q) <= 0.001 < 2 * q ** t / (1 + q)


def test_histogram_intervals__in_the_dataset_and_summary():
    x = np.random.default_rng(0).normal(size=(800, 4)) * [3.0, 2.0, 1.0, 0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = dp_score(x, privacy=privacy_control(eps=2.0, delta=1e-5),
                       method=["add", "geometric"], rng=1)
    ds = fit.dataset
    assert ds["probability_lower"].dims == ds["probability"].dims
    assert np.all(ds["probability_lower"].values <= ds["probability_upper"].values)
    assert ds["count_upper"].attrs["interval_level"] == LEVEL
    text = repr(fit.summary())
    assert "95% intervals of the noise-free cell probabilities (simultaneous" in text
    assert "  geometric: half-width up to" in text
