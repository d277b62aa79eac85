"""dp_score: oracles, the literal algorithm under the R RNG, frame accuracy, histograms, groups."""

from __future__ import annotations

import math

import dask.array as da
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dppca_dask import privacy_control
from dppca_dask.errors import BudgetError, InputError, ParameterError
from dppca_dask.graph.compute import compute
from dppca_dask.graph.passes import row_block_sum
from dppca_dask.kernels.scores import bin_counts, bin_index, center_counts, project, radius_counts
from dppca_dask.pca.frame import Frame, durfee_frame, smooth_frame, smooth_sensitivity
from dppca_dask.pca.histograms import (
    bin_count_pass,
    default_bins,
    parse_bins,
    release_histograms,
)
from dppca_dask.pca.score import dp_score
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import (
    gaussian_histogram,
    histogram_noise_sigma,
    stability_histogram,
    stability_histogram_parameters,
)
from dppca_dask.privacy.quantiles import upper_grid
from dppca_dask.results.base import load_result
from dppca_dask.results.score import ScoreResult
from dppca_dask.testing import RRNG
from tests.helpers import literal_quantile, literal_upper

PC = privacy_control(eps=4.0, delta=1e-4)


@pytest.fixture
def data(global_seed) -> np.ndarray:
    rng = np.random.default_rng(global_seed)
    return rng.normal(size=(600, 4)) * [4.0, 2.0, 1.0, 0.5] + [1.0, -2.0, 0.0, 0.0]


# --- §16 oracles ----------------------------------------------------------------------------


def test_histogram_noise_sigma__spec_oracle():
    assert histogram_noise_sigma(PrivacyBudget(1.0, 5e-4), "classical") == pytest.approx(
        5.5942992, abs=5e-8)
    assert histogram_noise_sigma(PrivacyBudget(1.0, 5e-4), "analytic") < 5.5942992


def test_stability_histogram_parameters__spec_oracle():
    scale, threshold = stability_histogram_parameters(300, PrivacyBudget(1.0, 5e-4))
    assert scale == pytest.approx(2 / 300, abs=1e-15)
    # Integer threshold T for the discrete Laplace (b = 2): the smallest T with
    # P(Z ≥ T − 1) = q^(T−1)/(1 + q) ≤ δ/2, q = e^(−1/2). (The continuous SPEC value was
    # 2 ln(2/δ)/(εn) + 1/n = 0.058627.)
    t = round(threshold * 300)
    assert threshold == t / 300
    q = math.exp(-0.5)
    assert q ** (t - 1) / (1 + q) <= 5e-4 / 2 < q ** (t - 2) / (1 + q)
    assert t == 17


def test_default_bins__spec_oracle():
    assert [default_bins(n) for n in (100, 300, 1000, 5000, 32561)] == [3, 4, 5, 8, 15]
    assert [default_bins(n, "W") for n in (100, 300, 1000, 5000, 32561)] == [3, 4, 6, 8, 13]
    assert (5000 / math.log(5000)) ** (1 / 3) == pytest.approx(8.3732, abs=1e-4)
    assert parse_bins(None, 5000, "f") == (8, 8)
    assert parse_bins(7, 50, "f") == (7, 7)
    assert parse_bins((3, 5.0), 50, "f") == (3, 5)


def test_smooth_sensitivity__spec_oracle():
    x = np.array([1, 2, 4, 7, 11, 16, 22, 29, 37, 46], dtype=float)
    value, ss = smooth_sensitivity(x, 0.5, 1.0, 1e-3)
    assert value == 11.0
    assert ss == pytest.approx(27.2043023760, abs=1e-9)
    assert 2 * ss / 1.0 == pytest.approx(54.4086047519, abs=1e-9)
    _, ss = smooth_sensitivity(x, 0.5, 0.1, 1e-3)
    assert ss == pytest.approx(42.4682423952, abs=1e-9)
    assert 2 * ss / 0.1 == pytest.approx(849.3648, abs=1e-3)


def test_bin_index__cut_right_closed_and_clamped():
    breaks = np.linspace(0.0, 3.0, 4)
    v = np.array([-1.0, 0.0, 1e-12, 1.0, 1.0 + 1e-12, 3.0, 7.0])
    assert bin_index(v, breaks).tolist() == [0, 0, 0, 0, 1, 2, 2]


