"""Durfee private quantiles: grid oracle, literal-algorithm equivalence, accuracy, validation."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest

from dppca_dask.errors import InputError, ParameterError
from dppca_dask.graph.compute import compute
from dppca_dask.graph.passes import row_block_sum
from dppca_dask.kernels.counts import count_below, signed_count_below
from dppca_dask.privacy.quantiles import durfee_quantile, durfee_upper, upper_grid
from dppca_dask.testing import RRNG
from tests.helpers import literal_quantile, literal_upper


def test_upper_grid__spec_oracle():
    grid = upper_grid(1.01, 4)
    assert grid[:3].tolist() == pytest.approx([0.01, 0.0201, 0.030301], abs=1e-15)
    # The two-sided search's candidates are beta^k - 1 for k = 0, 1, ... (k = i - 1).
    assert [0.0, *grid[:3]] == pytest.approx([0, 0.01, 0.0201, 0.030301])


def test_count_below__strict_and_per_column():
    x = np.array([[0.0, 5.0], [1.0, 1.0], [2.0, 1.0]])
    assert count_below(x, np.array([1.0, 1.5, 5.0, 6.0])).tolist() == [[1, 2, 3, 3], [0, 2, 2, 3]]


@pytest.mark.parametrize("chunks", [1, 7, 100])
def test_count_below__dask_equals_numpy(chunks):
    x = np.random.default_rng(1).normal(size=(100, 3))
    grid = upper_grid(1.01, 500)
    expected = signed_count_below(x, grid, 1.01)
    (got,) = compute(row_block_sum(da.from_array(x, chunks=(chunks, 3)), signed_count_below,
                                   grid, 1.01))
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_durfee_upper__equals_literal_algorithm(seed):
    x = np.abs(RRNG(99).normal(size=300)) * 3
    expected, _ = literal_upper(x, 0.9, 0.5, RRNG(seed))
    got = durfee_upper(x, 0.9, 0.5, rng=RRNG(seed))
    assert got.value == expected
    assert got.records[0].eps == 0.5
    assert got.records[0].delta == 0.0


@pytest.mark.parametrize(("seed", "loc"), [(1, 4.0), (2, -4.0), (3, 0.0), (4, 0.3)])
def test_durfee_quantile__equals_literal_algorithm(seed, loc):
    x = np.asarray(RRNG(7).normal(size=400)) + loc
    expected = literal_quantile(x, 0.5, 1.0, RRNG(seed))
    got = durfee_quantile(x, 0.5, 1.0, rng=RRNG(seed))
    assert got.value == pytest.approx(expected, rel=1e-12, abs=0)
    assert len(got.records) == 2
    assert sum(r.eps for r in got.records) == pytest.approx(1.0)


def test_durfee_quantile__accurate_at_large_eps(global_seed):
    rng = np.random.default_rng(global_seed)
    for loc in (-50.0, -1.0, 2.0, 300.0):
        x = rng.normal(loc, 1.0, size=2000)
        est = durfee_quantile(x, 0.5, 50.0, rng=rng).value
        assert abs(est - np.median(x)) <= 0.02 * abs(np.median(x)) + 0.1


def test_durfee_upper__capped_warns():
    x = np.full(50, 1e6)
    with pytest.warns(UserWarning, match="reached `max_steps`"):
        rel = durfee_upper(x, 0.5, 1.0, max_steps=10, rng=0)
    assert rel.capped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        durfee_upper(x, 0.5, 1.0, rng=0)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"q": 0.0}, ParameterError, "'q' parameter of durfee_upper"),
        ({"q": 1.0}, ParameterError, "'q' parameter"),
        ({"eps": 0.0}, ParameterError, "'eps' parameter"),
        ({"beta": 1.0}, ParameterError, "'beta' parameter"),
        ({"max_steps": 0}, ParameterError, "'max_steps' parameter"),
        ({"x": [1.0, np.nan]}, InputError, "finite"),
        ({"x": [-1.0, 2.0]}, InputError, "valid public lower bound"),
        ({"x": []}, InputError, "at least one value"),
    ],
)
def test_durfee_upper__validation(kwargs, error, match):
    args = {"x": [1.0, 2.0, 3.0], "q": 0.5, "eps": 1.0, **kwargs}
    with pytest.raises(error, match=match):
        durfee_upper(args.pop("x"), args.pop("q"), args.pop("eps"), **args)
