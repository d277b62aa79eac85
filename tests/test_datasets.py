"""Synthetic demo data (dppca_dask.io.datasets)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from dppca_dask.errors import OutputExistsError, ParameterError
from dppca_dask.io.data import as_data
from dppca_dask.io.datasets import GAU_MEANS, GAU_SCALES, make_gau, write_demo_dataset


class _Counting:
    """A stand-in generator whose normal draws are 0, 1, 2, ... so the recipe can be checked."""

    def __init__(self) -> None:
        self.next = 0

    def normal(self, loc=0.0, scale=1.0, size=None):
        out = np.arange(self.next, self.next + size, dtype=float)
        self.next += size
        return out

    laplace = exponential = uniform = normal


def test_make_gau__layout():
    df = make_gau(3, rng=0)
    assert df.shape == (15, 21)
    assert list(df.columns) == [f"V{j}" for j in range(1, 21)] + ["group"]
    assert df["group"].tolist() == [f"group{g}" for g in range(1, 6) for _ in range(3)]
    assert all(df[f"V{j}"].dtype == np.float64 for j in range(1, 21))


def test_make_gau__recipe_matches_spec():
    # group g: 20*n draws fill an n x 20 matrix column by column; row i = mu + sqrt(c) Z[i, ::-1]
    n = 4
    df = make_gau(n, rng=_Counting())
    x = df.drop(columns="group").to_numpy()
    for g, (mu, c) in enumerate(zip(GAU_MEANS, GAU_SCALES, strict=True)):
        z = np.arange(g * 20 * n, (g + 1) * 20 * n, dtype=float).reshape(20, n).T
        np.testing.assert_allclose(x[g * n:(g + 1) * n], np.asarray(mu) + np.sqrt(c) * z[:, ::-1])


def test_make_gau__means_and_scales():
    assert GAU_MEANS[1][:6] == (5.0,) * 5 + (0.0,)
    assert GAU_MEANS[3][4:11] == (0.0,) + (-1.0,) * 5 + (0.0,)
    assert GAU_MEANS[4][5:10] == (3.0,) * 5
    assert GAU_MEANS[2][:5] == (-3.0,) * 5
    n = 4000
    df = make_gau(n, rng=1)
    for g, (mu, c) in enumerate(zip(GAU_MEANS, GAU_SCALES, strict=True)):
        block = df[df["group"] == f"group{g + 1}"].drop(columns="group").to_numpy()
        # 6-sigma bounds on the sample mean and variance of each group
        np.testing.assert_allclose(block.mean(axis=0), mu, atol=6 * np.sqrt(c / n))
        np.testing.assert_allclose(block.var(axis=0, ddof=1), c, atol=6 * c * np.sqrt(2 / n))


def test_make_gau__rng():
    np.testing.assert_array_equal(make_gau(5, rng=3).iloc[:, :20], make_gau(5, rng=3).iloc[:, :20])
    assert not np.array_equal(make_gau(5, rng=3).iloc[:, :20], make_gau(5, rng=4).iloc[:, :20])
    gen = np.random.default_rng(9)
    assert make_gau(2, rng=gen).shape == (10, 21)
    with pytest.raises(ParameterError, match="'n_per_group' parameter of make_gau must be an int "
                                             r"in the range \[1, inf\]. Got 0 instead"):
        make_gau(0)
    with pytest.raises(ParameterError, match="'rng' parameter of make_gau"):
        make_gau(2, rng="seed")


def test_write_demo_dataset__round_trip(tmp_path):
    out = write_demo_dataset(tmp_path / "demo.zarr", n_per_group=7, rng=2)
    assert out == str(tmp_path / "demo.zarr")
    expected = make_gau(7, rng=2)
    src = as_data(out, group="group")
    assert src.variables == tuple(f"V{j}" for j in range(1, 21))
    assert (src.n, src.p) == (35, 20)
    np.testing.assert_array_equal(src.array.compute(), expected.iloc[:, :20].to_numpy())
    assert np.asarray(src.groups).tolist() == expected["group"].tolist()
    ds = xr.open_zarr(out, consolidated=False)
    assert ds["X"].dims == ("sample", "variable")
    assert ds["group"].dims == ("sample",)


def test_write_demo_dataset__overwrite(tmp_path):
    out = write_demo_dataset(tmp_path / "demo.zarr", n_per_group=2)
    with pytest.raises(OutputExistsError, match="already exists"):
        write_demo_dataset(out, n_per_group=3)
    write_demo_dataset(out, n_per_group=3, overwrite=True)
    assert as_data(out).n == 15