# --- the literal algorithm with the R RNG (SPEC §6.3, §6.5-6.7, §6.9) ----------------------


def literal_score(s, groups, eps_s, delta_s, bins, rng):
    """SPEC §6 written out: frame, cut, add then sparse per group."""
    e = 0.35 * eps_s / 4
    cx = literal_quantile(s[:, 0], 0.5, e, rng)
    cy = literal_quantile(s[:, 1], 0.5, e, rng)
    rx, _ = literal_upper(np.abs(s[:, 0] - cx), 0.995, e, rng)
    ry, _ = literal_upper(np.abs(s[:, 1] - cy), 0.995, e, rng)
    xb = np.linspace(cx - 1.2 * rx, cx + 1.2 * rx, bins[0] + 1)
    yb = np.linspace(cy - 1.2 * ry, cy + 1.2 * ry, bins[1] + 1)
    jx = np.clip(np.searchsorted(xb, s[:, 0], "left"), 1, bins[0]) - 1
    jy = np.clip(np.searchsorted(yb, s[:, 1], "left"), 1, bins[1]) - 1
    eps_h = 0.65 * eps_s
    hist_budget = PrivacyBudget(eps_h, delta_s)
    out = {"add": [], "sparse": []}
    for g in sorted(set(groups)):  # levels sorted (R's factor order)
        c = np.zeros(bins[0] * bins[1])
        for k in jy[groups == g] * bins[0] + jx[groups == g]:
            c[k] += 1
        # The histogram noise is the exact integer noise of the package's mechanisms (not R's
        # rnorm/rlaplace draws; their distributions are tested in test_mechanisms.py and below):
        # this reference checks the frame, the binning, the grouping and the draw order.
        add = gaussian_histogram(c, budget=hist_budget, calibration="classical", rng=rng,
                                 component="ref").value
        out["add"].append(add / add.sum())
        n_g = int(c.sum())
        q = stability_histogram(c, n=n_g, budget=hist_budget, rng=rng, component="ref").value
        out["sparse"].append(q / q.sum() if q.sum() > 0 else q)
    return (cx, cy, rx, ry), out


@pytest.mark.parametrize("grouped", [False, True])
def test_dp_score__literal_algorithm_under_r_rng(grouped):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 3)) * [3.0, 1.5, 0.5] + [2.0, -1.0, 0.0]
    v = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    groups = np.where(np.arange(300) % 3 == 0, "b", "a") if grouped else np.repeat("all", 300)
    privacy = privacy_control(loading=(1.0, 1e-5), score=(3.0, 1e-3))
    fit = dp_score(x, privacy=privacy, V_dp=v, bins=(5, 4), method=("sparse", "add"),
                   group=groups if grouped else None, rng=RRNG(42), preset="seed")
    s = x @ v[:, :2]
    (cx, cy, rx, ry), expected = literal_score(s, groups, 3.0, 1e-3, (5, 4), RRNG(42))
    np.testing.assert_allclose(fit.frame.center, (cx, cy), rtol=0, atol=1e-12)
    np.testing.assert_allclose(fit.frame.radius, (rx, ry), rtol=0, atol=1e-12)
    assert fit.methods == ("add", "sparse")
    for i, method in enumerate(fit.methods):
        got = fit.probability.values[i].reshape(len(expected[method]), -1)
        np.testing.assert_allclose(got, np.array(expected[method]), atol=1e-12)
    if grouped:
        assert fit.groups == ["a", "b"]  # sorted, not in order of first appearance (row 0: b)


# --- frame -----------------------------------------------------------------------------------


def test_durfee_frame__covers_points_at_large_eps(data):
    v = np.eye(4)[:, :2]
    frame, records = durfee_frame(da.from_array(data, chunks=(77, 4)), v, n=600, eps=40.0,
                                  rng=np.random.default_rng(0))
    inside = ((data[:, 0] >= frame.xlim[0]) & (data[:, 0] <= frame.xlim[1])
              & (data[:, 1] >= frame.ylim[0]) & (data[:, 1] <= frame.ylim[1]))
    assert inside.mean() >= 0.99
    assert sum(r.eps for r in records) == pytest.approx(40.0)
    assert all(r.delta == 0 for r in records) and len(records) == 6  # 2 + 2 sides, 2 radii


