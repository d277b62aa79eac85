"""The fused tile kernel: panels, determinism and one compiled signature (R14a)."""

from __future__ import annotations

import itertools
import threading
import tracemalloc

import numpy as np
import pytest

from dppca_dask.kernels import kendall_fused
from dppca_dask.kernels.kendall import TileStats, tile_blas_unfused, tile_reference
from dppca_dask.kernels.kendall_fused import (
    scratch_sizes,
    tile_fused,
)
from tests.helpers import brute_force, kendall_datasets


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """Pin BLAS to one thread, as :func:`dppca_dask.graph.compute.compute` and Dask's nanny do
    for every release: OpenBLAS picks its dgemm kernel by thread count, so the kernel's bits
    (and its grouping heuristics, which use float32 GEMMs) are reproducible for one thread
    count, not across them (measured: 256 x 20 @ 20 x 700 differs in the last bit between 1
    and 2 threads). Without the pin these tests compare bits across whatever another test or
    a leftover thread in the same worker process set."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.mark.parametrize(("panel_rows", "panel_cols"),
                         [(1, 1024), (7, 1024), (256, 1024), (7, 5), (256, 64), (3, 1)])
@pytest.mark.parametrize("name", list(kendall_datasets(0)))
def test_tile_fused__any_panel_height_equals_all_kernels(name, panel_rows, panel_cols,
                                                         global_seed):
    # panel_cols: the column chunks of a panel (the production 1024 is wider than these tiles)
    x = kendall_datasets(global_seed)[name]
    half = len(x) // 3
    for a, b in ((x, None), (x[:half], x[half:])):
        expected, count = brute_force(a, b)
        atol = 1e-12 * np.abs(expected).max()
        got, m = tile_fused(a, b, panel_rows=panel_rows, panel_cols=panel_cols)
        assert m == count
        np.testing.assert_allclose(got, expected, rtol=0, atol=atol)
        for other in (tile_blas_unfused, tile_reference):
            np.testing.assert_allclose(got, other(a, b)[0], rtol=0, atol=atol)


def test_tile_fused__near_pairs_across_panels_and_triangle():
    # Near pairs on both sides of panel boundaries and of the diagonal of a diagonal tile.
    rng = np.random.default_rng(4)
    x = rng.normal(size=(40, 3)) * 1e-6 + 1e3
    x[rng.permutation(40)[:20]] += 7.0
    expected, _ = brute_force(x)
    for panel_rows, panel_cols in ((3, 1024), (16, 1024), (3, 4), (16, 7)):
        got, _ = tile_fused(x, panel_rows=panel_rows, panel_cols=panel_cols)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


def test_tile_fused__same_input_same_bits():
    x = np.random.default_rng(9).standard_t(2.0, size=(300, 6)) + 1e4
    first = tile_fused(x[:120], x[120:])[0]
    assert np.array_equal(first, tile_fused(x[:120], x[120:])[0])
    assert np.array_equal(tile_fused(x)[0], tile_fused(x.copy())[0])


def test_tile_fused__degenerate_tiles():
    x = np.random.default_rng(1).normal(size=(5, 2))
    s, m = tile_fused(x[:1])
    assert m == 0 and not s.any()
    s, m = tile_fused(x[:1], x[1:2])
    assert m == 1
    np.testing.assert_allclose(s, brute_force(x[:1], x[1:2])[0], atol=1e-15)


def test_tile_fused__one_compiled_signature():
    # Every call shape shares one numba signature: compile time is paid once (and cached).
    rng = np.random.default_rng(0)
    for shape in ((3, 1), (20, 4), (50, 7)):
        x = rng.normal(size=shape)
        tile_fused(x)
        tile_fused(x.astype(np.float32), x[::-1] + 10.0)
        tile_fused(np.asfortranarray(x))
        tile_fused(_all_near(shape[0], shape[1]), centre="midrange", near_chunk=3)
    # the loops are compiled on the first call (numba imported lazily): read them now
    assert len(kendall_fused._weights_panel.signatures) == 1
    assert len(kendall_fused._near_pairs.signatures) == 1
    assert len(kendall_fused._row_pairs.signatures) == 1


def _heavy(kind, n, p, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, p))
    if kind == "t1.5":  # multivariate t(1.5)
        return z / np.sqrt(rng.chisquare(1.5, size=(n, 1)) / 1.5) + 100.0
    if kind == "t3":
        return z / np.sqrt(rng.chisquare(3.0, size=(n, 1)) / 3.0)
    z[rng.permutation(n)[: n // 100]] *= {"outliers_1e3": 1e3, "outliers_1e6": 1e6}[kind]
    return z


@pytest.mark.parametrize("kind", ["t1.5", "t3", "outliers_1e3", "outliers_1e6"])
@pytest.mark.parametrize("p", [3, 10, 40])
def test_tile_fused__heavy_tails_stay_on_the_fast_path(kind, p):
    # The mid-range shift sent 79-98 % of such pairs to the exact path (docs/performance.md
    # §1b); the median centre keeps them on the Gram path (and an absolute near floor of 1e-12
    # made the bulk "near" next to outliers at 1e6 when p was small).
    x = _heavy(kind, 1200, p, seed=p)
    for a, b in ((x[:600], x[600:]), (x[:700], None)):
        stats = TileStats()
        tile_fused(a, b, stats=stats)
        assert stats.near_fraction < 1e-3, stats


def test_tile_fused__old_midrange_shift_took_the_slow_path():
    # What the test above guards against: outliers drag the mid-range far from the bulk.
    x = _heavy("outliers_1e3", 800, 10, seed=0)
    old, new = TileStats(), TileStats()
    s_old, _ = tile_fused(x[:400], x[400:], centre="midrange", stats=old)
    s_new, _ = tile_fused(x[:400], x[400:], stats=new)
    assert old.near_fraction > 0.9 and new.near == 0
    np.testing.assert_allclose(s_new, s_old, rtol=0, atol=1e-12 * np.abs(s_old).max())


def _all_near(n, p, seed=0):
    """A tight cloud and one far row: with the mid-range centre every cloud pair is near."""
    x = np.random.default_rng(seed).normal(size=(n, p))
    x[0] += 1e5
    return x


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_tile_fused__near_pairs_recomputed_in_bounded_chunks(chunk):
    x = _all_near(90, 4)
    for a, b in ((x, None), (x[:40], x[40:])):
        stats = TileStats()
        got, m = tile_fused(a, b, centre="midrange", near_chunk=chunk, panel_rows=16,
                            stats=stats)
        assert stats.near >= 0.95 * m
        assert stats.largest_chunk <= chunk
        expected, _ = tile_reference(a, b)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
        assert np.array_equal(got, tile_fused(a, b, centre="midrange", near_chunk=chunk,
                                              panel_rows=16)[0])


def test_tile_fused__exact_path_buffers_have_a_fixed_size():
    # Ten times the near pairs, the same buffers: nothing grows with the number of near pairs.
    # (A fresh thread: the scratch buffers are per thread and keep their largest size.)
    p, sizes = 6, []

    def run():
        for n in (60, 600):
            stats = TileStats()
            tile_fused(_all_near(n, p), centre="midrange", near_chunk=50, stats=stats)
            assert stats.near > 0.99 * n * (n - 1) // 2 - n and stats.largest_chunk == 50
            sizes.append({k: v for k, v in scratch_sizes().items() if k.startswith("near_")})

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert len(sizes) == 2
    assert sizes[0] == sizes[1] == {"near_i": 400, "near_j": 400, "near_a": 50 * p * 8,
                                    "near_b": 50 * p * 8}


def test_tile_fused__memory_does_not_grow_with_near_pairs():
    # 80k near pairs at p = 20: one batch (the old kernel) held ~40 p bytes per pair = 60 MiB.
    x = _all_near(400, 20)
    tracemalloc.start()
    try:
        stats = TileStats()
        tile_fused(x, centre="midrange", stats=stats)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert stats.near > 75_000
    assert peak < 8 * 2**20, peak


@pytest.mark.parametrize(("rows_a", "rows_b"), [(1, 1), (1, 300), (2, 257), (255, 3),
                                                (257, 256), (300, None), (257, None)])
def test_tile_fused__awkward_tile_sizes(rows_a, rows_b):
    x = _heavy("t1.5", 600, 5, seed=rows_a)
    a = x[:rows_a]
    b = None if rows_b is None else x[300 : 300 + rows_b]
    expected, count = tile_reference(a, b)
    scale = max(np.abs(expected).max(), 1.0)
    for panel_rows, chunk, cols in ((256, None, 1024), (7, 3, 1024), (1, 1, 1024), (7, 3, 33),
                                    (256, None, 100)):
        got, m = tile_fused(a, b, panel_rows=panel_rows, near_chunk=chunk, panel_cols=cols)
        assert m == count
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * scale)


def test_tile_fused__heavy_tails_same_input_same_bits():
    x = _heavy("outliers_1e6", 300, 7, seed=3)
    x[::50] += 1e4  # some near pairs too
    for kwargs in ({}, {"centre": "midrange", "near_chunk": 13}):
        first = tile_fused(x[:120], x[120:], **kwargs)[0]
        assert np.array_equal(first, tile_fused(x[:120].copy(), x[120:].copy(), **kwargs)[0])
        assert np.array_equal(tile_fused(x, **kwargs)[0], tile_fused(x, **kwargs)[0])


def _clusters(n, p, k, *, spread=1.0, sep=1e3, offset=0.0, seed=0):
    """k tight clusters far apart (relative to their spread), rows in random order: the
    tile's one centre lies in none of them, so every within-cluster pair is near there."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, p)) * sep
    return centres[rng.integers(0, k, n)] + rng.normal(size=(n, p)) * spread + offset


