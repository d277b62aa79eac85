"""O(n·p) map-reduce passes over row blocks: the Dask side of scores, clipped sums and counts.

:func:`row_block_sum` applies a NumPy block function to every row block and sums the returned
arrays (or tuples of arrays) with the package's fixed-shape tree, so a given chunking gives
bit-identical results and integer counts are exact. Block functions are pure functions of the
data: they see only their block and public arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
from dask.delayed import Delayed, delayed

from dppca_dask.graph.reduce import DEFAULT_SPLIT_EVERY, tree_reduce

__all__ = ["row_block_sum", "row_blocks"]


def row_blocks(x: da.Array) -> list[Delayed]:
    """The row blocks of ``x`` (columns in one chunk) as delayed NumPy arrays, in row order."""
    if len(x.chunks[1]) != 1:
        x = x.rechunk({1: -1})
    return list(x.to_delayed(optimize_graph=False)[:, 0])


def _sum_parts(*parts: Any) -> Any:
    first = parts[0]
    if isinstance(first, tuple):
        return tuple(_sum_parts(*items) for items in zip(*parts, strict=True))
    total = np.array(first, copy=True)
    for part in parts[1:]:
        total = total + part
    return total


def row_block_sum(
    x: da.Array,
    fn: Callable[..., Any],
    *args: Any,
    split_every: int = DEFAULT_SPLIT_EVERY,
    name: str = "row-block-sum",
    with_start: bool = False,
) -> Delayed:
    """Lazy elementwise sum over row blocks of ``fn(block, *args)``.

    ``fn`` returns an array or a (nested) tuple of arrays of fixed shapes. ``args`` must be small
    public values (grids, directions, clip levels); they are embedded in the graph. With
    ``with_start=True`` it is called as ``fn(block, start, *args)``, ``start`` being the block's
    first global row index (for statistics that depend on a row's position).

    Examples
    --------
    >>> import dask
    >>> x = da.arange(10.0, chunks=3)[:, None]
    >>> dask.compute(row_block_sum(x, lambda b: b.sum(axis=0)))[0].tolist()
    [45.0]
    """
    blocks = row_blocks(x)
    if with_start:
        starts = np.concatenate([[0], np.cumsum(x.chunks[0])[:-1]]).astype(int).tolist()
        parts = [delayed(fn, pure=True)(block, start, *args)
                 for block, start in zip(blocks, starts, strict=True)]
    else:
        parts = [delayed(fn, pure=True)(block, *args) for block in blocks]
    return tree_reduce(parts, split_every, _sum_parts, name)
