"""The score frame's search resolution: the grid cells the released centre and radius stand for
hold the searched statistics when the searches are (nearly) exact, for every grid frame; where
they appear (dataset, summary, the rebuilt Frame)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dppca_dask import dp_score, privacy_control
from dppca_dask.pca.frame import CAPPED_QUANTILE, RADIUS_QUANTILE, signed_cell, upper_cell
from dppca_dask.pca.frame_ranged import RADIUS_FACTOR, RANGED_QUANTILE
from dppca_dask.privacy.quantiles import upper_grid
from dppca_dask.results.frame import RESOLUTION_VARIABLES, Frame, frame_resolution

QUANTILE = {"ranged": RANGED_QUANTILE, "durfee": RADIUS_QUANTILE, "capped": CAPPED_QUANTILE}


def _fit(frame: str, eps: float, seed: int = 1):
    g = np.random.default_rng(41)
    x = g.standard_t(5, size=(3000, 3)) * [3.0, 1.0, 0.2] + [7.0, -2.0, 0.0]
    v = np.eye(3)[:, :2]  # public directions: the scores are x[:, :2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixed-unit grids' resolution warnings
        fit = dp_score(x, privacy=privacy_control(eps=eps, delta=1e-5), V_dp=v, frame=frame,
                       rng=seed)
    return fit, x[:, :2]


@pytest.mark.parametrize("frame", ["ranged", "durfee", "capped"])
def test_frame_cells__hold_the_searched_statistics_when_the_searches_are_exact(frame):
    """At a huge budget each search stops where its noise-free version does, so the centre
    cell's count range covers n/2 and the radius cell's (ranged: divided by the factor) covers
    the targeted quantile's rank. A cell one grid step off fails on one of the four ends."""
    fit, s = _fit(frame, 2e4)
    ds = fit.dataset
    n = s.shape[0]
    factor = RADIUS_FACTOR if frame == "ranged" else 1.0
    for a in range(2):
        c_lo, c_hi = ds["frame_center_cell_lower"].values[a], ds["frame_center_cell_upper"].values[a]
        assert c_lo <= fit.frame.center[a] <= c_hi
        assert np.sum(s[:, a] < c_lo) <= n / 2 <= np.sum(s[:, a] < c_hi), (a, c_lo, c_hi)
        dist = np.abs(s[:, a] - fit.frame.center[a])
        r_lo, r_hi = ds["frame_radius_cell_lower"].values[a], ds["frame_radius_cell_upper"].values[a]
        assert r_lo < fit.frame.radius[a] <= r_hi
        target = QUANTILE[frame] * n
        assert np.sum(dist < r_lo / factor) <= target <= np.sum(dist < r_hi / factor), (a, r_lo,
                                                                                        r_hi)
        resolution = ds["frame_resolution"].values[a]
        assert resolution == pytest.approx(frame_resolution(fit.frame, a))
        assert 0 < resolution < 0.1 * fit.frame.radius[a]  # a fine grid: 1 to 5 % of R


def test_frame_cells__in_the_dataset_summary_and_the_rebuilt_frame():
    fit, _ = _fit("ranged", 2.0)
    ds = fit.dataset
    for name in RESOLUTION_VARIABLES:
        assert ds[name].dims == ("axis",) and ds[name].attrs["private"] == 1
        assert ds[name].attrs["long_name"] and ds[name].attrs["dppca_scale"] == "input units"
    frame = fit.frame  # rebuilt from the stored variables
    assert frame.center_cell is not None and frame.radius_cell is not None
    assert frame.radius_cell[0][1] == pytest.approx(frame.radius[0])
    text = repr(fit.summary())
    assert "Frame search resolution (the public grid cells" in text
    assert "  PC1: centre cell [" in text and "limits resolved to +- " in text
    smooth, _ = _fit("smooth", 2.0)
    assert np.isnan(smooth.dataset["frame_resolution"].values).all()
    assert smooth.frame.center_cell is None
    assert "Frame resolution: no search grid" in repr(smooth.summary())


def test_cells__grid_ends_and_open_sides():
    grid = upper_grid(1.01, 10)
    assert upper_cell(grid, float(grid[0]), False) == (0.0, float(grid[0]))
    assert upper_cell(grid, float(grid[4]), False) == (float(grid[3]), float(grid[4]))
    assert upper_cell(grid, float(grid[-1]), True) == (float(grid[-2]), math.inf)
    lo, hi = signed_cell(-(1.01 ** 3 - 1), False)
    assert lo == -(1.01 ** 3 - 1) and hi == pytest.approx(-(1.01 ** 2 - 1))
    assert signed_cell(1.01 ** 3 - 1, False)[0] == pytest.approx(1.01 ** 2 - 1)
    assert signed_cell(3.0, True) == (-math.inf, math.inf)
    frame = Frame("durfee", (0.0, 0.0), (1.0, 1.0), center_cell=((-math.inf, 0.1), (0, 0)),
                  radius_cell=((0.9, 1.0), (0.9, 1.0)))
    assert frame_resolution(frame, 0) == math.inf
    assert math.isnan(frame_resolution(Frame("smooth", (0.0, 0.0), (1.0, 1.0)), 0))
