"""The fixed-shape tree reduction every data pass ends with: partial results combined by a tree
of fan-in ``split_every`` in the order of the parts, never in completion order, so one chunking
always gives bit-identical results."""

from __future__ import annotations

from collections.abc import Callable

from dask.delayed import Delayed, delayed

__all__ = [
    "DEFAULT_SPLIT_EVERY",
    "tree_reduce",
]

DEFAULT_SPLIT_EVERY = 8
"""Fan-in of the fixed-shape reduction tree."""


def tree_reduce(parts: list[Delayed], split_every: int, combine: Callable, name: str) -> Delayed:
    """``combine`` applied over ``parts`` by a tree of fan-in ``split_every``, level by level in
    list order (task keys ``{name}-combine-{level}-{k}``); one part is returned as it is."""
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
