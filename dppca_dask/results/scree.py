"""The result of ``dp_scree``: private scree values and PVE as a labelled xarray Dataset.

Schema (dims ``mechanism`` × ``component``, plus ``variable`` for the directions):

* ``scree``, ``pve`` (mechanism, component) -- the private releases after post-processing;
* ``scree_raw`` (mechanism, component) -- the private values before the monotone (PAVA) step;
* ``directions`` (variable, component) -- the directions the scores were taken on (the loading
  release, or the supplied ``V_dp``);
* ``center`` (component) -- the public centre of the scores (a private release, or the supplied
  constants); absent for the empirical centre, which is not released;
* ``scree_nonprivate``, ``pve_nonprivate`` (component) -- **NOT private**: the first k eigenvalues
  of the sample covariance and their PVE, when ``non_private=True``; with them
  ``direction_variance_nonprivate`` (component), the exact variance along each released direction
  (the quantity every mechanism estimates; the private values converge to it as ε → ∞).

The metadata (attrs) hold the budget plan, the ledger of every mechanism call, the controls, the
centring and the seeded flag -- never the seed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from dppca_dask._rformat import format_r_matrix, format_r_scalar
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import BudgetPlan
from dppca_dask.results.base import Result, base_metadata, coord_labels, freeze_dataset
from dppca_dask.results.direction_intervals import (
    IDENTIFIABLE_DEGREES,
    LEVEL,
    direction_interval_lines,
)
from dppca_dask.results.plotters import plotter
from dppca_dask.results.recorded import recorded_lines
from dppca_dask.results.scree_utility import (
    INTERVAL_LEVEL,
    cumulative_pve_lines,
    interval_lines,
    released_noise_lines,
    sampling_lines,
    scree_intervals,
)

__all__ = ["ScreeResult", "ScreeSummary", "build_scree_result"]

SHOWN_COMPONENTS = 8
_NOT_PRIVATE = "NOT PRIVATE: "


def _budget(entry: Mapping[str, float]) -> str:
    return f"eps = {format_r_scalar(entry['eps'])} ; delta = {format_r_scalar(entry['delta'])}"


@dataclass(frozen=True)
class ScreeResult(Result):
    """Private scree values and PVE (``dp_scree``); see :func:`~dppca_dask.dp_scree`.

    Select a mechanism with ``fit.scree.sel(mechanism="clipped")``. (Stores written before the
    dimension was renamed from ``method`` -- a keyword of xarray's ``sel`` -- are renamed on
    :func:`~dppca_dask.load_result`.)
    """

    kind: ClassVar[str] = "scree"

    @property
    def scree(self) -> xr.DataArray:
        """Private scree values, dims ``(mechanism, component)``."""
        return self.dataset["scree"]

    @property
    def pve(self) -> xr.DataArray:
        """Private proportions of variance explained over the k components, dims
        ``(mechanism, component)``."""
        return self.dataset["pve"]

    @property
    def scree_raw(self) -> xr.DataArray:
        """Private scree values before the monotone post-processing."""
        return self.dataset["scree_raw"]

    @property
    def mechanisms(self) -> tuple[str, ...]:
        """The scree mechanisms released, in the order of the ``mechanism`` dimension."""
        return tuple(str(m) for m in self.dataset["mechanism"].values)

    @property
    def methods(self) -> tuple[str, ...]:
        """Same as :attr:`mechanisms` (the ``method=`` argument of ``dp_scree``)."""
        return self.mechanisms

    @property
    def k(self) -> int:
        return int(self.dataset.sizes["component"])

    @property
    def directions(self) -> xr.DataArray:
        """The directions the scores were computed on, ``(variable, component)``."""
        return self.dataset["directions"]

    @property
    def center(self) -> xr.DataArray | None:
        """The public centre of the scores, or ``None`` for the (unreleased) empirical centre."""
        return self.dataset.get("center")

    @property
    def nonprivate(self) -> xr.Dataset | None:
        """NOT private: ``scree``, ``pve`` and ``direction_variance`` references, or ``None``."""
        if "scree_nonprivate" not in self.dataset:
            return None
        return xr.Dataset({
            "scree": self.dataset["scree_nonprivate"],
            "pve": self.dataset["pve_nonprivate"],
            "direction_variance": self.dataset["direction_variance_nonprivate"],
        })

    def summary(self) -> ScreeSummary:
        """Summarise the fit without recomputing anything or spending budget."""
        return ScreeSummary(self.dataset, self.metadata)

    def plot(self, type: str = "pve", *, control: Any = None, ax: Any = None) -> Any:
        """Scree or PVE curves (SPEC §5.6); returns the matplotlib Figure.

        With the non-private reference stored the figure shows it and is **not** a private
        release. See :func:`dppca_dask.plots.scree.plot_scree`.
        """
        return plotter("scree")(self, type=type, control=control, ax=ax)

    def _head(self) -> list[str]:
        meta = self.metadata
        return [
            f"Data: {meta['n']} observations x {meta['p']} variables",
            f"Components: {self.k} principal components",
            f"Methods: {', '.join(self.methods)}",
        ]

    def _budget_lines(self) -> list[str]:
        meta = self.metadata
        alloc = meta["privacy"]["allocations"]
        loading = alloc["loading"]
        how = ("prior release (supplied V_dp), not spent again" if loading["status"] == "prior"
               else "spent on the directions")
        share = meta["scree"]["center_share"]
        scree_note = "each method" + (f"; {format_r_scalar(100 * share)}% of it on the private "
                                      "centre, shared" if share else "")
        methods = len(self.methods)
        per = (f"per method ({methods} methods: each spends the scree share; the directions are "
               "shared)" if methods > 1 else "(one method)")
        first = "" if loading["status"] == "prior" else "the directions once + "
        spent = (f"{first}the centre once + the rest of the scree share x {methods}" if share
                 else f"{first}the scree share x {methods}")
        return [
            f"Privacy budget: {_budget(meta['privacy']['total'])} {per}",
            f"  loading: {_budget(loading)} ({how})",
            f"  scree: {_budget(alloc['scree'])} ({scree_note})",
            f"Spent by this release: {_budget(meta['ledger_total'])} (basic composition: "
            f"{spent})",
        ]

    def _tail(self) -> list[str]:
        meta = self.metadata
        center = meta["scree"]["center"]
        line = {"private": "private", "empirical": "empirical (OUTSIDE the privacy guarantee)",
                "constants": "public constants"}[center]
        stored = "stored" if self.nonprivate is not None else "not stored"
        return [f"Centering: {line} ", f"Non-private reference: {stored} "]

    def __repr__(self) -> str:
        return "\n".join(["Differentially Private Scree Values", *self._head(),
                          *self._budget_lines(), *self._tail()])


def _table(title: str, values: np.ndarray, rows: Sequence[str], comps: Sequence[str],
           digits: int) -> list[str]:
    shown = min(SHOWN_COMPONENTS, len(comps))
    more = f" (first {shown} of {len(comps)} components)" if shown < len(comps) else ""
    return [f"{title}{more}:",
            format_r_matrix(np.atleast_2d(values)[:, :shown].tolist(), rows,
                            list(comps[:shown]), digits=digits)]


@dataclass(frozen=True)
class ScreeSummary:
    """What ``ScreeResult.summary()`` returns; prints tables of at most 8 components."""

    dataset: xr.Dataset
    metadata: dict[str, Any]
    digits: int = 3

    def __repr__(self) -> str:
        result = ScreeResult(self.dataset)
        comps = [str(c) for c in self.dataset["component"].values]
        methods = list(result.methods)
        lines = ["DP Scree Summary", *result._head(), ""]
        lines += _table("Private scree values", self.dataset["scree"].values, methods, comps,
                        self.digits)
        lines += _table("Private PVE", self.dataset["pve"].values, methods, comps, self.digits)
        if result.nonprivate is not None:
            ref = np.vstack([self.dataset["scree_nonprivate"].values,
                             self.dataset["pve_nonprivate"].values])
            lines += _table("Non-private reference (NOT private)", ref, ["scree", "pve"], comps,
                            self.digits)
        lines += ["", *result._budget_lines(), *result._tail(),
                  "The full values are available as .scree and .pve."]
        lines += released_noise_lines(self.metadata, np.atleast_2d(
            self.dataset["scree_raw"].values).tolist())  # after the seed's lines
        lines += scree_interval_lines(self.dataset)
        lines += recorded_lines(self.metadata)
        return "\n".join(lines)


def scree_interval_lines(ds: xr.Dataset, *, angles: bool = True) -> list[str]:
    """The summary's interval lines of a scree dataset (none for a store written before the
    intervals existed): the scree values', the cumulative PVE's where stored, the sampling
    sd's (a different question, stated as such) and, with ``angles``, the directions' angle
    bounds where stored (dp_pca's summary takes them from its loading part)."""
    if "scree_lower" not in ds:
        return []
    methods = [str(m) for m in ds["mechanism"].values]
    lines = interval_lines(methods, np.atleast_2d(ds["scree"].values),
                           np.atleast_2d(ds["scree_lower"].values),
                           np.atleast_2d(ds["scree_upper"].values))
    if "cumulative_pve_lower" in ds:
        lines += cumulative_pve_lines(methods, np.atleast_2d(ds["cumulative_pve"].values),
                                      np.atleast_2d(ds["cumulative_pve_lower"].values),
                                      np.atleast_2d(ds["cumulative_pve_upper"].values))
    if "scree_sampling_sd" in ds:
        lines += sampling_lines(methods, np.atleast_2d(ds["scree_sampling_sd"].values),
                                np.atleast_2d(ds["scree"].values))
    if angles and "angle_upper" in ds:
        guaranteed = ds.get("angle_upper_guaranteed")
        lines += direction_interval_lines(
            np.asarray(ds["angle_upper"].values), np.asarray(ds["direction_identifiable"].values),
            guaranteed=None if guaranteed is None else np.asarray(guaranteed.values))
    return lines


def _sampling_rows(meta: Mapping[str, Any]) -> list[int]:
    """Per method, the rows its statistic averages over (pmwm in split mode: its mean set)."""
    scree = meta["scree"]
    n = int(meta["n"])
    return [n - n // 2 if name == "pmwm" and scree["controls"][name].get("split_mode", True)
            else n for name in scree["methods"]]


def interval_variables(meta: Mapping[str, Any], scree_raw: np.ndarray,
                       scree: np.ndarray | None = None) -> dict[str, Any]:
    """``scree_lower``/``scree_upper``, ``pve_lower``/``pve_upper``,
    ``cumulative_pve``/``cumulative_pve_lower``/``cumulative_pve_upper`` (mechanism x
    component): the intervals of :func:`~dppca_dask.results.scree_utility.scree_intervals`, and
    ``scree_sampling_sd`` from the released ``scree`` values -- post-processing of the release
    (no budget)."""
    bounds = scree_intervals(meta, np.atleast_2d(scree_raw))
    what = (f"{100 * INTERVAL_LEVEL:g}% interval (simultaneous over the components) of the "
            "noise-free {stat} on the released directions and centre: it covers the noise, "
            "not the sampling variability; NaN: no interval for this method")
    names = ("scree_lower", "scree_upper", "pve_lower", "pve_upper", "cumulative_pve_lower",
             "cumulative_pve_upper")
    stats = ("scree value", "scree value", "PVE", "PVE", "cumulative PVE", "cumulative PVE")
    out: dict[str, Any] = {}
    for name, values, stat, side in zip(names, bounds, stats, ("lower", "upper") * 3,
                                        strict=True):
        out[name] = (("mechanism", "component"), values,
                     {"private": 1, "interval_level": INTERVAL_LEVEL,
                      "description": f"{side} end of the " + what.format(stat=stat)})
    if scree is not None:
        values = np.atleast_2d(np.asarray(scree, dtype=np.float64))
        total = values.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):  # all zero: 0, as the PVE is
            cumulative = np.where(total > 0, np.cumsum(values, axis=1) / total, 0.0)
        out["cumulative_pve"] = (("mechanism", "component"), cumulative, {
            "private": 1, "description": "private cumulative proportion of variance explained "
            "over the k returned components (post-processing of scree; 0 where every released "
            "value is 0, as the PVE)"})
        rows = np.asarray(_sampling_rows(meta), dtype=np.float64)[:, None]
        out["scree_sampling_sd"] = (("mechanism", "component"),
                                    values * np.sqrt(2.0 / (rows - 1.0)), {
            "private": 1, "assumption": "Gaussian scores",
            "description": "sampling sd of each scree value if the scores along the released "
            "direction were Gaussian: sqrt(2/(m - 1)) x the released value, m the rows "
            "averaged (pmwm: its mean set); post-processing of the release, NOT covered by the "
            "intervals (they cover the noise only); heavier tails make it larger, by about "
            "sqrt((kurtosis - 1)/2)"})
    return out