@pytest.mark.parametrize(("k", "p", "offset", "spread"), [
    (2, 3, 0.0, 1.0), (4, 20, 0.0, 1.0), (8, 5, 1e9, 1.0), (30, 4, 0.0, 1.0),
    (3, 6, 0.0, 1e290),  # magnitudes near the float range: the halved shift
])
def test_tile_fused__clustered_tiles_switch_to_per_panel_centres(k, p, offset, spread):
    x = _clusters(700, p, k, spread=spread, sep=1e3 * spread, offset=offset, seed=k)
    for a, b in ((x, None), (x[:300], x[300:])):
        expected, count = tile_reference(a, b)  # overflow-safe (brute force is not at 1e290)
        atol = 1e-12 * np.abs(expected).max()
        one = TileStats()
        single, _ = tile_fused(a, b, switch=False, stats=one)
        for panel_rows in (256, 16):
            stats = TileStats()
            got, m = tile_fused(a, b, panel_rows=panel_rows, stats=stats)
            assert m == count and stats.pairs == count
            assert stats.switched == 1, stats
            assert stats.near < 0.25 * one.near, (stats, one)  # back on the Gram path
            np.testing.assert_allclose(got, expected, rtol=0, atol=atol)
            np.testing.assert_allclose(got, single, rtol=0, atol=atol)
            assert np.array_equal(got, tile_fused(a.copy(), None if b is None else b.copy(),
                                                  panel_rows=panel_rows)[0])


