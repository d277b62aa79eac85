"""The value every mechanism returns: :class:`Release` (the noisy value and its spend record),
and :func:`join_notes`, how the mechanisms assemble a record's note from its parts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dppca_dask.privacy.accounting import SpendRecord

__all__ = [
    "Release",
    "join_notes",
]


@dataclass(frozen=True)
class Release:
    """A noisy value and the record of what producing it spent."""

    value: Any
    record: SpendRecord


def join_notes(*parts: str) -> str:
    """The non-empty ``parts`` joined by "; " (a record's note).

    Examples
    --------
    >>> join_notes("counts", "", "exact discrete Laplace")
    'counts; exact discrete Laplace'
    """
    return "; ".join(p for p in parts if p)
