"""The Kendall pass as Dask work units (docs/spec/ARCHITECTURE.md §4; measurements and the reasons
for the defaults in docs/performance.md).

Each work unit of the :mod:`~dppca_dask.graph.kendall_layout` returns its (p×p partial sum, pair
count); partials are combined by :func:`~dppca_dask.graph.reduce.tree_reduce` in unit order, so one
chunking always gives bit-identical results. The unit tasks are keyed ``_unit``/``_unit_reread``
(tests/test_cluster.py spots the Kendall pass by that prefix).

Row blocks reach the units in one of two ways: *persist* (the blocks are Dask tasks the units
depend on; right when the data are in memory) or *reread* (each unit reads the rows it needs
from the source inside its task, one block at a time, so a worker holds two blocks and a unit's
temporaries whatever the dataset size: the out-of-core mode for Zarr inputs). Tasks are pure
functions of the data: no randomness, no budget.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Literal

import dask
import dask.array as da
import numpy as np
from dask._task_spec import convert_legacy_graph
from dask.delayed import Delayed, delayed

from dppca_dask.errors import ChunkingError
from dppca_dask.graph.kendall_layout import (
    DEFAULT_PAIR_BLOCK,
    DEFAULT_UNIT_PAIRS,
    KendallLayout,
    Piece,
    kendall_layout,
)
from dppca_dask.graph.reduce import DEFAULT_SPLIT_EVERY, tree_reduce
from dppca_dask.kernels.kendall import tile_blas_unfused, tile_reference
from dppca_dask.kernels.kendall_fused import tile_fused

__all__ = [
    "KERNELS",
    "PERSIST_MAX_BYTES",
    "kendall_sum",
]

PERSIST_MAX_BYTES = 256 * 2**20
"""``reread="auto"`` keeps row blocks in memory (persist) for data up to this many float64 bytes:
a unit's block reads cost ~10 % at p = 50 (measured), holding 256 MiB of blocks costs nothing."""


KERNELS: dict[str, Callable[..., tuple[np.ndarray, int]]] = {
    "fused": tile_fused,
    "unfused": tile_blas_unfused,
    "reference": tile_reference,
}
"""Tile kernels by name: the fused fast path, the unfused NumPy rewrite, the reference."""


def _piece_sum(kernel: Callable, a: np.ndarray, b: np.ndarray, piece: Piece) -> tuple:
    """A piece's pairs: the fused kernel takes the whole blocks and the piece's rows in one
    call; the others are called on the rows (and, on a diagonal tile, the later rows)."""
    i, j, lo, hi = piece
    if kernel is tile_fused:
        return kernel(a, None if i == j else b, rows=(lo, hi))
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
    """Rows lo:hi of a Dask array, read inside the task that needs them (reread mode): the few
    source chunks they lie in, with the part of the input's graph those chunks need.

    Deliberately not a Dask collection or a dataclass, so Dask passes it to the task as a value
    instead of computing it as a dependency.
    """

    __slots__ = ("graph", "keys", "offset", "rows", "token")

    def __init__(self, graph: dict, keys: list, offset: int, rows: int, token: tuple) -> None:
        self.graph, self.keys, self.offset, self.rows, self.token = graph, keys, offset, rows, token

    def __dask_tokenize__(self) -> tuple:
        return ("dppca-rows", *self.token)

    def read(self) -> np.ndarray:
        parts = dask.get(self.graph, self.keys, scheduler="sync")
        values = np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
        return np.ascontiguousarray(values[self.offset:self.offset + self.rows],
                                    dtype=np.float64)


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


def _row_blocks(x: da.Array, sizes: tuple[int, ...]) -> list[Delayed]:
    if x.chunks[0] != sizes or len(x.chunks[1]) != 1:
        x = x.rechunk((sizes, (x.shape[1],)))
    return list(x.to_delayed(optimize_graph=False)[:, 0])


def _row_readers(x: da.Array, sizes: tuple[int, ...]) -> list[_Rows]:
    """One :class:`_Rows` per block of ``sizes`` rows. The input's graph is culled and walked
    once (slicing and culling it per block cost O(chunks) each: 10 minutes for the 24 415 blocks
    of 10⁸ rows, benchmarks/scale.py)."""
    if len(x.chunks[1]) != 1:
        x = x.rechunk({1: -1})
    (x,) = dask.optimize(x)
    tasks = convert_legacy_graph(dict(x.__dask_graph__()))
    ends = np.cumsum(x.chunks[0])
    starts = ends - np.asarray(x.chunks[0])
    bounds = [0, *itertools.accumulate(sizes)]
    readers = []
    for lo, hi in itertools.pairwise(bounds):
        first = int(np.searchsorted(ends, lo, side="right"))
        last = int(np.searchsorted(starts, hi, side="left")) - 1
        keys = [(x.name, i, 0) for i in range(first, last + 1)]
        readers.append(_Rows(_closure(tasks, keys), keys, lo - int(starts[first]), hi - lo,
                             (x.name, lo, hi)))
    return readers


def _closure(tasks: dict, keys: list) -> dict:
    """The tasks ``keys`` need, themselves included."""
    out: dict = {}
    todo = list(keys)
    while todo:
        key = todo.pop()
        if key not in out:
            out[key] = tasks[key]
            todo.extend(tasks[key].dependencies)
    return out


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
    :data:`~dppca_dask.graph.kendall_layout.DEFAULT_BLOCK_ROWS`). ``pairs="blocks"``: only the pairs within the groups of
    :func:`~dppca_dask.graph.kendall_layout.pair_groups` -- independent of the input chunking. ``reread=True``: each unit reads its
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
