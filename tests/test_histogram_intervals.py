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
    GEOMETRIC_SPLIT,
    LEVEL,
    discrete_gaussian_quantile,
    discrete_laplace_quantile,
    geometric_sum_bounds,
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


def test_geometric_intervals__about_t_not_2t_when_few_cells_are_empty():
    """A histogram whose cells all hold many counts: the projection's shift is bounded by the
    sum of the noise, so a released cell's half-width is t plus a little (at most 1.25 t),
    not the 2t of |tau| <= t alone; and the intervals still cover."""
    counts = np.full((1, 6, 6), 300, dtype=np.int64)
    n = int(counts.sum())
    budget = PrivacyBudget(0.5, 1e-5)
    t = discrete_laplace_quantile(4.0, (1 - LEVEL) * GEOMETRIC_SPLIT[0] / 36)
    covered = 0
    for seed in range(100):
        hist = release_histograms(counts, np.array([n]), methods=["geometric"], budget=budget,
                                  calibration="analytic", rng=as_rng(seed, owner="test").generator)
        out = histogram_interval_variables(hist.methods, hist.probability, hist.total,
                                           np.array([n]), ledger_to_dicts(hist.records),
                                           ("mechanism", "y_bin", "x_bin"))
        lo, hi = out["count_lower"][1][0], out["count_upper"][1][0]
        assert np.all((hi - lo) / 2 <= 1.25 * t), ((hi - lo).max() / 2, t)
        covered += bool(np.all((lo <= counts[0]) & (counts[0] <= hi)))
    assert covered >= binom.ppf(0.001, 100, LEVEL)


def test_geometric_sum_bounds__hold_and_are_not_needlessly_wide():
    """Simulated sums of K discrete Laplace draws (a difference of two geometrics): |sum Z|
    exceeds u and sum max(-Z, 0) exceeds w at most at their levels (binomial 1e-6 band), and
    the Chernoff bounds are within 1.5x the simulated quantiles."""
    scale, cells, runs = 4.0, 100, 20000
    u, w = geometric_sum_bounds(scale, cells)
    g = np.random.default_rng(20261206)
    q = math.exp(-1 / scale)
    z = g.geometric(1 - q, size=(runs, cells)) - g.geometric(1 - q, size=(runs, cells))
    total, tail = np.abs(z.sum(axis=1)), np.maximum(-z, 0).sum(axis=1)
    a_u, a_w = (1 - LEVEL) * GEOMETRIC_SPLIT[1], (1 - LEVEL) * GEOMETRIC_SPLIT[2]
    assert np.sum(total > u) <= binom.isf(1e-6, runs, a_u)
    assert np.sum(tail > w) <= binom.isf(1e-6, runs, a_w)
    assert u <= 1.5 * np.quantile(total, 1 - a_u) and w <= 1.5 * np.quantile(tail, 1 - a_w)


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
