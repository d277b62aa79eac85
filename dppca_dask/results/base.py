"""Result types: thin frozen wrappers around one labelled :class:`xarray.Dataset`.

Every result stores its data variables, plus two attrs: ``dppca_kind`` (which result type) and
``dppca_metadata`` (JSON: n, p, budgets, ledger, calibration, whether the noise generator was
seeded -- never the seed), and ``dppca_guarantee``: ``"private"``, or ``"NOT PRIVATE: ..."`` when
the caller fixed the noise generator (:data:`SEEDED_NOTE`: anyone who knows or guesses the seed
can recompute the noise). Non-private reference variables carry ``private = 0`` and a
description starting with "NOT PRIVATE". ``to_zarr``/``to_netcdf`` write the Dataset atomically
(a temporary sibling, then a rename) and refuse to overwrite unless asked; :func:`load_result`
reads either back into the same result type.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import xarray as xr

from dppca_dask._rformat import format_r_matrix, format_r_scalar
from dppca_dask._version import package_version
from dppca_dask.errors import Fix, InputError, OutputExistsError
from dppca_dask.privacy.accountant import current_recording
from dppca_dask.privacy.accounting import (
    SpendRecord,
    ledger_from_dicts,
    ledger_to_dicts,
    ledger_totals,
)
from dppca_dask.privacy.budget import BudgetPlan
from dppca_dask.privacy.zcdp import ZCDPPlan
from dppca_dask.results.cf import add_cf_attributes
from dppca_dask.results.direction_intervals import (
    direction_interval_lines,
    direction_interval_variables,
    loading_noise_sd,
)
from dppca_dask.results.plotters import plotter
from dppca_dask.results.recorded import recorded_lines

__all__ = [
    "LoadingResult",
    "LoadingSummary",
    "build_loading_result",
    "load_result",
    "write_atomically",
]

_RESULT_TYPES: dict[str, type[Result]] = {}


def write_atomically(
    path: str | os.PathLike[str], writer: Callable[[str], object], *, overwrite: bool = False
) -> str:
    """Run ``writer(tmp)`` on a temporary sibling ``.NAME.tmp-XXXXXXXX`` of ``path``, then move
    it into place.

    A failed write -- an exception, or Ctrl-C/SIGTERM raised as one -- leaves nothing at
    ``path`` and removes the temporary sibling; an existing ``path`` is an error unless
    ``overwrite`` (then it is replaced only after the new output is complete, and put back if
    the swap is interrupted).
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise OutputExistsError(f"Output {str(target)!r} already exists.",
                                fix=Fix((("overwrite",),), "True", "to replace it"))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        writer(str(tmp))
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            try:
                os.replace(target, old / target.name)
                try:
                    os.replace(tmp, target)
                except BaseException:
                    os.replace(old / target.name, target)  # put the previous output back
                    raise
            finally:
                if target.exists():  # else the previous output is kept in `old`, never deleted
                    shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    finally:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists() or tmp.is_symlink():
            tmp.unlink()
    return str(target)


def consolidate_zarr(path: str | os.PathLike[str]) -> None:
    """Consolidate the metadata of a written result store, at its root and in each group below,
    so that ``xr.open_zarr`` of the store or of one part (``pca.zarr/score``) reads one document
    and does not warn. (Zarr 3 calls consolidated metadata an extension; its warning saying so
    is silenced here.)"""
    import zarr

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part",
                                category=UserWarning)
        root = zarr.open_group(os.fspath(path), mode="r+")
        for name, _ in root.groups():
            zarr.consolidate_metadata(os.fspath(path), path=name)
        zarr.consolidate_metadata(os.fspath(path))


SEEDED_NOTE = ("NOT PRIVATE: the noise generator was seeded by the caller, so anyone who knows "
               "or guesses the seed can recompute the noise and remove it (tests and demos "
               "only)")
"""What a release made with a caller-fixed generator is marked with (attributes, report,
summary, ledger)."""


