"""sampling_control, the histogram sampler and grouped sampling sizes (SPEC_dppca.md §6.7, §7)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dppca_dask import privacy_control
from dppca_dask.errors import InputError, ParameterError
from dppca_dask.kernels.scores import bin_index
from dppca_dask.pca.score import dp_score
from dppca_dask.results.sampling import (
    SamplingControl,
    allocate_sizes,
    as_sampling_control,
    sample_histogram,
    sampling_control,
)
from dppca_dask.testing import RRNG

ALPHA = 1e-6


# --- sampling_control --------------------------------------------------------------------------


def test_sampling_control__seed_default_print():
    assert repr(sampling_control()) == (
        '$method\n[1] "uniform"\n\n$sample_size\nNULL\n\n$bandwidth_scale\nuniform \n   0.25 \n\n'
        'attr(,"class")\n[1] "dppca_sampling_control" "list"                  '
    )


def test_sampling_control__seed_second_example_print():
    ctl = sampling_control(method=("center", "uniform"), sample_size=1000,
                           bandwidth_scale={"center": 0.5, "uniform": 0.2})
    assert repr(ctl) == (
        '$method\n[1] "center"  "uniform"\n\n$sample_size\n[1] 1000\n\n$bandwidth_scale\n'
        ' center uniform \n    0.5     0.2 \n\nattr(,"class")\n'
        '[1] "dppca_sampling_control" "list"                  '
    )
    assert ctl.to_dict() == {"method": ["center", "uniform"], "sample_size": 1000,
                             "bandwidth_scale": {"center": 0.5, "uniform": 0.2}}


def test_sampling_control__resolution_rules():
    assert sampling_control("center").bandwidth == {"center": 0.5}
    assert sampling_control(["uniform", "center"]).bandwidth == {"uniform": 0.25, "center": 0.5}
    assert sampling_control(["center", "uniform"], bandwidth_scale=0).bandwidth == {
        "center": 0.0, "uniform": 0.0}
    assert sampling_control("uniform", bandwidth_scale=[0.3]).bandwidth == {"uniform": 0.3}
    # extra valid names are allowed and ignored
    assert sampling_control("center", bandwidth_scale={"center": 1, "uniform": 2}).bandwidth == {
        "center": 1.0}
    assert sampling_control("unif").method == ("uniform",)  # R partial matching
    assert sampling_control(["c", "center", "u"]).method == ("center", "uniform")  # unique
    assert sampling_control(sample_size=10.0).sample_size == 10
    assert sampling_control(bandwidth_scale=pd.Series({"uniform": 0.1})).bandwidth == {
        "uniform": 0.1}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "gaussian"}, "'method' parameter of sampling_control"),
        ({"method": ""}, "'method' parameter"),
        ({"method": []}, "'method' parameter"),
        ({"method": 3}, "'method' parameter"),
        ({"sample_size": 0}, "'sample_size' parameter of sampling_control must be an int"),
        ({"sample_size": 2.5}, "'sample_size' parameter"),
        ({"sample_size": True}, "'sample_size' parameter"),
        ({"sample_size": "10"}, "'sample_size' parameter"),
        ({"bandwidth_scale": -0.1}, "'bandwidth_scale' parameter"),
        ({"bandwidth_scale": float("nan")}, "'bandwidth_scale' parameter"),
        ({"bandwidth_scale": float("inf")}, "'bandwidth_scale' parameter"),
        ({"bandwidth_scale": True}, "'bandwidth_scale' parameter"),
        ({"bandwidth_scale": "0.5"}, "'bandwidth_scale' parameter"),
        ({"bandwidth_scale": [0.1, 0.2]}, "several values must be named"),
        ({"bandwidth_scale": {"kde": 0.1, "uniform": 0.2}}, "keyed only by 'center'"),
        ({"method": ["center", "uniform"], "bandwidth_scale": {"center": 0.1}},
         "covering every requested method"),
        ({"bandwidth_scale": {"uniform": -1}}, r"'bandwidth_scale\[uniform\]' parameter"),
        ({"bandwidth_scale": pd.Series([0.1, 0.2], index=["uniform", "uniform"])},
         "without duplicated names"),
    ],
)
def test_sampling_control__bad_arguments(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        sampling_control(**kwargs)


def test_as_sampling_control__accepts_controls_and_complete_dicts():
    assert as_sampling_control(None, "f") == sampling_control()
    ctl = as_sampling_control({"method": "center", "sample_size": 5, "bandwidth_scale": None}, "f")
    assert isinstance(ctl, SamplingControl) and ctl.sample_size == 5
    with pytest.raises(ParameterError, match="'sampling' parameter of f must be a "
                       "SamplingControl from sampling_control"):
        as_sampling_control({"method": "center"}, "f")
    with pytest.raises(ParameterError, match="'sampling' parameter of f"):
        as_sampling_control(["uniform"], "f")


# --- the sampler -------------------------------------------------------------------------------


def test_sample_histogram__categories_match_probabilities_chi2():
    prob = np.array([[0.05, 0.0, 0.25], [0.1, 0.3, 0.0], [0.02, 0.08, 0.2]])
    xb, yb = np.array([0.0, 1.0, 2.0, 4.0]), np.array([-1.0, 0.0, 0.5, 1.0])
    size = 40000
    out = sample_histogram(prob, xb, yb, size=size, rng=7,
                           sampling=sampling_control(["center", "uniform"], bandwidth_scale=0))
    for frame in out.values():
        cells = bin_index(frame["pc_y"].to_numpy(), yb) * 3 + bin_index(frame["pc_x"].to_numpy(),
                                                                         xb)
        observed = np.bincount(cells, minlength=9)
        p = prob.ravel()
        assert observed[p == 0].sum() == 0  # only released cells
        expected = size * p[p > 0]
        chi2 = np.sum((observed[p > 0] - expected) ** 2 / expected)
        assert chi2 < stats.chi2.ppf(1 - ALPHA, (p > 0).sum() - 1)


def test_sample_histogram__uniform_within_cells_and_centres():
    prob = np.array([[0.0, 1.0]])
    xb, yb = np.array([0.0, 1.0, 3.0]), np.array([2.0, 2.5])
    out = sample_histogram(prob, xb, yb, size=5000, rng=3,
                           sampling=sampling_control(["center", "uniform"], bandwidth_scale=0))
    assert (out["center"]["pc_x"] == 2.0).all() and (out["center"]["pc_y"] == 2.25).all()
    u = out["uniform"]
    assert stats.kstest((u["pc_x"] - 1.0) / 2.0, "uniform").pvalue > ALPHA
    assert stats.kstest((u["pc_y"] - 2.0) / 0.5, "uniform").pvalue > ALPHA


def test_sample_histogram__jitter_sd_is_scale_times_bin_width():
    prob = np.array([[1.0]])
    xb, yb = np.array([0.0, 2.0]), np.array([0.0, 0.5])
    size = 20000
    out = sample_histogram(prob, xb, yb, size=size, rng=11,
                           sampling=sampling_control("center", bandwidth_scale=0.5))["center"]
    for values, centre, sd in ((out["pc_x"], 1.0, 0.5 * 2.0), (out["pc_y"], 0.25, 0.5 * 0.5)):
        z = (values.to_numpy() - centre) / sd
        stat = np.sum(z**2)
        assert stats.chi2.ppf(ALPHA / 2, size) < stat < stats.chi2.ppf(1 - ALPHA / 2, size)
        assert stats.kstest(z, "norm").pvalue > ALPHA


def test_sample_histogram__empty_histogram_warns_and_returns_no_points():
    with pytest.warns(UserWarning, match="^The private histogram contains no positive probability "
                      "mass; no synthetic score points were generated.$"):
        out = sample_histogram(np.zeros((2, 2)), [0, 1, 2], [0, 1, 2], size=10, rng=0)
    assert out["uniform"].empty and list(out["uniform"].columns) == ["pc_x", "pc_y"]
    with pytest.warns(UserWarning, match="no positive probability mass"):
        sample_histogram(np.array([[np.nan, -1.0]]), [0, 1, 2], [0, 1], size=10, rng=0)


def test_sample_histogram__validation():
    with pytest.raises(InputError, match="^Histogram bin widths must be finite and positive.$"):
        sample_histogram(np.ones((1, 2)), [0, 0, 2], [0, 1], size=3, rng=0)
    with pytest.raises(ParameterError, match="'probability' parameter of sample_histogram"):
        sample_histogram(np.ones((2, 2)), [0, 1], [0, 1], size=3, rng=0)
    with pytest.raises(ParameterError, match="'size' parameter of sample_histogram"):
        sample_histogram(np.ones((1, 1)), [0, 1], [0, 1], rng=0)
    with pytest.raises(ParameterError, match="'size' parameter"):
        sample_histogram(np.ones((1, 1)), [0, 1], [0, 1], size=-1, rng=0)
    with pytest.raises(ParameterError, match="'x_breaks' parameter of sample_histogram must be "
                       "an array of numbers"):
        sample_histogram(np.ones((1, 1)), ["a", "b"], [0, 1], size=1, rng=0)


def test_sample_histogram__accepts_the_r_rng():
    out = sample_histogram(np.array([[0.2, 0.8]]), [0, 1, 2], [0, 1], size=5, rng=RRNG(1))
    assert len(out["uniform"]) == 5


# --- group sizes -------------------------------------------------------------------------------


def test_allocate_sizes__largest_remainder_oracle_and_ties():
    assert allocate_sizes(7, [1000] * 5).tolist() == [2, 2, 1, 1, 1]
    assert allocate_sizes(10, [1, 2, 2]).tolist() == [2, 4, 4]
    assert allocate_sizes(5, [3, 1]).tolist() == [4, 1]
    assert allocate_sizes(100, [0.5, 0.25, 0.25]).sum() == 100
    with pytest.warns(UserWarning, match="^The requested total `sample_size` is small relative "
                      "to the number of groups; at least one group receives zero synthetic "
                      "observations.$"):
        assert allocate_sizes(3, [1000] * 5).tolist() == [1, 1, 1, 0, 0]
    with pytest.raises(ParameterError, match="'weights' parameter of allocate_sizes"):
        allocate_sizes(3, [1, -1])


@pytest.fixture(scope="module")
def grouped_fit():
    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(loc=m, size=(1000, 3)) for m in (-6, -3, 0, 3, 6)])
    groups = np.repeat([f"g{i}" for i in range(5)], 1000)
    return dp_score(x, privacy=privacy_control(eps=4, delta=1e-5), V_dp=np.eye(3),
                    group=groups, method=("add", "sparse"), non_private=True, rng=1)


def test_score_sample__grouped_sizes_and_categories(grouped_fit):
    out = grouped_fit.sample(sampling_control(["center", "uniform"], sample_size=7), rng=2)
    assert list(out) == ["nonprivate", "add", "sparse"]
    for target in out.values():
        for frame in target.values():
            assert frame["group"].value_counts(sort=False).tolist() == [2, 2, 1, 1, 1]
            assert list(frame["group"].cat.categories) == ["g0", "g1", "g2", "g3", "g4"]
            assert list(frame.columns) == ["pc_x", "pc_y", "group"]
    default = grouped_fit.sample(rng=2, targets=["add"])
    assert len(default["add"]["uniform"]) == 5000


def test_score_sample__private_weights_use_released_totals(grouped_fit):
    totals = grouped_fit.dataset["released_total"].sel(mechanism="add").values
    out = grouped_fit.sample(sampling_control(sample_size=1000), group_weights="private",
                             targets="add", rng=3)
    counts = out["add"]["uniform"]["group"].value_counts(sort=False).to_numpy()
    np.testing.assert_array_equal(counts, allocate_sizes(1000, totals))


def test_score_sample__validation(grouped_fit):
    fit = dp_score(np.random.default_rng(0).normal(size=(50, 2)),
                   privacy=privacy_control(eps=4, delta=1e-5), V_dp=np.eye(2), rng=0)
    with pytest.raises(ParameterError, match="'targets' parameter of ScoreResult.sample"):
        fit.sample(targets=["nonprivate"], rng=0)
    with pytest.raises(ParameterError, match="'targets' parameter"):
        fit.sample(targets=3, rng=0)
    with pytest.raises(ParameterError, match="'group_weights' parameter of ScoreResult.sample"):
        grouped_fit.sample(group_weights="equal", rng=0)
    with pytest.raises(ParameterError, match="'sampling' parameter of ScoreResult.sample"):
        grouped_fit.sample("uniform", rng=0)


def test_score_sample__seeded_is_reproducible(grouped_fit):
    a = grouped_fit.sample(rng=5, targets="sparse")["sparse"]["uniform"]
    b = grouped_fit.sample(rng=5, targets="sparse")["sparse"]["uniform"]
    pd.testing.assert_frame_equal(a, b)