def test_durfee_frame__radius_error_shrinks_with_eps():
    rng = np.random.default_rng(11)
    x = rng.normal(size=(2000, 2)) * [5.0, 1.0] + [3.0, -1.0]
    arr = da.from_array(x, chunks=(500, 2))
    truth = np.quantile(np.abs(x[:, 0] - np.median(x[:, 0])), 0.995)
    errors = []
    for eps in (0.2, 2.0, 50.0):
        errs = [abs(durfee_frame(arr, np.eye(2), n=2000, eps=eps,
                                 rng=np.random.default_rng(seed))[0].radius[0] - truth)
                for seed in range(6)]
        errors.append(np.mean(errs))
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.05 * truth


def test_durfee_frame__count_pass_equals_numpy_under_chunkings(data):
    v = np.linalg.qr(np.random.default_rng(2).normal(size=(4, 4)))[0][:, :2]
    grid = upper_grid(1.01, 5000)
    ref_pos, ref_neg = center_counts(data, v, grid, 1.01)
    ref_rad = radius_counts(data, v, np.array([0.3, -0.2]), grid)
    for chunks in (1, 7, 599, 600):
        arr = da.from_array(data, chunks=(chunks, 4))
        (pos, neg), rad = compute(row_block_sum(arr, center_counts, v, grid, 1.01),
                                  row_block_sum(arr, radius_counts, v, np.array([0.3, -0.2]),
                                                grid))
        np.testing.assert_array_equal(pos, ref_pos)
        np.testing.assert_array_equal(neg, ref_neg)
        np.testing.assert_array_equal(rad, ref_rad)


def test_project__chunking_invariant_and_close_to_matmul(data):
    v = np.linalg.qr(np.random.default_rng(2).normal(size=(4, 4)))[0][:, :2]
    whole = project(data, v)
    parts = np.vstack([project(data[i:i + 7], v) for i in range(0, 600, 7)])
    np.testing.assert_array_equal(whole, parts)
    np.testing.assert_allclose(whole, data @ v, rtol=1e-12, atol=1e-12)


def test_smooth_frame__square_with_delta_budget(data):
    fit = dp_score(data, privacy=PC, frame="smooth", rng=4, bins=(6, 6), method="add")
    assert fit.frame.method == "smooth"
    assert fit.frame.radius[0] == fit.frame.radius[1]
    frame_records = [r for r in fit.ledger if "frame" in r.note]
    assert len(frame_records) == 3
    assert sum(r.delta for r in frame_records) == pytest.approx(0.35 * 5e-5)
    hist = next(r for r in fit.ledger if r.mechanism == "gaussian_histogram")
    assert hist.delta == pytest.approx(0.65 * 5e-5)


def test_frame__non_positive_radius_message(monkeypatch):
    import dataclasses

    import dppca_dask.pca.frame as frame_module

    real = frame_module.smooth_laplace
    calls = []

    def negative_radius(value, **kw):  # centres as drawn, then a large negative radius
        rel = real(value, **kw)
        calls.append(1)
        return dataclasses.replace(rel, value=-1e9) if len(calls) == 3 else rel

    monkeypatch.setattr(frame_module, "smooth_laplace", negative_radius)
    s = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(BudgetError, match="The private frame radius is not positive. Try a "
                       "larger privacy budget."):
        smooth_frame(s, budget=PrivacyBudget(1.0, 1e-3), rng=np.random.default_rng(0))


# --- histograms --------------------------------------------------------------------------------


def test_dp_score__histograms_equal_nonprivate_as_eps_grows(data):
    pc = privacy_control(eps=1e9, delta=1e-3)
    fit = dp_score(data, privacy=pc, bins=(4, 3), method=("add", "sparse"), non_private=True,
                   rng=1)
    ref = fit.nonprivate_probability.values
    np.testing.assert_allclose(fit.probability.sel(mechanism="add").values, ref, atol=1e-6)
    counts = np.rint(ref * 600)
    keep = np.where(counts >= 2, ref, 0.0)  # sparse zeroes singletons (threshold 1/n + ...)
    np.testing.assert_allclose(fit.probability.sel(mechanism="sparse").values,
                               keep / keep.sum(), atol=1e-6)
    # the frame is then the exact median ± 1.2 × 0.995 quantile (on the 1% grid)
    s = fit.observed_scores[["pc_x", "pc_y"]].to_numpy()
    assert abs(fit.frame.center[0] - np.median(s[:, 0])) < 0.02 * np.std(s[:, 0]) + 0.01


