"""A persistent, append-only budget ledger per dataset (JSON Lines, one event per line).

Each release through the runner appends events for the dataset it read:

* ``reserve`` -- written under an exclusive file lock *before any data is read*, after checking
  that the dataset's cumulative spend plus this release stays within the configured cap. A
  reservation counts as spent from that moment, so two concurrent runs cannot both slip under
  the cap.
* ``release`` -- written once the outputs are written (the reservation is confirmed; it carries
  the release's ledger records); or, with ``status="failed"``, written when the run fails
  *after* the first draw from its generator (during the fit, the outputs or the report): the
  spend stays counted, and the note names only the error type, never its message.
* ``cancel`` -- written if the run fails before any noise was drawn; it refunds the reservation.

A crash between ``reserve`` and the end leaves the reservation in force: the ledger errs on the
side of over-counting. Datasets are keyed by :func:`dataset_key` (see
:mod:`dppca_dask.io.identity`: one key for every spelling of a dataset, columns not included). Cumulative spend uses basic composition (sums of ε and of δ). Lines are
appended with ``O_APPEND`` under ``fcntl.flock`` and fsynced; existing lines are never rewritten.
No seed and no data statistic is ever written.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import math
import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from dppca_dask.errors import BudgetError, InputError
from dppca_dask.io.identity import resolve_dataset
from dppca_dask.privacy.budget import PrivacyBudget

__all__ = ["BudgetLedger", "LedgerEvent", "base_key", "dataset_key"]

EventKind = Literal["reserve", "release", "cancel"]


def dataset_key(path: str, array: str | None = None, columns: Sequence[Any] | None = None, *,
                storage_options: dict[str, Any] | None = None) -> str:
    """The ledger's name for 'this dataset': the resolved store and the array read in it.

    Every spelling of one dataset gives one key (see :func:`dppca_dask.io.identity.resolve_dataset`);
    ``columns`` is accepted for compatibility and ignored: any column selection of an array
    spends that array's budget. An omitted ``array`` is the one the reader picks.

    Examples
    --------
    >>> dataset_key("s3://bucket/x.zarr", "X")
    's3://bucket/x.zarr::X'
    >>> dataset_key("S3://bucket/./x.zarr/", "X", columns=["a"])
    's3://bucket/x.zarr::X'
    """
    return resolve_dataset(path, array, storage_options=storage_options).key


def base_key(key: str) -> str:
    """A key without the column suffix that ledgers written before columns left the key carry."""
    return key.partition("::columns=")[0]


@dataclass(frozen=True)
class LedgerEvent:
    """One line of the ledger."""

    kind: EventKind
    release_id: str
    dataset: str
    eps: float
    delta: float
    time: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat())
    task: str = ""
    output: str = ""
    seeded: bool = False
    records: tuple[dict[str, Any], ...] = ()
    status: str = ""
    """On ``release`` events: ``""`` (made) or ``"failed"`` (the run failed after noise was drawn;
    still spent)."""
    note: str = ""

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "records": list(self.records)}, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> LedgerEvent:
        data = json.loads(line)
        data["records"] = tuple(data.get("records", ()))
        return cls(**data)


class BudgetLedger:
    """The ledger file at ``path`` (created on first append)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @contextmanager
    def _locked(self) -> Iterator[Any]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _read(self) -> list[LedgerEvent]:
        if not self.path.exists():
            return []
        events = []
        for number, line in enumerate(self.path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                events.append(LedgerEvent.from_json(line))
            except (ValueError, TypeError) as exc:
                raise InputError(
                    f"Budget ledger {str(self.path)!r} line {number} is corrupt ({exc}); "
                    "refusing to guess the spent budget."
                ) from None
        return events

    @staticmethod
    def _append(fd: int, event: LedgerEvent) -> None:
        os.write(fd, (event.to_json() + "\n").encode())
        os.fsync(fd)

    def history(self, dataset: str | None = None) -> list[LedgerEvent]:
        """All events, or those of one dataset, in the order written."""
        events = self._read()
        return [e for e in events if dataset is None or base_key(e.dataset) == dataset]

    def spent(self, dataset: str) -> PrivacyBudget | None:
        """Cumulative (ε, δ) reserved or released and not cancelled; ``None`` if nothing."""
        events = self.history(dataset)
        cancelled = {e.release_id for e in events if e.kind == "cancel"}
        active = [e for e in events if e.kind == "reserve" and e.release_id not in cancelled]
        if not active:
            return None
        return PrivacyBudget(math.fsum(e.eps for e in active), math.fsum(e.delta for e in active))

    def reserve(
        self,
        dataset: str,
        planned: PrivacyBudget,
        *,
        cap: PrivacyBudget | None = None,
        task: str = "",
        output: str = "",
    ) -> str:
        """Check the cap and record a reservation atomically; return its release id."""
        with self._locked() as fd:
            spent = self.spent(dataset)
            eps = planned.eps + (spent.eps if spent else 0.0)
            delta = planned.delta + (spent.delta if spent else 0.0)
            if cap is not None and (eps > cap.eps * (1 + 1e-12) or delta > cap.delta * (1 + 1e-12)):
                already = f"eps = {spent.eps:g}, delta = {spent.delta:g}" if spent else "nothing"
                raise BudgetError(
                    f"Refused: dataset {dataset!r} has already spent {already}; this release "
                    f"(eps = {planned.eps:g}, delta = {planned.delta:g}) would bring it to "
                    f"eps = {eps:g}, delta = {delta:g}, past the cap eps = {cap.eps:g}, "
                    f"delta = {cap.delta:g} (ledger {str(self.path)!r}). No data was read."
                )
            release_id = uuid.uuid4().hex
            self._append(fd, LedgerEvent("reserve", release_id, dataset, planned.eps,
                                         planned.delta, task=task, output=output))
        return release_id

    def confirm(
        self,
        release_id: str,
        dataset: str,
        planned: PrivacyBudget,
        *,
        records: Sequence[dict[str, Any]] = (),
        task: str = "",
        output: str = "",
        seeded: bool = False,
    ) -> None:
        """Record that the reserved release was made (noise drawn), with its ledger records."""
        with self._locked() as fd:
            self._append(fd, LedgerEvent("release", release_id, dataset, planned.eps,
                                         planned.delta, task=task, output=output, seeded=seeded,
                                         records=tuple(records)))

    def fail_after_draw(self, release_id: str, dataset: str, planned: PrivacyBudget, *,
                        error: str, task: str = "", output: str = "", seeded: bool = False,
                        records: Sequence[dict[str, Any]] = ()) -> None:
        """Close a reservation whose run failed after noise was drawn: it stays spent.

        ``error`` must be an error *type* name; a message could carry data-dependent text.
        """
        with self._locked() as fd:
            self._append(fd, LedgerEvent("release", release_id, dataset, planned.eps,
                                         planned.delta, task=task, output=output, seeded=seeded,
                                         records=tuple(records), status="failed",
                                         note=f"failed after noise was drawn: {error}"))

    def cancel(self, release_id: str, dataset: str, planned: PrivacyBudget, *, task: str = "") -> None:
        """Refund a reservation whose run failed before any noise was drawn."""
        with self._locked() as fd:
            self._append(fd, LedgerEvent("cancel", release_id, dataset, planned.eps,
                                         planned.delta, task=task))

    def render(self, dataset: str | None = None) -> str:
        """A table of releases per dataset with cumulative totals (for ``dppca-dask budget``)."""
        events = self.history(dataset)
        if not events:
            return f"No releases recorded in {str(self.path)!r}" + (
                f" for {dataset!r}." if dataset else "."
            )
        lines = []
        for key in dict.fromkeys(base_key(e.dataset) for e in events):
            mine = [e for e in events if base_key(e.dataset) == key]
            status = {e.release_id: e for e in mine}
            lines += [f"Dataset: {key}", f"  {'time (UTC)':<32} {'task':<10} {'eps':>10} "
                      f"{'delta':>10}  status      output"]
            for e in mine:
                if e.kind != "reserve":
                    continue
                last = status[e.release_id]
                state = {"release": "released", "cancel": "cancelled"}.get(last.kind, "reserved")
                where = e.output
                if last.kind == "release" and last.status == "failed":
                    state, where = "failed", f"{e.output} (spent: {last.note})"
                lines.append(f"  {e.time:<32} {e.task:<10} {e.eps:>10.4g} {e.delta:>10.3g}  "
                             f"{state:<10}  {where}")
            spent = self.spent(key)
            total = f"eps = {spent.eps:g}, delta = {spent.delta:g}" if spent else "nothing"
            lines += [f"  cumulative (basic composition over reservations, releases and failures after noise): {total}", ""]
        return "\n".join(lines).rstrip()
