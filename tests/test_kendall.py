"""Tile kernels: fused = unfused = reference = brute-force double loop (SPEC_dppca.md §4.1-4.2)."""

from __future__ import annotations

import numpy as np
import pytest

from dppca_dask.errors import DUPLICATE_MESSAGE, DuplicateObservationError, InputError
from dppca_dask.kernels.kendall import (
    SHIFT_SAMPLE,
    TileStats,
    tile_blas_unfused,
    tile_centre,
    tile_reference,
)
from dppca_dask.kernels.kendall_fused import tile_fused
from tests.helpers import brute_force, kendall_datasets

KERNELS = [tile_fused, tile_blas_unfused, tile_reference]


@pytest.mark.parametrize("name", list(kendall_datasets(0)))
def test_tile__fast_equals_reference_equals_brute_force(name, global_seed):
    x = kendall_datasets(global_seed)[name]
    expected, count = brute_force(x)
    scale = np.abs(expected).max()
    for kernel in KERNELS:
        got, m = kernel(x)
        assert m == count
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * scale)
    half = len(x) // 2
    expected_off, count_off = brute_force(x[:half], x[half:])
    for kernel in KERNELS:
        got, m = kernel(x[:half], x[half:])
        assert m == count_off
        np.testing.assert_allclose(got, expected_off, rtol=0, atol=1e-12 * scale)


def test_tile__trace_equals_pair_count(gaussian_data):
    for kernel in KERNELS:
        s, m = kernel(gaussian_data)
        assert np.trace(s) == pytest.approx(m, rel=1e-13)
        s, m = kernel(gaussian_data[:50], gaussian_data[50:])
        assert np.trace(s) == pytest.approx(m, rel=1e-13)


def test_tile__near_pairs_recomputed_exactly():
    # Pairs whose distance is tiny next to their norms: the Gram identity alone would lose digits.
    rng = np.random.default_rng(3)
    centre = rng.normal(size=6) * 100
    x = centre + rng.normal(size=(30, 6)) * 1e-5
    x[::2] += 50.0  # two tight groups; many near pairs inside each
    expected, _ = brute_force(x)
    for kernel in (tile_fused, tile_blas_unfused):
        got, _ = kernel(x)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("kernel", KERNELS)
def test_tile__duplicates_rejected(kernel):
    x = np.random.default_rng(0).normal(size=(10, 3))
    x[7] = x[2]
    with pytest.raises(DuplicateObservationError, match="undefined for duplicate observations"):
        kernel(x)
    with pytest.raises(DuplicateObservationError) as info:
        kernel(x[:5], x[5:])
    assert str(info.value) == DUPLICATE_MESSAGE


@pytest.mark.parametrize("kernel", KERNELS)
def test_tile__nearly_identical_rows_rejected(kernel):
    x = np.random.default_rng(0).normal(size=(10, 3)) + 1e3
    x[4] = x[1]
    x[4, 0] = np.nextafter(x[1, 0], np.inf)  # distinct floats, distance ~1e-13 < sqrt(eps)
    with pytest.raises(DuplicateObservationError):
        kernel(x)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_tile__non_finite_rejected(kernel, bad):
    x = np.random.default_rng(0).normal(size=(10, 3))
    x[3, 1] = bad
    with pytest.raises(InputError, match="finite"):
        kernel(x)
    with pytest.raises(InputError, match="finite"):
        kernel(x[5:], x[:5])


def test_tile__separated_rows_just_above_threshold_accepted():
    x = np.array([[0.0, 0.0], [2e-8, 0.0], [1.0, 1.0]])
    s, m = tile_fused(x)
    assert m == 3
    assert np.trace(s) == pytest.approx(3.0)


