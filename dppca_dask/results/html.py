"""Notebook display of the results: ``Result._repr_html_`` returns :func:`result_card`.

A card is one ``<div>``: the title with the kind and a badge -- ``private``, or ``NOT PRIVATE``
when the result holds non-private elements (variables whose description starts with "NOT
PRIVATE", or a release made outside the guarantee, such as an empirical scree centre) -- then the
shape (n, p, k), the budget and what the release spent (ε, δ, and ρ where present), where the
release was recorded (:mod:`~dppca_dask.results.recorded`: a budget ledger, or only the
in-memory session ledger, with the advice to record persistently), and the key table of the kind
(the directions, scree values and PVE, the frame and a histogram, or the covariance matrix), at
most 6 × 8 cells each. Every text is escaped with :func:`html.escape`;
the card shows only the result's variables and public metadata, never the RNG seed (results
never store one) nor wall-clock times.

This module reads results by their ``kind`` and attributes only, so it imports no result type
(``results/base.py`` imports it lazily).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dppca_dask._rformat import format_r_scalar
from dppca_dask.results.recorded import NOT_STATED, recorded_text

__all__ = ["BADGE_NOT_PRIVATE", "BADGE_PRIVATE", "non_private_elements", "result_card"]

BADGE_PRIVATE = "private"
BADGE_NOT_PRIVATE = "NOT PRIVATE"
ROWS, COLS = 6, 8
_NOT_PRIVATE = "NOT PRIVATE"

_TITLES = {
    "loading": "Differentially Private PC Directions",
    "scree": "Differentially Private Scree Values",
    "score": "Differentially Private PC Scores",
    "pca": "Differentially Private PCA",
    "covariance": "Differentially Private Covariance",
}

_CARD = ("font-family: sans-serif; font-size: 12px; border: 1px solid #8888; border-radius: 4px; "
         "padding: 6px 10px; display: inline-block; color: inherit")
_BADGE = ("border-radius: 3px; padding: 1px 6px; margin-left: 6px; font-weight: bold; "
          "color: white; background: {}")
_CELL = "padding: 1px 6px; text-align: {}"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float) -> str:
    value = float(value)
    return "NaN" if np.isnan(value) else f"{value:.4g}"


def _r(value: float) -> str:
    return format_r_scalar(float(value))


def _datasets(result: Any) -> list[tuple[str, Any]]:
    """(part, Dataset) of a result: its dataset, and a dp_pca result's three parts."""
    parts = [("", result.dataset)]
    tree = getattr(result, "tree", None)
    if tree is not None:
        parts += [(f"{name}/", node.to_dataset()) for name, node in tree.children.items()]
    return parts


def non_private_elements(result: Any) -> list[str]:
    """What in a result lies outside the privacy guarantee (empty for a fully private one)."""
    found: list[str] = []
    for part, ds in _datasets(result):
        for name in sorted(map(str, ds.variables)):
            text = str(ds[name].attrs.get("description", ""))
            if text.startswith(_NOT_PRIVATE):
                # "NOT PRIVATE unless group sizes are public: ..." keeps its condition
                condition = text[len(_NOT_PRIVATE):].split(":", 1)[0].strip()
                found.append(f"{part}{name}" + (f" ({condition})" if condition else ""))
    metas = [result.metadata]
    if getattr(result, "tree", None) is not None:
        metas += [result.scree.metadata]
    if any(m.get("scree", {}).get("outside_guarantee") for m in metas):
        found.append("empirical centre of the scores")
    if not found and result.metadata.get("non_private"):
        found.append("non-private reference")
    if result.metadata.get("rng", {}).get("seeded"):
        found.append("the noise: its generator was seeded by the caller (reproducible by anyone "
                     "who knows the seed)")
    return found


Row = tuple[str, Sequence[float] | np.ndarray]