def angle_variables(angles: np.ndarray, guaranteed: np.ndarray | None) -> dict[str, Any]:
    """The directions' angle bounds on the scree result (component): copies of the loading
    release's (:mod:`~dppca_dask.results.direction_intervals`), post-processing."""
    level = {"interval_level": LEVEL, "units": "degree"}
    out: dict[str, Any] = {
        "angle_upper": ("component", angles, {
            "private": 1, **level, "description": f"{100 * LEVEL:g}% bound (simultaneous over "
            "the components) on the angle between each direction and the noise-free one, from "
            "the loading release (parametric bootstrap; approximate); 90: no bound"}),
        "direction_identifiable": ("component", (angles < IDENTIFIABLE_DEGREES).astype(np.int8), {
            "private": 1, "flag_values": [0, 1], "flag_meanings": "not_identifiable identifiable",
            "description": f"1 when angle_upper is below {IDENTIFIABLE_DEGREES:g} degrees"}),
    }
    if guaranteed is not None:
        out["angle_upper_guaranteed"] = ("component", guaranteed, {
            "private": 1, **level, "description": f"{100 * LEVEL:g}% guaranteed (Davis-Kahan) "
            "bound on the angle to the noise-free direction, from the loading release; 90: "
            "no bound"})
    return out


def build_scree_result(
    *,
    methods: Sequence[str],
    scree: np.ndarray,
    scree_raw: np.ndarray,
    pve: np.ndarray,
    directions: np.ndarray,
    variables: Sequence[str],
    center: np.ndarray | None,
    center_private: bool,
    nonprivate: Mapping[str, np.ndarray] | None,
    n: int,
    plan: BudgetPlan,
    ledger: Sequence[SpendRecord],
    calibration: str,
    seeded: bool,
    scree_meta: dict[str, Any],
    angles: np.ndarray | None = None,
    guaranteed: np.ndarray | None = None,
) -> ScreeResult:
    """The scree result; ``angles``/``guaranteed``: the loading release's angle bounds of the k
    directions (degrees), stored as ``angle_upper``/``angle_upper_guaranteed`` with the flag
    ``direction_identifiable`` when this fit released the directions."""
    k = directions.shape[1]
    coords = {
        "mechanism": coord_labels(methods),
        "component": coord_labels(f"PC{j + 1}" for j in range(k)),
        "variable": coord_labels(variables),
    }
    mc = ("mechanism", "component")
    data_vars: dict[str, Any] = {
        "scree": (mc, scree, {"private": 1, "description": "private scree values (variance "
                              "along each direction), after post-processing"}),
        "pve": (mc, pve, {"private": 1, "description": "private proportion of variance explained "
                          "over the k returned components"}),
        "scree_raw": (mc, scree_raw, {"private": 1, "description": "private scree values before "
                                      "the monotone post-processing"}),
        "directions": (("variable", "component"), directions,
                       # private unless the caller supplied a plain matrix (their own input)
                       {"private": int(scree_meta["directions"] != "supplied matrix"),
                        "description": f"directions of the scores ({scree_meta['directions']})"}),
    }
    if center is not None:
        data_vars["center"] = ("component", center, {
            "private": int(center_private),
            "description": "private centre of the scores" if center_private
            else "public centre constants of the scores (supplied)"})
    if nonprivate is not None:
        for name, text in (
            ("scree", "first k eigenvalues of the sample covariance"),
            ("pve", "their proportions of variance explained over k"),
            ("direction_variance", "exact sample variance along each released direction"),
        ):
            data_vars[f"{name}_nonprivate"] = ("component", nonprivate[name],
                                               {"private": 0, "description": _NOT_PRIVATE + text})
    meta = base_metadata(
        kind="scree", n=n, p=len(variables), plan=plan, ledger=ledger, calibration=calibration,
        seeded=seeded, non_private=nonprivate is not None, extra={"scree": scree_meta},
    )
    data_vars.update(interval_variables(meta, scree_raw, scree))
    if angles is not None:
        data_vars.update(angle_variables(np.asarray(angles, dtype=np.float64),
                                         None if guaranteed is None
                                         else np.asarray(guaranteed, dtype=np.float64)))
    ds = xr.Dataset(
        data_vars,
        coords=coords,
        attrs={
            "title": "dppca_dask: differentially private scree values",
            "dppca_kind": "scree",
            "dppca_metadata": json.dumps(meta),
        },
    )
    return ScreeResult(freeze_dataset(ds))
