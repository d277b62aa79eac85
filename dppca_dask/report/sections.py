"""What each result kind adds to the HTML report (:mod:`dppca_dask.report.html`).

* ``loading`` -- the private directions (and the non-private reference, marked); default
  figure: the loading plot;
* ``scree`` -- the scree and PVE table (methods × components; the reference rows marked);
  default figures: the PVE and scree plots;
* ``score`` -- the private frame, the grid and the groups; default figure: the score plot;
* ``pca`` -- the three parts' sections; default figures: scores and biplot, the loading plot
  and the PVE plot (each once);
* ``covariance`` -- the head of the released matrix and what was measured; default figure: the
  covariance plot.

Other kinds get the report's generic sections only, until they register their own with
:func:`~dppca_dask.report.elements.register_report`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dppca_dask.report.elements import Raw, Section, matrix_table, num, register_report, table

__all__ = ["covariance_sections", "loading_sections", "pca_sections", "score_sections", "scree_sections"]

_MAX_VARIABLES = 12
_MAX_COMPONENTS = 6


def _directions_table(da: Any, title: str) -> str:
    rows = min(_MAX_VARIABLES, da.shape[0])
    cols = min(_MAX_COMPONENTS, da.shape[1])
    shown = da.isel(variable=slice(0, rows), component=slice(0, cols))
    more = (f" (first {rows} of {da.shape[0]} variables x first {cols} of {da.shape[1]} PCs)"
            if (rows, cols) != da.shape else "")
    return (f"<h3>{title}{more}</h3>"
            + matrix_table(shown.values, [str(v) for v in shown["variable"].values],
                           [str(c) for c in shown["component"].values], corner="variable"))


def loading_sections(result: Any) -> list[Section]:
    body = _directions_table(result.directions, "Private PC directions")
    if result.nonprivate is not None:
        body += _directions_table(result.nonprivate, "Non-private PC directions (NOT private)")
    body += ("<p class=note>Columns are orthonormal eigenvectors of the noisy spherical Kendall "
             "matrix, ordered by the noisy eigenvalues (no eigenvalue scaling).</p>")
    return [Section("PC directions", body, "directions")]


def _loading_figures(result: Any, rng: Any) -> list[tuple[str, Any]]:
    return [("Private PC directions: vectors on the unit circle, points and heatmap",
             result.plot())]


def scree_table(result: Any) -> str:
    comps = [str(c) for c in result.scree["component"].values]
    blocks = []
    for name, values in (("Scree values", result.scree), ("PVE", result.pve)):
        rows = [[m, *[Raw(num(v, 4)) for v in values.sel(mechanism=m).values]]
                for m in result.methods]
        ref = result.nonprivate
        if ref is not None:
            key = "scree" if name == "Scree values" else "pve"
            rows.append(["Non-private (NOT private)", *[Raw(num(v, 4)) for v in
                                                        np.asarray(ref[key].values)]])
        blocks.append(f"<h3>{name}</h3>" + table(["mechanism", *comps], rows))
    return "".join(blocks)


def scree_sections(result: Any) -> list[Section]:
    meta = result.metadata.get("scree", {})
    note = (f"<p class=note>k = {result.k} components; centring: {meta.get('center', '?')}; "
            f"monotone post-processing: {'yes' if meta.get('mono') else 'no'}; PVE is over "
            "the k returned components.</p>")
    return [Section("Scree values and PVE", scree_table(result) + note, "scree")]


def _scree_figures(result: Any, rng: Any) -> list[tuple[str, Any]]:
    return [("Private proportion of variance explained", result.plot("pve")),
            ("Private scree values", result.plot("scree"))]


def frame_table(result: Any) -> str:
    frame = result.frame
    rows = []
    for a, label in enumerate(result.labels):
        lo, hi = frame.limits(a)
        rows.append([label, Raw(num(frame.center[a])), Raw(num(frame.radius[a])), Raw(num(lo)),
                     Raw(num(hi))])
    return table(["axis", "centre", "radius", "lower", "upper"], rows)


def score_sections(result: Any) -> list[Section]:
    meta = result.metadata
    bins = meta["bins"]
    body = (f"<h3>Private frame ({result.frame.method}, inflation "
            f"{num(result.frame.inflate)})</h3>" + frame_table(result))
    body += (f"<p>Grid: {bins[0]} x {bins[1]} bins over the frame; histogram methods: "
             f"{', '.join(result.methods)}.</p>")
    if result.groups is not None:
        body += "<h3>Groups (sizes treated as public)</h3>" + table(
            ["group", "n"], [[g, f"{int(s):,}"] for g, s in zip(result.groups,
                                                                 result.group_sizes,
                                                                 strict=True)])
    return [Section("Score frame and histograms", body, "score")]


def _score_figures(result: Any, rng: Any) -> list[tuple[str, Any]]:
    return [("Private score histograms and synthetic samples", result.plot(rng=rng))]


def pca_sections(result: Any) -> list[Section]:
    """The three parts' sections, each titled by its part, plus how the passes were shared."""
    meta = result.metadata
    intro = (f"<p>One release: the directions were estimated once and shared by the scree and "
             f"score parts; the input was read {meta.get('passes', '?')} times in all (the "
             "scree and score stages share each pass).</p>")
    return [Section("dp_pca", intro, "pca"), *loading_sections(result.loading),
            *scree_sections(result.scree), *score_sections(result.score)]


