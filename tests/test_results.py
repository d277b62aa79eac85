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
        for var in ds.data_vars.values():
            if var.dtype.kind in "fiu" and var.size:
                var.plot()
                plt.close("all")
                plotted += 1
    assert plotted >= 2
    back = load_result(path)
    assert repr(back.summary()) == repr(fit.summary())
    if label != "pca":
        xr.testing.assert_identical(back.dataset, fit.dataset)


@pytest.mark.parametrize("suffix", [".zarr", ".nc"])
@pytest.mark.parametrize("label", ["loading", "scree", "score", "covariance", "pca"])
def test_written_results__carry_cf_metadata_and_readable_provenance(examples, tmp_path, label,
                                                                    suffix):
    import json

    from dppca_dask.results.cf import CONVENTIONS, DIMENSIONLESS, SCALE

    fit = examples[label]
    path = tmp_path / f"{label}{suffix}"
    (fit.to_zarr if suffix == ".zarr" else fit.to_netcdf)(path)
    engine = "zarr" if suffix == ".zarr" else "h5netcdf"
    tree = xr.open_datatree(path, engine=engine, **({"consolidated": False} if engine == "zarr"
                                                      else {}))
    seen_units = seen_scale = 0
    for node in tree.subtree:
        ds = node.to_dataset(inherit=False)
        meta = json.loads(ds.attrs["dppca_metadata"])
        assert ds.attrs["Conventions"] == CONVENTIONS, node.path
        assert ds.attrs["source"] == f"dppca_dask {meta['version']}"
        assert f"{meta['n']} observations x {meta['p']} variables" in ds.attrs["history"]
        assert ds.attrs["comment"] == ds.attrs["dppca_guarantee"]  # the examples are seeded:
        assert ds.attrs["comment"].startswith("NOT PRIVATE")  # every node says so, the root too
        assert ds.attrs["dppca_n"] == meta["n"] and ds.attrs["dppca_p"] == meta["p"]
        assert ds.attrs["dppca_rng_seeded"] == 1
        for key, value in meta.get("ledger_total", {}).items():
            assert ds.attrs[f"dppca_ledger_total_{key}"] == value
        for name, var in ds.variables.items():
            assert var.attrs.get("long_name"), (label, node.path, name)
            if name in DIMENSIONLESS:
                assert var.attrs["units"] == "1"
                seen_units += 1
            if name in SCALE:
                assert "units" not in var.attrs and var.attrs["dppca_scale"] == SCALE[name]
                seen_scale += 1
    assert seen_units + seen_scale >= 1
    again = tmp_path / f"again{suffix}"
    load_result(path).to_zarr(again) if suffix == ".zarr" else load_result(path).to_netcdf(again)
    if suffix == ".zarr":
        files = sorted(p.relative_to(path) for p in path.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
        assert all((path / f).read_bytes() == (again / f).read_bytes() for f in files)


def test_provenance_attributes__flatten_scalars_and_skip_the_ledger():
    from dppca_dask.results.cf import provenance_attributes

    got = provenance_attributes({"kind": "pca", "n": 3, "ok": True, "axes": [1, 2], "none": None,
                                 "privacy": {"total": {"eps": 1.0}}, "ledger": [{"eps": 1.0}],
                                 "mixed": [1, {"a": 1}]})
    assert got == {"dppca_n": 3, "dppca_ok": 1, "dppca_axes": "1, 2",
                   "dppca_privacy_total_eps": 1.0}
