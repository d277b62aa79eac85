"""Hypothesis properties of K̂: symmetric PSD, trace 1, invariances (R14d)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dppca_dask.kernels.kendall import tile_fast, tile_reference

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
    s, m = tile_fast(x)
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


@common
@given(separated_data())
def test_kendall__fast_equals_reference(x):
    np.testing.assert_allclose(tile_fast(x)[0], tile_reference(x)[0], rtol=0,
                               atol=1e-12 * len(x) ** 2)
