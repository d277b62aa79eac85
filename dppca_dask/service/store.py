"""The server's own state, under ``state_directory`` (the custodian's; created mode 700):
``service.sqlite`` (analysts' tokens, stored hashed; the durable job queue), ``jobs/<id>/``
(each job's files: the worker's log, progress, outcome and the ``output/`` folder that the
analyst may download) and ``audit.log`` (one JSON line per refused request and job event).

Every write is one ``BEGIN IMMEDIATE`` transaction, so the API's threads, the queue's thread and
the token commands of another process can share the file.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dppca_dask.errors import InputError, ParameterError
from dppca_dask.pipeline.ledger import immediate_transaction
from dppca_dask.service.settings import NAME

__all__ = ["JOB_STATES", "Job", "ServiceStore", "TokenInfo", "now"]

JOB_STATES = ("queued", "running", "released", "failed", "cancelled")
"""A job's states: waiting (its reservation made), its process running, then one of the
three ends."""
TOKEN_PREFIX = "dppca_"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY, analyst TEXT NOT NULL, hash TEXT NOT NULL UNIQUE, created TEXT NOT NULL,
    revoked TEXT, note TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, analyst TEXT NOT NULL, dataset TEXT NOT NULL, task TEXT NOT NULL,
    state TEXT NOT NULL, reservation TEXT, config TEXT NOT NULL, submitted TEXT NOT NULL,
    passes INTEGER, eps REAL NOT NULL, delta REAL NOT NULL, message TEXT NOT NULL DEFAULT '',
    pid INTEGER, attempt INTEGER NOT NULL DEFAULT 0, cancel INTEGER NOT NULL DEFAULT 0,
    withheld TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
"""


def now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class TokenInfo:
    id: str
    analyst: str
    created: str
    revoked: str | None
    note: str


@dataclass(frozen=True)
class Job:
    """One submitted release: who, which dataset, its state and its reservation."""

    id: str
    analyst: str
    dataset: str
    task: str
    state: str
    reservation: str | None
    config: dict[str, Any]
    """The server's run config (the analyst's, with the catalogue's path and the server's
    cluster and output folder), as :meth:`~dppca_dask.pipeline.config.RunConfig.to_dict`
    gives it plus the ``rng`` (always null)."""
    submitted: str
    passes: int | None
    eps: float
    delta: float
    message: str
    pid: int | None
    attempt: int
    cancel: bool
    withheld: str
    order: int

    @property
    def finished(self) -> bool:
        return self.state in ("released", "failed", "cancelled")


def _job(row: sqlite3.Row) -> Job:
    return Job(row["id"], row["analyst"], row["dataset"], row["task"], row["state"],
               row["reservation"], json.loads(row["config"]), row["submitted"], row["passes"],
               row["eps"], row["delta"], row["message"], row["pid"], row["attempt"],
               bool(row["cancel"]), row["withheld"], row["rowid"])


