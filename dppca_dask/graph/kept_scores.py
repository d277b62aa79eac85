"""The scores on the released directions, kept on the workers for every pass after the directions.

After the loading release, every later pass of ``dp_pca``, ``dp_scree`` and ``dp_score`` (the
score frame's count passes, the cell counts, the scree centre and methods) reads all of X only
to project it on a few released directions. :func:`keep_scores` computes the scores
Y = X·V (n × K, K the directions those passes use, K ≪ p) in **one** pass and keeps them in the
workers' memory (:func:`~dppca_dask.graph.compute.persist`: a distributed cluster spills them
to disk when memory runs short, and recomputes a lost worker's blocks from X); the passes then
read Y instead of X -- no re-read, decompression or conversion of the input, and K instead of p
columns per row. Y's row blocks are groups of X's (:func:`leaf_group`: as many as fill
:data:`KEPT_BLOCK_BYTES`), so a pass over Y has a few large tasks where one over X has one per
chunk of X.

Bits: each score column is computed by :func:`~dppca_dask.kernels.scores.project` with the same
ordered elementwise sum over the variables as before, and the passes select Y's columns with an
integer selector (the kernels' ``project(block, columns)``), so every count and sum -- and so
every release for the same random stream -- is bit-identical to the passes on X
(``tests/test_kept_scores.py``); the sums of a pass over Y's coarse blocks run each of X's
blocks through the same kernel and the same in-order tree
(:class:`~dppca_dask.graph.passes.Leaves`), and counts are exact in any order.

When (Dask config key ``dppca.scores.keep``): ``"auto"`` (the default) keeps the scores when
there are at least :data:`MIN_ROUNDS` passes after the directions, the input is at least
``dppca.scores.keep-min-bytes`` (64 MiB: below it one more computation costs more than the
re-reads it saves) and Y is at most ``dppca.scores.keep-max-bytes`` (default: a quarter of this
machine's physical memory -- what an in-process run holds; a cluster's workers hold it in their
memory and spill past it, so raise it there); ``true`` keeps whenever there are two passes or
more, ``false`` never. The choice is a function of public quantities (n, p, K, the pass count)
and settings only, never of the data, so a plan counts the keeping pass as the fit makes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
import psutil  # type: ignore[import-untyped]  # a dependency of distributed

from dppca_dask.errors import ConfigError
from dppca_dask.graph.compute import persist
from dppca_dask.graph.passes import Leaves
from dppca_dask.graph.reduce import DEFAULT_SPLIT_EVERY
from dppca_dask.kernels.scores import project

__all__ = ["KEEP_MIN_BYTES", "KEPT_BLOCK_BYTES", "MIN_ROUNDS", "Scores", "keep_decision",
           "keep_scores", "leaf_group"]

MIN_ROUNDS = 2
"""Keeping costs one pass; it pays from two passes after the directions on."""
KEEP_MIN_BYTES = 64 * 2**20
"""``auto`` keeps the scores of inputs of at least this many bytes (``dppca.scores.keep-min-bytes``)."""
_KEEP_SHARE = 0.25
KEPT_BLOCK_BYTES = 32 * 2**20
"""The largest block of the kept scores: groups of X's row blocks up to this size."""


