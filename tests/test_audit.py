"""Empirical privacy audit: correct mechanisms stay under their claimed ε; broken ones are caught."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dppca_dask.audit import (
    audit_kendall_release,
    clopper_pearson,
    epsilon_lower_bound,
    kendall_neighbours,
)
from dppca_dask.loading import kendall_sensitivity, spherical_kendall


def test_clopper_pearson__covers_truth():
    rng = np.random.default_rng(0)
    misses = 0
    for _ in range(400):
        k = rng.binomial(200, 0.1)
        lo, hi = clopper_pearson(k, 200, 0.05)
        misses += not (lo <= 0.1 <= hi)
    assert misses <= 40  # expected <= 20 (5 %); generous binomial bound


def test_epsilon_lower_bound__gaussian_shift_is_below_truth():
    # Unit-variance Gaussian with mean shift mu: its exact eps at delta is known; the bound is below.
    rng = np.random.default_rng(1)
    mu = 1.0
    a, b = rng.normal(mu, 1.0, 40000), rng.normal(0.0, 1.0, 40000)
    res = epsilon_lower_bound(a, b, delta=1e-5)
    from dppca_dask.accounting import gaussian_delta

    # Smallest eps with delta(eps) <= 1e-5 for sensitivity mu, sigma 1.
    eps_true = next(e for e in np.arange(0.01, 20, 0.01) if gaussian_delta(1.0, mu, e) <= 1e-5)
    assert 0 < res.epsilon_lower <= eps_true


def test_kendall_neighbours__attain_tight_change():
    n = 40
    d, d_prime = kendall_neighbours(n, 3)
    change = np.linalg.norm(spherical_kendall(d).values - spherical_kendall(d_prime).values)
    assert change == pytest.approx(2 * math.sqrt(2) / n, rel=1e-6)
    assert change < kendall_sensitivity(n)


@pytest.mark.slow
@pytest.mark.parametrize("calibration", ["classical", "analytic"])
def test_audit_kendall__correct_passes_broken_caught(calibration):
    eps = 0.9
    ok = audit_kendall_release(eps=eps, delta=1e-5, calibration=calibration, reps=8000,
                               rng=np.random.default_rng(3))
    assert ok.epsilon_lower <= eps
    broken = audit_kendall_release(eps=eps, delta=1e-5, calibration=calibration, reps=8000,
                                   sensitivity_factor=0.1, rng=np.random.default_rng(4))
    assert broken.epsilon_lower > eps


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gaussian_release", "laplace_release", "gaussian_zcdp",
                                  "exponential_mechanism", "above_threshold"])
def test_audit_mechanism__correct_passes_broken_caught(name):
    from dppca_dask.audit import audit_mechanism

    ok = audit_mechanism(name, eps=1.0, delta=1e-5, reps=4000, rng=np.random.default_rng(7))
    assert ok.epsilon_lower <= 1.0
    bad = audit_mechanism(name, eps=1.0, delta=1e-5, reps=4000, broken=True,
                          rng=np.random.default_rng(8))
    assert bad.epsilon_lower > 1.0


@pytest.mark.slow
@pytest.mark.parametrize(("method", "misstate"), [("add", 10.0), ("sparse", 1e4)])
def test_audit_histograms__correct_passes_broken_caught(method, misstate):
    from dppca_dask.audit import audit_histogram_release

    ok = audit_histogram_release(method=method, eps=1.0, delta=1e-5, reps=4000,
                                 rng=np.random.default_rng(9))
    assert ok.epsilon_lower <= 1.0
    bad = audit_histogram_release(method=method, eps=1.0, delta=1e-5, reps=4000,
                                  misstate=misstate, rng=np.random.default_rng(10))
    assert bad.epsilon_lower > 1.0