def test_gaussian_histogram__noise_sd_chi2_and_ks():
    budget = PrivacyBudget(1.0, 5e-4)
    counts = np.full((100, 200), 1e4)
    rel = gaussian_histogram(counts, budget=budget, calibration="classical",
                             rng=np.random.default_rng(5), component="score")
    sigma = rel.record.scale
    noise = (rel.value - counts).ravel()
    m = noise.size
    stat = np.sum(noise**2) / sigma**2
    assert stats.chi2.ppf(1e-6 / 2, m) < stat < stats.chi2.ppf(1 - 1e-6 / 2, m)
    # the noise is integer (exact discrete Gaussian): chi-square against its pmf
    assert np.all(noise == np.rint(noise))
    ks = np.arange(-40, 41)
    pmf = np.exp(-ks.astype(float) ** 2 / (2 * sigma**2))
    pmf /= pmf.sum()
    observed = np.array([np.sum(noise == k) for k in ks])
    keep = pmf * m >= 5
    expected = pmf[keep] * m
    obs = observed[keep]
    chi = np.sum((obs - expected) ** 2 / expected)
    assert stats.chi2.sf(chi, keep.sum() - 1) > 1e-6
    assert rel.record.draws == m and rel.record.sensitivity == pytest.approx(math.sqrt(2))


def test_stability_histogram__laplace_noise_ks():
    budget = PrivacyBudget(1.0, 0.5)
    n = 10**6
    counts = np.full(20000, 400000)
    rel = stability_histogram(counts, n=n, budget=budget, rng=np.random.default_rng(6),
                              component="score")
    scale, threshold = stability_histogram_parameters(n, budget)
    assert threshold < 0.01
    noise = np.rint(rel.value * n - counts).astype(np.int64)  # integer discrete Laplace noise
    b = scale * n
    ks = np.arange(-30, 31)
    pmf = np.exp(-np.abs(ks) / b)
    pmf /= pmf.sum()
    observed = np.array([np.sum(noise == k) for k in ks])
    keep = pmf * noise.size >= 5
    expected = pmf[keep] * noise.size
    chi = np.sum((observed[keep] - expected) ** 2 / expected)
    assert stats.chi2.sf(chi, keep.sum() - 1) > 1e-6


def test_stability_histogram__empty_cells_never_released_draws_public():
    rng = RRNG(1)
    counts = np.array([0, 50, 0, 50])
    rel = stability_histogram(counts, n=100, budget=PrivacyBudget(50.0, 1e-3), rng=rng,
                              component="score")
    assert rel.record.draws == 4  # one draw per cell: a public number, not the non-empty count
    assert rel.value[0] == 0 and rel.value[2] == 0
    assert rel.value[1] * 100 == np.rint(rel.value[1] * 100)
    assert abs(rel.value[1] - 0.5) < 0.5  # b = 2/50 counts: the noise is a few counts at most


def test_bin_count_pass__dask_equals_numpy_and_groups_sum(data):
    v = np.linalg.qr(np.random.default_rng(5).normal(size=(4, 4)))[0][:, :2]
    xb, yb = np.linspace(-6, 6, 6), np.linspace(-4, 5, 5)
    codes = np.random.default_rng(6).integers(0, 3, size=600)
    ref = bin_counts(np.column_stack([data, codes]), v, xb, yb, 3)
    ungrouped_ref = bin_counts(data, v, xb, yb)
    for chunks in (1, 7, 599, 600):
        arr = da.from_array(data, chunks=(chunks, 4))
        grouped, plain = compute(bin_count_pass(arr, v, xb, yb, codes, 3),
                                 bin_count_pass(arr, v, xb, yb))
        np.testing.assert_array_equal(grouped, ref)
        np.testing.assert_array_equal(plain, ungrouped_ref)
    np.testing.assert_array_equal(ref.sum(axis=0), ungrouped_ref[0])
    assert ungrouped_ref.sum() == 600  # out-of-frame points are clamped, not dropped


