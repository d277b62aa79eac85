"""Duplicate rows: find them (by 128-bit row hashes), describe them in one line, drop them.

The spherical Kendall estimators refuse duplicate observations (SPEC §4.2): their pair term is
undefined. The kernels detect a duplicate inside the data pass but do not know which rows; this
module finds them for the error message (:func:`describe_duplicates`, run only after the pass
failed) and for ``dppca-dask convert --check-duplicates`` / ``--drop-duplicates``.

**This check is not private.** Whether a dataset holds duplicate rows, and their positions, are
facts about the data: the messages are for the data custodian's terminal, never part of a
release. They name row positions and counts only, never data values.

Rows are compared exactly (``-0.0`` equals ``0.0``), through two independent 64-bit hashes of
each row's float64 bytes (:func:`row_hashes`); two different rows collide with probability
about 2⁻¹²⁸ per pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Duplicates", "describe_duplicates", "duplicate_pairs", "find_duplicates",
           "row_hashes"]

_KEYS = ("dppca-dup-key-01", "dppca-dup-key-02")  # pandas' hash keys: 16 bytes each
SHOWN = 5
"""How many duplicate rows a message names."""


def row_hashes(block: np.ndarray) -> np.ndarray:
    """Two 64-bit hashes of each row of a 2-D block, as an ``(n, 2)`` uint64 array.

    Examples
    --------
    >>> h = row_hashes(np.array([[1.0, 2.0], [1.0, 2.0], [-0.0, 2.0], [0.0, 2.0]]))
    >>> h.shape, bool((h[0] == h[1]).all()), bool((h[2] == h[3]).all()), bool((h[0] != h[2]).any())
    ((4, 2), True, True, True)
    """
    values = np.ascontiguousarray(np.asarray(block, dtype=np.float64)) + 0.0  # -0.0 -> 0.0
    if values.ndim != 2:
        raise ValueError("row_hashes needs a 2-D block")
    frame = pd.DataFrame(values.view(np.uint64) if values.size else values)
    out = np.empty((values.shape[0], 2), dtype=np.uint64)
    for i, key in enumerate(_KEYS):
        out[:, i] = pd.util.hash_pandas_object(frame, index=False, hash_key=key).to_numpy()
    return out


def duplicate_pairs(hashes: np.ndarray, rows: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose hash equals that of an earlier row, and the first row each repeats.

    ``rows`` are the row numbers of ``hashes`` (default ``0..n-1``). Returns two int64 arrays
    ``(duplicate, first)`` sorted by ``duplicate``.

    Examples
    --------
    >>> h = np.array([[1, 1], [2, 2], [1, 1], [3, 3], [2, 2], [1, 1]], dtype=np.uint64)
    >>> [a.tolist() for a in duplicate_pairs(h)]
    [[2, 4, 5], [0, 1, 0]]
    """
    n = hashes.shape[0]
    rows = np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort((rows, hashes[:, 1], hashes[:, 0]))
    h = hashes[order]
    same = (h[1:] == h[:-1]).all(axis=1)
    # the first row of each run of equal hashes
    starts = np.flatnonzero(np.concatenate([[True], ~same]))
    run = np.cumsum(np.concatenate([[True], ~same])) - 1
    first = rows[order][starts][run]
    sorted_rows = rows[order]
    mask = np.concatenate([[False], same])
    dup, orig = sorted_rows[mask], first[mask]
    by_row = np.argsort(dup, kind="stable")
    return dup[by_row], orig[by_row]


@dataclass(frozen=True)
class Duplicates:
    """Duplicate rows of a dataset: how many rows repeat an earlier row, and the first few
    ``(row, earlier row)`` pairs (0-based row numbers in storage order)."""

    count: int
    examples: tuple[tuple[int, int], ...]

    def describe(self) -> str:
        """One line naming the count and the first rows (no data values).

        Examples
        --------
        >>> Duplicates(1, ((142, 101),)).describe()
        '1 duplicate row: row 142 repeats row 101 (rows numbered from 0 in storage order)'
        """
        rows = "row" if self.count == 1 else "rows"
        shown = ", ".join(f"row {d} repeats row {f}" for d, f in self.examples)
        more = f", ... ({self.count - len(self.examples)} more)" \
            if self.count > len(self.examples) else ""
        return (f"{self.count} duplicate {rows}: {shown}{more} "
                "(rows numbered from 0 in storage order)")


