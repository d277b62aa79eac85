"""Notebook display of the results: ``Result._repr_html_`` returns :func:`result_card`.

A card is one ``<div>``: the title with the kind and a badge -- ``private``, or ``NOT PRIVATE``
when the result holds non-private elements (variables whose description starts with "NOT
PRIVATE", or a release made outside the guarantee, such as an empirical scree centre) -- then the
shape (n, p, k), the budget and what the release spent (ε, δ, and ρ where present), where the
release was recorded (:mod:`~dppca_dask.results.recorded`: a budget ledger, or only the
in-memory session ledger, with the advice to record persistently), and the key table of the kind
(the directions, scree values and PVE, the frame and a histogram, or the covariance matrix), at
most 6 × 8 cells each, built by :mod:`~dppca_dask.results.html_tables`. Every released value with
an interval reads "value [lower, upper]" (95 %, of the noise-free value), grey where it is
indistinguishable from noise; the directions get their angle bounds and identifiability, a
histogram how many cells are distinguishable from empty; every other interval field
(:func:`~dppca_dask.results.interval_fields.interval_fields`) is listed under "Other intervals",
and the card ends with what the intervals do not cover
(:data:`~dppca_dask.results.interval_fields.COVERS`). Every text is escaped with
:func:`html.escape`;
the card shows only the result's variables and public metadata, never the RNG seed (results
never store one) nor wall-clock times.

This module reads results by their ``kind`` and attributes only, so it imports no result type
(``results/base.py`` imports it lazily).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dppca_dask._rformat import format_r_scalar
from dppca_dask.results.html_tables import (
    CELL,
    COLS,
    Text,
    cells_line,
    covers_note,
    datasets,
    directions_noise,
    esc,
    histogram_table,
    matrix,
    other_intervals,
    scree_tables,
    table,
)
from dppca_dask.results.interval_fields import interval_text, reaches_zero
from dppca_dask.results.recorded import NOT_STATED, recorded_text

__all__ = ["BADGE_NOT_PRIVATE", "BADGE_PRIVATE", "non_private_elements", "result_card"]

BADGE_PRIVATE = "private"
BADGE_NOT_PRIVATE = "NOT PRIVATE"
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
Facts = list[tuple[str, str]]


def _r(value: float) -> str:
    return format_r_scalar(float(value))


def non_private_elements(result: Any) -> list[str]:
    """What in a result lies outside the privacy guarantee (empty for a fully private one)."""
    found: list[str] = []
    for part, ds in datasets(result):
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


def _frame_table(score: Any) -> str:
    frame = score.frame
    rows = [(label, [frame.center[i], frame.radius[i], *frame.limits(i)])
            for i, label in enumerate(score.labels)]
    return table(f"Private frame ({frame.method})", ["centre", "radius", "lower", "upper"], rows)


def _loading(result: Any, shown: set[str]) -> tuple[Facts, str]:
    meta = result.metadata
    facts = [_shape(meta, result.directions.sizes["component"])]
    return facts, (matrix("Private PC directions", result.directions, "variable", "component")
                   + directions_noise(result, shown))


def _scree(result: Any, shown: set[str]) -> tuple[Facts, str]:
    meta = result.metadata
    center = meta["scree"]["center"]
    facts = [_shape(meta, result.k), ("Mechanisms", ", ".join(result.mechanisms)),
             ("Centring", center + (" (OUTSIDE the privacy guarantee)"
                                    if center == "empirical" else ""))]
    return facts, scree_tables(result, shown) + directions_noise(result, shown)


def _score(result: Any, shown: set[str]) -> tuple[Facts, str]:
    meta = result.metadata
    bins = meta["bins"]
    facts = [_shape(meta, 2, f"scores on {' and '.join(result.labels)}"),
             ("Mechanisms", ", ".join(result.mechanisms)),
             ("Histogram", f"{bins[0]} x {bins[1]} bins")]
    if result.groups is not None:
        facts.append(("Groups", f"{len(result.groups)} ({', '.join(result.groups[:6])}"
                                f"{', ...' if len(result.groups) > 6 else ''})"))
    cells = cells_line(result, shown)
    if cells:
        facts.append(("Histogram cells", cells))
    return facts, _frame_table(result) + histogram_table(result, shown)


def _pca(result: Any, shown: set[str]) -> tuple[Facts, str]:
    meta = result.metadata
    scree, score = result.scree, result.score
    facts = [_shape(meta, scree.k, f"scores on {' and '.join(score.labels)}"),
             ("Mechanisms", f"scree {', '.join(scree.mechanisms)}; score histogram "
                            f"{', '.join(score.mechanisms)}"),
             ("Data passes", str(meta["passes"]))]
    cells = cells_line(score, shown, "score/")
    if cells:
        facts.append(("Histogram cells", cells))
    tables = (matrix("Private PC directions", result.directions, "variable", "component")
              + directions_noise(result.loading, shown, "loading/")
              + scree_tables(scree, shown, "scree/") + _frame_table(score))
    return facts, tables


def _covariance(result: Any, shown: set[str]) -> tuple[Facts, str]:
    meta = result.metadata
    pairs = meta["offdiagonal_pairs"]
    share = 100.0 * meta["measured_offdiagonal"] / pairs if pairs else 0.0
    facts = [_shape(meta, None, f"{meta['p']} x {meta['p']} matrix"),
             ("Method", str(meta["method"])),
             ("Measured", f"{meta['measured_offdiagonal']} of {pairs} off-diagonal entries "
                          f"({share:.1f}%)")]
    ds = result.dataset
    bounds = None
    if "covariance_lower" in ds:
        lower, upper = ds["covariance_lower"], ds["covariance_upper"]
        bounds = (lower, upper, (lower <= 0) & (upper >= 0))
        shown.add("covariance")
    tables = matrix("Private covariance" + (" [95% interval]" if bounds else ""),
                     result.covariance, "variable", "variable_", bounds,
                     "[lower, upper]: the 95% interval of the noise-free entry (of the clipped "
                     "second moment); grey: it contains 0, indistinguishable from 0")
    if "covariance_eigenvalue_lower" in ds:
        window = {"component": slice(0, COLS)}
        ev = [Text(interval_text(v, lo, hi), reaches_zero(lo)) for v, lo, hi in zip(
            ds["covariance_eigenvalue"].isel(window).values,
            ds["covariance_eigenvalue_lower"].isel(window).values,
            ds["covariance_eigenvalue_upper"].isel(window).values, strict=True)]
        comps = ds.sizes["component"]
        shown.add("covariance_eigenvalue")
        tables += table("Eigenvalues [95% interval]",
                         [str(c) for c in ds["component"].isel(window).values],
                         [("noisy measurement", ev)],
                         "; ".join(x for x in (f"first {COLS} of {comps}" if comps > COLS
                                               else "", "grey: reaches 0, indistinguishable "
                                               "from noise") if x))
    return facts, tables


_KINDS: dict[str, Callable[[Any, set[str]], tuple[Facts, str]]] = {
    "loading": _loading, "scree": _scree, "score": _score, "pca": _pca,
    "covariance": _covariance,
}


def result_card(result: Any) -> str:
    """The HTML card of a result (see the module docstring)."""
    kind = str(result.kind)
    meta = result.metadata
    shown: set[str] = set()
    facts, tables = _KINDS[kind](result, shown) if kind in _KINDS else ([_shape(meta, None)], "")
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
    rows = "".join(f'<tr><th style="{CELL.format("left")}">{esc(name)}</th>'
                   f'<td style="{CELL.format("left")}">{esc(text)}</td></tr>'
                   for name, text in facts)
    title = _TITLES.get(kind, kind)
    tables += other_intervals(result, shown) + covers_note(result)
    return (f'<div class="dppca-result" style="{_CARD}">'
            f'<div><b>{esc(title)}</b> <code>{esc(kind)}</code>{badge}</div>'
            f'<table class="dppca-facts"><tbody>{rows}</tbody></table>{tables}</div>')
