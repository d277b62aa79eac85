"""The figure of a ``dp_covariance`` release (issue 17): three heatmaps, drawn with matplotlib.

* ``"covariance"`` -- the released Σ̂ on a diverging palette symmetric about 0 (±max|Σ̂_jk|);
* ``"correlation"`` -- Σ̂_jk / sqrt(Σ̂_jj Σ̂_kk) over [−1, 1] (post-processing; a variance ≤ 0
  leaves its row and column blank);
* ``"weights"`` -- which entries a mechanism measured, coloured by log10 of their combined
  precision λ_jk = Σ 1/σ² (raw units); unmeasured entries are grey.

Variable labels thin out (every k-th) beyond about 40 variables and are cut at 40 characters.
The footer's caption line gives n, ε, δ and ρ. Everything shown is the release or
post-processing of it (``clipped_count``, NOT PRIVATE, is never drawn).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dppca_dask._validation import bad_param
from dppca_dask.plots._style import (
    TITLE_Y,
    SavedFigure,
    caption_line,
    figure,
    finish,
    footer,
    hatch_cells,
)
from dppca_dask.results.plotters import register_plot

__all__ = ["COVARIANCE_PANELS", "CovariancePlot", "plot_covariance", "zero_entries"]

COVARIANCE_PANELS = ("covariance", "correlation", "weights")
_TITLES = {"covariance": "Released covariance", "correlation": "Implied correlation",
           "weights": "Measured entries\n(log10 precision)"}


@dataclass(frozen=True)
class CovariancePlot(SavedFigure):
    """A drawn covariance plot: ``figure`` and ``axes`` keyed by panel."""

    fit: Any
    figure: Any
    axes: dict[str, Any]


def _ticks(ax: Any, names: Sequence[str]) -> None:
    p = len(names)
    step = max(1, int(np.ceil(p / 40)))
    size = 9.0 if p <= 20 else 7.0
    pos = list(range(0, p, step))
    labels = [names[i] if len(names[i]) <= 40 else names[i][:39] + "…" for i in pos]
    ax.set_xticks(pos, labels, rotation=90, fontsize=size)
    ax.set_yticks(pos, labels, fontsize=size)
    ax.tick_params(length=0)


def plot_covariance(fit: Any, *, panels: str | Sequence[str] = COVARIANCE_PANELS
                    ) -> CovariancePlot:
    """Heatmaps of a :class:`~dppca_dask.results.covariance.CovarianceResult` (post-processing).

    Parameters
    ----------
    fit
        A ``dp_covariance`` result.
    panels
        Any of ``"covariance"``, ``"correlation"``, ``"weights"`` (default all three, in that
        order).

    Returns
    -------
    CovariancePlot
        ``.figure``, ``.axes``, ``.save(path)``.

    Examples
    --------
    >>> from dppca_dask import dp_covariance
    >>> X = np.random.default_rng(0).uniform(-1, 1, size=(500, 4))
    >>> out = dp_covariance(X, preset="seed", eps=2, delta=1e-5, bounds=1.0, rng=1).plot()
    >>> sorted(out.axes)
    ['correlation', 'covariance', 'weights']
    """
    if getattr(fit, "kind", None) != "covariance":  # duck-typed: plots do not import results
        raise bad_param("fit", "plot_covariance", "a CovarianceResult from dp_covariance()",
                        type(fit).__name__)
    items = [panels] if isinstance(panels, str) else list(panels)
    if not items or any(p not in COVARIANCE_PANELS for p in items):
        raise bad_param("panels", "plot", "any of 'covariance', 'correlation', 'weights'",
                        panels)
    chosen = [p for p in COVARIANCE_PANELS if p in items]
    hatched = False
    sigma = np.asarray(fit.covariance.values, dtype=np.float64)
    names = [str(v) for v in fit.covariance["variable"].values]
    p = len(names)
    side = float(min(max(3.2, 0.16 * p + 1.6), 7.5))
    longest = min(max(len(n) for n in names), 40)
    label_in = 0.07 * longest * (9.0 if p <= 20 else 7.0) / 10.0 + 0.2
    fig = figure(len(chosen) * (side + label_in + 1.0), side + label_in + 1.2)
    axes: dict[str, Any] = {}
    for i, panel in enumerate(chosen, start=1):
        ax = fig.add_subplot(1, len(chosen), i)
        if panel == "covariance":
            top = float(np.max(np.abs(sigma))) or 1.0
            image = ax.imshow(sigma, cmap="RdBu_r", vmin=-top, vmax=top,
                              interpolation="nearest")
            label = "Σ̂ (released)"
            zero = zero_entries(fit)
            if zero is not None:
                edges = np.arange(p + 1) - 0.5
                hatched = hatch_cells(ax, zero, edges, edges, color="#4D4D4D") is not None
        elif panel == "correlation":
            d = np.diag(sigma).copy()
            scale = np.where(d > 0, np.sqrt(np.where(d > 0, d, 1.0)), np.nan)
            corr = np.clip(sigma / np.outer(scale, scale), -1.0, 1.0)
            image = ax.imshow(corr, cmap="RdBu_r", vmin=-1.0, vmax=1.0,
                              interpolation="nearest")
            label = "correlation"
        else:
            w = np.asarray(fit.weights.values, dtype=np.float64)
            measured = np.asarray(fit.measured.values, dtype=bool) & (w > 0)
            logw = np.where(measured, np.log10(np.where(measured, w, 1.0)), np.nan)
            ax.set_facecolor("#D9D9D9")  # unmeasured
            image = ax.imshow(np.ma.masked_invalid(logw), cmap="viridis",
                              interpolation="nearest")
            label = "log10 λ (unmeasured: grey)"
        _ticks(ax, names)
        ax.set_title(_TITLES[panel], fontsize=13, fontweight="bold", y=TITLE_Y)
        bar = fig.colorbar(image, ax=ax, shrink=0.8)
        bar.set_label(label, fontsize=9)
        bar.ax.tick_params(labelsize=8)
        axes[panel] = ax
    meta = fit.metadata
    caption = caption_line({"n": meta["n"], "privacy": {
        "eps": meta["ledger_total"].get("eps"), "delta": meta["ledger_total"].get("delta"),
        "rho": meta["ledger_total"].get("rho")}})
    text = f"{caption} · method {meta['method']} · p = {p} variables"
    if hatched:
        level = fit.dataset["covariance_lower"].attrs.get("interval_level", 0.95)
        text += (f"\nhatched: the entry's {100 * float(level):g}% interval contains 0 -- "
                 "indistinguishable from 0 (it covers the mechanism's noise, not sampling)")
    footer(fig, text)
    finish(fig)
    return CovariancePlot(fit, fig, axes)


def zero_entries(fit: Any) -> np.ndarray | None:
    """p x p booleans, True where the interval of the noise-free entry contains 0 (the
    summary's rule); None for a store written before the intervals."""
    ds = fit.dataset
    if "covariance_lower" not in ds or "covariance_upper" not in ds:
        return None
    lower = np.asarray(ds["covariance_lower"].values, dtype=np.float64)
    upper = np.asarray(ds["covariance_upper"].values, dtype=np.float64)
    return np.asarray((lower <= 0.0) & (upper >= 0.0))


register_plot("covariance", plot_covariance)  # the covariance results' .plot()