class ServiceStore:
    """The server's state folder (see the module docstring)."""

    def __init__(self, state: str | os.PathLike[str], *, create: bool = True) -> None:
        self.root = Path(state)
        if create:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            (self.root / "jobs").mkdir(exist_ok=True, mode=0o700)
        elif not self.root.is_dir():
            raise InputError(f"The server's state directory {str(self.root)!r} does not exist "
                             "(state_directory of the service file).")
        self.path = self.root / "service.sqlite"
        self._audit_lock = threading.Lock()
        with self.connection() as con:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)

    @contextmanager
    def connection(self, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        con.row_factory = sqlite3.Row
        try:
            con.execute("PRAGMA busy_timeout = 60000")
            if write:
                con.execute("PRAGMA journal_mode = wal")
                with immediate_transaction(con):
                    yield con
            else:
                yield con
        finally:
            con.close()

    # -- tokens --------------------------------------------------------------------------------

    def add_token(self, analyst: str, note: str = "") -> tuple[str, str]:
        """A new bearer token for ``analyst``: ``(its id, the token)``; only its sha256 is
        kept, so the token is shown once."""
        if not NAME.match(analyst or ""):
            raise ParameterError("The 'ANALYST' argument of token add must be letters, digits "
                                 "and _ . @ - (at most 100, starting with a letter or digit). "
                                 f"Got {analyst!r} instead.")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        digest = _hash(token)
        with self.connection() as con:
            con.execute("INSERT INTO tokens VALUES (?, ?, ?, ?, NULL, ?)",
                        (digest[:12], analyst, digest, now(), note))
        return digest[:12], token

    def revoke(self, which: str) -> list[TokenInfo]:
        """Revoke the token with id ``which``, or every token of the analyst ``which``."""
        with self.connection() as con:
            rows = con.execute("SELECT * FROM tokens WHERE (id = ? OR analyst = ?) AND revoked "
                               "IS NULL", (which, which)).fetchall()
            con.executemany("UPDATE tokens SET revoked = ? WHERE id = ?",
                            [(now(), r["id"]) for r in rows])
        return [TokenInfo(r["id"], r["analyst"], r["created"], now(), r["note"]) for r in rows]

    def tokens(self) -> list[TokenInfo]:
        with self.connection(write=False) as con:
            rows = con.execute("SELECT * FROM tokens ORDER BY created, id").fetchall()
        return [TokenInfo(r["id"], r["analyst"], r["created"], r["revoked"], r["note"])
                for r in rows]

    def analyst_of(self, token: str) -> str | None:
        """The analyst of a valid (not revoked) token, else ``None``."""
        with self.connection(write=False) as con:
            row = con.execute("SELECT analyst FROM tokens WHERE hash = ? AND revoked IS NULL",
                              (_hash(token),)).fetchone()
        return None if row is None else str(row[0])

    # -- jobs ----------------------------------------------------------------------------------

    def job_dir(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    def add_job(self, con: sqlite3.Connection, job_id: str, analyst: str, dataset: str,
                task: str, reservation: str, config: dict[str, Any], passes: int | None,
                eps: float, delta: float) -> None:
        """Within ``con``'s transaction: a queued job."""
        con.execute("INSERT INTO jobs (id, analyst, dataset, task, state, reservation, config, "
                    "submitted, passes, eps, delta) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, "
                    "?)", (job_id, analyst, dataset, task, reservation, json.dumps(config),
                           now(), passes, eps, delta))

    def job(self, job_id: str) -> Job | None:
        with self.connection(write=False) as con:
            row = con.execute("SELECT rowid, * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else _job(row)

    def jobs(self, *, analyst: str | None = None, states: tuple[str, ...] = JOB_STATES
             ) -> list[Job]:
        marks = ", ".join("?" * len(states))
        with self.connection(write=False) as con:
            rows = con.execute(f"SELECT rowid, * FROM jobs WHERE state IN ({marks}) AND "
                               "(? IS NULL OR analyst = ?) ORDER BY rowid",
                               (*states, analyst, analyst)).fetchall()
        return [_job(r) for r in rows]

    def update(self, job_id: str, **fields: Any) -> None:
        names = ", ".join(f"{k} = ?" for k in fields)
        with self.connection() as con:
            con.execute(f"UPDATE jobs SET {names} WHERE id = ?", (*fields.values(), job_id))

    def queued_count(self, con: sqlite3.Connection, analyst: str) -> int:
        return int(con.execute("SELECT count(*) FROM jobs WHERE analyst = ? AND state IN "
                               "('queued', 'running')", (analyst,)).fetchone()[0])

    # -- audit ---------------------------------------------------------------------------------

    def audit(self, event: str, **fields: Any) -> None:
        """Append one line to ``audit.log`` (refused requests, job events)."""
        line = json.dumps({"time": now(), "event": event, **fields}, sort_keys=True)
        with self._audit_lock:
            fd = os.open(self.root / "audit.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, (line + "\n").encode())
            finally:
                os.close(fd)
