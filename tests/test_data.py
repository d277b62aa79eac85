"""Input adapters (dppca_dask.io.data) and Zarr conversion (dppca_dask.io.convert)."""

from __future__ import annotations

import glob
import os
import pathlib

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

from dppca_dask.errors import InputError, OutputExistsError, ParameterError
from dppca_dask.io.convert import convert, write_frames
from dppca_dask.io.data import CHUNK_BYTES, DataSource, as_data, describe_source
from tests.helpers import raise_if_dask_computes


@pytest.fixture
def values() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(10, 3))


@pytest.fixture
def frame(values) -> pd.DataFrame:
    df = pd.DataFrame(values, columns=["a", "b", "c"])
    df["g"] = list("xyxyxyxyzz")
    return df


@pytest.fixture
def xr_store(tmp_path, values) -> str:
    ds = xr.Dataset(
        {"X": (("sample", "variable"), values),
         "group": (("sample",), np.array(list("xyxyxyxyzz"), dtype=object))},
        coords={"variable": np.array(["a", "b", "c"], dtype=object)})
    path = str(tmp_path / "xr.zarr")
    ds.to_zarr(path, mode="w", encoding={"X": {"chunks": (4, 3)}}, consolidated=False)
    return path


# --- NumPy -------------------------------------------------------------------------------------

def test_as_data__numpy(values):
    src = as_data(values)
    assert isinstance(src, DataSource)
    assert (src.n, src.p, src.origin, src.checked_finite) == (10, 3, "numpy", True)
    assert src.variables == ("X1", "X2", "X3")
    assert src.array.chunks == ((10,), (3,))
    assert src.groups is None
    np.testing.assert_array_equal(src.array.compute(), values)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, bool, np.float32])
def test_as_data__numpy_dtypes_become_float64(dtype):
    src = as_data(np.ones((4, 2), dtype=dtype))
    assert src.array.dtype == np.float64
    np.testing.assert_array_equal(src.array.compute(), np.ones((4, 2)))


