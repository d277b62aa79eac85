"""The session ledger: where a Python-API release is recorded when no ledger was named.

A release made outside ``ledger=`` and :func:`dppca_dask.accounting` is recorded in this
process's :class:`SessionAccountant` (in memory, like diffprivlib's default accountant): its
planned records when reserved, its released records once confirmed, kept spent when the fit
failed after drawing noise, dropped from the count (``cancelled``) when it failed before. It
checks no cap and refuses nothing; it only makes the spend visible:
:func:`dppca_dask.session_ledger` shows its releases and their composed total, the result's
metadata says ``recorded_in`` the session, and the first such release of a process issues one
:class:`~dppca_dask.errors.SessionLedgerWarning` that nothing persistent was recorded. Nothing
here outlives the process; the persistent ledger is :mod:`dppca_dask.pipeline.ledger`.
"""

from __future__ import annotations

import os
import threading
import warnings
from dataclasses import dataclass, replace
from typing import Any

from dppca_dask.errors import SessionLedgerWarning
from dppca_dask.privacy.plan import Plan

__all__ = ["SESSION_WHERE", "SessionAccountant", "SessionRelease", "notify_once",
           "session_accountant"]

SESSION_WHERE = ("this Python session's ledger only (in memory, not persistent: "
                 "dppca_dask.session_ledger())")
"""Where a session-recorded release says it was recorded (``metadata["recorded_in"]``)."""

COUNTED = ("reserved", "released", "failed")
"""The statuses whose spend counts (as in the persistent ledger; ``cancelled`` does not)."""

NOTICE = ("{owner}: this release was recorded only in this Python session's in-memory ledger "
          "(dppca_dask.session_ledger()); nothing persistent was recorded, so a later session "
          "cannot see its spend. Record releases with `with dppca_dask.accounting(dataset=...):` "
          "or ledger=dppca_dask.ledger_accountant(dataset=...). (Shown once per process.)")


@dataclass(frozen=True)
class SessionRelease:
    """One release of the session: who made it, on what, its status and its records."""

    number: int
    """1, 2, ... in the order the releases were reserved."""
    owner: str
    input: str
    """The path of a path input; else ``"in-memory <type>"``."""
    status: str
    """``reserved`` (running), ``released``, ``failed`` (after noise: spent) or ``cancelled``."""
    seeded: bool
    eps: float
    delta: float
    """The plan's basic totals, as a persistent-ledger reservation holds them."""
    rho: float | None
    """The plan's ρ under zCDP accounting (``None`` otherwise)."""
    planned: tuple[dict[str, Any], ...]
    records: tuple[dict[str, Any], ...] | None = None
    error: str = ""

    @property
    def counted(self) -> bool:
        return self.status in COUNTED

    @property
    def spend_records(self) -> tuple[dict[str, Any], ...]:
        """The release's records once it was made, else the planned ones (an upper bound)."""
        return self.records if self.status == "released" and self.records else self.planned


def _input(X: Any) -> str:
    if isinstance(X, str | os.PathLike):
        return os.fspath(X)
    return f"in-memory {type(X).__name__}"


class SessionAccountant:
    """The :class:`~dppca_dask.privacy.accountant.Accountant` of releases outside a ledger."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._releases: list[SessionRelease] = []

    @property
    def releases(self) -> tuple[SessionRelease, ...]:
        with self._lock:
            return tuple(self._releases)

    def reserve(self, X: Any, plan: Plan, *, owner: str, seeded: bool) -> int:
        total = plan.total
        with self._lock:
            token = len(self._releases)
            self._releases.append(SessionRelease(
                token + 1, owner, _input(X), "reserved", seeded, float(total.get("eps", 0.0)),
                float(total.get("delta", 0.0)),
                None if "rho" not in total else float(total["rho"]),
                tuple(r.as_dict() for r in plan.records)))
        return token

    def _close(self, token: int, **changes: Any) -> None:
        with self._lock:
            self._releases[token] = replace(self._releases[token], **changes)

    def confirm(self, token: Any, records: list[dict[str, Any]], *, seeded: bool) -> None:
        self._close(token, status="released", records=tuple(records), seeded=seeded)

    def cancel(self, token: Any) -> None:
        self._close(token, status="cancelled")

    def fail(self, token: Any, error: str, *, seeded: bool) -> None:
        self._close(token, status="failed", error=error, seeded=seeded)

    def recorded_in(self, token: Any) -> dict[str, Any]:
        """What the release's metadata says about where it was recorded."""
        return {"kind": "session", "persistent": False, "where": SESSION_WHERE}


_SESSION = SessionAccountant()
_NOTIFIED = False
_NOTICE_LOCK = threading.Lock()


def session_accountant() -> SessionAccountant:
    """This process's session accountant (one per process)."""
    return _SESSION


def notify_once(owner: str, *, stacklevel: int) -> None:
    """Issue the process's one :class:`~dppca_dask.errors.SessionLedgerWarning` (later calls do
    nothing)."""
    global _NOTIFIED
    with _NOTICE_LOCK:
        if _NOTIFIED:
            return
        _NOTIFIED = True
    warnings.warn(NOTICE.format(owner=owner), SessionLedgerWarning, stacklevel=stacklevel + 1)
