"""The moments pass: per-block (count, mean, centred cross-products) combined pairwise (Chan,
Golub & LeVeque 1979), for the non-private covariance reference without cancellation at large
offsets."""

from __future__ import annotations

import dask.array as da
import numpy as np
from dask.delayed import Delayed, delayed

from dppca_dask.graph.reduce import DEFAULT_SPLIT_EVERY, tree_reduce
from dppca_dask.kernels.kendall import check_finite_block

__all__ = [
    "moments",
]


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
