"""The report's "Intervals" section: every interval of the release, found generically.

For each part of the result (a dp_pca release has three) every interval field
(:func:`~dppca_dask.results.interval_fields.interval_fields`, found by its ``interval_level``)
is shown: the fields indexed by component (and mechanism) -- scree, PVE, the Kendall
eigenvalues and angle bounds, the covariance eigenvalues -- as one table per part with a row per
component: the value, its 95 % interval and "indistinguishable from noise" where it is
(:func:`~dppca_dask.results.interval_fields.noise_flags`); the other fields (histogram cells,
covariance entries) as a count of the values indistinguishable from noise and the same table of
the others (the signal). The section ends with what the intervals do not cover
(:data:`~dppca_dask.results.interval_fields.COVERS`). A result without interval variables (a store
written before them) gets no section. Everything is read from the release: post-processing.
"""

from __future__ import annotations

from typing import Any

from dppca_dask.report.elements import Raw, Section, esc, num, table
from dppca_dask.results.html_tables import datasets
from dppca_dask.results.interval_fields import (
    COVERS,
    NOISE,
    IntervalField,
    IntervalRow,
    distinct_fields,
    interval_rows,
)

__all__ = ["HEAD_ROWS", "interval_section"]

HEAD_ROWS = 24
"""Rows shown of fields not indexed by component (histogram cells, covariance entries): the
values distinguishable from noise, at most this many; the count of those indistinguishable from
noise covers all of them."""

_BY_COMPONENT = {"mechanism", "component"}
_PARTS = {"": "", "loading/": "Directions (loading part)", "scree/": "Scree and PVE (scree part)",
          "score/": "Score histograms (score part)"}


def _name(field: IntervalField) -> str:
    name = field.value or {"angle_upper": "angle to the noise-free direction",
                           "count": "cell count"}.get(field.key, field.key)
    name = "PVE" if name == "pve" else name.replace("_", " ")
    return name[:1].upper() + name[1:]


def _interval(ds: Any, field: IntervalField, row: IntervalRow) -> str:
    """The interval as text; an angle bound in degrees ("no bound" at 90°)."""
    unit = ds[field.upper].attrs.get("units") if field.upper is not None else None
    if unit == "degree" and row.lower is None and row.upper is not None:
        return "no bound" if row.upper >= 90.0 else f"≤ {row.upper:.3g}°"
    return row.text


def _cell(text: str, noise: bool) -> Raw:
    return Raw(f'<span class="noise">{esc(text)}</span>' if noise else esc(text))


def _group_table(ds: Any, fields: list[IntervalField], cells: bool) -> tuple[str, int, int]:
    """One table of fields over the same dims: a row per value (its coordinates, each field's
    value and interval, then the marker); ``cells`` (a histogram, a matrix): only the values
    distinguishable from noise, at most :data:`HEAD_ROWS` (the first ones when none is). Also
    how many values are indistinguishable from noise, of how many."""
    dims: tuple[str, ...] = ()
    rows: dict[tuple[str, ...], dict[str, IntervalRow]] = {}
    for f in fields:
        dims, field_rows = interval_rows(ds, f)
        for r in field_rows:
            rows.setdefault(r.where, {})[f.key] = r
    header = [d.removesuffix("_bin").capitalize() for d in dims]
    for f in fields:
        header += ([_name(f), "95% interval"] if f.value is not None
                   else [_name(f) + (" (95% interval)" if f.lower and f.upper
                                     else " (95% bound)")])
    header.append("Signal or noise")
    noise = {where: any(r.noise for r in c.values()) for where, c in rows.items()}
    keep = list(rows)
    if cells:
        keep = [w for w in keep if not noise[w]] or keep
        keep = keep[:HEAD_ROWS]
    lines = []
    for where in keep:
        line: list[Any] = list(where)
        for f in fields:
            cell = rows[where].get(f.key)
            if f.value is not None:
                line.append(_cell("" if cell is None or cell.value is None else num(cell.value),
                                  noise[where]))
            line.append(_cell("" if cell is None else _interval(ds, f, cell), noise[where]))
        line.append(_cell(NOISE if noise[where] else "distinguishable", noise[where]))
        lines.append(line)
    return (table(header, lines, numeric=set(range(len(dims), len(header) - 1))),
            sum(noise.values()), len(rows))


def _part_body(ds: Any, shown: list[IntervalField]) -> str:
    """The tables of one dataset's fields ``shown``: one per set of fields over the same
    dims."""
    groups: dict[tuple[str, ...], list[IntervalField]] = {}
    for f in shown:
        groups.setdefault(tuple(map(str, ds[f.names[0]].dims)), []).append(f)
    body = ""
    for dims, fields in groups.items():
        by_component = set(dims) <= _BY_COMPONENT
        tab, noisy, total = _group_table(ds, fields, not by_component)
        if not by_component:
            signal = total - noisy
            listed = (f"the {min(signal, HEAD_ROWS)} first of the {signal} others"
                      if signal > HEAD_ROWS else f"the {signal} others" if signal
                      else f"the first {min(total, HEAD_ROWS)}")
            body += (f"<p>{noisy} of {total} values indistinguishable from noise; "
                     f"{listed}:</p>")
        body += tab + "".join(f"<p class=note>{esc(_name(f))}: {esc(f.description)}.</p>"
                              for f in fields)
    return body


def interval_section(result: Any) -> Section | None:
    """The report's intervals section of ``result`` (None when it has no interval)."""
    body = ""
    parts: dict[str, tuple[Any, list[IntervalField]]] = {}
    for part, ds, field in distinct_fields(datasets(result)):
        parts.setdefault(part, (ds, []))[1].append(field)
    for part, (ds, shown) in parts.items():
        tables = _part_body(ds, shown)
        if _PARTS.get(part, part):
            body += f"<h3>{esc(_PARTS.get(part, part))}</h3>"
        body += tables
    if not body:
        return None
    intro = ("<p>Each released value with its 95% interval of the noise-free value (the release "
             "with its noise set to 0), computed from the release and public quantities only "
             "(post-processing: no budget). A value is <b>indistinguishable from noise</b> where "
             "its interval reaches 0 (a direction: where its angle bound does not rule out a "
             "turn of 45° or more).</p>")
    return Section("Intervals: signal or noise", intro + body
                   + f"<p><b>What they do not cover.</b> {esc(COVERS)}</p>", "intervals")
