"""The ``dp_covariance`` result: :class:`CovarianceResult` (kind ``"covariance"``) and its summary.

Dataset schema (dims ``variable`` and ``variable_``, both labelled with the variable names):

* ``covariance(variable, variable_)`` -- the released Σ̂ (private; symmetric; positive definite
  for ``pace_ggm``, PSD for ``ssp`` with projection, diagonal for ``diagonal``);
* ``measured(variable, variable_)`` -- which entries were measured by a mechanism;
* ``precision_weight(variable, variable_)`` -- the combined precision λ_jk = Σ 1/σ² of the
  measurements of each entry, raw units (0 where unmeasured);
* ``measurement(variable, variable_)`` -- the precision-weighted mean of the noisy measurements
  (NaN where unmeasured; private, before clipping to the bounds);
* ``bound(variable)`` -- the public bounds B_j (row clipping: the radius R for every variable;
  marked private when R is the private radius);
* with PACE-GGM's ``mean="measure"``: ``mean_measurement(variable)`` and
  ``mean_precision_weight(variable)`` -- the noisy column means and their precisions (private);
* with ``report_clipping=True``: ``clipped_count(variable)`` -- NOT PRIVATE.

attrs: ``dppca_kind`` and ``dppca_metadata`` (JSON: n, p, the zCDP plan, the ledger of every
mechanism call, ``ledger_total`` {rho, and eps at the requested delta}, method, control, rounds,
measured fraction, solver statistics; with a private radius its released value ``radius``, the
robust radius ``radius_robust``, the released gap flag ``radius_gap`` and the public
``radius_quantile`` and ``radius_robust_quantile``; never a seed or a data statistic).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from dppca_dask._rformat import format_r_matrix, format_r_scalar
from dppca_dask.privacy.zcdp import ZCDPPlan, ledger_rho, zcdp_eps
from dppca_dask.results.base import Result, base_metadata, coord_labels, freeze_dataset
from dppca_dask.results.covariance_intervals import LEVEL, covariance_intervals, sampling_sd
from dppca_dask.results.plotters import plotter
from dppca_dask.results.recorded import recorded_lines

__all__ = ["CovarianceResult", "CovarianceSummary", "build_covariance_result"]

_TITLES = {"pace_ggm": "PACE-GGM", "ssp": "SSP", "diagonal": "diagonal",
           "auto": "SSP + shrinkage"}


def _r(value: float) -> str:
    return format_r_scalar(value)


def _budget(meta: dict[str, Any]) -> str:
    privacy = meta["privacy"]
    if privacy.get("delta") is None:
        return f"Total privacy budget: rho = {_r(privacy['rho'])} (zCDP)"
    return (f"Total privacy budget: eps = {_r(privacy['eps'])} ; delta = "
            f"{_r(privacy['delta'])} (as rho = {_r(privacy['rho'])} zCDP)")


def _bounds(values: np.ndarray, meta: dict[str, Any] | None = None) -> str:
    info = (meta or {}).get("info") or {}
    if (meta or {}).get("clip", info.get("clip")) == "row":
        if meta is not None and meta.get("radius_private"):
            tail = float(meta["radius_quantile"])
            robust = float(meta.get("radius_robust_quantile", tail))
            return (f"Bounds: rows clipped to ||x|| <= {_r(float(values[0]))} (private radius R, "
                    f"targeting the {_r(tail)} quantile of the row norms, or the {_r(robust)} "
                    "quantile when the top rows lie beyond a gap)")
        return f"Bounds: rows clipped to ||x|| <= {_r(float(values[0]))} (public radius R)"
    if np.all(values == values[0]):
        return f"Bounds: |x_j| <= {_r(float(values[0]))} (public)"
    return (f"Bounds: |x_j| <= B_j, B_j in [{_r(float(values.min()))}, "
            f"{_r(float(values.max()))}] (public)")


def _measured(meta: dict[str, Any]) -> str:
    count, pairs = meta["measured_offdiagonal"], meta["offdiagonal_pairs"]
    share = 100.0 * count / pairs if pairs else 0.0
    line = f"Measured: {count} of {pairs} off-diagonal entries ({share:.1f}%)"
    if meta["method"] == "pace_ggm":
        line += f" in {meta['rounds']} rounds"
    return line


@dataclass(frozen=True)
class CovarianceResult(Result):
    """A private covariance (second-moment) matrix; see :func:`~dppca_dask.dp_covariance`."""

    kind: ClassVar[str] = "covariance"

    @property
    def covariance(self) -> xr.DataArray:
        """The released Σ̂, dims ``(variable, variable_)``."""
        return self.dataset["covariance"]

    @property
    def measured(self) -> xr.DataArray:
        """Boolean mask of the entries a mechanism measured."""
        return self.dataset["measured"]

    @property
    def weights(self) -> xr.DataArray:
        """Combined measurement precisions λ_jk (0 where unmeasured), raw units."""
        return self.dataset["precision_weight"]

    @property
    def method(self) -> str:
        return str(self.metadata["method"])

    def plot(self, panels: Any = ("covariance", "correlation", "weights")) -> Any:
        """Heatmaps of the released covariance, its correlation and the measured entries with
        their weights; see :func:`dppca_dask.plots.covariance.plot_covariance`."""
        return plotter("covariance")(self, panels=panels)

    def summary(self) -> CovarianceSummary:
        """Summarise the release without recomputing anything or spending budget."""
        return CovarianceSummary(self.covariance, self.dataset["bound"].values, self.metadata,
                                 intervals=interval_lines(self.dataset))

    def __repr__(self) -> str:
        meta = self.metadata
        return "\n".join([
            f"Differentially Private Covariance ({_TITLES[meta['method']]})",
            f"Data: {meta['n']} observations x {meta['p']} variables",
            _measured(meta),
            _budget(meta),
            _bounds(self.dataset["bound"].values, meta),
        ])


@dataclass(frozen=True)
class CovarianceSummary:
    """What ``CovarianceResult.summary()`` returns; printing shows at most 6 × 4 entries."""

    covariance: xr.DataArray
    bounds: np.ndarray
    metadata: dict[str, Any]
    digits: int = 3
    intervals: tuple[str, ...] = ()

    def __repr__(self) -> str:
        meta = self.metadata
        rows, cols = min(6, self.covariance.shape[0]), min(4, self.covariance.shape[1])
        shown = self.covariance.isel(variable=slice(0, rows), variable_=slice(0, cols))
        parts: dict[str, float] = {}
        for record in meta["ledger"]:
            parts[record["component"]] = parts.get(record["component"], 0.0) + record["rho"]
        spent = " ; ".join(f"{name} {_r(value)}" for name, value in parts.items())
        lines = [
            "DP Covariance Summary",
            f"Data: {meta['n']} observations x {meta['p']} variables",
            f"Method: {meta['method']}",
            _measured(meta),
            "",
            f"Private covariance  (first {rows} variables x first {cols} variables):",
            format_r_matrix(shown.values.tolist(), [str(v) for v in shown["variable"].values],
                            [str(v) for v in shown["variable_"].values], digits=self.digits),
            "",
            f"Privacy spent (rho, zCDP): {spent} ; total {_r(meta['ledger_total']['rho'])}",
            _budget(meta),
            _bounds(self.bounds, meta),
            "The full matrix is available as .covariance; measured entries as .measured.",
            *self.intervals,
            *recorded_lines(meta),
        ]
        return "\n".join(lines)


def build_covariance_result(
    estimate: Any,
    *,
    variables: Sequence[str],
    n: int,
    bounds: np.ndarray,
    plan: ZCDPPlan,
    control: dict[str, Any] | None,
    seeded: bool,
    clipped: np.ndarray | None = None,
    private_bound: bool = False,
) -> CovarianceResult:
    """Wrap a :class:`~dppca_dask.covariance.estimator.CovarianceEstimate` as a result
    (``private_bound``: the bounds are the released private radius)."""
    p = len(variables)
    names = coord_labels(variables)
    pair = ("variable", "variable_")
    data_vars: dict[str, Any] = {
        "covariance": (pair, np.asarray(estimate.covariance, dtype=np.float64),
                       {"private": 1, "description": "private second-moment matrix X'X/n of "
                        "the data clipped to the public bounds"}),
        "measured": (pair, np.asarray(estimate.measured, dtype=bool),
                     {"private": 1, "description": "entries measured by a mechanism"}),
        "precision_weight": (pair, np.asarray(estimate.weights, dtype=np.float64),
                             {"private": 1, "description": "combined measurement precision "
                              "(sum of 1/sigma^2), 0 where unmeasured"}),
        "measurement": (pair, np.asarray(estimate.measurements, dtype=np.float64),
                        {"private": 1, "description": "precision-weighted mean of the noisy "
                         "measurements, NaN where unmeasured"}),
        "bound": (("variable",), np.asarray(bounds, dtype=np.float64),
                  {"private": 1, "description": "the private row-clipping radius R (rows "
                   "scaled to norm <= R)"} if private_bound else
                  {"private": 0, "description": "public bounds B_j (data clipped to [-B_j, B_j])"}),
    }
    if estimate.mean is not None:
        data_vars["mean_measurement"] = (
            ("variable",), np.asarray(estimate.mean, dtype=np.float64),
            {"private": 1, "description": "noisy column means (PACE-GGM with mean='measure'), "
             "precision-weighted"},
        )
        data_vars["mean_precision_weight"] = (
            ("variable",), np.asarray(estimate.mean_weights, dtype=np.float64),
            {"private": 1, "description": "combined precision of the mean measurements"},
        )
    if clipped is not None:
        data_vars["clipped_count"] = (
            ("variable",), np.asarray(clipped, dtype=np.int64),
            {"private": 0, "description": "NOT PRIVATE: number of values clipping changed "
                                          "(beyond the bounds, or in rows beyond the radius)"},
        )
    data_vars.update(interval_variables(np.asarray(estimate.measurements, dtype=np.float64),
                                        np.asarray(estimate.weights, dtype=np.float64),
                                        np.asarray(bounds, dtype=np.float64),
                                        str(estimate.info.get("clip", "box")),
                                        covariance=np.asarray(estimate.covariance,
                                                              dtype=np.float64), n=n))
    rho = ledger_rho(estimate.ledger)
    total: dict[str, Any] = {"rho": rho}
    if plan.delta is not None:
        total.update(eps=zcdp_eps(rho, plan.delta), delta=plan.delta)
    meta = base_metadata(
        kind="covariance", n=n, p=p, plan=plan, ledger=estimate.ledger, calibration="zcdp",
        seeded=seeded, non_private=clipped is not None,
        extra={**estimate.info, "control": control, "bounds": np.asarray(bounds).tolist(),
               "ledger_total": total},
    )
    coords: dict[str, Any] = {"variable": names, "variable_": names.copy()}
    if "covariance_eigenvalue" in data_vars:
        coords["component"] = coord_labels(f"PC{j + 1}" for j in range(p))
    ds = xr.Dataset(
        data_vars, coords=coords,
        attrs={
            "title": "dppca_dask: differentially private covariance",
            "dppca_kind": "covariance",
            "dppca_metadata": json.dumps(meta),
        },
    )
    return CovarianceResult(freeze_dataset(ds))


def interval_variables(measurement: np.ndarray, weights: np.ndarray, bounds: np.ndarray,
                       clip: str, *, covariance: np.ndarray | None = None,
                       n: int | None = None) -> dict[str, Any]:
    """``covariance_lower``/``covariance_upper`` (variable x variable_) and, when every entry
    was measured, ``covariance_eigenvalue`` with its ``_lower``/``_upper`` (component): the
    intervals of :func:`~dppca_dask.results.covariance_intervals.covariance_intervals`; with
    the released ``covariance`` and ``n``, ``covariance_sampling_sd`` (a Gaussian model's
    sampling sd, not covered by the intervals) -- post-processing of the release (no budget)."""
    out = covariance_intervals(measurement, weights, bounds, clip)
    pair = ("variable", "variable_")
    what = (f"{100 * LEVEL:g}% interval (simultaneous over the entries) of the noise-free "
            "clipped second moment X'X/n: it covers the noise, not the sampling variability; "
            "unmeasured entries: the public range")
    level = {"interval_level": LEVEL}
    data_vars: dict[str, Any] = {
        "covariance_lower": (pair, out["lower"], {"private": 1, **level,
                                                  "description": "lower end of the " + what}),
        "covariance_upper": (pair, out["upper"], {"private": 1, **level,
                                                  "description": "upper end of the " + what}),
    }
    if covariance is not None and n is not None:
        data_vars["covariance_sampling_sd"] = (pair, sampling_sd(covariance, n), {
            "private": 1, "assumption": "Gaussian rows with mean 0",
            "description": "sampling sd of each entry of X'X/n if the rows were Gaussian with "
            "mean 0 and this second moment: sqrt((S_jk^2 + S_jj S_kk)/n) of the released "
            "matrix S; post-processing, NOT covered by the intervals (they cover the noise "
            "only); heavier tails make it larger"})
    if np.isnan(np.asarray(out["eigenvalue"])).all():
        return data_vars
    ev_what = (f"{100 * LEVEL:g}% interval (simultaneous over the eigenvalues; the exact "
               "first-order noise term plus a Davis-Kahan remainder, or Weyl with a "
               "spectral-norm bound of the noise) of the noise-free eigenvalue")
    data_vars.update({
        "covariance_eigenvalue": (("component",), out["eigenvalue"], {
            "private": 1, "description": "eigenvalue of the released noisy measurement matrix "
            "(before post-processing)"}),
        "covariance_eigenvalue_lower": (("component",), out["eigenvalue_lower"], {
            "private": 1, **level, "noise_norm_bound": out["b"],
            "description": "lower end of the " + ev_what}),
        "covariance_eigenvalue_upper": (("component",), out["eigenvalue_upper"], {
            "private": 1, **level, "noise_norm_bound": out["b"],
            "description": "upper end of the " + ev_what}),
    })
    return data_vars


def interval_lines(ds: xr.Dataset, limit: int = 10) -> tuple[str, ...]:
    """The summary's interval lines (none for a store written before the intervals existed)."""
    if "covariance_lower" not in ds:
        return ()

    def num(v: float) -> str:
        return format_r_scalar(float(f"{v:.3g}"))

    lower, upper = ds["covariance_lower"].values, ds["covariance_upper"].values
    measured = ds["precision_weight"].values > 0
    half = (upper - lower) / 2.0
    d = lower.shape[0]
    off = ~np.eye(d, dtype=bool) & np.triu(np.ones((d, d), dtype=bool)) & measured
    lines = [f"{100 * LEVEL:g}% intervals of the noise-free entries (simultaneous over the "
             "entries; they cover the noise, not the sampling variability): half-widths "
             f"{num(float(half[measured].min()))} to {num(float(half[measured].max()))}"
             if measured.any() else "No entry was measured: intervals are the public range."]
    if off.any():
        zero = int(np.count_nonzero(off & (lower <= 0.0) & (upper >= 0.0)))
        lines.append(f"  off-diagonal entries indistinguishable from 0 (interval contains 0): "
                     f"{zero} of {int(np.count_nonzero(off))}")
    if "covariance_eigenvalue" in ds:
        ev = ds["covariance_eigenvalue"].values
        lo, hi = ds["covariance_eigenvalue_lower"].values, ds["covariance_eigenvalue_upper"].values
        shown = min(limit, ev.size)
        cells = [f"PC{j + 1} {num(ev[j])} [{num(lo[j])}, {num(hi[j])}]" for j in range(shown)]
        lines.append(f"{100 * LEVEL:g}% intervals of the noise-free eigenvalues (simultaneous): "
                     + ", ".join(cells) + (" ..." if ev.size > shown else ""))
        small = [f"PC{j + 1}" for j in range(ev.size) if lo[j] <= 0.0]
        if small:
            lines.append("  eigenvalues indistinguishable from noise (interval reaches 0): "
                         + ", ".join(small[:limit]) + (" ..." if len(small) > limit else ""))
    if "covariance_sampling_sd" in ds:
        sd = ds["covariance_sampling_sd"].values
        lines.append("Sampling sd of the entries if the rows were Gaussian with mean 0 "
                     f"(post-processing; NOT in the intervals above, which cover the noise "
                     f"only): {num(float(sd.min()))} to {num(float(sd.max()))}")
    return tuple(lines)
