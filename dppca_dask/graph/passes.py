"""O(n·p) map-reduce passes over row blocks: the Dask side of scores, clipped sums and counts.

:func:`row_block_sum` applies a NumPy block function to every row block and sums the returned
arrays (or tuples of arrays) with the package's fixed-shape tree, so a given chunking gives
bit-identical results and integer counts are exact. Block functions are pure functions of the
data: they see only their block and public arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.delayed import Delayed, delayed

from dppca_dask.graph.reduce import DEFAULT_SPLIT_EVERY, tree_reduce

__all__ = ["Leaves", "row_block_sum", "row_blocks"]


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


@dataclass(frozen=True)
class Leaves:
    """The row blocks a pass's sums are defined on, when the array's blocks are coarser: each
    row block of the array holds ``group`` consecutive leaves of ``sizes`` rows (the last block
    what is left), ``group`` a power of the reduction's fan-in. The scores kept by
    :func:`~dppca_dask.graph.kept_scores.keep_scores` are cut so, and a pass over them sums each
    leaf as the pass over the input would have, in the same tree: bit for bit the same result
    with far fewer tasks."""

    sizes: tuple[int, ...]
    group: int

    def blocks(self) -> tuple[int, ...]:
        """The coarse row chunks: the sums of each group of leaves."""
        return tuple(sum(self.sizes[i:i + self.group])
                     for i in range(0, len(self.sizes), self.group))


def _local_tree(parts: list[Any], split_every: int) -> Any:
    """:func:`~dppca_dask.graph.reduce.tree_reduce` of :func:`_sum_parts`, computed here."""
    while len(parts) > 1:
        parts = [_sum_parts(*parts[k:k + split_every]) for k in range(0, len(parts), split_every)]
    return parts[0]


def _leaf_group(block: np.ndarray, sizes: tuple[int, ...], start: int, fn: Callable[..., Any],
                args: tuple[Any, ...], with_start: bool, split_every: int) -> Any:
    """The tree's node over one group of leaves: ``fn`` on each leaf, then the in-order sums."""
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    parts = [fn(block[lo:hi], start + lo, *args) if with_start else fn(block[lo:hi], *args)
             for lo, hi in pairwise(bounds.tolist())]
    return _local_tree(parts, split_every)


def row_block_sum(
    x: da.Array,
    fn: Callable[..., Any],
    *args: Any,
    split_every: int = DEFAULT_SPLIT_EVERY,
    name: str = "row-block-sum",
    with_start: bool = False,
    leaves: Leaves | None = None,
) -> Delayed:
    """Lazy elementwise sum over row blocks of ``fn(block, *args)``.

    ``fn`` returns an array or a (nested) tuple of arrays of fixed shapes. ``args`` must be small
    public values (grids, directions, clip levels); they are embedded in the graph. With
    ``with_start=True`` it is called as ``fn(block, start, *args)``, ``start`` being the block's
    first global row index (for statistics that depend on a row's position). With ``leaves``
    (``x`` cut into groups of them, :class:`Leaves`) ``fn`` still runs on each leaf and the sums
    are those of the leaves' tree, one task per group.

    Examples
    --------
    >>> import dask
    >>> x = da.arange(10.0, chunks=3)[:, None]
    >>> dask.compute(row_block_sum(x, lambda b: b.sum(axis=0)))[0].tolist()
    [45.0]
    >>> coarse = Leaves((3, 3, 3, 1), 8)
    >>> dask.compute(row_block_sum(x.rechunk((coarse.blocks(), 1)), lambda b: b.sum(axis=0),
    ...                            leaves=coarse))[0].tolist()
    [45.0]
    """
    blocks = row_blocks(x)
    starts = np.concatenate([[0], np.cumsum(x.chunks[0])[:-1]]).astype(int).tolist()
    if leaves is not None and leaves.group > 1:
        if leaves.blocks() != tuple(x.chunks[0]) or split_every ** round(
                np.log(leaves.group) / np.log(split_every)) != leaves.group:
            raise RuntimeError(f"Row blocks {x.chunks[0]} are not groups of the leaves "
                               f"{leaves} at fan-in {split_every}.")  # an internal invariant
        g = leaves.group
        label = getattr(fn, "__name__", "leaves")  # the kernel's name, as the leaves' tasks have
        parts = []
        for i, (block, start) in enumerate(zip(blocks, starts, strict=True)):
            task = (block, leaves.sizes[i * g:(i + 1) * g], start, fn, args, with_start,
                    split_every)
            parts.append(delayed(_leaf_group, pure=True)(
                *task, dask_key_name=f"{label}-{tokenize('leaves', *task)}"))
    elif with_start:
        parts = [delayed(fn, pure=True)(block, start, *args)
                 for block, start in zip(blocks, starts, strict=True)]
    else:
        parts = [delayed(fn, pure=True)(block, *args) for block in blocks]
    return tree_reduce(parts, split_every, _sum_parts, name)
