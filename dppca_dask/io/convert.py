"""Convert CSV, Parquet and ``.npy`` files into the Zarr layout the estimators read.

Layout (an xarray Dataset written with ``to_zarr``, Zarr format 3, not consolidated):

* ``X`` -- float64, dims ``("sample", "variable")``, chunks ``(chunk_rows, p)``;
* ``variable`` -- coordinate with the column names (variable-length strings);
* ``group`` -- optional, dims ``("sample",)``, the group labels as strings; its attribute
  ``source_column`` keeps the name of the column they came from.

Files are streamed in blocks of ``chunk_rows`` rows and each block is appended as one Zarr chunk,
so memory stays bounded by a few chunks whatever the file size. The store is written to a
temporary sibling directory and renamed into place only when complete, so a failed conversion
leaves nothing at ``out_path``; ``overwrite`` replaces only an existing Zarr store, and an
``out_path`` equal to the input file, inside it or a folder containing it is refused (symlinks
resolved). Non-finite or missing values are refused (the estimators would
refuse them later). Only local output paths are supported.

Every store written here carries a dataset id for the budget ledger: a fresh UUID in the
``dppca_dataset_id`` attribute of the root group and of ``X``
(:data:`dppca_dask.io.identity.DATASET_ID_ATTR`). ``overwrite`` keeps the id of the store it
replaces (its spent budget stays with the path: the ledger over-counts rather than restart).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
import xarray as xr

from dppca_dask._validation import parse_bool, parse_choice, parse_int
from dppca_dask.errors import DPPCAError, Fix, InputError, OutputExistsError, ParameterError
from dppca_dask.io.data import ColumnSpec, column_labels, default_chunk_rows, frame_columns
from dppca_dask.io.duplicates import Duplicates, RowIndex
from dppca_dask.io.identity import DATASET_ID_ATTR, check_output_location, stamp_dataset_id
from dppca_dask.io.tables import CSV_OPTIONS, open_table

__all__ = ["FORMATS", "convert", "write_frames"]

FORMATS = ("csv", "parquet", "npy")
_SUFFIXES = {".csv": "csv", ".csv.gz": "csv", ".csv.bz2": "csv", ".csv.xz": "csv",
             ".csv.zst": "csv", ".csv.zip": "csv", ".parquet": "parquet", ".pq": "parquet",
             ".npy": "npy"}


def _infer_format(path: str, fmt: str | None) -> str:
    if fmt is not None:
        return parse_choice(fmt, "fmt", "convert", FORMATS)
    for suffix, name in _SUFFIXES.items():
        if path.lower().endswith(suffix):
            return name
    raise ParameterError(owner="convert", parameter="fmt", rule="must be given when the format "
                         "cannot be inferred from the file name (.csv, .csv.gz, .parquet, .pq, "
                         ".npy)", got=f"None for {path!r}")


def _ncols(path: str, fmt: str) -> int:
    """Number of columns of the file, read from its header or metadata."""
    if fmt == "csv":
        return len(pd.read_csv(path, nrows=0).columns)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return len(pq.ParquetFile(path).schema_arrow)
    return int(np.prod(np.load(path, mmap_mode="r").shape[1:], dtype=int))


def _frames(path: str, fmt: str, rows: int) -> Iterator[pd.DataFrame]:
    """The file as data frames of at most ``rows`` rows each."""
    if fmt == "csv":
        with pd.read_csv(path, chunksize=rows, **CSV_OPTIONS) as reader:  # exact floats
            yield from reader
    elif fmt == "parquet":
        yield from _parquet_frames(path)
    else:
        arr = np.load(path, mmap_mode="r")
        if arr.ndim != 2:
            raise InputError(f"The .npy file {path!r} must hold a 2-D array. Got {arr.ndim}-D.")
        names = [f"X{j + 1}" for j in range(arr.shape[1])]
        for start in range(0, arr.shape[0], rows):
            block = np.asarray(arr[start:start + rows])
            if block.dtype.kind == "b":  # NumPy booleans count as numbers, as in as_data
                block = block.astype(np.float64)
            yield pd.DataFrame(block, columns=names)


PARQUET_WINDOW = 8
"""Row groups read in parallel at a time by :func:`convert` (bounds its memory)."""


def _read_row_group_frame(path: str, group: int) -> pd.DataFrame:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).read_row_group(group).to_pandas()


def _parquet_frames(path: str) -> Iterator[pd.DataFrame]:
    """A Parquet file's row groups in order, read in parallel windows with the same per-row-group
    reader layout as :mod:`dppca_dask.io.tables` (row counts from the footer)."""
    import dask
    from dask import delayed

    groups = open_table(path, "parquet").row_groups
    for start in range(0, len(groups), PARQUET_WINDOW):
        window = groups[start:start + PARQUET_WINDOW]
        frames = dask.compute(*[delayed(_read_row_group_frame, pure=True)(f, g)
                                for f, g, _ in window], scheduler="threads")
        yield from frames


def _guarded(frames: Iterator[pd.DataFrame], src: str, kind: str) -> Iterator[pd.DataFrame]:
    """Re-raise read errors of the underlying file as :class:`InputError` naming it."""
    while True:
        try:
            frame = next(frames)
        except StopIteration:
            return
        except DPPCAError:
            raise
        except (OSError, ValueError, TypeError) as exc:
            raise InputError(f"Input {src!r} could not be read as {kind} "
                             f"({type(exc).__name__}: {exc}).") from None
        yield frame


def _rebatch(frames: Iterable[pd.DataFrame], rows: int) -> Iterator[pd.DataFrame]:
    """Regroup ``frames`` into blocks of exactly ``rows`` rows (the last may be shorter)."""
    buffer: list[pd.DataFrame] = []
    size = 0
    for frame in frames:
        buffer.append(frame)
        size += len(frame)
        while size >= rows:
            joined = pd.concat(buffer) if len(buffer) > 1 else buffer[0]
            yield joined.iloc[:rows]
            rest = joined.iloc[rows:]
            buffer, size = ([rest], len(rest)) if len(rest) else ([], 0)
    if size:
        yield pd.concat(buffer) if len(buffer) > 1 else buffer[0]


def _is_zarr_store(path: str) -> bool:
    return any(os.path.exists(os.path.join(path, f)) for f in ("zarr.json", ".zgroup", ".zarray"))


DuplicateMode = Literal["keep", "check", "drop"]


def _deduplicated(frames: Iterable[pd.DataFrame], columns: ColumnSpec, group_column: str | None,
                  source: str, owner: str, mode: DuplicateMode,
                  on_duplicates: Callable[[Duplicates], None] | None) -> Iterator[pd.DataFrame]:
    """``frames`` with rows whose features repeat an earlier row's dropped (``"drop"``) or only
    counted (``"check"``); ``on_duplicates`` receives the count and first rows at the end."""
    index = RowIndex()
    pos: list[int] | None = None
    offset = 0
    for frame in frames:
        if pos is None:
            with warnings.catch_warnings():  # _write_blocks warns about dropped columns
                warnings.simplefilter("ignore")
                pos, _ = frame_columns(frame, columns, group_column, owner, source)
        try:
            values = frame.iloc[:, pos].to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            yield frame  # _write_blocks reports the non-numeric values
            return
        repeated = index.add(values, offset)
        offset += len(frame)
        yield frame.iloc[~repeated] if mode == "drop" and repeated.any() else frame
    if on_duplicates is not None:
        on_duplicates(index.result())


def write_frames(frames: Iterable[pd.DataFrame], out_path: str | os.PathLike, *, rows: int,
                 columns: ColumnSpec = None, group_column: str | None = None,
                 overwrite: bool = False, source: str = "X", owner: str = "convert",
                 duplicates: DuplicateMode = "keep",
                 on_duplicates: Callable[[Duplicates], None] | None = None) -> str:
    """Append data-frame blocks to a new Zarr store in the layout of this module.

    The first block decides which columns are features (numeric ones, or those in ``columns``).
    ``rows`` is the chunk length; blocks are regrouped to it. ``duplicates``: ``"keep"`` every
    row, ``"check"`` (find rows whose features repeat an earlier row's; ``on_duplicates`` gets
    the :class:`~dppca_dask.io.duplicates.Duplicates`) or ``"drop"`` them (the first occurrence
    stays). Returns ``out_path`` as a string.

    Examples
    --------
    >>> import pandas as pd, tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "tiny.zarr")
    >>> frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [4, 5, 6], "g": ["x", "y", "x"]})
    >>> write_frames([frame], out, rows=2, group_column="g") == out
    True
    >>> ds = xr.open_zarr(out, consolidated=False)
    >>> ds["X"].dims, ds["X"].chunks, list(ds["variable"].values), list(ds["group"].values)
    (('sample', 'variable'), ((2, 1), (2,)), ['a', 'b'], ['x', 'y', 'x'])
    """
    out = os.fspath(out_path)
    rows = parse_int(rows, "chunk_rows", owner, low=1)
    overwrite = parse_bool(overwrite, "overwrite", owner)
    if os.path.lexists(out):
        if not overwrite:
            raise OutputExistsError(f"Output {out!r} already exists.", owner=owner,
                                    fix=Fix((("overwrite",),), "True", "to replace it"))
        if not (os.path.isdir(out) and _is_zarr_store(out)):
            raise OutputExistsError(f"Output {out!r} exists and is not a Zarr store; refusing to "
                                    "replace it.")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise InputError(f"The directory of output {out!r} does not exist.")
    previous = _existing_id(out) if os.path.lexists(out) else None
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.", suffix=".tmp", dir=parent)
    try:
        if duplicates != "keep":
            frames = _deduplicated(frames, columns, group_column, source, owner, duplicates,
                                   on_duplicates)
        _write_blocks(_rebatch(frames, rows), tmp, columns, group_column, source, owner)
        stamp_dataset_id(tmp, "X", dataset_id=previous)
        if os.path.lexists(out):
            if os.path.isdir(out) and not os.path.islink(out):
                shutil.rmtree(out)
            else:
                os.remove(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _existing_id(store: str) -> str | None:
    """The dataset id of the Zarr store being replaced (its ``X`` array's, else its root's)."""
    import zarr

    try:
        root = zarr.open(store=os.path.abspath(store), mode="r")
        for node in ([root["X"]] if isinstance(root, zarr.Group) and "X" in root else []) + [root]:
            value = node.attrs.get(DATASET_ID_ATTR)
            if isinstance(value, str):
                return value
    except Exception:  # noqa: BLE001 - not a readable store: nothing to keep
        return None
    return None


def _write_blocks(blocks: Iterable[pd.DataFrame], store: str, columns: ColumnSpec,
                  group_column: str | None, source: str, owner: str) -> None:
    pos: list[int] = []
    gpos = names = None
    offset = 0
    for frame in blocks:
        if names is None:
            pos, gpos = frame_columns(frame, columns, group_column, owner, source, stacklevel=5)
            names = [str(frame.columns[i]) for i in pos]
        try:
            values = frame.iloc[:, pos].to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            raise InputError(f"Input {source!r} has non-numeric values in column(s) "
                             f"{names} after row {offset}.") from None
        bad = ~np.isfinite(values)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise InputError(f"Input {source!r} must contain only finite, non-missing values. "
                             f"Got {int(bad.sum())} non-finite value(s) in rows {offset} to "
                             f"{offset + len(frame) - 1} (first at row {offset + int(r)}, column "
                             f"{names[int(c)]!r}) instead.")
        data: dict[str, Any] = {"X": (("sample", "variable"), values)}
        if gpos is not None:
            labels = column_labels(frame.iloc[:, gpos], len(frame), owner, "group_column")
            data["group"] = (("sample",), labels.astype(object),
                             {"source_column": str(frame.columns[gpos])})
        ds = xr.Dataset(data)
        if offset == 0:
            ds = ds.assign_coords(variable=np.array(names, dtype=object))
            encoding: dict[str, dict[str, Any]] = {"X": {"chunks": values.shape}}
            if gpos is not None:
                encoding["group"] = {"chunks": (len(values),)}
            ds.to_zarr(store, mode="w", encoding=encoding, consolidated=False,
                      write_empty_chunks=True)  # every chunk stored: none may be missing
        else:
            ds.to_zarr(store, append_dim="sample", consolidated=False, write_empty_chunks=True)
        offset += len(frame)
    if offset == 0:
        raise InputError(f"Input {source!r} has no data rows.")


def convert(in_path: str | os.PathLike, out_path: str | os.PathLike, *, fmt: str | None = None,
            chunk_rows: int | None = None, columns: ColumnSpec = None,
            group_column: str | None = None, overwrite: bool = False,
            duplicates: DuplicateMode = "keep",
            on_duplicates: Callable[[Duplicates], None] | None = None) -> str:
    """Convert a CSV, Parquet or ``.npy`` file to a Zarr group the estimators read lazily.

    Parameters
    ----------
    in_path
        Input file; ``.csv`` (also compressed, e.g. ``.csv.gz``), ``.parquet``/``.pq`` or ``.npy``.
    out_path
        Local path of the Zarr store to create.
    fmt
        ``"csv"``, ``"parquet"`` or ``"npy"``; inferred from the extension by default.
    chunk_rows
        Rows per chunk; by default about 64 MiB of float64 per chunk, at most ``n``.
    columns
        Feature columns by name or 0-based position; by default every numeric column (others are
        dropped with a warning). ``.npy`` columns are named ``X1..Xp``.
    group_column
        Column holding group labels, written as the ``group`` variable and left out of ``X``.
    overwrite
        Replace an existing Zarr store at ``out_path``.
    duplicates
        ``"keep"`` (default) every row; ``"check"``: find the rows whose features repeat an
        earlier row's (exact float64 equality) and pass the
        :class:`~dppca_dask.io.duplicates.Duplicates` to ``on_duplicates``; ``"drop"``: also
        leave them out (the first occurrence stays). Not private: for the data custodian.
    on_duplicates
        Called once at the end with the duplicates found (``"check"``/``"drop"``).

    Returns
    -------
    str
        ``out_path``.

    Raises
    ------
    InputError
        Missing or unreadable input, no usable column, non-numeric or non-finite values.
    OutputExistsError
        ``out_path`` exists and ``overwrite`` is False.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> from dppca_dask.io.data import as_data
    >>> d = tempfile.mkdtemp()
    >>> np.save(os.path.join(d, "x.npy"), np.arange(12.0).reshape(4, 3))
    >>> out = convert(os.path.join(d, "x.npy"), os.path.join(d, "x.zarr"), chunk_rows=3)
    >>> src = as_data(out)
    >>> src.variables, src.array.chunks
    (('X1', 'X2', 'X3'), ((3, 1), (3,)))
    """
    src = os.fspath(in_path)
    kind = _infer_format(src, fmt)
    if not os.path.isfile(src):
        raise InputError(f"Input file not found: {src!r}.")
    check_output_location(out_path, [("the input file", src)], parameter="out_path",
                          owner="convert", cls=ParameterError)
    try:
        p = _ncols(src, kind)
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"Input {src!r} could not be read as {kind} "
                         f"({type(exc).__name__}: {exc}).") from None
    rows = default_chunk_rows(2**62, p) if chunk_rows is None else chunk_rows
    mode = cast("DuplicateMode", parse_choice(duplicates, "duplicates", "convert",
                                              ("keep", "check", "drop")))
    frames = _guarded(_frames(src, kind, rows), src, kind)
    return write_frames(frames, out_path, rows=rows, columns=columns, group_column=group_column,
                        overwrite=overwrite, source=src, duplicates=mode,
                        on_duplicates=on_duplicates)
