"""Score plots of a ``dp_score`` fit (docs/spec/SPEC_dppca.md §9.1–9.2), drawn with matplotlib.

Rows, each left-aligned on one grid (no blank panels):

* histograms: ungrouped, one row [non-private scores | non-private histogram | one panel per
  mechanism]; grouped, small multiples -- one panel per group (at most five a row) for each
  histogram, after a row with the non-private scores -- instead of overlaid groups;
* one sample row per sampling method: [non-private sample | one panel per mechanism].

Non-private panels appear only when the fit stored its references (``non_private=True``), are
titled "… (not private)", and the figure's footer then says it is not a private release. Cells are
drawn as one image per panel on a white → ``color`` scale (``hist_alpha_range`` gives the colour's
share at the pooled minimum and maximum probability) with one colour bar for all of them.
Mechanisms are spelled out in titles ("Gaussian histogram", "sparse (stability) histogram",
"two-sided geometric histogram"). Panels show exactly the private frame, at 1:1
aspect unless its radii differ by more than :data:`~dppca_dask.plots._style.ASPECT_FACTOR`
(:func:`~dppca_dask.plots._style.frame_panel`). Every figure carries a caption line (n, ε, δ) and
the group legend by default. Samples come from
:meth:`~dppca_dask.results.score.ScoreResult.sample`, i.e. only from released probabilities (and
from the non-private histogram for its own panels).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import pandas as pd

from dppca_dask._typing import RngLike
from dppca_dask._validation import bad_param, parse_real
from dppca_dask.plots._style import (
    HATCH,
    MECHANISM_NAMES,
    SavedFigure,
    caption_line,
    figure,
    finish,
    footer,
    frame_panel,
    group_colors,
    hatch_cells,
    mechanism_title,
    style_panel,
    wrap_title,
)
from dppca_dask.results.plotters import register_plot
from dppca_dask.results.sampling import SamplingLike

__all__ = ["PRIVATE_PLOTS", "ScorePlot", "ScorePlotControl", "plot_score", "score_plot_control"]

PRIVATE_PLOTS = ("histogram", "sample")
TITLE_KEYS = ("scatter", "nonprivate", "add", "sparse", "geometric")
_DEFAULT_TITLES = {"scatter": "Non-private scores (not private)",
                   **{t: mechanism_title(t) for t in ("nonprivate", "add", "sparse",
                                                      "geometric")}}
_NOTE = "Shows non-private reference panels: this figure is not a private release."


@dataclass(frozen=True)
class ScorePlotControl:
    """Plot options (SPEC §9.1 ``score_plot_control``); build it with :func:`score_plot_control`."""

    color: str = "#6A5ACD"
    scatter_alpha: float = 0.6
    scatter_size: float = 1.8
    hist_alpha_range: tuple[float, float] = (0.0, 1.0)
    base_size: float = 12.0
    title_size: float = 14.0
    titles: Mapping[str, str] = field(default_factory=lambda: dict(_DEFAULT_TITLES))
    xlab: str | None = None
    ylab: str | None = None
    group_colors: Mapping[str, str] | None = None
    group_ncol: int = 3
    show_group_legend: bool = True
    panel_size: float = 3.4

    def __post_init__(self) -> None:
        """The numeric options checked here too, so a hand-built control fails early."""
        owner = "ScorePlotControl"
        parse_real(self.scatter_alpha, "scatter_alpha", owner, low=0, high=1, low_open=False,
                   high_open=False)
        for name in ("scatter_size", "base_size", "title_size", "panel_size"):
            parse_real(getattr(self, name), name, owner, low=0)
        pair = self.hist_alpha_range
        if not (isinstance(pair, tuple) and len(pair) == 2
                and all(isinstance(v, int | float) and 0 <= v <= 1 for v in pair)
                and pair[0] <= pair[1]):
            raise bad_param("hist_alpha_range", owner, "a non-decreasing pair within [0, 1]",
                            pair)
        if isinstance(self.group_ncol, bool) or not isinstance(self.group_ncol, int) \
                or self.group_ncol < 1:
            raise bad_param("group_ncol", owner, "a positive int", self.group_ncol)


def _string(value: Any, name: str, owner: str) -> str:
    if not isinstance(value, str):
        raise bad_param(name, owner, "a single str", value)
    return value


def _color(value: Any, name: str, owner: str) -> str:
    from matplotlib.colors import is_color_like

    if not isinstance(value, str) or not is_color_like(value):
        raise bad_param(name, owner, "a valid colour (a name or a hex code)", value)
    return value


def score_plot_control(**options: Any) -> ScorePlotControl:
    """Score plot options; unknown names are an error.

    Options: ``color`` (#6A5ACD), ``scatter_alpha`` (0.6), ``scatter_size`` (1.8),
    ``hist_alpha_range`` ((0, 1)), ``base_size`` (12), ``title_size`` (14), ``titles`` (a dict
    overriding any of "scatter", "nonprivate", "add", "sparse", "geometric"), ``xlab``/``ylab``
    (default: the axis labels "PC{a}", "PC{b}"), ``group_colors`` (dict level → colour; missing
    levels come from the palette), ``group_ncol`` (3, unused), ``show_group_legend`` (True: the same default as the CLI and ``dp_pca`` plots),
    ``panel_size`` (3.4 inches per panel).

    Examples
    --------
    >>> score_plot_control(scatter_alpha=0.3).scatter_alpha
    0.3
    """
    owner = "score_plot_control"
    known = {f.name for f in fields(ScorePlotControl)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise bad_param(", ".join(unknown), owner, "one of the options " + ", ".join(sorted(known)),
                        unknown)
    out: dict[str, Any] = {}
    for name, value in options.items():
        if name == "color":
            out[name] = _color(value, name, owner)
        elif name == "scatter_alpha":
            out[name] = parse_real(value, name, owner, low=0, high=1, low_open=False,
                                   high_open=False)
        elif name in ("scatter_size", "base_size", "title_size", "panel_size"):
            out[name] = parse_real(value, name, owner, low=0)
        elif name == "hist_alpha_range":
            pair = list(value) if isinstance(value, Sequence) and not isinstance(value, str) \
                else None
            ok = pair is not None and len(pair) == 2 and all(
                isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1
                for v in pair) and pair[0] <= pair[1]
            if not ok:
                raise bad_param(name, owner, "a non-decreasing pair within [0, 1]", value)
            assert pair is not None  # ok implies a pair
            out[name] = (float(pair[0]), float(pair[1]))
        elif name == "titles":
            if not isinstance(value, Mapping) or any(k not in TITLE_KEYS for k in value):
                raise bad_param(name, owner, f"a dict keyed by {TITLE_KEYS}", value)
            out[name] = {**_DEFAULT_TITLES,
                         **{k: _string(v, f"titles[{k!r}]", owner) for k, v in value.items()}}
        elif name in ("xlab", "ylab"):
            out[name] = None if value is None else _string(value, name, owner)
        elif name == "group_colors":
            if value is not None and not isinstance(value, Mapping):
                raise bad_param(name, owner, "None or a dict mapping group levels to colours",
                                value)
            out[name] = None if value is None else {
                str(k): _color(v, f"group_colors[{k!r}]", owner) for k, v in value.items()}
        elif name == "group_ncol":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise bad_param(name, owner, "a positive int", value)
            out[name] = value
        else:  # show_group_legend
            if not isinstance(value, bool):
                raise bad_param(name, owner, "a bool (True or False)", value)
            out[name] = value
    return replace(ScorePlotControl(), **out)


@dataclass(frozen=True)
class ScorePlot(SavedFigure):
    """A drawn score plot: the figure, its panels, the synthetic samples and the group colours.

    ``axes`` mirrors the R return value: ``"scatter"``, ``"nonprivate"``, ``"add"``,
    ``"sparse"`` (histogram panels) and ``"sample"`` → ``{target: {method: Axes}}``.
    ``samples`` is ``{target: {method: DataFrame(pc_x, pc_y[, group])}}`` (empty without
    "sample").
    """

    figure: Any
    axes: dict[str, Any]
    samples: dict[str, dict[str, pd.DataFrame]]
    group_colors: dict[str, str] | None


def _parse_private_plot(value: Any, owner: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    rule = "'histogram', 'sample', or a non-empty sequence of them"
    if not isinstance(items, Sequence) or not items or any(
            not isinstance(v, str) or v not in PRIVATE_PLOTS for v in items):
        raise bad_param("private_plot", owner, rule, value)
    return tuple(p for p in PRIVATE_PLOTS if p in items)


def _alphas(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Linear map of [min, max] of ``values`` onto [lo, hi] (a constant maps to the midpoint)."""
    vmin, vmax = float(np.min(values)), float(np.max(values))
    if not vmax > vmin:
        return np.full(values.shape, (lo + hi) / 2.0)
    return lo + (hi - lo) * (values - vmin) / (vmax - vmin)


def probability_cmap(color: str, alpha_range: tuple[float, float]) -> Any:
    """White → ``color``, restricted to ``alpha_range`` (the colour's share at min and max)."""
    from matplotlib.colors import LinearSegmentedColormap, to_rgb

    c = np.array(to_rgb(color))
    lo, hi = alpha_range
    return LinearSegmentedColormap.from_list(
        "dppca_probability", [tuple(1.0 - lo + lo * c), tuple(1.0 - hi + hi * c)])


def _draw_histogram(ax: Any, grid: np.ndarray, cmap: Any, norm: Any, xb: np.ndarray,
                    yb: np.ndarray) -> Any:
    """One image of the cells (``grid`` is m_y x m_x; equal-width breaks): O(cells), so the
    largest allowed bins draw in about a second."""
    return ax.imshow(grid, origin="lower", extent=(xb[0], xb[-1], yb[0], yb[-1]), cmap=cmap,
                     norm=norm, interpolation="nearest", resample=False)


def _draw_points(ax: Any, frame: pd.DataFrame, ctl: ScorePlotControl,
                 colors: Mapping[str, str] | None) -> None:
    size = (ctl.scatter_size * 1.6) ** 2  # ggplot2 size (mm-ish) to matplotlib points²
    if colors is None or "group" not in frame:
        ax.scatter(frame["pc_x"], frame["pc_y"], s=size, c=ctl.color, alpha=ctl.scatter_alpha,
                   linewidths=0, rasterized=len(frame) > 5000)
        return
    for level, color in colors.items():
        part = frame[frame["group"] == level]
        ax.scatter(part["pc_x"], part["pc_y"], s=size, c=color, alpha=ctl.scatter_alpha,
                   linewidths=0, rasterized=len(frame) > 5000)


def plot_score(
    fit: Any,
    *,
    private_plot: str | Sequence[str] = ("histogram", "sample"),
    sampling: SamplingLike = None,
    group_weights: str = "observed",
    control: ScorePlotControl | Mapping[str, Any] | None = None,
    rng: RngLike = None,
    samples: Mapping[str, Mapping[str, pd.DataFrame]] | None = None,
) -> ScorePlot:
    """Draw the score panels of a :class:`~dppca_dask.results.score.ScoreResult`.

    Parameters
    ----------
    fit
        A ``dp_score`` result.
    private_plot
        ``"histogram"``, ``"sample"`` or both (default).
    sampling
        A :func:`~dppca_dask.sampling_control` for the sample panels (default
        ``sampling_control()``: "uniform", n points).
    group_weights
        How grouped samples split the total (see :meth:`ScoreResult.sample`).
    control
        A :func:`score_plot_control` or a dict of its options.
    rng
        Generator for the synthetic samples (post-processing; no budget).
    samples
        Samples already drawn by :meth:`ScoreResult.sample` with the same ``sampling`` (so that
        several figures show the same points); drawn here when ``None``.

    Returns
    -------
    ScorePlot
        ``.figure``, ``.axes``, ``.samples``, ``.group_colors``; ``.save(path)``.

    Examples
    --------
    >>> from dppca_dask import dp_score, privacy_control
    >>> X = np.random.default_rng(0).normal(size=(300, 3)) * [3.0, 1.0, 0.5]
    >>> fit = dp_score(X, privacy=privacy_control(eps=4, delta=1e-4), rng=1)
    >>> out = fit.plot(rng=2)
    >>> sorted(out.axes), len(out.samples["geometric"]["uniform"])
    (['colorbar', 'geometric', 'sample'], 300)
    """
    owner = "plot"
    if getattr(fit, "kind", None) != "score":  # duck-typed: plots do not import result types
        raise bad_param("fit", "plot_score", "a ScoreResult from dp_score()", type(fit).__name__)
    panels = _parse_private_plot(private_plot, owner)
    if control is None:
        ctl = ScorePlotControl()
    elif isinstance(control, ScorePlotControl):
        ctl = control
    elif isinstance(control, Mapping):
        ctl = score_plot_control(**control)
    else:
        raise bad_param("control", owner, "a ScorePlotControl or a dict of its options", control)
    from dppca_dask.results.sampling import as_sampling_control

    sampler = as_sampling_control(sampling, owner)
    stored = fit.nonprivate_probability is not None
    targets = (("nonprivate",) if stored else ()) + fit.methods
    drawn: dict[str, dict[str, pd.DataFrame]]
    if "sample" not in panels:
        drawn = {}
    elif samples is None:
        drawn = fit.sample(sampler, targets=targets, group_weights=group_weights, rng=rng)
    else:
        missing = [(t, m) for t in targets for m in sampler.method
                   if m not in samples.get(t, {})]
        if missing:
            raise bad_param("samples", owner, "samples for every target and sampling method "
                            f"(missing {missing})", sorted(samples))
        drawn = {t: dict(samples[t]) for t in targets}

    levels = fit.groups
    colors = group_colors(levels, ctl.group_colors) if levels is not None else None
    ncols = min(len(levels), _MAX_COLUMNS) if levels is not None else 1
    rows: list[list[tuple[str, Any]]] = []
    if "histogram" in panels:
        if levels is None:
            rows.append(([("scatter", None)] if stored else [])
                        + [("hist", (t, None)) for t in targets])
        else:  # small multiples: one panel per group, a row (or more) per histogram
            if stored:
                rows.append([("scatter", None)])
            for t in targets:
                cells = [("hist", (t, g)) for g in range(len(levels))]
                rows += [cells[i:i + ncols] for i in range(0, len(cells), ncols)]
    if "sample" in panels:
        if stored and "histogram" not in panels:
            rows.append([("scatter", None)])
        rows += [[("sample", (t, m)) for t in targets] for m in sampler.method]

    ncol = max(len(r) for r in rows)
    xlim, ylim = fit.frame.xlim, fit.frame.ylim
    width, height, equal = frame_panel(xlim, ylim, ctl.panel_size)
    legend = colors is not None and ctl.show_group_legend and any(
        kind in ("scatter", "sample") for row in rows for kind, _ in row)
    hists = [what for row in rows for kind, what in row if kind == "hist"]
    bar = bool(hists)
    fig = figure((width + 0.9) * ncol + (1.3 if legend else 0.0) + (1.1 if bar else 0.0),
                 (height + 1.1) * len(rows) + 0.6)
    grid = fig.add_gridspec(len(rows), ncol)
    xlab = ctl.xlab if ctl.xlab is not None else fit.labels[0]
    ylab = ctl.ylab if ctl.ylab is not None else fit.labels[1]
    xb, yb = fit.x_breaks, fit.y_breaks
    observed = fit.observed_scores
    grids = {t: fit._grid(t) for t in dict.fromkeys(t for t, _ in hists)}
    norm = None
    if bar:
        from matplotlib.colors import Normalize

        pooled = np.concatenate([grids[t][g or 0].ravel() for t, g in hists])
        lo, hi = float(np.min(pooled)), float(np.max(pooled))
        norm = Normalize(lo, hi if hi > lo else lo + 1e-12)
    cmap = probability_cmap(ctl.color, ctl.hist_alpha_range)
    uncertain = uncertain_cells(fit)
    hatched = False
    axes: dict[str, Any] = {}
    image = None
    for r, row in enumerate(rows):
        for c, (kind, what) in enumerate(row):
            ax = fig.add_subplot(grid[r, c])
            if kind == "scatter":
                title = ctl.titles["scatter"]
                _draw_points(ax, observed, ctl, colors)
                axes["scatter"] = ax
            elif kind == "hist":
                target, g = what
                title = ctl.titles[target]
                image = _draw_histogram(ax, grids[target][g or 0], cmap, norm, xb, yb)
                noise = uncertain.get(target)
                if noise is not None and hatch_cells(ax, noise[g or 0] & (grids[target][g or 0]
                                                                           > 0), xb, yb,
                                                     color=UNCERTAIN) is not None:
                    hatched = True
                if g is None:
                    axes[target] = ax
                else:
                    title = f"{title}: group {levels[g]}"
                    axes.setdefault(target, {})[levels[g]] = ax
            else:
                target, method = what
                title = f"{method.capitalize()} sample of the {_sample_name(target)}"
                _draw_points(ax, drawn[target][method], ctl, colors)
                axes.setdefault("sample", {}).setdefault(target, {})[method] = ax
            style_panel(ax, xlim=xlim, ylim=ylim, title=wrap_title(title, width, ctl.title_size),
                        xlabel=xlab, ylabel=ylab, base_size=ctl.base_size,
                        title_size=ctl.title_size, equal=equal)
    if image is not None:
        hist_axes = [ax for ax in fig.axes if ax.images]
        cb = fig.colorbar(image, ax=hist_axes, location="right", shrink=0.9, aspect=30)
        cb.set_label("cell probability", fontsize=ctl.base_size * 0.8)
        cb.ax.tick_params(labelsize=ctl.base_size * 0.7)
        axes["colorbar"] = cb.ax
    if legend:
        from matplotlib.patches import Patch

        assert colors is not None  # legend implies group colours

        handles = [Patch(facecolor=col, label=lvl) for lvl, col in colors.items()]
        fig.legend(handles=handles, title="Group", loc="outside right center",
                   fontsize=ctl.base_size * 0.8, title_fontsize=ctl.base_size, frameon=False)
    if hatched and "colorbar" in axes:
        from matplotlib.patches import Patch

        level = fit.dataset["count_lower"].attrs.get("interval_level", 0.95)
        axes["colorbar"].legend(
            handles=[Patch(facecolor="white", edgecolor=UNCERTAIN, hatch=HATCH,
                           label=f"hatched: shaded,\nbut the cell's\n{100 * float(level):g}% "
                                 "interval\nreaches 0:\nindistinguishable\nfrom an empty\n"
                                 "cell (noise,\nnot sampling)")],
            loc="upper left", bbox_to_anchor=(-0.6, -0.03), fontsize=ctl.base_size * 0.62,
            frameon=False, handlelength=1.6, handleheight=1.6, borderaxespad=0.0)
    footer(fig, caption_line(fit.metadata), _NOTE if stored else None)
    finish(fig)
    return ScorePlot(fig, axes, drawn, colors)


UNCERTAIN = "#5A5A5A"
"""The hatch colour of shaded cells that are indistinguishable from an empty cell."""


def uncertain_cells(fit: Any) -> dict[str, np.ndarray]:
    """Per private mechanism: (group, m_y, m_x) booleans, True where the interval of the
    noise-free cell count reaches 0 (indistinguishable from an empty cell; the summary's rule);
    empty for a store written before the intervals."""
    ds = fit.dataset
    if "count_lower" not in ds:
        return {}
    out = {}
    for target in fit.methods:
        lower = np.asarray(ds["count_lower"].sel(mechanism=target).values, dtype=np.float64)
        if fit.groups is None:
            lower = lower[None]
        if not np.isnan(lower).all():
            out[target] = ~(lower > 0)
    return out


_MAX_COLUMNS = 5
"""Grouped histograms are small multiples, at most this many panels a row."""


def _sample_name(target: str) -> str:
    name = MECHANISM_NAMES[target]
    return f"{name} (not private)" if target == "nonprivate" else name


register_plot("score", plot_score)  # the score results' .plot()
