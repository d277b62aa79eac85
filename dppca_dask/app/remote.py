"""The app against a release service (``dppca-dask app --server URL``): the catalogue, the
plans, the runs and the budget lines come from the server (:mod:`dppca_dask.client`); the
released files are downloaded into the app's output directory and shown as a local release is.

The form is the same: its values become the same run config (:func:`~dppca_dask.app.settings.
run_settings`), with ``input.path`` naming the server's dataset; the server plans it (its
refusals are its one-line messages), reserves the spend in its ledger against the dataset's
and the analyst's caps, and runs it on its cluster. Uploads are not offered: the server's
catalogue is the custodian's. No Panel here.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dppca_dask.app.catalogue import DatasetChoice
from dppca_dask.app.settings import Checked
from dppca_dask.app.state import BudgetStatus, Progress, Release, Session, fresh_run_directory

__all__ = ["Remote", "RemotePlan", "RemoteSession"]


@dataclass(frozen=True)
class _Spend:
    eps: float
    delta: float


@dataclass(frozen=True)
class _Release:
    passes: int


@dataclass(frozen=True)
class RemotePlan:
    """The server's plan (``plan --json``) with what the page reads of a local plan."""

    data: dict[str, Any]
    notes: tuple[str, ...] = ()
    spend: _Spend = field(init=False)
    release: _Release = field(init=False)

    def __post_init__(self) -> None:
        total = self.data.get("total") or {}
        object.__setattr__(self, "spend", _Spend(float(total.get("eps") or 0.0),
                                                 float(total.get("delta") or 0.0)))
        object.__setattr__(self, "release", _Release(int(self.data.get("passes") or 0)))

    def render(self) -> str:
        shown = {k: v for k, v in self.data.items() if k not in ("notes", "guarantees")}
        notes = "".join(f"Note: {n}\n" for n in self.notes)
        return f"{notes}Planned on the server (plan --json):\n{json.dumps(shown, indent=2)}"


def _cap_text(cap: dict[str, Any] | None) -> str:
    if not cap:
        return "none"
    parts = [] if cap.get("eps") is None else [f"eps = {cap['eps']:g}, delta = {cap['delta']:g}"]
    return " and ".join(parts + ([] if cap.get("rho") is None else [f"rho = {cap['rho']:g}"]))


def _spent_text(spent: dict[str, Any] | None) -> str:
    if not spent:
        return "nothing"
    tight = spent["tight"]["eps"]
    return (f"basic composition eps = {spent['basic']['eps']:.6g}, delta = "
            f"{spent['basic']['delta']:.6g}; tight eps = "
            f"{'inf' if tight is None else f'{tight:.6g}'} at delta = "
            f"{spent['tight']['delta']:.6g}")


class Remote:
    """A release service as the app's back end (``url``, an analyst's ``token``)."""

    def __init__(self, url: str, token: str | None = None) -> None:
        from dppca_dask.client import Client

        self.client = Client(url, token)
        self.url = self.client.url
        self._views: dict[str, dict[str, Any]] = {}

    def choices(self) -> list[DatasetChoice]:
        """The server's datasets this analyst may use."""
        views = self.client.datasets()
        self._views = {v["name"]: v for v in views}
        return [DatasetChoice(f"{v['name']} (server)", v["name"], None, v.get("group"),
                              float(v.get("C_clip") or 3.0)) for v in views]

    def describe(self, choice: DatasetChoice) -> dict[str, Any]:
        view = self._views.get(choice.path) or self.client.dataset(choice.path)
        return {"n": view["n"], "p": view["p"], "variables": list(view["variables"])}

    def budget(self, choice: DatasetChoice) -> BudgetStatus:
        """The dataset's spend and cap, and this analyst's, as the server's ledger holds them."""
        view = self.client.dataset(choice.path)
        self._views[choice.path] = view
        mine = view["analyst"]
        cap = _cap_text(view["cap"])
        if mine["cap"]:
            cap += f"; yours: {_cap_text(mine['cap'])}"
        spent = _spent_text(view["spent"])
        if mine["spent"]:
            spent += f" (yours: {_spent_text(mine['spent'])})"
        return BudgetStatus(view["dataset_id"], cap, spent, f"release service {self.url}")

    def check(self, settings: dict[str, Any]) -> Checked:
        """The server's plan of ``settings`` (nothing is recorded), or its one-line refusal."""
        from dppca_dask.client import ServerError

        try:
            planned = self.client.plan(settings)
        except ServerError as exc:
            return Checked(error=str(exc))
        plan = RemotePlan(planned, tuple(planned.get("notes") or ()))
        return Checked(settings, plan, None, tuple(planned.get("guarantees") or ()))

    def session(self, output_directory: str | Path) -> RemoteSession:
        return RemoteSession(self, Path(output_directory))


class RemoteSession(Session):
    """This browser session's releases, made by the server and downloaded here."""

    def __init__(self, remote: Remote, output_directory: Path) -> None:
        super().__init__()
        self.remote, self.output_directory = remote, output_directory

    def run(self, config: Any, plan: Any, choice: DatasetChoice, progress: Progress) -> Release:
        """Submit ``config`` (the form's settings), follow the job, download its files; raises
        :class:`~dppca_dask.client.ServerError` for a refusal or a job that did not release."""
        from dppca_dask.client import ServerError
        from dppca_dask.results.base import load_result

        client = self.remote.client
        before = self.remote.budget(choice)
        progress.planned_passes = plan.release.passes
        progress.phase = "submitting: the server reserves the budget"
        job = client.submit(config)
        seen = 0
        while job["state"] in ("queued", "running"):
            done = int(job["passes"]["done"])
            with progress.lock:
                while seen < done:
                    seen += 1
                    progress.passes.append(f"Pass {seen} (on the server)")
                progress.phase = (f"queued on the server (position {job.get('position')})"
                                  if job["state"] == "queued" else "data passes on the server")
            time.sleep(0.5)
            job = client.job(job["id"])
        if job["state"] != "released":
            raise ServerError(f"Job {job['id']} {job['state']}: {job.get('message') or ''}"
                              .rstrip(": "))
        with progress.lock:
            progress.passes.extend(f"Pass {k} (on the server)"
                                   for k in range(seen + 1, int(job["passes"]["done"]) + 1))
        directory = client.download(job["id"], fresh_run_directory(self.output_directory))
        stores = sorted(directory.glob(f"{job['task']}.zarr"))
        result = load_result(stores[0]) if stores else None
        after = self.remote.budget(choice)
        spend = plan.spend
        release = Release(len(self.history) + 1, choice.label, str(directory),
                          f"eps = {spend.eps:.4g}, delta = {spend.delta:.3g}", before, after,
                          result, tuple(sorted(str(p) for p in directory.iterdir())))
        self.history.append(release)
        return release
