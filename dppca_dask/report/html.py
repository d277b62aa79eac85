"""A self-contained HTML report of one release (``report.html`` of every ``dppca-dask run``).

The page needs no network: styles are inline, figures are embedded as base64 PNG data URIs, and
it has no scripts and no external links. It shows, in order:

* a NOT PRIVATE banner when anything on the page lies outside the guarantee (non-private
  reference values, a generator seeded by the caller: :func:`~dppca_dask.results.html.non_private_elements`);
* the printed result and its summary;
* the dataset (public shape, chunks, variable names);
* the privacy budget: the allocation per component and the ledger of every mechanism call with
  its basic-composition total;
* sections contributed by the result's kind (directions, scree/PVE table, frame and histograms…);
* the intervals of every released value, with "indistinguishable from noise" where it is, and
  what they do not cover (:mod:`dppca_dask.report.intervals`, any kind);
* every figure (the PNGs the run wrote, or figures drawn from the result);
* the resolved config (never a seed) and the work of the data passes (task counts).

No run time is on the page: wall-clock times depend on the data (e.g. the share of tied Kendall
pairs), so the CLI prints them to the operator's terminal only.

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
from dppca_dask._rformat import format_r_scalar
from dppca_dask.plots._style import save_figure
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
from dppca_dask.report.intervals import interval_section
from dppca_dask.results.html import non_private_elements

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
    "pca_biplot.png": "dp_pca: synthetic scores sampled from the private histogram, and the "
                      "biplot",
    "loading.png": "Private PC directions: vectors on the unit circle, points and heatmap",
    "pve.png": "Private share of variance of the k released components (PVE)",
    "scree_pve.png": "Private share of variance of the k released components (PVE)",
    "scree_scree.png": "Private scree values",
    "score.png": "Private score histograms and synthetic samples",
    "score_histogram.png": "Private score histograms",
    "score_sample.png": "Synthetic score samples from the private histograms",
    "covariance.png": "Private covariance, its implied correlation and the measured entries",
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
    save_figure(fig, buf, dpi=110, format="png")
    return buf.getvalue()


def _caption(name: str) -> str:
    return FIGURE_CAPTIONS.get(name, Path(name).stem.replace("_", " ").capitalize())


SUBSUMED: dict[str, tuple[str, ...]] = {
    "pca.png": ("pca_biplot.png", "loading.png", "scree_pve.png"),
    "score_histogram.png": ("score.png",),
    "score_sample.png": ("score.png",),
}
"""Figure files whose panels other files of the same run already show (left out of the page
when all of those are there), so that the page shows each figure once."""


def figure_files(directory: str | Path) -> list[tuple[str, Path]]:
    """The PNGs of a run directory as (caption, path): known names first, in caption order;
    a file whose panels other figures of the run already show is left out."""
    files = sorted(Path(directory).glob("*.png"))
    names = {f.name for f in files}
    files = [f for f in files if not (f.name in SUBSUMED
                                      and all(o in names for o in SUBSUMED[f.name]))]
    order = list(FIGURE_CAPTIONS)
    files.sort(key=lambda f: (order.index(f.name) if f.name in order else len(order), f.name))
    return [(_caption(f.name), f) for f in files]


def _css_width(png: bytes) -> str:
    """The image's width at its stated resolution (the pHYs chunk; CSS's 96 px per inch), so
    that every figure's text shows at one size whatever its pixel count; "" when it states
    none."""
    at = png.find(b"pHYs", 8, 4096)
    if png[12:16] != b"IHDR" or at < 0:
        return ""
    width = int.from_bytes(png[16:20], "big")
    per_metre, unit = int.from_bytes(png[at + 4:at + 8], "big"), png[at + 12]
    if unit != 1 or per_metre <= 0:
        return ""
    return f' style="width:{round(width / (per_metre * 0.0254) * 96)}px"'


def _figure_html(figures: Sequence[tuple[str, Any]]) -> str:
    blocks = []
    for i, (caption, item) in enumerate(figures, start=1):
        png = _png(item)
        data = base64.b64encode(png).decode("ascii")
        blocks.append(
            f'<figure id="figure-{i}"><img src="data:image/png;base64,{data}"{_css_width(png)} '
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


def _zcdp_eps(rho: float, delta: float | None) -> float | None:
    if delta is None or not rho > 0:
        return None
    from dppca_dask.privacy.zcdp import zcdp_eps

    return float(zcdp_eps(rho, delta))


def _allocation(privacy: Mapping[str, Any]) -> tuple[str, str]:
    """(intro, table) of the allocation: (ε, δ) per component, or ρ per part under zCDP."""
    alloc = privacy.get("allocations", {})
    if str(privacy.get("accounting", "")).lower() == "zcdp":
        rho = float(privacy.get("rho", 0.0))
        rows = [[name, Raw(num(v)), Raw(num(100.0 * float(v) / rho if rho else 0.0, 3))]
                for name, v in alloc.items() if isinstance(v, int | float)]
        eps, delta = privacy.get("eps"), privacy.get("delta")
        intro = (f"<p>Allocation for {esc(privacy.get('owner', ''))}: ρ-zCDP, ρ = {num(rho)}"
                 + (f", the largest ρ whose conversion (Canonne, Kamath &amp; Steinke 2020) is "
                    f"within ε = {num(eps)} at δ = {num(delta)}" if delta is not None else "")
                 + ".</p>")
        return intro, table(["Part", "rho", "Share (%)"], rows,
                            total=["Total", Raw(num(sum(float(v) for v in alloc.values()
                                                        if isinstance(v, int | float)))),
                                   Raw(num(100.0, 3))])
    rows = [[name, Raw(num(b.get("eps"))), Raw(num(b.get("delta"))), b.get("status", "spent")]
            for name, b in alloc.items() if isinstance(b, Mapping)]
    total = privacy.get("total", {})
    split = "implicit equal split" if privacy.get("implicit_split") else "as given"
    prior = any(isinstance(b, Mapping) and b.get("status") == "prior" for b in alloc.values())
    intro = (f"<p>Allocation for {esc(privacy.get('owner', ''))} ({split})."
             + (" A prior release (a supplied V_dp) is recorded, not spent again." if prior
                else "") + "</p>")
    return intro, table(["Component", "eps", "delta", "Status"], rows,
                        total=["Total", Raw(num(total.get("eps"))),
                               Raw(num(total.get("delta"))), ""])


def _budget_section(result: Any) -> Section:
    meta = result.metadata
    privacy = meta.get("privacy", {})
    alloc = privacy.get("allocations", {})
    intro, alloc_table = _allocation(privacy)
    body = intro + alloc_table
    ledger = list(result.ledger)
    zcdp = any(r.calibration == "zcdp" for r in ledger)
    delta_plan = privacy.get("delta") if zcdp else None
    header = ["#", "Component", "Mechanism", "Status"]
    header += (["rho", "eps (from rho)", "delta"] if zcdp else ["eps", "delta"])
    header += ["Sensitivity", "Noise scale", "Calibration", "Draws", "Note"]
    lrows = []
    for i, r in enumerate(ledger, start=1):
        sens = "" if r.sensitivity is None else num(r.sensitivity) + (
            f" ({esc(r.sensitivity_norm)})" if r.sensitivity_norm else "")
        scale = "" if r.scale is None else num(r.scale) + (f" ({esc(r.noise)})" if r.noise
                                                           else "")
        if zcdp and r.calibration == "zcdp":
            amounts = [Raw(num(r.rho)), Raw(num(_zcdp_eps(r.rho or 0.0, delta_plan))),
                       Raw(num(delta_plan))]
        elif zcdp:
            amounts = [Raw(num(r.rho)), Raw(num(r.eps)), Raw(num(r.delta))]
        else:
            amounts = [Raw(num(r.eps)), Raw(num(r.delta))]
        lrows.append([i, r.component, r.mechanism, r.status, *amounts, Raw(sens),
                      Raw(scale), r.calibration or "", r.draws, r.note])
    spent = meta.get("ledger_total") or {"eps": 0.0, "delta": 0.0}
    if zcdp:
        foot = ["", "Total spent (ρ adds; ε of the total ρ)", "", "", Raw(num(spent.get("rho"))),
                Raw(num(spent.get("eps"))), Raw(num(spent.get("delta"))), "", "", "", "", ""]
        numeric = {0, 4, 5, 6, 7, 8, 10}
    else:
        foot = ["", "Total spent (basic composition)", "", "", Raw(num(spent["eps"])),
                Raw(num(spent["delta"])), "", "", "", "", ""]
        numeric = {0, 4, 5, 6, 7, 9}
    body += "<h3>Ledger</h3>" + table(header, lrows, total=foot, numeric=numeric)
    body += f"<p class=note>{esc(_ledger_check(meta, alloc, spent, zcdp))}</p>"
    return Section("Privacy budget and ledger", body, "ledger")


def _methods(meta: Mapping[str, Any]) -> int:
    """How many mechanisms this release ran per component (the most of any component)."""
    counts = [len(meta.get(key) or ()) for key in ("methods", "scree_methods", "score_methods")]
    return max([*counts, 1])


def _ledger_check(meta: Mapping[str, Any], alloc: Mapping[str, Any], spent: Mapping[str, Any],
                  zcdp: bool) -> str:
    """The note under the ledger: true for this release's kind and number of methods."""
    if zcdp:
        return ("Each record is ρ-zCDP; ρ adds up over the records and the total converts to "
                f"ε = {format_r_scalar(float(spent.get('eps') or 0.0))} at δ = "
                f"{format_r_scalar(float(spent.get('delta') or 0.0))} (per-record ε are each "
                "record's own conversion and do not add).")
    planned = {k: sum(b.get(k, 0.0) for b in alloc.values() if isinstance(b, Mapping)
                      and b.get("status") != "prior") for k in ("eps", "delta")}
    if not alloc:
        return ""
    if all(math.isclose(spent[k], planned[k], rel_tol=1e-9, abs_tol=1e-15)
           for k in ("eps", "delta")):
        return "The ledger total equals the allocation spent by this release."
    if _methods(meta) > 1:
        return ("The ledger total differs from the allocation: each requested method gets the "
                "full allocation of its component, so releasing them together composes.")
    return ("The ledger total differs from the allocation (a mechanism that spends no δ, such "
            "as the geometric histogram, leaves part of it unused).")


