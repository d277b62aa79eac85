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
from dppca_dask.pipeline.release_log import GENESIS, ChainReport, digest, entry_hash, verify

__all__ = ["COUNTED", "EVERY_ANALYST", "SEEDED_EVENT", "DatasetEntry", "Ledger", "Reservation",
           "check_ledger_file", "immediate_transaction", "run_alive"]


@contextmanager
def immediate_transaction(con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` transaction on ``con`` (autocommit mode): committed when the
    block ends, rolled back when it raises (Ctrl-C included). The budget ledger's and the
    release service's store's writes."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")

SCHEMA_VERSION = 2
"""1: the first SQLite ledger; 2: the release log (the events' hash chain), analysts and their
caps (:meth:`Ledger._migrate` upgrades a version-1 file when it is next written)."""
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
    pid INTEGER, host TEXT, started TEXT, analyst TEXT);
CREATE INDEX IF NOT EXISTS reservations_dataset ON reservations(dataset);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, dataset TEXT NOT NULL,
    reservation TEXT, status TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT '', time TEXT,
    origin TEXT, analyst TEXT, payload TEXT, prev TEXT, hash TEXT);
CREATE TABLE IF NOT EXISTS analyst_caps (
    dataset TEXT NOT NULL, analyst TEXT NOT NULL, cap_eps REAL, cap_delta REAL, cap_rho REAL,
    cap_set TEXT, PRIMARY KEY (dataset, analyst));
"""
_V2_COLUMNS = (("reservations", "analyst TEXT"), ("events", "origin TEXT"),
               ("events", "analyst TEXT"), ("events", "payload TEXT"), ("events", "prev TEXT"),
               ("events", "hash TEXT"))
"""The columns schema 2 adds to a version-1 ledger."""
EVERY_ANALYST = "*"
"""The analyst name under which a dataset's default per-analyst cap is stored."""


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
    analyst: str | None = None
    """Who asked for it (the release service's analyst; ``None``: a run of the CLI or API)."""

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
                "started": self.started, "analyst": self.analyst}


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
                       bool(row["seeded"]), row["note"], row["pid"], row["host"], row["started"],
                       _column(row, "analyst"))


def _column(row: sqlite3.Row, name: str) -> Any:
    """``row[name]``, ``None`` for a column a version-1 ledger lacks (read without upgrading)."""
    return row[name] if name in row.keys() else None  # noqa: SIM118 (Row's `in` is on values)


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
                with immediate_transaction(con):
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            con.execute(statement)
                    con.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)",
                                (str(SCHEMA_VERSION),))
                    self._migrate(con)
            fresh = not self._check_schema(con)
        except BaseException:
            con.close()
            raise
        if fresh:  # a file being created by another process: nothing recorded yet
            con.close()
            return _empty()
        return con

    @staticmethod
    def _migrate(con: sqlite3.Connection) -> None:
        """Within the schema transaction: upgrade a version-1 ledger (add the analyst and the
        release log's columns, then chain its entries in their order: the log starts here)."""
        row = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None or int(row[0]) >= SCHEMA_VERSION:
            return
        for table, column in _V2_COLUMNS:
            have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
            if column.split()[0] not in have:
                con.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
        prev = GENESIS
        rows = con.execute("SELECT * FROM events ORDER BY seq").fetchall()
        for event in rows:
            entry = {**dict(event), "origin": event["dataset"]}
            entry["hash"] = entry_hash(prev, entry)
            con.execute("UPDATE events SET origin = ?, prev = ?, hash = ? WHERE seq = ?",
                        (entry["origin"], prev, entry["hash"], event["seq"]))
            prev = entry["hash"]
        if rows:
            con.execute("INSERT OR REPLACE INTO meta VALUES ('release_log_head', ?)",
                        (json.dumps([len(rows), prev]),))
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))

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
                with immediate_transaction(con):
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
    def log_event(con: sqlite3.Connection, kind: str, dataset: str, reservation: str | None = None,
               status: str = "", note: str = "", timed: bool = False, *,
               analyst: str | None = None, payload: dict[str, Any] | None = None,
               at: str | None = None) -> None:
        """Append one entry to the release log (within ``con``'s transaction): chained to the
        last entry's hash (:mod:`~dppca_dask.pipeline.release_log`). ``payload``: what the
        entry pins of its row (amounts, digests of records); ``at``: a time given by the
        caller (an imported entry's), else now when ``timed``."""
        last = con.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        entry = {"seq": 1 if last is None else last["seq"] + 1, "kind": kind, "origin": dataset,
                 "reservation": reservation, "status": status, "note": note,
                 "time": at if at is not None else (_now() if timed else None),
                 "analyst": analyst,
                 "payload": None if payload is None else json.dumps(payload, sort_keys=True)}
        prev = GENESIS if last is None else (last["hash"] or GENESIS)
        entry["hash"] = entry_hash(prev, entry)
        con.execute("INSERT INTO events (seq, kind, dataset, origin, reservation, status, note, "
                    "time, analyst, payload, prev, hash) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (entry["seq"], kind, dataset, dataset, reservation, status, note,
                     entry["time"], analyst, entry["payload"], prev, entry["hash"]))
        con.execute("INSERT OR REPLACE INTO meta VALUES ('release_log_head', ?)",
                    (json.dumps([entry["seq"], entry["hash"]]),))

    def verify(self, *, head: str | None = None) -> ChainReport:
        """Check the release log and the tables against it
        (:func:`~dppca_dask.pipeline.release_log.verify`; read only)."""
        with self.connection(write=False) as con:
            return verify(con, head=head)

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
            con.execute("UPDATE analyst_caps SET dataset = ? WHERE dataset = ?", (new_id, old))
        else:
            con.execute("INSERT INTO datasets (id, location, id_source, created) VALUES "
                        "(?, ?, 'attribute', ?)", (new_id, identity.key, _now()))
        self.log_event(con, "adopt", new_id, note=f"adopted; the history of {old} carried over",
                    timed=True, payload={"from": old})

    def set_cap(self, identity: DatasetIdentity, cap: Cap | None, *,
                analyst: str | None = None) -> DatasetEntry:
        """Set (or remove) the custodian's cap: in the caps database when there is one (the
        operating system refuses a caller who cannot write it), else in this ledger.

        ``analyst``: the cap of that analyst's releases on the dataset (the release service's
        per-analyst cap; :data:`EVERY_ANALYST` for each analyst without one of their own),
        checked besides the dataset's cap."""
        if self.caps is not None:
            try:
                # journal "delete": read-only readers (the analysts) need no -shm file
                Ledger(self.caps, journal_mode="delete").set_cap(identity, cap, analyst=analyst)
            except (PermissionError, sqlite3.OperationalError) as exc:
                raise BudgetError(f"Refused: the caps database {str(self.caps)!r} is the "
                                  f"custodian's and cannot be written by this user ({exc}). "
                                  "No cap was changed.") from None
            with self.connection() as con:
                self.ensure_dataset(con, identity)
            entry = self.dataset(identity.dataset_id)
            assert entry is not None
            return entry
        return self._set_cap_here(identity, cap, analyst)

    def _set_cap_here(self, identity: DatasetIdentity, cap: Cap | None,
                      analyst: str | None = None) -> DatasetEntry:
        """The custodian's cap for the dataset (``None`` removes it); creates its account."""
        with self.connection() as con:
            self.ensure_dataset(con, identity)
            values = (None, None, None) if cap is None else (cap.eps, cap.delta, cap.rho)
            if analyst is None:
                con.execute("UPDATE datasets SET cap_eps = ?, cap_delta = ?, cap_rho = ?, "
                            "cap_set = ? WHERE id = ?", (*values, _now(), identity.dataset_id))
            elif cap is None:
                con.execute("DELETE FROM analyst_caps WHERE dataset = ? AND analyst = ?",
                            (identity.dataset_id, analyst))
            else:
                con.execute("INSERT OR REPLACE INTO analyst_caps VALUES (?, ?, ?, ?, ?, ?)",
                            (identity.dataset_id, analyst, *values, _now()))
            self.log_event(con, "cap", identity.dataset_id,
                        note="removed" if cap is None else cap.describe(), timed=True,
                        analyst=analyst,
                        payload=dict(zip(("eps", "delta", "rho"), values, strict=True)))
            row = con.execute("SELECT * FROM datasets WHERE id = ?",
                              (identity.dataset_id,)).fetchone()
        return _entry(row)

    def analyst_cap(self, dataset_id: str, analyst: str) -> Cap | None:
        """The cap of ``analyst``'s releases on the dataset: their own, else the dataset's
        default per-analyst cap (:data:`EVERY_ANALYST`), else ``None``."""
        if self.caps is not None:
            if not self.caps.exists():
                return None
            caps = self._caps_ledger()
            assert caps is not None
            return caps.analyst_cap(dataset_id, analyst)
        with self.connection(write=False) as con:
            return _analyst_cap(con, dataset_id, analyst)

    def analyst_caps(self, dataset_id: str) -> dict[str, Cap]:
        """Every per-analyst cap of the dataset (:data:`EVERY_ANALYST`: the default)."""
        if self.caps is not None:
            caps = self._caps_ledger() if self.caps.exists() else None
            return {} if caps is None else caps.analyst_caps(dataset_id)
        with self.connection(write=False) as con:
            if not _has_table(con, "analyst_caps"):
                return {}
            rows = con.execute("SELECT * FROM analyst_caps WHERE dataset = ? ORDER BY analyst",
                               (dataset_id,)).fetchall()
        return {r["analyst"]: Cap(r["cap_eps"], r["cap_delta"], r["cap_rho"]) for r in rows}

    def spent_by(self, dataset_id: str, analyst: str,
                 delta: float | None = None) -> Spend | None:
        """``analyst``'s cumulative spend on the dataset (``None``: nothing)."""
        counted = [r for r in self.reservations(dataset_id) if r.counted and r.analyst == analyst]
        if not counted:
            return None
        records = [rec for r in counted for rec in r.spend_records]
        basic = Basic(math.fsum(r.eps for r in counted), math.fsum(r.delta for r in counted))
        if delta is None:
            cap = self.analyst_cap(dataset_id, analyst)
            delta = cap.delta if cap is not None else None
        return cumulative(records, basic, delta, self.accountant)

    def reserve(self, identity: DatasetIdentity, planned: Sequence[dict[str, Any]],
                spend: Any, *, run_cap: Cap | None = None, require_cap: bool = False,
                task: str = "", output: str = "", seeded: bool = False,
                analyst: str | None = None) -> str:
        """Check the cap and record a reservation in one transaction; return its id.

        ``planned``: the release's planned spend records (dicts); ``spend``: their basic total.
        The cap is the custodian's, lowered by ``run_cap`` (a looser run cap is ignored with a
        :class:`PrivacyWarning`); with ``analyst`` (the release service), that analyst's cap on
        the dataset applies too (:meth:`analyst_cap`). Raises :class:`BudgetError` past a cap,
        after appending a ``refuse`` entry to the release log.
        """
        planned = [dict(r) for r in planned]
        refused: BudgetError | None = None
        with self.connection() as con:
            entry = self._capped(_entry(self.ensure_dataset(con, identity)))
            try:
                self._check_cap(con, identity, entry, planned, spend, run_cap, require_cap,
                                analyst)
            except BudgetError as exc:
                refused = exc
                self.log_event(con, "refuse", identity.dataset_id, None, "refused",
                            getattr(exc, "refusal", "past a cap"), timed=True,
                            analyst=analyst, payload={"eps": spend.eps, "delta": spend.delta,
                                                      "task": task})
            if refused is None:
                rid = uuid.uuid4().hex
                rho = math.fsum(float(r.get("rho") or 0.0) for r in planned)
                text = json.dumps(planned, sort_keys=True)
                con.execute("INSERT INTO reservations (id, dataset, status, task, output, eps, "
                            "delta, rho, planned, seeded, pid, host, started, analyst) VALUES "
                            "(?, ?, 'reserved', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (rid, identity.dataset_id, task, output, spend.eps, spend.delta,
                             rho, text, int(seeded), os.getpid(), socket.gethostname(),
                             _now(), analyst))
                self.log_event(con, "reserve", identity.dataset_id, rid, "reserved",
                            SEEDED_EVENT if seeded else "", timed=True, analyst=analyst,
                            payload={"eps": spend.eps, "delta": spend.delta, "task": task,
                                     "seeded": bool(seeded), "planned": digest(text)})
        if refused is not None:
            raise refused
        return rid

    def check(self, identity: DatasetIdentity, planned: Sequence[dict[str, Any]], spend: Any,
              *, run_cap: Cap | None = None, require_cap: bool = False,
              analyst: str | None = None) -> None:
        """The cap check of :meth:`reserve`, read-only (``plan``): raises the same
        :class:`BudgetError` past the cap, records nothing, creates no file or account."""
        planned = [dict(r) for r in planned]
        with self.connection(write=False) as con:
            row = con.execute("SELECT * FROM datasets WHERE id = ?",
                              (identity.dataset_id,)).fetchone()
            entry = self._capped(_entry(row) if row is not None else DatasetEntry(
                identity.dataset_id, identity.key, identity.id_source, "", None, None))
            self._check_cap(con, identity, entry, planned, spend, run_cap, require_cap, analyst)

    def _check_cap(self, con: sqlite3.Connection, identity: DatasetIdentity,
                   entry: DatasetEntry, planned: list[dict[str, Any]], spend: Any,
                   run_cap: Cap | None, require_cap: bool, analyst: str | None = None) -> None:
        """Raise :class:`BudgetError` when the counted reservations plus ``planned`` pass the
        cap (the custodian's, lowered by ``run_cap``), or ``analyst``'s counted reservations plus
        ``planned`` pass that analyst's cap, or the deployment requires a cap that is not set;
        the one check of :meth:`reserve` and :meth:`check`. The error's ``refusal`` says which
        (the release log's note)."""
        custodian = entry.cap
        if custodian is None and require_cap:
            raise _refusal(f"Refused: dataset {identity.dataset_id!r} ({identity.key}) has "
                           "no cap, and this deployment requires one "
                           "(dppca.ledger.require_cap); the custodian sets it with "
                           "`dppca-dask budget cap`. No data was read.", "no cap")
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
        if cap is not None:
            whose = "the custodian's" if cap == custodian else "the lowered"
            self._fit(counted, planned, spend, cap, lambda old, total: _refusal(
                f"Refused: dataset {identity.dataset_id!r} ({identity.key}) has already "
                f"spent {old}; this release (eps = {spend.eps:g}, delta = "
                f"{spend.delta:g}) would bring it to {total}, past {whose} "
                f"cap {cap.describe()} (ledger {str(self.path)!r}). No data was read.",
                "past the dataset's cap"))
        if analyst is None:
            return
        own = (self.analyst_cap(identity.dataset_id, analyst) if self.caps is not None
               else _analyst_cap(con, identity.dataset_id, analyst))
        if own is None:
            return
        mine = [r for r in counted if r.analyst == analyst]
        self._fit(mine, planned, spend, own, lambda old, total: _refusal(
            f"Refused: analyst {analyst!r} has already spent {old} on dataset "
            f"{identity.dataset_id!r}; this release (eps = {spend.eps:g}, delta = "
            f"{spend.delta:g}) would bring it to {total}, past the analyst's cap "
            f"{own.describe()}. No data was read.", "past the analyst's cap"))

    def _fit(self, counted: list[Reservation], planned: list[dict[str, Any]], spend: Any,
             cap: Cap, refuse: Any) -> None:
        """Raise ``refuse(spent before, total after)`` when ``counted`` plus ``planned`` pass
        ``cap`` (composed by this ledger's accountant)."""
        before = Basic(math.fsum(r.eps for r in counted), math.fsum(r.delta for r in counted))
        records = [rec for r in counted for rec in r.spend_records]
        ok, total = fits(records + planned, before + spend, cap, self.accountant)
        if not ok:
            old = ("nothing" if not counted
                   else cumulative(records, before, cap.delta, self.accountant).describe())
            raise refuse(old, total.describe())

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
            payload = None
            if status in ("released", "failed"):
                stored = con.execute("SELECT records FROM reservations WHERE id = ?",
                                     (rid,)).fetchone()[0]
                payload = {"records": digest(stored)}
            self.log_event(con, kind, row["dataset"], rid, status, note, timed=timed,
                        analyst=row["analyst"],
                        payload=payload)
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

    def cancel(self, rid: str, *, note: str = "failed before any noise was drawn") -> None:
        """Refund a reservation whose run failed (or was cancelled) before any noise was
        drawn."""
        self._close(rid, "cancelled", note=note, only_if=("reserved",))

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


def _refusal(message: str, kind: str) -> BudgetError:
    """A cap's refusal; ``kind`` is its note in the release log."""
    error = BudgetError(message)
    error.refusal = kind  # type: ignore[attr-defined]
    return error


def _has_table(con: sqlite3.Connection, name: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                       (name,)).fetchone() is not None


def _analyst_cap(con: sqlite3.Connection, dataset_id: str, analyst: str) -> Cap | None:
    """``analyst``'s cap on the dataset in this database: their own, else the default."""
    if not _has_table(con, "analyst_caps"):
        return None
    for name in (analyst, EVERY_ANALYST):
        row = con.execute("SELECT * FROM analyst_caps WHERE dataset = ? AND analyst = ?",
                          (dataset_id, name)).fetchone()
        if row is not None:
            return Cap(row["cap_eps"], row["cap_delta"], row["cap_rho"])
    return None


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
