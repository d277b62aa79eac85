"""Angle bounds and eigenvalue intervals of the private directions: simulated coverage of the
noise-free Kendall eigenvectors, the spectral-norm bound's width, the flag, where they appear."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import binom

from dppca_dask import (
    clipped_control,
    dp_loading,
    dp_pca,
    privacy_control,
    spherical_kendall,
)
from dppca_dask.pca.postprocess import ordered_eigh
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import gaussian_symmetric_matrix
from dppca_dask.privacy.rng import as_rng
from dppca_dask.results.direction_intervals import (
    LEVEL,
    angle_bounds,
    direction_interval_variables,
    noise_norm_bound,
)

RUNS = 300


def _release(k: np.ndarray, seed: int, eps: float) -> tuple[np.ndarray, float]:
    rel = gaussian_symmetric_matrix(k, sensitivity=2 ** 0.5 * 2 / 4000,
                                    budget=PrivacyBudget(eps, 1e-5), calibration="analytic",
                                    rng=as_rng(seed, owner="test").generator,
                                    component="loading")
    return rel.value, float(rel.record.scale)


def _angles(v_hat: np.ndarray, v: np.ndarray) -> np.ndarray:
    cos = np.clip(np.abs(np.einsum("ij,ij->j", v_hat, v)), 0.0, 1.0)
    return np.degrees(np.arccos(cos))


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_direction_intervals__simultaneous_coverage_of_the_noise_free_directions(eps):
    """The exact mechanism on a fixed Kendall matrix with a spread spectrum (large gaps, a near
    tie): the guaranteed angle bounds and the eigenvalue intervals all cover at once in at
    least the level's binomial lower band (they are conservative: no upper band); the
    bootstrap bounds (an approximation) cover at once in the level's 0.1 % lower band, are
    tighter than the guaranteed ones and within 1.5x the oracle (the simulated angles' own
    Bonferroni quantiles); the eigenvalue intervals are narrower than Weyl's for the
    separated components."""
    g = np.random.default_rng(33)
    x = g.standard_t(3, size=(400, 6)) * [4.0, 2.0, 1.0, 0.7, 0.69, 0.2]
    k = spherical_kendall(x).values
    lam, v = ordered_eigh(k)
    covered = boot_covered = bounded = 0
    angles, bounds, guaranteed, half = [], [], [], []
    for seed in range(RUNS):
        m, sd = _release(k, seed, eps)
        lam_hat, v_hat = ordered_eigh(m)
        out = direction_interval_variables(lam_hat, sd, 6)
        angle = _angles(v_hat, v)
        ok = np.all(angle <= out["angle_upper_guaranteed"][1] + 1e-9)
        ok &= np.all((out["kendall_eigenvalue_lower"][1] <= lam)
                     & (lam <= out["kendall_eigenvalue_upper"][1]))
        covered += bool(ok)
        boot_covered += bool(np.all(angle <= out["angle_upper"][1] + 1e-9))
        bounded += int(np.sum(out["direction_identifiable"][1]))
        angles.append(angle)
        bounds.append(out["angle_upper"][1])
        guaranteed.append(out["angle_upper_guaranteed"][1])
        half.append((out["kendall_eigenvalue_upper"][1] - out["kendall_eigenvalue_lower"][1]) / 2)
    assert covered >= binom.ppf(1e-6, RUNS, LEVEL), covered
    assert boot_covered >= binom.ppf(1e-3, RUNS, LEVEL), boot_covered
    assert bounded > 0  # the design has identifiable directions at both budgets
    bounds_med, oracle = np.median(bounds, axis=0), np.quantile(angles, 1 - (1 - LEVEL) / 6,
                                                                 axis=0)
    identifiable = bounds_med < 45
    assert identifiable[0] and np.all(bounds_med[identifiable]
                                      <= 1.5 * oracle[identifiable]), (bounds_med, oracle)
    assert np.all(np.asarray(bounds) <= np.asarray(guaranteed) + 1e-9)
    weyl = noise_norm_bound(sd, 6, 1 - (1 - LEVEL) / 2)
    assert np.median(half, axis=0)[0] < 0.7 * weyl  # PC1 is separated: about z sd, not b


@pytest.mark.parametrize("p", [6, 30])
def test_noise_norm_bound__holds_and_is_not_needlessly_wide(p):
    """‖E‖₂ exceeds b in at most the level's share of draws (binomial 1e-6 band) and b is
    within 1.7x the simulated 95 % quantile of ‖E‖₂ (Gaussian concentration's slack)."""
    k = np.eye(p) / p
    norms, sd = [], 0.0
    for seed in range(200):
        m, sd = _release(k, seed, 1.0)
        norms.append(np.linalg.norm(m - k, 2))
    b = noise_norm_bound(sd, p)
    assert np.sum(np.asarray(norms) > b) <= binom.isf(1e-6, 200, 1 - LEVEL)
    assert b <= 1.7 * np.quantile(norms, LEVEL)


def test_angle_bounds__ties_and_single_component():
    angle, gap = angle_bounds([0.5, 0.5, 0.0], 0.01)
    assert angle[0] == angle[1] == 90.0 and angle[2] == pytest.approx(1.16, abs=0.01)
    assert gap[0] == 0.0
    assert angle_bounds([1.0], 5.0)[0].tolist() == [0.0]  # p = 1: the direction is +-1


def test_direction_intervals__in_the_dataset_summary_and_pca():
    x = np.random.default_rng(3).normal(size=(2000, 4)) * [5.0, 1.5, 1.0, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = dp_loading(x, privacy=privacy_control(eps=1.0, delta=1e-5), rng=1)
        pca = dp_pca(x, privacy=privacy_control(eps=1.0, delta=1e-5), k=2, rng=1,
                     scree_control=clipped_control(C_clip=9.0))
    ds = fit.dataset
    for name in ("angle_upper", "angle_upper_guaranteed", "direction_identifiable",
                 "kendall_eigenvalue_lower", "kendall_eigenvalue_upper"):
        assert ds[name].dims == ("component",) and ds[name].attrs["private"] == 1
        assert ds[name].attrs["long_name"]
    flags = ds["direction_identifiable"].values
    assert flags[0] == 1 and flags[2] == flags[3] == 0  # PC3/PC4 tie: not identifiable
    text = repr(fit.summary())
    assert "bounds on the angle to the noise-free direction" in text
    assert "PC3: no bound: not identifiable (indistinguishable from noise)" in text
    assert "(guaranteed <= " in text or "(no guaranteed bound)" in text
    assert ds["angle_upper"].attrs["method"].startswith("parametric bootstrap")
    assert np.all(ds["angle_upper"].values <= ds["angle_upper_guaranteed"].values)
    assert "angle_upper" in pca.loading.dataset
    whole = repr(pca.summary())  # dp_pca's summary states every part's intervals
    for line in ("95% intervals of the noise-free scree values",
                 "95% bounds on the angle to the noise-free direction",
                 "Frame search resolution", "95% intervals of the noise-free cell probabilities"):
        assert line in whole, line


def test_angle_bootstrap__depends_on_the_eigenvalues_only_and_is_reproducible():
    """The noise law is rotation invariant: the bound is a function of the released
    eigenvalues and sd (same for any basis), the same on every call (a fixed public stream),
    and above the dimension limit the guaranteed bound is used."""
    from dppca_dask.results.noise_bootstrap import MAX_DIMENSION, angle_bootstrap

    lam = np.array([0.5, 0.3, 0.15, 0.05])
    a = angle_bootstrap(lam, 0.01)
    assert np.array_equal(a, angle_bootstrap(lam, 0.01))
    assert np.all(np.diff(angle_bootstrap(lam, 0.01)[:2]) > 0)  # PC2 has the smaller gap
    assert np.all(angle_bootstrap(lam, 0.02) >= a)  # more noise, wider
    big = MAX_DIMENSION + 1
    eig = np.linspace(1.0, 0.0, big)
    out = direction_interval_variables(eig, 1e-4, big)
    assert np.array_equal(out["angle_upper"][1], out["angle_upper_guaranteed"][1])
    assert out["angle_upper"][2]["method"].startswith("Davis-Kahan")
