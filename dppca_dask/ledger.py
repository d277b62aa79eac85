"""A persistent, append-only budget ledger per dataset (JSON Lines, one event per line).

Each release through the runner appends events for the dataset it read:

* ``reserve`` -- written under an exclusive file lock *before any data is read*, after checking
  that the dataset's cumulative spend plus this release stays within the configured cap. A
  reservation counts as spent from that moment, so two concurrent runs cannot both slip under
  the cap.
* ``release`` -- written once the noise has been drawn (the reservation is confirmed; it carries
  the release's ledger records).
* ``cancel`` -- written if the run fails before any noise was drawn; it refunds the reservation.

A crash between ``reserve`` and the end leaves the reservation in force: the ledger errs on the
side of over-counting. Cumulative spend uses basic composition (sums of ε and of δ). Lines are
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

from dppca_dask.budget import PrivacyBudget
from dppca_dask.errors import BudgetError, InputError

__all__ = ["BudgetLedger", "LedgerEvent", "dataset_key"]

EventKind = Literal["reserve", "release", "cancel"]


def dataset_key(path: str, array: str | None = None, columns: Sequence[Any] | None = None) -> str:
    """A stable name for 'this dataset': the absolute path (or URL), array and column selection.

    Examples
    --------
    >>> dataset_key("s3://bucket/x.zarr", "X")
    's3://bucket/x.zarr::X'
    """
    location = path if "://" in path else str(Path(path).resolve())
    key = location + (f"::{array}" if array else "")
    if columns:
        key += "::columns=" + ",".join(str(c) for c in columns)
    return key


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
        return [e for e in events if dataset is None or e.dataset == dataset]

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
        for key in dict.fromkeys(e.dataset for e in events):
            mine = [e for e in events if e.dataset == key]
            status = {e.release_id: e.kind for e in mine}
            lines += [f"Dataset: {key}", f"  {'time (UTC)':<32} {'task':<10} {'eps':>10} "
                      f"{'delta':>10}  status      output"]
            for e in mine:
                if e.kind != "reserve":
                    continue
                state = {"release": "released", "cancel": "cancelled"}.get(
                    status[e.release_id], "reserved"
                )
                lines.append(f"  {e.time:<32} {e.task:<10} {e.eps:>10.4g} {e.delta:>10.3g}  "
                             f"{state:<10}  {e.output}")
            spent = self.spent(key)
            total = f"eps = {spent.eps:g}, delta = {spent.delta:g}" if spent else "nothing"
            lines += [f"  cumulative (basic composition, reserved + released): {total}", ""]
        return "\n".join(lines).rstrip()
