"""Scree and PVE plot of a ``dp_scree`` fit (docs/spec/SPEC_dppca.md §5.6), drawn with matplotlib.

One panel against the component index 1..k (a tick at every integer): the non-private reference
first -- only when the fit stored it, labelled as not private, and then the figure's footer says
that it is not a private release -- then one line with points per method. The PVE axis is the
share of the variance of the k released components (not of the total variance), with k; the
footer's caption line gives n, ε, δ and k. Defaults follow the R
package's ``scree_plot_control``: titles "DP PVE Plot"/"DP Scree Plot", colours black / red /
forestgreen / blue, filled circle / triangle / square / diamond markers, a frameless legend at the
top right; y-limits are the range of the finite values padded by 4% (PVE floored at 0).
matplotlib is imported inside the functions; figures are built without pyplot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from dppca_dask._validation import bad_param, parse_real
from dppca_dask.errors import ParameterError
from dppca_dask.plots._style import TITLE_Y
from dppca_dask.results.plotters import register_plot

__all__ = ["SERIES", "ScreePlotControl", "interval_bands", "plot_scree", "scree_plot_control",
           "scree_ylim"]

SERIES = ("nonprivate", "clipped", "pmwm", "huber")
_OWNER = "scree_plot_control"


def _series(values: Mapping[str, Any]) -> dict[str, Any]:
    return dict(values)


@dataclass(frozen=True)
class ScreePlotControl:
    """Plot options (R's ``scree_plot_control``); build it with :func:`scree_plot_control`."""

    title: str | None = None
    xlab: str = "Component"
    ylab: str | None = None
    labels: Mapping[str, str] = field(default_factory=lambda: _series(
        {"nonprivate": "Non-private (not private)", "clipped": "Clipped", "pmwm": "PMWM",
         "huber": "Huber"}))
    colors: Mapping[str, str] = field(default_factory=lambda: _series(
        {"nonprivate": "black", "clipped": "red", "pmwm": "forestgreen", "huber": "blue"}))
    lty: Mapping[str, str] = field(default_factory=lambda: _series(
        dict.fromkeys(SERIES, "-")))
    pch: Mapping[str, str] = field(default_factory=lambda: _series(
        {"nonprivate": "o", "clipped": "^", "pmwm": "s", "huber": "D"}))
    lwd: float = 1.0
    point_cex: float = 1.0
    cex_main: float = 1.5
    cex_lab: float = 1.2
    cex_axis: float = 1.1
    cex_legend: float = 1.1
    width: float = 7.0
    height: float = 5.0

    def __post_init__(self) -> None:
        """The sizes checked here too, so a hand-built control fails early."""
        for name in ("lwd", "point_cex", "cex_main", "cex_lab", "cex_axis", "cex_legend",
                     "width", "height"):
            parse_real(getattr(self, name), name, "ScreePlotControl", low=0.0)


_KEYED = ("labels", "colors", "lty", "pch")
_SIZES = ("lwd", "point_cex", "cex_main", "cex_lab", "cex_axis", "cex_legend", "width", "height")


def scree_plot_control(**options: Any) -> ScreePlotControl:
    """Validated plot options; series-keyed options override only the keys given.

    Parameters
    ----------
    **options
        ``title``, ``xlab``, ``ylab`` (strings); ``labels``, ``colors``, ``lty``, ``pch``
        (dicts keyed by ``nonprivate``, ``clipped``, ``pmwm``, ``huber``); positive sizes
        ``lwd``, ``point_cex``, ``cex_main``, ``cex_lab``, ``cex_axis``, ``cex_legend``,
        ``width``, ``height`` (inches).

    Examples
    --------
    >>> scree_plot_control(colors={"clipped": "orange"}).colors["clipped"]
    'orange'
    """
    base = ScreePlotControl()
    known = {f.name for f in fields(ScreePlotControl)}
    updates: dict[str, Any] = {}
    for name, value in options.items():
        if name not in known:
            raise ParameterError(f"{name!r} is not an option of {_OWNER} (its options are "
                                 f"{', '.join(sorted(known))}).")
        if name in ("title", "xlab", "ylab"):
            if not (isinstance(value, str) or (value is None and name != "xlab")):
                raise bad_param(name, _OWNER, "a single str", value)
            updates[name] = value
        elif name in _KEYED:
            updates[name] = _keyed(name, value, getattr(base, name))
        else:
            updates[name] = parse_real(value, name, _OWNER, low=0.0)
    return replace(base, **updates)


def _keyed(name: str, value: Any, default: Mapping[str, str]) -> dict[str, str]:
    rule = "a dict of str keyed by 'nonprivate', 'clipped', 'pmwm' and/or 'huber'"
    if not isinstance(value, Mapping) or any(k not in SERIES for k in value):
        raise bad_param(name, _OWNER, rule, value)
    if any(not isinstance(v, str) for v in value.values()):
        raise bad_param(name, _OWNER, rule, value)
    if name == "colors":
        from matplotlib.colors import is_color_like

        bad = [v for v in value.values() if not is_color_like(v)]
        if bad:
            raise bad_param(name, _OWNER, "a dict of valid matplotlib colours", bad[0])
    return {**default, **value}


def scree_ylim(values: np.ndarray, *, pve: bool) -> tuple[float, float]:
    """The range of the finite values padded by 4% of the span (SPEC §5.6).

    A zero span pads by 0.05·|y| (0.5 if y = 0); PVE floors the lower limit at 0; no finite
    value gives (0, 1).

    Examples
    --------
    >>> scree_ylim(np.array([0.5, 0.3]), pve=True)
    (0.292, 0.508)
    >>> scree_ylim(np.array([2.0, 2.0]), pve=False)
    (1.9, 2.1)
    """
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return 0.0, 1.0
    lo, hi = float(finite.min()), float(finite.max())
    span = hi - lo
    pad = 0.04 * span if span > 0 else (0.05 * abs(lo) if lo != 0 else 0.5)
    lo, hi = lo - pad, hi + pad
    if pve:
        lo = max(lo, 0.0)
    return round(lo, 12), round(hi, 12)


def plot_scree(fit: Any, *, type: str = "pve", control: Any = None, ax: Any = None) -> Any:
    """Draw the scree (``type="scree"``) or PVE (``"pve"``, default) curves of ``fit``.

    Parameters
    ----------
    fit
        A :class:`~dppca_dask.results.scree.ScreeResult`.
    type
        ``"pve"`` or ``"scree"``.
    control
        A :class:`ScreePlotControl`, a dict of :func:`scree_plot_control` options, or ``None``.
    ax
        Draw into this matplotlib Axes instead of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator

    if type not in ("pve", "scree"):
        raise bad_param("type", "plot", "a str among {'pve', 'scree'}", type)
    if control is None:
        ctl = ScreePlotControl()
    elif isinstance(control, ScreePlotControl):
        ctl = control
    elif isinstance(control, Mapping):
        ctl = scree_plot_control(**control)
    else:
        raise bad_param("control", "plot", "a ScreePlotControl or a dict of its options", control)
    own = ax is None
    if ax is None:
        fig = Figure(figsize=(ctl.width, ctl.height), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    series: list[tuple[str, np.ndarray]] = []
    reference = fit.nonprivate
    if reference is not None:
        series.append(("nonprivate", np.asarray(reference[type].values, dtype=np.float64)))
    values = fit.pve if type == "pve" else fit.scree
    for name in fit.methods:
        series.append((name, np.asarray(values.sel(mechanism=name).values, dtype=np.float64)))
    idx = np.arange(1, fit.k + 1)
    base = 10.0
    bands = interval_bands(fit, type)
    private = [name for name, _ in series if name in bands]
    extent = [ys for _, ys in series]
    noisy: str | None = None  # the marker of the first series with a hollow point
    for name, ys in series:
        ax.plot(idx, ys, linestyle=ctl.lty[name], marker=ctl.pch[name], color=ctl.colors[name],
                linewidth=ctl.lwd, markersize=6.0 * ctl.point_cex, label=ctl.labels[name])
        if name not in bands:
            continue
        lower, upper, noise = bands[name]
        shift = _DODGE * (private.index(name) - (len(private) - 1) / 2.0)
        _draw_bars(ax, idx + shift, lower, upper, ctl.colors[name])
        if noise.any():  # hollow: the interval reaches 0
            noisy = noisy or ctl.pch[name]
            ax.scatter(idx[noise], ys[noise], s=(6.0 * ctl.point_cex) ** 2,
                       marker=ctl.pch[name], facecolors="white", edgecolors=ctl.colors[name],
                       linewidths=1.2, zorder=3)
        extent += [lower, upper]
    ax.set_ylim(*scree_ylim(np.concatenate(extent), pve=type == "pve"))
    ax.set_xlim(0.75, fit.k + 0.25)
    ax.xaxis.set_major_locator(FixedLocator(idx.tolist()))
    title = ctl.title or ("DP PVE Plot" if type == "pve" else "DP Scree Plot")
    ylab = ctl.ylab or (f"Share of the variance of the\nk = {fit.k} released components"
                        if type == "pve" else "Scree value")
    ax.set_title(title, fontsize=base * ctl.cex_main, fontweight="bold", y=TITLE_Y)
    ax.set_xlabel(ctl.xlab, fontsize=base * ctl.cex_lab)
    ax.set_ylabel(ylab, fontsize=base * ctl.cex_lab)
    ax.tick_params(labelsize=base * ctl.cex_axis)
    handles, _ = ax.get_legend_handles_labels()
    if bands:
        from matplotlib.lines import Line2D

        level = _level(fit)
        handles.append(Line2D([], [], color="#4D4D4D", marker="_", markersize=9,
                              linestyle="none", markeredgewidth=1.0,
                              label=f"{level} interval of the noise-free value\n"
                                    "(the mechanism's noise, not sampling)"))
        if noisy is not None:
            handles.append(Line2D([], [], color="#4D4D4D", marker=noisy, markerfacecolor="white",
                                  linestyle="none", markersize=6.0 * ctl.point_cex,
                                  label="hollow: interval reaches 0,\n"
                                        "indistinguishable from noise"))
    ax.legend(handles=handles, loc="upper right", frameon=False, fontsize=base * ctl.cex_legend)
    if own:  # drawn into another figure's axes: that figure has its own footer and layout
        from dppca_dask.plots._style import caption_line, finish, footer

        footer(fig, caption_line(fit.metadata, k=int(fit.k)),
               _NOTE if reference is not None else None)
        finish(fig)
    return fig


_NOTE = "Shows the non-private reference: this figure is not a private release."
_DODGE = 0.08
"""Horizontal shift between the interval bars of several mechanisms at one component."""


def interval_bands(fit: Any, type: str) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per mechanism with intervals: (lower, upper, reaches 0) of the plotted values.

    ``reaches 0``: the interval of the noise-free *scree value* reaches 0 -- the component is
    indistinguishable from noise (the summary's rule); the PVE plot marks the same components.
    Mechanisms without intervals (huber; a store written before the intervals) have none.
    """
    ds = getattr(fit, "dataset", None)
    if ds is None or f"{type}_lower" not in ds or f"{type}_upper" not in ds:
        return {}
    out = {}
    for name in fit.methods:
        lower = np.asarray(ds[f"{type}_lower"].sel(mechanism=name).values, dtype=np.float64)
        upper = np.asarray(ds[f"{type}_upper"].sel(mechanism=name).values, dtype=np.float64)
        if np.isnan(lower).all():
            continue
        zero = ds["scree_lower"].sel(mechanism=name).values if "scree_lower" in ds else lower
        out[name] = (lower, upper, np.asarray(zero, dtype=np.float64) <= 0.0)
    return out


def _level(fit: Any) -> str:
    level = fit.dataset["scree_lower"].attrs.get("interval_level", 0.95)
    return f"{100 * float(level):g}%"


def _draw_bars(ax: Any, x: np.ndarray, lower: np.ndarray, upper: np.ndarray, color: str) -> None:
    """Vertical interval bars with caps, as one collection (no lines in the legend)."""
    from matplotlib.collections import LineCollection

    ok = np.isfinite(lower) & np.isfinite(upper)
    cap = 0.12
    segments = [((xi, lo), (xi, hi)) for xi, lo, hi in zip(x[ok], lower[ok], upper[ok],
                                                            strict=True)]
    segments += [((xi - cap, v), (xi + cap, v)) for xi, lo, hi in zip(
        x[ok], lower[ok], upper[ok], strict=True) for v in (lo, hi)]
    ax.add_collection(LineCollection(segments, colors=color, linewidths=0.9, alpha=0.75,
                                     zorder=1.5), autolim=False)


register_plot("scree", plot_scree)  # the scree results' .plot()
