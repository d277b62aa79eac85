"""Score plots (SPEC_dppca.md §9.1–9.2): layout, titles, frame and aspect, alpha, colours."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex

from dppca_dask import privacy_control
from dppca_dask.errors import ParameterError
from dppca_dask.pca.sampling import sampling_control
from dppca_dask.pca.score import dp_score
from dppca_dask.plots._style import group_colors, hcl_palette
from dppca_dask.plots.score import ScorePlot, plot_score, score_plot_control

matplotlib.use("Agg")  # the plots build Figures without pyplot; no GUI backend either way

PC = privacy_control(eps=4, delta=1e-5)


@pytest.fixture(scope="module")
def clustered():
    rng = np.random.default_rng(0)
    centres = [(-6, 0), (6, 0), (0, 6)]
    x = np.vstack([np.column_stack([rng.normal(cx, 1, 300), rng.normal(cy, 1, 300),
                                    rng.normal(0, 0.3, 300)]) for cx, cy in centres])
    groups = np.repeat(["left", "right", "top"], 300)
    return x, groups


@pytest.fixture(scope="module")
def reference_fit(clustered):
    x, groups = clustered
    return dp_score(x, privacy=PC, V_dp=np.eye(3), group=groups, method=("add", "sparse"),
                    non_private=True, bins=(10, 10), rng=1)


def _titles(out: ScorePlot) -> list[str]:
    return [ax.get_title() for ax in out.figure.axes]


def test_plot_score__full_grid_with_references(reference_fit):
    out = reference_fit.plot(sampling=sampling_control(["center", "uniform"]), rng=2)
    assert _titles(out) == [
        "Non-private Histogram", "Add DP Histogram", "Sparse DP Histogram",
        "Non-private Scatter", "Non-private Sample (Center)", "Add Sample (Center)",
        "Sparse Sample (Center)",
        "Non-private Sample (Uniform)", "Add Sample (Uniform)", "Sparse Sample (Uniform)",
    ]
    spec = out.axes["add"].get_subplotspec()
    assert (spec.rowspan.start, spec.colspan.start) == (0, 2)  # first cell of row 0 is blank
    assert out.axes["scatter"].get_subplotspec().rowspan.start == 1
    assert set(out.samples) == {"nonprivate", "add", "sparse"}
    assert set(out.axes["sample"]["add"]) == {"center", "uniform"}
    assert len(out.samples["add"]["uniform"]) == 900


def test_plot_score__histogram_only_row(reference_fit):
    out = reference_fit.plot(private_plot="histogram", rng=2)
    assert _titles(out) == ["Non-private Scatter", "Non-private Histogram", "Add DP Histogram",
                            "Sparse DP Histogram"]
    assert out.samples == {}


def test_plot_score__private_only_without_references(clustered):
    x, groups = clustered
    fit = dp_score(x, privacy=PC, V_dp=np.eye(3), group=groups, rng=3)
    out = fit.plot(rng=4)
    assert _titles(out) == ["Add DP Histogram", "Add Sample (Uniform)"]
    assert not any("Non-private" in t for t in _titles(out))


def test_plot_score__frame_limits_aspect_and_labels(reference_fit):
    out = reference_fit.plot(private_plot=("histogram",), rng=0)
    for ax in out.figure.axes:
        assert ax.get_xlim() == pytest.approx(reference_fit.frame.xlim, abs=0)
        assert ax.get_ylim() == pytest.approx(reference_fit.frame.ylim, abs=0)
        assert ax.get_aspect() == 1.0
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("PC1", "PC2")
        assert ax.title.get_fontweight() == "bold"


def test_plot_score__alpha_maps_pooled_probabilities(reference_fit):
    out = reference_fit.plot(private_plot="histogram", rng=0)
    ax = out.axes["add"]
    collections = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(collections) == 3  # one per group
    alphas = np.concatenate([c.get_facecolors()[:, 3] for c in collections])
    assert alphas.max() == pytest.approx(1.0)
    probs = reference_fit.probability.sel(mechanism="add").values
    expected = (probs - probs.min()) / (probs.max() - probs.min())
    assert np.sort(alphas) == pytest.approx(np.sort(expected[expected > 0]))
    colours = [to_hex(c.get_facecolors()[0][:3]).upper() for c in collections]
    assert colours == hcl_palette(3)


def test_plot_score__samples_equal_fit_sample(reference_fit):
    out = plot_score(reference_fit, rng=9)
    direct = reference_fit.sample(rng=9)
    for target, methods in direct.items():
        for method, frame in methods.items():
            np.testing.assert_array_equal(out.samples[target][method].to_numpy(),
                                          frame.to_numpy())


def test_plot_score__saves_png(tmp_path, reference_fit):
    path = reference_fit.plot(rng=1, control={"show_group_legend": True}).save(
        str(tmp_path / "score.png"), dpi=40)
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_group_colors__palette_names_and_user_values():
    assert hcl_palette(2) == ["#E16A86", "#00AD9A"]
    assert hcl_palette(3) == ["#E16A86", "#50A315", "#009ADE"]
    assert hcl_palette(5) == ["#E16A86", "#AA9000", "#00AA5A", "#00A6CA", "#B675E0"]
    assert group_colors(["red", "blue"]) == {"red": "red", "blue": "blue"}
    assert group_colors(["C1", "C2"]) == {"C1": "#E16A86", "C2": "#00AD9A"}
    assert group_colors(["a", "b", "c"], {"b": "black"}) == {
        "a": "#E16A86", "b": "black", "c": "#009ADE"}


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"colour": "red"}, "'colour' parameter of score_plot_control must be one of the options"),
        ({"scatter_alpha": 1.5}, "'scatter_alpha' parameter"),
        ({"hist_alpha_range": (0.8, 0.2)}, "non-decreasing pair within"),
        ({"hist_alpha_range": (0, 2)}, "non-decreasing pair within"),
        ({"color": "not-a-colour"}, "'color' parameter of score_plot_control must be a valid"),
        ({"base_size": 0}, "'base_size' parameter"),
        ({"titles": {"kde": "x"}}, "'titles' parameter"),
        ({"xlab": 3}, "'xlab' parameter of score_plot_control must be a single str"),
        ({"group_colors": {"a": "nocolour"}}, "group_colors"),
        ({"show_group_legend": "yes"}, "'show_group_legend' parameter"),
    ],
)
def test_score_plot_control__validation(options, match):
    with pytest.raises(ParameterError, match=match):
        score_plot_control(**options)


def test_plot_score__bad_arguments(reference_fit):
    with pytest.raises(ParameterError, match="'private_plot' parameter of plot"):
        reference_fit.plot(private_plot="scatter")
    with pytest.raises(ParameterError, match="'private_plot' parameter"):
        reference_fit.plot(private_plot=[])
    with pytest.raises(ParameterError, match="'sampling' parameter of plot"):
        reference_fit.plot(sampling="uniform")
    with pytest.raises(ParameterError, match="'control' parameter of plot"):
        reference_fit.plot(control=3)
    with pytest.raises(ParameterError, match="'fit' parameter of plot_score"):
        plot_score(object())


def test_plot_score__custom_titles_and_labels(reference_fit):
    out = reference_fit.plot(private_plot="histogram", rng=0,
                             control=score_plot_control(titles={"add": "Noisy"}, xlab="first"))
    assert "Noisy" in _titles(out)
    assert out.axes["add"].get_xlabel() == "first"