def test_tile_fused__switch_threshold_and_unclustered_data():
    rng = np.random.default_rng(3)
    for x in (rng.normal(size=(600, 8)) + 1e3, _heavy("t1.5", 600, 8, seed=1),
              _heavy("outliers_1e6", 600, 8, seed=2)):
        stats = TileStats()
        tile_fused(x[:300], x[300:], stats=stats)
        assert stats.switched == 0 and stats.near == 0
    few = _clusters(60, 4, 2)  # ~450 near pairs: below SWITCH_MIN_NEAR, the exact path
    stats = TileStats()
    got, _ = tile_fused(few, stats=stats)
    assert stats.switched == 0 and stats.near > 0
    np.testing.assert_allclose(got, brute_force(few)[0], rtol=0, atol=1e-12 * 1770)


def test_tile_fused__duplicates_inside_a_cluster_are_refused_after_the_switch():
    from dppca_dask.errors import DuplicateObservationError

    x = _clusters(500, 4, 4)
    x[400] = x[17]
    with pytest.raises(DuplicateObservationError):
        tile_fused(x)
    stats = TileStats()
    with pytest.raises(DuplicateObservationError):
        tile_fused(x[:250], x[250:], stats=stats)


def test_cluster_order__a_permutation_grouping_tight_clusters():
    x = _clusters(1000, 6, 5, seed=8)
    order, sizes = kendall_fused.cluster_order(x)
    assert sorted(order.tolist()) == list(range(1000)) and sizes.sum() == 1000
    # each group is one cluster: the rows of a group are close to one another
    lo = 0
    for size in sizes.tolist():
        group = x[order[lo:lo + size]]
        assert np.ptp(group, axis=0).max() < 20.0  # spread 1; clusters ~1e3 apart
        lo += size
    assert len(sizes) == 5
    ones = kendall_fused.cluster_order(np.full((7, 3), 2.5))
    assert ones[0].tolist() == list(range(7)) and ones[1].tolist() == [7]
    big = kendall_fused.cluster_order(_clusters(200, 3, 3, spread=1e300, sep=1e300, seed=1))
    assert sorted(big[0].tolist()) == list(range(200))


