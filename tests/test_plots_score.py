"""Score plots (SPEC_dppca.md §9.1–9.2): layout, titles, frame and aspect, alpha, colours."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from matplotlib.colors import to_hex

from dppca_dask import privacy_control
from dppca_dask.errors import ParameterError
from dppca_dask.pca.score import dp_score
from dppca_dask.plots._style import group_colors, hcl_palette
from dppca_dask.plots.score import ScorePlot, plot_score, score_plot_control
from dppca_dask.results.sampling import sampling_control

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
    return [ax.get_title().replace("\n", " ").replace("- ", "-") for ax in out.figure.axes
            if ax.get_title()]


def test_plot_score__full_grid_with_references(reference_fit):
    # grouped: the scores first, then small multiples (one panel per group) per histogram,
    # then one sample row per sampling method; no blank cell anywhere
    out = reference_fit.plot(sampling=sampling_control(["center", "uniform"]), rng=2)
    hist = [f"{name}: group {g}" for name in ("Non-private histogram (not private)",
                                              "Gaussian histogram",
                                              "Sparse (stability) histogram")
            for g in ("left", "right", "top")]
    samples = [f"{m} sample of the {name}" for m in ("Center", "Uniform")
               for name in ("non-private histogram (not private)", "Gaussian histogram",
                            "sparse (stability) histogram")]
    assert _titles(out) == ["Non-private scores (not private)", *hist, *samples]
    assert set(out.axes["add"]) == {"left", "right", "top"}
    assert out.axes["scatter"].get_subplotspec().rowspan.start == 0
    drawn = [ax for ax in out.figure.axes if ax is not out.axes["colorbar"]]
    assert all(ax.has_data() for ax in drawn)  # no empty panels
    assert set(out.samples) == {"nonprivate", "add", "sparse"}
    assert set(out.axes["sample"]["add"]) == {"center", "uniform"}
    assert len(out.samples["add"]["uniform"]) == 900
    assert "not a private release" in out.figure.get_supxlabel()
    assert "n = 900" in out.figure.get_supxlabel() and "ε = 4" in out.figure.get_supxlabel()


def test_plot_score__histogram_only_row(clustered):
    x, _ = clustered
    fit = dp_score(x, privacy=PC, V_dp=np.eye(3), method=("add", "sparse", "geometric"),
                   non_private=True, bins=(10, 10), rng=1)
    out = fit.plot(private_plot="histogram", rng=2)
    assert _titles(out) == ["Non-private scores (not private)",
                            "Non-private histogram (not private)", "Gaussian histogram",
                            "Sparse (stability) histogram",
                            "Two-sided geometric histogram"]
    assert out.samples == {}
    assert out.axes["colorbar"].get_ylabel() == "cell probability"


def test_plot_score__private_only_without_references(clustered):
    x, groups = clustered
    fit = dp_score(x, privacy=PC, V_dp=np.eye(3), group=groups, rng=3, preset="seed")
    out = fit.plot(rng=4)
    assert _titles(out) == ["Gaussian histogram: group left", "Gaussian histogram: group right",
                            "Gaussian histogram: group top",
                            "Uniform sample of the Gaussian histogram"]
    assert not any("Non-private" in t for t in _titles(out))
    assert "not a private release" not in out.figure.get_supxlabel()
    # the group legend is on by default, as in the CLI and dp_pca plots
    assert [t.get_text() for t in out.figure.legends[0].get_texts()] == ["left", "right", "top"]


def test_plot_score__frame_limits_aspect_and_labels(reference_fit):
    out = reference_fit.plot(private_plot=("histogram",), rng=0)
    for ax in out.figure.axes:
        if ax is out.axes["colorbar"]:
            continue
        assert ax.get_xlim() == pytest.approx(reference_fit.frame.xlim, abs=0)
        assert ax.get_ylim() == pytest.approx(reference_fit.frame.ylim, abs=0)
        assert ax.get_aspect() == 1.0
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("PC1", "PC2")
        assert ax.title.get_fontweight() == "bold"


def test_plot_score__colour_maps_pooled_probabilities(reference_fit):
    out = reference_fit.plot(private_plot="histogram", rng=0)
    images = [ax.images[0] for ax in out.axes["add"].values()]
    assert len(images) == 3  # one small multiple per group
    probs = reference_fit.probability.sel(mechanism="add").values
    np.testing.assert_array_equal(images[1].get_array(), probs[1])
    pooled = [reference_fit._grid(t) for t in ("nonprivate", "add", "sparse")]
    norm = images[0].norm
    assert (norm.vmin, norm.vmax) == (min(g.min() for g in pooled), max(g.max() for g in pooled))
    cmap = images[0].get_cmap()
    assert to_hex(cmap(0.0)) == "#ffffff"  # white at the minimum, the colour at the maximum
    assert to_hex(cmap(1.0)).upper() == "#6A5ACD"


def test_plot_score__samples_equal_fit_sample(reference_fit):
    out = plot_score(reference_fit, rng=9)
    direct = reference_fit.sample(rng=9)
    for target, methods in direct.items():
        for method, frame in methods.items():
            np.testing.assert_array_equal(out.samples[target][method].to_numpy(),
                                          frame.to_numpy())


def test_plot_score__saves_png(tmp_path, reference_fit):
    path = reference_fit.plot(rng=1).save(
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
    assert "Noisy: group left" in _titles(out)
    assert out.axes["add"]["left"].get_xlabel() == "first"


def test_plot_score__wide_frame_keeps_panel_size_without_equal_aspect():
    # a frame 100x wider than tall: no forced 1:1 aspect, the panels keep their minimum size
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.normal(0, 100, 2000), rng.normal(0, 1, 2000),
                         rng.normal(0, 0.1, 2000)])
    fit = dp_score(x, privacy=PC, V_dp=np.eye(3), bins=(8, 8), rng=2, preset="seed")
    out = fit.plot(rng=1)
    fig = out.figure
    fig.draw_without_rendering()
    for ax in (out.axes["add"], out.axes["sample"]["add"]["uniform"]):
        assert ax.get_aspect() == "auto"
        box = ax.get_window_extent()
        assert min(box.width, box.height) / fig.dpi >= 2.0


def test_plot_score__largest_allowed_grid_draws_quickly():
    import io
    import time

    from dppca_dask.pca.histograms import cell_limit

    x = np.random.default_rng(4).normal(size=(3000, 3))
    m = int(np.sqrt(cell_limit(3000)))  # 438 x 438: about the limit for n = 3000
    fit = dp_score(x, privacy=PC, V_dp=np.eye(3), bins=(m, m), rng=2)
    start = time.perf_counter()
    fit.plot(private_plot="histogram").figure.savefig(io.BytesIO(), dpi=150)
    assert time.perf_counter() - start < 20.0  # one polygon per cell took minutes at this size



def test_plan__refuses_a_grid_past_the_cell_limit_with_an_estimate(tmp_path):
    # issue 17: bins [2000, 2000] at n = 5000 ran for minutes at 10 GB; plan refuses it
    import pandas as pd

    from dppca_dask.io.convert import write_frames
    from dppca_dask.pipeline.config import RunConfig
    from dppca_dask.pipeline.runner import plan_run

    x = np.random.default_rng(0).normal(size=(5000, 3))
    store = write_frames([pd.DataFrame(x, columns=["a", "b", "c"])], tmp_path / "x.zarr",
                         rows=5000)

    def config(bins):
        return RunConfig.from_dict({
            "input": {"path": store, "array": "X"}, "task": "score",
            "privacy": {"eps": 2, "delta": 1e-5}, "score": {"bins": bins},
            "output": {"directory": str(tmp_path / "out")}})

    with pytest.raises(ParameterError, match=r"at most 320,000 cells for n = 5,000.*"
                       r"4,000,000 cells would hold about [\d,]+ MiB on the driver"):
        plan_run(config([2000, 2000]))
    work = "\n".join(plan_run(config([500, 500])).work)
    assert "500 x 500 = 250,000 cells (limit 320,000 for n = 5,000)" in work
    assert "MiB" in work and "s to draw" in work
