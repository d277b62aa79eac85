"""Noise layout, calibration values and statistical checks of the Gaussian matrix mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dppca_dask.errors import BudgetError
from dppca_dask.privacy.accounting import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    gaussian_delta,
    gaussian_sigma,
    histogram_gaussian_delta,
    lattice_gaussian_certificate,
    lattice_gaussian_sd,
    public_grid,
)
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import (
    above_threshold,
    gaussian_histogram,
    gaussian_release,
    gaussian_symmetric_matrix,
    gaussian_zcdp,
    gaussian_zcdp_symmetric,
    histogram_noise_sigma,
    laplace_release,
    mat2vec,
    smooth_laplace,
    stability_histogram,
    symmetric_noise_sigma,
    vec2mat,
)

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
    budget = PrivacyBudget(0.5, 1e-3)
    rel = gaussian_symmetric_matrix(np.eye(4), sensitivity=4 / 50, budget=budget,
                                    calibration="classical", rng=np.random.default_rng(0),
                                    component="loading")
    grid = rel.record.grid
    assert grid == public_grid(4 / 50, 10, "l2") and grid * math.sqrt(10) <= 2**-30 * 4 / 50
    # the classical σ for the inflated sensitivity Δ + γ√q, up to the ~1e-7 certificate slack
    assert rel.record.sensitivity == pytest.approx(4 / 50 + grid * math.sqrt(10), rel=1e-15)
    assert rel.record.scale == pytest.approx(0.6042367252254475, rel=2e-7)
    assert rel.record.scale >= 0.6042367252254475
    assert rel.record.rho == pytest.approx(
        rel.record.sensitivity ** 2 / (2 * rel.record.scale**2))
    assert rel.record.draws == 10
    np.testing.assert_array_equal(rel.value, rel.value.T)


@pytest.mark.slow
@pytest.mark.parametrize("calibration", ["classical", "analytic"])
def test_gaussian_symmetric_matrix__noise_sd_within_chi2_bound(calibration, global_seed):
    rng = np.random.default_rng(global_seed)
    # 1176 values a call (the exact sampler is vectorised within a call; a call costs about
    # 3 ms + 0.4 ms per row): 7200 diagonal values (the chi2 window at ALPHA is ±4% of the
    # SD) and 169200 off-diagonal ones (±0.8%); a layout slip (sqrt 2) is 41%.
    p, reps = 48, 150
    base = np.diag(np.arange(1.0, p + 1)) / 21.0
    budget = PrivacyBudget(0.8, 1e-4)
    sens = 4 / 200
    sigma = symmetric_noise_sigma(sens, budget, calibration, dimension=p * (p + 1) // 2)
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


# --- floating-point safety (issue 21, item 5): grid releases, exact noise, public records ----


def _membership(out: float, scale: float) -> bool:
    """The issue's one-line test: does ``out`` lie in {fl(scale·x) : x a double}?"""
    return float(np.float64(out / scale) * scale) == out


def _fisher_p(a: np.ndarray, b: np.ndarray) -> float:
    table = [[int(a.sum()), int(a.size - a.sum())], [int(b.sum()), int(b.size - b.sum())]]
    return float(stats.fisher_exact(table).pvalue)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["gaussian", "laplace", "zcdp"])
def test_release__membership_attack_finds_nothing(mechanism):
    rng = np.random.default_rng(21)
    budget = PrivacyBudget(1.0, 1e-5)
    reps = 4000

    def release(v: float):
        if mechanism == "gaussian":
            return gaussian_release(v, sensitivity=1.0, budget=budget, calibration="analytic",
                                    rng=rng, component="audit")
        if mechanism == "laplace":
            return laplace_release(np.array([v]), sensitivity=1.0, eps=1.0, rng=rng,
                                   component="audit")
        return gaussian_zcdp(v, sensitivity=1.0, rho=0.5, rng=rng, component="audit")

    stats_by_value = {}
    for v in (0.0, 1.0):
        rels = [release(v) for _ in range(reps)]
        outs = np.array([float(np.ravel(r.value)[0]) for r in rels])
        scale, grid = rels[0].record.scale, rels[0].record.grid
        ints = outs / grid
        assert np.all(ints == np.rint(ints))  # on the grid, exactly
        stats_by_value[v] = {
            "member": np.array([_membership(o, scale) for o in outs]),
            "odd": (np.rint(ints).astype(np.int64) % 2) == 1,
            "mant0": (np.frexp(outs)[0] * 2**53).astype(np.int64) % 2 == 0,
        }
    for key in ("member", "odd", "mant0"):
        assert _fisher_p(stats_by_value[0.0][key], stats_by_value[1.0][key]) > ALPHA, key


def test_release__outputs_on_public_grid():
    rng = np.random.default_rng(3)
    budget = PrivacyBudget(0.7, 1e-6)
    rel = gaussian_release(np.linspace(0, 1, 7), sensitivity=0.01, budget=budget,
                           calibration="classical", rng=rng, component="scree")
    assert rel.record.grid == public_grid(0.01, 7, "l2")
    assert np.all(rel.value / rel.record.grid == np.rint(rel.value / rel.record.grid))
    mat = gaussian_zcdp_symmetric(np.eye(5) * 0.3, sensitivity=0.02, rho=0.1, rng=rng,
                                  component="measure").value
    vech = mat2vec(mat) / public_grid(0.02, 15, "l2")
    assert np.allclose(vech[:5], np.rint(vech[:5]), rtol=0, atol=0)
    lap = laplace_release(np.array([0.1, 0.2]), sensitivity=0.3, eps=1.0, rng=rng,
                          component="scree")
    assert np.all(lap.value / lap.record.grid == np.rint(lap.value / lap.record.grid))
    hist = gaussian_histogram(np.array([3, 0, 5]), budget=budget, calibration="classical",
                              rng=rng, component="score")
    assert np.all(hist.value == np.rint(hist.value)) and hist.record.grid == 1.0


