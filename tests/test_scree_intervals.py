"""The scree and PVE intervals: simulated coverage of the noise-free statistic, and where they
appear (dataset, summary, sklearn)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import binom

from dppca_dask import clipped_control, dp_scree, pmwm_control, privacy_control
from dppca_dask.results.scree_utility import INTERVAL_LEVEL, scree_intervals

N, RUNS, C_CLIP = 400, 300, 4.0


def _data() -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(20261204)
    x = g.standard_t(4, size=(N, 4)) * [2.0, 1.2, 0.6, 0.05]  # the last target is near 0
    basis = np.linalg.qr(g.normal(size=(4, 4)))[0]
    return x @ basis.T, basis  # the directions are public here (a supplied matrix)


def _clipped_targets(x, v, center):
    w = np.minimum((x @ v - center) ** 2, C_CLIP)
    return N / (N - 1.0) * w.mean(axis=0)


def _pmwm_targets(x, v, center, release):
    lo, hi = np.asarray(release["lower"]), np.asarray(release["upper"])
    w = np.clip((x @ v - center) ** 2, lo, hi)[N // 2:]  # the mean set of split mode
    return N / (N - 1.0) * w.mean(axis=0)


def _bounds(k: int) -> tuple[float, float]:
    """Acceptance region for the count of runs whose k intervals all cover: Bonferroni gives
    at least the level; independent draws give (1 − α/k)^k; a binomial 0.1 % tail either side."""
    low = binom.ppf(0.001, RUNS, INTERVAL_LEVEL)
    high = binom.isf(0.001, RUNS, (1 - (1 - INTERVAL_LEVEL) / k) ** k)
    return low, high


@pytest.mark.slow
@pytest.mark.parametrize("method", ["clipped", "pmwm"])
def test_scree_intervals__simultaneous_coverage_of_the_noise_free_values(method):
    x, v = _data()
    control = (clipped_control(C_clip=C_CLIP) if method == "clipped" else
               pmwm_control(a=0.0, b=20.0, trim_const=5.0, eta=0.01))
    covered = pve_covered = 0
    for seed in range(RUNS):
        with warnings.catch_warnings():  # a cut-off search at its step cap: utility, not tested
            warnings.filterwarnings("ignore", message="Durfee signed quantile search reached")
            fit = dp_scree(x, privacy=privacy_control(eps=2.0, delta=1e-5), method=method,
                           control=control, V_dp=v, rng=seed)
        ds = fit.dataset.isel(mechanism=0)
        center = ds["center"].values
        if method == "clipped":
            t = _clipped_targets(x, v, center)
        else:
            t = _pmwm_targets(x, v, center, fit.metadata["scree"]["releases"]["pmwm"])
        # the release with its noise set to 0: max(statistic - centre-noise correction, 0)
        t = np.maximum(t - fit.metadata["scree"]["center_noise_correction"], 0.0)
        covered += bool(np.all((ds["scree_lower"].values <= t) & (t <= ds["scree_upper"].values)))
        if t.sum() == 0:  # every statistic 0: the PVE is undefined, any [0, 1] interval holds
            pve_covered += 1
            continue
        pve = t / t.sum()
        pve_covered += bool(np.all((ds["pve_lower"].values <= pve + 1e-15)
                                   & (pve - 1e-15 <= ds["pve_upper"].values)))
    low, high = _bounds(4)
    assert low <= covered <= high, (covered, low, high)  # too narrow or needlessly wide fails
    assert pve_covered >= covered  # implied by the scree event


def test_scree_intervals__clamped_draws_and_huber():
    meta = {"n": 100, "calibration": "analytic", "scree": {
        "k": 2, "methods": ["clipped", "huber"],
        "allocations": {"per_component": {"eps": 1.0, "delta": 1e-5}},
        "controls": {"clipped": {"C_clip": 1.0}, "huber": {}}, "releases": {}}}
    lower, upper, pve_lower, pve_upper = scree_intervals(meta, [[0.0, 0.5], [1.0, 1.0]])
    assert lower[0, 0] == 0.0 and upper[0, 0] > 0.0  # a draw clamped at 0: [0, z sigma]
    assert np.isnan(lower[1]).all() and np.isnan(pve_upper[1]).all()
    assert 0.0 <= pve_lower[0, 1] <= pve_upper[0, 1] <= 1.0


def test_scree_intervals__in_the_summary_and_the_estimator():
    from dppca_dask.sklearn import DPPCA

    x, _ = _data()
    fit = dp_scree(x, privacy=privacy_control(eps=1.0, delta=1e-5),
                   control=clipped_control(C_clip=C_CLIP), rng=1)
    text = repr(fit.summary())
    assert "95% intervals of the noise-free scree values (simultaneous" in text
    lo = fit.dataset["scree_lower"].values[0]
    assert f"[{lo[0]:.3g}".rstrip("0").rstrip(".") in text.replace("[0,", "[0,")
    assert fit.dataset["scree_lower"].attrs["interval_level"] == INTERVAL_LEVEL
    est = DPPCA(2, eps=1.0, delta=1e-5, scree_control=clipped_control(C_clip=C_CLIP),
                random_state=1).fit(x)
    interval = est.explained_variance_interval_
    assert interval.shape == (2, 2)
    assert np.all(interval[0] <= interval[1])
