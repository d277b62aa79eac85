"""The scree and PVE intervals: simulated coverage of the noise-free statistic, and where they
appear (dataset, summary, sklearn)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import binom

from dppca_dask import clipped_control, dp_scree, pmwm_control, privacy_control
from dppca_dask.results.scree_utility import (
    CLAMPED_SHARE,
    INTERVAL_LEVEL,
    ratio_interval,
    scree_intervals,
)

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
    covered = pve_covered = cum_covered = 0
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
            cum_covered += 1
            continue
        pve, cum = t / t.sum(), np.cumsum(t) / t.sum()
        pve_covered += bool(np.all((ds["pve_lower"].values <= pve + 1e-12)
                                   & (pve - 1e-12 <= ds["pve_upper"].values)))
        cum_covered += bool(np.all((ds["cumulative_pve_lower"].values <= cum + 1e-12)
                                   & (cum - 1e-12 <= ds["cumulative_pve_upper"].values)))
    low, high = _bounds(4)
    assert low <= covered <= high, (covered, low, high)  # too narrow or needlessly wide fails
    assert pve_covered >= low and cum_covered >= low, (pve_covered, cum_covered, low)


def test_scree_intervals__clamped_draws_and_huber():
    meta = {"n": 100, "calibration": "analytic", "scree": {
        "k": 2, "methods": ["clipped", "huber"],
        "allocations": {"per_component": {"eps": 1.0, "delta": 1e-5}},
        "controls": {"clipped": {"C_clip": 1.0}, "huber": {}}, "releases": {}}}
    lower, upper, pve_lower, pve_upper, cum_lower, cum_upper = scree_intervals(
        meta, [[0.0, 0.5], [1.0, 1.0]])
    assert lower[0, 0] == 0.0 and upper[0, 0] > 0.0  # a draw clamped at 0: [0, z sigma]
    assert np.isnan(lower[1]).all() and np.isnan(pve_upper[1]).all()
    assert np.isnan(cum_upper[1]).all()
    assert 0.0 <= pve_lower[0, 1] <= pve_upper[0, 1] <= 1.0
    assert cum_lower[0, 1] == cum_upper[0, 1] == 1.0  # the last cumulative PVE is 1
    assert cum_lower[0, 0] == pve_lower[0, 0] or cum_lower[0, 0] < 1.0


def test_ratio_interval__exact_marginal_coverage_and_narrower_than_the_box():
    """Unclamped Gaussian draws: each Fieller interval covers its ratio with probability
    exactly 1 - 2 Phi(-z) (a binomial 0.1 % band either side: too wide or too narrow fails),
    for a single value and a cumulative set; and it is narrower than the box built from the
    Bonferroni scree intervals, which lets every other value sit at its worst end."""
    from scipy.stats import norm

    g = np.random.default_rng(20261205)
    t, sd, runs, z = np.array([4.0, 2.0, 1.0, 0.5]), np.array([0.3, 0.3, 0.2, 0.2]), 3000, 2.0
    hits = np.zeros(3, dtype=int)
    wider = 0
    targets = (t[1] / t.sum(), t[:2].sum() / t.sum(), t[:3].sum() / t.sum())
    sets = (np.arange(4) == 1, np.arange(4) <= 1, np.arange(4) <= 2)
    for _ in range(runs):
        y = t + g.normal(size=4) * sd
        for i, (target, inside) in enumerate(zip(targets, sets, strict=True)):
            lo, hi = ratio_interval(y, y, sd, inside, z)
            hits[i] += lo <= target <= hi
        lo, hi = ratio_interval(y, y, sd, sets[0], z)
        box_lo, box_hi = y - z * sd, y + z * sd
        box = (box_hi[1] / (box_hi[1] + box_lo.sum() - box_lo[1])
               - box_lo[1] / (box_lo[1] + box_hi.sum() - box_hi[1]))
        wider += (hi - lo) >= box
    p = 1 - 2 * norm.sf(z)
    assert np.all(hits >= binom.ppf(0.001, runs, p)), hits
    assert np.all(hits <= binom.isf(0.001, runs, p)), hits
    assert wider == 0


def test_ratio_interval__clamped_draws_open_one_side():
    # PC2 released as 0: Y_2 in [-z_c sd, 0]; the PVE of PC1 may then be as large as with Y_2
    # at its lowest, never 1 unless the data say so
    sd = np.array([0.1, 0.1, 0.1])
    y = np.array([3.0, 0.0, 1.0])
    low = np.array([3.0, -3.0 * 0.1, 1.0])
    lo, hi = ratio_interval(low, y, sd, np.arange(3) == 0, 2.5)
    lo_known, hi_known = ratio_interval(y, y, sd, np.arange(3) == 0, 2.5)
    assert lo <= lo_known < hi_known <= hi < 1.0
    assert 0.0 < CLAMPED_SHARE < 0.5


def test_scree_intervals__in_the_summary_and_the_estimator():
    from dppca_dask.sklearn import DPPCA

    x, _ = _data()
    fit = dp_scree(x, privacy=privacy_control(eps=1.0, delta=1e-5),
                   control=clipped_control(C_clip=C_CLIP), rng=1)
    text = repr(fit.summary())
    assert "95% intervals of the noise-free scree values (simultaneous" in text
    assert "95% intervals of the noise-free cumulative PVE (simultaneous" in text
    assert "Sampling sd of each scree value if the scores were Gaussian" in text
    ds = fit.dataset
    assert ds["cumulative_pve"].values[0, -1] == pytest.approx(1.0)
    assert np.allclose(ds["cumulative_pve"].values, np.cumsum(ds["pve"].values, axis=1))
    assert np.all(ds["cumulative_pve_lower"].values <= ds["cumulative_pve_upper"].values)
    assert ds["scree_sampling_sd"].attrs["assumption"] == "Gaussian scores"
    assert np.allclose(ds["scree_sampling_sd"].values,
                       ds["scree"].values * np.sqrt(2 / (N - 1)))
    lo = fit.dataset["scree_lower"].values[0]
    assert f"[{lo[0]:.3g}".rstrip("0").rstrip(".") in text.replace("[0,", "[0,")
    assert fit.dataset["scree_lower"].attrs["interval_level"] == INTERVAL_LEVEL
    est = DPPCA(2, eps=1.0, delta=1e-5, scree_control=clipped_control(C_clip=C_CLIP),
                random_state=1).fit(x)
    interval = est.explained_variance_interval_
    assert interval.shape == (2, 2)
    assert np.all(interval[0] <= interval[1])