def _table(title: str, columns: Sequence[str], rows: Sequence[Row], note: str = "") -> str:
    """A small table: a header of column names, then one labelled row of numbers per row."""
    head = "".join(f'<th style="{_CELL.format("right")}">{_e(c)}</th>' for c in columns)
    body = "".join(
        f'<tr><th style="{_CELL.format("left")}">{_e(label)}</th>'
        + "".join(f'<td style="{_CELL.format("right")}">{_e(_num(v))}</td>' for v in values)
        + "</tr>"
        for label, values in rows)
    caption = f"{_e(title)}{f' <small>({_e(note)})</small>' if note else ''}"
    return (f'<div style="margin-top: 6px"><b>{caption}</b><table class="dppca-table">'
            f"<thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def _matrix(title: str, array: Any, row_dim: str, col_dim: str) -> str:
    """The head (at most 6 rows × 8 columns) of a labelled 2-D DataArray."""
    rows, cols = min(ROWS, array.sizes[row_dim]), min(COLS, array.sizes[col_dim])
    shown = array.isel({row_dim: slice(0, rows), col_dim: slice(0, cols)}).transpose(
        row_dim, col_dim)
    values = np.asarray(shown.values, dtype=np.float64)
    labels = [str(v) for v in shown[row_dim].values]
    note = (f"first {rows} of {array.sizes[row_dim]} x first {cols} of {array.sizes[col_dim]}"
            if (rows, cols) != (array.sizes[row_dim], array.sizes[col_dim]) else "")
    return _table(title, [str(c) for c in shown[col_dim].values],
                  list(zip(labels, values, strict=True)), note)


def _pair(entry: dict[str, Any]) -> str:
    return f"ε = {_r(entry['eps'])}, δ = {_r(entry['delta'])}"


def _budget_rows(meta: dict[str, Any]) -> list[tuple[str, str]]:
    privacy, spent = meta["privacy"], meta["ledger_total"]
    if "total" in privacy:  # (ε, δ) releases
        budget = _pair(privacy["total"])
        allocations = "; ".join(f"{name} {_pair(a)} ({a['status']})"
                                for name, a in privacy["allocations"].items())
        spend = f"{_pair(spent)} (basic composition)"
    else:  # ρ-zCDP releases (covariance)
        budget = f"ρ = {_r(privacy['rho'])} (zCDP)"
        if privacy.get("delta") is not None:
            budget = f"ε = {_r(privacy['eps'])}, δ = {_r(privacy['delta'])} as {budget}"
        allocations = "; ".join(f"{name} ρ = {_r(rho)}"
                                for name, rho in privacy["allocations"].items())
        spend = f"ρ = {_r(spent['rho'])} (zCDP)"
        if spent.get("delta") is not None:
            spend += f"; ε = {_r(spent['eps'])} at δ = {_r(spent['delta'])}"
    return [("Budget", budget), ("Allocations", allocations), ("Spent", spend)]


def _shape(meta: dict[str, Any], k: int | None, extra: str = "") -> tuple[str, str]:
    text = f"n = {meta['n']}, p = {meta['p']}" + (f", k = {k}" if k is not None else "")
    return ("Shape", text + (f" ({extra})" if extra else ""))


def _scree_tables(scree: Any) -> str:
    comps = scree.dataset.sizes["component"]
    out = ""
    for title, name in (("Private scree values", "scree"), ("Private PVE", "pve")):
        array = scree.dataset[name]
        shown = array.isel(component=slice(0, COLS))
        rows = [(m, np.asarray(shown.sel(mechanism=m).values)) for m in scree.mechanisms]
        if scree.nonprivate is not None:
            ref = scree.nonprivate[name].isel(component=slice(0, COLS))
            rows.append((f"non-private ({_NOT_PRIVATE})", np.asarray(ref.values)))
        note = f"first {COLS} of {comps} components" if comps > COLS else ""
        out += _table(title, [str(c) for c in shown["component"].values], rows, note)
    return out


def _frame_table(score: Any) -> str:
    frame = score.frame
    rows = [(label, [frame.center[i], frame.radius[i], *frame.limits(i)])
            for i, label in enumerate(score.labels)]
    return _table(f"Private frame ({frame.method})", ["centre", "radius", "lower", "upper"], rows)


def _histogram_table(score: Any) -> str:
    mechanism = score.mechanisms[0]
    grid = score.probability.sel(mechanism=mechanism)
    where = ""
    if score.groups is not None:
        grid, where = grid.isel(group=0), f", group {score.groups[0]}"
    grid = grid.isel(y_bin=slice(None, None, -1))  # y high to low, as the summary prints
    grid = grid.assign_coords(y_bin=[f"y{int(j) + 1}" for j in grid["y_bin"].values],
                              x_bin=[f"x{int(j) + 1}" for j in grid["x_bin"].values])
    return _matrix(f"Private {mechanism} histogram{where}", grid, "y_bin", "x_bin")


def _loading(result: Any) -> tuple[list[tuple[str, str]], str]:
    meta = result.metadata
    facts = [_shape(meta, result.directions.sizes["component"])]
    return facts, _matrix("Private PC directions", result.directions, "variable", "component")


def _scree(result: Any) -> tuple[list[tuple[str, str]], str]:
    meta = result.metadata
    center = meta["scree"]["center"]
    facts = [_shape(meta, result.k), ("Mechanisms", ", ".join(result.mechanisms)),
             ("Centring", center + (" (OUTSIDE the privacy guarantee)"
                                    if center == "empirical" else ""))]
    return facts, _scree_tables(result)


def _score(result: Any) -> tuple[list[tuple[str, str]], str]:
    meta = result.metadata
    bins = meta["bins"]
    facts = [_shape(meta, 2, f"scores on {' and '.join(result.labels)}"),
             ("Mechanisms", ", ".join(result.mechanisms)),
             ("Histogram", f"{bins[0]} x {bins[1]} bins")]
    if result.groups is not None:
        facts.append(("Groups", f"{len(result.groups)} ({', '.join(result.groups[:6])}"
                                f"{', ...' if len(result.groups) > 6 else ''})"))
    return facts, _frame_table(result) + _histogram_table(result)


def _pca(result: Any) -> tuple[list[tuple[str, str]], str]:
    meta = result.metadata
    scree, score = result.scree, result.score
    facts = [_shape(meta, scree.k, f"scores on {' and '.join(score.labels)}"),
             ("Mechanisms", f"scree {', '.join(scree.mechanisms)}; score histogram "
                            f"{', '.join(score.mechanisms)}"),
             ("Data passes", str(meta["passes"]))]
    tables = (_matrix("Private PC directions", result.directions, "variable", "component")
              + _scree_tables(scree) + _frame_table(score))
    return facts, tables


def _covariance(result: Any) -> tuple[list[tuple[str, str]], str]:
    meta = result.metadata
    pairs = meta["offdiagonal_pairs"]
    share = 100.0 * meta["measured_offdiagonal"] / pairs if pairs else 0.0
    facts = [_shape(meta, None, f"{meta['p']} x {meta['p']} matrix"),
             ("Method", str(meta["method"])),
             ("Measured", f"{meta['measured_offdiagonal']} of {pairs} off-diagonal entries "
                          f"({share:.1f}%)")]
    return facts, _matrix("Private covariance", result.covariance, "variable", "variable_")


_KINDS: dict[str, Callable[[Any], tuple[list[tuple[str, str]], str]]] = {
    "loading": _loading, "scree": _scree, "score": _score, "pca": _pca,
    "covariance": _covariance,
}


def result_card(result: Any) -> str:
    """The HTML card of a result (see the module docstring)."""
    kind = str(result.kind)
    meta = result.metadata
    facts, tables = _KINDS[kind](result) if kind in _KINDS else ([_shape(meta, None)], "")
    facts += _budget_rows(meta)
    facts.append(("Recorded in", recorded_text(meta) or NOT_STATED))
    outside = non_private_elements(result)
    if outside:
        badge = (f'<span class="dppca-badge dppca-not-private" '
                 f'style="{_BADGE.format("#c0392b")}">{BADGE_NOT_PRIVATE}</span>')
        facts.append((_NOT_PRIVATE, ", ".join(outside)))
    else:
        badge = (f'<span class="dppca-badge dppca-private" '
                 f'style="{_BADGE.format("#27864a")}">{BADGE_PRIVATE}</span>')
    rows = "".join(f'<tr><th style="{_CELL.format("left")}">{_e(name)}</th>'
                   f'<td style="{_CELL.format("left")}">{_e(text)}</td></tr>'
                   for name, text in facts)
    title = _TITLES.get(kind, kind)
    return (f'<div class="dppca-result" style="{_CARD}">'
            f'<div><b>{_e(title)}</b> <code>{_e(kind)}</code>{badge}</div>'
            f'<table class="dppca-facts"><tbody>{rows}</tbody></table>{tables}</div>')
