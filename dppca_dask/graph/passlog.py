"""Work statistics of the data passes of a run: one record per computation.

Every data pass of every estimator goes through :func:`dppca_dask.graph.compute.compute` (the
single computation point). :func:`record_passes` wraps whatever that point currently routes to
(the in-process scheduler, or a distributed client attached by :mod:`dppca_dask.pipeline.cluster`) and
records, for each call -- and for each :func:`~dppca_dask.graph.compute.persist`, which keeps the
scores on the released directions (:mod:`dppca_dask.graph.kept_scores`) -- what was computed (the graph's output names), how many tasks its graph
had and how long it took. Each computation reads the input once -- or, after a persist, the
kept scores instead -- so the number of records is the number of passes over the data. Nothing here sees data values.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from dask.utils import key_split

from dppca_dask.graph import compute as graph

__all__ = ["PassRecord", "record_passes"]


@dataclass(frozen=True)
class PassRecord:
    """One computation: its position, what it computed (readable names of the statistics, or the
    graph's output names), its graph's task count and wall time."""

    index: int
    outputs: tuple[str, ...]
    tasks: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["outputs"] = list(self.outputs)
        return out


_KNOWN = {  # task names (kernel functions) -> what the pass computes, in report order
    "unit": "Kendall pair sums",
    "unit_reread": "Kendall pair sums (each unit reads its rows)",
    "moments_block": "covariance moments (non-private reference)",
    "score_sums": "scree: score sums (empirical centre)",
    "radius_stats": "scree centre: radius counts and clipped sums",
    "clipped_sums": "scree clipped: clipped sums",
    "signed_counts": "scree pmwm: cut-off counts",
    "winsor_sums": "scree pmwm: winsorized sums",
    "m2_counts": "scree huber: m2 histogram counts",
    "huber_sums": "scree huber: gradient sums",
    "signed_log_counts": "score frame: locate counts",
    "window_counts": "score frame: refine counts",
    "distance_log_counts": "score frame: radius counts",
    "center_counts": "score frame: centre counts",
    "radius_counts": "score frame: radius counts",
    "bin_counts": "score histogram: cell counts",
    "project": "observed scores (non-private reference)",
    "dppca-kept-scores": "scores on the released directions, kept on the workers",
}


def _name(obj: Any) -> str:
    key: Any = getattr(obj, "key", None) or getattr(obj, "name", None)
    if key is None:
        keys = obj.__dask_keys__() if hasattr(obj, "__dask_keys__") else None
        while isinstance(keys, list) and keys:
            keys = keys[0]
        key = keys
    return key_split(key) if key is not None else type(obj).__name__


def _describe(names: set[str], fallback: str) -> list[str]:
    known = [text for name, text in _KNOWN.items() if name in names]
    return list(dict.fromkeys(known)) or [fallback]


def _tasks(objs: tuple[Any, ...]) -> int:
    keys: set[Any] = set()
    for obj in objs:
        if hasattr(obj, "__dask_graph__"):
            keys.update(obj.__dask_graph__().keys())
    return len(keys)


def _graph_names(obj: Any) -> set[str]:
    if not hasattr(obj, "__dask_graph__"):
        return set()
    return {key_split(k) for k in obj.__dask_graph__()}


@contextmanager
def record_passes(on_pass: Callable[[PassRecord], None] | None = None
                  ) -> Iterator[list[PassRecord]]:
    """Record every :func:`~dppca_dask.graph.compute.compute` call made inside the block.

    ``on_pass`` is called with each record as soon as its computation ends (the CLI's one line
    per pass when no progress bar is shown).

    Examples
    --------
    >>> import dask.array as da
    >>> with record_passes() as passes:
    ...     _ = graph.compute(da.ones((10, 2), chunks=5).sum())
    >>> len(passes), passes[0].outputs
    (1, ('sum-aggregate',))
    """
    previous = graph._COMPUTE.get()
    previous_persist = graph.current_persist()
    log: list[PassRecord] = []

    def logged(objs: tuple[Any, ...], work: Callable[[], Any]) -> Any:
        names = set().union(*(_graph_names(o) for o in objs)) if objs else set()
        known = _describe(names, "")
        outputs = tuple(known if known != [""] else dict.fromkeys(_name(o) for o in objs))
        tasks = _tasks(objs)
        start = time.perf_counter()
        with graph.use_compute(previous, previous_persist):  # the routes this block found
            out = work()
        log.append(PassRecord(len(log) + 1, outputs, tasks, time.perf_counter() - start))
        if on_pass is not None:
            on_pass(log[-1])
        return out

    def timed(*objs: Any) -> tuple[Any, ...]:
        return logged(objs, lambda: graph.compute(*objs))

    def timed_persist(obj: Any) -> Any:
        return logged((obj,), lambda: graph.persist(obj))

    with graph.use_compute(timed, timed_persist):
        yield log
