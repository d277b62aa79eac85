"""Python-API releases in the persistent budget ledger (notebooks, scripts).

    from dppca_dask import accounting, dp_pca, privacy_control

    with accounting():                                  # the deployment's ledger
        fit = dp_pca("data/survey.zarr", privacy=privacy_control(eps=1, delta=1e-6))
    with accounting(dataset="survey-2026"):             # in-memory X: name its account
        fit = dp_pca(X, privacy=privacy_control(eps=1, delta=1e-6))
    fit = dp_pca(X, privacy=..., ledger=ledger_accountant(dataset="survey-2026"))

Each release reserves its plan's records before any data is read, under the same cap check as
``dppca-dask run`` (the custodian's cap in the ledger, lowered -- never raised -- by ``cap``),
and is then confirmed, refunded (an error before any noise was drawn) or kept spent (an error
after). The ledger is the deployment's (Dask config ``dppca.ledger.url``); ``url`` may name
another only where ``dppca.ledger.allow_run_config`` allows it, as for run configs.

A release outside both is recorded in the process's in-memory session ledger
(:mod:`dppca_dask.privacy.session`, one :class:`~dppca_dask.errors.SessionLedgerWarning` per
process); :func:`session_ledger` shows it, composed as the persistent ledger composes a
dataset's spend. Every result says where it was recorded (``metadata["recorded_in"]``, the
card's and the summary's "Recorded in" line).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from dppca_dask.errors import BudgetError, ConfigError
from dppca_dask.io.identity import DatasetIdentity, resolve_dataset
from dppca_dask.pipeline.budget_cap import Basic, Cap, Spend, cumulative
from dppca_dask.pipeline.deployment import (
    deployment_settings,
    open_deployment_ledger,
    parse_ledger_url,
    seeded_refusal,
)
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.privacy.accountant import Accountant, add_policy, using_accountant
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.session import SESSION_WHERE, SessionRelease, session_accountant

__all__ = ["LedgerAccountant", "SessionLedger", "accounting", "ledger_accountant",
           "session_ledger"]


@dataclass(frozen=True)
class LedgerAccountant:
    """Reserves Python-API releases in a :class:`~dppca_dask.pipeline.ledger.Ledger`.

    ``dataset``: the account of in-memory inputs (a name, or the path of the store they came
    from); path inputs are accounted under their own dataset id unless ``dataset`` is given.
    """

    ledger: Ledger
    dataset: str | None = None
    cap: Cap | None = None
    require_cap: bool = False

    def _identity(self, X: Any) -> DatasetIdentity:
        name = self.dataset
        if name is None and isinstance(X, str | os.PathLike):
            return resolve_dataset(X)
        if name is None:
            raise BudgetError("Refused: an in-memory X has no dataset id for the budget ledger; "
                              "name its account with accounting(dataset='...') or "
                              "ledger_accountant(dataset='...'). No data was read.")
        if os.path.exists(name) or "://" in name:
            return resolve_dataset(name)
        return DatasetIdentity(location=f"python:{name}")

    def reserve(self, X: Any, plan: Plan, *, owner: str, seeded: bool) -> Any:
        total = plan.total
        spend = Basic(total.get("eps", 0.0), total.get("delta", 0.0))
        return self.ledger.reserve(self._identity(X), [r.as_dict() for r in plan.records],
                                   spend, run_cap=self.cap, require_cap=self.require_cap,
                                   task=f"python:{owner}", output="", seeded=seeded)

    def confirm(self, token: Any, records: list[dict[str, Any]], *, seeded: bool) -> None:
        self.ledger.confirm(token, records, seeded=seeded)

    def cancel(self, token: Any) -> None:
        self.ledger.cancel(token)

    def fail(self, token: Any, error: str, *, seeded: bool) -> None:
        self.ledger.fail_after_draw(token, error=error, seeded=seeded)

    def recorded_in(self, token: Any) -> dict[str, Any]:
        """The ledger and the dataset account the release is recorded under (its metadata's
        ``recorded_in``)."""
        if self.ledger.memory:
            return {"kind": "ledger", "persistent": False, "ledger": ":memory:",
                    "where": "an in-memory budget ledger (not persistent)"}
        reservation = self.ledger.reservation(token)
        dataset = None if reservation is None else reservation.dataset
        where = f"the budget ledger {self.ledger.path}"
        return {"kind": "ledger", "persistent": True, "ledger": str(self.ledger.path),
                "dataset": dataset, "where": where + (f" (dataset {dataset})" if dataset else "")}


def ledger_accountant(url: str | None = None, *, dataset: str | None = None,
                      cap: Cap | None = None) -> Accountant:
    """An accountant on the deployment's ledger (or ``url``, where the deployment allows it)."""
    settings = deployment_settings()
    path = settings.ledger_path
    if url is not None:
        named = parse_ledger_url(url, "url")
        if named != path and not settings.allow_run_config:
            raise ConfigError(f"The 'url' parameter of accounting must be left out: the budget "
                              f"ledger is the deployment's ({str(path)!r}, Dask config "
                              "dppca.ledger.url), and this deployment does not let a caller "
                              f"name another one. Got {url!r} instead.")
        path = named
    ledger = open_deployment_ledger(path, settings)
    return LedgerAccountant(ledger, dataset, cap, settings.require_cap)


