"""A self-contained HTML report of one release (``report.html`` of every ``dppca-dask run``).

The page needs no network: styles are inline, figures are embedded as base64 PNG data URIs, and
it has no scripts and no external links. It shows, in order:

* a banner when non-private reference values are included (then the page is not a private release);
* the printed result and its summary;
* the dataset (public shape, chunks, variable names);
* the privacy budget: the allocation per component and the ledger of every mechanism call with
  its basic-composition total;
* sections contributed by the result's kind (directions, scree/PVE table, frame and histograms…);
* every figure (the PNGs the run wrote, or figures drawn from the result);
* the resolved config (never a seed) and the work of the data passes (tasks; no wall time: it
  depends on the data).

Each result kind contributes sections and default figures through :func:`register_report`; a kind
without a contributor still gets every generic section. Everything shown is read from the result,
the config and public metadata: the report is post-processing and spends no budget.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dppca_dask.report.sections  # noqa: F401 - registers the built-in kinds
from dppca_dask.report.elements import (
    Raw,
    Section,
    esc,
    figures_for,
    num,
    pre,
    register_report,
    sections_for,
    table,
)

__all__ = [
    "FIGURE_CAPTIONS",
    "SUBSUMED",
    "Section",
    "figure_files",
    "register_report",
    "render_report",
    "write_report",
]


FIGURE_CAPTIONS: dict[str, str] = {
    "pca.png": "dp_pca: PVE, loading vectors, synthetic scores and biplot",
    "loading.png": "Private PC directions: vectors on the unit circle, points and heatmap",
    "pca_biplot.png": "dp_pca: synthetic scores and biplot",
    "pve.png": "Private proportion of variance explained",
    "scree_pve.png": "Private proportion of variance explained",
    "scree_scree.png": "Private scree values",
    "score.png": "Private score histograms and synthetic samples",
    "score_histogram.png": "Private score histograms",
    "score_sample.png": "Synthetic score samples from the private histograms",
}
"""Captions of the figure files the tasks write; other files are captioned from their names."""


# --- figures ------------------------------------------------------------------------------------


def _png(item: Any) -> bytes:
    if isinstance(item, bytes | bytearray):
        return bytes(item)
    if isinstance(item, str | Path):
        return Path(item).read_bytes()
    fig = getattr(item, "figure", item)  # a LoadingPlot/ScorePlot, or a Figure
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", pad_inches=0.1)
    return buf.getvalue()


def _caption(name: str) -> str:
    return FIGURE_CAPTIONS.get(name, Path(name).stem.replace("_", " ").capitalize())


SUBSUMED: dict[str, str] = {
    "pca_biplot.png": "pca.png",
    "score_histogram.png": "score.png",
    "score_sample.png": "score.png",
}
"""Figure files whose panels another file of the same run already shows (left out of the page)."""


def figure_files(directory: str | Path) -> list[tuple[str, Path]]:
    """The PNGs of a run directory as (caption, path): known names first, in caption order;
    a file whose panels a larger figure of the run already shows is left out."""
    files = sorted(Path(directory).glob("*.png"))
    names = {f.name for f in files}
    files = [f for f in files if SUBSUMED.get(f.name) not in names]
    order = list(FIGURE_CAPTIONS)
    files.sort(key=lambda f: (order.index(f.name) if f.name in order else len(order), f.name))
    return [(_caption(f.name), f) for f in files]


def _figure_html(figures: Sequence[tuple[str, Any]]) -> str:
    blocks = []
    for i, (caption, item) in enumerate(figures, start=1):
        data = base64.b64encode(_png(item)).decode("ascii")
        blocks.append(
            f'<figure id="figure-{i}"><img src="data:image/png;base64,{data}" '
            f'alt="{esc(caption)}"><figcaption>Figure {i}. {esc(caption)}</figcaption></figure>')
    return "".join(blocks) or "<p>No figures.</p>"


# --- generic sections ---------------------------------------------------------------------------


def _dataset_section(result: Any, source: Any) -> Section:
    meta = result.metadata
    rows: list[tuple[str, Any]] = []
    if source is not None:
        where = source.path or source.origin
        rows.append(("Input", f"{where}" + (f" [{source.array}]" if source.array else "")))
    rows += [("Observations (n)", f"{meta['n']:,}"), ("Variables (p)", f"{meta['p']:,}")]
    if source is not None:
        rows += [("Stored dtype", source.dtype),
                 ("Row chunks", f"{len(source.chunks[0])} (at most {max(source.chunks[0]):,} "
                                "rows)"),
                 ("Size as float64", f"{source.nbytes / 2**20:,.1f} MiB")]
        names = ", ".join(source.variables[:40])
        rows.append(("Variable names", names + (f", … ({source.p} in all)"
                                               if source.p > 40 else "")))
    body = table(["Property", "Value"], rows, numeric=())
    body += ("<p class=note>n, p, the schema and (for grouped fits) the group sizes are treated "
             "as public; no data value is shown.</p>")
    return Section("Dataset", body, "dataset")


def _budget_section(result: Any) -> Section:
    meta = result.metadata
    privacy = meta.get("privacy", {})
    alloc = privacy.get("allocations", {})
    rows = [[name, Raw(num(b.get("eps"))), Raw(num(b.get("delta"))), b.get("status", "spent")]
            for name, b in alloc.items() if isinstance(b, Mapping)]
    total = privacy.get("total", {})
    split = "implicit equal split" if privacy.get("implicit_split") else "as given"
    prior = any(isinstance(b, Mapping) and b.get("status") == "prior" for b in alloc.values())
    body = (f"<p>Allocation for {esc(privacy.get('owner', meta.get('kind', '')))} ({split})."
            + (" A prior release (a supplied V_dp) is recorded, not spent again." if prior
               else "") + "</p>")
    body += table(["Component", "eps", "delta", "Status"], rows,
                  total=["Total", Raw(num(total.get("eps"))), Raw(num(total.get("delta"))), ""])
    ledger = list(result.ledger)
    zcdp = any(r.calibration == "zcdp" for r in ledger)
    header = ["#", "Component", "Mechanism", "Status", "eps", "delta"]
    header += (["rho"] if zcdp else []) + ["Sensitivity", "Noise scale", "Calibration",
                                           "Draws", "Note"]
    lrows = []
    for i, r in enumerate(ledger, start=1):
        sens = "" if r.sensitivity is None else num(r.sensitivity) + (
            f" ({esc(r.sensitivity_norm)})" if r.sensitivity_norm else "")
        scale = "" if r.scale is None else num(r.scale) + (f" ({esc(r.noise)})" if r.noise
                                                           else "")
        lrows.append([i, r.component, r.mechanism, r.status, Raw(num(r.eps)),
                      Raw(num(r.delta)), *([Raw(num(r.rho))] if zcdp else []), Raw(sens),
                      Raw(scale), r.calibration or "", r.draws, r.note])
    spent = meta.get("ledger_total") or {"eps": 0.0, "delta": 0.0}
    foot = ["", "Total spent (basic composition)", "", "", Raw(num(spent["eps"])),
            Raw(num(spent["delta"]))] + ([""] if zcdp else []) + ["", "", "", "", ""]
    numeric = {0, 4, 5, *([6] if zcdp else []), len(header) - 5, len(header) - 4,
               len(header) - 2}
    body += "<h3>Ledger</h3>" + table(header, lrows, total=foot, numeric=numeric)
    planned = {k: sum(b.get(k, 0.0) for b in alloc.values() if isinstance(b, Mapping)
                      and b.get("status") != "prior") for k in ("eps", "delta")}
    if alloc and all(math.isclose(spent[k], planned[k], rel_tol=1e-9, abs_tol=1e-15)
                     for k in ("eps", "delta")):
        check = "The ledger total equals the allocation spent by this release."
    elif alloc:
        check = ("The ledger total differs from the allocation: each requested method gets the "
                 "full allocation of its component, so releasing them together composes.")
    else:
        check = ""
    body += f"<p class=note>{esc(check)}</p>" if check else ""
    return Section("Privacy budget and ledger", body, "ledger")


def _config_section(config: Any) -> Section:
    """The resolved config without a seed, less the option sections of the other tasks (the
    run's config.yaml keeps them all)."""
    import yaml

    from dppca_dask.pipeline.config import TASKS

    data = config.to_dict()
    for name in TASKS:
        if name != data.get("task"):
            data.pop(name, None)
    text = "# dppca_dask resolved run config (seed never recorded)\n" + yaml.safe_dump(
        data, sort_keys=False)
    return Section("Resolved config", pre(text) + "<p class=note>An rng seed, if one was "
                   "given, is never recorded. The options of the other tasks are left out here; "
                   "config.yaml next to the outputs has the whole resolved config.</p>", "config")


def _work_section(passes: Sequence[Any], source: Any) -> Section:
    # Wall-clock times are not shown: they depend on the data (e.g. the share of exact Kendall
    # pairs), so they would be an unprivatised side channel in a released report.
    rows = [[p.index, ", ".join(p.outputs), f"{p.tasks:,}"] for p in passes]
    body = ""
    if passes:
        body += (f"<p>{len(passes)} data pass{'es' if len(passes) != 1 else ''}: each reads the "
                 "input once and returns only small exact aggregates; all noise is drawn on "
                 "the driver afterwards.</p>")
        total = ["", "Total", f"{sum(p.tasks for p in passes):,}"]
        body += table(["Pass", "Computed", "Tasks"], rows, total=total, numeric=(0, 2))
        if source is not None:
            times = "once" if len(passes) == 1 else f"{len(passes)} times"
            body += (f"<p class=note>Input read {times}: about "
                     f"{len(passes) * source.nbytes / 2**20:,.1f} MiB as float64.</p>")
    body += ("<p class=note>Run times are not part of the release (they depend on the data); "
             "the command line prints them to the operator.</p>")
    return Section("Work", body, "work")


# --- page ---------------------------------------------------------------------------------------

_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0;color:#1a1a1a;
background:#fafafa;line-height:1.45}
main{max-width:1300px;margin:0 auto;padding:24px 32px;background:#fff}
h1{font-size:1.7em;margin:0 0 4px}h2{border-bottom:2px solid #6A5ACD;padding-bottom:3px;
margin-top:34px}h3{margin-top:20px}
.sub{color:#555;margin:0 0 14px}nav a{margin-right:14px;color:#483D8B}
table{border-collapse:collapse;margin:8px 0 14px;font-size:.9em}
th,td{border:1px solid #d0d0d0;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#efedfa}td.n{text-align:right;font-variant-numeric:tabular-nums}
tfoot td{font-weight:bold;background:#f5f5f5}
pre{background:#f4f4f4;padding:10px 12px;overflow-x:auto;font-size:.85em;border:1px solid #e2e2e2}
figure{margin:18px 0 28px}img{max-width:100%;height:auto;border:1px solid #e2e2e2}
figcaption{color:#333;font-size:.92em;margin-top:4px}
.note{color:#555;font-size:.88em}
.banner{background:#fff4e5;border:1px solid #f0a030;padding:8px 12px;margin:10px 0}
.ok{background:#eef8ee;border:1px solid #7cbf7c;padding:8px 12px;margin:10px 0}
"""


def render_report(
    result: Any,
    *,
    figures: Sequence[tuple[str, Any]] | None = None,
    config: Any = None,
    source: Any = None,
    passes: Sequence[Any] = (),
    title: str | None = None,
    rng: Any = None,
) -> str:
    """The report of ``result`` as one HTML string (see the module docstring).

    Parameters
    ----------
    result
        Any dppca_dask result (``LoadingResult``, ``ScoreResult``, ``ScreeResult``,
        ``PCAResult``, …).
    figures
        ``(caption, figure)`` pairs: PNG bytes, a PNG path, or a matplotlib figure (or an
        object with ``.figure``). ``None``: the result kind's default figures, drawn here with
        ``rng`` (synthetic samples are post-processing).
    config
        The run's :class:`~dppca_dask.pipeline.config.RunConfig` (shown without a seed).
    source
        The input's :class:`~dppca_dask.io.data.SourceInfo` (public metadata).
    passes
        :class:`~dppca_dask.graph.passlog.PassRecord` items of the run (their task counts are shown;
        their times are not, since they depend on the data).
    title
        Page title (default from the result kind).

    Examples
    --------
    >>> import numpy as np
    >>> from dppca_dask import dp_loading, privacy_control
    >>> fit = dp_loading(np.random.default_rng(0).normal(size=(40, 3)),
    ...                  privacy=privacy_control(eps=1, delta=1e-3), calibration="analytic", rng=1)
    >>> page = render_report(fit, figures=[])
    >>> page.startswith("<!DOCTYPE html>") and "Privacy budget and ledger" in page
    True
    """
    meta = result.metadata
    kind = meta.get("kind", getattr(result, "kind", "result"))
    title = title or f"dppca_dask report: {kind} release"
    if figures is None:
        draw = figures_for(kind)
        figures = draw(result, rng) if draw is not None else []
    sections = [
        _dataset_section(result, source),
        Section("Figures", _figure_html(figures), "figures"),
        *(contribute(result) if (contribute := sections_for(kind)) else []),
        _budget_section(result),
        Section("Printed result and summary", pre(repr(result)) + (
            pre(repr(result.summary())) if hasattr(result, "summary") else ""), "result"),
    ]
    if config is not None:
        sections.append(_config_section(config))
    if passes:
        sections.append(_work_section(passes, source))
    if meta.get("non_private"):
        banner = ('<div class=banner><b>Not a private release as a whole:</b> this report '
                  "includes non-private reference values (marked NOT PRIVATE or "
                  "“not private”), requested with non_private=True.</div>")
    else:
        banner = ("<div class=ok>Every value and figure on this page is a private release or "
                  "post-processing of one (no non-private reference was stored).</div>")
    nav = "<nav>" + "".join(f'<a href="#{s.anchor}">{esc(s.title)}</a>' for s in sections
                            if s.anchor) + "</nav>"
    body = "".join(f'<section id="{s.anchor}"><h2>{esc(s.title)}</h2>{s.body}</section>'
                   if s.anchor else f"<section><h2>{esc(s.title)}</h2>{s.body}</section>"
                   for s in sections)
    version = esc(meta.get("version", ""))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body><main>"
        f"<h1>{esc(title)}</h1><p class=sub>dppca_dask {version} · calibration "
        f"{esc(meta.get('calibration', ''))} · noise generator "
        f"{'seeded by the caller' if meta.get('rng', {}).get('seeded') else 'from OS entropy'}"
        f"</p>{banner}{nav}{body}</main></body></html>\n"
    )


def write_report(path: str | Path, result: Any, **kwargs: Any) -> str:
    """Write :func:`render_report` of ``result`` to ``path`` (UTF-8); returns the path."""
    target = Path(path)
    target.write_text(render_report(result, **kwargs), encoding="utf-8")
    return str(target)
