"""Accounting of Python-API releases: the protocol the estimators call, and the current one.

An estimator given ``ledger=`` (or run inside :func:`dppca_dask.accounting`, which sets the
current accountant) reserves its plan's records before any data is read -- the same cap check
as the CLI -- and then confirms the release with its ledger, or on an error refunds it when no
noise was drawn and keeps it spent when some was. The persistent ledger that implements this
lives in :mod:`dppca_dask.pipeline.ledger`; this module only defines the protocol, so the
estimators do not depend on the pipeline. A release with neither is recorded the same way in the
process's in-memory session ledger (:mod:`dppca_dask.privacy.session`), with a one-time
:class:`~dppca_dask.errors.SessionLedgerWarning`. While the fit runs, :func:`current_recording`
says where the release is recorded; the results write it as ``metadata["recorded_in"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from dppca_dask.privacy.draws import DrawTracker
from dppca_dask.privacy.guarantees import warn_guarantees
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState
from dppca_dask.privacy.session import notify_once, session_accountant

__all__ = ["Accountant", "Policy", "account", "add_policy", "current_accountant",
           "current_recording", "using_accountant"]

R = TypeVar("R")


class Accountant(Protocol):
    """Reserves a release before the data is read and settles it afterwards.

    An accountant may also have ``recorded_in(token) -> dict`` (``kind``, ``persistent``,
    ``where``: what the release's ``metadata["recorded_in"]`` says); without it the metadata
    names the accountant's type.
    """

    def reserve(self, X: Any, plan: Plan, *, owner: str, seeded: bool) -> Any:
        """Check the cap and reserve ``plan``'s records for the dataset ``X``; a token."""
        ...

    def confirm(self, token: Any, records: list[dict[str, Any]], *, seeded: bool) -> None: ...

    def cancel(self, token: Any) -> None: ...

    def fail(self, token: Any, error: str, *, seeded: bool) -> None: ...


_CURRENT: ContextVar[Accountant | None] = ContextVar("dppca_accountant", default=None)
_RECORDING: ContextVar[dict[str, Any] | None] = ContextVar("dppca_recording", default=None)

Policy = Callable[[Accountant | None, bool, str], None]
_POLICIES: list[Policy] = []


def add_policy(policy: Policy) -> None:
    """Register a check that runs before every Python-API release: ``policy(accountant,
    seeded, owner)`` raises to refuse it (e.g. the deployment's ``dppca.ledger.required``:
    :mod:`dppca_dask.pipeline.notebook` registers it, so the estimators do not import the
    pipeline)."""
    if policy not in _POLICIES:
        _POLICIES.append(policy)


def current_accountant() -> Accountant | None:
    """The accountant set by :func:`using_accountant` (``None``: releases are not accounted)."""
    return _CURRENT.get()


def current_recording() -> dict[str, Any] | None:
    """Where the release being made is recorded (``kind``, ``persistent``, ``where``), set by
    :func:`account` while its fit runs; ``None`` outside one (the CLI's runner: its report names
    its ledger)."""
    return _RECORDING.get()


def _recorded_in(accountant: Accountant, token: Any) -> dict[str, Any]:
    describe = getattr(accountant, "recorded_in", None)
    if callable(describe):
        return dict(describe(token))
    return {"kind": "accountant", "persistent": None,
            "where": f"the caller's accountant ({type(accountant).__name__})"}


@contextmanager
def using_accountant(accountant: Accountant | None) -> Iterator[Accountant | None]:
    """Make ``accountant`` the current one inside the block."""
    token = _CURRENT.set(accountant)
    try:
        yield accountant
    finally:
        _CURRENT.reset(token)


def account(accountant: Accountant | None, X: Any, plan: Plan, *, n: int, owner: str,
            rng_state: RngState, fit: Callable[[RngState], R]) -> R:
    """Check ``plan``'s guarantees (:func:`~dppca_dask.privacy.guarantees.warn_guarantees`), then
    run ``fit`` under ``accountant`` (or the current one; with neither, the session ledger's,
    :mod:`~dppca_dask.privacy.session`, after the policies have seen ``None``): reserve, fit,
    settle.

    ``fit`` gets ``rng_state`` with its generator wrapped in a
    :func:`~dppca_dask.privacy.draws.DrawTracker` -- the one answer to "was noise drawn?", as in
    the CLI's runner: an error before any draw refunds the reservation, an error after one keeps
    it spent (the error's type only is recorded).
    """
    warn_guarantees(plan, n, stacklevel=4)
    acct = accountant if accountant is not None else current_accountant()
    seeded = rng_state.seeded
    for policy in _POLICIES:  # before any data is read
        policy(acct, seeded, owner)
    tracker = DrawTracker(rng_state.generator)
    tracked = RngState(tracker, seeded)
    session = acct is None
    if acct is None:
        acct = session_accountant()
    token = acct.reserve(X, plan, owner=owner, seeded=seeded)
    recording = _RECORDING.set(_recorded_in(acct, token))
    try:
        result = fit(tracked)
    except BaseException as exc:
        if tracker.drawn:
            acct.fail(token, type(exc).__name__, seeded=seeded)
        else:
            acct.cancel(token)
        raise
    finally:
        _RECORDING.reset(recording)
    acct.confirm(token, [r.as_dict() for r in getattr(result, "ledger", ())], seeded=seeded)
    if session:
        notify_once(owner, stacklevel=3)
    return result
