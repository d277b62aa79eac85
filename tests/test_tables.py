"""Tables as input (issue 14 item 4): Dask DataFrames, Parquet files/directories, CSV globs."""

from __future__ import annotations

import warnings

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dppca_dask import InputError, dp_loading, privacy_control, spherical_kendall
from dppca_dask.io.data import as_data, describe_source
from tests.helpers import raise_if_dask_computes


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    base = tmp_path_factory.mktemp("tables")
    rng = np.random.default_rng(5)
    parts = [pd.DataFrame(rng.normal(size=(n, 3)) * [3, 2, 1], columns=["a", "b", "c"])
             .assign(g=rng.choice(["u", "v"], size=n)) for n in (401, 250, 333)]
    whole = pd.concat(parts, ignore_index=True)
    (base / "pq").mkdir()
    for i, part in enumerate(parts):  # several files, several row groups each
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False),
                       base / "pq" / f"part{i}.parquet", row_group_size=100)
        part.to_csv(base / f"part{i}.csv", index=False)
    return base, whole


def _inputs(base, whole):
    return {"parquet dir": str(base / "pq"), "parquet file": str(base / "pq" / "part0.parquet"),
            "csv glob": str(base / "part*.csv"), "dask dataframe": dd.from_pandas(whole, 3)}


@pytest.mark.parametrize("kind", ["parquet dir", "parquet file", "csv glob", "dask dataframe"])
def test_as_data__tables_give_the_numeric_columns_in_row_order(frames, kind):
    base, whole = frames
    X = _inputs(base, whole)[kind]
    expected = whole if kind != "parquet file" else whole.iloc[:401]
    with pytest.warns(UserWarning, match="Non-numeric column.*'g'"):
        src = as_data(X)
    assert (src.n, src.p, src.variables) == (len(expected), 3, ("a", "b", "c"))
    np.testing.assert_array_equal(src.array.compute(), expected[["a", "b", "c"]].to_numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = describe_source(X)
    assert (info.n, info.p) == (len(expected), 3)


def test_parquet__row_counts_from_the_footer_and_one_task_per_row_group(frames):
    base, whole = frames
    with raise_if_dask_computes(), warnings.catch_warnings():  # no counting pass
        warnings.simplefilter("ignore")
        src = as_data(str(base / "pq"))
    assert src.n == len(whole)
    assert max(src.array.chunks[0]) <= 100  # row groups of 100 rows: read in parallel


def test_tables__group_column_and_same_release_as_pandas(frames):
    base, whole = frames
    pc = privacy_control(eps=0.9, delta=1e-5)
    for X in (str(base / "pq"), str(base / "part*.csv")):
        src = as_data(X, group="g", columns=["a", "b", "c"])
        assert list(src.groups) == list(whole["g"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = spherical_kendall(str(base / "pq")).values
        b = spherical_kendall(whole[["a", "b", "c"]]).values
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-15)
        r1 = dp_loading(str(base / "pq"), privacy=pc, rng=3).directions.values
        r2 = dp_loading(whole, privacy=pc, rng=3).directions.values
    np.testing.assert_allclose(r1, r2, rtol=0, atol=1e-12)


def test_tables__a_missing_path_is_a_clear_input_error(tmp_path):
    with pytest.raises(InputError, match=r"must name an existing csv input.*nothing\*\.csv"):
        as_data(str(tmp_path / "nothing*.csv"))
    with pytest.raises(InputError, match=r"must name an existing parquet input.*none was found.*missing\.parquet"):
        as_data(str(tmp_path / "missing.parquet"))


def test_convert__parquet_row_groups_read_in_parallel_windows_keep_the_row_order(frames, tmp_path):
    from dppca_dask.io import convert as conv

    base, whole = frames
    src = base / "pq" / "part0.parquet"  # 401 rows in row groups of 100
    assert len(pq.ParquetFile(src).metadata.to_dict()["row_groups"]) == 5
    conv.PARQUET_WINDOW, old = 2, conv.PARQUET_WINDOW  # several windows
    try:
        with pytest.warns(UserWarning, match="Non-numeric"):
            out = conv.convert(src, tmp_path / "x.zarr", chunk_rows=64, group_column=None)
    finally:
        conv.PARQUET_WINDOW = old
    src_data = as_data(out)
    np.testing.assert_array_equal(src_data.array.compute(),
                                  whole.iloc[:401][["a", "b", "c"]].to_numpy())
    assert src_data.array.chunks[0][:2] == (64, 64)
