"""The single compute point: :func:`compute` is the one place the library triggers computation,
and :func:`persist` the one place it keeps an intermediate on the workers.

``cluster``/``cli`` can route both through a distributed client with a progress bar via
:func:`use_compute` (its ``persist=``). In-process it runs the threaded scheduler with BLAS limited to one thread
per task (parallelism comes from tasks; nested BLAS threads oversubscribe the cores and were
measured 7x slower). The passes themselves: :mod:`dppca_dask.graph.kendall_units`,
:mod:`dppca_dask.graph.moments`, :mod:`dppca_dask.graph.passes`, :mod:`dppca_dask.graph.groups`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import dask
from dask.base import is_dask_collection
from dask.delayed import delayed
from threadpoolctl import threadpool_limits

__all__ = [
    "compute",
    "current_persist",
    "persist",
    "use_compute",
]

_COMPUTE: ContextVar[Callable[..., tuple[Any, ...]] | None] = ContextVar(
    "dppca_compute", default=None
)
_PERSIST: ContextVar[Callable[[Any], Any] | None] = ContextVar("dppca_persist", default=None)


@contextmanager
def use_compute(fn: Callable[..., tuple[Any, ...]] | None,
                persist: Callable[[Any], Any] | None = None) -> Iterator[None]:
    """Route :func:`compute` through ``fn`` (same contract as :func:`dask.compute`) and
    :func:`persist` through ``persist`` (``fn(obj)`` returns ``obj`` kept in the workers'
    memory, computed: same contract as :func:`dask.persist` of one collection, then waiting
    for it). ``None`` is the in-process default of each."""
    token = _COMPUTE.set(fn)
    kept = _PERSIST.set(persist)
    try:
        yield
    finally:
        _PERSIST.reset(kept)
        _COMPUTE.reset(token)


def _identity(value: Any) -> Any:
    return value


def _one_kind(objs: tuple[Any, ...]) -> tuple[Any, ...]:
    """``objs`` with every dask object wrapped as a Delayed when they are of several kinds.

    dask 2026.8 (``dask.compute`` and ``Client.compute``) returns the results of a call that
    mixes kinds of collections (e.g. Delayed and Array) grouped by kind, but hands them back in
    the order of the arguments: ``compute(delayed_a, array_b, delayed_c)`` gives ``(a, c, b)``
    -- a silent wrong answer. One kind per call avoids it (values are unchanged).
    """
    kinds: set[type] = set()

    def visit(obj: Any) -> None:
        if is_dask_collection(obj):
            kinds.add(type(obj))
        elif isinstance(obj, tuple | list):
            for item in obj:
                visit(item)
        elif isinstance(obj, dict):
            for item in obj.values():
                visit(item)

    for obj in objs:
        visit(obj)
    if len(kinds) <= 1:
        return objs
    return tuple(delayed(_identity, pure=True)(o) for o in objs)


def compute(*objs: Any) -> tuple[Any, ...]:
    """Compute Dask collections: the single computation point of every estimator stage.

    Results come back in argument order whatever the mix of collection kinds (see
    :func:`_one_kind`).

    Examples
    --------
    >>> import dask.array as da
    >>> from dask import delayed
    >>> a, total, c = compute(delayed("a"), da.ones(4, chunks=2).sum(), delayed("c"))
    >>> a, float(total), c
    ('a', 4.0, 'c')
    """
    objs = _one_kind(objs)
    fn = _COMPUTE.get()
    if fn is None:
        with threadpool_limits(limits=1, user_api="blas"):
            return dask.compute(*objs)
    return fn(*objs)


def _default_persist(obj: Any) -> Any:
    with threadpool_limits(limits=1, user_api="blas"):
        (kept,) = dask.persist(obj)
    try:  # a default distributed client (e.g. a benchmark's ``Client(cluster)``): wait for it
        from distributed import futures_of, wait
    except ImportError:  # pragma: no cover - distributed is a dependency
        return kept
    futures = futures_of(kept)
    if futures:
        wait(futures)
    return kept


def current_persist() -> Callable[[Any], Any] | None:
    """The function :func:`persist` routes to now (``None``: the in-process default)."""
    return _PERSIST.get()


def persist(obj: Any) -> Any:
    """Compute one Dask collection and keep it in the workers' memory (in-process: this
    process's memory); returns the kept collection, whose graph now holds the computed blocks
    (or a distributed client's futures), so later computations read it instead of its inputs.

    Examples
    --------
    >>> import dask.array as da
    >>> kept = persist(da.arange(6, chunks=2) * 2)
    >>> len(kept.__dask_graph__()), kept.sum().compute().item()
    (3, 30)
    """
    fn = _PERSIST.get()
    return _default_persist(obj) if fn is None else fn(obj)
