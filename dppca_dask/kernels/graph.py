"""Dask orchestration of the data passes: the only kernel module that knows about Dask.

Kendall pass (ARCHITECTURE.md §4): the rows are cut into blocks of ``block_rows``; the tiles
(I, J) with I ≤ J are grouped into *work units* (a run of tiles of one block-row, so each unit
reads a bounded number of blocks); each unit returns its (p×p partial sum, pair count); partials
are combined by a fixed-shape tree of fan-in ``split_every`` in unit order, never in completion
order, so one chunking always gives bit-identical results. Tasks are pure functions of the data:
no randomness, no budget.

Moments pass: per-block (count, mean, centred cross-products) combined pairwise (Chan, Golub &
LeVeque 1979), for the non-private covariance reference without cancellation at large offsets.

:func:`compute` is the one place the library triggers computation; ``cluster``/``cli`` can route
it through a distributed client with a progress bar via :func:`use_compute`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.delayed import Delayed, delayed

from dppca_dask.errors import ChunkingError
from dppca_dask.kernels.kendall import check_finite_block, tile_fast, tile_reference

__all__ = [
    "DEFAULT_BLOCK_ROWS",
    "DEFAULT_SPLIT_EVERY",
    "DEFAULT_UNIT_PAIRS",
    "KendallLayout",
    "compute",
    "kendall_layout",
    "kendall_sum",
    "moments",
    "use_compute",
]

DEFAULT_BLOCK_ROWS = 2048
"""Rows per block: a 2048×2048 float64 tile is 32 MiB per temporary."""
DEFAULT_UNIT_PAIRS = 2**25
"""Target pairs per work unit (about 33M pairs: seconds of work per task at p ≈ 50)."""
DEFAULT_SPLIT_EVERY = 8
"""Fan-in of the fixed-shape reduction tree."""

_COMPUTE: ContextVar[Callable[..., tuple[Any, ...]] | None] = ContextVar(
    "dppca_compute", default=None
)


@contextmanager
def use_compute(fn: Callable[..., tuple[Any, ...]]) -> Iterator[None]:
    """Route :func:`compute` through ``fn`` (same contract as :func:`dask.compute`)."""
    token = _COMPUTE.set(fn)
    try:
        yield
    finally:
        _COMPUTE.reset(token)


def compute(*objs: Any) -> tuple[Any, ...]:
    """Compute Dask collections: the single computation point of every estimator stage."""
    fn = _COMPUTE.get()
    if fn is None:
        return dask.compute(*objs)
    return fn(*objs)


@dataclass(frozen=True)
class KendallLayout:
    """The work of one Kendall pass, derived from the public shape only (no data values)."""

    n: int
    p: int
    block_sizes: tuple[int, ...]
    units: tuple[tuple[int, tuple[int, ...]], ...]  # (block-row I, blocks J ≥ I)
    split_every: int

    @property
    def n_blocks(self) -> int:
        return len(self.block_sizes)

    @property
    def n_tiles(self) -> int:
        return sum(len(js) for _, js in self.units)

    @property
    def n_pairs(self) -> int:
        return self.n * (self.n - 1) // 2

    @property
    def n_reduce_tasks(self) -> int:
        count, width = 0, len(self.units)
        while width > 1:
            width = math.ceil(width / self.split_every)
            count += width
        return count

    @property
    def n_tasks(self) -> int:
        """Block loads + work units + reduction tasks."""
        return self.n_blocks + len(self.units) + self.n_reduce_tasks

    @property
    def tile_bytes(self) -> int:
        b = max(self.block_sizes)
        return 8 * b * b

    def worker_memory_estimate(self, fast: bool = True) -> int:
        """Peak bytes one unit needs: its blocks plus the tile temporaries."""
        b = max(self.block_sizes)
        blocks = max(1 + len(js) for _, js in self.units) * b * self.p * 8
        temps = 5 * self.tile_bytes if fast else 3 * 8 * b * self.p
        return blocks + temps + 2 * 8 * self.p * self.p

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "p": self.p,
            "block_rows": max(self.block_sizes),
            "blocks": self.n_blocks,
            "tiles": self.n_tiles,
            "work_units": len(self.units),
            "tasks": self.n_tasks,
            "pairs": self.n_pairs,
            "split_every": self.split_every,
        }


def _block_sizes(n: int, block_rows: int) -> tuple[int, ...]:
    nb = max(1, math.ceil(n / block_rows))
    base, extra = divmod(n, nb)  # even blocks: sizes differ by at most one row
    return tuple(base + (1 if i < extra else 0) for i in range(nb))


def kendall_layout(
    n: int,
    p: int,
    *,
    block_rows: int | None = None,
    block_sizes: Sequence[int] | None = None,
    unit_pairs: int = DEFAULT_UNIT_PAIRS,
    split_every: int = DEFAULT_SPLIT_EVERY,
) -> KendallLayout:
    """Plan the tiles and work units for ``n`` rows and ``p`` columns (reads no data).

    Examples
    --------
    >>> kendall_layout(10_000, 20, block_rows=2048).as_dict()["tiles"]
    15
    """
    if block_sizes is None:
        b = DEFAULT_BLOCK_ROWS if block_rows is None else int(block_rows)
        if b < 1:
            raise ChunkingError(f"block_rows must be a positive int. Got {block_rows!r} instead.")
        block_sizes = _block_sizes(n, b)
    sizes = tuple(int(s) for s in block_sizes)
    if sum(sizes) != n or any(s < 1 for s in sizes):
        raise ChunkingError(f"Row blocks {sizes} do not partition {n} rows.")
    if split_every < 2:
        raise ChunkingError(f"split_every must be at least 2. Got {split_every!r} instead.")
    units: list[tuple[int, tuple[int, ...]]] = []
    for i, size_i in enumerate(sizes):
        run: list[int] = []
        pairs = 0
        for j in range(i, len(sizes)):
            tile_pairs = size_i * (size_i - 1) // 2 if j == i else size_i * sizes[j]
            if run and pairs + tile_pairs > unit_pairs:
                units.append((i, tuple(run)))
                run, pairs = [], 0
            run.append(j)
            pairs += tile_pairs
        units.append((i, tuple(run)))
    return KendallLayout(n, p, sizes, tuple(units), split_every)


def _unit(fast: bool, i: int, js: tuple[int, ...], a: np.ndarray, *blocks: np.ndarray) -> tuple:
    kernel = tile_fast if fast else tile_reference
    p = a.shape[1]
    total = np.zeros((p, p))
    count = 0
    for j, b in zip(js, blocks, strict=True):
        s, m = kernel(a) if j == i else kernel(a, b)
        total += s
        count += m
    return total, count


def _combine(*parts: tuple) -> tuple:
    total = parts[0][0].copy()
    count = parts[0][1]
    for s, m in parts[1:]:
        total += s
        count += m
    return total, count


def _tree(parts: list[Delayed], split_every: int, combine: Callable, name: str) -> Delayed:
    level = 0
    while len(parts) > 1:
        parts = [
            delayed(combine, pure=True, name=f"{name}-combine-{level}-{k}")(
                *parts[k : k + split_every]
            )
            for k in range(0, len(parts), split_every)
        ]
        level += 1
    return parts[0]


def _row_blocks(x: da.Array, sizes: tuple[int, ...]) -> list[Delayed]:
    if x.chunks[0] != sizes or len(x.chunks[1]) != 1:
        x = x.rechunk((sizes, (x.shape[1],)))
    return list(x.to_delayed(optimize_graph=False)[:, 0])


def kendall_sum(
    x: da.Array,
    *,
    fast: bool = True,
    block_rows: int | None = None,
    keep_chunks: bool = False,
    unit_pairs: int = DEFAULT_UNIT_PAIRS,
    split_every: int = DEFAULT_SPLIT_EVERY,
) -> tuple[Delayed, KendallLayout]:
    """Lazy (Σ_{i<j} u_ij u_ijᵀ, number of pairs) of ``x`` and the layout used.

    ``keep_chunks=True`` uses the input's own row chunks as blocks (for tests of awkward
    chunkings); otherwise rows are re-blocked to ``block_rows`` (default
    :data:`DEFAULT_BLOCK_ROWS`).
    """
    n, p = x.shape
    sizes = tuple(int(c) for c in x.chunks[0]) if keep_chunks else None
    layout = kendall_layout(
        n, p, block_rows=block_rows, block_sizes=sizes, unit_pairs=unit_pairs,
        split_every=split_every,
    )
    blocks = _row_blocks(x, layout.block_sizes)
    parts = [
        delayed(_unit, pure=True)(fast, i, js, blocks[i], *(blocks[j] for j in js))
        for i, js in layout.units
    ]
    return _tree(parts, split_every, _combine, "kendall"), layout


def _moments_block(block: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    block = np.asarray(block, dtype=np.float64)
    check_finite_block(block)
    mean = block.mean(axis=0)
    centred = block - mean
    return block.shape[0], mean, centred.T @ centred


def _moments_combine(*parts: tuple[int, np.ndarray, np.ndarray]) -> tuple:
    n, mean, m2 = parts[0]
    for nb, mean_b, m2_b in parts[1:]:
        total = n + nb
        delta = mean_b - mean
        mean = mean + delta * (nb / total)
        m2 = m2 + m2_b + np.outer(delta, delta) * (n * nb / total)
        n = total
    return n, mean, m2


def moments(x: da.Array, *, split_every: int = DEFAULT_SPLIT_EVERY) -> Delayed:
    """Lazy (n, column means, centred cross-product matrix) of ``x`` in one tree reduction."""
    if len(x.chunks[1]) != 1:
        x = x.rechunk({1: -1})
    blocks = list(x.to_delayed(optimize_graph=False)[:, 0])
    parts = [delayed(_moments_block, pure=True)(b) for b in blocks]
    return _tree(parts, split_every, _moments_combine, "moments")
