"""The app's deployment file (APP.yaml), its catalogue of datasets, and uploads.

APP.yaml (every key optional)::

    datasets:                      # the catalogue: Zarr stores the analysts may use
      - name: Gaussian demo        # shown in the dataset menu (default: the path)
        path: /srv/data/gau.zarr
        array: X                   # the array of a Zarr group (default: the reader's pick)
        group: group               # a group-label variable of the store (default: none)
        C_clip: 150                # public default of the clipped scree control (default 3)
    demo: ./dppca-demo/gau.zarr    # added to the menu when it exists (default shown here)
    uploads: true                  # allow CSV/Parquet uploads (converted to Zarr first)
    upload_directory: ./dppca-app-uploads
    output_directory: ./dppca-app-runs     # each release writes a new run directory here
    allow_non_private: false       # offer the NOT PRIVATE reference panels (pca.non_private)
    cluster: {kind: local}         # the run config's cluster section (dppca-dask run's models)
    max_upload_mib: 200

The ledger is the deployment's (Dask config ``dppca.ledger.url``), the same as ``dppca-dask
run``'s; APP.yaml cannot name another.

Groups: for a catalogue store only names are used (its ``group`` variable, or the entry's
``group``): guessing from values would show the analyst something about the data. For an upload,
the uploader holds the file, so the guess follows the R app (:func:`guess_group_column`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError

from dppca_dask.errors import ConfigError, InputError
from dppca_dask.pipeline.cluster_config import ClusterConfig, LocalClusterConfig
from dppca_dask.pipeline.config import safe_load_unique

__all__ = ["GROUP_NAMES", "AppConfig", "CatalogueEntry", "DatasetChoice", "convert_upload",
           "dataset_choices", "describe_choice", "guess_group_column", "load_app_config",
           "numeric_columns", "read_upload_frame"]

GROUP_NAMES = ("group", "groups", "label", "labels", "class", "cluster", "g", "color", "colour")
"""Column names taken for group labels, in the R app's order (``dppca_app``)."""
LOW_CARDINALITY = 10
"""An integer column with at most this many distinct values (and fewer than n) may be a group."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CatalogueEntry(_Model):
    """One Zarr store of the catalogue."""

    path: str = Field(min_length=1)
    name: str | None = None
    array: str | None = None
    group: str | None = None
    C_clip: PositiveFloat | None = None


class AppConfig(_Model):
    """APP.yaml (see the module docstring); relative paths are taken from the working directory."""

    datasets: list[CatalogueEntry] = Field(default_factory=list)
    demo: str | None = "dppca-demo/gau.zarr"
    uploads: bool = True
    upload_directory: str = "dppca-app-uploads"
    output_directory: str = "dppca-app-runs"
    allow_non_private: bool = False
    cluster: ClusterConfig = Field(default_factory=LocalClusterConfig)
    max_upload_mib: PositiveInt = 200


def load_app_config(path: str | os.PathLike[str] | None) -> AppConfig:
    """APP.yaml as an :class:`AppConfig` (``None``: the defaults); problems are ConfigErrors."""
    if path is None:
        return AppConfig()
    source = Path(path)
    if not source.is_file():
        raise ConfigError(f"App config file not found: {str(source)!r}.")
    data = safe_load_unique(source.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"App config file {str(source)!r} must hold a mapping of settings.")
    try:
        return AppConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"key {'.'.join(map(str, e['loc']))!r}: {e['msg']}"
                             for e in exc.errors())
        raise ConfigError(f"Invalid app config {str(source)!r}: {problems}.") from None


@dataclass(frozen=True)
class DatasetChoice:
    """A dataset the form offers: a Zarr store, its array and group variable (names only)."""

    label: str
    path: str
    array: str | None = None
    group: str | None = None
    C_clip: float = 3.0
    upload: bool = False


def _store_group(path: str) -> str | None:
    """The store's ``group`` variable, when it has one (a name read from the listing only)."""
    return "group" if (Path(path) / "group").is_dir() else None


