"""Empirical privacy audit: shipped mechanisms stay within their claimed ε; a copy with its noise
scaled by 0.7 is caught at the default sample count; the floating-point membership attack
catches a naive float sampler. The full table is benchmarks/audit.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dppca_dask.pca.loading import kendall_sensitivity, spherical_kendall
from dppca_dask.privacy import mechanisms
from dppca_dask.privacy.audit import (
    AUDITS,
    audit_float_membership,
    clopper_pearson,
    epsilon_lower_bound,
    float_product_hits,
    kendall_neighbours,
    naive_laplace,
    run_audit,
)


def test_clopper_pearson__covers_truth():
    rng = np.random.default_rng(0)
    misses = 0
    for _ in range(400):
        k = rng.binomial(200, 0.1)
        lo, hi = clopper_pearson(k, 200, 0.05)
        misses += not (lo <= 0.1 <= hi)
    assert misses <= 40  # expected <= 20 (5 %); generous binomial bound


def test_epsilon_lower_bound__gaussian_shift_is_below_truth():
    # Unit-variance Gaussian with mean shift mu: its exact eps at delta is known; the bound is
    # below it.
    rng = np.random.default_rng(1)
    mu = 1.0
    a, b = rng.normal(mu, 1.0, 40000), rng.normal(0.0, 1.0, 40000)
    res = epsilon_lower_bound(a, b, delta=1e-5)
    from dppca_dask.privacy.accounting import gaussian_delta

    # Smallest eps with delta(eps) <= 1e-5 for sensitivity mu, sigma 1.
    eps_true = next(e for e in np.arange(0.01, 20, 0.01) if gaussian_delta(1.0, mu, e) <= 1e-5)
    assert 0 < res.epsilon_lower <= eps_true


def test_epsilon_lower_bound__reaches_a_pure_laplace_epsilon():
    # Laplace(1) shifted by 1 is exactly 1-DP, attained on {y >= 1} (probabilities 1/2, 1/(2e)).
    rng = np.random.default_rng(2)
    a, b = rng.laplace(1.0, 1.0, 20000), rng.laplace(0.0, 1.0, 20000)
    res = epsilon_lower_bound(a, b, delta=0.0)
    assert 0.75 < res.epsilon_lower <= 1.0


def test_audits__cover_every_mechanism():
    helpers = {"Release", "gaussian_calibration", "gaussian_release_sigma", "histogram_noise_sigma", "mat2vec",
               "stability_histogram_parameters", "geometric_histogram_scale",
               "symmetric_noise_sigma", "vec2mat"}
    audited = {name.split(" ")[0] for name in AUDITS}
    assert audited == set(mechanisms.__all__) - helpers


def test_kendall_neighbours__attain_tight_change():
    n = 40
    d, d_prime = kendall_neighbours(n, 3)
    change = np.linalg.norm(spherical_kendall(d).values - spherical_kendall(d_prime).values)
    assert change == pytest.approx(2 * math.sqrt(2) / n, rel=1e-6)
    assert change == pytest.approx(kendall_sensitivity(n, bound="tight"), rel=1e-6)


# One audit per mechanism family; the rest (scalar Gaussian, symmetric matrices, zCDP, smooth
# Laplace, Kendall) run in benchmarks/audit.py, where per-release calls cost seconds.
FAST = ["gaussian_release (vector)", "gaussian_histogram", "stability_histogram",
        "geometric_histogram",
        "laplace_release", "exponential_mechanism", "above_threshold"]


@pytest.mark.parametrize("name", FAST)
def test_run_audit__shipped_within_claim(name):
    res = run_audit(name, rng=np.random.default_rng(11))
    assert res.epsilon_lower <= AUDITS[name].claimed_eps


@pytest.mark.parametrize("name", FAST)
def test_run_audit__under_noised_copy_caught(name):
    res = run_audit(name, noise_factor=0.7, rng=np.random.default_rng(12))
    assert res.epsilon_lower > AUDITS[name].claimed_eps


def test_float_product_hits__naive_sampler_always_hits_at_zero():
    rng = np.random.default_rng(3)
    assert float_product_hits(naive_laplace(np.zeros(2000), scale=3.0, rng=rng), 3.0).all()
    shifted = float_product_hits(naive_laplace(np.full(2000, 3.0), scale=3.0, rng=rng), 3.0)
    assert 0 < shifted.sum() < 2000


@pytest.mark.parametrize("name", ["naive_laplace", "naive_gaussian"])
def test_audit_float_membership__naive_baseline_caught(name):
    res = audit_float_membership(name, rng=np.random.default_rng(4))
    assert res.epsilon_lower > 1.0


@pytest.mark.parametrize("name", ["laplace_release", "gaussian_release"])
def test_audit_float_membership__shipped_within_claim(name):
    res = audit_float_membership(name, rng=np.random.default_rng(5))
    assert res.epsilon_lower <= 1.0


def test_benchmark_audit__quick_rows_run():
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "audit.py"
    spec = importlib.util.spec_from_file_location("bench_audit", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--seed", "6", "--only", "laplace_release", "float"]) == 0