def test_dp_score__chunking_does_not_change_the_release(data):
    v = np.linalg.qr(np.random.default_rng(5).normal(size=(4, 4)))[0]
    fits = [dp_score(da.from_array(data, chunks=(c, 4)), privacy=PC, V_dp=v,
                     method=("add", "sparse"), rng=9) for c in (13, 600)]
    np.testing.assert_array_equal(fits[0].probability.values, fits[1].probability.values)
    np.testing.assert_array_equal(fits[0].x_breaks, fits[1].x_breaks)


def test_dp_score__grouped_counts_sum_to_ungrouped(data):
    groups = np.repeat(["g1", "g2", "g3"], 200)
    v = np.eye(4)
    grouped = dp_score(data, privacy=PC, V_dp=v, group=groups, non_private=True, rng=2)
    plain = dp_score(data, privacy=PC, V_dp=v, non_private=True, rng=2)
    sizes = grouped.group_sizes
    assert sizes.tolist() == [200, 200, 200]
    counts = (grouped.nonprivate_probability.values * sizes[:, None, None]).sum(axis=0)
    np.testing.assert_allclose(counts, plain.nonprivate_probability.values * 600, atol=1e-9)
    np.testing.assert_allclose(grouped.probability.sum(("y_bin", "x_bin")).values, 1.0)


def test_release_histograms__parallel_composition_and_errors():
    counts = np.ones((2, 3, 3))
    rel = release_histograms(counts, np.array([9, 9]), methods=("add", "sparse"),
                             budget=PrivacyBudget(5.0, 1e-3), calibration="classical",
                             rng=np.random.default_rng(0), levels=["a", "b"])
    assert [r.mechanism for r in rel.records] == ["gaussian_histogram", "stability_histogram"]
    assert rel.records[0].draws == 18 and "parallel composition" in rel.records[0].note
    with pytest.raises(InputError, match="Each histogram must contain at least one observation"):
        release_histograms(counts, np.array([9, 0]), methods=("add",),
                           budget=PrivacyBudget(5.0, 1e-3), calibration="classical",
                           rng=np.random.default_rng(0), levels=["a", "b"])


def test_dp_score__all_zero_add_histogram_message(data, monkeypatch):
    import dataclasses

    import dppca_dask.pca.histograms as hist_module

    real = hist_module.gaussian_histogram

    def sink(counts, **kw):  # every noisy count clipped to zero
        rel = real(counts, **kw)
        return dataclasses.replace(rel, value=np.zeros_like(rel.value))

    monkeypatch.setattr(hist_module, "gaussian_histogram", sink)
    with pytest.raises(BudgetError, match="^Group 'a': all privatized bin counts are zero after "
                       "Gaussian noise and clipping. Try a larger `eps` or fewer bins."):
        dp_score(data, privacy=PC, V_dp=np.eye(4), group=np.repeat(["a", "b"], 300), rng=0,
                 method="add")
    with pytest.raises(BudgetError, match="^all privatized bin counts are zero"):
        dp_score(data, privacy=PC, V_dp=np.eye(4), rng=0, method="add")


def test_dp_score__all_zero_sparse_is_released_and_sampling_warns():
    x = np.random.default_rng(0).normal(size=(60, 2))
    fit = dp_score(x, privacy=privacy_control(eps=0.05, delta=1e-6), V_dp=np.eye(2),
                   method="sparse", bins=(10, 10), rng=0)
    assert float(fit.probability.sum()) == 0.0
    with pytest.warns(UserWarning, match="no positive probability mass"):
        out = fit.sample(rng=1)
    assert out["sparse"]["uniform"].empty
    assert list(out["sparse"]["uniform"].columns) == ["pc_x", "pc_y"]


# --- budget and ledger -----------------------------------------------------------------------


def test_dp_score__budget_split_and_ledger(data):
    fit = dp_score(data, privacy=PC, method=("add", "sparse"), rng=3)
    ledger = fit.ledger
    assert ledger[0].component == "loading" and ledger[0].eps == pytest.approx(2.0)
    frame = [r for r in ledger if r.mechanism == "durfee_above_threshold"]
    assert sum(r.eps for r in frame) == pytest.approx(0.35 * 2.0)
    assert all(r.delta == 0 for r in frame)
    for r in ledger[-2:]:
        assert (r.eps, r.delta) == (pytest.approx(0.65 * 2.0), pytest.approx(5e-5))
    meta = fit.metadata
    assert meta["privacy"]["allocations"]["score"] == {"eps": 2.0, "delta": 5e-05,
                                                       "status": "spent"}
    assert meta["rng"]["seeded"] is True and meta["rng"]["guarantee"].startswith("NOT PRIVATE")