def dataset_choices(config: AppConfig) -> list[DatasetChoice]:
    """The catalogue's entries, then the demo dataset when it exists (the demo's public C_clip:
    about 4 x the largest PC variance of the generator's known parameters, as ``dppca-dask
    demo``)."""
    out = [DatasetChoice(e.name or e.path, e.path, e.array,
                         e.group if e.group is not None else _store_group(e.path),
                         e.C_clip if e.C_clip is not None else 3.0)
           for e in config.datasets]
    demo = config.demo
    if demo and Path(demo).exists() and all(c.path != demo for c in out):
        out.append(DatasetChoice(f"Demo: Gaussian with groups ({demo})", demo, "X",
                                 _store_group(demo), 150.0))
    return out


def read_upload_frame(name: str, data: bytes) -> pd.DataFrame:
    """The first rows of an uploaded CSV or Parquet file (for the column menus)."""
    import io

    lower = name.lower()
    try:
        if lower.endswith((".parquet", ".pq")):
            return pd.read_parquet(io.BytesIO(data))
        if lower.endswith(".csv"):
            return pd.read_csv(io.BytesIO(data), nrows=5000)
    except (ValueError, OSError) as exc:
        raise InputError(f"The uploaded file {name!r} could not be read "
                         f"({type(exc).__name__}: {exc}).") from None
    raise InputError(f"The uploaded file {name!r} must be a .csv, .parquet or .pq file.")


def guess_group_column(frame: pd.DataFrame) -> str | None:
    """The group column, as the R app guesses it: a column named like a group (group, label,
    class, cluster, ...), else the first non-numeric column, else a low-cardinality integer
    column (at most :data:`LOW_CARDINALITY` distinct values, fewer than the rows).

    Examples
    --------
    >>> import pandas as pd
    >>> guess_group_column(pd.DataFrame({"x": [1.0, 2.0], "Class": [1, 2]}))
    'Class'
    >>> guess_group_column(pd.DataFrame({"x": [1.0, 2.0], "site": ["a", "b"]}))
    'site'
    >>> guess_group_column(pd.DataFrame({"x": [0.5, 1.5, 2.5], "k": [1, 2, 1]}))
    'k'
    >>> guess_group_column(pd.DataFrame({"x": [0.5, 1.5], "y": [1.0, 2.0]})) is None
    True
    """
    by_name = {str(c).lower(): str(c) for c in frame.columns}
    for name in GROUP_NAMES:
        if name in by_name:
            return by_name[name]
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]) or pd.api.types.is_bool_dtype(
                frame[column]):
            return str(column)
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_integer_dtype(values):
            distinct = values.nunique()
            if distinct <= LOW_CARDINALITY and distinct < len(values):
                return str(column)
    return None


def numeric_columns(frame: pd.DataFrame, group: str | None) -> list[str]:
    """The numeric (non-boolean) columns of ``frame`` other than ``group``."""
    return [str(c) for c in frame.columns if str(c) != group
            and pd.api.types.is_numeric_dtype(frame[c])
            and not pd.api.types.is_bool_dtype(frame[c])]


def convert_upload(name: str, data: bytes, directory: str | os.PathLike[str], *,
                   columns: Sequence[str] | None, group: str | None) -> DatasetChoice:
    """Convert an uploaded CSV/Parquet file with :func:`dppca_dask.io.convert.convert`.

    The store is named by a hash of the file's bytes and the chosen columns and group, so the
    same upload reuses its store -- and with it its dataset id and budget ledger account --
    instead of opening a fresh account.
    """
    from dppca_dask.io.convert import convert

    suffix = ".parquet" if name.lower().endswith((".parquet", ".pq")) else ".csv"
    digest = hashlib.sha256(data)
    digest.update(repr((list(columns or ()), group)).encode())
    key = digest.hexdigest()[:16]
    base = Path(directory)
    base.mkdir(parents=True, exist_ok=True)
    store = base / f"{Path(name).stem[:40]}-{key}.zarr"
    if not store.exists():
        raw = base / f"{key}{suffix}"
        raw.write_bytes(data)
        try:
            convert(raw, store, columns=list(columns) if columns else None, group_column=group)
        finally:
            raw.unlink(missing_ok=True)
    return DatasetChoice(f"Upload: {name} ({key})", str(store), "X",
                         "group" if group else None, 3.0, upload=True)


def describe_choice(choice: DatasetChoice) -> dict[str, Any]:
    """Public metadata of ``choice`` (n, p, variable names); no data values are read."""
    from dppca_dask.io.data import describe_source

    info = describe_source(choice.path, owner="dp_pca", array=choice.array, group=choice.group)
    return {"n": info.n, "p": info.p, "variables": list(info.variables)}
