"""The fused tile kernel: panels, determinism and one compiled signature (R14a)."""

from __future__ import annotations

import numpy as np
import pytest

from dppca_dask.kernels.kendall import tile_blas_unfused, tile_reference
from dppca_dask.kernels.kendall_fused import _weights_panel, tile_fused
from tests.helpers import brute_force, kendall_datasets


@pytest.mark.parametrize("panel_rows", [1, 7, 256])
@pytest.mark.parametrize("name", list(kendall_datasets(0)))
def test_tile_fused__any_panel_height_equals_all_kernels(name, panel_rows, global_seed):
    x = kendall_datasets(global_seed)[name]
    half = len(x) // 3
    for a, b in ((x, None), (x[:half], x[half:])):
        expected, count = brute_force(a, b)
        atol = 1e-12 * np.abs(expected).max()
        got, m = tile_fused(a, b, panel_rows=panel_rows)
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
    for panel_rows in (3, 16):
        got, _ = tile_fused(x, panel_rows=panel_rows)
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
    assert len(_weights_panel.signatures) == 1