def test_as_data__chunk_rows(values):
    assert as_data(values, chunk_rows=4).array.chunks == ((4, 4, 2), (3,))
    wide = np.zeros((3, 2**20))  # default rows: 64 MiB // (8 p) = 8 rows per chunk at most n
    assert as_data(wide).array.chunks[0] == (3,)
    assert describe_source(np.zeros((100, 2**20 // 4))).chunks[0][0] == CHUNK_BYTES // 2**21
    with pytest.raises(ParameterError, match="'chunk_rows' parameter of dp_loading"):
        as_data(values, chunk_rows=0)


@pytest.mark.parametrize(("x", "match"), [
    (np.ones(5), "must be 2-D .* Got a 1-D array instead"),
    (np.ones((2, 2, 2)), "Got a 3-D array"),
    (np.array([["a", "b"], ["c", "d"]]), "must be numeric. Got dtype <U1 instead"),
    (np.ones((3, 2), dtype=object), "must be numeric. Got dtype object"),
    (np.ones((3, 2), dtype=complex), "must hold real numbers. Got complex values"),
    (np.ones((1, 3)), "must have at least two rows. Got 1 instead"),
    (np.ones((3, 0)), "must have at least one column. Got 0 instead"),
    ([[1.0, 2.0], [3.0, 4.0]], r"must be a NumPy array, pandas or Dask DataFrame, .* Got list "
                               r"instead"),
    ({"a": [1.0]}, "Got dict instead"),
    (3.0, "Got float instead"),
    (np.ma.masked_array(np.ones((3, 2))), "Got MaskedArray instead"),
])
def test_as_data__invalid_x(x, match):
    with pytest.raises(InputError, match=match):
        as_data(x)


def test_as_data__owner_and_minimums(values):
    with pytest.raises(InputError, match=r"The 'X' parameter of dp_score must have at least two "
                                         "columns. Got 1 instead"):
        as_data(values[:, :1], owner="dp_score", min_cols=2)
    with pytest.raises(InputError, match="at least 11 rows"):
        as_data(values, min_rows=11)


def test_as_data__non_finite(values):
    values[1, 1] = np.nan
    values[5, 0] = np.inf
    msg = (r"The 'X' parameter of dp_loading must contain only finite, non-missing values\. "
           r"Got 2 non-finite value\(s\) \(first at row 1, column 'X2'\) instead\.")
    with pytest.raises(InputError, match=msg):
        as_data(values)
    # non-finite values in columns that are not selected do not matter
    assert as_data(values, columns=[2]).variables == ("X3",)


# --- columns= ----------------------------------------------------------------------------------

def test_as_data__columns(values):
    src = as_data(values, columns=["X3", 0])
    assert src.variables == ("X3", "X1")
    np.testing.assert_array_equal(src.array.compute(), values[:, [2, 0]])
    assert as_data(values, columns="X2").variables == ("X2",)
    assert as_data(values, columns=np.int64(1)).variables == ("X2",)


@pytest.mark.parametrize(("columns", "match"), [
    (["X9", 3, -1], r"names column\(s\) not found in X: 'X9', 3, -1\. Available: 'X1', 'X2'"),
    ([], "must select at least one column"),
    ([0, "X1"], "must not select a column twice"),
    ([1.5], "Got an element 1.5 instead"),
    ([True], "Got an element True instead"),
    (2.0, "must be a column name .* Got 2.0 instead"),
])
def test_as_data__columns_invalid(values, columns, match):
    with pytest.raises(InputError, match=match):
        as_data(values, columns=columns)


# --- pandas ------------------------------------------------------------------------------------

def test_as_data__pandas_drops_non_numeric_with_warning(frame):
    frame["flag"] = frame["a"] > 0  # booleans are not numeric features
    msg = r"Non-numeric column\(s\) of 'X' are excluded: 'g', 'flag'"
    with pytest.warns(UserWarning, match=msg):
        src = as_data(frame)
    assert src.variables == ("a", "b", "c")
    assert src.origin == "pandas"
    assert src.checked_finite
    np.testing.assert_array_equal(src.array.compute(), frame[["a", "b", "c"]].to_numpy())


def test_as_data__pandas_names_and_selection(values):
    df = pd.DataFrame(values, columns=[10, 20, 30])
    assert as_data(df).variables == ("10", "20", "30")
    src = as_data(df, columns=["30", 0])
    assert src.variables == ("30", "10")
    np.testing.assert_array_equal(src.array.compute(), values[:, [2, 0]])


def test_as_data__pandas_errors(frame):
    with pytest.raises(InputError, match="must select numeric columns. Got non-numeric "
                                         r"column\(s\) 'g' of 'X' instead"):
        as_data(frame, columns=["a", "g"])
    with pytest.raises(InputError, match="must have at least one numeric column"):
        as_data(frame[["g"]])
    with pytest.raises(InputError, match=r"must be unique. Got duplicated name"):
        as_data(pd.DataFrame(np.ones((3, 2)), columns=["a", "a"]))
    with pytest.raises(InputError, match="complex column"):
        as_data(pd.DataFrame({"z": np.ones(3, dtype=complex)}))
    nullable = pd.DataFrame({"a": pd.array([1, None, 3], dtype="Int64"), "b": [1.0, 2.0, 3.0]})
    with pytest.raises(InputError, match=r"Got 1 non-finite value\(s\) \(first at row 1, "
                                         "column 'a'"):
        as_data(nullable)


def test_as_data__pandas_group_column(frame):
    src = as_data(frame, group="g")
    assert src.variables == ("a", "b", "c")
    assert np.asarray(src.groups).tolist() == list("xyxyxyxyzz")
    with pytest.raises(InputError, match="Column 'h' was not found in 'X'"):
        as_data(frame, group="h")
    with pytest.raises(InputError, match="cannot be both the group and a feature"):
        as_data(frame, group="a", columns=["a", "b"])
    frame.loc[3, "g"] = None
    with pytest.raises(InputError, match=r"must not contain missing values. Got 1 missing"):
        as_data(frame, group="g")


def test_as_data__group_vector(values):
    src = as_data(values, group=[1, 2] * 5)
    assert np.asarray(src.groups).tolist() == ["1", "2"] * 5
    lazy = as_data(values, group=da.from_array(np.array(["u"] * 10))).groups
    assert isinstance(lazy, da.Array)  # stays lazy: the passes read it block by block (issue 19)
    assert lazy.compute().tolist() == ["u"] * 10
    with pytest.raises(InputError, match=r"must have length equal to the number of rows of X "
                                         r"\(10\)\. Got length 9 instead"):
        as_data(values, group=["a"] * 9)
    with pytest.raises(InputError, match="Got 1 missing value"):
        as_data(values, group=[1.0] * 9 + [np.nan])
    with pytest.raises(InputError, match="Column 'g' was not found in 'X'"):
        as_data(values, group="g")


# --- dask ----------------------------------------------------------------------------------------

def test_as_data__dask_is_lazy(values):
    x = da.from_array((values * 10).astype(np.int64), chunks=(3, 2))
    with raise_if_dask_computes():
        src = as_data(x, columns=["X3", "X1"])
        assert as_data(x, chunk_rows=5).array.chunks == ((5, 5), (3,))
    assert (src.origin, src.checked_finite, src.n, src.p) == ("dask", False, 10, 2)
    assert src.array.dtype == np.float64
    assert src.array.chunks == ((3, 3, 3, 1), (2,))
    np.testing.assert_array_equal(src.array.compute(), (values * 10).astype(np.int64)[:, [2, 0]])


def test_as_data__dask_errors(values):
    x = da.from_array(values, chunks=5)
    unknown = x[x[:, 0] > 0]
    with pytest.raises(InputError, match=r"unknown chunk sizes instead\. Call X\.compute_chunk_sizes"):
        as_data(unknown)
    with pytest.raises(InputError, match="must hold real numbers"):
        as_data(x.astype(complex))
    with pytest.raises(InputError, match="Got a 1-D array"):
        as_data(x[:, 0])


# --- xarray ------------------------------------------------------------------------------------

def test_as_data__dataarray(values):
    xa = xr.DataArray(values, dims=("obs", "var"), coords={"var": ["a", "b", "c"],
                                                           "lab": ("obs", list("aabbccddee"))})
    src = as_data(xa, group="lab")
    assert (src.variables, src.origin, src.checked_finite) == (("a", "b", "c"), "xarray", True)
    assert np.asarray(src.groups).tolist() == list("aabbccddee")
    assert as_data(xr.DataArray(values)).variables == ("X1", "X2", "X3")
    lazy = xa.chunk({"obs": 4})
    with raise_if_dask_computes():
        src = as_data(lazy, columns=["c"])
    assert not src.checked_finite
    assert src.variables == ("c",)
    np.testing.assert_array_equal(src.array.compute(), values[:, [2]])
    with pytest.raises(InputError, match=r"must be 2-D .* Got a 1-D DataArray"):
        as_data(xa[:, 0])


def test_as_data__dataset(values):
    ds = xr.Dataset({"X": (("s", "v"), values), "Y": (("s", "w"), values[:, :2])},
                    coords={"v": ["a", "b", "c"]})
    with pytest.raises(InputError, match=r"exactly one 2-D array.*candidates 'X', 'Y'"):
        as_data(ds)
    assert as_data(ds, array="X").variables == ("a", "b", "c")
    assert as_data(ds, array="Y").variables == ("X1", "X2")
    with pytest.raises(InputError, match="'array' parameter of dp_loading must name a variable"):
        as_data(ds, array="Z")


# --- Zarr ----------------------------------------------------------------------------------------

def test_as_data__zarr_group_written_by_xarray(xr_store, values):
    with raise_if_dask_computes():
        src = as_data(xr_store)
        info = describe_source(xr_store)
    assert (src.origin, src.variables, src.checked_finite) == ("zarr", ("a", "b", "c"), False)
    assert src.array.chunks == ((4, 4, 2), (3,))
    np.testing.assert_array_equal(src.array.compute(), values)
    assert (info.n, info.p, info.dtype, info.path, info.array) == (10, 3, "float64", xr_store, "X")
    assert np.asarray(as_data(pathlib.Path(xr_store), group="group").groups).tolist() == list("xyxyxyxyzz")
    assert as_data(xr_store, array="X", columns=["b"]).variables == ("b",)


def test_as_data__zarr_format_2_and_consolidated(tmp_path, values):
    path = str(tmp_path / "v2.zarr")
    xr.Dataset({"X": (("s", "v"), values)}, coords={"v": ["p", "q", "r"]}).to_zarr(
        path, zarr_format=2, consolidated=True)
    assert as_data(path).variables == ("p", "q", "r")


def test_as_data__zarr_array(tmp_path, values):
    path = str(tmp_path / "arr.zarr")
    z = zarr.create_array(path, shape=values.shape, chunks=(3, 3), dtype="f8")
    z[:] = values
    with raise_if_dask_computes():
        src = as_data(path)
    assert src.variables == ("X1", "X2", "X3")
    assert src.array.chunks[0] == (3, 3, 3, 1)
    np.testing.assert_array_equal(src.array.compute(), values)
    z.attrs["variables"] = ["u", "v", "w"]
    assert as_data(path).variables == ("u", "v", "w")
    z.attrs["variables"] = ["u", "v"]
    with pytest.raises(InputError, match="variable names of Zarr array '.*arr.zarr' must be 3 "
                                         r"strings, one per column. Got \['u', 'v'\] instead"):
        as_data(path)
    one_d = zarr.create_array(str(tmp_path / "one.zarr"), shape=(4,), dtype="f8")
    with pytest.raises(InputError, match="Got a 1-D Zarr array"):
        as_data(one_d.store_path.store.root)


def test_as_data__plain_zarr_group(tmp_path, values):
    path = str(tmp_path / "plain.zarr")
    g = zarr.open_group(path, mode="w")
    g.create_array("data", data=values, chunks=(5, 3)).attrs["variables"] = ["a", "b", "c"]
    g.create_array("labels", data=np.arange(10) % 2)
    src = as_data(path, group="labels")
    assert src.variables == ("a", "b", "c")
    assert np.asarray(src.groups).astype(str).tolist() == ["0", "1"] * 5
    g.create_array("other", data=values)
    with pytest.raises(InputError, match=r"exactly one 2-D array.*candidates 'data', 'other'"):
        as_data(path)
    empty = zarr.open_group(str(tmp_path / "empty.zarr"), mode="w")
    empty.create_array("v", data=np.arange(3))
    with pytest.raises(InputError, match="Found no 2-D array"):
        as_data(str(tmp_path / "empty.zarr"))


def test_as_data__zarr_url(values):
    url = "memory://dppca-test-url.zarr"
    xr.Dataset({"X": (("s", "v"), values)}).to_zarr(url, mode="w", consolidated=False)
    src = as_data(url)
    np.testing.assert_array_equal(src.array.compute(), values)
    with pytest.raises(InputError, match=r"Zarr input not found: 'memory://nowhere.zarr'"):
        as_data("memory://nowhere.zarr")
    with pytest.raises(InputError, match=r"Cannot open Zarr URL 'nosuchproto://x.zarr'"):
        as_data("nosuchproto://x.zarr")


def test_as_data__zarr_storage_options(xr_store):
    url = "file://" + os.path.abspath(xr_store)
    assert as_data(url, storage_options={"auto_mkdir": False}).variables == ("a", "b", "c")


def test_as_data__zarr_path_errors(tmp_path):
    with pytest.raises(InputError, match=r"Zarr input not found: '.*missing.zarr'"):
        as_data(str(tmp_path / "missing.zarr"))
    (tmp_path / "dir").mkdir()
    with pytest.raises(InputError, match="is not a readable Zarr array or group"):
        as_data(tmp_path / "dir")
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")  # tables are read directly now
    with pytest.raises(InputError, match=r"must have at least two rows\. Got 1 instead"):
        as_data(str(tmp_path / "data.csv"))
    bad = tmp_path / "bad.zarr"
    bad.mkdir()
    (bad / "zarr.json").write_text("{not json")
    with pytest.raises(InputError, match="is not a readable Zarr array or group"):
        as_data(str(bad))


def test_describe_source__reads_no_chunk_data(tmp_path, xr_store):
    for f in glob.glob(os.path.join(xr_store, "X", "c", "**"), recursive=True):
        if os.path.isfile(f):
            pathlib.Path(f).write_bytes(b"not a compressed chunk")
    with raise_if_dask_computes():
        info = describe_source(xr_store, columns=["c", "a"])
    assert info.variables == ("c", "a")
    assert info.chunks == ((4, 4, 2), (2,))
    assert info.nbytes == 10 * 2 * 8
    assert info.origin == "zarr"
    src = as_data(xr_store)  # still lazy: building the source reads no chunk
    with pytest.raises(InputError, match=r"corrupt or truncated"):
        src.array.compute()


def test_describe_source__in_memory(frame):
    with pytest.warns(UserWarning, match="'g'"):
        info = describe_source(frame)
    assert (info.origin, info.n, info.p, info.variables) == ("pandas", 10, 3, ("a", "b", "c"))
    assert describe_source(frame, group="g").variables == ("a", "b", "c")
    info = describe_source(da.zeros((7, 2), chunks=(3, 1), dtype=np.int16))
    assert info.dtype == "int16"
    assert info.chunks == ((3, 3, 1), (2,))


# --- convert -------------------------------------------------------------------------------------

def test_convert__csv_round_trip(tmp_path, frame):
    frame["text"] = "t"
    csv = tmp_path / "in.csv"
    frame.to_csv(csv, index=False)
    out = str(tmp_path / "out.zarr")
    with pytest.warns(UserWarning, match="'text'"):
        assert convert(csv, out, chunk_rows=4, group_column="g") == out
    src = as_data(out, group="group")
    assert src.variables == ("a", "b", "c")
    assert src.array.chunks == ((4, 4, 2), (3,))
    np.testing.assert_array_equal(src.array.compute(), frame[["a", "b", "c"]].to_numpy())
    assert np.asarray(src.groups).tolist() == frame["g"].tolist()
    ds = xr.open_zarr(out, consolidated=False)
    assert ds["X"].dims == ("sample", "variable")
    assert ds["group"].dims == ("sample",)
    assert ds["group"].attrs == {"source_column": "g"}


def test_convert__parquet_round_trip(tmp_path, frame):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "in.parquet",
                   row_group_size=3)  # row groups that do not line up with chunks
    out = convert(tmp_path / "in.parquet", tmp_path / "out.zarr", chunk_rows=4, columns=["c", "a"])
    src = as_data(out)
    assert src.variables == ("c", "a")
    assert src.array.chunks[0] == (4, 4, 2)
    np.testing.assert_array_equal(src.array.compute(), frame[["c", "a"]].to_numpy())


def test_convert__npy_round_trip(tmp_path, values):
    np.save(tmp_path / "in.npy", values)
    out = convert(tmp_path / "in.npy", tmp_path / "out.zarr")
    src = as_data(out)
    assert src.variables == ("X1", "X2", "X3")
    assert src.array.chunks == ((10,), (3,))
    np.testing.assert_array_equal(src.array.compute(), values)
    np.save(tmp_path / "b.npy", values > 0)
    out = convert(tmp_path / "b.npy", tmp_path / "b.zarr", chunk_rows=3)
    np.testing.assert_array_equal(as_data(out).array.compute(), (values > 0).astype(float))


def test_convert__gzip_and_fmt(tmp_path, frame):
    frame[["a", "b"]].to_csv(tmp_path / "in.csv.gz", index=False)
    src = as_data(convert(tmp_path / "in.csv.gz", tmp_path / "gz.zarr"))
    np.testing.assert_array_equal(src.array.compute(), frame[["a", "b"]].to_numpy())
    frame[["a"]].to_csv(tmp_path / "in.txt", index=False)
    with pytest.raises(ParameterError, match="'fmt' parameter of convert must be given"):
        convert(tmp_path / "in.txt", tmp_path / "txt.zarr")
    assert as_data(convert(tmp_path / "in.txt", tmp_path / "t.zarr", fmt="csv")).p == 1
    with pytest.raises(ParameterError, match="'fmt' parameter of convert must be a str among"):
        convert(tmp_path / "in.txt", tmp_path / "t2.zarr", fmt="tsv")


def test_convert__overwrite(tmp_path, values):
    np.save(tmp_path / "in.npy", values)
    out = tmp_path / "out.zarr"
    convert(tmp_path / "in.npy", out)
    with pytest.raises(OutputExistsError, match="already exists. Pass overwrite=True to replace it"):
        convert(tmp_path / "in.npy", out)
    np.save(tmp_path / "in.npy", values[:, :2])
    convert(tmp_path / "in.npy", out, overwrite=True)
    assert as_data(out).p == 2
    (tmp_path / "precious").mkdir()
    with pytest.raises(OutputExistsError, match="is not a Zarr store; refusing"):
        convert(tmp_path / "in.npy", tmp_path / "precious", overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["in.npy", "out.zarr", "precious"]


def test_convert__failure_leaves_nothing(tmp_path, values):
    values[7, 2] = np.nan
    pd.DataFrame(values).to_csv(tmp_path / "in.csv", index=False)
    with pytest.raises(InputError, match=r"in.csv' must contain only finite, non-missing values"
                                         r"\. Got 1 non-finite value\(s\) in rows 6 to 8 \(first "
                                         r"at row 7, column '2'\)"):
        convert(tmp_path / "in.csv", tmp_path / "out.zarr", chunk_rows=3)
    assert os.listdir(tmp_path) == ["in.csv"]


def test_convert__input_errors(tmp_path, frame):
    with pytest.raises(InputError, match="Input file not found"):
        convert(tmp_path / "missing.csv", tmp_path / "o.zarr")
    frame.iloc[:0].to_csv(tmp_path / "empty.csv", index=False)
    with pytest.raises(InputError, match="has no data rows"):
        convert(tmp_path / "empty.csv", tmp_path / "o.zarr", group_column="g")
    lines = "a,b\n" + "1,2\n" * 4 + "x,3\n"
    (tmp_path / "mixed.csv").write_text(lines)
    with pytest.raises(InputError, match=r"non-numeric values in column\(s\) \['a', 'b'\] after "
                                         "row 4"):
        convert(tmp_path / "mixed.csv", tmp_path / "o.zarr", chunk_rows=4)
    frame.to_csv(tmp_path / "in.csv", index=False)
    with pytest.raises(InputError, match=r"Column 'h' was not found in '.*in.csv'"):
        convert(tmp_path / "in.csv", tmp_path / "o.zarr", group_column="h")
    frame.loc[2, "g"] = None
    frame.to_csv(tmp_path / "in.csv", index=False)
    with pytest.raises(InputError, match="'group_column' parameter of convert must not contain "
                                         "missing values"):
        convert(tmp_path / "in.csv", tmp_path / "o.zarr", group_column="g")
    np.save(tmp_path / "one.npy", np.ones(3))
    with pytest.raises(InputError, match=r"must hold a 2-D array. Got 1-D"):
        convert(tmp_path / "one.npy", tmp_path / "o.zarr")
    np.save(tmp_path / "obj.npy", np.array([[{}]], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="could not be read as npy"):
        convert(tmp_path / "obj.npy", tmp_path / "o.zarr")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(InputError, match="could not be read as parquet"):
        convert(tmp_path / "bad.parquet", tmp_path / "o.zarr")
    assert not (tmp_path / "o.zarr").exists()
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_write_frames__streams_blocks(tmp_path):
    def frames():  # uneven input blocks are regrouped into chunks of `rows`
        for start, stop in [(0, 2), (2, 9), (9, 10), (10, 13)]:
            yield pd.DataFrame({"a": np.arange(start, stop, dtype=float)})

    out = write_frames(frames(), tmp_path / "s.zarr", rows=4)
    src = as_data(out)
    assert src.array.chunks[0] == (4, 4, 4, 1)
    np.testing.assert_array_equal(src.array.compute()[:, 0], np.arange(13.0))
