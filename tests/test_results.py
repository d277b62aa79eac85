"""Result objects: xarray schema, atomic writes, loader round trips, no seed in outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from dppca_dask import (
    InputError,
    LoadingResult,
    OutputExistsError,
    PCAResult,
    dp_loading,
    load_result,
    privacy_control,
)
from dppca_dask.results.base import Result, write_atomically
from tests.helpers import example_results


@pytest.fixture(scope="module")
def fit() -> LoadingResult:
    x = np.random.default_rng(3).normal(size=(60, 4))
    return dp_loading(x, privacy=privacy_control(eps=1, delta=1e-5), non_private=True, rng=987654)


def test_result__dataset_schema(fit):
    ds = fit.dataset
    assert isinstance(ds, xr.Dataset)
    assert ds["directions"].dims == ("variable", "component")
    assert ds.attrs["dppca_kind"] == "loading"
    assert ds["directions"].attrs["private"] == 1
    assert ds["nonprivate_directions"].attrs["description"].startswith("NOT PRIVATE")
    meta = json.loads(ds.attrs["dppca_metadata"])
    assert meta["rng"]["seeded"] is True
    assert "987654" not in ds.attrs["dppca_metadata"]


def test_result__is_read_only(fit):
    with pytest.raises(ValueError, match="read-only"):
        fit.directions.values[0, 0] = 1.0
    with pytest.raises(AttributeError):
        fit.dataset = None  # type: ignore[misc]


@pytest.mark.parametrize("suffix", [".zarr", ".nc"])
def test_result__round_trip(fit, tmp_path, suffix):
    path = tmp_path / f"out{suffix}"
    (fit.to_zarr if suffix == ".zarr" else fit.to_netcdf)(path)
    back = load_result(path)
    assert isinstance(back, LoadingResult)
    np.testing.assert_array_equal(back.directions.values, fit.directions.values)
    np.testing.assert_array_equal(back.nonprivate.values, fit.nonprivate.values)
    assert list(back.directions["variable"].values) == ["X1", "X2", "X3", "X4"]
    assert back.metadata == fit.metadata
    assert repr(back) == repr(fit)
    assert repr(back.summary()) == repr(fit.summary())


def test_result__refuses_to_overwrite(fit, tmp_path):
    path = tmp_path / "out.zarr"
    fit.to_zarr(path)
    with pytest.raises(OutputExistsError, match="already exists"):
        fit.to_zarr(path)
    fit.to_zarr(path, overwrite=True)
    assert isinstance(load_result(path), LoadingResult)


def test_write_atomically__failure_leaves_nothing(tmp_path):
    target = tmp_path / "store"

    def broken(tmp):
        (tmp_path / "partial").mkdir()
        import os

        os.makedirs(tmp)
        (tmp_path / tmp).joinpath("half").write_text("x")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_atomically(target, broken)
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["partial"]


def test_write_atomically__overwrite_replaces_only_after_success(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        write_atomically(target, lambda tmp: (_ for _ in ()).throw(RuntimeError("x")),
                         overwrite=True)
    assert target.read_text() == "old"
    write_atomically(target, lambda tmp: open(tmp, "w").write("new"), overwrite=True)
    assert target.read_text() == "new"


def test_load_result__errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_result(tmp_path / "missing.zarr")
    xr.Dataset({"a": ("x", [1.0])}).to_netcdf(tmp_path / "plain.nc", engine="h5netcdf")
    with pytest.raises(InputError, match="not a dppca_dask result"):
        load_result(tmp_path / "plain.nc")
    (tmp_path / "junk.nc").write_text("not netcdf")
    with pytest.raises(InputError, match="not a readable dppca_dask result"):
        load_result(tmp_path / "junk.nc")


@pytest.fixture(scope="module")
def examples() -> dict[str, Result]:
    return example_results()


def _old_names(ds: xr.Dataset) -> xr.Dataset:
    """A dataset as versions before issue 16 wrote it: dimension and coordinate ``method``."""
    return ds.rename({"mechanism": "method"}) if "mechanism" in ds.dims else ds


@pytest.mark.parametrize(("label", "suffix"), [("scree", ".zarr"), ("scree", ".nc"),
                                               ("score", ".zarr"), ("score", ".nc")])
def test_load_result__renames_the_old_method_dimension(examples, tmp_path, label, suffix):
    fit = examples[label]
    old = _old_names(fit.dataset)
    assert "method" in old.dims and "mechanism" not in old.dims
    path = tmp_path / f"old{suffix}"
    if suffix == ".zarr":
        old.to_zarr(path, mode="w", consolidated=False)
    else:
        old.to_netcdf(path, engine="h5netcdf")
    back = load_result(path)
    assert type(back) is type(fit)
    assert "method" not in back.dataset.dims and "method" not in back.dataset.variables
    xr.testing.assert_identical(back.dataset, fit.dataset)
    assert back.mechanisms == fit.mechanisms and len(back.mechanisms) == 2
    name = "scree" if label == "scree" else "probability"
    picked = back.dataset[name].sel(mechanism=fit.mechanisms[1])
    np.testing.assert_array_equal(picked.values, fit.dataset[name].values[1])
    assert repr(back.summary()) == repr(fit.summary())


@pytest.mark.parametrize("suffix", [".zarr", ".nc"])
def test_load_result__renames_the_old_method_dimension_in_dp_pca_stores(examples, tmp_path,
                                                                        suffix):
    fit = examples["pca"]
    tree = fit.to_tree()
    old = xr.DataTree.from_dict({"/": tree.to_dataset(),
                                 **{f"/{p}": _old_names(tree[p].to_dataset())
                                    for p in ("loading", "scree", "score")}})
    assert "method" in old["scree"].dims and "method" in old["score"].dims
    path = tmp_path / f"old{suffix}"
    if suffix == ".zarr":
        old.to_zarr(path, mode="w", consolidated=False)
    else:
        old.to_netcdf(path, engine="h5netcdf")
    back = load_result(path)
    assert isinstance(back, PCAResult)
    for part in ("scree", "score"):
        xr.testing.assert_identical(getattr(back, part).dataset, getattr(fit, part).dataset)
    assert back.scree.scree.sel(mechanism="clipped").dims == ("component",)
    assert repr(back.summary()) == repr(fit.summary())


@pytest.mark.parametrize("label", ["loading", "scree", "score", "covariance", "pca"])
def test_to_zarr__plain_xarray_plots_every_numeric_variable(examples, tmp_path, label):
    # Variable-length strings come back from Zarr v3 as StringDType, which xarray's plotting
    # refuses; the writers store labels fixed-width (<U), and load_result still round-trips.
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fit = examples[label]
    path = tmp_path / f"{label}.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no UnstableSpecificationWarning reaches the user
        fit.to_zarr(path)
    tree = xr.open_datatree(path, engine="zarr", consolidated=False)
    plotted = 0
    for node in tree.subtree:
        ds = node.to_dataset(inherit=False)
        for name, var in ds.variables.items():
            if var.dtype.kind in "OTU":
                assert var.dtype.kind == "U", (label, node.path, name, var.dtype)
        for name, var in ds.data_vars.items():
            if var.dtype.kind in "fiu" and var.size:
                var.plot()
                plt.close("all")
                plotted += 1
    assert plotted >= 2
    back = load_result(path)
    assert repr(back.summary()) == repr(fit.summary())
    if label != "pca":
        xr.testing.assert_identical(back.dataset, fit.dataset)