def test_dp_score__supplied_directions_are_not_spent(data):
    fit = dp_score(data, privacy=PC, V_dp=np.eye(4), axes=(2, 3), rng=3)
    assert fit.ledger[0].status == "prior" and fit.ledger[0].mechanism == "supplied V_dp"
    assert fit.metadata["privacy"]["allocations"]["loading"]["status"] == "prior"
    assert fit.labels == ("PC2", "PC3")
    np.testing.assert_array_equal(fit.dataset["directions"].values, np.eye(4)[:, 1:3])


def test_dp_score__accepts_a_loading_result(data):
    from dppca_dask import dp_loading

    loading = dp_loading(data, privacy=privacy_control(eps=2, delta=1e-5), rng=1)
    fit = dp_score(data, privacy=PC, V_dp=loading, rng=2)
    np.testing.assert_array_equal(fit.dataset["directions"].values,
                                  loading.directions.values[:, :2])


# --- result ------------------------------------------------------------------------------------


def test_score_result__round_trip_print_and_table(tmp_path, data):
    groups = np.repeat(["x", "y"], 300)
    fit = dp_score(pd.DataFrame(data, columns=list("abcd")).assign(g=groups), group="g",
                   privacy=PC, method=("add", "sparse"), non_private=True, rng=5, bins=(3, 4))
    assert isinstance(fit, ScoreResult)
    assert fit.probability.dims == ("mechanism", "group", "y_bin", "x_bin")
    assert fit.nonprivate_probability.attrs["private"] == 0
    assert fit.nonprivate_probability.attrs["description"].startswith("NOT PRIVATE")
    assert fit.dataset["observed_score"].attrs["description"].startswith("NOT PRIVATE")
    for writer, name in ((fit.to_zarr, "s.zarr"), (fit.to_netcdf, "s.nc")):
        back = load_result(writer(tmp_path / name))
        assert isinstance(back, ScoreResult)
        np.testing.assert_array_equal(back.probability.values, fit.probability.values)
        assert back.groups == ["x", "y"] and back.methods == ("add", "sparse")
        assert back.frame == fit.frame
        assert back.observed_scores["group"].tolist() == fit.observed_scores["group"].tolist()
    text = repr(fit)
    assert text.startswith("Differentially Private PC Scores\nData: 600 observations x 4 "
                           "variables\nAxes: PC1 and PC2\nHistogram: 3 x 4 bins; methods: add, "
                           "sparse\nGroups: 2 (x, y)\n")
    assert text.endswith("Total privacy budget: eps = 4 ; delta = 1e-04 \n"
                         "Non-private reference: stored ")
    summary = repr(fit.summary())
    assert "Score budget: eps = 2 ; delta = 5e-05 (frame eps = 0.7 ; delta = 0 ; histogram " \
           "eps = 1.3 ; delta = 5e-05 each method)" in summary
    assert "Non-private histogram, group x (NOT PRIVATE)" in summary
    table = fit.table("add", "y")
    assert list(table.columns) == ["xmin", "xmax", "ymin", "ymax", "prob"]
    assert len(table) == 12 and table["prob"].sum() == pytest.approx(1.0)
    assert table["xmin"].iloc[1] == table["xmax"].iloc[0]  # x fastest
    assert table["ymin"].iloc[3] == table["ymax"].iloc[0]


def test_score_result__without_reference_has_no_observed_values(data):
    fit = dp_score(data, privacy=PC, rng=1)
    names = set(fit.dataset.variables)
    assert not names & {"nonprivate_probability", "observed_score", "group_size"}
    assert fit.observed_scores is None and fit.nonprivate_probability is None
    assert "Non-private reference: not stored " in repr(fit)