def _pca_figures(result: Any, rng: Any) -> list[tuple[str, Any]]:
    """The figures the CLI's pca run embeds, each once (the combined figure repeats them)."""
    return [("dp_pca: synthetic scores sampled from the private histogram, and the biplot",
             result.plot(rng=rng)),
            *_loading_figures(result.loading, rng),
            ("Private share of variance of the k released components (PVE)",
             result.scree.plot("pve"))]


def covariance_sections(result: Any) -> list[Section]:
    """The head of the released matrix and what was measured."""
    meta = result.metadata
    cov = result.covariance
    rows, cols = min(_MAX_VARIABLES, cov.shape[0]), min(_MAX_VARIABLES, cov.shape[1])
    shown = cov.isel(variable=slice(0, rows), variable_=slice(0, cols))
    more = (f" (first {rows} x {cols} of {cov.shape[0]} x {cov.shape[1]})"
            if (rows, cols) != cov.shape else "")
    count, pairs = meta["measured_offdiagonal"], meta["offdiagonal_pairs"]
    body = (f"<h3>Private covariance{more}</h3>"
            + matrix_table(shown.values, [str(v) for v in shown["variable"].values],
                           [str(v) for v in shown["variable_"].values], corner="variable")
            + f"<p>Method {meta['method']}; measured {count:,} of {pairs:,} off-diagonal "
              f"entries ({num(100.0 * count / pairs if pairs else 0.0, 3)} %)"
            + (f" in {meta['rounds']} rounds" if meta["method"] == "pace_ggm" else "")
            + ("; rows clipped at a private radius R = "
               f"{num(float(meta['radius']), 4)} (private searches of the row norms: the "
               f"{num(float(meta['radius_quantile']), 4)} quantile, or the "
               f"{num(float(meta.get('radius_robust_quantile', meta['radius_quantile'])), 4)} "
               "quantile when the top rows lie beyond a gap)</p>"
               if meta.get("radius_private") else "; bounds are public.</p>"))
    return [Section("Covariance", body, "covariance")]


def _covariance_figures(result: Any, rng: Any) -> list[tuple[str, Any]]:
    return [("Private covariance, its implied correlation and the measured entries",
             result.plot())]


register_report("covariance", sections=covariance_sections, figures=_covariance_figures)
register_report("loading", sections=loading_sections, figures=_loading_figures)
register_report("pca", sections=pca_sections, figures=_pca_figures)
register_report("scree", sections=scree_sections, figures=_scree_figures)
register_report("score", sections=score_sections, figures=_score_figures)