def _config_section(config: Any) -> Section:
    """The resolved config without a seed and without the option sections of the other tasks:
    ``config.to_dict()`` (:meth:`~dppca_dask.pipeline.config.RunConfig.to_dict`) leaves both out,
    so the report needs nothing from the pipeline (it sits below it)."""
    import yaml

    data = config.to_dict()
    text = "# dppca_dask resolved run config (seed never recorded)\n" + yaml.safe_dump(
        data, sort_keys=False)
    return Section("Resolved config", pre(text) + "<p class=note>An rng seed, if one was "
                   "given, is never recorded. The options of the other tasks are left out here; "
                   "config.yaml next to the outputs has the whole resolved config.</p>", "config")


def _work_section(passes: Sequence[Any], source: Any) -> Section:
    # No wall-clock time here or anywhere on the page: run times depend on the data, so they go
    # to the operator's terminal only (tests/test_neighbours.py compares every byte).
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
.note{color:#555;font-size:.88em}.noise{color:#8c8c8c}
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
        :class:`~dppca_dask.graph.passlog.PassRecord` items of the run (their task counts are
        shown, never their times: run times depend on the data and go to the operator's terminal
        only).
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
        *([intervals] if (intervals := interval_section(result)) is not None else []),
        _budget_section(result),
        Section("Printed result and summary", pre(repr(result)) + (
            pre(repr(result.summary())) if hasattr(result, "summary") else ""), "result"),
    ]
    if config is not None:
        sections.append(_config_section(config))
    if passes:
        sections.append(_work_section(passes, source))
    outside = non_private_elements(result)
    if outside:
        banner = ('<div class=banner><b>NOT PRIVATE: not a private release as a whole.</b> '
                  "Outside the guarantee: " + esc("; ".join(outside)) + ".</div>")
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
        f"{'seeded by the caller' if meta.get('rng', {}).get('seeded') else 'the OS CSPRNG'}"
        f"</p>{banner}{nav}{body}</main></body></html>\n"
    )


def write_report(path: str | Path, result: Any, **kwargs: Any) -> str:
    """Write :func:`render_report` of ``result`` to ``path`` (UTF-8); returns the path."""
    target = Path(path)
    target.write_text(render_report(result, **kwargs), encoding="utf-8")
    return str(target)
