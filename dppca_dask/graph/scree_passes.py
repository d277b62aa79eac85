"""The data passes of ``dp_scree``: requests for small exact aggregates, and the backends that run them.

A mechanism stage asks for a statistic with a :class:`Request` (its kind and public arguments);
the driver (:mod:`dppca_dask.graph.rounds`) gathers every request that is ready, and a backend
evaluates them **together in one computation** -- one read of X per round, whatever the number
of methods and components.

* :class:`ScoresBackend` -- the real one: scores Y = X·V as a lazy dask array on X's row chunks
  (or the scores kept once by :func:`~dppca_dask.graph.kept_scores.keep_scores`),
  each request a fixed-order tree sum over row blocks (:func:`~dppca_dask.graph.passes.row_block_sum`)
  of a kernel of :mod:`dppca_dask.kernels.scree`, all computed by one
  :func:`~dppca_dask.graph.compute.compute` call. The Huber m₂ pairs need blocks cut on the
  public pair-block boundaries, so that request rechunks Y (n × k, small next to X) first.
* :class:`NumpyScoresBackend` -- the same kernels on an in-memory array in one block (tests, and the
  statistical checks that run a mechanism thousands of times).

Tasks are pure functions of the data and public values; nothing here draws noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

import dask.array as da
import numpy as np

from dppca_dask.graph.compute import compute
from dppca_dask.graph.kept_scores import Scores
from dppca_dask.graph.passes import row_block_sum
from dppca_dask.graph.rounds import DaskBackend
from dppca_dask.kernels import scree as kernels

__all__ = ["NumpyScoresBackend", "Request", "ScoresBackend", "pair_block_bounds"]

Kind = Literal["sum", "radius", "clipped", "signed", "winsor", "m2", "huber"]

_KERNELS: dict[str, tuple[Callable[..., Any], bool]] = {
    "sum": (kernels.score_sums, False),
    "radius": (kernels.radius_stats, False),
    "clipped": (kernels.clipped_sums, False),
    "signed": (kernels.signed_counts, True),
    "winsor": (kernels.winsor_sums, True),
    "m2": (kernels.m2_counts, True),
    "huber": (kernels.huber_sums, False),
}


@dataclass(frozen=True, eq=False)
class Request:
    """One aggregate over all rows: ``kind`` names the kernel, ``args`` its public arguments."""

    kind: Kind
    args: tuple[Any, ...] = field(default_factory=tuple)


def pair_block_bounds(n: int, blocks: int) -> np.ndarray:
    """Row boundaries of the m₂ pair blocks (docs/spec/SPEC_dppca.md §5.3), from public n and M only.

    m = ⌊n/2⌋ consecutive pairs; M ← min(M, m); b = ⌊m/M⌋ pairs per block (b < 1: M = m, b = 1);
    the last block runs to pair m. Returns M + 1 row indices (even numbers, last = 2m).

    Examples
    --------
    >>> pair_block_bounds(11, 2).tolist()
    [0, 4, 10]
    """
    m = n // 2
    count = min(blocks, m)  # so b = ⌊m/M⌋ >= 1: the spec's "b < 1" fallback cannot arise
    size = m // count
    pairs = [j * size for j in range(count)] + [m]
    return 2 * np.array(pairs, dtype=np.int64)


def _pair_chunks(n: int, bounds: np.ndarray, target_rows: int) -> tuple[int, ...]:
    """Row chunks cut on pair-block boundaries, each about ``target_rows`` long or more."""
    sizes: list[int] = []
    current = 0
    for lo, hi in pairwise(bounds):
        current += int(hi - lo)
        if current >= target_rows:
            sizes.append(current)
            current = 0
    if current:
        sizes.append(current)
    tail = n - int(bounds[-1])
    if tail:
        sizes[-1] += tail
    return tuple(sizes)


class ScoresBackend(DaskBackend):
    """Evaluate a round on the scores Y = X·V of a dask array (one compute per round).

    :class:`Request` objects become fixed-order tree sums of a kernel over Y's row blocks; any
    other request (a lazy Dask object of another stage) is computed as it is, in the same round.
    """

    def __init__(self, x: da.Array | Scores, directions: np.ndarray | None = None, *,
                 k: int | None = None) -> None:
        """On X and the directions (p × k), or on :class:`~dppca_dask.graph.kept_scores.Scores`
        (kept or not) and their first ``k`` directions (default: all)."""
        super().__init__()
        if isinstance(x, Scores):
            scores = x
        else:
            v = np.ascontiguousarray(directions, dtype=np.float64)
            scores = Scores(x.rechunk({1: -1}) if len(x.chunks[1]) != 1 else x, v, kept=False)
        self.k = scores.width if k is None else int(k)
        self.n = int(scores.array.shape[0])
        self.y = scores.scores(range(self.k))
        self.leaves = scores.leaves  # kept scores: sums run on X's blocks, in groups

    def lower(self, request: Any) -> Any:
        if not isinstance(request, Request):
            return request
        fn, with_start = _KERNELS[request.kind]
        y, leaves = self.y, self.leaves
        if request.kind == "m2":  # integer counts: exact on any blocks
            bounds = request.args[-1]
            target = max(int(np.max(self.y.chunks[0])), 2)
            y, leaves = y.rechunk((_pair_chunks(self.n, bounds, target), (self.k,))), None
        return row_block_sum(y, fn, *request.args, with_start=with_start,
                             name=f"dppca-scree-{request.kind}", leaves=leaves)


class NumpyScoresBackend:
    """The same kernels on an in-memory array, evaluated in one block (start = 0).

    Lazy Dask requests of other stages are computed together, once per round.
    """

    def __init__(self, x: np.ndarray, directions: np.ndarray) -> None:
        self.y = kernels.scores(np.asarray(x, dtype=np.float64), directions)
        self.n, self.k = self.y.shape
        self.passes = 0

    def evaluate(self, requests: Sequence[Any]) -> tuple[Any, ...]:
        out: list[Any] = list(requests)
        lazy = [i for i, r in enumerate(requests) if not isinstance(r, Request)]
        for i, request in enumerate(requests):
            if isinstance(request, Request):
                fn, with_start = _KERNELS[request.kind]
                args = (self.y, 0, *request.args) if with_start else (self.y, *request.args)
                out[i] = fn(*args)
        if lazy:
            for i, value in zip(lazy, compute(*(requests[i] for i in lazy)), strict=True):
                out[i] = value
        self.passes += 1
        return tuple(out)
