"""The persistent budget ledger: one SQLite database per deployment, one account per dataset.

Where it lives is the deployment's choice (Dask config ``dppca.ledger.url``, default a per-user
data directory: :mod:`dppca_dask.pipeline.deployment`), not the run's, so another output folder
is the same ledger. Accounts are :attr:`~dppca_dask.io.identity.DatasetIdentity.dataset_id`:
the ``dppca_dataset_id`` attribute a store carries (a copy keeps it), else an id derived from
its canonical location, array and shape (:mod:`dppca_dask.io.identity`).

Tables: ``datasets`` (id, the last spelling seen, the custodian's cap), ``reservations`` (one
per run: status, planned records, the release's records, pid/host/start of the run) and
``events`` (append-only audit trail). Every write is one ``BEGIN IMMEDIATE`` transaction (WAL
journal by default, busy timeout), so concurrent runs on one machine are serialised: of N runs
against a cap that admits k, exactly k get a reservation.

A run's reservation, made *before any data is read* (:meth:`Ledger.reserve`): the dataset's
counted records plus the release's planned records (``plan.release.records``) must fit the cap
(:func:`fits`: the tight figure of :func:`dppca_dask.privacy.composition.compose`, or the basic
sums). Statuses: ``reserved`` (run in progress, or killed: counts until the custodian frees it
with ``dppca-dask budget release``), ``released`` (outputs written), ``failed`` (failed after
noise was drawn: spent; the note names only the error type), ``cancelled`` (failed before any
draw: refunded), ``freed`` (a stale reservation the custodian released: refunded) and
``closed`` (a stale reservation the custodian kept as spent). ``reserved``, ``released``,
``failed`` and ``closed`` count against the cap.

Nothing data-dependent is written beyond the mechanisms' records: no seed, no error message, no
time after the data pass (a run's end time would reveal how long the data took); the times
stored are the reservation's start (before any data is read) and the custodian's actions.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import socket
import sqlite3
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dppca_dask.errors import BudgetError, InputError, PrivacyWarning
from dppca_dask.io.identity import DatasetIdentity
from dppca_dask.pipeline.budget_cap import Basic, Cap, Spend, cumulative, fits

__all__ = ["COUNTED", "SEEDED_EVENT", "DatasetEntry", "Ledger", "Reservation", "check_ledger_file",
           "run_alive"]

SCHEMA_VERSION = 1
COUNTED = ("reserved", "released", "failed", "closed")
_SQLITE_HEADER = b"SQLite format 3\x00"
_BUSY_MS = 60_000
SEEDED_EVENT = "NOT PRIVATE: noise generator seeded by the caller"
"""The note of a seeded release's ledger events (its spend is counted all the same)."""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS datasets (
    id TEXT PRIMARY KEY, location TEXT NOT NULL, id_source TEXT NOT NULL, created TEXT NOT NULL,
    cap_eps REAL, cap_delta REAL, cap_rho REAL, cap_set TEXT);
CREATE TABLE IF NOT EXISTS reservations (
    id TEXT PRIMARY KEY, dataset TEXT NOT NULL REFERENCES datasets(id) ON UPDATE CASCADE,
    status TEXT NOT NULL, task TEXT NOT NULL DEFAULT '', output TEXT NOT NULL DEFAULT '',
    eps REAL NOT NULL, delta REAL NOT NULL, rho REAL, planned TEXT NOT NULL,
    records TEXT, seeded INTEGER NOT NULL DEFAULT 0, note TEXT NOT NULL DEFAULT '',
    pid INTEGER, host TEXT, started TEXT);
CREATE INDEX IF NOT EXISTS reservations_dataset ON reservations(dataset);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, dataset TEXT NOT NULL,
    reservation TEXT, status TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT '', time TEXT);
