"""The tables of the notebook cards (:mod:`dppca_dask.results.html`), intervals included.

A table cell is a number (4 significant digits) or a :class:`Text` -- an interval written
``value [lower, upper]``, grey when the value is indistinguishable from noise
(:func:`~dppca_dask.results.interval_fields.noise_flags`). The interval tables each note the
families they show in a ``shown`` set (``"<part>/<key>"``), so that :func:`other_intervals` lists
every interval field of the result (:func:`~dppca_dask.results.interval_fields.interval_fields`)
that no table showed: a variable added later still appears on the card. Reading only.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dppca_dask.results.interval_fields import (
    COVERS,
    distinct_fields,
    interval_fields,
    interval_text,
    noise_flags,
)

__all__ = ["BRACKETS", "CELL", "COLS", "ROWS", "Row", "Text", "cells_line", "covers_note",
           "datasets", "directions_noise", "esc", "histogram_table", "matrix", "num",
           "other_intervals", "scree_tables", "table"]

ROWS, COLS = 6, 8
CELL = "padding: 1px 6px; text-align: {}"
_GREY = "; color: #8c8c8c"
_NOT_PRIVATE = "NOT PRIVATE"
BRACKETS = ("[lower, upper]: the 95% interval of the noise-free value; grey: it reaches 0, "
            "indistinguishable from noise")


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def num(value: float) -> str:
    value = float(value)
    return "NaN" if np.isnan(value) else f"{value:.4g}"


def datasets(result: Any) -> list[tuple[str, Any]]:
    """(part, Dataset) of a result: its dataset, and a dp_pca result's three parts."""
    parts = [("", result.dataset)]
    tree = getattr(result, "tree", None)
    if tree is not None:
        parts += [(f"{name}/", node.to_dataset()) for name, node in tree.children.items()]
    return parts


@dataclass(frozen=True)
class Text:
    """A table cell given as text (an interval, a flag); ``grey``: indistinguishable from
    noise (the interval reaches 0, the direction is not identifiable)."""

    text: str
    grey: bool = False


Row = tuple[str, Sequence[Any] | np.ndarray]


def _td(value: Any) -> str:
    if isinstance(value, Text):
        style = CELL.format("right") + "; white-space: nowrap" + (_GREY if value.grey else "")
        return f'<td style="{style}">{esc(value.text)}</td>'
    return f'<td style="{CELL.format("right")}">{esc(num(value))}</td>'


def table(title: str, columns: Sequence[str], rows: Sequence[Row], note: str = "") -> str:
    """A small table: a header of column names, then one labelled row of cells per row (numbers,
    or :class:`Text`)."""
    head = "".join(f'<th style="{CELL.format("right")}">{esc(c)}</th>' for c in columns)
    body = "".join(
        f'<tr><th style="{CELL.format("left")}">{esc(label)}</th>'
        + "".join(_td(v) for v in values)
        + "</tr>"
        for label, values in rows)
    caption = f"{esc(title)}{f' <small>({esc(note)})</small>' if note else ''}"
    return (f'<div style="margin-top: 6px"><b>{caption}</b><table class="dppca-table">'
            f"<thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def matrix(title: str, array: Any, row_dim: str, col_dim: str,
           bounds: tuple[Any, Any, Any] | None = None, brackets: str | None = None) -> str:
    """The head (at most 6 rows × 8 columns) of a labelled 2-D DataArray; ``bounds``: its
    interval (lower and upper DataArrays of the same dims, and a boolean DataArray "
    indistinguishable from noise"): each cell then reads "value [lower, upper]", grey when
    indistinguishable."""
    rows, cols = min(ROWS, array.sizes[row_dim]), min(COLS, array.sizes[col_dim])
    window = {row_dim: slice(0, rows), col_dim: slice(0, cols)}
    shown = array.isel(window).transpose(row_dim, col_dim)
    values: Any = np.asarray(shown.values, dtype=np.float64)
    labels = [str(v) for v in shown[row_dim].values]
    note = (f"first {rows} of {array.sizes[row_dim]} x first {cols} of {array.sizes[col_dim]}"
            if (rows, cols) != (array.sizes[row_dim], array.sizes[col_dim]) else "")
    if bounds is not None:
        lower, upper, noise = (np.asarray(b.isel(window).transpose(row_dim, col_dim).values)
                               for b in bounds)
        values = [[Text(interval_text(v, lo, hi), bool(z))
                   for v, lo, hi, z in zip(vr, lr, ur, zr, strict=True)]
                  for vr, lr, ur, zr in zip(values, lower, upper, noise, strict=True)]
        note = _join(note, brackets or BRACKETS)
    return table(title, [str(c) for c in shown[col_dim].values],
                 list(zip(labels, values, strict=True)), note)