def guarantee_of(meta: dict[str, Any]) -> str:
    """``"private"``, or the NOT PRIVATE note of a seeded release, from its metadata."""
    return SEEDED_NOTE if meta.get("rng", {}).get("seeded") else "private"


@dataclass(frozen=True)
class Result:
    """Base of the result types: an immutable view of one Dataset."""

    dataset: xr.Dataset
    kind: ClassVar[str] = ""

    def __post_init__(self) -> None:
        """Every result says in its attributes whether its noise is outside the guarantee, and
        carries CF-style metadata (:mod:`dppca_dask.results.cf`)."""
        if "dppca_metadata" in self.dataset.attrs:
            self.dataset.attrs["dppca_guarantee"] = guarantee_of(self.metadata)
        add_cf_attributes(self.dataset)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind:
            _RESULT_TYPES[cls.kind] = cls

    @property
    def metadata(self) -> dict[str, Any]:
        """n, p, budgets, ledger, calibration, rng (seeded or not) and provenance."""
        return json.loads(self.dataset.attrs["dppca_metadata"])

    @property
    def ledger(self) -> tuple[SpendRecord, ...]:
        """Every mechanism call of this release (and recorded prior releases)."""
        return ledger_from_dicts(self.metadata["ledger"])

    def summary(self) -> Any:
        """A printable summary of the release (each result kind defines its own)."""
        raise NotImplementedError(f"{type(self).__name__} defines no summary()")

    def plot(self, *args: Any, **kwargs: Any) -> Any:
        """The release's figure (each result kind defines its own; post-processing only)."""
        raise NotImplementedError(f"{type(self).__name__} defines no plot()")

    def _repr_html_(self) -> str:
        """A compact HTML card for notebooks: kind, shape, budget and spend, the key table and
        a private / NOT PRIVATE badge (:func:`dppca_dask.results.html.result_card`)."""
        from dppca_dask.results.html import result_card

        return result_card(self)

    def to_zarr(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> str:
        """Write the Dataset as a Zarr store (atomically; refuses to overwrite by default)."""
        def write(tmp: str) -> None:
            with fixed_width_writer():
                fixed_width_labels(plain_strings(self.dataset)).to_zarr(
                    tmp, mode="w", consolidated=False)
                consolidate_zarr(tmp)

        return write_atomically(path, write, overwrite=overwrite)

    def to_netcdf(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> str:
        """Write the Dataset as NetCDF-4 (h5netcdf engine; atomic; no overwrite by default).

        Labels are written in one canonical form (:func:`plain_strings`), so the same values give
        the same bytes whether the result was just fitted or loaded from a store."""
        return write_atomically(
            path, lambda tmp: plain_strings(self.dataset).to_netcdf(tmp, engine="h5netcdf"),
            overwrite=overwrite
        )


R = TypeVar("R", bound=Result)


@dataclass(frozen=True, eq=False)
class Part(Generic[R]):
    """What a stage hands over: the result it built and the spend records it wrote, as objects
    (the records are not read back from the result's JSON metadata)."""

    result: R
    records: tuple[SpendRecord, ...]


def freeze_dataset(ds: xr.Dataset) -> xr.Dataset:
    for var in ds.variables.values():
        if isinstance(var.data, np.ndarray):
            var.data.flags.writeable = False
    return ds


_RESULT_MODULES = ("dppca_dask.results.scree", "dppca_dask.results.score",
                   "dppca_dask.results.pca", "dppca_dask.results.covariance")
"""The modules of the result types other than loading (this module's own)."""


def load_result(path: str | os.PathLike[str]) -> Result:
    """Read a result written by ``to_zarr`` or ``to_netcdf`` back into its result type."""
    target = Path(path)
    if not target.exists():
        raise InputError(f"Result not found: {str(target)!r}.")
    try:
        if target.is_dir():
            ds = xr.open_zarr(target, consolidated=False).load()
        else:
            ds = xr.open_dataset(target, engine="h5netcdf").load()
    except Exception as exc:
        raise InputError(f"{str(target)!r} is not a readable dppca_dask result: {exc}") from exc
    kind = ds.attrs.get("dppca_kind")
    for module in _RESULT_MODULES:  # each result type registers itself when its module loads
        importlib.import_module(module)
    if kind not in _RESULT_TYPES or "dppca_metadata" not in ds.attrs:
        raise InputError(f"{str(target)!r} is not a dppca_dask result (no 'dppca_kind' attribute).")
    opener = getattr(_RESULT_TYPES[kind], "_open", None)
    if opener is not None:  # a result stored as several groups (dp_pca)
        return opener(target)
    ds = plain_strings(rename_legacy(ds))
    return _RESULT_TYPES[kind](freeze_dataset(ds))


LEGACY_NAMES = {"method": "mechanism"}
"""Dimension/coordinate names of stores written by earlier versions, and their names now
(``method`` is a keyword of xarray's ``sel``/``interp``/``reindex``, so ``sel(method=...)`` did
not select)."""


def rename_legacy(ds: xr.Dataset) -> xr.Dataset:
    """Rename the dimensions and coordinates of an older store to the current schema."""
    old = {k: v for k, v in LEGACY_NAMES.items() if k in ds.dims or k in ds.variables}
    return ds.rename(old) if old else ds


def plain_strings(ds: xr.Dataset) -> xr.Dataset:
    """Labels come back from stores as object or StringDType arrays; make them object arrays of
    plain ``str`` (as the estimators build them: :func:`coord_labels`), and drop the store's
    encodings, so that a loaded result equals the one that was written (writing it again gives
    the same bytes)."""
    fixed = {}
    for name, var in ds.variables.items():
        if var.dtype.kind in "OTU":
            values = coord_labels(var.values.ravel()).reshape(var.shape)
            fixed[name] = var.copy(data=values)
    ds = ds.assign_coords({k: v for k, v in fixed.items() if k in ds.coords}).assign(
        {k: v for k, v in fixed.items() if k not in ds.coords}
    ).drop_encoding()
    # one order of the variables (a store lists them sorted): the writers follow it
    return xr.Dataset({k: ds.variables[k] for k in sorted(map(str, ds.data_vars))},
                      coords={k: ds.variables[k] for k in sorted(map(str, ds.coords))},
                      attrs=ds.attrs)


def fixed_width_labels(ds: xr.Dataset) -> xr.Dataset:
    """The labels (coordinates and variables of strings) as fixed-width ``<U`` arrays, as the
    Zarr writers store them.

    A variable-length string array comes back from a Zarr v3 store as NumPy's ``StringDType``,
    which xarray's plotting refuses ("Plotting requires coordinates to be numeric ..."); a
    fixed-width one comes back as ``<U`` and ``xr.open_zarr(store).v.plot()`` works on every
    variable. Readers of the package (:func:`load_result`) turn either back into ``str``
    objects (:func:`plain_strings`), so a loaded result is the same either way.
    """
    fixed = {}
    for name, var in ds.variables.items():
        if var.dtype.kind in "OTU":
            values = [str(v) for v in np.asarray(var.values).ravel()]
            width = max([1, *map(len, values)])
            fixed[name] = var.copy(data=np.array(values, dtype=f"<U{width}").reshape(var.shape))
    return ds.assign_coords({k: v for k, v in fixed.items() if k in ds.coords}).assign(
        {k: v for k, v in fixed.items() if k not in ds.coords})


@contextlib.contextmanager
def fixed_width_writer() -> Iterator[None]:
    """Write fixed-width labels without zarr-python's ``UnstableSpecificationWarning``.

    zarr-python stores ``<U`` arrays with its ``fixed_length_utf32`` data type, which has no
    Zarr v3 specification yet: zarr-python (>= 3.1) reads it, other Zarr implementations may
    not read those label arrays (the numbers are plain float64/int64; the NetCDF output is the
    portable form; docs/guide/pca.md says so). The warning would say the same on every write.
    """
    from zarr.errors import UnstableSpecificationWarning

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UnstableSpecificationWarning)
        yield


def budget_line(budget: dict[str, float]) -> str:
    eps = format_r_scalar(budget["eps"])
    delta = format_r_scalar(budget["delta"])
    return f"Total privacy budget: eps = {eps} ; delta = {delta} "


def _head(n: int, p: int, components: int) -> list[str]:
    return [
        f"Data: {n} observations x {p} variables",
        f"Components: {components} PC directions",
    ]


def matrix_block(title: str, matrix: xr.DataArray, digits: int) -> list[str]:
    rows = min(6, matrix.shape[0])
    cols = min(4, matrix.shape[1])
    shown = matrix.isel(variable=slice(0, rows), component=slice(0, cols))
    return [
        f"{title}  (first {rows} variables x first {cols} PCs):",
        format_r_matrix(
            shown.values.tolist(),
            [str(v) for v in shown["variable"].values],
            [str(c) for c in shown["component"].values],
            digits=digits,
        ),
    ]


@dataclass(frozen=True)
class LoadingResult(Result):
    """Private PC directions (``dp_loading``); see :func:`~dppca_dask.dp_loading`."""

    kind: ClassVar[str] = "loading"

    @property
    def directions(self) -> xr.DataArray:
        """Private directions, dims ``(variable, component)``, orthonormal columns PC1..PCp."""
        return self.dataset["directions"]

    @property
    def nonprivate(self) -> xr.DataArray | None:
        """Ordinary covariance PC directions (NOT private), or ``None`` when not stored."""
        return self.dataset.get("nonprivate_directions")

    def summary(self) -> LoadingSummary:
        """Summarise the fit without recomputing anything or spending budget."""
        return LoadingSummary(self.directions, self.nonprivate, self.metadata,
                              angle=self.dataset.get("angle_upper"),
                              identifiable=self.dataset.get("direction_identifiable"),
                              guaranteed=self.dataset.get("angle_upper_guaranteed"))

    def plot(
        self,
        type: Any = ("vector", "point", "heatmap"),
        heatmap_components: Any = (1, 2, 3),
        variables: Any = "all",
        *,
        axes: Any = (1, 2),
    ) -> Any:
        """Vector, point and heatmap panels (SPEC §9.3); see
        :func:`dppca_dask.plots.loading.plot_loading`."""
        return plotter("loading")(self, type=type, heatmap_components=heatmap_components,
                                  variables=variables, axes=axes)

    def __repr__(self) -> str:
        meta = self.metadata
        stored = "stored" if self.nonprivate is not None else "not stored"
        return "\n".join(
            [
                "Differentially Private PC Directions",
                *_head(meta["n"], meta["p"], self.directions.shape[1]),
                budget_line(meta["privacy"]["allocations"]["loading"]),
                f"Non-private reference: {stored} ",
            ]
        )


@dataclass(frozen=True)
class LoadingSummary:
    """What ``LoadingResult.summary()`` returns; printing shows at most 6 variables × 4 PCs."""

    directions: xr.DataArray
    nonprivate: xr.DataArray | None
    metadata: dict[str, Any]
    digits: int = 3
    angle: xr.DataArray | None = None
    identifiable: xr.DataArray | None = None
    guaranteed: xr.DataArray | None = None

    def __repr__(self) -> str:
        meta = self.metadata
        lines = [
            "DP PC Directions Summary",
            *_head(meta["n"], meta["p"], self.directions.shape[1]),
            "",
            *matrix_block("Private PC directions", self.directions, self.digits),
            "",
        ]
        if self.nonprivate is not None:
            lines += [*matrix_block("Non-private PC directions", self.nonprivate, self.digits), ""]
        stored = "stored" if self.nonprivate is not None else "not stored"
        lines += [
            budget_line(meta["privacy"]["allocations"]["loading"]),
            f"Non-private reference: {stored} ",
            "The full direction matrix is available as .directions.",
        ]
        if self.nonprivate is not None:
            lines.append("The non-private reference matrix is available as .nonprivate.")
        if self.angle is not None and self.identifiable is not None:
            lines += direction_interval_lines(
                np.asarray(self.angle.values), np.asarray(self.identifiable.values),
                guaranteed=None if self.guaranteed is None else np.asarray(self.guaranteed.values))
        lines += recorded_lines(meta)  # last, after the seed's lines
        return "\n".join(lines)


def coord_labels(values: Any) -> np.ndarray:
    """String labels as an object array: stored as variable-length UTF-8 by Zarr and NetCDF."""
    return np.array([str(v) for v in values], dtype=object)


def base_metadata(
    *,
    kind: str,
    n: int,
    p: int,
    plan: BudgetPlan | ZCDPPlan,
    ledger: Sequence[SpendRecord],
    calibration: str,
    seeded: bool,
    non_private: bool,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Metadata common to every release (JSON-ready; holds no seed and no data statistic);
    ``recorded_in``: where a Python-API release is recorded
    (:func:`~dppca_dask.privacy.accountant.current_recording`; absent from the CLI's)."""
    recording = current_recording()
    return {
        "kind": kind,
        "package": "dppca_dask",
        "version": package_version(),
        "n": n,
        "p": p,
        "privacy": plan.as_dict(),
        "calibration": calibration,
        "ledger": ledger_to_dicts(ledger),
        "ledger_total": ledger_totals(ledger),
        "rng": {"seeded": seeded, "source": "caller-seeded" if seeded else "csprng (os entropy)",
                "guarantee": SEEDED_NOTE if seeded else "private"},
        "non_private": non_private,
        **({} if recording is None else {"recorded_in": recording}),
        **(extra or {}),
    }


def build_loading_result(
    *,
    directions: np.ndarray,
    nonprivate: np.ndarray | None,
    variables: Sequence[str],
    n: int,
    plan: BudgetPlan,
    ledger: Sequence[SpendRecord],
    calibration: str,
    seeded: bool,
    extra: dict[str, Any] | None = None,
    eigenvalues: np.ndarray | None = None,
) -> LoadingResult:
    """The loading result; ``eigenvalues`` (of the released noisy Kendall matrix, decreasing)
    add the angle bounds and eigenvalue intervals
    (:mod:`~dppca_dask.results.direction_intervals`; post-processing)."""
    p = len(variables)
    coords = {
        "variable": coord_labels(variables),
        "component": coord_labels(f"PC{j + 1}" for j in range(p)),
    }
    data_vars: dict[str, Any] = {
        "directions": (
            ("variable", "component"),
            directions,
            {"private": 1, "description": "private PC directions (orthonormal columns)"},
        )
    }
    if nonprivate is not None:
        data_vars["nonprivate_directions"] = (
            ("variable", "component"),
            nonprivate,
            {
                "private": 0,
                "description": "NOT PRIVATE: covariance PC directions, sign-aligned to the "
                "private ones",
            },
        )
    meta = base_metadata(
        kind="loading", n=n, p=p, plan=plan, ledger=ledger, calibration=calibration,
        seeded=seeded, non_private=nonprivate is not None, extra=extra,
    )
    sd = loading_noise_sd(meta["ledger"])
    if eigenvalues is not None and sd is not None:
        data_vars.update(direction_interval_variables(np.asarray(eigenvalues), sd, p))
    ds = xr.Dataset(
        data_vars,
        coords=coords,
        attrs={
            "title": "dppca_dask: differentially private PC directions",
            "dppca_kind": "loading",
            "dppca_metadata": json.dumps(meta),
        },
    )
    return LoadingResult(freeze_dataset(ds))