@pytest.mark.parametrize("scale", [1e-4, 1e150, 1e300])
@pytest.mark.parametrize("kernel", KERNELS)
def test_tile__huge_and_tiny_magnitudes(kernel, scale):
    # K̂ is scale invariant; no overflow for any finite input (power-of-two scaling inside).
    x = np.random.default_rng(5).normal(size=(25, 3))
    expected, m = brute_force(x)
    got, count = kernel(x * scale)
    assert count == m
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    half = kernel(x[:10] * scale, x[10:] * scale)[0] + kernel(x[:10] * scale)[0]
    half += kernel(x[10:] * scale)[0]
    np.testing.assert_allclose(half, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("kernel", KERNELS)
def test_tile__tiny_scale_is_duplicates_per_spec(kernel):
    # The duplicate threshold is absolute (‖d‖ ≤ sqrt(eps), SPEC §4.2).
    x = np.random.default_rng(5).normal(size=(10, 3)) * 1e-9
    with pytest.raises(DuplicateObservationError):
        kernel(x)


def _multivariate_t(rng, n, p, nu):
    """Elliptical t(nu): one chi-square mixing variable per row (heavy tails in every direction)."""
    return rng.normal(size=(n, p)) / np.sqrt(rng.chisquare(nu, size=(n, 1)) / nu)


def _awkward_datasets(seed):
    """Data that drag a mid-range shift far from the bulk, or defeat the Gram identity."""
    rng = np.random.default_rng(seed)
    gauss = rng.normal(size=(200, 6))
    rows = rng.permutation(200)[:2]  # 1 % of the rows
    out_1e3, out_1e6, out_far = gauss.copy(), gauss.copy(), gauss.copy()
    out_1e3[rows] *= 1e3
    out_1e6[rows] *= 1e6
    out_far[rows] += 1e6  # two outliers in one place: their pair is near
    centres = rng.normal(size=(4, 6)) * 1e3
    clustered = np.vstack([c + rng.normal(size=(50, 6)) for c in centres])[rng.permutation(200)]
    base = rng.normal(size=(100, 6)) + 10.0
    twins = np.vstack([base, base + rng.normal(size=(100, 6)) * 1e-6])[rng.permutation(200)]
    return {
        "gaussian": gauss,
        "t1.5_offset_1e3": _multivariate_t(rng, 200, 6, 1.5) + 1e3,
        "t3": _multivariate_t(rng, 200, 6, 3.0),
        "outliers_1e3": out_1e3,
        "outliers_1e6": out_1e6,
        "outliers_1e6_together": out_far,
        "clustered": clustered,
        "near_duplicate_rows": twins,
    }


@pytest.mark.parametrize("name", list(_awkward_datasets(0)))
def test_tile__heavy_tails_outliers_clusters_equal_brute_force(name, global_seed):
    # 1e-12 of the matrix scale: diagonal and off-diagonal tiles, every kernel.
    x = _awkward_datasets(global_seed)[name]
    for a, b in ((x, None), (x[:70], x[70:])):
        expected, count = brute_force(a, b)
        atol = 1e-12 * np.abs(expected).max()
        for kernel in KERNELS:
            got, m = kernel(a, b)
            assert m == count
            np.testing.assert_allclose(got, expected, rtol=0, atol=atol)


def test_tile__unfused_recomputes_near_pairs_in_chunks():
    # Under the old mid-range shift nearly every pair of this tile is near.
    x = np.random.default_rng(2).normal(size=(60, 4))
    x[0] *= 1e4
    expected, _ = brute_force(x)
    stats = TileStats()
    got, m = tile_blas_unfused(x, centre="midrange", near_chunk=10, stats=stats)
    assert stats.pairs == m and stats.near > 0.9 * m
    assert stats.largest_chunk == 10 and stats.chunks == -(-stats.near // 10)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


def test_tile_centre__median_stays_in_the_bulk():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(500, 3))
    x[rng.permutation(500)[:25]] *= 1e6  # 5 % wild rows
    centre = tile_centre(x[:200], x[200:])
    assert np.abs(centre).max() < 1.0
    assert np.abs(tile_centre(x[:200], x[200:], centre="midrange")).max() > 1e3
    # a data value of each column (no arithmetic on it), from a strided sample of the rows
    for k in range(3):
        assert centre[k] in x[:, k]


def test_tile_centre__sample_is_bounded_and_deterministic():
    x = np.random.default_rng(0).standard_t(1.5, size=(5 * SHIFT_SAMPLE, 2))
    centre = tile_centre(x[:100], x[100:])
    assert np.array_equal(centre, tile_centre(x[:100].copy(), x[100:].copy()))
    step = -(-len(x) // SHIFT_SAMPLE)
    sample = np.concatenate([x[:100][::step], x[100:][::step]])
    assert len(sample) <= SHIFT_SAMPLE
    assert np.array_equal(centre, np.sort(sample, axis=0)[(len(sample) - 1) // 2])


@pytest.mark.parametrize("kernel", KERNELS)
def test_tile__range_wider_than_the_floats(kernel):
    # x − median overflows here (values ±1.5e308); the kernels shift halved values instead.
    rng = np.random.default_rng(7)
    x = -1.5e308 * (1.0 + 0.01 * rng.normal(size=(30, 3)))
    x[::7] *= -1.0
    expected, count = brute_force(x * 2.0**-600)  # exact rescaling; K̂ is scale invariant
    got, m = kernel(x)
    assert m == count
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    got, _ = kernel(x[:10], x[10:])
    expected, _ = brute_force(x[:10] * 2.0**-600, x[10:] * 2.0**-600)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