def _noise(ds: Any, key: str) -> Any:
    """The field ``key`` of ``ds``'s "indistinguishable from noise" flags, as a DataArray."""
    field = next(f for f in interval_fields(ds) if f.key == key)
    like = ds[field.names[0]]
    return like.copy(data=noise_flags(ds, field))


def scree_tables(scree: Any, shown: set[str], part: str = "") -> str:
    """The scree values and PVE per mechanism (first 8 components), with their intervals when
    the store has them, and the non-private reference when stored."""
    ds = scree.dataset
    comps = ds.sizes["component"]
    out = ""
    for title, name in (("Private scree values", "scree"), ("Private PVE", "pve"),
                        ("Private cumulative PVE", "cumulative_pve")):
        if name not in ds:  # a store written before the cumulative PVE
            continue
        shown_values = ds[name].isel(component=slice(0, COLS))
        rows: list[Row] = [(m, np.asarray(shown_values.sel(mechanism=m).values))
                           for m in scree.mechanisms]
        note = f"first {COLS} of {comps} components" if comps > COLS else ""
        if f"{name}_lower" in ds and f"{name}_upper" in ds:
            window = {"component": slice(0, COLS)}
            lower, upper = ds[f"{name}_lower"].isel(window), ds[f"{name}_upper"].isel(window)
            noise = _noise(ds, name).isel(window)
            rows = [(m, [Text(interval_text(v, lo, hi), bool(z))
                         for v, lo, hi, z in zip(values, lower.sel(mechanism=m).values,
                                                 upper.sel(mechanism=m).values,
                                                 noise.sel(mechanism=m).values, strict=True)])
                    for m, values in rows]
            title += " [95% interval]"
            note = _join(note, "grey: the scree interval reaches 0, indistinguishable from "
                               "noise")
            shown.add(part + name)
        if scree.nonprivate is not None and name in scree.nonprivate:
            ref = scree.nonprivate[name].isel(component=slice(0, COLS))
            rows.append((f"non-private ({_NOT_PRIVATE})", np.asarray(ref.values)))
        out += table(title, [str(c) for c in shown_values["component"].values], rows, note)
    return out


def directions_noise(part_result: Any, shown: set[str], part: str = "") -> str:
    """The loading release's per-component intervals: the noisy Kendall matrix's eigenvalues,
    the angle bounds and whether each direction is identifiable (first 8 components)."""
    ds = part_result.dataset
    if "angle_upper" not in ds:
        return ""
    comps = ds.sizes["component"]
    window = {"component": slice(0, COLS)}
    angle = np.asarray(ds["angle_upper"].isel(window).values, dtype=np.float64)
    noise = np.asarray(_noise(ds, "angle_upper").isel(window).values, dtype=bool)
    rows: list[Row] = []
    if "kendall_eigenvalue_lower" in ds:
        rows.append(("Kendall eigenvalue", [
            Text(interval_text(v, lo, hi)) for v, lo, hi in zip(
                ds["kendall_eigenvalue"].isel(window).values,
                ds["kendall_eigenvalue_lower"].isel(window).values,
                ds["kendall_eigenvalue_upper"].isel(window).values, strict=True)]))
        shown.add(part + "kendall_eigenvalue")
    rows.append(("angle bound", [Text("no bound" if a >= 90.0 else f"≤ {a:.3g}°", z)
                                 for a, z in zip(angle, noise, strict=True)]))
    if "angle_upper_guaranteed" in ds:
        sure = np.asarray(ds["angle_upper_guaranteed"].isel(window).values, dtype=np.float64)
        rows.append(("guaranteed bound", [Text("no bound" if a >= 90.0 else f"≤ {a:.3g}°", z)
                                          for a, z in zip(sure, noise, strict=True)]))
        shown.add(part + "angle_upper_guaranteed")
    rows.append(("identifiable", [Text("no: noise" if z else "yes", z) for z in noise]))
    shown.add(part + "angle_upper")
    note = _join(f"first {COLS} of {comps} components" if comps > COLS else "",
                 "angle to the noise-free direction (guaranteed: the Davis-Kahan worst case); "
                 "grey: not identifiable")
    return table("Noise of the directions [95% intervals]",
                 [str(c) for c in ds["component"].isel(window).values], rows, note)