# --- clustered data and point masses through whole tiles, pieces and the Dask pass -----------
def _kind(name, n, p, seed=20270101):
    """Kinds of data the benchmarks' held-out table does not share a seed with: a spiked
    Gaussian in a random basis and its variants, 4-64 tight clusters, a Cauchy bulk with a
    20 % point mass, and a point mass inside one of three clusters (groups within groups)."""
    rng = np.random.default_rng([seed, p, n])
    values = np.r_[10.0, 6.0, 4.0, np.ones(max(p - 3, 0))][:p]
    basis = np.linalg.qr(rng.normal(size=(p, p)))[0]

    def gauss(vals=values):
        return (rng.normal(size=(n, p)) * np.sqrt(vals)) @ basis.T

    if name.startswith("clusters") or name == "mass_in_cluster":
        k = 3 if name == "mass_in_cluster" else int(name.split("_")[1])
        centres = rng.normal(size=(k, p)) * 10.0 * np.sqrt(values.mean())
        label = rng.integers(0, k, n)
        x = centres[label] + gauss() / 10.0
        if name == "mass_in_cluster":  # 30 % of the first cluster at one point off its centre
            at = (label == 0) & (rng.random(n) < 0.3)
            x[at] = x[label == 0].mean(axis=0) + 0.3 + 1e-7 * rng.normal(size=(int(at.sum()), p))
        return x
    if name == "cauchy_point_mass":
        x = gauss() / np.abs(rng.normal(size=(n, 1)))  # multivariate t(1)
        at = rng.random(n) < 0.2
        x[at] = x[0] + 1e-6 * rng.normal(size=(int(at.sum()), p))
        return x
    return {
        "gaussian": gauss,
        "units_1e-6": lambda: gauss() * 1e-6,
        "units_1e6": lambda: gauss() * 1e6,
        "offset_1e6": lambda: gauss() + 1e6 * np.sqrt(values.mean()),
        "t2": lambda: gauss() / np.sqrt(rng.chisquare(2.0, size=(n, 1)) / 2.0),
        "near_singular": lambda: gauss(np.logspace(0, -8, p)),
    }[name]()


KINDS = ("gaussian", "units_1e-6", "units_1e6", "offset_1e6", "t2", "near_singular",
         "clusters_4", "clusters_16", "clusters_64", "cauchy_point_mass", "mass_in_cluster")
GROUPED = {"clusters_4", "clusters_16", "clusters_64", "cauchy_point_mass", "mass_in_cluster"}


def _pieces_reference(x, rows):
    """tile_reference of a diagonal tile's piece: rows lo:hi against the rows after each."""
    lo, hi = rows
    s, m = tile_reference(x[lo:hi])
    if hi < len(x):
        t, k = tile_reference(x[lo:hi], x[hi:])
        s, m = s + t, m + k
    return s, m


