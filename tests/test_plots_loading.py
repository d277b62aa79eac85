"""Loading plots (SPEC_dppca.md §9.3): panels, arrows, labels, heatmap, reference, errors."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from matplotlib.image import AxesImage
from matplotlib.patches import Circle, FancyArrowPatch

from dppca_dask import dp_loading, privacy_control
from dppca_dask.errors import ParameterError
from dppca_dask.plots.loading import LoadingPlot, plot_loading

matplotlib.use("Agg")

PC = privacy_control(eps=2, delta=1e-3)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(200, 5)) * [3.0, 2.0, 1.0, 0.7, 0.4]


@pytest.fixture(scope="module")
def fit(data):
    return dp_loading(data, privacy=PC, rng=1, preset="seed")


@pytest.fixture(scope="module")
def fit_ref(data):
    return dp_loading(data, privacy=PC, rng=1, non_private=True, preset="seed")


def _arrows(ax):
    return [p for p in ax.patches if isinstance(p, FancyArrowPatch)]


def _texts(ax):
    return " ".join(t.get_text() for t in ax.texts)


def test_plot_loading__default_panels_and_artists(fit):
    out = fit.plot()
    assert isinstance(out, LoadingPlot) and out.loading is fit
    assert [out.axes[k].get_title() for k in ("vector", "point", "heatmap")] == [
        "Loading vectors", "Loading points", "Loading heatmap"]
    vec = out.axes["vector"]
    assert len(_arrows(vec)) == 5
    assert any(isinstance(p, Circle) and p.get_radius() == 1.0 for p in vec.patches)
    for name in ("X1", "X2", "X3", "X4", "X5"):
        assert name in _texts(vec) and name in _texts(out.axes["point"])
    # the axes name their components (and their angle bounds: tests/test_interval_figures.py)
    assert vec.get_xlabel().startswith("PC1") and vec.get_ylabel().startswith("PC2")
    # Arrow tips are the drawn data, which are the directions' first two columns.
    v = fit.directions.values
    np.testing.assert_allclose(out.data["vector"][["x", "y"]].to_numpy(), v[:, :2])
    tips = np.array([a._posA_posB[1] for a in _arrows(vec)])
    np.testing.assert_allclose(tips, v[:, :2])
    (image,) = [im for im in out.axes["heatmap"].get_images() if isinstance(im, AxesImage)]
    assert image.get_clim() == (-1.0, 1.0)
    np.testing.assert_allclose(image.get_array(), v[:, :3])
    assert len(out.axes["heatmap"].texts) == 15  # values printed in every cell
    assert "colorbar" in out.axes
    assert "heatmap_nonprivate" not in out.axes
    assert not out.figure.texts or "not a private" not in out.figure.texts[0].get_text()
    assert out.axes["vector"].get_legend() is None  # no reference, no legend


def test_plot_loading__reference_dashed_and_labelled(fit_ref):
    out = fit_ref.plot()
    vec = out.axes["vector"]
    arrows = _arrows(vec)
    assert len(arrows) == 10
    dashed = [a for a in arrows if a.get_linestyle() == "--"]
    assert len(dashed) == 5
    ref = fit_ref.nonprivate.values
    np.testing.assert_allclose([a._posA_posB[1] for a in dashed], ref[:, :2])
    labels = [t.get_text() for t in vec.get_legend().get_texts()]
    assert labels == ["Private", "Non-private (not private)"]
    assert out.axes["heatmap_nonprivate"].get_title().startswith("Non-private")
    assert "not private" in out.axes["heatmap_nonprivate"].get_title()
    np.testing.assert_allclose(out.data["heatmap_nonprivate"].to_numpy(), ref[:, :3])
    assert "not a private release" in out.figure.get_supxlabel()


def test_plot_loading__types_variables_components_and_axes(fit):
    out = plot_loading(fit, type="heatmap", heatmap_components=(2, 9), variables=["X3", "X1"])
    assert sorted(out.axes) == ["colorbar", "heatmap"]
    assert list(out.data["heatmap"].index) == ["X3", "X1"]
    assert list(out.data["heatmap"].columns) == ["PC2"]  # 9 > p is dropped
    out = fit.plot(type=["point", "vector"], variables=[2, 4], axes=(3, 1))
    assert list(out.axes) == ["vector", "point"]  # always in the canonical order
    assert list(out.data["point"].index) == ["X2", "X4"]
    assert out.axes["point"].get_xlabel().startswith("PC3")
    np.testing.assert_allclose(out.data["point"]["y"], fit.directions.values[[1, 3], 0])


def test_plot_loading__one_component_fit_draws_the_heatmap_only():
    one = dp_loading(np.random.default_rng(1).normal(size=(30, 1)), privacy=PC, rng=0)
    out = one.plot(type="heatmap")
    assert out.data["heatmap"].shape == (1, 1)
    with pytest.raises(ParameterError, match="'heatmap' only"):
        one.plot()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"type": "bars"}, "'type' parameter of plot"),
        ({"type": []}, "'type' parameter of plot"),
        ({"variables": ["X9"]}, "unknown"),
        ({"variables": [0]}, "'variables'"),
        ({"variables": [6]}, "'variables'"),
        ({"variables": []}, "'variables'"),
        ({"heatmap_components": (7, 8)}, "components among 1..5"),
        ({"heatmap_components": "PC1"}, "'heatmap_components'"),
        ({"axes": (1, 1)}, "'axes'"),
        ({"axes": (1, 6)}, "'axes'"),
    ],
)
def test_plot_loading__bad_arguments(fit, kwargs, match):
    with pytest.raises(ParameterError, match=match):
        plot_loading(fit, **kwargs)


def test_plot_loading__save_png(fit, tmp_path):
    path = fit.plot().save(str(tmp_path / "l.png"), dpi=40)
    assert (tmp_path / "l.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.endswith(".png")