def histogram_table(score: Any, shown: set[str], part: str = "") -> str:
    """The first mechanism's histogram (its first group), cells "p [lower, upper]"."""
    mechanism = score.mechanisms[0]
    ds = score.dataset
    with_bounds = "probability_lower" in ds and "count_lower" in ds
    arrays = [ds["probability"]]
    if with_bounds:
        arrays += [ds["probability_lower"], ds["probability_upper"], _noise(ds, "probability")]
        shown.update({part + "probability", part + "count"})
    grids = []
    where = ""
    for array in arrays:
        grid = array.sel(mechanism=mechanism)
        if score.groups is not None:
            grid, where = grid.isel(group=0), f", group {score.groups[0]}"
        grid = grid.isel(y_bin=slice(None, None, -1))  # y high to low, as the summary prints
        grids.append(grid.assign_coords(y_bin=[f"y{int(j) + 1}" for j in grid["y_bin"].values],
                                        x_bin=[f"x{int(j) + 1}" for j in grid["x_bin"].values]))
    bounds = (grids[1], grids[2], grids[3]) if with_bounds else None
    title = f"Private {mechanism} histogram{where}" + (" [95% interval]" if bounds else "")
    return matrix(title, grids[0], "y_bin", "x_bin", bounds,
                  "[lower, upper]: the 95% interval of the noise-free cell probability; grey: "
                  "its count interval reaches 0, indistinguishable from noise")


def cells_line(score: Any, shown: set[str], part: str = "") -> str:
    """Per histogram, how many cells are distinguishable from empty (their count interval
    is above 0), as the summary counts them; "" for a store without intervals."""
    ds = score.dataset
    if "count_lower" not in ds:
        return ""
    parts = []
    for mechanism in score.mechanisms:
        lower = np.asarray(ds["count_lower"].sel(mechanism=mechanism).values, dtype=np.float64)
        if np.isnan(lower).all():
            continue
        parts.append(f"{mechanism}: {int(np.count_nonzero(lower > 0))} of {lower.size} "
                     "distinguishable from empty")
    shown.update({part + "count", part + "probability"})  # a probability's flag is its count's
    return ("; ".join(parts) + " (95% intervals; the other cells' intervals reach 0)"
            if parts else "")


def other_intervals(result: Any, shown: set[str]) -> str:
    """Every interval field no table showed, one line each (what it is, its range, how many
    of its values are indistinguishable from noise), so that interval variables added later
    appear on the card too."""
    lines = []
    for part, ds, f in distinct_fields(datasets(result)):  # dp_pca's scree angles: once
        if part + f.key not in shown:
            ends = [np.asarray(ds[n].values, dtype=np.float64) for n in (f.lower, f.upper)
                    if n is not None]
            finite = np.concatenate([e[np.isfinite(e)].ravel() for e in ends])
            span = (f"from {num(float(finite.min()))} to {num(float(finite.max()))}"
                    if finite.size else "no finite end")
            flags = noise_flags(ds, f)
            lines.append(f"<li><code>{esc(part + f.key)}</code>: {esc(f.description)} "
                         f"({esc(span)}; {int(flags.sum())} of {flags.size} indistinguishable "
                         "from noise)</li>")
    if not lines:
        return ""
    return f'<div style="margin-top: 6px"><b>Other intervals</b><ul>{"".join(lines)}</ul></div>'


def covers_note(result: Any) -> str:
    """The card's last line: what the intervals cover (when the result has any)."""
    if not any(interval_fields(ds) for _, ds in datasets(result)):
        return ""
    return f'<div style="margin-top: 6px; max-width: 60em"><small>{esc(COVERS)}</small></div>'