def _summarise(dup: np.ndarray, first: np.ndarray) -> Duplicates:
    return Duplicates(int(dup.size), tuple((int(d), int(f))
                                           for d, f in zip(dup[:SHOWN], first[:SHOWN],
                                                           strict=True)))


def find_duplicates(array: Any) -> Duplicates:
    """The duplicate rows of a 2-D NumPy or Dask array (one pass: row hashes per block).

    Examples
    --------
    >>> find_duplicates(np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0]]))
    Duplicates(count=1, examples=((2, 0),))
    """
    if isinstance(array, np.ndarray):
        hashes = row_hashes(array)
    else:
        import dask.array as da

        from dppca_dask.graph.compute import compute

        x = array if len(array.chunks[1]) == 1 else array.rechunk({1: -1})
        lazy = da.map_blocks(row_hashes, x, dtype=np.uint64,
                             chunks=(x.chunks[0], (2,)), name="duplicate_row_hashes")
        (hashes,) = compute(lazy)
    return _summarise(*duplicate_pairs(np.asarray(hashes)))


class RowIndex:
    """Streaming duplicate detection over blocks (``convert``): the hashes of the rows kept so
    far (16 bytes a row), and every duplicate found."""

    def __init__(self) -> None:
        self._hashes = np.zeros((0, 2), np.uint64)
        self._rows = np.zeros(0, np.int64)
        self._dups: list[np.ndarray] = []
        self._firsts: list[np.ndarray] = []

    def add(self, block: np.ndarray, offset: int) -> np.ndarray:
        """Record a block whose first row is row ``offset``; returns the mask of its rows that
        repeat an earlier row (of this block or a previous one)."""
        h = row_hashes(block)
        rows = np.arange(offset, offset + h.shape[0], dtype=np.int64)
        dup, first = duplicate_pairs(np.concatenate([self._hashes, h]),
                                     np.concatenate([self._rows, rows]))
        mask = np.zeros(h.shape[0], bool)
        mask[dup - offset] = True
        self._hashes = np.concatenate([self._hashes, h[~mask]])
        self._rows = np.concatenate([self._rows, rows[~mask]])
        self._dups.append(dup)
        self._firsts.append(first)
        return mask

    def result(self) -> Duplicates:
        dup = np.concatenate(self._dups) if self._dups else np.zeros(0, np.int64)
        first = np.concatenate(self._firsts) if self._firsts else np.zeros(0, np.int64)
        return _summarise(dup, first)


def describe_duplicates(found: Duplicates, *, spent: bool = False) -> str:
    """The one-line error of a Kendall pass that met duplicate observations.

    Examples
    --------
    >>> describe_duplicates(Duplicates(1, ((142, 101),)))  # doctest: +NORMALIZE_WHITESPACE
    'The input has 1 duplicate row: row 142 repeats row 101 (rows numbered from 0 in storage
    order). The spherical Kendall mechanism is undefined for duplicate observations: remove them
    first (dppca-dask convert --drop-duplicates). No budget was spent.'
    """
    tail = (" The budget of the release stays spent (noise had been drawn)." if spent
            else " No budget was spent.")
    if found.count == 0:  # rows closer than the duplicate threshold, but not equal
        return ("The input has two rows at a squared distance of at most machine epsilon "
                "(2.2e-16), though no two rows are exactly equal: the spherical Kendall "
                "mechanism is undefined for such near-duplicate observations." + tail)
    return (f"The input has {found.describe()}. The spherical Kendall mechanism is undefined "
            "for duplicate observations: remove them first (dppca-dask convert "
            "--drop-duplicates)." + tail)
