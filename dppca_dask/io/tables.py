"""Tables as input: Dask DataFrames, Parquet files or directories, and CSV globs.

Each becomes a lazy Dask DataFrame plus a reader of its numeric columns as an ``n × p`` dask
array, read in parallel on the workers. Row counts come from metadata where the format has
them: a Parquet file's footer gives every row group's count, so a Parquet input is read one row
group per task with no counting pass. CSV has no such metadata: its partitions' lengths are
counted in one pass (rows only, no values are used; n is public). A Dask DataFrame's partition
lengths are used when known (``divisions`` do not give them), else counted the same way.

Nothing here draws noise; the values are never inspected on the driver.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
import pandas as pd

__all__ = ["Table", "open_table", "table_kind"]

CSV_OPTIONS: dict[str, Any] = (
    {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {})
"""``read_csv`` options for exact float64 values: pandas < 3 parses some decimals one ulp off
unless asked for ``round_trip`` (pandas 3 is exact by default and deprecates the option)."""

_ZARR_MARKERS = (".zarray", ".zgroup", "zarr.json")


@dataclass(frozen=True, eq=False)
class Table:
    """An opened table: its schema (an empty pandas frame), origin and how to read columns."""

    meta: pd.DataFrame
    origin: str
    frame: Any
    """The Dask DataFrame (group labels and CSV/DataFrame reads go through it)."""
    row_groups: tuple[tuple[str, int, int], ...] = ()
    """Parquet: (file, row group, rows) for every row group, in order."""

    @property
    def n_rows(self) -> int | None:
        """Rows from metadata (Parquet), else None (counted when the columns are read)."""
        return sum(r for _, _, r in self.row_groups) if self.row_groups else None

    def columns(self, positions: Sequence[int]) -> da.Array:
        """The columns at ``positions`` as a float64 dask array (rows chunked by the source)."""
        names = [str(self.meta.columns[i]) for i in positions]
        if self.row_groups:
            blocks = [da.from_delayed(dask.delayed(_read_row_group, pure=True)(f, g, names),
                                      shape=(rows, len(names)), dtype=np.float64)
                      for f, g, rows in self.row_groups if rows]
            return da.concatenate(blocks, axis=0)
        sub = self.frame[[self.meta.columns[i] for i in positions]]
        return sub.to_dask_array(lengths=True).astype(np.float64)

    def labels(self, column: str) -> np.ndarray:
        """One column's values in row order, read eagerly (small: group labels)."""
        return np.asarray(self.frame[column].compute())


def _read_row_group(path: str, group: int, names: list[str]) -> np.ndarray:
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path).read_row_group(group, columns=names)
    return np.column_stack([table.column(c).to_numpy(zero_copy_only=False).astype(np.float64)
                            for c in names])


def _is_zarr_dir(path: str) -> bool:
    return any(os.path.exists(os.path.join(path, m)) for m in _ZARR_MARKERS)


def _parquet_files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    return sorted(glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True))


def table_kind(X: Any) -> str | None:
    """``"dataframe"``, ``"parquet"`` or ``"csv"`` when ``X`` is a table input, else None.

    A path is Parquet when it is a ``.parquet`` file or a directory of them (and not a Zarr
    store), CSV when it is a ``.csv`` file or a glob matching ``.csv`` files.

    Examples
    --------
    >>> table_kind("data/*.csv"), table_kind("store.zarr")
    ('csv', None)
    """
    import dask.dataframe as dd

    if isinstance(X, dd.DataFrame):
        return "dataframe"
    if not isinstance(X, str | os.PathLike):
        return None
    path = os.fspath(X)
    if "://" in path:
        return None
    lower = path.lower()
    if lower.endswith(".csv"):
        return "csv"
    if lower.endswith((".parquet", ".pq")):
        return "parquet"
    if os.path.isdir(path) and not _is_zarr_dir(path) and _parquet_files(path):
        return "parquet"
    return None


def open_table(X: Any, kind: str) -> Table:
    """Open a table input (no values read; Parquet footers and the CSV header are)."""
    import dask.dataframe as dd

    if kind == "dataframe":
        return Table(X._meta, "dask-dataframe", X)
    path = os.fspath(X)
    if kind == "parquet":
        import pyarrow.parquet as pq

        files = _parquet_files(path)
        if not files:
            raise FileNotFoundError(path)
        groups = []
        for f in files:
            meta = pq.ParquetFile(f).metadata
            groups += [(f, g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]
        frame = dd.read_parquet(files)
        return Table(frame._meta, "parquet", frame, tuple(groups))
    matches = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    if not matches or not all(os.path.isfile(m) for m in matches):
        raise FileNotFoundError(path)
    frame = dd.read_csv(matches, **CSV_OPTIONS)
    return Table(frame._meta, "csv", frame)