@pytest.mark.parametrize("kind", KINDS)
def test_tile_fused__held_out_kinds_exact_on_tiles_and_pieces(kind):
    # 1e-14 of the largest entry against the plain reference kernel, on the whole diagonal
    # tile, on work-unit pieces of it (rows=), on an off-diagonal tile and its pieces, at two
    # panel heights; clustered data and point masses stay on the Gram path (grouped). p = 16:
    # at p = 8 the near-singular kind is nearly 1-dimensional, where the one-centre Gram path
    # (old and new) rounds to 3-13e-15 (docs/performance.md §1b).
    x = _kind(kind, 800, 16)
    a, b = x[:300], x[300:]
    cases = [(x, None, None), (x, None, (0, 200)), (x, None, (200, 530)),
             (x, None, (530, 800)), (a, b, None), (a, b, (0, 170)), (a, b, (170, 300))]
    for u, v, rows in cases:
        if v is None:
            expected, count = _pieces_reference(u, rows or (0, len(u)))
        else:
            lo, hi = rows or (0, len(u))
            expected, count = tile_reference(u[lo:hi], v)
        atol = 1e-14 * np.abs(expected).max()
        for panel_rows, cols in ((256, 1024), (7, 1024), (256, 96)):
            stats = TileStats()
            got, m = tile_fused(u, v, rows=rows, panel_rows=panel_rows, panel_cols=cols,
                                stats=stats)
            assert m == count == stats.pairs
            np.testing.assert_allclose(got, expected, rtol=0, atol=atol)
            if kind in GROUPED and count >= kendall_fused.GROUP_MIN_PAIRS:
                assert stats.switched == 1 and stats.groups >= 1, (kind, rows, stats)
                # (a group expected to hold fewer near pairs than GROUP_MIN_NEAR keeps them)
                assert stats.near < max(0.01 * count, 2 * kendall_fused.GROUP_MIN_NEAR), \
                    (kind, rows, stats)
            elif kind not in GROUPED:
                assert stats.switched == 0 and stats.near == 0, (kind, rows, stats)


def test_tile_fused__pieces_add_up_to_the_tile_bit_for_bit_per_piece():
    x = _kind("clusters_16", 700, 5)
    whole, m = tile_fused(x)
    cuts = [0, 90, 91, 400, 700]
    parts = [tile_fused(x, rows=(lo, hi)) for lo, hi in itertools.pairwise(cuts)]
    assert sum(k for _, k in parts) == m
    np.testing.assert_allclose(sum(s for s, _ in parts), whole, rtol=0,
                               atol=1e-14 * np.abs(whole).max())
    again = tile_fused(x.copy(), rows=(91, 400))[0]
    assert np.array_equal(parts[2][0], again)


def test_tile_fused__results_do_not_depend_on_the_tile_context_cache():
    x = _kind("cauchy_point_mass", 600, 6)
    warm = tile_fused(x, rows=(100, 400))[0]
    kendall_fused._SCRATCH.__dict__.pop("contexts", None)
    cold = tile_fused(x, rows=(100, 400))[0]
    assert np.array_equal(warm, cold)
    for k in range(2 * kendall_fused.CONTEXTS):  # evictions
        tile_fused(x[: 300 + k])
    assert np.array_equal(tile_fused(x, rows=(100, 400))[0], cold)


def test_tile_fused__groups_within_groups():
    # A point mass inside a cluster: the cluster's group is analysed again on its pivot, so
    # the point mass gets a pivot of its own (else its pairs are near on the cluster's).
    x = _kind("mass_in_cluster", 900, 6)
    centre, groups = kendall_fused._tile_context(x, None, True)
    assert groups is not None and any(inner is not None for inner in groups.inner)
    flat = TileStats()
    original = kendall_fused.MAX_DEPTH
    try:
        kendall_fused.MAX_DEPTH = 1
        kendall_fused._SCRATCH.__dict__.pop("contexts", None)
        one_level = tile_fused(x, stats=flat)[0]
    finally:
        kendall_fused.MAX_DEPTH = original
        kendall_fused._SCRATCH.__dict__.pop("contexts", None)
    nested = TileStats()
    got, _ = tile_fused(x, stats=nested)
    assert nested.near < 0.1 * flat.near, (nested, flat)
    expected = tile_reference(x)[0]
    for s in (got, one_level):
        np.testing.assert_allclose(s, expected, rtol=0, atol=1e-14 * np.abs(expected).max())


