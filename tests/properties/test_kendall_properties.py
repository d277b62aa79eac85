"""Hypothesis properties of K̂: symmetric PSD, trace 1, invariances (R14d), on the production
kernel ``tile_fused`` (and the BLAS baseline), each against the plain reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dppca_dask.kernels.kendall import TileStats, tile_blas_unfused, tile_reference
from dppca_dask.kernels.kendall_fused import tile_fused

rows = st.integers(3, 25)
cols = st.integers(1, 5)


@st.composite
def separated_data(draw):
    """Rows kept apart by a unique first column; the other columns are arbitrary."""
    n, p = draw(rows), draw(cols)
    first = draw(arrays(np.float64, (n, 1), elements=st.integers(-1000, 1000).map(float),
                        unique=True))
    rest = draw(arrays(np.float64, (n, p - 1), elements=st.floats(-1e3, 1e3)))
    return np.hstack([first, rest])


def _k(x: np.ndarray) -> np.ndarray:
    s, m = tile_fused(x)  # the kernel every release runs
    return s / m


common = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@common
@given(separated_data())
def test_kendall__symmetric_psd_trace_one(x):
    k = _k(x)
    assert np.array_equal(k, k.T)
    assert abs(np.trace(k) - 1.0) < 1e-12
    assert np.linalg.eigvalsh(k).min() > -1e-12


@common
@given(separated_data(), st.randoms(use_true_random=False))
def test_kendall__row_order_invariant(x, random):
    order = list(range(len(x)))
    random.shuffle(order)
    np.testing.assert_allclose(_k(x[order]), _k(x), rtol=0, atol=1e-13)


@common
@given(separated_data(), st.floats(-1e6, 1e6), st.floats(1e-3, 1e3))
def test_kendall__translation_and_scale_invariant(x, shift, scale):
    k = _k(x)
    np.testing.assert_allclose(_k(x + shift), k, rtol=0, atol=1e-10)
    np.testing.assert_allclose(_k(x * scale), k, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kernel", [tile_fused, tile_blas_unfused], ids=["fused", "blas"])
@common
@given(x=separated_data())
def test_kendall__kernel_equals_reference(kernel, x):
    s, m = kernel(x)
    ref, m_ref = tile_reference(x)
    assert m == m_ref
    np.testing.assert_allclose(s, ref, rtol=0, atol=1e-12 * len(x) ** 2)


@common
@given(separated_data(), st.integers(1, 24))
def test_kendall__fused_cross_tile_equals_reference(x, cut):
    cut = min(cut, len(x) - 1)  # two row blocks of one dataset: every pair of a x b
    a, b = x[:cut], x[cut:]
    s, m = tile_fused(a, b)
    ref, m_ref = tile_reference(a, b)
    assert m == m_ref == len(a) * len(b)
    np.testing.assert_allclose(s, ref, rtol=0, atol=1e-12 * m)


@st.composite
def outlying_data(draw):
    """Separated rows (unique first column) whose other columns are scaled per row by 10^k,
    k ∈ [-3, 8]: heavy tails and outliers that drag a mid-range far from the bulk."""
    x = draw(separated_data())
    if x.shape[1] > 1:
        powers = draw(arrays(np.float64, (len(x), 1), elements=st.integers(-3, 8).map(float)))
        x[:, 1:] *= 10.0**powers
    return x


@common
@given(outlying_data(), st.integers(1, 24), st.integers(1, 40), st.integers(1, 9))
def test_kendall__fused_on_outliers_equals_reference_any_chunking(x, cut, chunk, panel):
    cut = min(cut, len(x) - 1)
    for a, b in ((x, None), (x[:cut], x[cut:])):
        ref, m_ref = tile_reference(a, b)
        for centre in ("median", "midrange"):
            stats = TileStats()
            s, m = tile_fused(a, b, centre=centre, near_chunk=chunk, panel_rows=panel,
                              stats=stats)
            assert m == m_ref == stats.pairs
            assert stats.near <= m and stats.largest_chunk <= chunk
            assert stats.chunks >= -(-stats.near // chunk)
            np.testing.assert_allclose(s, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
