"""Plots of a ``dp_pca`` fit (docs/spec/SPEC_dppca.md §9.2), drawn with matplotlib.

Panels (``panels``, any of them, or ``"all"``):

* ``"score"`` -- synthetic points sampled from a released histogram, shown in the private frame
  (1:1 aspect, zero expansion, as the score plots);
* ``"biplot"`` -- the same points (lighter) plus one arrow per variable from the frame centre
  (c_x, c_y) to the centre plus s·(V[j, a], V[j, b]), s = 0.8·min(R_x, R_y)/max_j‖(V[j, a],
  V[j, b])‖, labelled with the variable name (nearby tips share one label);
* ``"scree"`` -- the PVE curve of the scree part; ``"loading"`` -- the loading vectors.

Rows: the scree/loading panels first (when asked), then one row per version -- the non-private
reference first, only when the fit stored it, then each private histogram method -- with the
score and biplot panels side by side. Exactly one sampling method is used; ``sample_size`` is
shared by the score and biplot panels of a version. With ``sample_size=None`` private samples
have n points and the non-private panels show the **observed** scores; with an explicit size the
non-private histogram is sampled at that size. Grouped fits colour points by group (HCL palette,
legend on the right). Every non-private element is titled "Non-private" and the figure then
carries a note that it is not a private release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dppca_dask._typing import RngLike
from dppca_dask._validation import bad_param
from dppca_dask.plots._style import (
    MECHANISM_NAMES,
    SavedFigure,
    caption_line,
    direction_flags,
    direction_label,
    direction_note,
    figure,
    finish,
    footer,
    frame_panel,
    group_colors,
    lay_out,
    style_panel,
    wrap_title,
)
from dppca_dask.results.plotters import register_plot
from dppca_dask.results.sampling import SamplingLike

__all__ = ["BIPLOT_SCALE", "PCA_PANELS", "RUN_FIGURES", "PCAPlot", "biplot_arrows", "plot_pca",
           "save_run_figures"]

PCA_PANELS = ("scree", "loading", "score", "biplot")
BIPLOT_SCALE = 0.8
_OWNER = "plot"
MAX_ARROW_LABELS = 12
"""A biplot labels at most this many tips (the longest arrows; nearby tips share a label)."""
_ARROW = "#222222"
_NOTE = "Shows non-private reference panels: this figure is not a private release."


@dataclass(frozen=True)
class PCAPlot(SavedFigure):
    """A drawn dp_pca plot (R: ``$fit``, ``$sample``, ``$plot``).

    ``axes``: ``"scree"``, ``"loading"`` and ``"score"``/``"biplot"`` → ``{target: Axes}``;
    ``samples``: ``{target: DataFrame(pc_x, pc_y[, group])}`` (the points of both panels of a
    version; "nonprivate" holds the observed scores when ``sample_size`` is None); ``arrows``:
    ``{target: DataFrame}`` of the biplot arrows (variable, x0, y0, x1, y1).
    """

    fit: Any
    figure: Any
    axes: dict[str, Any]
    samples: dict[str, pd.DataFrame]
    arrows: dict[str, pd.DataFrame]
    group_colors: dict[str, str] | None


def _parse_panels(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) and value == "all":
        return PCA_PANELS
    items = [value] if isinstance(value, str) else value
    rule = "'all', or a non-empty sequence of 'scree', 'loading', 'score', 'biplot'"
    if not isinstance(items, Sequence) or not items or any(
            not isinstance(v, str) or v not in PCA_PANELS for v in items):
        raise bad_param("panels", _OWNER, rule, value)
    return tuple(p for p in PCA_PANELS if p in items)


def biplot_arrows(directions: np.ndarray, names: Sequence[str], center: Sequence[float],
                  radius: Sequence[float], *, equal: bool = True) -> pd.DataFrame:
    """Arrows of the biplot: from the frame centre along the rows of ``directions`` (p × 2).

    At 1:1 aspect (``equal``) scaled by s = 0.8·min(R_x, R_y)/max_j‖v_j‖, so the longest arrow
    spans 80 % of the shorter frame radius (SPEC §9.2). In a panel whose axes scale
    independently (radii further apart than
    :data:`~dppca_dask.plots._style.ASPECT_FACTOR`) each axis is scaled by its own radius,
    x by 0.8·R_x/max_j‖v_j‖ and y by 0.8·R_y/max_j‖v_j‖, so the arrows are drawn as they read
    in units of the panel (an arrow along one axis never shrinks to a dot).

    Examples
    --------
    >>> biplot_arrows(np.array([[1.0, 0.0], [0.0, 0.5]]), ["a", "b"], (1.0, 2.0), (10.0, 5.0))
      variable   x0   y0   x1   y1
    0        a  1.0  2.0  5.0  2.0
    1        b  1.0  2.0  1.0  4.0
    >>> biplot_arrows(np.array([[1.0, 0.0], [0.0, 0.5]]), ["a", "b"], (0.0, 0.0), (100.0, 5.0),
    ...               equal=False)
      variable   x0   y0    x1   y1
    0        a  0.0  0.0  80.0  0.0
    1        b  0.0  0.0   0.0  2.0
    """
    v = np.asarray(directions, dtype=np.float64)
    longest = float(np.max(np.hypot(v[:, 0], v[:, 1])))
    if longest > 0:
        sx, sy = ((BIPLOT_SCALE * min(radius) / longest,) * 2 if equal else
                  (BIPLOT_SCALE * radius[0] / longest, BIPLOT_SCALE * radius[1] / longest))
    else:
        sx = sy = 0.0
    cx, cy = float(center[0]), float(center[1])
    return pd.DataFrame({"variable": list(names), "x0": cx, "y0": cy,
                         "x1": cx + sx * v[:, 0], "y1": cy + sy * v[:, 1]})


def _draw_points(ax: Any, frame: pd.DataFrame, ctl: Any, colors: Mapping[str, str] | None,
                 alpha: float) -> None:
    size = (ctl.scatter_size * 1.6) ** 2
    raster = len(frame) > 5000
    if colors is None or "group" not in frame:
        ax.scatter(frame["pc_x"], frame["pc_y"], s=size, c=ctl.color, alpha=alpha,
                   linewidths=0, rasterized=raster)
        return
    for level, color in colors.items():
        part = frame[frame["group"] == level]
        ax.scatter(part["pc_x"], part["pc_y"], s=size, c=color, alpha=alpha, linewidths=0,
                   rasterized=raster)


def _draw_arrows(ax: Any, arrows: pd.DataFrame, radius: Sequence[float], base_size: float
                 ) -> list[Any]:
    """Arrows and tip labels; tips are compared in units of the frame radius per axis (so the
    same rule holds at any aspect); only the :data:`MAX_ARROW_LABELS` longest tips are labelled,
    nearby tips sharing a label (one or two names, then "+m")."""
    from matplotlib.patches import FancyArrowPatch

    rx, ry = float(radius[0]) or 1.0, float(radius[1]) or 1.0
    row: Any  # named tuples of floats and a name; pandas-stubs types each field as a Scalar
    for row in arrows.itertuples(index=False):
        ax.add_patch(FancyArrowPatch((row.x0, row.y0), (row.x1, row.y1), arrowstyle="-|>",
                                     mutation_scale=10, color=_ARROW, linewidth=1.1, zorder=4,
                                     shrinkA=0.0, shrinkB=0.0))
    dx = (arrows["x1"] - arrows["x0"]).to_numpy() / rx
    dy = (arrows["y1"] - arrows["y0"]).to_numpy() / ry
    order = np.argsort(-np.hypot(dx, dy), kind="stable")
    groups: list[tuple[float, float, int, list[str]]] = []
    for j in order:
        name = str(arrows["variable"].iloc[j])
        for gx, gy, _, names in groups:
            if np.hypot(gx - dx[j], gy - dy[j]) < 0.08:
                names.append(name)
                break
        else:
            if len(groups) < MAX_ARROW_LABELS:
                groups.append((dx[j], dy[j], int(j), [name]))
    from dppca_dask.plots.loading import group_text

    texts = []
    for ux, uy, j, names in groups:
        r = float(np.hypot(ux, uy)) or 1.0
        text = group_text(names, 26)
        x1, y1 = float(arrows["x1"].iloc[j]), float(arrows["y1"].iloc[j])
        label = ax.text(x1 + 0.04 * rx * ux / r, y1 + 0.04 * ry * uy / r, text,
                        fontsize=base_size * 0.62, ha="left" if ux >= 0 else "right",
                        va="bottom" if uy >= 0 else "top", zorder=5,
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.8,
                              "edgecolor": "none"})
        label.set_in_layout(False)
        label._dppca_tip = (x1, y1)
        label._dppca_count = len(names)
        texts.append(label)
    ax._dppca_unlabelled = max(0, len(arrows) - sum(len(g[3]) for g in groups))
    ax._dppca_tips = arrows[["x1", "y1"]].to_numpy(dtype=np.float64)  # labels keep off them
    return texts


def _control(control: Any) -> Any:
    from dppca_dask.plots.score import ScorePlotControl, score_plot_control

    if control is None:
        return ScorePlotControl(show_group_legend=True)
    if isinstance(control, ScorePlotControl):
        return control
    if isinstance(control, Mapping):
        return score_plot_control(**{"show_group_legend": True, **control})
    raise bad_param("control", _OWNER, "a ScorePlotControl or a dict of score_plot_control "
                    "options", control)


def plot_pca(
    fit: Any,
    *,
    panels: str | Sequence[str] = ("score", "biplot"),
    sampling: SamplingLike = None,
    group_weights: str = "observed",
    control: Any = None,
    rng: RngLike = None,
    samples: Mapping[str, pd.DataFrame] | None = None,
) -> PCAPlot:
    """Draw the panels of a :class:`~dppca_dask.results.pca.PCAResult` (post-processing).

    Parameters
    ----------
    fit
        A ``dp_pca`` result.
    panels
        Any of ``"scree"``, ``"loading"``, ``"score"``, ``"biplot"`` (default the last two), or
        ``"all"`` for the combined figure of a run.
    sampling
        A :func:`~dppca_dask.sampling_control` with exactly one method (default "uniform").
    group_weights
        How a grouped sample is split over groups (see :meth:`ScoreResult.sample`).
    control
        A :func:`~dppca_dask.score_plot_control` or a dict of its options (the group legend is
        shown unless ``show_group_legend=False``).
    rng
        Generator for the synthetic samples (no budget).
    samples
        The ``.samples`` of an earlier plot of the same fit and ``sampling`` (so that several
        figures show the same points); drawn here when ``None``.

    Returns
    -------
    PCAPlot
        ``.figure``, ``.axes``, ``.samples``, ``.arrows``, ``.group_colors``, ``.save()``.

    Examples
    --------
    >>> from dppca_dask import clipped_control, dp_pca, privacy_control
    >>> X = np.random.default_rng(0).normal(size=(300, 3)) * [3.0, 1.0, 0.5]
    >>> fit = dp_pca(X, privacy=privacy_control(eps=6, delta=1e-4), rng=1,
    ...              scree_control=clipped_control(C_clip=40))
    >>> out = fit.plot(rng=2)
    >>> sorted(out.axes), len(out.samples["geometric"]), list(out.arrows["geometric"]["variable"])
    (['biplot', 'score'], 300, ['X1', 'X2', 'X3'])
    """
    from dppca_dask.results.sampling import as_sampling_control

    if getattr(fit, "kind", None) != "pca":  # duck-typed: plots do not import result types
        raise bad_param("fit", "plot_pca", "a PCAResult from dp_pca()", type(fit).__name__)
    chosen = _parse_panels(panels)
    ctl = _control(control)
    sampler = as_sampling_control(sampling, _OWNER)
    if len(sampler.method) != 1:
        raise bad_param("sampling", _OWNER, "a sampling_control() with exactly one method for "
                        "dp_pca plots", list(sampler.method))
    method = sampler.method[0]
    score, loading = fit.score, fit.loading
    stored = score.nonprivate_probability is not None
    targets = (("nonprivate",) if stored else ()) + score.methods
    versions = [p for p in ("score", "biplot") if p in chosen]
    top = [p for p in ("scree", "loading") if p in chosen]

    given = samples
    samples = {}
    titles: dict[str, str] = {}
    if versions:
        if given is None:
            drawn = score.sample(sampler, targets=score.methods, group_weights=group_weights,
                                 rng=rng)
            samples = {t: drawn[t][method] for t in score.methods}
        for t in score.methods:
            titles[t] = f"{method.capitalize()} sample of the {MECHANISM_NAMES[t]}"
        if stored and sampler.sample_size is None:
            samples = {"nonprivate": score.observed_scores, **samples}
            titles["nonprivate"] = "Non-private scores (not private)"
        elif stored:
            if given is None:
                ref = score.sample(sampler, targets=("nonprivate",), rng=rng)
                samples = {"nonprivate": ref["nonprivate"][method], **samples}
            titles["nonprivate"] = (f"{method.capitalize()} sample of the non-private "
                                    "histogram (not private)")
        if given is not None:
            missing = [t for t in targets if t not in given]
            if missing:
                raise bad_param("samples", _OWNER, f"samples for every version {targets}",
                                sorted(given))
            samples = {t: given[t] for t in targets}

    a, b = (int(x) for x in score.metadata["axes"])
    names = [str(v) for v in loading.directions["variable"].values]
    frame = score.frame
    xlim, ylim = frame.xlim, frame.ylim
    ph_size = max(ctl.panel_size, 4.2)
    pw, ph, equal = frame_panel(xlim, ylim, ph_size)
    private_v = np.asarray(loading.directions.values)[:, [a - 1, b - 1]]
    ref_v = None if loading.nonprivate is None else np.asarray(
        loading.nonprivate.values)[:, [a - 1, b - 1]]
    arrows = {t: biplot_arrows(ref_v if (t == "nonprivate" and ref_v is not None) else private_v,
                               names, frame.center, frame.radius, equal=equal)
              for t in targets} if "biplot" in versions else {}

    levels = score.groups
    colors = group_colors(levels, ctl.group_colors) if levels is not None else None
    rows: list[list[Any]] = [top] if top else []
    for t in targets if versions else ():
        rows.append([(p, t) for p in versions])
    widths = {"scree": 6.0, "loading": 5.0}
    row_widths = [[widths[i] if isinstance(i, str) else pw for i in row] for row in rows]
    heights = [(5.0 if row and isinstance(row[0], str) else ph) + 1.1 for row in rows]
    legend = colors is not None and ctl.show_group_legend and bool(versions)
    fig = figure(max(sum(w + 0.9 for w in rw) for rw in row_widths) + (1.4 if legend else 0.0),
                 sum(heights) + 0.5)
    outer = fig.add_gridspec(len(rows), 1, height_ratios=heights)
    flags = direction_flags(loading)
    xlab = ctl.xlab if ctl.xlab is not None else score.labels[0]
    ylab = ctl.ylab if ctl.ylab is not None else score.labels[1]
    # a score axis along a direction that is not identifiable says so, in grey
    xlab_flag = direction_label(xlab, flags, long=False) if ctl.xlab is None else (xlab, None)
    ylab_flag = direction_label(ylab, flags, long=False) if ctl.ylab is None else (ylab, None)
    axes: dict[str, Any] = {}
    labels: list[tuple[str, list[Any]]] = []
    unlabelled = 0
    for r, row in enumerate(rows):
        inner = outer[r, 0].subgridspec(1, len(row), width_ratios=row_widths[r])
        for c, item in enumerate(row):
            ax = fig.add_subplot(inner[0, c])
            if item == "scree":
                from dppca_dask.plots.scree import plot_scree

                plot_scree(fit.scree, type="pve", ax=ax)
                axes["scree"] = ax
                continue
            if item == "loading":
                from dppca_dask.plots.loading import draw_vectors, frame_xy

                ref = None if loading.nonprivate is None else np.asarray(loading.nonprivate.values)
                df = frame_xy(np.asarray(loading.directions.values), ref,
                               list(range(len(names))), (a - 1, b - 1), names)
                draw_vectors(ax, df, (f"PC{a}", f"PC{b}"), ref is not None, flags)
                labels.append(("loading", ax._dppca_labels))
                axes["loading"] = ax
                continue
            panel, target = item
            alpha = ctl.scatter_alpha if panel == "score" else 0.35 * ctl.scatter_alpha / 0.6
            _draw_points(ax, samples[target], ctl, colors, alpha)
            if panel == "score":
                title = titles[target]
            else:
                labels.append(("biplot", _draw_arrows(ax, arrows[target], frame.radius,
                                                      ctl.base_size)))
                unlabelled = max(unlabelled, ax._dppca_unlabelled)
                title = "Biplot: " + titles[target][0].lower() + titles[target][1:]
            style_panel(ax, xlim=xlim, ylim=ylim, title=wrap_title(title, pw, ctl.title_size),
                        xlabel=xlab_flag[0], ylabel=ylab_flag[0], base_size=ctl.base_size,
                        title_size=ctl.title_size, equal=equal)
            for axis, (_, color) in ((ax.xaxis, xlab_flag), (ax.yaxis, ylab_flag)):
                if color is not None:
                    axis.label.set_color(color)
            axes.setdefault(panel, {})[target] = ax
    if legend:
        from matplotlib.patches import Patch

        assert colors is not None  # legend implies group colours

        handles = [Patch(facecolor=col, label=lvl) for lvl, col in colors.items()]
        fig.legend(handles=handles, title="Group", loc="outside right center",
                   fontsize=ctl.base_size * 0.8, title_fontsize=ctl.base_size, frameon=False)
    caption = caption_line(fit.metadata, k=int(fit.scree.k))
    grey = direction_note(flags, [f"PC{a}", f"PC{b}"])
    extra = "" if grey is None else f"\n{grey}"
    note = _NOTE if fit.metadata["non_private"] else None
    # laid out with the widest footer the labels can need (every arrow unlabelled): the final
    # count never adds a line, so the layout the labels are placed on stands
    with_biplot = any(kind == "biplot" for kind, _ in labels)
    footer(fig, caption + _unlabelled(len(names) if with_biplot else unlabelled, len(names))
           + extra, note)
    from dppca_dask.plots.loading import repel_labels

    renderer = lay_out(fig)
    dropped = repel_labels(fig, [group for _, group in labels], renderer)
    biplot = [d for (kind, _), d in zip(labels, dropped, strict=True) if kind == "biplot"]
    footer(fig, caption + _unlabelled(unlabelled + max(biplot, default=0), len(names)) + extra,
           note)
    finish(fig, renderer)
    return PCAPlot(fit, fig, axes, samples, arrows, colors)


RUN_FIGURES = ("pca.png", "pca_biplot.png", "loading.png", "scree_pve.png")
"""The figures of a ``pca`` run, written by :func:`save_run_figures`."""


def save_run_figures(fit: Any, plot: PCAPlot, directory: Any, *, dpi: int) -> None:
    """The figures of a ``pca`` run into ``directory`` (:data:`RUN_FIGURES`), each drawn once.

    ``plot``: the run's score/biplot panels (``pca_biplot.png``); ``loading.png`` and
    ``scree_pve.png`` are the parts' own plots. ``pca.png`` combines the PVE panel, the loading
    vectors and ``plot`` as ``fit.plot("all")`` lays them out -- from the pixels already
    rendered for the other three files when ``plot`` has both the score and the biplot panels
    (its panels are then exactly those of the combined figure), else drawn afresh on the same
    samples.
    """
    from pathlib import Path

    from dppca_dask.plots._style import compose_png, rasterize, write_png

    base = Path(directory)
    panels = rasterize(plot.figure, dpi)
    write_png(panels.content(), base / "pca_biplot.png", dpi)
    loading = fit.loading.plot()
    vectors = rasterize(loading.figure, dpi, {"vector": loading.axes["vector"]})
    write_png(vectors.content(), base / "loading.png", dpi)
    scree_fig = fit.scree.plot(type="pve")
    scree = rasterize(scree_fig, dpi, {"scree": scree_fig.axes[0]})
    write_png(scree.content(), base / "scree_pve.png", dpi)
    if set(plot.axes) == {"score", "biplot"}:
        compose_png([[scree.crop("scree"), vectors.crop("vector")], [panels.content()]],
                    base / "pca.png", dpi)
    else:
        plot_pca(fit, panels="all", samples=plot.samples).save(str(base / "pca.png"), dpi=dpi)


def _unlabelled(count: int, total: int) -> str:
    return (f" · biplot labels: the longest arrows ({count} of {total} unlabelled)" if count
            else "")


register_plot("pca", plot_pca)  # the pca results' .plot()
