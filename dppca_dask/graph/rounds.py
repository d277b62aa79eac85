"""The package's one pass protocol: estimator stages yield requests, one driver runs them in rounds.

A **stage** is a generator. Each time it needs statistics of the data it ``yield``s a tuple of
requests -- lazy Dask objects built from per-block kernels (e.g.
:func:`~dppca_dask.graph.passes.row_block_sum`), or :class:`~dppca_dask.graph.scree_passes.Request`
objects that a backend turns into such graphs -- and receives the tuple of their exact values. It
then draws its noise on the driver (through :mod:`dppca_dask.privacy.mechanisms`) and either
yields its next requests or ``return``s its result. A stage never decides *when* its passes run:

* :func:`gather` runs several stages side by side: each round it batches every pending request
  of every stage, so they share one read of the input (``dp_pca`` runs its score stage next to
  its scree stage, and the scree methods of all components next to each other). After a round
  the stages receive their values in list order -- the order of their noise draws.
* :func:`chain` runs stages one after another (the R package's component-by-component draw
  order, at the cost of more rounds).
* :func:`once` is a stage of one round that returns the values of the objects it was given.
* :func:`run` is the driver: one computation per round on a backend -- :class:`DaskBackend`
  (one :func:`~dppca_dask.graph.compute.compute` call per round, the pass the pass log counts)
  or the NumPy backend of :mod:`dppca_dask.graph.scree_passes` (statistical tests).

Nothing here draws noise or looks at values: the driver only moves requests and results.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, Protocol, TypeVar

from dppca_dask.graph.compute import compute

__all__ = ["Backend", "DaskBackend", "Stage", "chain", "counted", "gather", "once", "run"]

T = TypeVar("T")

Stage = Generator[tuple[Any, ...], tuple[Any, ...], T]
"""A stage: yields a tuple of requests, receives their values, returns its result."""


class Backend(Protocol):
    """Evaluates one round's requests together; counts the rounds it ran."""

    passes: int

    def evaluate(self, requests: Sequence[Any]) -> tuple[Any, ...]:
        """The values of ``requests``, in order, from one computation."""
        ...


class DaskBackend:
    """Computes lazy Dask objects, one :func:`~dppca_dask.graph.compute.compute` per round.

    Subclasses lower request objects of their own to Dask graphs in :meth:`lower`.
    """

    def __init__(self) -> None:
        self.passes = 0

    def lower(self, request: Any) -> Any:
        """The Dask object that computes ``request`` (here: the request itself)."""
        return request

    def evaluate(self, requests: Sequence[Any]) -> tuple[Any, ...]:
        graphs = [self.lower(r) for r in requests]
        self.passes += 1
        return tuple(compute(*graphs))


def _step(stages: Sequence[Stage[Any]], i: int, values: tuple[Any, ...] | None,
          pending: dict[int, tuple[Any, ...]], results: list[Any]) -> None:
    try:
        pending[i] = next(stages[i]) if values is None else stages[i].send(values)
    except StopIteration as stop:
        pending.pop(i, None)
        results[i] = stop.value


def gather(stages: Sequence[Stage[Any]]) -> Stage[list[Any]]:
    """Run ``stages`` side by side, one shared round for all their pending requests.

    Returns their results in order.

    Examples
    --------
    >>> import dask.array as da
    >>> def total(x):
    ...     (value,) = yield (x.sum(),)
    ...     return float(value)
    >>> backend = DaskBackend()
    >>> run(gather([total(da.ones(4, chunks=2)), total(da.arange(4, chunks=2))]), backend)
    [4.0, 6.0]
    >>> backend.passes
    1
    """
    stages = list(stages)
    results: list[Any] = [None] * len(stages)
    pending: dict[int, tuple[Any, ...]] = {}
    for i in range(len(stages)):
        _step(stages, i, None, pending, results)
    while pending:
        order = sorted(pending)
        sizes = [len(pending[i]) for i in order]
        values = yield tuple(r for i in order for r in pending[i])
        start = 0
        for i, size in zip(order, sizes, strict=True):
            _step(stages, i, tuple(values[start:start + size]), pending, results)
            start += size
    return results


def chain(stages: Sequence[Stage[Any]]) -> Stage[list[Any]]:
    """Run ``stages`` one after another (each starts when the previous returned); their results."""
    results = []
    for stage in stages:
        results.append((yield from stage))
    return results


def once(*lazy: Any) -> Stage[tuple[Any, ...]]:
    """A one-round stage: the values of ``lazy`` (no round when there is nothing to compute)."""
    if not lazy:
        return ()
    return (yield tuple(lazy))


def counted(stage: Stage[T]) -> Stage[tuple[T, int]]:
    """``stage`` as it is, returning ``(its result, the number of rounds it asked for)``."""
    rounds = 0
    try:
        requests = next(stage)
        while True:
            rounds += bool(requests)
            values = yield requests
            requests = stage.send(values)
    except StopIteration as stop:
        return stop.value, rounds


def run(stage: Stage[T], backend: Backend | None = None) -> T:
    """Drive ``stage`` to its end, one computation per round on ``backend``; return its result.

    Examples
    --------
    >>> import dask.array as da
    >>> def twice():
    ...     (total,) = yield (da.ones(4, chunks=2).sum(),)
    ...     (again,) = yield (da.full(4, total, chunks=2).sum(),)
    ...     return float(again)
    >>> run(twice())
    16.0
    """
    backend = DaskBackend() if backend is None else backend
    try:
        requests = next(stage)
        while True:
            values = backend.evaluate(requests) if requests else ()
            requests = stage.send(values)
    except StopIteration as stop:
        return stop.value
