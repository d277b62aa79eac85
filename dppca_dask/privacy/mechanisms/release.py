"""The value every mechanism returns: :class:`Release` (the noisy value and its spend record),
and :func:`join_notes`, how the mechanisms assemble a record's note from its parts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dppca_dask.privacy.accounting import SpendRecord

__all__ = [
    "Release",
    "join_notes",
    "note_label",
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


_DETAILS = re.compile(
    r"^(exact discrete|exact two-sided|certified eps0|diagonal sd = scale|counts$|threshold \d+ "
    r"counts$|sensitivity and scale are data-dependent|zero sensitivity|negative counts clipped|"
    r"projected onto counts)")
"""The parts of a note the record builders add to describe the noise (not the caller's label)."""


def note_label(note: str) -> str:
    """The caller's parts of a record's note, without the parts a record builder adds about the
    noise (its grid, certificate and layout): what a plan lists per record.

    Examples
    --------
    >>> note_label("clipped PC1: clipped mean; exact discrete Gaussian on grid 2^-36; "
    ...            "certified eps0 0.08, lattice term a 4.6e-11")
    'clipped PC1: clipped mean'
    """
    return join_notes(*(part for part in note.split("; ") if not _DETAILS.match(part)))
