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
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from dppca_dask.errors import BudgetError, ConfigError
from dppca_dask.io.identity import DatasetIdentity, resolve_dataset
from dppca_dask.pipeline.budget_cap import Basic, Cap
from dppca_dask.pipeline.deployment import (
    deployment_settings,
    open_deployment_ledger,
    parse_ledger_url,
    seeded_refusal,
)
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.privacy.accountant import Accountant, add_policy, using_accountant
from dppca_dask.privacy.plan import Plan

__all__ = ["LedgerAccountant", "accounting", "ledger_accountant"]


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
