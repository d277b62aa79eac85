"""The work of ``dppca-dask budget ...``: find a dataset's account, show it, set its cap, adopt a
store, release a stale reservation, import an old ledger. Each returns the text to print.

DATASET arguments take any spelling of a dataset (relative, ``./``, symlink, ``file://``, the
array inside its Zarr store) or a dataset id the ledger holds. A dataset the ledger does not
know, and a ledger file that does not exist, are :class:`~dppca_dask.errors.InputError`\\ s.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from dppca_dask.errors import BudgetError, InputError, ParameterError
from dppca_dask.io.identity import DatasetIdentity, resolve_dataset, stamp_dataset_id
from dppca_dask.pipeline.budget_cap import Cap
from dppca_dask.pipeline.deployment import (
    custodian_refusal,
    deployment_settings,
    open_deployment_ledger,
    parse_ledger_url,
)
from dppca_dask.pipeline.ledger import (
    EVERY_ANALYST,
    DatasetEntry,
    Ledger,
    Reservation,
    run_alive,
)
from dppca_dask.pipeline.ledger_legacy import import_jsonl, is_jsonl_ledger

__all__ = ["adopt", "cap", "dataset_report", "import_old", "list_datasets", "open_ledger",
           "release", "render_dataset", "show", "status_text", "verify_log"]

_ORIGIN = {"attribute": "from the store's dppca_dataset_id attribute",
           "derived": "derived from its location, array and shape"}


def open_ledger(path: str | None, *, create: bool) -> Ledger:
    """The ledger ``--ledger`` names, else the deployment's (``dppca.ledger.url``)."""
    settings = deployment_settings()
    where = settings.ledger_path if path is None else parse_ledger_url(path, "--ledger")
    return open_deployment_ledger(where, settings, create=create)


def _custodian(command: str, ledger_path: str | None) -> None:
    """Refuse a caller without the custodian's authority; with the custodian's file, also a
    ``--ledger`` other than the deployment's (the file pins it)."""
    settings = deployment_settings()
    refusal = custodian_refusal(command, settings)
    if refusal is not None:
        raise BudgetError(refusal)
    if settings.system_file is not None and ledger_path is not None \
            and parse_ledger_url(ledger_path, "--ledger") != settings.ledger_path:
        raise BudgetError(f"Refused: the custodian's deployment file {settings.system_file!r} "
                          f"pins the ledger to {str(settings.ledger_path)!r}; --ledger "
                          f"{ledger_path!r} names another one. Nothing was changed.")


def _identity(dataset: str, array: str | None, *, must_exist: bool = True) -> DatasetIdentity:
    local = "://" not in dataset or dataset.lower().startswith("file://")
    if must_exist and local and not Path(dataset.removeprefix("file://")).exists():
        raise InputError("The 'DATASET' argument must be an existing dataset (a path or URL) "
                         f"or a dataset id recorded in the ledger. Got {dataset!r} instead.")
    try:
        return resolve_dataset(dataset, array)
    except InputError:  # the reader's pick is unknown (several arrays, store gone)
        return resolve_dataset(dataset, array, pick=False)


def _known(ledger: Ledger, dataset: str) -> DatasetEntry | None:
    """The ledger's entry for either name ``budget list`` prints: the dataset id or its
    location exactly as recorded (e.g. ``python:NAME`` of a notebook ledger)."""
    entry = ledger.dataset(dataset)
    if entry is not None:
        return entry
    named = [e for e in ledger.datasets() if e.location == dataset]
    return named[0] if len(named) == 1 else None


def _entries(ledger: Ledger, dataset: str, array: str | None) -> list[DatasetEntry]:
    entry = _known(ledger, dataset) if array is None else None
    if entry is not None:
        return [entry]
    identity = _identity(dataset, array, must_exist=False)
    entry = ledger.dataset(identity.dataset_id)
    if entry is not None:
        return [entry]
    every = ledger.datasets()
    found = [e for e in every if e.location == identity.key]  # e.g. a derived id, reshaped
    if not found and identity.array is None:  # every array of the store
        found = [e for e in every if e.location.startswith(identity.location + "::")]
    if not found:
        raise InputError(f"Dataset {dataset!r} (id {identity.dataset_id}, {identity.key}) has no "
                         f"entry in the budget ledger {str(ledger.path)!r}: no cap and no "
                         "release is recorded for it. Check the path, --array and the ledger "
                         "(--ledger, dppca.ledger.url); `dppca-dask budget list` lists the "
                         "datasets it holds.")
    return found


