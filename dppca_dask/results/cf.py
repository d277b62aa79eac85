"""CF-style metadata on every result: what plain xarray, ncdump and CF tools read.

:func:`add_cf_attributes` gives each variable and coordinate a ``long_name`` (its
``description``, or the coordinate's meaning) and, where the quantity is dimensionless, CF's
``units = "1"``. A quantity on the scale of the input data (scree values, covariance entries,
frame limits, bin edges, bounds) cannot name its units -- the input's columns carry none -- so
it says which power of them it is in ``dppca_scale`` ("input units", "input units^2", ...)
and has no ``units`` attribute. The Dataset gets ``Conventions``, ``source``, ``history``,
``references`` and ``comment`` (the guarantee), and the scalar provenance of ``dppca_metadata``
as readable attributes ``dppca_<key>`` (``dppca_n``, ``dppca_privacy_eps``, ...); the JSON
string stays the complete record (the per-mechanism ledger is only there).

Every attribute is derived from the result itself (no clock, no host, no seed), and only
missing attributes are set, so writing a result, loading it and writing it again gives the
same bytes.
"""

from __future__ import annotations

import json
from typing import Any

import xarray as xr

__all__ = ["CONVENTIONS", "add_cf_attributes"]

CONVENTIONS = "CF-1.11"

DIMENSIONLESS = frozenset({
    "directions", "nonprivate_directions", "pve", "pve_nonprivate", "probability",
    "nonprivate_probability", "released_total", "group_size", "clipped_count",
    "spherical_kendall", "kendall", "loading", "pve_lower", "pve_upper", "cumulative_pve",
    "cumulative_pve_lower", "cumulative_pve_upper", "count_lower", "count_upper",
    "probability_lower", "probability_upper", "kendall_eigenvalue", "kendall_eigenvalue_lower",
    "kendall_eigenvalue_upper",
})
"""Variables whose values carry no unit (directions, proportions, counts, Kendall's tau)."""

SCALE = {
    **dict.fromkeys(("center", "frame_center", "frame_radius", "frame_lower", "frame_upper",
                     "x_breaks", "y_breaks", "x_lower", "x_upper", "y_lower", "y_upper",
                     "observed_score", "bound", "mean_measurement", "frame_center_cell_lower",
                     "frame_center_cell_upper", "frame_radius_cell_lower",
                     "frame_radius_cell_upper", "frame_resolution"), "input units"),
    **dict.fromkeys(("scree", "scree_raw", "scree_nonprivate", "direction_variance_nonprivate",
                     "covariance", "measurement", "second_moment", "scree_lower",
                     "scree_upper", "scree_sampling_sd", "covariance_lower",
                     "covariance_upper", "covariance_eigenvalue", "covariance_eigenvalue_lower",
                     "covariance_eigenvalue_upper", "covariance_sampling_sd"), "input units^2"),
    "precision_weight": "input units^-4",
    "mean_precision_weight": "input units^-2",
}
"""Variables on the scale of the input data, and the power of the input's units they are in."""

COORDINATES = {
    "variable": "input variable (column)",
    "variable_": "input variable (column), second index of a p x p matrix",
    "component": "principal component",
    "mechanism": "release mechanism",
    "axis": "score axis (principal component)",
    "axis_label": "score axis label",
    "x_bin": "histogram bin on the x axis",
    "y_bin": "histogram bin on the y axis",
    "x_edge": "histogram bin edge on the x axis",
    "y_edge": "histogram bin edge on the y axis",
    "group": "group label",
    "observation": "observation (row) of the input",
}
"""The meaning of each coordinate and dimension of the result types."""

KINDS = {
    "loading": "dp_loading (private PC directions)",
    "scree": "dp_scree (private scree values and PVE)",
    "score": "dp_score (private score histograms)",
    "pca": "dp_pca (private directions, scree and score histograms)",
    "covariance": "dp_covariance (private covariance matrix)",
}

REFERENCES = ("The R package dppca (spherical Kendall PCA, private scree and score "
              "histograms); PACE-GGM (private covariance). See the dppca_dask documentation.")


def add_cf_attributes(ds: xr.Dataset) -> xr.Dataset:
    """Set the missing CF attributes of ``ds`` and of its variables, in place; returns ``ds``."""
    for name, var in ds.variables.items():
        name = str(name)
        attrs = var.attrs
        long_name = attrs.get("description") or COORDINATES.get(name)
        if long_name and "long_name" not in attrs:
            attrs["long_name"] = str(long_name)
        if name in DIMENSIONLESS and var.dtype.kind in "fiu":
            attrs.setdefault("units", "1")
        elif name in SCALE:
            attrs.setdefault("dppca_scale", SCALE[name])
    meta = _metadata(ds)
    if meta is None:
        return ds
    version = f"{meta.get('package', 'dppca_dask')} {meta.get('version', '')}".strip()
    what = KINDS.get(str(meta.get("kind", "")), str(meta.get("kind", "release")))
    defaults = {
        "Conventions": CONVENTIONS,
        "source": version,
        "history": f"created by {version}: {what} of {meta.get('n')} observations x "
                   f"{meta.get('p')} variables; every mechanism call is in dppca_metadata",
        "references": REFERENCES,
        "comment": ds.attrs.get("dppca_guarantee") or "private",
    }
    for key, value in {**defaults, **provenance_attributes(meta)}.items():
        ds.attrs.setdefault(key, value)
    return ds


def _metadata(ds: xr.Dataset) -> dict[str, Any] | None:
    text = ds.attrs.get("dppca_metadata")
    if not isinstance(text, str):
        return None
    try:
        meta = json.loads(text)
    except ValueError:
        return None
    return meta if isinstance(meta, dict) else None


def provenance_attributes(meta: dict[str, Any]) -> dict[str, Any]:
    """The scalar entries of a result's metadata as ``dppca_<key>`` attributes (nested entries
    flattened as ``dppca_<key>_<sub>``, three levels deep; booleans as 0/1, lists of scalars as
    comma-separated text; the ledger and ``None`` values are left to the JSON)."""
    out: dict[str, Any] = {}

    def put(key: str, value: Any, depth: int = 0) -> None:
        if isinstance(value, dict) and depth < 3:
            for sub, inner in value.items():
                put(f"{key}_{sub}", inner, depth + 1)
        elif isinstance(value, bool):
            out[key] = int(value)
        elif isinstance(value, int | float | str):
            out[key] = value
        elif isinstance(value, list | tuple) and value and all(
                isinstance(v, int | float | str) and not isinstance(v, bool) for v in value):
            out[key] = ", ".join(map(str, value))

    for key, value in meta.items():
        if key not in ("ledger", "kind"):
            put(f"dppca_{key}", value)
    return out
