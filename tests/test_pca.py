"""dp_pca: budget resolution, shared directions, reads of the input, the one store, print."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from dppca_dask import (
    BudgetError,
    ParameterError,
    PCAResult,
    clipped_control,
    dp_loading,
    dp_pca,
    load_result,
    pmwm_control,
    privacy_control,
)
from dppca_dask.pca.pca import expected_reads
from dppca_dask.results.scree import ScreeResult

CONTROL = clipped_control(C_clip=40)


class CountingScheduler:
    def __init__(self):
        self.calls = 0

    def __call__(self, dsk, keys, **kwargs):
        self.calls += 1
        return dask.get(dsk, keys, **kwargs)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    return rng.normal(size=(400, 5)) * [3.0, 2.0, 1.0, 0.7, 0.5]


@pytest.fixture(scope="module")
def groups():
    return np.repeat(["a", "b"], 200)


@pytest.fixture(scope="module")
def fit(data, groups):
    return dp_pca(data, privacy=privacy_control(eps=6, delta=1e-4), k=3, bins=5,
                  scree_control=CONTROL, group=groups, rng=1, preset="seed")


def _alloc(fit, name):
    return fit.metadata["privacy"]["allocations"][name]


# --- budget resolution -------------------------------------------------------------------------


def test_dp_pca__implicit_split_is_equal_thirds_and_ledger_total_is_the_allocation(fit):
    for name in ("loading", "scree", "score"):
        assert _alloc(fit, name)["eps"] == pytest.approx(2.0)
        assert _alloc(fit, name)["delta"] == pytest.approx(1e-4 / 3)
    assert fit.metadata["privacy"]["implicit_split"] is True
    assert fit.metadata["ledger_total"] == pytest.approx({"eps": 6.0, "delta": 1e-4})
    spent = {c: sum(r.eps for r in fit.ledger if r.component == c)
             for c in ("loading", "scree", "score")}
    assert spent == pytest.approx({"loading": 2.0, "scree": 2.0, "score": 2.0})
    assert all(r.status == "spent" for r in fit.ledger)
    assert [r.component for r in fit.ledger].count("loading") == 1  # one Kendall release


def test_dp_pca__explicit_split_and_absolute_budgets_used_exactly(data):
    split = privacy_control(eps=4, delta=1e-4, split={"loading": 0.5, "scree": 0.25,
                                                      "score": 0.25})
    fit = dp_pca(data, privacy=split, k=2, scree_control=CONTROL, rng=2, preset="seed")
    assert [_alloc(fit, c)["eps"] for c in ("loading", "scree", "score")] == [2.0, 1.0, 1.0]
    assert fit.metadata["ledger_total"] == pytest.approx({"eps": 4.0, "delta": 1e-4})
    absolute = privacy_control(loading={"eps": 1.0, "delta": 1e-5},
                               scree={"eps": 2.0, "delta": 2e-5},
                               score={"eps": 3.0, "delta": 3e-5})
    fit = dp_pca(data, privacy=absolute, k=2, scree_control=CONTROL, rng=3, preset="seed")
    assert fit.metadata["privacy"]["total"] == pytest.approx({"eps": 6.0, "delta": 6e-5})
    assert fit.metadata["ledger_total"] == pytest.approx({"eps": 6.0, "delta": 6e-5})
    assert fit.score.metadata["score_split"]["frame_eps"] == pytest.approx(0.35 * 3.0)


@pytest.mark.parametrize("privacy", [
    privacy_control(eps=1, delta=1e-5, split={"loading": 0.5, "scree": 0.5}),
    privacy_control(eps=1, delta=1e-5, split={"loading": 0.5, "score": 0.5}),
    privacy_control(eps=1, delta=1e-5, split={"loading": 1.0}),
    privacy_control(loading={"eps": 1.0, "delta": 1e-5}, score={"eps": 1.0, "delta": 1e-5}),
])
def test_dp_pca__mismatched_budget_refused_before_any_data_pass(data, privacy):
    counter = CountingScheduler()
    with dask.config.set(scheduler=counter), pytest.raises(
            BudgetError, match="must match the required components"):
        dp_pca(da.from_array(data, chunks=100), privacy=privacy, scree_control=CONTROL)
    assert counter.calls == 0


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"k": 6}, ParameterError, "'k' parameter of dp_pca"),
    ({"axes": (1, 6)}, ParameterError, "'axes' parameter of dp_pca"),
    ({"axes": (2, 2)}, ParameterError, "'axes' parameter of dp_pca"),
    ({"bins": 0}, ParameterError, "'bins' parameter of dp_pca"),
    ({"scree_control": None}, ParameterError, "C_clip"),
    ({"scree_method": "pca"}, ParameterError, "dp_pca"),
    ({"score_method": "dense"}, ParameterError, "'method' parameter of dp_pca"),
    ({"calibration": "exact"}, ParameterError, "'calibration' parameter of dp_pca"),
])
def test_dp_pca__bad_arguments_refused_before_any_data_pass(data, kwargs, error, match):
    counter = CountingScheduler()
    args = {"privacy": privacy_control(eps=1, delta=1e-5), "scree_control": CONTROL, **kwargs}
    with dask.config.set(scheduler=counter), pytest.raises(error, match=match):
        dp_pca(da.from_array(data, chunks=100), **args)
    assert counter.calls == 0


def test_dp_pca__supplied_v_dp_recorded_not_spent(data):
    pc = privacy_control(eps=6, delta=1e-4)
    prior = dp_loading(data, privacy=privacy_control(eps=1, delta=1e-5), rng=4)
    counter = CountingScheduler()
    with dask.config.set(scheduler=counter):
        fit = dp_pca(da.from_array(data, chunks=100), privacy=pc, V_dp=prior, k=2,
                     scree_control=CONTROL, rng=5, preset="seed")
    assert counter.calls == 3 == fit.metadata["passes"]  # no Kendall pass
    first = fit.ledger[0]
    assert (first.component, first.status, first.mechanism) == ("loading", "prior",
                                                                 "supplied V_dp")
    assert first.eps == pytest.approx(2.0)  # the loading third is recorded ...
    assert _alloc(fit, "loading")["status"] == "prior"
    assert _alloc(fit, "scree")["eps"] == pytest.approx(2.0)  # ... and not redistributed
    assert fit.metadata["ledger_total"] == pytest.approx({"eps": 4.0, "delta": 2e-4 / 3})
    np.testing.assert_array_equal(fit.directions.values, prior.directions.values)
    assert "prior release (supplied V_dp)" in repr(fit.summary())


def test_dp_pca__v_dp_matrix_with_fewer_columns(data):
    v = np.linalg.qr(np.random.default_rng(0).normal(size=(5, 3)))[0]
    fit = dp_pca(data, privacy=privacy_control(eps=6, delta=1e-4), V_dp=v, axes=(1, 3),
                 scree_control=CONTROL, rng=6)
    assert fit.scree.k == 3 and fit.directions.shape == (5, 3)
    np.testing.assert_allclose(fit.score.dataset["directions"].values, v[:, [0, 2]])
    with pytest.raises(ParameterError, match="'axes'"):
        dp_pca(data, privacy=privacy_control(eps=6, delta=1e-4), V_dp=v, axes=(1, 4),
               scree_control=CONTROL)


def test_dp_pca__several_methods_each_get_the_full_allocation(data):
    fit = dp_pca(data, privacy=privacy_control(eps=3, delta=3e-5), k=2, rng=7,
                 scree_method=["clipped", "pmwm"],
                 scree_control={"clipped": CONTROL,
                                "pmwm": pmwm_control(a=0, b=40, trim_const=5, eta=0.01)},
                 score_method=["add", "sparse"])
    assert fit.scree.methods == ("clipped", "pmwm") and fit.score.methods == ("add", "sparse")
    # loading + scree (20 % centre once + 80 % per method) + score (35 % frame + 65 % per method)
    expected = 1.0 + (0.2 + 2 * 0.8) + (0.35 + 2 * 0.65)
    assert fit.metadata["ledger_total"]["eps"] == pytest.approx(expected)


# --- shared directions and reads of the input ----------------------------------------------------


def test_dp_pca__parts_share_the_one_loading_release(fit):
    v = fit.loading.directions.values
    np.testing.assert_array_equal(fit.scree.directions.values, v[:, :3])
    np.testing.assert_array_equal(fit.score.dataset["directions"].values, v[:, [0, 1]])
    for part in (fit.scree, fit.score):  # each part records the shared release, never spends it
        loading = [r for r in part.ledger if r.component == "loading"]
        assert len(loading) == 1 and loading[0].status == "prior"
    assert fit.score.groups == ["a", "b"]


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({}, 4),  # frame "auto" resolves to "capped" here (n·ε_frame < 500)
    ({"non_private": True}, 4),
    ({"center": 0.0}, 4),
    ({"frame": "ranged"}, 5),
    ({"frame": "smooth"}, 4),
    ({"scree_method": "pmwm",
      "scree_control": pmwm_control(a=0, b=40, trim_const=5, eta=0.01)}, 5),
])
def test_dp_pca__reads_the_input_the_documented_number_of_times(data, groups, kwargs, expected):
    args = {"scree_control": CONTROL, **kwargs}
    counter = CountingScheduler()
    arr = da.from_array(data, chunks=(90, 5))
    with dask.config.set(scheduler=counter):
        fit = dp_pca(arr, privacy=privacy_control(eps=6, delta=1e-4), k=2, group=groups,
                     rng=10, **args)
    methods = [args["scree_method"]] if "scree_method" in args else ["clipped"]
    documented = expected_reads(scree_methods=methods, center=args.get("center", "private"),
                                frame=args.get("frame", "capped"))
    assert counter.calls == fit.metadata["passes"] == documented == expected


def test_dp_pca__same_seed_same_release(data):
    a = dp_pca(data, privacy=privacy_control(eps=6, delta=1e-4), k=2, scree_control=CONTROL,
               rng=9)
    b = dp_pca(da.from_array(data, chunks=77), privacy=privacy_control(eps=6, delta=1e-4), k=2,
               scree_control=CONTROL, rng=9)
    np.testing.assert_allclose(a.scree.pve.values, b.scree.pve.values)
    np.testing.assert_allclose(a.score.probability.values, b.score.probability.values)


# --- the store, print and summary --------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["zarr", "nc"])
def test_dp_pca__one_store_round_trip(fit, tmp_path, fmt):
    path = tmp_path / f"pca.{fmt}"
    getattr(fit, "to_zarr" if fmt == "zarr" else "to_netcdf")(path)
    back = load_result(path)
    assert isinstance(back, PCAResult) and repr(back) == repr(fit)
    assert repr(back.summary()) == repr(fit.summary())
    np.testing.assert_array_equal(back.loading.directions.values, fit.loading.directions.values)
    np.testing.assert_array_equal(back.score.probability.values, fit.score.probability.values)
    np.testing.assert_array_equal(back.scree.pve.values, fit.scree.pve.values)
    assert back.ledger == fit.ledger
    if fmt == "zarr":
        assert {p.name for p in path.iterdir()} >= {"loading", "scree", "score"}
        assert isinstance(load_result(path / "scree"), ScreeResult)  # a part on its own


def test_dp_pca__print_and_summary(fit):
    text = repr(fit)
    assert text.splitlines() == [
        "Differentially Private PCA",
        "Data: 400 observations x 5 variables",
        "Components: 5 PC directions; scree values for 3 components; scores on PC1 and PC2",
        "Methods: scree clipped ; score histogram add",
        "Total privacy budget: eps = 6 ; delta = 1e-04 ",
        "Non-private reference: not stored ",
    ]
    summary = repr(fit.summary())
    for line in ("DP PCA Summary", "Private PC directions  (first 5 variables x first 4 PCs):",
                 "Private PVE:", "Histogram: 5 x 5 bins; methods: add", "Groups: 2 (a, b)",
                 "  loading: eps = 2 ; delta = 3.333333e-05 (spent once on the shared directions)",
                 "Ledger total (basic composition): eps = 6 ; delta = 1e-04 ",
                 "Data passes: 4 reads of the input",
                 "The parts are available as .loading, .scree and .score."):
        assert line in summary.splitlines()
