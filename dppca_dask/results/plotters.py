"""The plotting function of each result kind, registered by :mod:`dppca_dask.plots`.

A result's ``plot`` method draws with the plotting function of its kind, which lives in
:mod:`dppca_dask.plots` -- a layer above the results (docs/HELPERS.md "Layout and layering").
Results never import the plots: each plots module registers its function here with
:func:`register_plot` when it is imported, and :mod:`dppca_dask.plots` imports all of them, so
they are registered as soon as the package namespace ``dppca_dask`` (which imports the plots) is
loaded -- before any result exists. The same inversion as the report's ``register_report``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["PlotFunction", "plotter", "register_plot", "registered_kinds"]

PlotFunction = Callable[..., Any]
"""``fn(result, **options)``: draws ``result`` and returns the figure object."""

_PLOTTERS: dict[str, PlotFunction] = {}


def register_plot(kind: str, fn: PlotFunction) -> None:
    """Make ``fn`` the plotting function of results of ``kind`` (one per kind)."""
    if _PLOTTERS.get(kind, fn) is not fn:
        raise ValueError(f"A plot is already registered for result kind {kind!r}.")
    _PLOTTERS[kind] = fn


def plotter(kind: str) -> PlotFunction:
    """The plotting function registered for ``kind``.

    Examples
    --------
    >>> plotter("scree").__name__
    'plot_scree'
    """
    if kind not in _PLOTTERS:  # the plots register themselves when their package is imported
        importlib.import_module("dppca_dask.plots")
    try:
        return _PLOTTERS[kind]
    except KeyError:
        raise LookupError(f"No plot is registered for result kind {kind!r} (dppca_dask.plots "
                          "registers them when it is imported).") from None


def registered_kinds() -> tuple[str, ...]:
    """The result kinds with a registered plot, sorted."""
    return tuple(sorted(_PLOTTERS))
