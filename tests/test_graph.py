"""The Dask Kendall pass equals the NumPy kernels under awkward chunkings (R14a)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from dppca_dask.errors import ChunkingError, DuplicateObservationError, InputError
from dppca_dask.graph import kendall_units as graph_module
from dppca_dask.graph.compute import compute, use_compute
from dppca_dask.graph.kendall_layout import kendall_layout
from dppca_dask.graph.kendall_units import kendall_sum
from dppca_dask.graph.moments import moments
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


# --- work units, kernels, blocks mode, out-of-core reads ------------------------------------
def _unit_pairs(layout, unit) -> int:
    sizes = layout.block_sizes
    total = 0
    for i, j, lo, hi in unit:
        if i == j:
            total += sum(sizes[i] - 1 - r for r in range(lo, hi))
        else:
            total += (hi - lo) * sizes[j]
    return total


@pytest.mark.parametrize(
    ("n", "kwargs"),
    [(6_144, {"block_rows": 2048}), (5_000, {}), (40_000, {}),
     (30_000, {"pairs": "blocks", "pair_block": 700})],
)
def test_kendall_layout__units_balanced_and_cover_every_pair(n, kwargs):
    layout = kendall_layout(n, 10, **kwargs)
    counts = [_unit_pairs(layout, u) for u in layout.units]
    assert sum(counts) == layout.n_pairs
    assert len(layout.units) % 12 == 0  # equal shares for 1, 2, 3, 4, 6 or 12 workers
    # Equal to within one row of a block (the granularity of a cut).
    assert max(counts) - min(counts) <= 2 * max(layout.block_sizes)
    seen = {}
    for unit in layout.units:  # pieces never overlap
        for i, j, lo, hi in unit:
            rows = seen.setdefault((i, j), [])
            assert all(hi <= a or lo >= b for a, b in rows)
            rows.append((lo, hi))
    for (i, _), rows in seen.items():
        assert sum(b - a for a, b in rows) == layout.block_sizes[i]


def test_kendall_layout__blocks_mode_groups_by_row_count_only():
    layout = kendall_layout(10, 3, pairs="blocks", pair_block=4)
    assert layout.block_sizes == (4, 3, 3)
    assert layout.n_pairs == 6 + 3 + 3
    assert kendall_layout(10, 3, pairs="blocks", pair_block=100).block_sizes == (10,)
    assert kendall_layout(3, 3, pairs="blocks", pair_block=2).block_sizes == (3,)
    with pytest.raises(ChunkingError, match="pair_block"):
        kendall_layout(10, 3, pairs="blocks", pair_block=1)
    with pytest.raises(ChunkingError, match="pairs"):
        kendall_layout(10, 3, pairs="some")


@pytest.mark.parametrize("kernel", ["fused", "unfused", "reference"])
def test_kendall_sum__every_kernel_and_bad_name(data, kernel):
    expected, _ = tile_reference(data)
    graph, _ = kendall_sum(da.from_array(data, chunks=(20, 4)), kernel=kernel, block_rows=30,
                           unit_pairs=500)
    (s, _), = compute(graph)
    np.testing.assert_allclose(s, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    with pytest.raises(ChunkingError, match="kernel"):
        kendall_sum(da.from_array(data), kernel="cpp")


@pytest.mark.parametrize("chunks", list(CHUNKINGS))
def test_kendall_sum__blocks_mode_ignores_chunking(data, chunks):
    # The groups come from n and pair_block only: every chunking gives the same bits.
    spec = CHUNKINGS[chunks]
    rows = spec[0] if isinstance(spec, tuple) else spec
    reference, count = None, 0
    for x in (da.from_array(data, chunks=(rows, 4)), da.from_array(data, chunks=(97, 2))):
        graph, layout = kendall_sum(x, pairs="blocks", pair_block=25, keep_chunks=True,
                                    unit_pairs=100)
        (s, m), = compute(graph)
        reference = s if reference is None else reference
        assert np.array_equal(s, reference)
        count = m
    assert layout.block_sizes == (25, 24, 24, 24)
    groups = np.split(data, np.cumsum(layout.block_sizes)[:-1])
    expected = sum(tile_reference(g)[0] for g in groups)
    assert count == sum(tile_reference(g)[1] for g in groups)
    np.testing.assert_allclose(reference, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


def test_kendall_sum__reread_equals_persist_bit_for_bit(data, tmp_path, monkeypatch):
    import zarr

    store = zarr.create_array(str(tmp_path / "x.zarr"), shape=data.shape, chunks=(16, 4),
                              dtype="f8")
    store[:] = data
    x = da.from_zarr(store)
    results = []
    for reread in (False, True, "auto"):
        graph, _ = kendall_sum(x, block_rows=30, unit_pairs=300, reread=reread)
        (s, m), = compute(graph)
        results.append(s)
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])
    graph, _ = kendall_sum(x, block_rows=30, reread=True)
    assert "zarr" not in str(graph.dask.keys())  # no block-load tasks: each unit reads its rows
    assert "zarr" in str(kendall_sum(x, block_rows=30, reread="auto")[0].dask.keys())  # small
    monkeypatch.setattr(graph_module, "PERSIST_MAX_BYTES", 0)
    assert "zarr" not in str(kendall_sum(x, block_rows=30, reread="auto")[0].dask.keys())
    assert "zarr" in str(kendall_sum(x, block_rows=5, reread="auto")[0].dask.keys())  # big chunks


def test_compute__blas_single_threaded_inside_tasks(data):
    from threadpoolctl import threadpool_info

    def blas_threads(_):
        return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"),
                   default=1)

    x = da.from_array(data, chunks=(50, 4))
    (threads,) = compute(x.map_blocks(blas_threads, chunks=(1,), drop_axis=1, dtype=int))
    assert set(threads.tolist()) == {1}


def test_check_matrix_memory__refuses_before_any_data_is_read():
    """3 rows x 10^6 columns used to end in numpy's 'Unable to allocate 7.28 TiB'."""
    import dppca_dask as dp
    from dppca_dask.graph.memory import MATRIX_COPIES, check_matrix_memory

    check_matrix_memory(100, "x", available=MATRIX_COPIES * 8 * 100 * 100)  # fits exactly
    with pytest.raises(InputError, match=r"1e\+06 x 1e\+06|1000000 x 1000000"):
        check_matrix_memory(10 ** 6, "x", available=2 ** 34)
    with pytest.raises(InputError, match="Use fewer columns"):
        dp.dp_loading(np.zeros((3, 10 ** 6)), privacy=dp.privacy_control(eps=1.0, delta=1e-5))
