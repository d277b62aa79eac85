"""Group labels that stay on the workers: per-group sums over row blocks, no O(n) gather.

A group variable stored beside the data (a Zarr variable, a lazy coordinate) is a dask array of n
labels. Reading it into one task (``labels.compute()``) gathers all n labels into one worker's
memory and then the driver's -- 8.4·10⁶ labels killed 400 MiB workers (issue 19). Here each
row-block task reads its own labels, turns them into strings (:func:`label_strings`, the
package's one rule), and returns its partial sums *keyed by label*; the fixed-shape tree merges
the dictionaries, so every task holds O(block + levels × the statistic) and the driver receives
one small dict. The levels (sorted strings) and the group sizes come out of the same pass.
Integer counts make the merge exact in any order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
from dask.delayed import Delayed, delayed

from dppca_dask.errors import InputError
from dppca_dask.graph.reduce import DEFAULT_SPLIT_EVERY, tree_reduce

__all__ = ["grouped_block_sum", "label_strings"]


def label_strings(values: Any, owner: str, name: str = "group", start: int | None = None) -> np.ndarray:
    """Labels as a str array; missing values are an :class:`InputError` (SPEC §6.7).

    ``start``: the first row of a block (the message then names where the first missing one is).

    Examples
    --------
    >>> label_strings(np.array([1, 2, 1]), "dp_score").tolist()
    ['1', '2', '1']
    """
    values = np.asarray(getattr(values, "values", values), dtype=object)
    missing = pd.isna(values)
    count = int(np.count_nonzero(missing))
    if count:
        where = ("" if start is None
                 else f" (row {start + int(np.flatnonzero(missing)[0])} is one)")
        raise InputError(owner=owner, parameter=name, rule="must not contain missing values",
                         got=f"{count} missing value(s){where}")
    return np.array([v.decode() if isinstance(v, bytes) else str(v) for v in values], dtype=str)


def _keyed(fn: Callable[..., np.ndarray], owner: str, block: np.ndarray, labels: np.ndarray,
           start: int, *args: Any) -> dict[str, np.ndarray]:
    strings = label_strings(labels, owner, start=start)
    levels, codes = np.unique(strings, return_inverse=True)
    out = fn(block, codes, len(levels), *args)  # shape (len(levels), ...)
    return {str(level): out[g] for g, level in enumerate(levels)}


def _merge(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    total: dict[str, np.ndarray] = {}
    for part in parts:
        for key, value in part.items():
            total[key] = value.copy() if key not in total else total[key] + value
    return total


def grouped_block_sum(x: da.Array, labels: da.Array, fn: Callable[..., np.ndarray], *args: Any,
                      owner: str, split_every: int = DEFAULT_SPLIT_EVERY,
                      name: str = "grouped-sum") -> Delayed:
    """Lazy ``{label: Σ over the label's rows}`` of ``fn(block, codes, n_groups, *args)``.

    ``fn`` returns an array whose first axis is the block's group (0-based ``codes`` into its
    own sorted levels); ``labels`` (1-D, length n) is cut on ``x``'s row chunks.
    """
    if len(x.chunks[1]) != 1:
        x = x.rechunk({1: -1})
    labels = labels.rechunk((x.chunks[0],))
    blocks = list(x.to_delayed(optimize_graph=False)[:, 0])
    cuts = list(labels.to_delayed(optimize_graph=False))
    starts = np.concatenate([[0], np.cumsum(x.chunks[0])[:-1]]).astype(int).tolist()
    parts = [delayed(_keyed, pure=True)(fn, owner, b, lab, s, *args)
             for b, lab, s in zip(blocks, cuts, starts, strict=True)]
    return tree_reduce(parts, split_every, _merge, name)
