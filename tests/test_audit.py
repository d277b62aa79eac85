"""Empirical privacy audit: shipped mechanisms stay within their claimed ε; a copy with its noise
scaled by 0.9 is caught at the default sample count, with an exact power ≥ 1 − 1e-3 against
that copy and a false-alarm probability ≤ 1e-6 by construction; the floating-point membership
attack catches a naive float sampler. The full table is benchmarks/audit.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dppca_dask.pca.loading import kendall_sensitivity, spherical_kendall
from dppca_dask.privacy import mechanisms
from dppca_dask.privacy.audit import (
    AUDIT_ALPHA,
    AUDIT_POWER,
    AUDITS,
    audit_float_membership,
    audit_kendall_release,
    clopper_pearson,
    detection_power,
    epsilon_lower_bound,
    event_bound,
    float_product_hits,
    kendall_neighbours,
    naive_laplace,
    run_audit,
)
from dppca_dask.privacy.audit.bounds import cp_arrays

Z = stats.norm.isf(1e-6 / 2)  # two-sided binomial tolerance at alpha 1e-6


def test_clopper_pearson__covers_truth():
    rng = np.random.default_rng(0)
    misses = 0
    for _ in range(400):
        k = rng.binomial(200, 0.1)
        lo, hi = clopper_pearson(k, 200, 0.05)
        misses += not (lo <= 0.1 <= hi)
    assert misses <= 46  # Binomial(400, <= 0.05) exceeds 46 with probability < 1e-6


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


def test_event_bound__pure_laplace_pair_within_and_weaker_noise_above():
    rng = np.random.default_rng(3)
    n = 30000
    tight = event_bound(rng.laplace(1.0, 1.0, n), rng.laplace(0.0, 1.0, n), threshold=1.0,
                        delta=0.0)
    assert 0.85 < tight.epsilon_lower <= 1.0
    assert (tight.tail_d, tight.n_eval, tight.alpha) == (tight.tail_d, n, AUDIT_ALPHA)
    # scale 0.8: true eps 1.25 on the same event; power > 1 - 1e-6 at n = 30000
    assert detection_power(0.5, 0.5 * math.exp(-1.25), n, claim=1.0, delta=0.0) > 1 - 1e-6
    weak = event_bound(rng.laplace(1.0, 0.8, n), rng.laplace(0.0, 0.8, n), threshold=1.0,
                       delta=0.0)
    assert weak.epsilon_lower > 1.0


def test_detection_power__matches_simulated_counts():
    # p, q, n where the power is about one half; 4000 simulated count pairs
    p, q, n, claim = 0.3, 0.3 * math.exp(-1.2), 13000, 1.0
    power = detection_power(p, q, n, claim=claim, delta=0.0)
    assert 0.2 < power < 0.8
    rng = np.random.default_rng(4)
    kp, kq = rng.binomial(n, p, 4000), rng.binomial(n, q, 4000)
    p_lo, _ = cp_arrays(kp, n, AUDIT_ALPHA)
    _, q_hi = cp_arrays(kq, n, AUDIT_ALPHA)
    caught = np.mean(np.log(p_lo / q_hi) > claim)
    assert abs(caught - power) <= Z * math.sqrt(power * (1 - power) / 4000)


def test_audits__cover_every_mechanism():
    helpers = {"Release", "gaussian_calibration", "gaussian_release_sigma", "histogram_noise_sigma", "mat2vec",
               "stability_histogram_parameters", "geometric_histogram_scale",
               "symmetric_noise_sigma", "vec2mat"}
    audited = {name.split(" ")[0] for name in AUDITS}
    # each mechanism's record builder (public quantities only, no noise) and note_label
    builders = {name for name in mechanisms.__all__ if name.endswith("_record")}
    assert builders == {f"{name.removesuffix('_release')}_record" for name in audited}
    assert audited == set(mechanisms.__all__) - helpers - builders - {"note_label"}


@pytest.mark.parametrize("name", list(AUDITS))
def test_audit_design__shipped_event_within_claim(name):
    # The shipped mechanism's event meets the claim, so the bound exceeds it with probability
    # <= AUDIT_ALPHA (Clopper-Pearson): the false alarm rate of every audit.
    audit = AUDITS[name]
    p, q = audit.law(1.0)
    assert p - audit.delta <= math.exp(audit.claimed_eps) * q * (1 + 1e-9)


@pytest.mark.parametrize("name", list(AUDITS))
def test_audit_design__default_count_catches_noise_x09(name):
    audit = AUDITS[name]
    assert audit.power(0.9) >= AUDIT_POWER
    assert audit.power(1.0) <= AUDIT_ALPHA


def _hit_rates_match_law(name, factor, n, seed):
    audit = AUDITS[name]
    a, b = audit.sample(factor, n, np.random.default_rng(seed))
    for sample, prob in zip((a, b), audit.law(factor), strict=True):
        hits = int(np.sum(sample > audit.threshold))
        assert abs(hits - n * prob) <= Z * math.sqrt(n * prob * (1 - prob)) + 1, (name, factor)


# Batched audits (one call draws every release): full power in well under a second each.
FAST = ["gaussian_symmetric_matrix", "gaussian_zcdp_symmetric", "gaussian_histogram",
        "laplace_release", "stability_histogram", "geometric_histogram"]
# One release per call (or 2-vector batches): seconds each, up to ~15 s (exponential mechanism).
SLOW = [name for name in AUDITS if name not in FAST]


@pytest.mark.parametrize("name", FAST)
@pytest.mark.parametrize("factor", [1.0, 0.9])
def test_audit_law__matches_the_mechanism(name, factor):
    _hit_rates_match_law(name, factor, 20000, 21)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_audit_law__matches_the_mechanism_slow(name):
    _hit_rates_match_law(name, 0.9, 12000, 22)


@pytest.mark.parametrize("name", FAST)
def test_run_audit__shipped_within_claim(name):
    res = run_audit(name, rng=np.random.default_rng(11))
    assert res.epsilon_lower <= AUDITS[name].claimed_eps


@pytest.mark.parametrize("name", FAST)
def test_run_audit__noise_x09_caught(name):
    res = run_audit(name, noise_factor=0.9, rng=np.random.default_rng(12))
    assert res.epsilon_lower > AUDITS[name].claimed_eps


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
@pytest.mark.parametrize("factor", [1.0, 0.9])  # two tests: xdist runs them side by side
def test_run_audit__slow_shipped_within_claim_and_noise_x09_caught(name, factor):
    claim = AUDITS[name].claimed_eps
    bound = run_audit(name, noise_factor=factor,
                      rng=np.random.default_rng(13 if factor == 1.0 else 14)).epsilon_lower
    assert bound <= claim if factor == 1.0 else bound > claim


def test_kendall_neighbours__attain_tight_change():
    n = 40
    d, d_prime = kendall_neighbours(n, 3)
    change = np.linalg.norm(spherical_kendall(d).values - spherical_kendall(d_prime).values)
    assert change == pytest.approx(2 * math.sqrt(2) / n, rel=1e-6)
    assert change == pytest.approx(kendall_sensitivity(n, bound="tight"), rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("factor", [1.0, 0.9])  # two tests: xdist runs them side by side
def test_audit_kendall_release__within_claim_and_noise_x09_caught(factor):
    bound = audit_kendall_release(noise_factor=factor, rng=np.random.default_rng(
        15 if factor == 1.0 else 16)).epsilon_lower
    assert bound <= 1.0 if factor == 1.0 else bound > 1.0


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
