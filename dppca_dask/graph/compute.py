"""Dask orchestration of the data passes: the only kernel module that knows about Dask.

Kendall pass (docs/spec/ARCHITECTURE.md §4; measurements and the reasons for the defaults in
docs/performance.md). The rows are cut into blocks; the work is the sequence of tiles (I, J),
I ≤ J, in row-major order (``pairs="blocks"``: the diagonal tiles only, one per group of about
``pair_block`` rows). That sequence is cut into *work units of equal pair count*: a cut may fall
inside a tile, between two rows of its block I, so a unit is a list of *pieces* (I, J, lo, hi) --
rows lo:hi of block I against block J (against the later rows of I when J == I). The number of
units is a multiple of 12 once there is enough work, so 1, 2, 3, 4, 6 or 12 equal workers get
equal shares. Each unit returns its (p×p partial sum, pair count); partials are combined by a
fixed-shape tree of fan-in ``split_every`` in unit order, never in completion order, so one
chunking always gives bit-identical results. The layout depends on the public shape only.

Row blocks reach the units in one of two ways: *persist* (the blocks are Dask tasks the units
depend on; right when the data are in memory) or *reread* (each unit reads the rows it needs
from the source inside its task, one block at a time, so a worker holds two blocks and a unit's
temporaries whatever the dataset size: the out-of-core mode for Zarr inputs). Tasks are pure
functions of the data: no randomness, no budget.

Moments pass: per-block (count, mean, centred cross-products) combined pairwise (Chan, Golub &
LeVeque 1979), for the non-private covariance reference without cancellation at large offsets.

:func:`compute` is the one place the library triggers computation; ``cluster``/``cli`` can route
it through a distributed client with a progress bar via :func:`use_compute`. In-process it runs
the threaded scheduler with BLAS limited to one thread per task (parallelism comes from tasks;
nested BLAS threads oversubscribe the cores and were measured 7x slower).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

import dask
import dask.array as da
import numpy as np
from dask.base import is_dask_collection
from dask.delayed import Delayed, delayed
from threadpoolctl import threadpool_limits

from dppca_dask._validation import parse_int
from dppca_dask.errors import ChunkingError
from dppca_dask.kernels.kendall import check_finite_block, tile_blas_unfused, tile_reference
from dppca_dask.kernels.kendall_fused import PANEL_ROWS, SWITCHED_PANEL_FACTOR, tile_fused

__all__ = [
    "DEFAULT_BLOCK_ROWS",
    "DEFAULT_PAIR_BLOCK",
    "DEFAULT_SPLIT_EVERY",
    "DEFAULT_UNIT_PAIRS",
    "KERNELS",
    "PERSIST_MAX_BYTES",
    "KendallLayout",
    "compute",
    "kendall_layout",
    "kendall_sum",
    "moments",
    "pair_groups",
    "use_compute",
]

DEFAULT_BLOCK_ROWS = 4096
"""Rows per block. The fused kernel never holds a b×b tile (only a PANEL_ROWS×b panel), so a
larger block only costs memory for the blocks themselves; 4096 was as fast as 2048–8192."""
DEFAULT_UNIT_PAIRS = 2**26
"""Target pairs per work unit: about 0.3 s of one core at p = 50."""
MIN_UNIT_PAIRS = 2**20
"""A pass of at least twice this many pairs is split into at least UNIT_MULTIPLE units."""
UNIT_MULTIPLE = 12
"""The number of units is a multiple of this (when there are at least this many)."""
MAX_UNITS = 50_000
"""Cap on work units, so the graph stays under ~1e5 tasks for n up to 1e7."""
DEFAULT_SPLIT_EVERY = 8
"""Fan-in of the fixed-shape reduction tree."""
DEFAULT_PAIR_BLOCK = 4096
"""Rows per group of ``pairs="blocks"`` (at most; groups differ by at most one row)."""
PERSIST_MAX_BYTES = 256 * 2**20
"""``reread="auto"`` keeps row blocks in memory (persist) for data up to this many float64 bytes:
a unit's block reads cost ~10 % at p = 50 (measured), holding 256 MiB of blocks costs nothing."""

KERNELS: dict[str, Callable[..., tuple[np.ndarray, int]]] = {
    "fused": tile_fused,
    "unfused": tile_blas_unfused,
    "reference": tile_reference,
}
"""Tile kernels by name: the fused fast path, the unfused NumPy rewrite, the reference."""