@contextmanager
def accounting(url: str | None = None, *, dataset: str | None = None,
               cap: Cap | None = None) -> Iterator[Accountant]:
    """Record every estimator call in the block in the persistent budget ledger."""
    accountant = ledger_accountant(url, dataset=dataset, cap=cap)
    with using_accountant(accountant):
        yield accountant


_STATUS = {"reserved": "reserved (running)", "released": "released",
           "failed": "failed after drawing noise (spent)", "cancelled": "cancelled (refunded)"}


@dataclass(frozen=True)
class SessionLedger:
    """A snapshot of the session ledger: this process's releases made outside ``ledger=`` and
    :func:`accounting` (in memory, lost when the process ends).

    It is one account for the whole process, whatever each release's input (an in-memory array
    has no dataset id), so its total bounds every dataset's spend in the session from above.
    """

    releases: tuple[SessionRelease, ...]

    @property
    def records(self) -> list[dict[str, Any]]:
        """The counted releases' spend records (released: their own; else the planned ones)."""
        return [rec for r in self.releases if r.counted for rec in r.spend_records]

    def spent(self, delta: float | None = None) -> Spend | None:
        """The cumulative spend of the counted releases, composed as the persistent ledger
        composes a dataset's (:func:`~dppca_dask.pipeline.budget_cap.cumulative`: basic sums,
        zCDP ρ, the tight ε at ``delta``, default the basic δ); ``None``: nothing spent."""
        counted = [r for r in self.releases if r.counted]
        if not counted:
            return None
        basic = Basic(math.fsum(r.eps for r in counted), math.fsum(r.delta for r in counted))
        return cumulative(self.records, basic, delta)

    def as_dict(self, delta: float | None = None) -> dict[str, Any]:
        """JSON-ready: ``where``, every release (with ``counted``) and ``spent``."""
        spend = self.spent(delta)
        return {"where": SESSION_WHERE, "persistent": False,
                "releases": [{**asdict(r), "counted": r.counted} for r in self.releases],
                "spent": None if spend is None else spend.as_dict()}

    def __repr__(self) -> str:
        lines = [f"Session ledger: {len(self.releases)} release(s) of this Python process made "
                 "outside a budget ledger (in memory, not persistent)"]
        for r in self.releases:
            amount = f"eps = {r.eps:.6g}, delta = {r.delta:.6g}"
            if r.rho is not None:
                amount = f"rho = {r.rho:.6g}" + (f" ({amount})" if r.eps or r.delta else "")
            lines.append(f"  {r.number:>3}  {r.owner:<13} {r.input}: {amount}; "
                         f"{_STATUS.get(r.status, r.status)}"
                         + ("; NOT PRIVATE (seeded)" if r.seeded else ""))
        spend = self.spent()
        lines.append("Spent: " + ("nothing" if spend is None else spend.describe()))
        lines.append("To record releases persistently: `with dppca_dask.accounting(dataset=...):` "
                     "or ledger=dppca_dask.ledger_accountant(dataset=...).")
        return "\n".join(lines)


def session_ledger() -> SessionLedger:
    """The session ledger as it stands: every release of this process made outside ``ledger=``
    and :func:`accounting`, and their composed spend (in memory only; nothing persistent).

    Examples
    --------
    >>> import numpy as np
    >>> from dppca_dask import dp_loading, privacy_control, session_ledger
    >>> before = len(session_ledger().releases)
    >>> X = np.random.default_rng(0).normal(size=(40, 3))
    >>> fit = dp_loading(X, privacy=privacy_control(eps=1, delta=1e-5))
    >>> session_ledger().releases[before].records == tuple(r.as_dict() for r in fit.ledger)
    True
    >>> fit.metadata["recorded_in"]["kind"]
    'session'
    """
    return SessionLedger(session_accountant().releases)


def _deployment_policy(accountant: Accountant | None, seeded: bool, owner: str) -> None:
    """A deployment that requires the ledger (``dppca.ledger.required``) refuses a Python-API
    release outside a recorded ledger, and a seeded one unless ``dppca.ledger.allow_seeded``."""
    settings = deployment_settings()
    if not settings.ledger_required:
        return
    if accountant is None:
        raise BudgetError(f"Refused: this deployment requires every release to be recorded in "
                          f"its budget ledger (dppca.ledger.required), and this {owner} call "
                          "has no ledger: run it inside `with dppca_dask.accounting(dataset=...):` "
                          "or pass ledger=dppca_dask.ledger_accountant(dataset=...). No data "
                          "was read.")
    if seeded and not settings.allow_seeded:
        raise BudgetError(seeded_refusal(f"Refused: the 'rng' parameter of {owner} must be None",
                                         "a seed or generator"))


add_policy(_deployment_policy)
