"""JSON-lines ledgers of earlier versions: read them, and copy their history into a SQLite ledger.

Earlier versions appended one JSON event per line (``reserve``, then ``release`` -- possibly
with ``status="failed"`` -- or ``cancel``) to ``dppca-budget-ledger.jsonl`` next to the output
directory, keyed by ``"<location>::<array>"``. Such a file is never written to or deleted.
:func:`import_jsonl` copies it into a ledger (``dppca-dask budget import OLD.jsonl``; importing
twice adds nothing: reservation ids are kept), mapping each old key to the dataset's current id
when its store can be read (its ``dppca_dataset_id`` attribute, or the id derived from location,
array and shape), else to the id derived from the key alone. ``dppca-dask budget show --ledger
OLD.jsonl`` reads one through a private in-memory copy.

An old reservation without records counts as one basic (ε, δ) record; its process is unknown.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dppca_dask.errors import DPPCAError, InputError
from dppca_dask.io.identity import DatasetIdentity, resolve_dataset
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.pipeline.release_log import digest

__all__ = ["import_jsonl", "is_jsonl_ledger", "read_jsonl"]


def is_jsonl_ledger(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a non-empty file whose first line is a JSON object (an old ledger)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64).lstrip()
    except OSError:
        return False
    return head[:1] == b"{"


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The events of an old ledger, in the order written; a corrupt line is an error."""
    events = []
    text = Path(path).read_text()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
            if not isinstance(event, dict) or event.get("kind") not in ("reserve", "release",
                                                                         "cancel"):
                raise ValueError("not a ledger event")
            float(event["eps"]), float(event["delta"]), str(event["release_id"])
        except (ValueError, TypeError, KeyError) as exc:
            raise InputError(f"Budget ledger {str(path)!r} line {number} is corrupt ({exc}); "
                             "refusing to guess the spent budget.") from None
        events.append(event)
    return events


def _identity(key: str, cache: dict[str, DatasetIdentity]) -> DatasetIdentity:
    key = key.partition("::columns=")[0]  # keys of versions that put the columns in them
    if key not in cache:
        location, _, array = key.partition("::")
        try:
            cache[key] = resolve_dataset(location, array or None, pick=False)
        except DPPCAError:
            cache[key] = DatasetIdentity(location, array or None)
    return cache[key]


def _runs(events: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
    last: dict[str, dict[str, Any]] = {}
    for e in events:
        if e["kind"] != "reserve":
            last[e["release_id"]] = e
    for e in events:
        if e["kind"] == "reserve":
            yield e, last.get(e["release_id"])


def import_jsonl(ledger: Ledger, path: str | os.PathLike[str]) -> list[tuple[str, str, str]]:
    """Copy the old ledger at ``path`` into ``ledger``; returns ``(reservation id, old key,
    dataset id)`` for each reservation copied (those already there are skipped)."""
    events = read_jsonl(path)
    cache: dict[str, DatasetIdentity] = {}
    copied = []
    source = os.path.abspath(path)
    with ledger.connection() as con:
        for reserve, end in _runs(events):
            rid = str(reserve["release_id"])
            if con.execute("SELECT 1 FROM reservations WHERE id = ?", (rid,)).fetchone():
                continue
            identity = _identity(str(reserve["dataset"]), cache)
            ledger.ensure_dataset(con, identity)
            status, records, note = "reserved", None, ""
            if end is not None and end["kind"] == "cancel":
                status, note = "cancelled", "failed before any noise was drawn"
            elif end is not None:
                status = "failed" if end.get("status") == "failed" else "released"
                records = list(end.get("records") or ()) or None
                note = str(end.get("note", ""))
            eps, delta = float(reserve["eps"]), float(reserve["delta"])
            planned = [{"component": "imported", "mechanism": "reservation of an older ledger",
                        "eps": eps, "delta": delta, "rho": None, "status": "spent",
                        "note": f"imported from {source}"}]
            seeded = bool((end or reserve).get("seeded", False))
            planned_text = json.dumps(planned)
            records_text = None if records is None else json.dumps(records, sort_keys=True)
            con.execute("INSERT INTO reservations (id, dataset, status, task, output, eps, delta, "
                        "planned, records, seeded, note, started) VALUES "
                        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (rid, identity.dataset_id, status, str(reserve.get("task", "")),
                         str(reserve.get("output", "")), eps, delta, planned_text,
                         records_text, int(seeded), note, reserve.get("time")))
            ledger.log_event(con, "reserve", identity.dataset_id, rid, "reserved",
                          f"imported from {source}", at=reserve.get("time"),
                          payload={"eps": eps, "delta": delta, "task": str(reserve.get("task", "")),
                                   "seeded": seeded, "planned": digest(planned_text)})
            if status != "reserved":
                kind = "cancel" if status == "cancelled" else "release"
                ledger.log_event(con, kind, identity.dataset_id, rid, status, "imported",
                              payload=None if kind == "cancel" else {"records": digest(
                                  records_text)})
            copied.append((rid, str(reserve["dataset"]), identity.dataset_id))
    return copied
