"""The Dask Kendall pass equals the NumPy kernels under awkward chunkings (R14a)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from dppca_dask.errors import ChunkingError, DuplicateObservationError, InputError
from dppca_dask.kernels.graph import compute, kendall_layout, kendall_sum, moments, use_compute
from dppca_dask.kernels.kendall import tile_reference


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    rng = np.random.default_rng(11)
    return rng.normal(size=(97, 4)) * [1.0, 2.0, 0.5, 3.0] + 1e5


CHUNKINGS = {
    "single-row blocks": 1,
    "uneven blocks": ((7, 30, 1, 2, 57),),
    "one block": 97,
    "size 13": 13,
}


@pytest.mark.parametrize("chunks", list(CHUNKINGS))
@pytest.mark.parametrize("fast", [True, False])
def test_kendall_sum__dask_equals_numpy(data, chunks, fast):
    expected, pairs = tile_reference(data)
    spec = CHUNKINGS[chunks]
    rows = spec[0] if isinstance(spec, tuple) else spec
    x = da.from_array(data, chunks=(rows, 4))
    graph, layout = kendall_sum(x, fast=fast, keep_chunks=True, unit_pairs=200)
    (s, m), = compute(graph)
    assert m == pairs == layout.n_pairs
    np.testing.assert_allclose(s, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_kendall_sum__column_chunks_and_block_rows(data):
    expected, _ = tile_reference(data)
    x = da.from_array(data, chunks=(10, 3))
    for block_rows in (5, 32, 1000):
        graph, _ = kendall_sum(x, block_rows=block_rows)
        (s, _), = compute(graph)
        np.testing.assert_allclose(s, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_kendall_sum__same_chunking_is_bit_identical(data):
    x = da.from_array(data, chunks=(9, 4))
    results = []
    for scheduler in ("threads", "sync"):
        graph, _ = kendall_sum(x, keep_chunks=True, unit_pairs=100, split_every=3)
        with dask.config.set(scheduler=scheduler):
            (s, _), = compute(graph)
        results.append(s)
    assert np.array_equal(results[0], results[1])


def test_kendall_sum__building_the_graph_computes_nothing(data):
    def refuse(*args, **kwargs):
        raise AssertionError("graph construction triggered a compute")

    x = da.from_array(data, chunks=(10, 4))
    with dask.config.set(scheduler=refuse):
        kendall_sum(x)
        moments(x)


def test_kendall_sum__errors_raised_inside_the_pass(data):
    bad = data.copy()
    bad[50] = bad[3]
    graph, _ = kendall_sum(da.from_array(bad, chunks=(10, 4)))
    with pytest.raises(DuplicateObservationError):
        compute(graph)
    bad = data.copy()
    bad[60, 2] = np.nan
    graph, _ = kendall_sum(da.from_array(bad, chunks=(10, 4)))
    with pytest.raises(InputError, match="finite"):
        compute(graph)


def test_kendall_layout__counts_tiles_from_shape_only():
    layout = kendall_layout(10_000, 30, block_rows=1000)
    assert layout.n_blocks == 10
    assert layout.n_tiles == 55
    assert layout.n_pairs == 10_000 * 9_999 // 2
    assert sum(layout.block_sizes) == 10_000
    with pytest.raises(ChunkingError, match="block_rows"):
        kendall_layout(10, 3, block_rows=0)
    with pytest.raises(ChunkingError, match="split_every"):
        kendall_layout(10, 3, split_every=1)


def test_moments__stable_at_large_offsets():
    rng = np.random.default_rng(5)
    z = rng.normal(size=(200, 3))
    x = da.from_array(z + 1e9, chunks=(17, 3))
    (n, mean, m2), = compute(moments(x))
    assert n == 200
    np.testing.assert_allclose(m2 / (n - 1), np.cov(z, rowvar=False), rtol=1e-6)


def test_use_compute__routes_the_single_compute_point(data):
    calls = []

    def counting(*objs):
        calls.append(len(objs))
        return dask.compute(*objs)

    graph, _ = kendall_sum(da.from_array(data, chunks=(50, 4)))
    with use_compute(counting):
        compute(graph)
    assert calls == [1]
