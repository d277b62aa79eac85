"""Noise layout, calibration values and statistical checks of the Gaussian matrix mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dppca_dask.accounting import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    gaussian_delta,
    gaussian_sigma,
)
from dppca_dask.budget import PrivacyBudget
from dppca_dask.errors import BudgetError
from dppca_dask.mechanisms import gaussian_symmetric_matrix, vec2mat

ALPHA = 1e-6


def test_classical_sigma__seed_value():
    assert classical_gaussian_sigma(4 / 50, 0.5, 1e-3) == 0.6042367252254475


def test_vec2mat__spec_layout():
    r2 = math.sqrt(2)
    expected = np.array([[1, 4 / r2, 5 / r2], [4 / r2, 2, 6 / r2], [5 / r2, 6 / r2, 3]])
    np.testing.assert_array_equal(vec2mat(np.arange(1.0, 7.0), 3), expected)


def test_vec2mat__column_major_lower_triangle_p5():
    p = 5
    m = vec2mat(np.arange(1.0, 16.0), p)
    order = [(i, j) for j in range(p) for i in range(j + 1, p)]  # (2,1),(3,1),…,(5,4)
    for k, (i, j) in enumerate(order):
        assert m[i, j] == m[j, i] == (p + 1 + k) / math.sqrt(2)
    np.testing.assert_array_equal(np.diag(m), np.arange(1.0, 6.0))


def test_vec2mat__wrong_length():
    with pytest.raises(ValueError, match="needs 6 values"):
        vec2mat(np.zeros(5), 3)


def test_gaussian_symmetric_matrix__record_and_draw_count():
    class Counting:
        def __init__(self):
            self.calls = []

        def normal(self, loc=0.0, scale=1.0, size=None):
            self.calls.append((loc, scale, size))
            return np.zeros(size)

    rng = Counting()
    budget = PrivacyBudget(0.5, 1e-3)
    rel = gaussian_symmetric_matrix(np.eye(4), sensitivity=4 / 50, budget=budget,
                                    calibration="classical", rng=rng, component="loading")
    assert rng.calls == [(0.0, 0.6042367252254475 * 1.0, 10)]  # one call, q = p(p+1)/2
    assert rel.record.scale == 0.6042367252254475
    assert rel.record.rho == pytest.approx((4 / 50) ** 2 / (2 * 0.6042367252254475**2))
    assert rel.record.draws == 10
    np.testing.assert_array_equal(rel.value, np.eye(4))


@pytest.mark.slow
@pytest.mark.parametrize("calibration", ["classical", "analytic"])
def test_gaussian_symmetric_matrix__noise_sd_within_chi2_bound(calibration, global_seed):
    rng = np.random.default_rng(global_seed)
    p, reps = 6, 3000
    base = np.diag(np.arange(1.0, p + 1)) / 21.0
    budget = PrivacyBudget(0.8, 1e-4)
    sens = 4 / 200
    sigma = gaussian_sigma(sens, budget.eps, budget.delta, calibration)
    noise = np.stack([
        gaussian_symmetric_matrix(base, sensitivity=sens, budget=budget, calibration=calibration,
                                  rng=rng, component="loading").value - base
        for _ in range(reps)
    ])
    assert np.allclose(noise, noise.transpose(0, 2, 1))
    diag = noise[:, np.arange(p), np.arange(p)].ravel()
    rows, cols = np.tril_indices(p, -1)
    off = noise[:, rows, cols].ravel()
    for values, sd in ((diag, sigma), (off, sigma / math.sqrt(2))):
        k = values.size
        stat = np.sum(values**2) / sd**2  # ~ chi2_k when the SD is right (mean known: 0)
        assert stats.chi2.ppf(ALPHA / 2, k) < stat < stats.chi2.ppf(1 - ALPHA / 2, k)
        assert stats.kstest(values / sd, "norm").pvalue > ALPHA


@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 0.99])
def test_classical_calibration__satisfies_eps_below_one(eps):
    for delta in (1e-3, 1e-6, 1e-10):
        sigma = classical_gaussian_sigma(1.0, eps, delta)
        assert gaussian_delta(sigma, 1.0, eps) <= delta


@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 5.0, 20.0, 50.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_analytic_calibration__tight(eps, delta):
    sigma = analytic_gaussian_sigma(2.5, eps, delta)
    assert gaussian_delta(sigma, 2.5, eps) <= delta
    assert gaussian_delta(sigma * (1 - 1e-6), 2.5, eps) > delta
    if eps < 1:
        assert sigma < classical_gaussian_sigma(2.5, eps, delta)


def test_gaussian_sigma__rejects_bad_inputs():
    with pytest.raises(BudgetError, match="delta > 0"):
        gaussian_sigma(1.0, 1.0, 0.0, "classical")
    with pytest.raises(BudgetError, match="Unknown calibration"):
        gaussian_sigma(1.0, 1.0, 1e-5, "laplace")