def test_tile_fused__restart_when_the_analysis_misses_the_clusters(monkeypatch):
    # The analysis' sample decides before the pass; if it saw no structure, the pass's own
    # near count still restarts the tile with per-panel centres (the fallback).
    monkeypatch.setattr(kendall_fused, "_analyse", lambda *args, **kwargs: None)
    kendall_fused._SCRATCH.__dict__.pop("contexts", None)
    x = _clusters(700, 5, 4, seed=3)
    try:
        for rows in (None, (100, 500)):
            stats = TileStats()
            got, _ = tile_fused(x, rows=rows, stats=stats)
            assert stats.switched == 1 and stats.groups == 0
            expected = _pieces_reference(x, rows or (0, 700))[0]
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-14 * np.abs(expected).max())
    finally:
        kendall_fused._SCRATCH.__dict__.pop("contexts", None)


@pytest.mark.parametrize("k", [4, 64])
def test_tile_fused__duplicates_inside_local_groups_are_refused(k):
    # k = 4: the groups' blocks go to BLAS; k = 64: to the compiled loop.
    from dppca_dask.errors import DuplicateObservationError

    x = _kind(f"clusters_{k}", 800, 5)
    x[650] = x[150]
    for rows in (None, (100, 300)):
        stats = TileStats()
        with pytest.raises(DuplicateObservationError):
            tile_fused(x, rows=rows, stats=stats)
        assert stats.switched == 1


@pytest.mark.parametrize("kind", ["clusters_16", "cauchy_point_mass", "gaussian"])
def test_kendall_sum__grouped_pass_under_awkward_chunkings(kind):
    import dask.array as da

    from dppca_dask.graph.compute import compute
    from dppca_dask.graph.kendall_units import kendall_sum

    x = _kind(kind, 1500, 5)
    expected, count = tile_reference(x)
    atol = 1e-14 * np.abs(expected).max()
    for chunks, kwargs in (((337, 5), {"keep_chunks": True, "unit_pairs": 40_000}),
                           ((1500, 5), {"unit_pairs": 70_000}),
                           ((100, 5), {"block_rows": 611, "unit_pairs": 100_000})):
        graph, _ = kendall_sum(da.from_array(x, chunks=chunks), **kwargs)
        (got, m), = compute(graph)
        assert m == count
        np.testing.assert_allclose(got, expected, rtol=0, atol=atol)


@pytest.mark.slow
def test_tile_fused__compiled_loops_stay_in_bounds(tmp_path):
    # The loops are compiled without bounds checks (speed); a read past a row is garbage that
    # changes results from run to run (seen: _shift_rows read one column past x). Run every
    # held-out kind, whole tiles and pieces, with numba's bounds checks forced on.
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    script = textwrap.dedent("""
        from tests.test_kendall_fused import KINDS, _kind
        from dppca_dask.kernels.kendall_fused import tile_fused
        for kind in KINDS:
            x = _kind(kind, 700, 6)
            for a, b, rows in ((x, None, None), (x, None, (90, 400)), (x[:300], x[300:], None),
                               (x[:300], x[300:], (0, 170))):
                for panel_rows, cols in ((256, 1024), (7, 1024), (256, 96), (7, 13)):
                    tile_fused(a, b, rows=rows, panel_rows=panel_rows, panel_cols=cols)
        print("in bounds")
    """)
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], check=False, env=env, capture_output=True,
                          text=True, timeout=600, cwd=Path(__file__).parents[1])
    assert done.returncode == 0 and "in bounds" in done.stdout, done.stderr[-3000:]