Piece = tuple[int, int, int, int]  # (I, J, lo, hi)

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


@dataclass(frozen=True)
class KendallLayout:
    """The work of one Kendall pass, derived from the public shape only (no data values)."""

    n: int
    p: int
    block_sizes: tuple[int, ...]
    units: tuple[tuple[Piece, ...], ...]
    split_every: int
    pairs: str = "all"

    @property
    def n_blocks(self) -> int:
        return len(self.block_sizes)

    @property
    def n_tiles(self) -> int:
        nb = self.n_blocks
        return nb if self.pairs == "blocks" else nb * (nb + 1) // 2

    @property
    def n_pairs(self) -> int:
        if self.pairs == "blocks":
            return sum(s * (s - 1) // 2 for s in self.block_sizes)
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
        """Bytes of the largest weight temporary (a panel for the fused kernel; a tile that
        switches to per-panel centres uses panels of ``SWITCHED_PANEL_FACTOR`` times the rows)."""
        b = max(self.block_sizes)
        return 8 * min(b, SWITCHED_PANEL_FACTOR * PANEL_ROWS) * b

    def worker_memory_estimate(self, fast: bool = True) -> int:
        """Peak bytes one running unit needs when it reads its blocks (two at a time)."""
        b = max(self.block_sizes)
        blocks = 2 * b * self.p * 8
        # fused: shifted A and B, [Sb | 1]ᵀ, (W Sb)ᵀ, and a switched tile's sorted A and
        # per-panel shifted B
        temps = self.tile_bytes + 6 * 8 * b * (self.p + 1) if fast else 3 * 8 * b * self.p
        return blocks + temps + 4 * 8 * self.p * self.p

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "p": self.p,
            "pairs_mode": self.pairs,
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


def pair_groups(n: int, pair_block: int = DEFAULT_PAIR_BLOCK) -> tuple[int, ...]:
    """Group sizes of ``pairs="blocks"``: consecutive rows, at most ``pair_block`` per group.

    The rule looks at ``n`` and ``pair_block`` only (public), never at data values: G =
    min(ceil(n / pair_block), floor(n / 2)) groups of consecutive rows whose sizes differ by at
    most one, so every group has at least two rows.

    Examples
    --------
    >>> pair_groups(10, 4)
    (4, 3, 3)
    """
    groups = max(1, min(math.ceil(n / pair_block), n // 2))
    base, extra = divmod(n, groups)
    return tuple(base + (1 if g < extra else 0) for g in range(groups))


def _tile_rows_for(cost: float, size_i: int, size_j: int, diagonal: bool) -> int:
    """Rows r of a tile's block I whose pairs add up to about ``cost`` (0 ≤ r ≤ size_i)."""
    if diagonal:  # row r has size_i − 1 − r pairs; C(r) = r (2 size_i − 1 − r) / 2
        lead = 2 * size_i - 1
        r = (lead - math.sqrt(max(lead * lead - 8.0 * cost, 0.0))) / 2.0
    else:
        r = cost / size_j
    return min(size_i, max(0, round(r)))


def _cut_units(
    sizes: tuple[int, ...], tiles: list[tuple[int, int]], n_units: int
) -> tuple[tuple[Piece, ...], ...]:
    """Cut the tile sequence into ``n_units`` runs of about equal pair count."""
    costs = [s * (s - 1) // 2 if i == j else s * sizes[j] for i, j in tiles for s in (sizes[i],)]
    total = sum(costs)
    targets = [total * k / n_units for k in range(1, n_units)]
    units: list[tuple[Piece, ...]] = []
    current: list[Piece] = []
    before, t = 0, 0
    for (i, j), cost in zip(tiles, costs, strict=True):
        lo = 0
        while t < len(targets) and targets[t] <= before + cost:
            hi = max(lo, _tile_rows_for(targets[t] - before, sizes[i], sizes[j], i == j))
            if hi > lo:
                current.append((i, j, lo, hi))
                lo = hi
            if current:
                units.append(tuple(current))
                current = []
            t += 1
        if lo < sizes[i]:
            current.append((i, j, lo, sizes[i]))
        before += cost
    if current:
        units.append(tuple(current))
    return tuple(units)


def _n_units(total: int, unit_pairs: int) -> int:
    units = max(math.ceil(total / unit_pairs), 1)
    if total >= 2 * MIN_UNIT_PAIRS:
        units = max(units, UNIT_MULTIPLE)
    if units >= UNIT_MULTIPLE:
        units = math.ceil(units / UNIT_MULTIPLE) * UNIT_MULTIPLE
    return min(units, MAX_UNITS)


def kendall_layout(
    n: int,
    p: int,
    *,
    block_rows: int | None = None,
    block_sizes: Sequence[int] | None = None,
    unit_pairs: int = DEFAULT_UNIT_PAIRS,
    split_every: int = DEFAULT_SPLIT_EVERY,
    pairs: Literal["all", "blocks"] = "all",
    pair_block: int = DEFAULT_PAIR_BLOCK,
) -> KendallLayout:
    """Plan the blocks and work units for ``n`` rows and ``p`` columns (reads no data).

    ``pairs="blocks"`` plans the within-group pairs of :func:`pair_groups` (``block_rows`` and
    ``block_sizes`` do not apply: the groups are the blocks).

    Examples
    --------
    >>> kendall_layout(10_000, 20, block_rows=2048).as_dict()["tiles"]
    15
    >>> kendall_layout(10_000, 20, pairs="blocks", pair_block=512).as_dict()["pairs"]
    2495000
    """
    if split_every < 2:
        raise ChunkingError(f"split_every must be at least 2. Got {split_every!r} instead.")
    if unit_pairs < 1:
        raise ChunkingError(f"unit_pairs must be a positive int. Got {unit_pairs!r} instead.")
    if pairs == "blocks":
        if pair_block < 2:
            raise ChunkingError(f"pair_block must be at least 2. Got {pair_block!r} instead.")
        block_sizes = pair_groups(n, pair_block)
    elif pairs != "all":
        raise ChunkingError(f"pairs must be 'all' or 'blocks'. Got {pairs!r} instead.")
    if block_sizes is None:
        b = DEFAULT_BLOCK_ROWS if block_rows is None else parse_int(
            block_rows, "block_rows", "the Kendall pass", low=1, cls=ChunkingError)
        block_sizes = _block_sizes(n, b)
    sizes = tuple(int(s) for s in block_sizes)
    if sum(sizes) != n or any(s < 1 for s in sizes):
        raise ChunkingError(f"Row blocks {sizes} do not partition {n} rows.")
    nb = len(sizes)
    if pairs == "blocks":
        tiles = [(i, i) for i in range(nb)]
    else:
        tiles = [(i, j) for i in range(nb) for j in range(i, nb)]
    total = sum(s * (s - 1) // 2 if i == j else s * sizes[j] for i, j in tiles for s in (sizes[i],))
    units = _cut_units(sizes, tiles, _n_units(total, unit_pairs))
    return KendallLayout(n, p, sizes, units, split_every, pairs)


def _piece_sum(kernel: Callable, a: np.ndarray, b: np.ndarray, piece: Piece) -> tuple:
    i, j, lo, hi = piece
    if i != j:
        return kernel(a[lo:hi], b)
    total, count = kernel(a[lo:hi])
    if hi < a.shape[0]:
        s, m = kernel(a[lo:hi], a[hi:])
        total = total + s
        count += m
    return total, count


def _unit_sum(kernel: str, pieces: tuple[Piece, ...], load: Callable[[int, int], Any]) -> tuple:
    """Σ over a unit's pieces in their fixed order; ``load(k, keep)`` gives block k (and may
    drop any other block than ``keep``, the current block I)."""
    fn = KERNELS[kernel]
    total: np.ndarray | None = None
    count = 0
    for piece in pieces:
        a = load(piece[0], piece[0])
        b = a if piece[1] == piece[0] else load(piece[1], piece[0])
        s, m = _piece_sum(fn, a, b, piece)
        total = s if total is None else total + s
        count += m
    return total, count


def _unit(kernel: str, pieces: tuple[Piece, ...], ids: tuple[int, ...], *blocks: np.ndarray):
    """A work unit over blocks already in memory (persist mode)."""
    lookup = dict(zip(ids, blocks, strict=True))
    return _unit_sum(kernel, pieces, lambda k, keep: lookup[k])


class _Rows:
    """Rows of a Dask array, read inside the task that needs them (reread mode).

    Deliberately not a Dask collection or a dataclass, so Dask passes it to the task as a value
    instead of computing it as a dependency.
    """

    __slots__ = ("array",)

    def __init__(self, array: da.Array) -> None:
        self.array = array

    def __dask_tokenize__(self) -> tuple[str, str]:
        return ("dppca-rows", self.array.name)

    def read(self) -> np.ndarray:
        values = self.array.compute(scheduler="sync")
        return np.ascontiguousarray(values, dtype=np.float64)


def _unit_reread(kernel: str, pieces: tuple[Piece, ...], rows: dict[int, _Rows]) -> tuple:
    """A work unit that reads its blocks itself, holding at most two at a time."""
    held: dict[int, np.ndarray] = {}

    def load(k: int, keep: int) -> np.ndarray:
        if k not in held:
            for key in [key for key in held if key != keep]:
                del held[key]
            held[k] = rows[k].read()
        return held[k]

    return _unit_sum(kernel, pieces, load)


def _combine(*parts: tuple) -> tuple:
    total = parts[0][0].copy()
    count = parts[0][1]
    for s, m in parts[1:]:
        total += s
        count += m
    return total, count


def tree_reduce(parts: list[Delayed], split_every: int, combine: Callable, name: str) -> Delayed:
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


def _row_readers(x: da.Array, sizes: tuple[int, ...]) -> list[_Rows]:
    bounds = [0, *itertools.accumulate(sizes)]
    readers = []
    for lo, hi in itertools.pairwise(bounds):
        (part,) = dask.optimize(x[lo:hi])  # cull: the task carries only the chunks it reads
        readers.append(_Rows(part))
    return readers


def kendall_sum(
    x: da.Array,
    *,
    fast: bool = True,
    kernel: str | None = None,
    block_rows: int | None = None,
    keep_chunks: bool = False,
    unit_pairs: int = DEFAULT_UNIT_PAIRS,
    split_every: int = DEFAULT_SPLIT_EVERY,
    pairs: Literal["all", "blocks"] = "all",
    pair_block: int = DEFAULT_PAIR_BLOCK,
    reread: bool | Literal["auto"] = False,
) -> tuple[Delayed, KendallLayout]:
    """Lazy (Σ u_ij u_ijᵀ over the planned pairs, number of pairs) of ``x`` and the layout used.

    ``kernel`` is one of :data:`KERNELS` (default: ``"fused"`` if ``fast`` else
    ``"reference"``). ``keep_chunks=True`` uses the input's own row chunks as blocks (for tests
    of awkward chunkings); otherwise rows are re-blocked to ``block_rows`` (default
    :data:`DEFAULT_BLOCK_ROWS`). ``pairs="blocks"``: only the pairs within the groups of
    :func:`pair_groups` -- independent of the input chunking. ``reread=True``: each unit reads its
    rows from the source inside its task (out-of-core; only sensible for file-backed arrays);
    ``"auto"``: reread when the data exceed :data:`PERSIST_MAX_BYTES` and no source row chunk
    exceeds twice the largest block (so a block read touches a few chunks, not one huge chunk per
    block), else persist.
    """
    name = kernel if kernel is not None else ("fused" if fast else "reference")
    if name not in KERNELS:
        raise ChunkingError(f"kernel must be one of {sorted(KERNELS)}. Got {kernel!r} instead.")
    n, p = x.shape
    sizes = tuple(int(c) for c in x.chunks[0]) if keep_chunks and pairs == "all" else None
    layout = kendall_layout(
        n, p, block_rows=block_rows, block_sizes=sizes, unit_pairs=unit_pairs,
        split_every=split_every, pairs=pairs, pair_block=pair_block,
    )
    if reread == "auto":
        big = 8 * n * p > PERSIST_MAX_BYTES
        reread = big and max(x.chunks[0]) <= 2 * max(layout.block_sizes)
    parts = []
    if reread:
        readers = _row_readers(x, layout.block_sizes)
        for pieces in layout.units:
            reads = sorted({k for piece in pieces for k in piece[:2]})
            parts.append(
                delayed(_unit_reread, pure=True)(name, pieces, {k: readers[k] for k in reads})
            )
    else:
        blocks = _row_blocks(x, layout.block_sizes)
        for pieces in layout.units:
            ids = tuple(sorted({k for piece in pieces for k in piece[:2]}))
            parts.append(
                delayed(_unit, pure=True)(name, pieces, ids, *(blocks[k] for k in ids))
            )
    return tree_reduce(parts, split_every, _combine, "kendall"), layout


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
    return tree_reduce(parts, split_every, _moments_combine, "moments")
