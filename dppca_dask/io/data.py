"""Input adapters: every estimator turns its ``X`` into one :class:`DataSource` here.

Accepted inputs are NumPy arrays, pandas data frames, dask arrays, xarray objects, paths or
URLs of Zarr arrays and groups (docs/spec/SPEC_dppca.md §3.1), and tables -- Dask DataFrames,
Parquet files or directories, CSV files or globs (:mod:`dppca_dask.io.tables`: read in
parallel on the workers, numeric columns only, the same non-numeric-column warning as pandas). The result is always an ``n × p`` float64
dask array whose columns sit in one chunk and whose rows are chunked.

Invariants: lazy inputs (dask, xarray on dask, Zarr) are never computed here -- their finiteness is
checked inside the data pass by the kernels (``checked_finite=False``); in-memory inputs are
checked eagerly (``checked_finite=True``). In-memory group labels become strings here; stored
ones stay lazy (each data task reads and stringifies its own rows, :mod:`~dppca_dask.graph.groups`).
Nothing here draws noise or spends budget; the schema and ``n`` are treated as public.

Zarr inputs must have every chunk stored: :func:`~dppca_dask.io.zarr_guard.check_chunks` lists the
store when the input is opened (no chunk is read), and every read goes through a
:class:`~dppca_dask.io.zarr_guard.ChunkGuardStore`, so a chunk missing later is an InputError on the
worker, never the fill value.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr

from dppca_dask._validation import bad_param, parse_int
from dppca_dask.errors import DPPCAError, InputError
from dppca_dask.graph.groups import label_strings
from dppca_dask.io.tables import Table, open_table, table_kind
from dppca_dask.io.zarr_guard import MissingChunkError, check_chunks, guarded, missing_message

__all__ = ["DataSource", "SourceInfo", "as_data", "describe_source"]

CHUNK_BYTES = 64 * 2**20
_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}
_ACCEPTED = ("a NumPy array, pandas or Dask DataFrame, dask array, xarray DataArray or "
             "Dataset, a path to a Zarr array or group, a Parquet file or directory, or a CSV "
             "file or glob")

ColumnSpec = str | int | Sequence[str | int] | None


@dataclass(frozen=True, eq=False)
class DataSource:
    """An ``n × p`` float64 dask array (columns in one chunk) with its variable names."""

    array: da.Array
    variables: tuple[str, ...]
    n: int
    p: int
    origin: str
    checked_finite: bool
    groups: np.ndarray | da.Array | None = None
    """Group labels: strings in memory, or a lazy 1-D dask array (a stored variable) that only
    the passes read, block by block (:mod:`dppca_dask.graph.groups`)."""


@dataclass(frozen=True)
class SourceInfo:
    """What :func:`describe_source` learns from metadata: shape, stored dtype, chunks, names.

    ``chunks`` are the row and column chunks :func:`as_data` would use; ``nbytes`` is the size of
    the float64 ``n × p`` matrix the estimators read.
    """

    origin: str
    n: int
    p: int
    dtype: str
    chunks: tuple[tuple[int, ...], tuple[int, ...]]
    variables: tuple[str, ...]
    nbytes: int
    path: str | None = None
    array: str | None = None


@dataclass(frozen=True)
class _Parts:
    """An input resolved to a 2-D array (NumPy or dask), names and where it came from."""

    values: Any
    variables: tuple[str, ...]
    origin: str
    path: str | None = None
    array: str | None = None
    frame: pd.DataFrame | None = None
    dataset: xr.Dataset | None = None
    dataarray: xr.DataArray | None = None
    table: Table | None = None


def _x_error(owner: str, rule: str, got: str) -> InputError:
    return InputError(owner=owner, parameter="X", rule=f"must {rule}", got=got)


def default_chunk_rows(n: int, p: int) -> int:
    """Rows per chunk so that one float64 chunk is about 64 MiB (at least 1, at most ``n``)."""
    return max(1, min(max(n, 1), CHUNK_BYTES // (8 * max(p, 1))))


def _check_dtype(dtype: np.dtype, owner: str) -> None:
    if dtype.kind == "c":
        raise _x_error(owner, "hold real numbers", f"complex values ({dtype})")
    if dtype.kind not in "biuf":
        raise _x_error(owner, "be numeric", f"dtype {dtype}")


def _is_numeric_column(dtype: Any) -> bool:
    return pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)


def _quote(items: Sequence[Any], limit: int = 10) -> str:
    shown = ", ".join(repr(i) for i in items[:limit])
    return shown + (f", ... ({len(items)} in all)" if len(items) > limit else "")


def _select(columns: ColumnSpec, names: Sequence[str], owner: str, where: str = "X") -> list[int]:
    """0-based positions chosen by ``columns`` (names or indexes, order kept)."""
    if columns is None:
        return list(range(len(names)))
    items = [columns] if isinstance(columns, str | int | np.integer) else columns
    rule = "a column name (str), a 0-based index (int) or a sequence of them"
    if isinstance(items, bool | np.bool_ | bytes) or not isinstance(items, Sequence | np.ndarray):
        raise bad_param("columns", owner, rule, columns, cls=InputError)
    lookup = {name: i for i, name in enumerate(names)}
    chosen: list[int] = []
    unknown: list[Any] = []
    for item in list(items):
        if isinstance(item, bool | np.bool_) or not isinstance(item, str | int | np.integer):
            raise InputError(owner=owner, parameter="columns", rule=f"must be {rule}",
                             got=f"an element {item!r}")
        if isinstance(item, str):
            pos = lookup.get(item)
        else:
            pos = int(item) if 0 <= int(item) < len(names) else None
        if pos is None:
            unknown.append(item if isinstance(item, str) else int(item))
        else:
            chosen.append(pos)
    if unknown:
        raise InputError(
            owner=owner, parameter="columns", rule=f"names column(s) not found in {where}: "
            f"{_quote(unknown)}. Available: {_quote(list(names))} (or indexes 0 to "
            f"{len(names) - 1})")
    if not chosen:
        raise InputError(owner=owner, parameter="columns",
                         rule="must select at least one column", value=columns)
    if len(set(chosen)) != len(chosen):
        raise InputError(owner=owner, parameter="columns",
                         rule="must not select a column twice", value=columns)
    return chosen


def _names(values: Any, p: int, owner: str, where: str) -> tuple[str, ...]:
    """Names from a coordinate or a ``variables`` attribute, checked; ``X1..Xp`` when absent."""
    if values is None:
        return tuple(f"X{j + 1}" for j in range(p))
    names = [v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(values).ravel()]
    if len(names) != p or isinstance(values, str):
        raise InputError(f"The variable names of {where} must be {p} strings, one per column. "
                         f"Got {values!r} instead.")
    if len(set(names)) != len(names):
        dup = sorted({s for s in names if names.count(s) > 1})
        raise InputError(f"The variable names of {where} must be unique. "
                         f"Got duplicated name(s) {_quote(dup)} instead.")
    return tuple(names)


def frame_columns(frame: pd.DataFrame, columns: ColumnSpec, group: Any, owner: str,
                   where: str = "X", stacklevel: int = 4) -> tuple[list[int], int | None]:
    """Feature and group positions in a frame; non-numeric columns drop with a warning."""
    names = _names(list(frame.columns), frame.shape[1], owner, f"{where!r}")
    gpos = None
    if isinstance(group, str):
        if group not in names:
            raise InputError(f"Column {group!r} was not found in {where!r}.")
        gpos = names.index(group)
    dtypes = list(frame.dtypes)
    if columns is not None:
        pos = _select(columns, names, owner, repr(where))
        if gpos in pos:
            raise InputError(f"Column {group!r} of {where!r} cannot be both the group and a "
                             "feature; leave it out of 'columns'.")
        bad = [names[i] for i in pos if not _is_numeric_column(dtypes[i])]
        if bad:
            raise InputError(owner=owner, parameter="columns",
                             rule="must select numeric columns",
                             got=f"non-numeric column(s) {_quote(bad)} of {where!r}")
    else:
        pos = [i for i in range(len(names)) if i != gpos]
        dropped = [names[i] for i in pos if not _is_numeric_column(dtypes[i])]
        pos = [i for i in pos if _is_numeric_column(dtypes[i])]
        if not pos:
            raise _x_error(owner, "have at least one numeric column", "none")
        if dropped:
            warnings.warn(f"Non-numeric column(s) of {where!r} are excluded: {_quote(dropped)}.",
                          UserWarning, stacklevel=stacklevel)
    cplx = [names[i] for i in pos if pd.api.types.is_complex_dtype(dtypes[i])]
    if cplx:
        raise _x_error(owner, "hold real numbers", f"complex column(s) {_quote(cplx)}")
    return pos, gpos


def _from_dataset(ds: xr.Dataset, array: str | None, owner: str, where: str) -> xr.DataArray:
    """The one 2-D variable of a Dataset (or the one named by ``array``)."""
    two_d = sorted(str(k) for k, v in ds.data_vars.items() if v.ndim == 2)
    if array is not None:
        if array not in ds.data_vars:
            raise InputError(owner=owner, parameter="array",
                             rule=f"must name a variable of {where}", value=array,
                             hint=f"2-D candidates: {_quote(two_d) or 'none'}.")
        if ds[array].ndim != 2:
            raise _x_error(owner, "be 2-D (samples × variables)",
                           f"{ds[array].ndim}-D variable {array!r} of {where}")
        return ds[array]
    if len(two_d) != 1:
        found = f"candidates {_quote(two_d)}" if two_d else "no 2-D array"
        raise InputError(f"{where} must hold exactly one 2-D array, or 'array=' must name one. "
                         f"Found {found}.")
    return ds[two_d[0]]


def _from_dataarray(xa: xr.DataArray, owner: str, origin: str, where: str = "X",
                    **kw: Any) -> _Parts:
    if xa.ndim != 2:
        raise _x_error(owner, "be 2-D (samples × variables)", f"a {xa.ndim}-D DataArray")
    dim = xa.dims[1]
    raw = xa.coords[dim].values if dim in xa.coords else xa.attrs.get("variables")
    names = _names(raw, xa.shape[1], owner, where)
    values = xa.data if xa.chunks is not None else np.asarray(xa.values)
    return _Parts(values, names, origin, dataarray=xa, **kw)


def _read_chunk(source: Any, index: Any, asarray: bool = True, lock: Any = None) -> Any:
    """Dask getter for Zarr inputs: a chunk that is missing or cannot be read is an InputError.

    ``source`` sits on a :class:`~dppca_dask.io.zarr_guard.ChunkGuardStore`, so a chunk deleted
    after :func:`~dppca_dask.io.zarr_guard.check_chunks` raises here instead of reading as zeros.
    """
    from dask.array.core import getter

    label = getattr(getattr(source, "store", None), "label", None)
    try:
        return getter(source, index, asarray=asarray, lock=lock)
    except MissingChunkError as exc:
        key = getattr(exc, "key", None)
        if key is None or label is None:
            raise
        path = str(getattr(source, "path", "") or "")
        rel = key[len(path) + 1:] if path and key.startswith(path + "/") else key
        word = "shard" if getattr(source, "shards", None) else "chunk"
        raise MissingChunkError(missing_message(
            label, path, rel, word, " (it disappeared after the input was checked)")) from None
    except DPPCAError:
        raise
    except Exception as exc:  # noqa: BLE001 - codec/IO failures of a corrupt or truncated store
        where = label or getattr(getattr(source, "store", None), "root", None) or getattr(
            source, "path", "")
        raise InputError(
            f"Could not read a chunk of the Zarr input {str(where)!r} at {index!r} "
            f"({type(exc).__name__}: {exc}); the store may be corrupt or truncated."
        ) from None


def _guarded(arr: Any) -> da.Array:
    """A lazy dask array over a zarr.Array whose chunk reads raise InputError on failure."""
    return da.from_array(arr, chunks=arr.chunks, getitem=_read_chunk, asarray=True,
                         inline_array=False)


def _open_zarr(path: str, array: str | None, storage_options: dict | None, owner: str,
               group: Any = None) -> _Parts:
    """Open a Zarr array or group on a ChunkGuardStore and check that its chunks are all stored.

    Checked (metadata only, before any pass): the data array, its coordinates stored in the
    group and a group-label variable named by ``group``.
    """
    import fsspec
    import zarr

    opts: dict[str, Any] = {"storage_options": storage_options} if storage_options else {}
    if "://" in path:
        try:
            fs, fpath = fsspec.core.url_to_fs(path, **(storage_options or {}))
        except (ImportError, ValueError, TypeError) as exc:  # e.g. s3fs not installed
            raise InputError(f"Cannot open Zarr URL {path!r}: {exc}") from None
        exists = fs.exists(fpath)
    else:
        exists = os.path.exists(path)
    if not exists:
        raise InputError(f"Zarr input not found: {path!r}.")
    # Tasks carry the store, and Dask workers may run in another directory: open local paths
    # by their absolute path so that every worker reads the same files.
    store = path if "://" in path else os.path.abspath(path)
    try:
        node = guarded(zarr.open(store=store, mode="r", **opts), path)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # "not Zarr", corrupt metadata
        hint = (" Convert .npy or compressed CSV files with dppca_dask.io.convert.convert first "
                "(CSV and Parquet are read directly)."
                if path.lower().endswith((".gz", ".npy")) else "")
        raise InputError(f"Input {path!r} is not a readable Zarr array or group "
                         f"({type(exc).__name__}: {exc}).{hint}") from None
    if isinstance(node, zarr.Array):
        if node.ndim != 2:
            raise _x_error(owner, "be 2-D (samples × variables)", f"a {node.ndim}-D Zarr array")
        check_chunks(node, path)
        xa = xr.DataArray(_guarded(node), dims=("sample", "variable"), attrs=dict(node.attrs))
        return _from_dataarray(xa, owner, "zarr", f"Zarr array {path!r}", path=path)
    consolidated = node.metadata.consolidated_metadata is not None
    try:
        ds = xr.open_zarr(node.store_path.store, group=node.store_path.path or None, chunks={},
                          consolidated=consolidated)
    except DPPCAError:  # a missing chunk of a coordinate read at open
        raise
    except KeyError:  # a plain Zarr group without dimension names: wrap its arrays lazily
        ds = xr.Dataset({
            name: xr.DataArray(_guarded(arr), attrs=dict(arr.attrs),
                               dims=[f"{name}_dim_{i}" for i in range(arr.ndim)])
            for name, arr in node.arrays()})
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"Zarr group {path!r} could not be read "
                         f"({type(exc).__name__}: {exc}).") from None
    xa = _from_dataset(ds, array, owner, f"Zarr group {path!r}")
    needed = [str(xa.name), *(str(c) for c in xa.coords)]
    needed += [group] if isinstance(group, str) else []
    for name in dict.fromkeys(needed):
        if name in node and isinstance(node[name], zarr.Array):
            check_chunks(node[name], path)
    if xa.name in node and hasattr(node[xa.name], "chunks"):  # read through the guarded getter
        xa = xa.copy(data=_guarded(node[xa.name]))
    return _from_dataarray(xa, owner, "zarr", f"variable {xa.name!r} of Zarr group {path!r}",
                           path=path, array=str(xa.name), dataset=ds)


def _resolve(X: Any, owner: str, array: str | None, storage_options: dict | None,
             columns: ColumnSpec, group: Any) -> _Parts:
    """Turn any accepted ``X`` into a 2-D array plus names, selecting ``columns``."""
    kind = table_kind(X)
    if kind is not None:
        try:
            table = open_table(X, kind)
        except FileNotFoundError:
            raise InputError(owner=owner, parameter="X", rule=f"must name an existing {kind} "
                             "input (a file, a folder of files or a glob that matches one; "
                             "none was found)", value=os.fspath(X)) from None
        pos, _ = frame_columns(table.meta, columns, group, owner, stacklevel=5)
        names = tuple(str(table.meta.columns[i]) for i in pos)
        return _Parts(table.columns(pos), names, table.origin,
                      path=None if kind == "dataframe" else os.fspath(X), table=table)
    if isinstance(X, str | os.PathLike):
        parts = _open_zarr(os.fspath(X), array, storage_options, owner, group)
    elif isinstance(X, pd.DataFrame):
        pos, _ = frame_columns(X, columns, group, owner, stacklevel=5)
        sub = X.iloc[:, pos]
        values = sub.to_numpy(dtype=np.float64, na_value=np.nan)
        return _Parts(values, tuple(str(c) for c in sub.columns), "pandas", frame=X)
    elif isinstance(X, xr.Dataset):
        xa = _from_dataset(X, array, owner, "X")
        parts = _from_dataarray(xa, owner, "xarray", f"variable {xa.name!r} of X",
                                array=str(xa.name), dataset=X)
    elif isinstance(X, xr.DataArray):
        parts = _from_dataarray(X, owner, "xarray")
    elif isinstance(X, da.Array):
        parts = _Parts(X, (), "dask")
    elif isinstance(X, np.ndarray) and not isinstance(X, np.ma.MaskedArray):
        parts = _Parts(X, (), "numpy")
    else:
        raise _x_error(owner, f"be {_ACCEPTED}", type(X).__name__)
    values = parts.values
    if values.ndim != 2:
        raise _x_error(owner, "be 2-D (samples × variables)", f"a {values.ndim}-D array")
    _check_dtype(np.dtype(values.dtype), owner)
    if isinstance(values, da.Array) and any(np.isnan(c) for c in values.shape):
        raise InputError(owner=owner, parameter="X", rule="must have known chunk sizes",
                         got="unknown chunk sizes", hint="Call X.compute_chunk_sizes() first.")
    names = parts.variables or _names(None, values.shape[1], owner, "X")
    pos = _select(columns, names, owner)
    if pos != list(range(len(names))):
        values = values[:, pos]
    return _Parts(values, tuple(names[i] for i in pos), parts.origin, parts.path, parts.array,
                  parts.frame, parts.dataset, parts.dataarray)


def _check_finite(a: np.ndarray, names: Sequence[str], owner: str, rows: int) -> None:
    count, first = 0, None
    for start in range(0, a.shape[0], rows):
        bad = ~np.isfinite(a[start:start + rows])
        k = int(np.count_nonzero(bad))
        if k and first is None:
            r, c = np.argwhere(bad)[0]
            first = f"row {start + int(r)}, column {names[int(c)]!r}"
        count += k
    if count:
        raise _x_error(owner, "contain only finite, non-missing values",
                       f"{count} non-finite value(s) (first at {first})")


def column_labels(raw: Any, n: int, owner: str, name: str = "group") -> np.ndarray | da.Array:
    """Group labels as strings, checked for length ``n`` and missing values (SPEC §6.7).

    A dask array stays lazy (its length is checked now, its values by the pass that reads them:
    :mod:`dppca_dask.graph.groups`), so n labels are never gathered into one task."""
    if isinstance(raw, da.Array):
        if raw.ndim != 1 or raw.shape[0] != n:
            got = f"shape {raw.shape}" if raw.ndim != 1 else f"length {raw.shape[0]}"
            raise InputError(owner=owner, parameter=name, rule="must have length equal to "
                             f"the number of rows of X ({n})", got=got)
        return raw
    values = np.asarray(getattr(raw, "values", raw), dtype=object)
    if values.ndim != 1 or len(values) != n:
        got = f"shape {values.shape}" if values.ndim != 1 else f"length {len(values)}"
        raise InputError(owner=owner, parameter=name, rule="must have length equal to the "
                         f"number of rows of X ({n})", got=got)
    return label_strings(values, owner, name)


def _group_labels(group: Any, parts: _Parts, n: int, owner: str) -> np.ndarray | da.Array:
    """Labels from a column/variable/coordinate named ``group``, or ``group`` itself."""
    if not isinstance(group, str):
        return column_labels(group, n, owner)
    raw: pd.Series | xr.DataArray
    if parts.table is not None:
        if group not in [str(c) for c in parts.table.meta.columns]:
            raise InputError(f"Column {group!r} was not found in 'X'.")
        return column_labels(parts.table.labels(group), n, owner)
    if parts.frame is not None:
        raw = parts.frame.iloc[:, [str(c) for c in parts.frame.columns].index(group)]
    elif parts.dataset is not None and group in parts.dataset.variables:
        raw = parts.dataset[group]
    elif parts.dataarray is not None and group in parts.dataarray.coords:
        raw = parts.dataarray.coords[group]
    else:
        raise InputError(f"Column {group!r} was not found in 'X'.")
    if raw.ndim != 1:
        raise InputError(f"The group variable {group!r} of X must be 1-D. Got {raw.ndim}-D.")
    return column_labels(raw.data if isinstance(raw, xr.DataArray) else raw, n, owner)


def check_group_name(group: str, parts: _Parts) -> None:
    """Refuse a ``group`` name the input does not hold (metadata only: no labels are read)."""
    if parts.table is not None:
        names = [str(c) for c in parts.table.meta.columns]
    elif parts.frame is not None:
        names = [str(c) for c in parts.frame.columns]
    else:
        names = [str(v) for v in (parts.dataset.variables if parts.dataset is not None else ())]
        names += [str(c) for c in (parts.dataarray.coords if parts.dataarray is not None else ())]
        if parts.array is not None:
            names = [n for n in names if n != parts.array]
    if group not in names:
        where = f"{parts.path!r}" if parts.path else "X"
        has = f"; it holds {_quote(sorted(set(names)))}" if names else ""
        raise InputError(f"The group variable {group!r} was not found in {where}{has}.")


def as_data(X: Any, *, owner: str = "dp_loading", columns: ColumnSpec = None,
            array: str | None = None, storage_options: dict | None = None, min_rows: int = 2,
            min_cols: int = 1, chunk_rows: int | None = None, group: Any = None) -> DataSource:
    """Validate ``X`` and wrap it as a lazy ``n × p`` float64 dask array with variable names.

    Parameters
    ----------
    X
        NumPy array, pandas DataFrame (non-numeric columns are dropped with a warning), dask
        array, xarray DataArray (dims: samples, variables) or Dataset, a path/URL of a Zarr
        array or group (a group written by ``xarray.Dataset.to_zarr`` or by :func:`convert`),
        or a table: a Dask DataFrame, a Parquet file or directory, a CSV file or glob
        (numeric columns, as for pandas; read in parallel, :mod:`dppca_dask.io.tables`).
    owner
        Public function name used in error messages.
    columns
        Variables to keep, by name or 0-based index, in the order given.
    array
        Name of the 2-D array in a Zarr group or Dataset holding several.
    storage_options
        Passed to fsspec for URLs (``s3://``, ``gs://``, ``memory://``...).
    min_rows, min_cols
        Smallest accepted ``n`` and ``p``.
    chunk_rows
        Rows per chunk. Default: about 64 MiB per chunk for in-memory inputs; the existing row
        chunks for dask and Zarr inputs.
    group
        A column name of a data frame, a 1-D variable of a Zarr group or Dataset, a coordinate
        along the first dimension of a DataArray, or labels of length ``n``. Read eagerly.

    Returns
    -------
    DataSource
        Variables default to ``X1..Xp`` where the input carries no names.

    Raises
    ------
    InputError
        When ``X``, ``columns``, ``array`` or ``group`` cannot be used; the message names the rule.

    Examples
    --------
    >>> import numpy as np
    >>> src = as_data(np.arange(6).reshape(3, 2))
    >>> src.n, src.p, src.variables, src.array.dtype, src.checked_finite
    (3, 2, ('X1', 'X2'), dtype('float64'), True)
    """
    min_rows = parse_int(min_rows, "min_rows", owner, low=0)
    min_cols = parse_int(min_cols, "min_cols", owner, low=0)
    if chunk_rows is not None:
        chunk_rows = parse_int(chunk_rows, "chunk_rows", owner, low=1)
    parts = _resolve(X, owner, array, storage_options, columns, group)
    values = parts.values
    n, p = (int(s) for s in values.shape)
    if n < min_rows:
        raise _x_error(owner, f"have at least {_WORDS.get(min_rows, min_rows)} rows", f"{n}")
    if p < min_cols:
        word = _WORDS.get(min_cols, min_cols)
        raise _x_error(owner, f"have at least {word} column{'s' * (min_cols != 1)}", f"{p}")
    groups = None if group is None else _group_labels(group, parts, n, owner)
    if isinstance(values, np.ndarray):
        values = np.asarray(values, dtype=np.float64)
        rows = chunk_rows or default_chunk_rows(n, p)
        _check_finite(values, parts.variables, owner, rows)
        arr = da.from_array(values, chunks=(min(rows, n) or 1, p))
    else:
        arr = values.astype(np.float64) if values.dtype != np.float64 else values
        arr = arr.rechunk({0: chunk_rows, 1: -1} if chunk_rows else {1: -1})
    return DataSource(arr, parts.variables, n, p, parts.origin,
                      checked_finite=isinstance(values, np.ndarray), groups=groups)


def describe_source(X: Any, *, owner: str = "dp_loading", columns: ColumnSpec = None,
                    array: str | None = None, storage_options: dict | None = None,
                    group: str | None = None) -> SourceInfo:
    """Shape, dtype, chunks and names of ``X`` from metadata only; no values of ``X`` are read.

    Parameters are those of :func:`as_data`; a data-frame column named by ``group`` is left out
    of the variables, but no labels are read (a ``group`` name the input lacks is an
    :class:`InputError`). Zarr coordinates (the variable names) are small and
    are read; data chunks are not. The row and column minimums are not checked here.

    Examples
    --------
    >>> import numpy as np
    >>> info = describe_source(np.zeros((4, 3), dtype=np.float32))
    >>> info.n, info.p, info.dtype, info.chunks, info.nbytes
    (4, 3, 'float32', ((4,), (3,)), 96)
    """
    parts = _resolve(X, owner, array, storage_options, columns, group)
    if isinstance(group, str):
        check_group_name(group, parts)
    n, p = (int(s) for s in parts.values.shape)
    if isinstance(parts.values, np.ndarray):
        rows = default_chunk_rows(n, p)
        row_chunks = (rows,) * (n // rows) + ((n % rows,) if n % rows else ())
    else:
        row_chunks = tuple(int(c) for c in parts.values.chunks[0])
    return SourceInfo(parts.origin, n, p, str(parts.values.dtype), (row_chunks, (p,)),
                      parts.variables, n * p * 8, parts.path, parts.array)