def _neighbour_records(make) -> tuple:
    return make(0).record, make(1).record


def test_records__identical_for_neighbouring_inputs():
    budget = PrivacyBudget(1.0, 1e-4)
    cases = [
        lambda i: gaussian_release(np.array([0.1, 0.2 + i]), sensitivity=1.0, budget=budget,
                                   calibration="analytic", rng=np.random.default_rng(i),
                                   component="c"),
        lambda i: laplace_release(np.array([0.5 * i]), sensitivity=1.0, eps=1.0,
                                  rng=np.random.default_rng(i), component="c"),
        lambda i: gaussian_symmetric_matrix(np.eye(3) * i, sensitivity=1.0, budget=budget,
                                            calibration="classical",
                                            rng=np.random.default_rng(i), component="c"),
        lambda i: gaussian_zcdp(np.array([i, 0.0]), sensitivity=1.0, rho=0.3,
                                rng=np.random.default_rng(i), component="c"),
        lambda i: gaussian_histogram(np.array([5 - i, 0, i]), budget=budget,
                                     calibration="analytic", rng=np.random.default_rng(i),
                                     component="c"),
        # the cell count that is non-empty differs between the neighbours
        lambda i: stability_histogram(np.array([10 - i, 0, i, 0]), n=10, budget=budget,
                                      rng=np.random.default_rng(i), component="c"),
        # the smooth sensitivity (data-dependent) differs
        lambda i: smooth_laplace(1.0 + i, smooth_sensitivity=0.1 + i, budget=budget,
                                 rng=np.random.default_rng(i), component="c"),
    ]
    for make in cases:
        a, b = _neighbour_records(make)
        assert a == b, a.mechanism


def test_stability_histogram__draws_public_and_empty_cells_never_released():
    rel = stability_histogram(np.array([0, 0, 50, 0]), n=50, budget=PrivacyBudget(5.0, 1e-3),
                              rng=np.random.default_rng(0), component="score")
    assert rel.record.draws == 4
    assert rel.value[[0, 1, 3]].tolist() == [0.0, 0.0, 0.0]
    assert rel.value[2] * 50 == np.rint(rel.value[2] * 50)
    with pytest.raises(ValueError, match="integer counts"):
        stability_histogram(np.array([0.5, 0.5]), n=2, budget=PrivacyBudget(1.0, 1e-3),
                            rng=np.random.default_rng(0), component="score")


def test_smooth_laplace__records_no_data_dependent_value():
    rel = smooth_laplace(2.0, smooth_sensitivity=0.37, budget=PrivacyBudget(1.0, 1e-3),
                         rng=np.random.default_rng(0), component="score")
    assert rel.record.sensitivity is None and rel.record.scale is None
    assert rel.record.draws == 1 and "not recorded" in rel.record.note


@pytest.mark.parametrize("calibration", ["classical", "analytic"])
@pytest.mark.parametrize(("d", "eps"), [(1, 0.5), (20100, 1.0), (3, 20.0)])
def test_lattice_calibration__certified_and_close_to_continuous(calibration, d, eps):
    delta = 1e-5
    grid, inflated, sd, cert = lattice_gaussian_sd(1.0, d, eps, delta, calibration)
    assert cert.ok and cert.delta_total <= delta and cert.eps0 + 2 * cert.a + cert.log_s <= eps
    assert inflated == pytest.approx(1.0 + grid * math.sqrt(d), rel=1e-15)
    # the exact continuous curve at the certified eps0 holds (classical is raised if it fails)
    assert gaussian_delta(sd, inflated, cert.eps0) <= delta
    continuous = gaussian_sigma(1.0, eps, delta, calibration)
    if gaussian_delta(continuous, 1.0, eps) <= delta:
        assert sd / continuous - 1 < 1e-6
    assert not lattice_gaussian_certificate(sd / grid / 2, inflated / grid, d, eps, delta).ok


@pytest.mark.parametrize("calibration", ["classical", "analytic"])
@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
def test_histogram_calibration__exact_integer_curve(calibration, eps):
    budget = PrivacyBudget(eps, 1e-5)
    sd = histogram_noise_sigma(budget, calibration)
    assert histogram_gaussian_delta(sd**2, eps) <= 1e-5
    # brute force: δ = Σ over the two moved cells (others cancel), on ±15 sd: the mass left
    # out is below 2·Φ(−15) < 1e-50 per cell, far under the abs tolerance
    ks = np.arange(-int(15 * sd) - 5, int(15 * sd) + 6)
    p = np.exp(-ks.astype(float) ** 2 / (2 * sd**2))
    p /= p.sum()
    joint = np.outer(p, p)
    shifted = np.zeros_like(joint)
    shifted[:-1, 1:] = joint[1:, :-1]  # (y_A + 1, y_B − 1)
    brute = np.clip(joint - math.exp(eps) * shifted, 0, None).sum()
    assert brute == pytest.approx(histogram_gaussian_delta(sd**2, eps), rel=1e-6, abs=1e-15)


def test_above_threshold__record_does_not_follow_the_stopping_index():
    early = above_threshold(np.array([100.0, 100, 100, 100]), threshold=5.0, eps=1.0,
                            rng=np.random.default_rng(1), component="q")
    late = above_threshold(np.array([0.0, 0, 0, 100]), threshold=50.0, eps=1.0,
                           rng=np.random.default_rng(1), component="q")
    assert early.value[0] != late.value[0]
    assert early.record == late.record and early.record.draws == 5
