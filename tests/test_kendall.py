"""Tile kernels: fused = unfused = reference = brute-force double loop (SPEC_dppca.md §4.1-4.2)."""

from __future__ import annotations

import numpy as np
import pytest

from dppca_dask.errors import DUPLICATE_MESSAGE, DuplicateObservationError, InputError
from dppca_dask.kernels.kendall import tile_blas_unfused, tile_reference
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