def status_text(r: Reservation) -> str:
    """One reservation's state in words (an unfinished one names its process)."""
    if r.status == "reserved":
        state = {True: "; the process is running", False: "; the process is gone",
                 None: ""}[run_alive(r)]
        who = (f"pid {r.pid}, host {r.host}" if r.pid is not None
               else "pid and host unknown (imported)")
        return f"reserved, run not finished ({who}, started {r.started}{state})"
    if r.status == "failed":
        return f"failed (spent: {r.note})"
    return {"released": "released", "cancelled": "cancelled (refunded)",
            "freed": "freed by the custodian (refunded)",
            "closed": "closed by the custodian (spent)"}.get(r.status, r.status)


def dataset_report(ledger: Ledger, entry: DatasetEntry) -> dict[str, Any]:
    """``budget show --json`` for one dataset."""
    spend = ledger.spent(entry.id)
    return {"dataset": entry.id, "id_source": entry.id_source, "location": entry.location,
            "ledger": str(ledger.path), "cap": None if entry.cap is None else entry.cap.as_dict(),
            "cap_set": entry.cap_set,
            "analyst_caps": {name: c.as_dict() for name, c in ledger.analyst_caps(entry.id).items()},
            "reservations": [{**r.as_dict(), "counted": r.counted, "state": status_text(r)}
                             for r in ledger.reservations(entry.id)],
            "spent": None if spend is None else spend.as_dict()}


def render_dataset(ledger: Ledger, entry: DatasetEntry) -> str:
    """The text of ``budget show`` for one dataset."""
    reservations = ledger.reservations(entry.id)
    limit = ("none (runs are recorded, not limited)" if entry.cap is None
             else f"{entry.cap.describe()} (set by the custodian {entry.cap_set})")
    lines = [f"Dataset {entry.id} (id {_ORIGIN.get(entry.id_source, entry.id_source)})",
             f"  location (last seen): {entry.location}", f"  ledger: {ledger.path}",
             f"  cap: {limit}"]
    for name, own in ledger.analyst_caps(entry.id).items():
        who = "each analyst (default)" if name == EVERY_ANALYST else f"analyst {name!r}"
        lines.append(f"  cap of {who}: {own.describe()}")
    if reservations:
        lines.append(f"  {'reservation':<32}  {'started (UTC)':<25}  {'task':<10} {'eps':>10} "
                     f"{'delta':>10}  status; output")
    else:
        lines.append("  no reservations yet")
    for r in reservations:
        by = "" if r.analyst is None else f" (analyst {r.analyst})"
        lines.append(f"  {r.id:<32}  {r.started or '':<25}  {r.task:<10} {r.eps:>10.4g} "
                     f"{r.delta:>10.3g}  {status_text(r)}; {r.output}{by}")
    spend = ledger.spent(entry.id)
    lines.append("  cumulative spend (releases, failures after noise, unfinished and closed "
                 f"reservations): {'nothing' if spend is None else spend.describe()}")
    return "\n".join(lines)


def show(dataset: str, array: str | None, ledger_path: str | None, as_json: bool) -> str:
    """``budget show``; a JSON-lines ledger of an earlier version is read as is."""
    note = ""
    if ledger_path is not None and "://" not in ledger_path and is_jsonl_ledger(ledger_path):
        ledger = Ledger(":memory:")
        import_jsonl(ledger, ledger_path)
        note = (f"(a JSON-lines ledger of an earlier version, {ledger_path}, read as is; it is "
                "not the deployment's ledger: `dppca-dask budget import` copies it there)\n")
    else:
        ledger = open_ledger(ledger_path, create=False)
    entries = _entries(ledger, dataset, array)
    if as_json:
        return json.dumps([dataset_report(ledger, e) for e in entries], indent=2)
    return note + "\n\n".join(render_dataset(ledger, e) for e in entries)


def list_datasets(ledger_path: str | None, as_json: bool = False) -> str:
    """``budget list``: every dataset of the ledger with its cap and spend (``as_json``: a JSON
    list of the objects ``budget show --json`` prints, one per dataset)."""
    ledger = open_ledger(ledger_path, create=False)
    if as_json:
        return json.dumps([dataset_report(ledger, e) for e in ledger.datasets()], indent=2)
    lines = []
    for e in ledger.datasets():
        spend = ledger.spent(e.id)
        limit = "no cap" if e.cap is None else f"cap {e.cap.describe()}"
        lines += [f"{e.id}  {e.location}",
                  f"  {limit}; spent: {'nothing' if spend is None else spend.describe()}"]
    return "\n".join(lines) or f"The budget ledger {str(ledger.path)!r} holds no datasets."


