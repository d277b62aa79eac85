"""The layout of a Kendall pass, from the public shape only (no data values).

The rows are cut into blocks; the work is the sequence of tiles (I, J), I ≤ J, in row-major order
(``pairs="blocks"``: the diagonal tiles only, one per group of about ``pair_block`` rows, see
:func:`pair_groups`). That sequence is cut into *work units of equal pair count*: a cut may fall
inside a tile, between two rows of its block I, so a unit is a list of *pieces* (I, J, lo, hi) --
rows lo:hi of block I against block J (against the later rows of I when J == I). The number of
units is a multiple of 12 once there is enough work, so 1, 2, 3, 4, 6 or 12 equal workers get
equal shares. :func:`~dppca_dask.graph.kendall_units.kendall_sum` builds the pass on this layout;
plans and memory checks read it without building anything (docs/performance.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dppca_dask._validation import parse_int
from dppca_dask.errors import ChunkingError
from dppca_dask.graph.reduce import DEFAULT_SPLIT_EVERY
from dppca_dask.kernels.kendall_fused import PANEL_ROWS, SWITCHED_PANEL_FACTOR

__all__ = [
    "DEFAULT_BLOCK_ROWS",
    "DEFAULT_PAIR_BLOCK",
    "DEFAULT_UNIT_PAIRS",
    "KendallLayout",
    "Piece",
    "kendall_layout",
    "pair_groups",
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
DEFAULT_PAIR_BLOCK = 4096
"""Rows per group of ``pairs="blocks"`` (at most; groups differ by at most one row)."""


Piece = tuple[int, int, int, int]  # (I, J, lo, hi)


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
