"""The scree/PVE plot of a dp_scree fit (SPEC §5.6)."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

from dppca_dask import (
    ParameterError,
    clipped_control,
    dp_scree,
    huber_control,
    privacy_control,
    scree_plot_control,
)
from dppca_dask.plots.scree import scree_ylim

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def fits():
    x = np.random.default_rng(2).normal(size=(300, 4)) * [3.0, 2.0, 1.0, 0.5]
    kw = {"privacy": privacy_control(eps=4, delta=1e-5), "k": 3, "rng": 1,
          "method": ["clipped", "huber"],
          "control": {"clipped": clipped_control(40),
                      "huber": huber_control(k_min_m2=-8, k_max_m2=10, m2_frac=0.25)}}
    return dp_scree(x, **kw), dp_scree(x, non_private=True, **kw)


def _lines(fig):
    (ax,) = fig.axes
    return ax, {line.get_label(): line for line in ax.get_lines()}


def test_plot__pve_series_styles_and_limits(fits):
    fit, _ = fits
    fig = fit.plot()
    ax, lines = _lines(fig)
    assert list(lines) == ["Clipped", "Huber"]
    assert lines["Clipped"].get_color() == "red" and lines["Clipped"].get_marker() == "^"
    assert lines["Huber"].get_color() == "blue" and lines["Huber"].get_marker() == "D"
    np.testing.assert_allclose(lines["Clipped"].get_ydata(), fit.pve.values[0])
    assert list(lines["Huber"].get_xdata()) == [1, 2, 3]
    assert ax.get_title() == "DP PVE Plot" and ax.get_xlabel() == "Component"
    # the PVE is a share of the k released components' variance, and the axis says so
    assert ax.get_ylabel() == f"Share of the variance of the\nk = {fit.k} released components"
    assert ax.get_xticks().tolist() == [1, 2, 3]
    # the limits hold the values and their intervals (huber has none: NaN, left out)
    shown = np.concatenate([fit.pve.values.ravel(), fit.dataset["pve_lower"].values.ravel(),
                            fit.dataset["pve_upper"].values.ravel()])
    assert ax.get_ylim() == pytest.approx(scree_ylim(shown, pve=True))
    assert ax.get_legend().get_frame_on() is False
    # the caption line (n, eps, delta, k); no non-private curve: nothing to flag
    assert fig.texts == [fig._supxlabel]
    assert fig.get_supxlabel() == f"n = 300 · ε = 4 · δ = 1e-05 · k = {fit.k} released components"
    fig.draw_without_rendering()  # the footer sits below the x-axis label, not over it
    renderer = fig._get_renderer()
    assert fig._supxlabel.get_window_extent(renderer).y1 <= ax.xaxis.label.get_window_extent(
        renderer).y0


def test_plot__scree_with_nonprivate_reference_flagged(fits, tmp_path):
    _, fit = fits
    fig = fit.plot(type="scree", control={"colors": {"huber": "purple"}, "title": "Mine"})
    ax, lines = _lines(fig)
    assert list(lines) == ["Non-private (not private)", "Clipped", "Huber"]
    assert lines["Non-private (not private)"].get_color() == "black"
    assert lines["Huber"].get_color() == "purple"
    np.testing.assert_allclose(lines["Non-private (not private)"].get_ydata(),
                               fit.nonprivate["scree"].values)
    assert ax.get_title() == "Mine" and ax.get_ylabel() == "Scree value"
    assert "not a private release" in fig.get_supxlabel()
    for fmt in ("png", "svg"):
        fig.savefig(tmp_path / f"s.{fmt}")
        assert (tmp_path / f"s.{fmt}").stat().st_size > 1000


def test_scree_ylim__rules():
    assert scree_ylim(np.array([0.2, 0.7]), pve=True) == pytest.approx((0.18, 0.72))
    assert scree_ylim(np.array([0.01, 0.5]), pve=True)[0] == 0.0
    assert scree_ylim(np.array([-1.0, 1.0]), pve=False) == pytest.approx((-1.08, 1.08))
    assert scree_ylim(np.array([0.0, 0.0]), pve=False) == (-0.5, 0.5)
    assert scree_ylim(np.array([np.nan]), pve=True) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"colour": {}}, r"'colour' is not an option of scree_plot_control"),
        ({"colors": {"clipped": "notacolour"}}, r"'colors' parameter of scree_plot_control must "
                                                r"be a dict of valid matplotlib colours"),
        ({"labels": {"kendall": "K"}}, r"'labels' parameter .* keyed by 'nonprivate'"),
        ({"lwd": 0}, r"'lwd' parameter of scree_plot_control must be a float in the range"),
        ({"title": 3}, r"'title' parameter of scree_plot_control must be a single str"),
    ],
)
def test_scree_plot_control__errors(options, match):
    with pytest.raises(ParameterError, match=match):
        scree_plot_control(**options)


def test_plot__bad_type(fits):
    with pytest.raises(ParameterError, match=r"'type' parameter of plot must be a str among"):
        fits[0].plot(type="bar")