def cap(dataset: str, array: str | None, eps: float | None, delta: float | None,
        rho: float | None, remove: bool, ledger_path: str | None,
        analyst: str | None = None) -> str:
    """``budget cap``: the custodian sets (or removes) a dataset's cap, or with ``analyst``
    that analyst's cap on it (``*``: each analyst's default; the release service's)."""
    given = not (eps is None and delta is None and rho is None)
    if remove == given:
        raise ParameterError("The 'cap' command must be given --eps and --delta, and/or --rho, "
                             "or --remove. Got "
                             + ("--remove with a cap" if remove else "none of them") + " instead.")
    limit = None if remove else Cap(eps, delta, rho)
    _custodian("cap", ledger_path)
    ledger = open_ledger(ledger_path, create=True)
    known = _known(ledger, dataset) if array is None else None
    if known is not None:
        location, _, inner = known.location.partition("::")
        identity = DatasetIdentity(location, inner or None, dataset_id=known.id,
                                   id_source="attribute" if known.id_source == "attribute"
                                   else "derived")
    else:
        identity = _identity(dataset, array)
    if analyst is not None and not analyst.strip():
        raise ParameterError("The '--analyst' option of cap must be an analyst's name (or '*' "
                             f"for each analyst). Got {analyst!r} instead.")
    entry = ledger.set_cap(identity, limit, analyst=analyst)
    spend = ledger.spent(entry.id) if analyst is None else ledger.spent_by(entry.id, analyst)
    whose = "" if analyst is None else (" each analyst's" if analyst == EVERY_ANALYST
                                        else f" analyst {analyst}'s")
    return (f"Dataset {entry.id} ({entry.location}):{whose} "
            + ("cap removed" if limit is None else f"cap {limit.describe()}")
            + f"; spent so far: {'nothing' if spend is None else spend.describe()}"
            + f" (ledger {ledger.path}).")


def adopt(dataset: str, array: str | None, ledger_path: str | None) -> str:
    """``budget adopt``: write a fresh id into a store without one; its history carries over."""
    identity = _identity(dataset, array)
    if identity.id_source == "attribute":
        raise InputError(f"Dataset {dataset!r} already has a dataset id ({identity.dataset_id}); "
                         "refusing to replace it (its budget is recorded under it).")
    if identity.shape is None:
        raise InputError(f"Dataset {dataset!r} must be a Zarr array (or a group holding one) to "
                         "be adopted; other files cannot carry a dataset id.")
    ledger = open_ledger(ledger_path, create=True)
    new_id = str(uuid.uuid4())
    with ledger.connection() as con:  # the attribute is written inside the ledger transaction
        ledger.adopt(con, identity, new_id)
        stamp_dataset_id(identity.location, identity.array, dataset_id=new_id)
    return (f"Dataset {identity.key}: id {new_id} written (was {identity.dataset_id}; its "
            f"history in {ledger.path} carried over).")


def release(reservation_id: str, spent: bool, force: bool, ledger_path: str | None) -> str:
    """``budget release``: the custodian closes an unfinished run's reservation."""
    _custodian("release", ledger_path)
    r = open_ledger(ledger_path, create=False).free(reservation_id, spent=spent, force=force)
    return (f"Reservation {r.id} of dataset {r.dataset}: "
            + ("closed as spent." if spent else "released (refunded)."))


def import_old(old: str, ledger_path: str | None) -> str:
    """``budget import``: copy a JSON-lines ledger of an earlier version (left unchanged)."""
    _custodian("import", ledger_path)
    ledger = open_ledger(ledger_path, create=True)
    copied = import_jsonl(ledger, old)
    lines = [f"  {rid}: {key} -> dataset {dataset_id}" for rid, key, dataset_id in copied]
    return "\n".join([*lines, f"Imported {len(copied)} reservation(s) from {old} into "
                      f"{ledger.path}."])


def verify_log(ledger_path: str | None, head: str | None, as_json: bool) -> tuple[bool, str]:
    """``budget verify``: check the ledger's release log (and the custodian's caps database's,
    where there is one); returns (intact, text). ``head``: a hash noted earlier that the log
    must still contain."""
    ledger = open_ledger(ledger_path, create=False)
    reports = [("ledger", ledger.path, ledger.verify(head=head))]
    if ledger.caps is not None and ledger.caps.exists():
        caps = Ledger(ledger.caps, create=False, journal_mode="delete")
        reports.append(("caps database", caps.path, caps.verify()))
    ok = all(report.ok for *_, report in reports)
    if as_json:
        return ok, json.dumps({"ok": ok, "logs": [{"what": what, "path": str(path),
                                                   **report.as_dict()}
                                                  for what, path, report in reports]}, indent=2)
    lines = []
    for what, path, report in reports:
        if report.ok:
            lines.append(f"The release log of the {what} {str(path)!r} is intact: "
                         f"{report.entries} entries, head {report.head}.")
        else:
            lines.append(f"The release log of the {what} {str(path)!r} is BROKEN: "
                         + "; ".join(report.problems) + ".")
    return ok, "\n".join(lines)
