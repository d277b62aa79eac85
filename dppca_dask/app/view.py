"""How a release is shown: its figures, the report's tables, downloads, and the NOT PRIVATE mark.

The figures are the PNGs the ``pca`` task wrote into the run directory (the package's
matplotlib figures, as report.html embeds them); the intervals are report.html's section
(:func:`dppca_dask.report.intervals.interval_section`: each value with its 95 % interval and
"indistinguishable from noise" where it is); the tables are the result's card and the sections
the report registers for its kind (:func:`dppca_dask.report.elements.sections_for`). Text
wraps within its box (:data:`WRAP`): a long path or dataset id never runs past it.
Anything outside the privacy guarantee (``pca.non_private``, offered only where APP.yaml
allows it) is flagged NOT PRIVATE above the figures, as well as inside them.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import panel as pn

from dppca_dask.app.state import BudgetStatus, Release, zip_directory

__all__ = ["FIGURES", "WRAP", "budget_pane", "release_view"]

WRAP = [":host { overflow-wrap: anywhere; word-break: break-word; max-width: 100%; }",
        "div { width: auto !important; min-width: 0 !important; max-width: 100%; }"]
"""Stylesheet of the page's text panes and alerts: long words (paths, dataset ids) wrap, and an
alert's text stays inside its padded box (Bokeh gives the inner block the pane's whole width as
its width and min-width, so an alert's padding pushed the text past the box)."""

FIGURES = (("scree_pve.png", "Scree / PVE"), ("pca_biplot.png", "Scores and biplot"),
           ("loading.png", "Loading directions"))
"""The run directory's figures shown, in order (``pca.png`` combines them)."""


def budget_pane(title: str, status: BudgetStatus | None) -> Any:
    """One ledger line as Markdown."""
    if status is None:
        return pn.pane.Markdown(f"**{title}:** no dataset")
    return pn.pane.Markdown(f"**{title}** -- {html.escape(status.line)}  \n"
                            f"**Remaining:** {html.escape(status.remaining)}", width=900,
                            stylesheets=WRAP)


def _not_private(result: Any) -> list[str]:
    from dppca_dask.results.html import non_private_elements

    return non_private_elements(result)


def _tables(result: Any) -> str:
    from dppca_dask.report.elements import sections_for

    parts = [result._repr_html_()]
    contribute = sections_for(result.kind)
    for section in contribute(result) if contribute is not None else []:
        parts.append(f"<h3>{html.escape(section.title)}</h3>{section.body}")
    return "".join(parts)


def _intervals(result: Any) -> str:
    from dppca_dask.report.intervals import interval_section

    section = interval_section(result)
    if section is None:
        return "<p>This release stores no intervals.</p>"
    return f"<h3>{html.escape(section.title)}</h3>{section.body}"


_TABLE_CSS = (":host { overflow-wrap: anywhere; } table { border-collapse: collapse; } "
              "th, td { border: 1px solid #d0d0d0; padding: 2px 6px; } "
              "td.n { text-align: right; } .noise { color: #8c8c8c; } .note { color: #555; }")


def release_view(release: Release) -> Any:
    """Figures, tables, summary and downloads of ``release``."""
    directory = Path(release.directory)
    outside = _not_private(release.result)
    header: list[Any] = [pn.pane.Markdown(
        f"### Release {release.title}\n"
        f"Run directory: `{directory}`  \n"
        f"Budget before: {html.escape(release.before.spent)}  \n"
        f"Budget after: {html.escape(release.after.spent)}; cap: "
        f"{html.escape(release.after.cap)}; remaining: {html.escape(release.after.remaining)}",
        width=900, stylesheets=WRAP)]
    if outside:
        header.append(pn.pane.Alert(
            "**NOT PRIVATE**: outside the privacy guarantee: "
            f"{html.escape(', '.join(outside))}. The figures and tables mark them NOT "
            "PRIVATE; do not publish them unless their condition holds.", alert_type="danger",
            width=900, stylesheets=WRAP))
    figures = [pn.Column(pn.pane.Markdown(f"**{caption}**"),
                         pn.pane.PNG(str(directory / name), width=860))
               for name, caption in FIGURES if (directory / name).exists()]
    tables = pn.pane.HTML(_tables(release.result), width=900)
    intervals = pn.pane.HTML(_intervals(release.result), width=900, stylesheets=[_TABLE_CSS])
    summary_file = directory / "summary.txt"
    summary = pn.pane.Markdown("```\n" + (summary_file.read_text() if summary_file.exists()
                                          else "") + "\n```", width=900)
    downloads = pn.Row(
        pn.widgets.FileDownload(callback=lambda: _zip_io(directory), filename=(
            f"{directory.name}.zip"), label=f"Download {directory.name}.zip",
            button_type="primary"),
        pn.widgets.FileDownload(file=str(release.report), filename="report.html",
                                label="Download report.html"))
    return pn.Column(*header, downloads,
                     pn.Tabs(("Figures", pn.Column(*figures)), ("Intervals", intervals),
                             ("Tables", tables),
                             ("Summary", summary), dynamic=False), width=920)


def _zip_io(directory: Path) -> Any:
    import io

    return io.BytesIO(zip_directory(directory))