# --- validation (SPEC §14) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"axes": (1,)}, ParameterError, "'axes' parameter of dp_score must be a pair"),
        ({"axes": "12"}, ParameterError, "'axes' parameter"),
        ({"axes": (0, 2)}, ParameterError, r"pair of positive ints \(1-based"),
        ({"axes": (1.5, 2)}, ParameterError, r"pair of positive ints"),
        ({"axes": (2, 2)}, ParameterError, r"two different components"),
        ({"axes": (1, 5)}, ParameterError, r"not exceeding the number of directions \(4\)"),
        ({"bins": (0, 3)}, ParameterError, "'bins' parameter of dp_score must be a pair"),
        ({"bins": (1, 2, 3)}, ParameterError, "'bins' parameter"),
        ({"bins": "8"}, ParameterError, "'bins' parameter"),
        ({"bins": (2.5, 3)}, ParameterError, "'bins' parameter"),
        ({"method": "gauss"}, ParameterError, "'method' parameter of dp_score"),
        ({"method": []}, ParameterError, "'method' parameter of dp_score"),
        ({"frame": "pmwm"}, ParameterError, "'frame' parameter of dp_score"),
        ({"calibration": "rdp"}, ParameterError, "'calibration' parameter"),
        ({"non_private": 1}, ParameterError, "'non_private' parameter"),
        ({"cpp_option": "yes"}, ParameterError, "'cpp_option' parameter"),
        ({"rng": -1}, ParameterError, "'rng' parameter"),
        ({"group": "nope"}, InputError, "Column 'nope' was not found in 'X'"),
        ({"group": ["a"] * 5}, InputError, "must have length equal to the number of rows"),
        ({"group": ["a", None] * 300}, InputError, "must not contain missing values"),
        ({"V_dp": np.eye(3)}, ParameterError,
         "'V_dp' parameter of dp_score must be a dp_loading result or a 4 x k"),
        ({"V_dp": np.full((4, 2), np.nan)}, ParameterError, "'V_dp' parameter"),
        ({"V_dp": np.eye(4)[:, :1]}, ParameterError, "'axes' parameter"),
        ({"privacy": privacy_control(eps=1, delta=1e-5, split={"loading": 0.5, "scree": 0.5})},
         BudgetError, "must match the required components"),
        ({"privacy": {"eps": 1}}, BudgetError, "'privacy' parameter of dp_score"),
    ],
)
def test_dp_score__bad_arguments_fail_cleanly(data, kwargs, error, match):
    args = {"privacy": PC, "rng": 0, **kwargs}
    with pytest.raises(error, match=match):
        dp_score(data, **args)


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (np.zeros((1, 3)), "at least two rows"),
        (np.zeros((5, 1)), "at least two columns"),
        (np.array([[1.0, np.inf], [2.0, 3.0]]), "finite"),
        ("missing.zarr", "not found"),
        ([[1, 2], [3, 4]], "must be a NumPy array"),
    ],
)
def test_dp_score__bad_data_fails_cleanly(x, match):
    with pytest.raises(InputError, match=match):
        dp_score(x, privacy=PC, rng=0)


def test_dp_score__lazy_nonfinite_input_fails_inside_the_pass():
    x = np.random.default_rng(0).normal(size=(50, 3))
    x[30, 1] = np.nan
    with pytest.raises(InputError, match="finite"):
        dp_score(da.from_array(x, chunks=(10, 3)), privacy=PC, V_dp=np.eye(3), rng=0)


def test_dp_score__frame_type():
    assert Frame("durfee", (1.0, 2.0), (1.0, 0.5)).ylim == (1.4, 2.6)


# --- laziness ----------------------------------------------------------------------------------


class CountingScheduler:
    def __init__(self):
        self.calls = 0

    def __call__(self, dsk, keys, **kwargs):
        import dask

        self.calls += 1
        return dask.get(dsk, keys, **kwargs)


@pytest.mark.parametrize(("supplied", "expected"), [(False, 4), (True, 3)])
def test_dp_score__documented_number_of_computes(data, supplied, expected):
    """Kendall pass (unless V_dp), frame centre counts, frame radius counts, cell counts."""
    import dask

    counter = CountingScheduler()
    arr = da.from_array(data, chunks=(100, 4))
    with dask.config.set(scheduler=counter):
        dp_score(arr, privacy=PC, V_dp=np.eye(4) if supplied else None, non_private=True,
                 group=np.repeat(["a", "b"], 300), rng=0)
    assert counter.calls == expected