"""


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


@dataclass(frozen=True)
class Reservation:
    """One run's row: what it planned, what it released, and who made it."""

    id: str
    dataset: str
    status: str
    task: str
    output: str
    eps: float
    delta: float
    planned: tuple[dict[str, Any], ...]
    records: tuple[dict[str, Any], ...] | None
    seeded: bool
    note: str
    pid: int | None
    host: str | None
    started: str | None

    @property
    def counted(self) -> bool:
        return self.status in COUNTED

    @property
    def spend_records(self) -> tuple[dict[str, Any], ...]:
        """The release's records once it was made, else the planned ones (an upper bound)."""
        return self.records if self.status == "released" and self.records else self.planned

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "dataset": self.dataset, "status": self.status,
                "task": self.task, "output": self.output, "eps": self.eps, "delta": self.delta,
                "planned": list(self.planned),
                "records": None if self.records is None else list(self.records),
                "seeded": self.seeded, "note": self.note, "pid": self.pid, "host": self.host,
                "started": self.started}


@dataclass(frozen=True)
class DatasetEntry:
    """A dataset's account: its id, the last spelling seen and the custodian's cap."""

    id: str
    location: str
    id_source: str
    created: str
    cap: Cap | None
    cap_set: str | None


def _reservation(row: sqlite3.Row) -> Reservation:
    return Reservation(row["id"], row["dataset"], row["status"], row["task"], row["output"],
                       row["eps"], row["delta"], tuple(json.loads(row["planned"])),
                       None if row["records"] is None else tuple(json.loads(row["records"])),
                       bool(row["seeded"]), row["note"], row["pid"], row["host"], row["started"])


def _entry(row: sqlite3.Row) -> DatasetEntry:
    cap = None
    if row["cap_eps"] is not None or row["cap_rho"] is not None:
        cap = Cap(row["cap_eps"], row["cap_delta"], row["cap_rho"])
    return DatasetEntry(row["id"], row["location"], row["id_source"], row["created"], cap,
                        row["cap_set"])


