"""The intervals where users look, in the figures (issue 33 item 2): error bars and hollow
markers on the scree/PVE plot, greyed and hatched directions that are not identifiable, hatched
histogram cells and covariance entries that are indistinguishable from 0."""

from __future__ import annotations

import warnings

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.patches import PathPatch

from dppca_dask import (
    clipped_control,
    dp_covariance,
    dp_loading,
    dp_pca,
    dp_score,
    dp_scree,
    privacy_control,
)
from dppca_dask.plots._style import HATCH, NOT_IDENTIFIABLE

matplotlib.use("Agg")

X = np.random.default_rng(4).normal(size=(600, 5)) * [4.0, 2.0, 1.0, 0.6, 0.3]


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _hatches(ax):
    return [p for p in ax.patches if isinstance(p, PathPatch) and p.get_hatch() == HATCH]


@pytest.fixture(scope="module")
def scree():
    return _quiet(dp_scree, X, privacy=privacy_control(eps=2, delta=1e-5), k=4,
                  control=clipped_control(C_clip=60.0), rng=3)


@pytest.mark.parametrize("kind", ["pve", "scree"])
def test_scree_plot__bars_are_the_intervals_and_noise_is_hollow(scree, kind):
    ds = scree.dataset
    fig = scree.plot(type=kind)
    (ax,) = fig.axes
    (bars,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    lower = ds[f"{kind}_lower"].sel(mechanism="clipped").values
    upper = ds[f"{kind}_upper"].sel(mechanism="clipped").values
    k = scree.k
    stems = bars.get_segments()[:k]
    np.testing.assert_allclose([s[:, 1] for s in stems], np.stack([lower, upper], axis=1))
    np.testing.assert_allclose([s[0, 0] for s in stems], np.arange(1, k + 1))
    lo, hi = ax.get_ylim()
    assert lo <= lower.min() and hi >= upper.max()  # every bar inside the panel
    noise = ds["scree_lower"].sel(mechanism="clipped").values <= 0
    hollow = [c for c in ax.collections if isinstance(c, PathCollection)]
    if noise.any():
        (points,) = hollow
        np.testing.assert_allclose(points.get_offsets()[:, 0], np.arange(1, k + 1)[noise])
        assert tuple(points.get_facecolor()[0]) == (1.0, 1.0, 1.0, 1.0)
    else:
        assert not hollow
    legend = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "95% interval of the noise-free value" in legend and "not sampling" in legend
    assert ("indistinguishable from noise" in legend) == bool(noise.any())


def test_scree_plot__a_store_without_intervals_draws_no_bars(scree):
    class Old:  # a result of an earlier version: no interval variables
        def __init__(self, fit):
            self.dataset = fit.dataset.drop_vars(["scree_lower", "scree_upper", "pve_lower",
                                                  "pve_upper"])
            self.nonprivate, self.pve, self.scree = fit.nonprivate, fit.pve, fit.scree
            self.methods, self.k, self.metadata = fit.methods, fit.k, fit.metadata

    from dppca_dask.plots.scree import plot_scree

    (ax,) = plot_scree(Old(scree)).axes
    assert not ax.collections
    assert len(ax.get_legend().get_texts()) == 1


def test_loading_plot__directions_that_are_not_identifiable_are_grey_and_hatched():
    fit = dp_loading(X, privacy=privacy_control(eps=1, delta=1e-5), rng=1)
    ident = fit.dataset["direction_identifiable"].values.astype(bool)
    angle = fit.dataset["angle_upper"].values
    assert ident[0] and not ident[-1]  # this design has both kinds
    out = fit.plot(axes=(1, 5), heatmap_components=(1, 2, 5))
    vec = out.axes["vector"]
    assert vec.get_xlabel() == f"PC1 (angle ≤ {angle[0]:.2g}°)"
    assert vec.get_ylabel().startswith("PC5: not identifiable")
    assert vec.yaxis.label.get_color() == NOT_IDENTIFIABLE
    assert vec.xaxis.label.get_color() != NOT_IDENTIFIABLE
    heat = out.axes["heatmap"]
    ticks = heat.get_xticklabels()
    assert [t.get_text().split("\n")[0] for t in ticks] == ["PC1", "PC2", "PC5"]
    assert [t.get_color() == NOT_IDENTIFIABLE for t in ticks] == [not ident[0], not ident[1],
                                                                    True]
    (hatch,) = _hatches(heat)
    cells = hatch.get_path().vertices.reshape(-1, 5, 2)  # 4 corners and the closing vertex
    columns = {round(float(x)) for x in cells[:, :4, 0].mean(axis=1)}
    assert columns == {j for j, ok in enumerate([ident[0], ident[1], False]) if not ok}
    assert len(cells) == 5 * len(columns)  # every variable's cell of those columns
    assert "PC5 not identifiable at this budget" in out.figure.get_supxlabel()


def test_pca_plot__score_axes_along_a_noise_direction_say_so():
    fit = _quiet(dp_pca, X, privacy=privacy_control(eps=1, delta=1e-5), k=3, bins=6,
                 scree_control=clipped_control(C_clip=60.0), axes=(1, 5), rng=2)
    ident = fit.loading.dataset["direction_identifiable"].values.astype(bool)
    assert not ident[4]
    out = fit.plot("all", rng=1)
    for panel in ("score", "biplot"):
        ax = next(iter(out.axes[panel].values()))
        assert ax.get_ylabel() == "PC5 (not identifiable)"
        assert ax.yaxis.label.get_color() == NOT_IDENTIFIABLE
    assert out.axes["loading"].get_ylabel().startswith("PC5: not identifiable")
    assert "PC5 not identifiable" in out.figure.get_supxlabel()


def test_score_plot__shaded_cells_indistinguishable_from_empty_are_hatched():
    fit = dp_score(X, privacy=privacy_control(eps=1, delta=1e-5), bins=8,
                   method=["geometric", "add"], rng=3)
    out = fit.plot(private_plot="histogram")
    for method in fit.methods:
        ax = out.axes[method]
        lower = fit.dataset["count_lower"].sel(mechanism=method).values
        prob = fit.probability.sel(mechanism=method).values
        expected = int(np.count_nonzero((lower <= 0) & (prob > 0)))
        hatches = _hatches(ax)
        cells = len(hatches[0].get_path().vertices) // 5 if hatches else 0  # 4 corners + close
        assert cells == expected
    legend = " ".join(t.get_text() for t in out.axes["colorbar"].get_legend().get_texts())
    assert "indistinguishable" in legend and "not sampling" in legend


def test_covariance_plot__entries_whose_interval_contains_zero_are_hatched():
    data = np.random.default_rng(1).uniform(-1, 1, size=(800, 4))
    data[:, 1] += data[:, 0]
    fit = _quiet(dp_covariance, data, preset="seed", eps=4, delta=1e-5, bounds=2.0, rng=1)
    out = fit.plot()
    lower, upper = fit.dataset["covariance_lower"].values, fit.dataset["covariance_upper"].values
    zero = (lower <= 0) & (upper >= 0)
    assert zero.any() and not zero.all()
    (hatch,) = _hatches(out.axes["covariance"])
    assert len(hatch.get_path().vertices) // 5 == int(zero.sum())
    assert "interval contains 0" in out.figure.get_supxlabel()
    assert not _hatches(out.axes["correlation"])
