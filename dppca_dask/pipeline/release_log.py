"""The ledger's tamper-evident release log: the ``events`` table as a hash chain.

Every entry of the ledger's audit trail -- each reservation, release, failure, refund, refusal,
cap and custodian action -- is appended with ``hash = sha256(prev || entry)``, where ``prev`` is
the previous entry's hash (:data:`GENESIS` for the first) and ``entry`` the canonical JSON of the
entry's fields as written (:func:`entry_hash`). An entry's ``payload`` pins what its row of the
``reservations`` (or ``datasets``/``analyst_caps``) table must hold: the amounts, the task, the
analyst and the sha256 of the planned and released records. The chain's head (count and last
hash) is also kept in the ``meta`` table.

:func:`verify` walks the chain and the tables and names the first entry that is inconsistent:
an edited entry (its hash no longer matches its fields), a deleted or reordered one (its
``prev`` is not the hash of the entry before it, or the sequence numbers skip), entries removed
from the end (the head in ``meta`` is longer), and edited reservation or cap rows (they no
longer match their entries). Whoever can write the file can still rewrite the whole chain
consistently; the custodian notes the head (``dppca-dask budget verify`` prints it) somewhere
the ledger's writers cannot change, and ``--head`` checks the chain still extends it.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GENESIS", "ChainReport", "digest", "entry_hash", "verify"]

GENESIS = "0" * 64
"""The ``prev`` of the first entry."""

HASHED = ("seq", "kind", "origin", "reservation", "status", "note", "time", "analyst", "payload")
"""The fields an entry's hash covers (``origin``: the dataset id when it was written; the
``dataset`` column follows ``budget adopt``, whose entry names the old id)."""


def digest(text: str | None) -> str | None:
    """sha256 of a stored JSON text (``None`` stays ``None``)."""
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


def entry_hash(prev: str, entry: dict[str, Any]) -> str:
    """The hash of ``entry`` (its :data:`HASHED` fields) chained to ``prev``.

    Examples
    --------
    >>> entry = dict.fromkeys(HASHED)
    >>> entry_hash(GENESIS, entry) == entry_hash(GENESIS, dict(entry))
    True
    >>> entry_hash(GENESIS, entry) == entry_hash(GENESIS, {**entry, "note": "x"})
    False
    """
    body = json.dumps([entry.get(name) for name in HASHED], sort_keys=True,
                      separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(f"{prev}\n{body}".encode()).hexdigest()


@dataclass(frozen=True)
class ChainReport:
    """What :func:`verify` found: ``entries`` checked, the ``head`` hash, the ``problems``."""

    entries: int
    head: str
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "entries": self.entries, "head": self.head,
                "problems": list(self.problems)}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def verify(con: sqlite3.Connection, *, head: str | None = None) -> ChainReport:
    """Check the chain of the ledger behind ``con`` and its tables against it (read only).

    ``head``: a hash the custodian noted earlier; the chain must still contain it.
    """
    if "hash" not in _columns(con, "events"):
        return ChainReport(0, GENESIS, ("the ledger has no release log (schema 1: it is added "
                                        "when the ledger is next written)",))
    rows = con.execute("SELECT * FROM events ORDER BY seq").fetchall()
    problems: list[str] = []
    prev, expected_seq = GENESIS, 1
    aliases: dict[str, str] = {}
    last_reserve: dict[str, dict[str, Any]] = {}
    last_event: dict[str, dict[str, Any]] = {}
    last_cap: dict[tuple[str, str | None], dict[str, Any] | None] = {}
    hashes: set[str] = set()
    for row in rows:
        entry = dict(row)
        seq = entry["seq"]
        where = f"entry #{seq} ({entry['kind']})"
        if seq != expected_seq:
            problems.append(f"entries #{expected_seq} to #{seq - 1} are missing (deleted)"
                            if seq > expected_seq else f"{where} is out of order")
        if entry["prev"] != prev:
            problems.append(f"{where} does not follow the entry before it: an entry was "
                            "deleted, inserted or moved")
        if entry_hash(entry["prev"] or "", entry) != entry["hash"]:
            problems.append(f"{where} was edited: its hash does not match its content")
        prev, expected_seq = entry["hash"] or "", seq + 1
        hashes.add(prev)
        payload = json.loads(entry["payload"]) if entry["payload"] else None
        origin = entry["origin"]
        if entry["kind"] == "adopt" and payload and payload.get("from"):
            aliases[payload["from"]] = origin
        if entry["reservation"]:
            last_event[entry["reservation"]] = entry
            if entry["kind"] == "reserve":
                last_reserve[entry["reservation"]] = {**entry, "payload": payload}
        if entry["kind"] == "cap":  # a cap entry of a ledger older than the log: no payload
            last_cap[(origin, entry["analyst"])] = payload
        if problems:
            break
    if not problems:
        for entry in (dict(r) for r in rows):
            current = entry["origin"]
            while current in aliases:
                current = aliases[current]
            if entry["dataset"] != current:
                problems.append(f"entry #{entry['seq']} ({entry['kind']}) was moved to another "
                                f"dataset ({entry['dataset']!r}, written for {entry['origin']!r})")
                break
    stored = con.execute("SELECT value FROM meta WHERE key = 'release_log_head'").fetchone()
    if not problems and stored is not None:
        count, last = json.loads(stored[0])
        if count > len(rows):
            problems.append(f"the last {count - len(rows)} entries were deleted (the log held "
                            f"{count} entries, now {len(rows)})")
        elif count == len(rows) and last != prev:
            problems.append("the last entry was replaced")
    if not problems:
        problems += _check_reservations(con, last_reserve, last_event, aliases)
    if not problems:
        problems += _check_caps(con, last_cap, aliases)
    if not problems and head is not None and head not in hashes and head != GENESIS:
        problems.append(f"the noted head {head} is not in the log: it was rewritten")
    return ChainReport(len(rows), prev, tuple(problems))


def _check_reservations(con: sqlite3.Connection, reserves: dict[str, dict[str, Any]],
                        lasts: dict[str, dict[str, Any]], aliases: dict[str, str]) -> list[str]:
    problems = []
    analyst = "analyst" in _columns(con, "reservations")
    for row in con.execute("SELECT * FROM reservations").fetchall():
        rid = row["id"]
        reserve = reserves.get(rid)
        if reserve is None:
            problems.append(f"reservation {rid} has no reserve entry in the release log")
            continue
        payload = reserve["payload"]
        last = lasts[rid]
        if row["status"] != last["status"]:
            problems.append(f"reservation {rid} was edited: its status is {row['status']!r}, "
                            f"its last entry (#{last['seq']}) says {last['status']!r}")
        if payload is None:  # an entry of a ledger written before the release log
            continue
        checks = {"eps": row["eps"], "delta": row["delta"], "task": row["task"],
                  "seeded": bool(row["seeded"]), "planned": digest(row["planned"])}
        for name, value in checks.items():
            if name in payload and not _same(payload[name], value):
                problems.append(f"reservation {rid} was edited: its {name} differs from its "
                                f"reserve entry (#{reserve['seq']})")
        if analyst and row["analyst"] != reserve["analyst"]:
            problems.append(f"reservation {rid} was edited: its analyst differs from its "
                            f"reserve entry (#{reserve['seq']})")
        if row["status"] in ("released", "failed"):
            ended = json.loads(last["payload"]) if last["payload"] else None
            if ended is not None and "records" in ended \
                    and ended["records"] != digest(row["records"]):
                problems.append(f"reservation {rid} was edited: its released records differ "
                                f"from its entry (#{last['seq']})")
    for rid in set(reserves) - {r[0] for r in con.execute("SELECT id FROM reservations")}:
        problems.append(f"reservation {rid} (entry #{reserves[rid]['seq']}) was deleted")
    return problems


def _check_caps(con: sqlite3.Connection,
                caps: dict[tuple[str, str | None], dict[str, Any] | None],
                aliases: dict[str, str]) -> list[str]:
    def resolve(dataset: str) -> str:
        while dataset in aliases:
            dataset = aliases[dataset]
        return dataset

    expected: dict[tuple[str, str | None], dict[str, Any] | None] = {
        (resolve(d), a): payload for (d, a), payload in caps.items()}
    found: dict[tuple[str, str | None], dict[str, Any]] = {}
    for row in con.execute("SELECT * FROM datasets").fetchall():
        found[(row["id"], None)] = {"eps": row["cap_eps"], "delta": row["cap_delta"],
                                    "rho": row["cap_rho"]}
    if "analyst_caps" in {r[0] for r in con.execute("SELECT name FROM sqlite_master")}:
        for row in con.execute("SELECT * FROM analyst_caps").fetchall():
            found[(row["dataset"], row["analyst"])] = {
                "eps": row["cap_eps"], "delta": row["cap_delta"], "rho": row["cap_rho"]}
    problems = []
    unset = {"eps": None, "delta": None, "rho": None}
    for key, have in sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        if key not in expected and have != unset:
            who = "" if key[1] is None else f" for analyst {key[1]!r}"
            problems.append(f"the cap of dataset {key[0]!r}{who} was set outside the release "
                            "log (no cap entry)")
    for key, payload in sorted(expected.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        if payload is None:
            continue
        have = found.get(key, unset)
        if any(not _same(have[name], payload.get(name)) for name in ("eps", "delta", "rho")):
            who = "" if key[1] is None else f" for analyst {key[1]!r}"
            problems.append(f"the cap of dataset {key[0]!r}{who} was edited: it differs from "
                            "its last cap entry")
    return problems