def check_ledger_file(path: Path) -> None:
    """Refuse a file that is not a SQLite ledger (a JSON-lines ledger of an earlier version is
    never written to: it must be imported)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_SQLITE_HEADER))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError(f"Cannot read the budget ledger {str(path)!r}: {exc}.") from None
    if not head or head == _SQLITE_HEADER:
        return
    if head.lstrip()[:1] == b"{":
        raise InputError(f"The budget ledger {str(path)!r} is a JSON-lines ledger written by an "
                         "earlier version of dppca_dask; it is read only. Copy its history into "
                         "the SQLite ledger with `dppca-dask budget import "
                         f"{path}` (the file is kept as it is) and point dppca.ledger.url at "
                         "the SQLite file.")
    raise InputError(f"The budget ledger {str(path)!r} is not a SQLite database.")


class Ledger:
    """The SQLite ledger at ``path`` (``":memory:"``: a private in-memory one).

    ``create=False`` refuses a file that does not exist (read-only commands never create one).
    ``caps``: the custodian's caps database (``dppca.ledger.caps_url``), a second file of the same
    schema that only the custodian can write (rollback journal, so that readers need no write
    access): then every cap is read from it and written to it, and the caps columns of this
    ledger (which the analysts' runs must be able to write) are ignored.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 journal_mode: str = "wal", caps: str | os.PathLike[str] | None = None,
                 accountant: str = "tight") -> None:
        self.memory = os.fspath(path) == ":memory:"
        self.path = Path(path) if not self.memory else Path(":memory:")
        self.journal_mode = journal_mode
        self.caps = None if caps is None else Path(caps)
        self.accountant = accountant
        """How spends compose for the cap (:data:`~dppca_dask.pipeline.budget_cap.ACCOUNTANTS`)."""
        self._shared: sqlite3.Connection | None = None
        if self.memory:
            self._shared = self._open(create=True)
            return
        check_ledger_file(self.path)
        if not create and not self.path.exists():
            raise InputError(f"The budget ledger {str(self.path)!r} does not exist: no release "
                             "has been recorded there (check dppca.ledger.url or --ledger).")

    def _open(self, *, create: bool) -> sqlite3.Connection:
        if self.memory:
            con = sqlite3.connect(":memory:", isolation_level=None)
        else:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            elif not self.path.exists():
                raise InputError(f"The budget ledger {str(self.path)!r} does not exist.")
            con = sqlite3.connect(self.path, timeout=_BUSY_MS / 1000, isolation_level=None)
        con.row_factory = sqlite3.Row
        con.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
        con.execute("PRAGMA foreign_keys = ON")
        if not self.memory:
            self._journal(con)
        con.execute("PRAGMA synchronous = FULL")
        try:
            if create:
                with self._transaction(con):
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            con.execute(statement)
                    con.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)",
                                (str(SCHEMA_VERSION),))
            fresh = not self._check_schema(con)
        except BaseException:
            con.close()
            raise
        if fresh:  # a file being created by another process: nothing recorded yet
            con.close()
            return _empty()
        return con

    def _check_schema(self, con: sqlite3.Connection) -> bool:
        """Whether the ledger's tables are there (``False``: a database without any table);
        another database, or a newer schema, is an error."""
        if con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            return False
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.DatabaseError:
            row = None
        if row is None:
            raise InputError(f"The budget ledger {str(self.path)!r} is a SQLite database "
                             "without the ledger's tables (check dppca.ledger.url or --ledger).")
        if int(row[0]) > SCHEMA_VERSION:
            raise InputError(f"The budget ledger {str(self.path)!r} was written by a newer "
                             f"version of dppca_dask (schema {row[0]}); upgrade to use it.")
        return True

    def _journal(self, con: sqlite3.Connection) -> None:
        deadline = time.monotonic() + _BUSY_MS / 1000
        while True:  # switching the journal needs a moment alone with the file
            try:
                mode = con.execute(f"PRAGMA journal_mode = {self.journal_mode}").fetchone()[0]
                break
            except sqlite3.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        if str(mode).lower() != self.journal_mode:
            raise InputError(f"The budget ledger {str(self.path)!r} could not use the "
                             f"{self.journal_mode!r} journal (got {mode!r}).")

    @staticmethod
    @contextmanager
    def _transaction(con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    @contextmanager
    def connection(self, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        """A connection; with ``write`` inside one ``BEGIN IMMEDIATE`` transaction."""
        if self._shared is not None:
            con = self._shared
        elif write or self.path.exists():
            con = self._open(create=write)
        else:  # nothing recorded yet: read an empty ledger, create no file
            con = _empty()
        try:
            if write:
                with self._transaction(con):
                    yield con
            else:
                yield con
        finally:
            if self._shared is None:
                con.close()

    # -- reading -------------------------------------------------------------------------------

    def dataset(self, dataset_id: str) -> DatasetEntry | None:
        with self.connection(write=False) as con:
            row = con.execute("SELECT * FROM datasets WHERE id = ?", (dataset_id,)).fetchone()
        return None if row is None else self._capped(_entry(row))

    def datasets(self) -> list[DatasetEntry]:
        with self.connection(write=False) as con:
            rows = con.execute("SELECT * FROM datasets ORDER BY created, id").fetchall()
        return [self._capped(_entry(r)) for r in rows]

    def _caps_ledger(self) -> Ledger | None:
        """The custodian's caps database (read only here; ``None`` when caps live here)."""
        if self.caps is None:
            return None
        return Ledger(self.caps, create=False, journal_mode="delete")

    def _capped(self, entry: DatasetEntry) -> DatasetEntry:
        """``entry`` with the custodian's cap from the caps database, when there is one."""
        if self.caps is None:
            return entry
        if not self.caps.exists():  # no cap set yet
            return replace(entry, cap=None, cap_set=None)
        caps = self._caps_ledger()
        assert caps is not None
        held = caps.dataset(entry.id)
        return replace(entry, cap=None if held is None else held.cap,
                       cap_set=None if held is None else held.cap_set)

    def reservations(self, dataset_id: str | None = None) -> list[Reservation]:
        with self.connection(write=False) as con:
            rows = con.execute("SELECT r.* FROM reservations r JOIN events e ON e.reservation = "
                               "r.id AND e.kind = 'reserve' WHERE ? IS NULL OR r.dataset = ? "
                               "ORDER BY e.seq", (dataset_id, dataset_id)).fetchall()
        return [_reservation(r) for r in rows]

    def reservation(self, reservation_id: str) -> Reservation | None:
        with self.connection(write=False) as con:
            row = con.execute("SELECT * FROM reservations WHERE id = ?",
                              (reservation_id,)).fetchone()
        return None if row is None else _reservation(row)

    def events(self, dataset_id: str | None = None) -> list[dict[str, Any]]:
        """The audit trail in order: ``kind`` (reserve, release, cancel, free, close, cap,
        adopt, import), ``dataset``, ``reservation``, ``status``, ``note``, ``time``."""
        with self.connection(write=False) as con:
            rows = con.execute("SELECT * FROM events WHERE ? IS NULL OR dataset = ? ORDER BY seq",
                               (dataset_id, dataset_id)).fetchall()
        return [dict(r) for r in rows]

    def spent(self, dataset_id: str, delta: float | None = None) -> Spend | None:
        """The dataset's cumulative spend over its counted reservations (``None``: nothing)."""
        counted = [r for r in self.reservations(dataset_id) if r.counted]
        if not counted:
            return None
        records = [rec for r in counted for rec in r.spend_records]
        basic = Basic(math.fsum(r.eps for r in counted),
                              math.fsum(r.delta for r in counted))
        entry = self.dataset(dataset_id)
        at = delta if delta is not None else (entry.cap.delta if entry and entry.cap else None)
        return cumulative(records, basic, at, self.accountant)

    # -- writing -------------------------------------------------------------------------------

    @staticmethod
    def _event(con: sqlite3.Connection, kind: str, dataset: str, reservation: str | None = None,
               status: str = "", note: str = "", timed: bool = False) -> None:
        con.execute("INSERT INTO events (kind, dataset, reservation, status, note, time) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (kind, dataset, reservation, status, note, _now() if timed else None))

    @staticmethod
    def ensure_dataset(con: sqlite3.Connection, identity: DatasetIdentity) -> sqlite3.Row:
        """The dataset's account (created if new; its spelling updated), within ``con``'s
        transaction."""
        con.execute("INSERT OR IGNORE INTO datasets (id, location, id_source, created) "
                    "VALUES (?, ?, ?, ?)",
                    (identity.dataset_id, identity.key, identity.id_source, _now()))
        con.execute("UPDATE datasets SET location = ? WHERE id = ?",
                    (identity.key, identity.dataset_id))
        return con.execute("SELECT * FROM datasets WHERE id = ?",
                           (identity.dataset_id,)).fetchone()

    def adopt(self, con: sqlite3.Connection, identity: DatasetIdentity, new_id: str) -> None:
        """Within ``con``'s transaction: move the account of ``identity`` (a derived id) to
        ``new_id`` -- its cap, reservations and events -- so adopting keeps the spend."""
        old = identity.dataset_id
        if con.execute("SELECT 1 FROM datasets WHERE id = ?", (old,)).fetchone():
            con.execute("UPDATE datasets SET id = ?, id_source = 'attribute' WHERE id = ?",
                        (new_id, old))
            con.execute("UPDATE events SET dataset = ? WHERE dataset = ?", (new_id, old))
        else:
            con.execute("INSERT INTO datasets (id, location, id_source, created) VALUES "
                        "(?, ?, 'attribute', ?)", (new_id, identity.key, _now()))
        self._event(con, "adopt", new_id, note=f"adopted; the history of {old} carried over",
                    timed=True)

    def set_cap(self, identity: DatasetIdentity, cap: Cap | None) -> DatasetEntry:
        """Set (or remove) the custodian's cap: in the caps database when there is one (the
        operating system refuses a caller who cannot write it), else in this ledger."""
        if self.caps is not None:
            try:
                # journal "delete": read-only readers (the analysts) need no -shm file
                Ledger(self.caps, journal_mode="delete").set_cap(identity, cap)
            except (PermissionError, sqlite3.OperationalError) as exc:
                raise BudgetError(f"Refused: the caps database {str(self.caps)!r} is the "
                                  f"custodian's and cannot be written by this user ({exc}). "
                                  "No cap was changed.") from None
            with self.connection() as con:
                self.ensure_dataset(con, identity)
            entry = self.dataset(identity.dataset_id)
            assert entry is not None
            return entry
        return self._set_cap_here(identity, cap)

    def _set_cap_here(self, identity: DatasetIdentity, cap: Cap | None) -> DatasetEntry:
        """The custodian's cap for the dataset (``None`` removes it); creates its account."""
        with self.connection() as con:
            self.ensure_dataset(con, identity)
            values = (None, None, None) if cap is None else (cap.eps, cap.delta, cap.rho)
            con.execute("UPDATE datasets SET cap_eps = ?, cap_delta = ?, cap_rho = ?, "
                        "cap_set = ? WHERE id = ?", (*values, _now(), identity.dataset_id))
            self._event(con, "cap", identity.dataset_id,
                        note="removed" if cap is None else cap.describe(), timed=True)
            row = con.execute("SELECT * FROM datasets WHERE id = ?",
                              (identity.dataset_id,)).fetchone()
        return _entry(row)

    def reserve(self, identity: DatasetIdentity, planned: Sequence[dict[str, Any]],
                spend: Any, *, run_cap: Cap | None = None, require_cap: bool = False,
                task: str = "", output: str = "", seeded: bool = False) -> str:
        """Check the cap and record a reservation in one transaction; return its id.

        ``planned``: the release's planned spend records (dicts); ``spend``: their basic total.
        The cap is the custodian's, lowered by ``run_cap`` (a looser run cap is ignored with a
        :class:`PrivacyWarning`). Raises :class:`BudgetError` past the cap.
        """
        planned = [dict(r) for r in planned]
        with self.connection() as con:
            entry = self._capped(_entry(self.ensure_dataset(con, identity)))
            self._check_cap(con, identity, entry, planned, spend, run_cap, require_cap)
            rid = uuid.uuid4().hex
            rho = math.fsum(float(r.get("rho") or 0.0) for r in planned)
            con.execute("INSERT INTO reservations (id, dataset, status, task, output, eps, "
                        "delta, rho, planned, seeded, pid, host, started) VALUES "
                        "(?, ?, 'reserved', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (rid, identity.dataset_id, task, output, spend.eps, spend.delta, rho,
                         json.dumps(planned, sort_keys=True), int(seeded), os.getpid(),
                         socket.gethostname(), _now()))
            self._event(con, "reserve", identity.dataset_id, rid, "reserved",
                        SEEDED_EVENT if seeded else "", timed=True)
        return rid

    def check(self, identity: DatasetIdentity, planned: Sequence[dict[str, Any]], spend: Any,
              *, run_cap: Cap | None = None, require_cap: bool = False) -> None:
        """The cap check of :meth:`reserve`, read-only (``plan``): raises the same
        :class:`BudgetError` past the cap, records nothing, creates no file or account."""
        planned = [dict(r) for r in planned]
        with self.connection(write=False) as con:
            row = con.execute("SELECT * FROM datasets WHERE id = ?",
                              (identity.dataset_id,)).fetchone()
            entry = self._capped(_entry(row) if row is not None else DatasetEntry(
                identity.dataset_id, identity.key, identity.id_source, "", None, None))
            self._check_cap(con, identity, entry, planned, spend, run_cap, require_cap)

    def _check_cap(self, con: sqlite3.Connection, identity: DatasetIdentity,
                   entry: DatasetEntry, planned: list[dict[str, Any]], spend: Any,
                   run_cap: Cap | None, require_cap: bool) -> None:
        """Raise :class:`BudgetError` when the counted reservations plus ``planned`` pass the
        cap (the custodian's, lowered by ``run_cap``) or the deployment requires a cap that is
        not set; the one check of :meth:`reserve` and :meth:`check`."""
        custodian = entry.cap
        if custodian is None and require_cap:
            raise BudgetError(f"Refused: dataset {identity.dataset_id!r} ({identity.key}) has "
                              "no cap, and this deployment requires one "
                              "(dppca.ledger.require_cap); the custodian sets it with "
                              "`dppca-dask budget cap`. No data was read.")
        cap, ignored = (custodian.lowered_by(run_cap) if custodian is not None
                        else (run_cap, []))
        if ignored:
            warnings.warn(f"The run config's budget_ledger.cap is looser than the "
                          f"custodian's cap for dataset {identity.dataset_id!r} in "
                          f"{', '.join(ignored)}; the custodian's applies.",
                          PrivacyWarning, stacklevel=4)
        rows = con.execute("SELECT * FROM reservations WHERE dataset = ?",
                           (identity.dataset_id,)).fetchall()
        counted = [r for r in map(_reservation, rows) if r.counted]
        if cap is None:
            return
        before = Basic(math.fsum(r.eps for r in counted), math.fsum(r.delta for r in counted))
        after = before + spend
        records = [rec for r in counted for rec in r.spend_records] + planned
        ok, total = fits(records, after, cap, self.accountant)
        if not ok:
            old = ("nothing" if not counted else cumulative(
                [rec for r in counted for rec in r.spend_records], before,
                cap.delta, self.accountant).describe())
            whose = "the custodian's" if cap == custodian else "the lowered"
            raise BudgetError(
                f"Refused: dataset {identity.dataset_id!r} ({identity.key}) has already "
                f"spent {old}; this release (eps = {spend.eps:g}, delta = "
                f"{spend.delta:g}) would bring it to {total.describe()}, past {whose} "
                f"cap {cap.describe()} (ledger {str(self.path)!r}). No data was read.")

    def _close(self, rid: str, status: str, *, records: Sequence[dict[str, Any]] | None = None,
               seeded: bool | None = None, note: str = "", only_if: Sequence[str] = (),
               timed: bool = False) -> Reservation:
        with self.connection() as con:
            row = con.execute("SELECT * FROM reservations WHERE id = ?", (rid,)).fetchone()
            if row is None:
                raise InputError(f"No reservation {rid!r} in the budget ledger "
                                 f"{str(self.path)!r}.")
            if only_if and row["status"] not in only_if:
                return _reservation(row)
            con.execute("UPDATE reservations SET status = ?, note = ?, records = COALESCE(?, "
                        "records), seeded = COALESCE(?, seeded) WHERE id = ?",
                        (status, note, None if records is None else json.dumps(
                            [dict(r) for r in records], sort_keys=True),
                         None if seeded is None else int(seeded), rid))
            if seeded and status in ("released", "failed"):
                note = f"{SEEDED_EVENT}; {note}" if note else SEEDED_EVENT
            kind = {"released": "release", "failed": "release", "cancelled": "cancel",
                    "freed": "free", "closed": "close"}[status]
            self._event(con, kind, row["dataset"], rid, status, note, timed=timed)
            row = con.execute("SELECT * FROM reservations WHERE id = ?", (rid,)).fetchone()
        return _reservation(row)

    def confirm(self, rid: str, records: Sequence[dict[str, Any]], *, seeded: bool = False) -> None:
        """The reserved release was made (outputs written): it is spent, with its records."""
        self._close(rid, "released", records=records, seeded=seeded)

    def fail_after_draw(self, rid: str, *, error: str, records: Sequence[dict[str, Any]] = (),
                        seeded: bool = False) -> None:
        """The run failed after noise was drawn: the reservation stays spent.

        ``error`` must be an error *type* name; a message could carry data-dependent text.
        """
        self._close(rid, "failed", records=list(records) or None, seeded=seeded,
                    note=f"failed after noise was drawn: {error}")

    def cancel(self, rid: str) -> None:
        """Refund a reservation whose run failed before any noise was drawn."""
        self._close(rid, "cancelled", note="failed before any noise was drawn",
                    only_if=("reserved",))

    def free(self, rid: str, *, spent: bool = False, force: bool = False) -> Reservation:
        """The custodian closes a stale ``reserved`` reservation: refunded (``freed``) or, with
        ``spent``, kept as spent (``closed``). A run still alive on this host is refused
        unless ``force``."""
        current = self.reservation(rid)
        if current is None:
            raise InputError(f"No reservation {rid!r} in the budget ledger {str(self.path)!r}.")
        if current.status != "reserved":
            raise BudgetError(f"Reservation {rid!r} is {current.status}, not reserved: only an "
                              "unfinished run's reservation can be released.")
        if not force and run_alive(current):
            raise BudgetError(f"Reservation {rid!r} belongs to a run that is still running (pid "
                              f"{current.pid} on this host, started {current.started}); wait "
                              "for it, or pass --force.")
        status = "closed" if spent else "freed"
        note = ("closed as spent by the custodian" if spent
                else "released by the custodian: run not finished")
        return self._close(rid, status, note=note, only_if=("reserved",), timed=True)


def _empty() -> sqlite3.Connection:
    """A connection to an empty in-memory ledger (what a ledger not yet written reads as)."""
    con = Ledger(":memory:")._shared
    assert con is not None
    return con


def run_alive(reservation: Reservation) -> bool | None:
    """Whether the reservation's process still runs (``None``: it ran on another host)."""
    if reservation.pid is None or reservation.host != socket.gethostname():
        return None
    try:
        os.kill(reservation.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
