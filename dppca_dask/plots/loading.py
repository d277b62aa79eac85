"""Loading plots of a ``dp_loading`` fit (docs/spec/SPEC_dppca.md §9.3), drawn with matplotlib.

Three panel types, drawn left to right in one figure:

* ``"vector"`` -- the unit circle and one arrow per variable from the origin to
  (V[j, a], V[j, b]), labelled with the variable name;
* ``"point"`` -- one labelled point per variable at (V[j, a], V[j, b]);
* ``"heatmap"`` -- variables × ``heatmap_components`` on a diverging palette over [−1, 1]
  (0 = white), each cell printed to two decimals.

When the fit stored its non-private reference (``non_private=True``) the vector and point panels
add it dashed and grey, the heatmap gets a second panel, every reference element is labelled "not
private" and the figure carries a note that it is not a private release. Directions are
orthonormal columns (no eigenvalue scaling), so every entry lies in [−1, 1].

matplotlib is imported inside the functions; figures are built without pyplot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dppca_dask._validation import bad_param, parse_axes
from dppca_dask.plots._style import (
    NOT_IDENTIFIABLE,
    TITLE_Y,
    SavedFigure,
    angle_text,
    caption_line,
    direction_flags,
    direction_label,
    direction_note,
    finish,
    footer,
    hatch_cells,
    lay_out,
)
from dppca_dask.results.plotters import register_plot

__all__ = ["LOADING_PLOT_TYPES", "LoadingPlot", "group_text", "plot_loading", "repel_labels"]

LOADING_PLOT_TYPES = ("vector", "point", "heatmap")
_OWNER = "plot"
_PRIVATE = "#6A5ACD"  # the score plots' slate blue
_REFERENCE = "#7F7F7F"
_NOTE = "Shows the non-private reference: this figure is not a private release."


@dataclass(frozen=True)
class LoadingPlot(SavedFigure):
    """A drawn loading plot (R: ``$loading``, ``$plot$all`` and one entry per type).

    ``figure`` is the combined figure; ``axes`` maps each drawn type (and
    ``"heatmap_nonprivate"``) to its panel; ``data`` holds what each panel drew, as DataFrames
    indexed by variable (columns ``x``/``y`` and, with a stored reference, ``x_nonprivate``/
    ``y_nonprivate``; heatmaps: one column per component).
    """

    loading: Any
    figure: Any
    axes: dict[str, Any]
    data: dict[str, pd.DataFrame]


def _parse_types(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    rule = "'vector', 'point', 'heatmap', or a non-empty sequence of them"
    if not isinstance(items, Sequence) or not items or any(
            not isinstance(v, str) or v not in LOADING_PLOT_TYPES for v in items):
        raise bad_param("type", _OWNER, rule, value)
    return tuple(t for t in LOADING_PLOT_TYPES if t in items)


def _positive_ints(value: Any, name: str, rule: str) -> list[int]:
    items = [value] if np.ndim(value) == 0 else list(np.asarray(value, dtype=object).ravel())
    if isinstance(value, str) or not items:
        raise bad_param(name, _OWNER, rule, value)
    out = []
    for v in items:
        if (isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer | float)
                or not float(v).is_integer() or v < 1):
            raise bad_param(name, _OWNER, rule, value)
        out.append(int(v))
    return out


def _parse_variables(value: Any, names: list[str]) -> list[int]:
    """Row indices (0-based) for ``variables``: "all", names, or 1-based positions."""
    if isinstance(value, str) and value == "all":
        return list(range(len(names)))
    rule = (f"'all', or a non-empty sequence of variable names or 1-based positions (at most "
            f"{len(names)})")
    items = [value] if isinstance(value, str) or np.ndim(value) == 0 else list(value)
    if not items:
        raise bad_param("variables", _OWNER, rule, value)
    if all(isinstance(v, str) for v in items):
        missing = [v for v in items if v not in names]
        if missing:
            raise bad_param("variables", _OWNER, f"names of the fit's variables (unknown: "
                            f"{missing[:3]})", value)
        rows = [names.index(v) for v in items]
    else:
        rows = [i - 1 for i in _positive_ints(items, "variables", rule)]
        if max(rows) >= len(names):
            raise bad_param("variables", _OWNER, rule, value)
    return list(dict.fromkeys(rows))


def frame_xy(v: np.ndarray, ref: np.ndarray | None, rows: list[int], cols: tuple[int, int],
              names: list[str]) -> pd.DataFrame:
    data = {"x": v[rows, cols[0]], "y": v[rows, cols[1]]}
    if ref is not None:
        data |= {"x_nonprivate": ref[rows, cols[0]], "y_nonprivate": ref[rows, cols[1]]}
    return pd.DataFrame(data, index=pd.Index([names[r] for r in rows], name="variable"))


def _style_unit(ax: Any, title: str, xlabel: str, ylabel: str,
                flags: Mapping[str, tuple[float, bool]] | None = None) -> None:
    from matplotlib.ticker import FixedLocator

    lim = 1.3
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal", adjustable="box")
    ticks = [-1.0, -0.5, 0.0, 0.5, 1.0]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.axhline(0.0, color="#BFBFBF", linewidth=0.5, zorder=0)
    ax.axvline(0.0, color="#BFBFBF", linewidth=0.5, zorder=0)
    for spine in ax.spines.values():
        spine.set_color("black")
        spine.set_linewidth(0.5)
    ax.tick_params(labelsize=9.6, colors="#4D4D4D", length=2.75, width=0.5)
    for axis, name in ((ax.xaxis, xlabel), (ax.yaxis, ylabel)):
        text, color = direction_label(name, flags or {})
        axis.set_label_text(text, fontsize=12 if text == name else 10.5)
        if color is not None:
            axis.label.set_color(color)
    ax.set_title(title, fontsize=14, fontweight="bold", y=TITLE_Y)


def _label(ax: Any, x: float, y: float, text: str, color: str, count: int = 1) -> Any:
    """A variable label just beyond the tip of (x, y), on the side it points to (placed for good
    by :func:`repel_labels` once the figure is laid out)."""
    r = float(np.hypot(x, y))
    ux, uy = (x / r, y / r) if r > 1e-12 else (1.0, 0.0)
    label = ax.text(x + 0.06 * ux, y + 0.06 * uy, text, fontsize=8, color=color,
                    ha="left" if ux >= 0 else "right", va="bottom" if uy >= 0 else "top",
                    clip_on=False)
    label.set_in_layout(False)  # labels never drive the layout (they stay inside the panel)
    label._dppca_tip = (x, y)  # for the placement and a leader line if the label has to move
    label._dppca_count = count  # how many variables the label names
    return label


def repel_labels(fig: Any, groups: Sequence[Sequence[Any]], renderer: Any = None) -> list[int]:
    """Place the tip labels of each group (one panel's labels, longest tip first) without
    overlaps, inside their panel, once the figure's layout is done (laid out here unless
    ``renderer`` comes from :func:`~dppca_dask.plots._style.lay_out`).

    Greedy and deterministic (:func:`~dppca_dask.plots._labels.place_labels`): each label takes
    the first free spot around its tip, nearest first; a label with no free spot is hidden.
    Returns, per group, how many variables the hidden labels named.
    """
    from dppca_dask.plots._labels import place_labels

    if not any(groups):
        return [0 for _ in groups]
    if renderer is None:
        renderer = lay_out(fig)
    return [place_labels(renderer, list(texts)) for texts in groups]


MAX_TIP_LABELS = 16
"""Vector and point panels label at most this many tips (the longest; nearby tips share one; a
label with no free spot is left out)."""
LABEL_WIDTH = 20
"""Variable labels of the vector and point panels are wrapped at this many characters."""


def short_name(name: str) -> str:
    """A variable name wrapped at :data:`LABEL_WIDTH` characters, at most two lines (then …)."""
    import textwrap

    lines = [line.replace("_ ", "_") for line in textwrap.wrap(
        name.replace("_", "_ "), LABEL_WIDTH, break_long_words=True)] or [name]
    return "\n".join(lines[:2]) + ("…" if len(lines) > 2 else "")


def group_text(names: list[str], width: int) -> str:
    """The label of tips that share one: as many names as fit in ``width`` characters ("V1, V2,
    V3"), then "+m" for the others; a single long name is wrapped (:func:`short_name`).

    >>> group_text(["X5", "X4", "X3"], 20), group_text(["alpha_long", "beta_lon", "c"], 20)
    ('X5, X4, X3', 'alpha_long, beta_lon +1')
    """
    shown, used = 1, len(names[0])
    while shown < len(names) and used + 2 + len(names[shown]) <= width:
        used += 2 + len(names[shown])
        shown += 1
    head = ", ".join(names[:shown]) if shown > 1 else short_name(names[0])
    return head + (f" +{len(names) - shown}" if len(names) > shown else "")


def _label_all(ax: Any, df: pd.DataFrame, tol: float = 0.09) -> None:
    """Label the longest tips (at most :data:`MAX_TIP_LABELS`); tips closer than ``tol`` share
    one label ("V1, V2 +3"); long names are wrapped (:data:`LABEL_WIDTH`)."""
    xy = df[["x", "y"]].to_numpy(dtype=np.float64)
    order = np.argsort(-np.hypot(xy[:, 0], xy[:, 1]), kind="stable")
    groups: list[tuple[float, float, list[str]]] = []
    for j in order:
        x, y, name = float(xy[j, 0]), float(xy[j, 1]), str(df.index[j])
        for gx, gy, names in groups:
            if np.hypot(gx - x, gy - y) < tol:
                names.append(name)
                break
        else:
            if len(groups) < MAX_TIP_LABELS:
                groups.append((x, y, [name]))
    texts = []
    for x, y, names in groups:
        texts.append(_label(ax, x, y, group_text(names, LABEL_WIDTH), "black", len(names)))
    ax._dppca_labels = texts  # placed once the whole figure is laid out
    ax._dppca_tips = xy  # labels keep off every tip where they can
    ax._dppca_unlabelled = len(df) - sum(len(g[2]) for g in groups)


def _legend(ax: Any, marker: str | None) -> None:
    from matplotlib.lines import Line2D

    style: dict[str, Any] = {"marker": marker, "markersize": 6} if marker else {}
    handles = [
        Line2D([], [], color=_PRIVATE, linestyle="-", label="Private", **style),
        Line2D([], [], color=_REFERENCE, linestyle="--", label="Non-private (not private)",
               markerfacecolor="none", **style),
    ]
    ax.legend(handles=handles, loc="lower left", fontsize=8, frameon=False)


def draw_vectors(ax: Any, df: pd.DataFrame, labels: tuple[str, str], stored: bool,
                 flags: Mapping[str, tuple[float, bool]] | None = None) -> None:
    """The loading vectors panel; ``flags`` (:func:`~dppca_dask.plots._style.direction_flags`)
    put each axis's angle bound in its label and grey out a direction that is not
    identifiable."""
    from matplotlib.patches import Circle, FancyArrowPatch

    ax.add_patch(Circle((0.0, 0.0), 1.0, fill=False, edgecolor="#4D4D4D", linewidth=0.6))
    for _, row in df.iterrows():
        if stored:
            ax.add_patch(FancyArrowPatch(
                (0.0, 0.0), (row["x_nonprivate"], row["y_nonprivate"]), arrowstyle="-|>",
                mutation_scale=9, color=_REFERENCE, linestyle="--", linewidth=0.9,
                label="nonprivate", shrinkA=0.0, shrinkB=0.0))
        ax.add_patch(FancyArrowPatch((0.0, 0.0), (row["x"], row["y"]), arrowstyle="-|>",
                                     mutation_scale=10, color=_PRIVATE, linewidth=1.2,
                                     label="private", shrinkA=0.0, shrinkB=0.0))
    _label_all(ax, df)
    _style_unit(ax, "Loading vectors", *labels, flags)
    if stored:
        _legend(ax, None)


def _draw_points(ax: Any, df: pd.DataFrame, labels: tuple[str, str], stored: bool,
                 flags: Mapping[str, tuple[float, bool]] | None = None) -> None:
    from matplotlib.patches import Circle

    ax.add_patch(Circle((0.0, 0.0), 1.0, fill=False, edgecolor="#BFBFBF", linewidth=0.5,
                        linestyle=":"))
    if stored:
        for _, row in df.iterrows():
            ax.plot([row["x"], row["x_nonprivate"]], [row["y"], row["y_nonprivate"]],
                    linestyle="--", color=_REFERENCE, linewidth=0.7)
        ax.scatter(df["x_nonprivate"], df["y_nonprivate"], s=30, facecolors="none",
                   edgecolors=_REFERENCE, linewidths=1.0, label="Non-private (not private)")
    ax.scatter(df["x"], df["y"], s=30, c=_PRIVATE, linewidths=0, label="Private", zorder=3)
    _label_all(ax, df)
    _style_unit(ax, "Loading points", *labels, flags)
    if stored:
        _legend(ax, "o")


HEATMAP_MAX_HEIGHT = 8.0
"""The heatmap panel is at most this tall (inches); its row labels thin out to fit."""


def _heat_font(rows: int, height: float) -> tuple[float, int]:
    """(font size, label every k-th row) so that row labels fit a panel ``height`` inches tall."""
    row_pt = 72.0 * max(height - 1.2, 1.0) / max(rows, 1)
    size = min(9.0, 0.8 * row_pt)
    step = 1
    while size < 6.0:
        step += 1
        size = min(9.0, 0.8 * row_pt * step)
    return size, step


def _draw_heatmap(ax: Any, df: pd.DataFrame, title: str, *, show_values: bool,
                  height: float, flags: Mapping[str, tuple[float, bool]] | None = None) -> Any:
    """The heatmap; with ``flags`` each column's tick gives its angle bound, and a direction
    that is not identifiable has a grey tick and a hatched column."""
    values = df.to_numpy(dtype=np.float64)
    image = ax.imshow(values, cmap="RdBu_r", vmin=-1.0, vmax=1.0, aspect="auto",
                      interpolation="nearest")
    size, step = _heat_font(df.shape[0], height)
    flags = flags or {}
    cols = [str(c) for c in df.columns]
    ticks = [f"{c}\n{angle_text(flags[c][0]).replace('no angle bound', 'no bound')}"
             if c in flags else c for c in cols]
    ax.set_xticks(range(df.shape[1]), ticks, fontsize=10 if not flags else 9)
    grey = np.array([c in flags and not flags[c][1] for c in cols])
    for tick, off in zip(ax.get_xticklabels(), grey, strict=True):
        if off:
            tick.set_color(NOT_IDENTIFIABLE)
    if grey.any():
        mask = np.zeros(values.shape, dtype=bool)
        mask[:, grey] = True
        hatch_cells(ax, mask, np.arange(values.shape[1] + 1) - 0.5,
                    np.arange(values.shape[0] + 1) - 0.5, color=NOT_IDENTIFIABLE)
    rows = list(range(0, df.shape[0], step))
    ax.set_yticks(rows, [_clip_name(str(df.index[i])) for i in rows], fontsize=size)
    ax.tick_params(length=0)
    if show_values:
        cell = min(size, 8.5)
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                v = values[i, j]
                ax.text(j, i, f"{v:.2f}".replace("-0.00", "0.00"), ha="center", va="center",
                        fontsize=cell, color="white" if abs(v) > 0.6 else "black")
    for spine in ax.spines.values():
        spine.set_color("black")
        spine.set_linewidth(0.5)
    ax.set_title(title, fontsize=14, fontweight="bold", y=TITLE_Y)
    return image


def _clip_name(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


def plot_loading(
    fit: Any,
    *,
    type: str | Sequence[str] = LOADING_PLOT_TYPES,
    heatmap_components: int | Sequence[int] = (1, 2, 3),
    variables: str | Sequence[str] | Sequence[int] = "all",
    axes: Sequence[int] = (1, 2),
    panel_size: float = 4.6,
) -> LoadingPlot:
    """Draw the loading panels of a :class:`~dppca_dask.LoadingResult` (post-processing).

    Parameters
    ----------
    fit
        A ``dp_loading`` result (or anything with ``directions``/``nonprivate`` like it).
    type
        ``"vector"``, ``"point"``, ``"heatmap"`` or several (always drawn in that order).
    heatmap_components
        1-based components for the heatmap; those beyond p are dropped (default PCs 1–3).
    variables
        ``"all"``, or variable names, or 1-based variable positions (rows to draw).
    axes
        The two 1-based components of the vector and point panels.
    panel_size
        Side of the vector and point panels in inches.

    Returns
    -------
    LoadingPlot
        ``.figure`` (all panels), ``.axes`` and ``.data`` per type, ``.loading`` (the fit).

    Examples
    --------
    >>> from dppca_dask import dp_loading, privacy_control
    >>> X = np.random.default_rng(0).normal(size=(60, 4))
    >>> out = dp_loading(X, privacy=privacy_control(eps=1, delta=1e-3),
    ...                  calibration="analytic", rng=1).plot()
    >>> sorted(out.axes), out.data["heatmap"].shape
    (['colorbar', 'heatmap', 'point', 'vector'], (4, 3))
    """
    from dppca_dask.plots._style import figure

    types = _parse_types(type)
    v = np.asarray(fit.directions.values, dtype=np.float64)
    ref_da = fit.nonprivate
    ref = None if ref_da is None else np.asarray(ref_da.values, dtype=np.float64)
    stored = ref is not None
    names = [str(x) for x in fit.directions["variable"].values]
    comps = [str(c) for c in fit.directions["component"].values]
    rows = _parse_variables(variables, names)
    data: dict[str, pd.DataFrame] = {}
    scatter = [t for t in types if t in ("vector", "point")]
    if scatter:
        if len(comps) < 2:
            raise bad_param("type", _OWNER, "'heatmap' only for a fit with one component", type)
        a, b = parse_axes(axes, _OWNER, len(comps))
        cols = (a - 1, b - 1)
        labels = (comps[cols[0]], comps[cols[1]])
        for t in scatter:
            data[t] = frame_xy(v, ref, rows, cols, names)
    if "heatmap" in types:
        rule = "a positive int or a sequence of positive ints (1-based components)"
        wanted = [c - 1 for c in _positive_ints(heatmap_components, "heatmap_components", rule)]
        keep = [c for c in dict.fromkeys(wanted) if c < len(comps)]
        if not keep:
            raise bad_param("heatmap_components", _OWNER, f"components among 1..{len(comps)}",
                            heatmap_components)
        index = pd.Index([names[r] for r in rows], name="variable")
        data["heatmap"] = pd.DataFrame(v[np.ix_(rows, keep)], index=index,
                                       columns=[comps[c] for c in keep])
        if ref is not None:  # stored
            data["heatmap_nonprivate"] = pd.DataFrame(ref[np.ix_(rows, keep)], index=index,
                                                      columns=[comps[c] for c in keep])

    flags = direction_flags(fit)
    heatmaps = [k for k in ("heatmap", "heatmap_nonprivate") if k in data]
    n_rows = len(rows)
    longest = max((len(_clip_name(names[r])) for r in rows), default=1)
    heat_height = min(max(panel_size, 0.2 * n_rows + 1.6), HEATMAP_MAX_HEIGHT)
    font, _ = _heat_font(n_rows, heat_height)
    label_in = 0.55 * font / 72.0 * longest + 0.3  # the row labels left of each heatmap
    heat_width = label_in + 0.6 + 0.62 * (data["heatmap"].shape[1] if heatmaps else 0)
    wide = max((len(names[r]) for r in rows), default=1) > 12
    side = panel_size + (0.8 if wide else 0.0)  # room for wrapped labels beyond the circle
    widths = [side + 0.5] * len(scatter) + [heat_width] * len(heatmaps)
    has_bar = bool(heatmaps)
    if has_bar:
        widths.append(0.35)
    height = max(side + 1.0, heat_height if heatmaps else 0.0) + 0.5
    fig = figure(sum(widths), height)
    grid = fig.add_gridspec(1, len(widths), width_ratios=widths)
    out_axes: dict[str, Any] = {}
    col = 0
    for t in scatter:
        ax = fig.add_subplot(grid[0, col])
        col += 1
        draw = draw_vectors if t == "vector" else _draw_points
        draw(ax, data[t], labels, stored, flags)
        out_axes[t] = ax
    image = None
    cell_in = (heat_height - 1.2) / max(n_rows, 1)
    show_values = (n_rows * (data["heatmap"].shape[1] if heatmaps else 0) <= 600
                   and cell_in >= 0.16)
    for key in heatmaps:
        ax = fig.add_subplot(grid[0, col])
        col += 1
        title = "Loading heatmap" if key == "heatmap" else "Non-private heatmap\n(not private)"
        image = _draw_heatmap(ax, data[key], title, show_values=show_values,
                              height=heat_height, flags=flags if key == "heatmap" else None)
        out_axes[key] = ax
    if image is not None:
        cax = fig.add_subplot(grid[0, col])
        bar = fig.colorbar(image, cax=cax)
        bar.set_label("Loading", fontsize=10)
        bar.set_ticks([-1.0, -0.5, 0.0, 0.5, 1.0])
        bar.ax.tick_params(labelsize=9)
        out_axes["colorbar"] = cax
    meta = getattr(fit, "metadata", None)
    caption = caption_line(meta, k=len(comps)) if meta else f"{len(comps)} released components"
    shown = ([*labels] if scatter else []) + (list(data["heatmap"].columns) if heatmaps else [])
    grey = direction_note(flags, shown, hatched=bool(heatmaps))
    extra = "" if grey is None else f"\n{grey}"
    hidden = [getattr(out_axes[t], "_dppca_unlabelled", 0) for t in scatter]
    note = _NOTE if stored else None
    # laid out with the widest footer the labels can need (every tip unlabelled): the final
    # count never adds a line, so the layout the labels are placed on stands
    footer(fig, caption + _unlabelled(len(rows) if scatter else max(hidden, default=0))
           + extra, note)
    renderer = lay_out(fig)
    dropped = repel_labels(fig, [out_axes[t]._dppca_labels for t in scatter], renderer)
    most = max((h + d for h, d in zip(hidden, dropped, strict=True)), default=0)
    footer(fig, caption + _unlabelled(most) + extra, note)
    finish(fig, renderer)
    return LoadingPlot(fit, fig, out_axes, data)


def _unlabelled(count: int) -> str:
    return f" · tip labels: the longest tips ({count} unlabelled)" if count else ""


register_plot("loading", plot_loading)  # the loading results' .plot()