@dataclass(frozen=True)
class Scores:
    """What the passes after the directions read: X with the directions (``kept`` false), or the
    kept scores Y with the columns' positions (``kept`` true). :meth:`operand` gives the
    (array, directions) pair a count kernel takes for any subset of the K directions.
    ``leaves``: Y's row blocks are groups of X's (:class:`~dppca_dask.graph.passes.Leaves`), so
    that sums over Y are those over X bit for bit (``row_block_sum(..., leaves=...)``)."""

    array: da.Array
    directions: np.ndarray
    kept: bool
    leaves: Leaves | None = None

    @property
    def width(self) -> int:
        """K, the number of directions."""
        return int(self.directions.shape[1])

    def operand(self, columns: Any) -> tuple[da.Array, np.ndarray]:
        """``(array, directions)`` for the directions ``columns`` (0-based positions among the
        K): X and the p × m directions, or Y and the m integer positions."""
        cols = np.asarray(columns, dtype=np.intp).reshape(-1)
        if self.kept:
            return self.array, cols
        return self.array, np.ascontiguousarray(self.directions[:, cols], dtype=np.float64)

    def scores(self, columns: Any) -> da.Array:
        """The lazy n × m scores on the directions ``columns``."""
        x, v = self.operand(columns)
        m = len(v) if self.kept else v.shape[1]
        return da.map_blocks(project, x, v, dtype=np.float64, chunks=(x.chunks[0], (m,)),
                             token="dppca-scores")


def _setting(key: str, default: Any) -> Any:
    return dask.config.get(f"dppca.scores.{key}", default=default)


def _capacity() -> int:
    return int(psutil.virtual_memory().total)


def keep_decision(n: int, p: int, k: int, rounds: int) -> bool:
    """Whether :func:`keep_scores` keeps the n × ``k`` scores of an n × ``p`` input read in
    ``rounds`` passes after the directions (module docstring, "When"): one more pass when true.

    Examples
    --------
    >>> keep_decision(10**7, 50, 5, rounds=4), keep_decision(1000, 50, 5, rounds=4)
    (True, False)
    """
    mode = _setting("keep", "auto")
    if isinstance(mode, str) and mode.lower() in ("true", "false"):
        mode = mode.lower() == "true"
    if mode not in ("auto", True, False):
        raise ConfigError(f"The Dask config key dppca.scores.keep must be 'auto', true or "
                          f"false. Got {mode!r} instead.")
    if mode is False or rounds < MIN_ROUNDS:
        return False
    if mode is True:
        return True
    min_bytes = dask.utils.parse_bytes(_setting("keep-min-bytes", KEEP_MIN_BYTES))
    max_bytes = _setting("keep-max-bytes", None)
    limit = (_KEEP_SHARE * _capacity() if max_bytes is None
             else dask.utils.parse_bytes(max_bytes))
    return 8 * n * p >= min_bytes and 8 * n * k <= limit


def keep_scores(x: da.Array, directions: np.ndarray, *, rounds: int) -> Scores:
    """The :class:`Scores` the passes after the directions read: Y = X·V kept (one pass, now)
    when :func:`keep_decision` says so, else X itself with V."""
    v = np.ascontiguousarray(directions, dtype=np.float64)
    if len(x.chunks[1]) != 1:
        x = x.rechunk({1: -1})
    n, p = (int(s) for s in x.shape)
    if not keep_decision(n, p, int(v.shape[1]), rounds):
        return Scores(x, v, kept=False)
    y = da.map_blocks(project, x, v, dtype=np.float64, chunks=(x.chunks[0], (v.shape[1],)),
                      token="dppca-kept-scores")  # keys hash X's graph and V: never shared
    leaves = Leaves(tuple(int(c) for c in x.chunks[0]),
                    leaf_group(max(x.chunks[0]), int(v.shape[1])))
    if leaves.group > 1:
        y = y.rechunk((leaves.blocks(), (v.shape[1],)))
    return Scores(persist(y), v, kept=True, leaves=leaves)


def leaf_group(rows: int, k: int, split_every: int = DEFAULT_SPLIT_EVERY) -> int:
    """How many of X's row blocks (``rows`` rows at most) one block of the kept scores (``k``
    columns) holds: the largest power of the reduction's fan-in whose block stays within
    :data:`KEPT_BLOCK_BYTES` (fewer, larger tasks in every later pass).

    Examples
    --------
    >>> leaf_group(4096, 5), leaf_group(10**6, 5), leaf_group(10**7, 5)
    (64, 1, 1)
    """
    group = 1
    while 8 * rows * k * group * split_every <= KEPT_BLOCK_BYTES:
        group *= split_every
    return group
