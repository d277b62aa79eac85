"""Estimator stages written as *steps*: generators that yield the lazy statistics they need.

A step generator ``yield``s a tuple of lazy Dask objects (one data pass), receives their computed
values, draws its noise on the driver and either yields the next pass or ``return``s its result.
Written this way a stage does not decide *when* its passes run, so several independent stages can
share one read of the input per round (``dp_pca`` runs the score stage alongside the scree
stage); :func:`run_steps` runs one stage alone, one computation per pass.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from dppca_dask.graph.compute import compute

__all__ = ["Steps", "run_steps"]

Steps = Generator[tuple[Any, ...], tuple[Any, ...], Any]


def run_steps(steps: Steps) -> Any:
    """Run a step generator to its end, one :func:`~dppca_dask.graph.compute.compute` per pass.

    Examples
    --------
    >>> import dask.array as da
    >>> def twice():
    ...     (total,) = yield (da.ones(4, chunks=2).sum(),)
    ...     (again,) = yield (da.full(4, total, chunks=2).sum(),)
    ...     return float(again)
    >>> run_steps(twice())
    16.0
    """
    try:
        request = next(steps)
        while True:
            request = steps.send(compute(*request))
    except StopIteration as stop:
        return stop.value
