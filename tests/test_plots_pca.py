"""dp_pca plots (SPEC_dppca.md §9.2): score and biplot panels, arrows, labels, groups, references."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.patches import FancyArrowPatch

from dppca_dask import clipped_control, dp_pca, privacy_control, sampling_control
from dppca_dask.errors import ParameterError
from dppca_dask.plots.pca import PCAPlot, biplot_arrows, plot_pca

matplotlib.use("Agg")

PC = privacy_control(eps=9, delta=1e-4)
CONTROL = clipped_control(C_clip=60)


@pytest.fixture(scope="module")
def clustered():
    rng = np.random.default_rng(0)
    centres = [(-6, 0, 0, 0), (6, 0, 0, 0), (0, 5, 0, 0)]
    x = np.vstack([rng.normal(size=(200, 4)) * [1.0, 1.0, 0.5, 0.3] + c for c in centres])
    return x, np.repeat(["left", "right", "top"], 200)


@pytest.fixture(scope="module")
def plain(clustered):
    return dp_pca(clustered[0], privacy=PC, k=3, bins=6, scree_control=CONTROL, rng=1,
                  preset="seed")


@pytest.fixture(scope="module")
def grouped_ref(clustered):
    x, groups = clustered
    return dp_pca(x, privacy=PC, k=3, bins=6, scree_control=CONTROL, group=groups,
                  score_method=["add", "sparse"], non_private=True, rng=2)


def _arrows(ax):
    return [p for p in ax.patches if isinstance(p, FancyArrowPatch)]


def _texts(ax):
    return " ".join(t.get_text() for t in ax.texts)


def test_plot_pca__ungrouped_score_and_biplot(plain):
    out = plain.plot(rng=3)
    assert isinstance(out, PCAPlot) and out.fit is plain
    score, biplot = out.axes["score"]["add"], out.axes["biplot"]["add"]
    assert _t(score) == "Uniform sample of the Gaussian histogram"
    assert _t(biplot) == "Biplot: uniform sample of the Gaussian histogram"
    assert len(out.samples["add"]) == 600
    frame = plain.score.frame
    for ax in (score, biplot):  # the private frame, exactly
        assert ax.get_xlim() == pytest.approx(frame.xlim)
        assert ax.get_ylim() == pytest.approx(frame.ylim)
        points = [c for c in ax.collections if isinstance(c, PathCollection)]
        assert sum(len(c.get_offsets()) for c in points) == 600
    arrows = _arrows(biplot)
    assert len(arrows) == 4 and not _arrows(score)
    for name in ("X1", "X2", "X3", "X4"):
        assert name in _texts(biplot)
    # Arrows start at the frame centre; the longest spans 0.8 * min(R_x, R_y).
    df = out.arrows["add"]
    assert (df["x0"] == frame.center[0]).all() and (df["y0"] == frame.center[1]).all()
    lengths = np.hypot(df["x1"] - df["x0"], df["y1"] - df["y0"])
    assert lengths.max() == pytest.approx(0.8 * min(frame.radius))
    v = plain.directions.values[:, :2]
    np.testing.assert_allclose(np.arctan2(df["y1"] - df["y0"], df["x1"] - df["x0"]),
                               np.arctan2(v[:, 1], v[:, 0]))
    assert out.group_colors is None and out.figure.legends == []
    footer = out.figure.get_supxlabel()  # the caption line only: nothing non-private shown
    assert "not a private release" not in footer and "n = " in footer and "k = " in footer


def test_plot_pca__grouped_with_references(grouped_ref):
    out = grouped_ref.plot(rng=4)
    targets = ("nonprivate", "add", "sparse")
    assert list(out.axes["score"]) == list(targets) == list(out.axes["biplot"])
    titles = [_t(out.axes["score"][t]) for t in targets]
    assert titles == ["Non-private scores (not private)",
                      "Uniform sample of the Gaussian histogram",
                      "Uniform sample of the sparse (stability) histogram"]
    assert _t(out.axes["biplot"]["nonprivate"]) == "Biplot: non-private scores (not private)"
    # sample_size None: the non-private panels show the observed scores.
    observed = grouped_ref.score.observed_scores
    np.testing.assert_array_equal(out.samples["nonprivate"][["pc_x", "pc_y"]], observed[["pc_x",
                                                                                         "pc_y"]])
    # The non-private biplot uses the non-private directions.
    ref = grouped_ref.loading.nonprivate.values[:, :2]
    df = out.arrows["nonprivate"]
    np.testing.assert_allclose(np.arctan2(df["y1"] - df["y0"], df["x1"] - df["x0"]),
                               np.arctan2(ref[:, 1], ref[:, 0]))
    # Group colours: one scatter per group in each panel, and the legend.
    assert set(out.group_colors) == {"left", "right", "top"}
    ax = out.axes["score"]["add"]
    colours = {tuple(np.round(c.get_facecolor()[0][:3], 4)) for c in ax.collections}
    assert len(colours) == 3
    (legend,) = out.figure.legends
    assert [t.get_text() for t in legend.get_texts()] == ["left", "right", "top"]
    assert "not a private release" in out.figure.get_supxlabel()


def test_plot_pca__explicit_size_samples_the_reference_histogram(grouped_ref):
    out = grouped_ref.plot(sampling=sampling_control("center", sample_size=90), rng=5)
    assert _t(out.axes["score"]["nonprivate"]) == (
        "Center sample of the non-private histogram (not private)")
    assert {t: len(s) for t, s in out.samples.items()} == {"nonprivate": 90, "add": 90,
                                                           "sparse": 90}
    assert list(out.samples["add"]["group"].value_counts().sort_index()) == [30, 30, 30]


def test_plot_pca__combined_figure_of_a_run(grouped_ref):
    out = plot_pca(grouped_ref, panels="all", rng=6)
    assert out.axes["scree"].get_title() == "DP PVE Plot"
    assert out.axes["loading"].get_title() == "Loading vectors"
    assert len(_arrows(out.axes["loading"])) == 8  # private and dashed reference
    again = plot_pca(grouped_ref, panels=["biplot"], samples=out.samples)
    assert list(again.axes) == ["biplot"] and again.samples["add"] is out.samples["add"]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"sampling": sampling_control(["center", "uniform"])}, "exactly one method"),
    ({"panels": "heatmap"}, "'panels'"),
    ({"panels": []}, "'panels'"),
    ({"control": 3}, "'control'"),
    ({"samples": {}}, "'samples'"),
])
def test_plot_pca__bad_arguments(plain, kwargs, match):
    with pytest.raises(ParameterError, match=match):
        plot_pca(plain, **kwargs)


def test_biplot_arrows__zero_directions_stay_at_the_centre():
    df = biplot_arrows(np.zeros((2, 2)), ["a", "b"], (1.0, 2.0), (3.0, 4.0))
    assert (df["x1"] == 1.0).all() and (df["y1"] == 2.0).all()


def test_plot_pca__save_png(plain, tmp_path):
    plain.plot(rng=1).save(str(tmp_path / "p.png"), dpi=30)
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def _t(ax):
    return ax.get_title().replace("\n", " ")


@pytest.mark.parametrize("method", ["geometric", "sparse"])
def test_plot_pca__two_line_titles_stay_inside_the_figure(clustered, method):
    """A panel of fixed aspect whose box the layout changes moved its two-line title above the
    figure after one layout pass (cut off in pca_biplot.png); the layout settles it."""
    from dppca_dask.plots._style import rasterize, titles_outside

    x, groups = clustered
    fit = dp_pca(x, privacy=PC, k=3, bins=6, scree_control=CONTROL, group=groups,
                 score_method=method, rng=4)
    out = fit.plot(rng=5)
    fig = out.figure
    assert any("\n" in ax.get_title() for ax in fig.axes)  # the titles wrap
    for dpi in (100, 150):  # the dpis the package draws at (notebook PNG, saved files)
        raster = rasterize(fig, dpi)
        assert not titles_outside(fig, fig._get_renderer())
        assert (raster.pixels[0] == 255).all(), dpi  # nothing drawn up to the top edge
