"""The building blocks of report.html: sections, the per-kind registry and small HTML helpers.

:mod:`dppca_dask.report.sections` (the built-in kinds) and :mod:`dppca_dask.report.html` (the
page) both build on this module, so neither imports the other's internals.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dppca_dask._rformat import format_r_scalar

__all__ = ["Raw", "Section", "esc", "figures_for", "matrix_table", "num", "pre", "register_report",
           "sections_for", "table"]


@dataclass(frozen=True)
class Section:
    """One titled block of the report; ``body`` is trusted HTML built by this module."""

    title: str
    body: str
    anchor: str = ""


SectionFn = Callable[[Any], list[Section]]
FigureFn = Callable[[Any, Any], list[tuple[str, Any]]]
_SECTIONS: dict[str, SectionFn] = {}
_FIGURES: dict[str, FigureFn] = {}


def register_report(kind: str, *, sections: SectionFn | None = None,
                    figures: FigureFn | None = None) -> None:
    """Let results of ``kind`` contribute sections and default figures to the report.

    ``sections(result) -> [Section]``; ``figures(result, rng) -> [(caption, matplotlib
    Figure)]`` is used only when the caller gives no figures (the runner passes the PNGs its
    task wrote).
    """
    if sections is not None:
        _SECTIONS[kind] = sections
    if figures is not None:
        _FIGURES[kind] = figures


# --- small HTML helpers -------------------------------------------------------------------------


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def num(value: Any, digits: int = 4) -> str:
    """A number for a table cell: R's format for budgets, 4 significant digits otherwise."""
    if value is None:
        return ""
    if isinstance(value, bool | str):
        return esc(value)
    v = float(value)
    if not math.isfinite(v):
        return esc(v)
    return esc(format_r_scalar(v, digits))


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, total: Sequence[Any] | None
          = None, numeric: Collection[int] | None = None) -> str:
    """An HTML table; cells are escaped unless they are :class:`Raw`; ``numeric`` columns (default:
    all but the first) are right-aligned."""
    def cell(tag: str, value: Any, j: int) -> str:
        text = value.html if isinstance(value, Raw) else esc(value)
        right = j in numeric if numeric is not None else j >= 1
        cls = ' class="n"' if right and tag == "td" else ""
        return f"<{tag}{cls}>{text}</{tag}>"

    head = "".join(cell("th", h, -1) for h in header)
    body = "".join("<tr>" + "".join(cell("td", v, j) for j, v in enumerate(row)) + "</tr>"
                   for row in rows)
    foot = ("<tfoot><tr>" + "".join(cell("td", v, j) for j, v in enumerate(total))
            + "</tr></tfoot>") if total is not None else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>{foot}</table>"


@dataclass(frozen=True)
class Raw:
    """Trusted HTML inside a :func:`table` cell."""

    html: str


def matrix_table(values: Any, rows: Sequence[str], cols: Sequence[str], *, corner: str = "",
                 digits: int = 3) -> str:
    return table([corner, *cols], ([r, *[Raw(num(v, digits)) for v in line]]
                                   for r, line in zip(rows, values, strict=True)))


def pre(text: str) -> str:
    return f"<pre>{esc(text)}</pre>"


def sections_for(kind: str) -> SectionFn | None:
    """The section contributor registered for ``kind``, if any."""
    return _SECTIONS.get(kind)


def figures_for(kind: str) -> FigureFn | None:
    """The default-figure contributor registered for ``kind``, if any."""
    return _FIGURES.get(kind)
