"""The release service without HTTP: the catalogue, plans, submissions, the durable queue.

:class:`Service` is what the HTTP layer (:mod:`dppca_dask.service.api`) calls once it knows
the analyst. A submission is planned from metadata (:func:`~dppca_dask.pipeline.runner.plan_run`)
and reserved in the ledger (:meth:`~dppca_dask.pipeline.ledger.Ledger.reserve`: the dataset's
cap and the analyst's, tight composition, one ``BEGIN IMMEDIATE`` transaction) *before* it is
queued, so of N concurrent submissions against a cap that admits k, exactly k are queued.
:class:`Queue` starts each queued job as its own process (:mod:`dppca_dask.service.worker`),
enforces the time limit and cancellations with SIGTERM (then SIGKILL after the grace period),
and settles the reservation of a worker that could not: kept as spent when the worker had
noted its first noise draw, refunded otherwise.

Restarts: jobs are rows of ``service.sqlite``. On start, a job left ``running`` by a server that
stopped is settled as above; if no noise was drawn it is queued again and reserves again before
the server takes requests, else it failed (spent). Queued jobs keep their reservations.

What leaves: the datasets' public metadata (n, p, names, caps, spend), plans (as ``plan
--json``), a job's state, its data passes done out of the planned count, and -- once released --
the files of its output folder, only when nothing in the release is outside the guarantee.
Error messages of a running job are its error's *type*; the custodian's ``worker.log`` has the
rest. No time after the data is read is given (only the submission's).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dppca_dask.errors import BudgetError, ConfigError
from dppca_dask.service.auth import Authenticator
from dppca_dask.service.requests import Refused, parse_config, resolve_config
from dppca_dask.service.settings import DatasetConfig, ServiceConfig
from dppca_dask.service.store import Job, ServiceStore

__all__ = ["DatasetInfo", "Queue", "Service", "zip_folder"]

WORKER = "dppca_dask.service.worker"


@dataclass(frozen=True)
class DatasetInfo:
    """A catalogue dataset with its ledger identity and public metadata."""

    entry: DatasetConfig
    identity: Any
    source: Any


def zip_folder(folder: Path, top: str) -> bytes:
    """``folder`` as a zip archive under ``top/``: fixed dates and modes (when a file was
    written depends on how long the data took)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                info = zipfile.ZipInfo(f"{top}/{path.relative_to(folder).as_posix()}",
                                       date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def _remaining(cap: Any, spend: Any) -> dict[str, Any] | None:
    if cap is None:
        return None
    used_eps = 0.0 if spend is None else spend.tight_eps
    used_rho = 0.0 if spend is None else spend.rho
    return {"eps": None if cap.eps is None else max(0.0, cap.eps - used_eps),
            "delta": cap.delta,
            "rho": None if cap.rho is None else max(0.0, cap.rho - used_rho)}


class Service:
    """The catalogue, the ledger, the analysts and the jobs of one server."""

    def __init__(self, config: ServiceConfig) -> None:
        from dppca_dask.pipeline.deployment import deployment_settings, parse_ledger_url
        from dppca_dask.pipeline.ledger import Ledger

        self.config = config
        self.limits = config.limits
        settings = deployment_settings()
        if settings.accountant != "tight":
            raise ConfigError("The release service admits releases by the tight accountant "
                              "only (analysts choose releases after seeing earlier ones); the "
                              "deployment sets dppca.ledger.accountant: "
                              f"{settings.accountant}. Remove that setting.")
        if config.ledger is None:
            path, caps = settings.ledger_path, settings.caps_path
        else:
            path, caps = parse_ledger_url(config.ledger, "ledger"), None
        self.ledger = Ledger(path, journal_mode=settings.journal_mode, caps=caps)
        self.ledger_spec = {"path": str(path), "journal_mode": settings.journal_mode,
                            "caps": None if caps is None else str(caps)}
        with self.ledger.connection():  # created, or a version-1 ledger upgraded
            pass
        report = self.ledger.verify()
        if not report.ok:
            raise BudgetError(f"Refused to start: the release log of the ledger {str(path)!r} "
                              f"is broken: {'; '.join(report.problems)}. `dppca-dask budget "
                              "verify` names the entries; the custodian must investigate.")
        self.store = ServiceStore(config.state)
        self.auth = Authenticator(config.auth, self.store)
        self.datasets = {entry.name: self._describe(entry) for entry in config.datasets}
        seen: dict[str, str] = {}
        for name, info in self.datasets.items():
            other = seen.setdefault(info.identity.dataset_id, name)
            if other != name:
                raise ConfigError(f"Datasets {other!r} and {name!r} of the service file are one "
                                  f"dataset (id {info.identity.dataset_id}): one budget, so one "
                                  "catalogue entry.")
        self._apply_caps()
        self.lock = threading.RLock()
        """Held around every change of a job's state (submit, cancel, start, finish)."""
        self.queue = Queue(self)

    # -- catalogue -----------------------------------------------------------------------------

    @staticmethod
    def _describe(entry: DatasetConfig) -> DatasetInfo:
        from dppca_dask.errors import DPPCAError
        from dppca_dask.io.data import describe_source
        from dppca_dask.io.identity import resolve_dataset

        try:
            identity = resolve_dataset(entry.path, entry.array)
            source = describe_source(entry.path, array=entry.array, group=entry.group)
        except DPPCAError as exc:
            raise ConfigError(f"Dataset {entry.name!r} of the service file ({entry.path}): "
                              f"{exc}") from None
        return DatasetInfo(entry, identity, source)

    def _apply_caps(self) -> None:
        """Write the service file's caps into the ledger where they differ (each change is a
        ``cap`` entry of the release log)."""
        from dppca_dask.pipeline.ledger import EVERY_ANALYST

        for info in self.datasets.values():
            entry, identity = info.entry, info.identity
            held = self.ledger.dataset(identity.dataset_id)
            if held is None or held.cap != entry.cap.cap():
                self.ledger.set_cap(identity, entry.cap.cap())
            wanted = {name: c.cap() for name, c in entry.analyst_caps.items()}
            if entry.analyst_cap is not None:
                wanted[EVERY_ANALYST] = entry.analyst_cap.cap()
            have = self.ledger.analyst_caps(identity.dataset_id)
            for name in sorted(set(wanted) | set(have)):
                if wanted.get(name) != have.get(name):
                    self.ledger.set_cap(identity, wanted.get(name), analyst=name)

    def dataset_view(self, info: DatasetInfo, analyst: str) -> dict[str, Any]:
        """A dataset's public metadata and budget, as ``analyst`` sees it."""
        dataset_id = info.identity.dataset_id
        cap = info.entry.cap.cap()
        spent = self.ledger.spent(dataset_id, delta=cap.delta)
        own = self.ledger.analyst_cap(dataset_id, analyst)
        mine = self.ledger.spent_by(dataset_id, analyst,
                                    delta=(own or cap).delta or cap.delta)
        src = info.source
        return {
            "name": info.entry.name, "description": info.entry.description,
            "n": src.n, "p": src.p, "variables": list(src.variables),
            "group": info.entry.group, "dataset_id": dataset_id, "C_clip": info.entry.C_clip,
            "cap": cap.as_dict(), "spent": None if spent is None else spent.as_dict(),
            "remaining": _remaining(cap, spent),
            "analyst": {"name": analyst, "cap": None if own is None else own.as_dict(),
                        "spent": None if mine is None else mine.as_dict(),
                        "remaining": _remaining(own, mine)},
        }

    def visible(self, analyst: str) -> list[DatasetInfo]:
        return [i for i in self.datasets.values() if i.entry.allows(analyst)]

    def info(self, name: str, analyst: str) -> DatasetInfo:
        info = self.datasets.get(name)
        if info is None:
            raise Refused(f"No dataset {name!r} in this server's catalogue.", 404)
        if not info.entry.allows(analyst):
            raise Refused(f"Analyst {analyst!r} may not use dataset {name!r}.", 403)
        return info

    # -- plans and submissions -----------------------------------------------------------------

    def _planned(self, analyst: str, payload: Any, output: Path) -> tuple[Any, Any, Any]:
        from dppca_dask.pipeline.runner import plan_run

        data = parse_config(payload, self.limits.max_config_bytes)
        resolved = resolve_config(data, self.config, analyst, str(output))
        plan = plan_run(resolved.config, cap_check=False)
        return resolved, plan, self.datasets[resolved.dataset.name]

    @staticmethod
    def _run_cap(config: Any) -> Any:
        from dppca_dask.pipeline.budget_cap import Cap

        cap = config.budget_ledger.cap
        return None if cap is None else Cap(cap.eps, cap.delta, cap.rho)

    def plan(self, analyst: str, payload: Any) -> dict[str, Any]:
        """``plan --json`` of the analyst's config, after the same cap checks as a submission
        (read only: nothing is recorded)."""
        resolved, plan, info = self._planned(analyst, payload, self.store.root / "plan-only")
        self.ledger.check(info.identity, [r.as_dict() for r in plan.release.records],
                          plan.spend, run_cap=self._run_cap(resolved.config), require_cap=True,
                          analyst=analyst)
        return {**plan.as_dict(), "dataset": info.entry.name, "notes": list(resolved.notes),
                "guarantees": list(plan.guarantees)}

    def submit(self, analyst: str, payload: Any) -> tuple[Job, list[str]]:
        """Plan, reserve and queue the analyst's config; returns the job and notes."""
        job_id = uuid.uuid4().hex
        output = self.store.job_dir(job_id) / "output"
        resolved, plan, info = self._planned(analyst, payload, output)
        config = resolved.config
        with self.lock:
            with self.store.connection(write=False) as con:
                waiting = self.store.queued_count(con, analyst)
            if waiting >= self.limits.max_queued_per_analyst:
                raise Refused(f"Analyst {analyst!r} has {waiting} jobs queued or running; this "
                              f"server takes at most {self.limits.max_queued_per_analyst} "
                              "(limits.max_queued_per_analyst). Wait for one to finish.", 429)
            rid = self.ledger.reserve(
                info.identity, [r.as_dict() for r in plan.release.records], plan.spend,
                run_cap=self._run_cap(config), require_cap=True, task=config.task,
                output=str(output), analyst=analyst)
            try:
                with self.store.connection() as con:
                    self.store.add_job(con, job_id, analyst, info.entry.name, config.task, rid,
                                       {**config.to_dict(), "rng": None},
                                       plan.release.passes, plan.spend.eps, plan.spend.delta)
            except BaseException:
                self.ledger.cancel(rid, note="not queued: the server could not record the job")
                raise
        self.store.audit("submitted", analyst=analyst, job=job_id, dataset=info.entry.name,
                         reservation=rid)
        self.queue.wake()
        job = self.store.job(job_id)
        assert job is not None
        return job, list(resolved.notes) + [f"Warning: {w}" for w in plan.guarantees]

    # -- jobs ----------------------------------------------------------------------------------

    def job(self, analyst: str, job_id: str) -> Job:
        job = self.store.job(job_id) if len(job_id) <= 64 else None
        if job is None or job.analyst != analyst:  # another analyst's job is not found
            raise Refused(f"No job {job_id!r} of analyst {analyst!r} on this server.", 404)
        return job

    def output(self, job: Job) -> Path:
        return self.store.job_dir(job.id) / "output"

    def job_view(self, job: Job) -> dict[str, Any]:
        done = 0
        progress = self.store.job_dir(job.id) / "progress.json"
        if job.state == "running" and progress.exists():
            with contextlib.suppress(OSError, ValueError):
                done = int(json.loads(progress.read_text())["passes"])
        elif job.state == "released":
            done = job.passes or 0
        position = None
        if job.state == "queued":
            queued = [j.id for j in self.store.jobs(states=("queued",))]
            position = queued.index(job.id) + 1 if job.id in queued else None
        files = self.files(job) if job.state == "released" and not job.withheld else None
        return {"id": job.id, "dataset": job.dataset, "task": job.task, "state": job.state,
                "cancelling": job.cancel and job.state == "running",
                "submitted": job.submitted, "spend": {"eps": job.eps, "delta": job.delta},
                "passes": {"done": done, "planned": job.passes}, "position": position,
                "reservation": job.reservation, "message": job.message or None,
                "files": files}

    def cancel(self, analyst: str, job_id: str) -> Job:
        with self.lock:
            job = self.job(analyst, job_id)
            if job.finished:
                raise Refused(f"Job {job_id} is already {job.state}; nothing to cancel.", 409)
            if job.state == "queued":
                if job.reservation is not None:
                    self.ledger.cancel(job.reservation, note="cancelled by the analyst before "
                                       "it ran")
                self.store.update(job.id, state="cancelled", message="cancelled before it ran: "
                                  "the budget was refunded")
            else:
                self.store.update(job.id, cancel=1)
        self.store.audit("cancel", analyst=analyst, job=job_id, state=job.state)
        self.queue.wake()
        return self.job(analyst, job_id)

    def released_output(self, job: Job) -> Path:
        if job.state != "released":
            raise Refused(f"Job {job.id} is {job.state}: its outputs exist once it is released.",
                          409)
        if job.withheld:
            raise Refused(f"Job {job.id}'s outputs are withheld: {job.withheld} (outside the "
                          "privacy guarantee).", 403)
        return self.output(job)

    def files(self, job: Job) -> list[dict[str, Any]]:
        """The output folder's entries: files, and folders (Zarr stores) served as zips."""
        folder = self.output(job)
        out = []
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if path.name.startswith(".") or path.is_symlink():
                continue
            if path.is_dir():
                size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
                out.append({"name": path.name, "kind": "folder (sent as a zip)", "bytes": size})
            else:
                out.append({"name": path.name, "kind": "file", "bytes": path.stat().st_size})
        return out

    def file(self, job: Job, name: str) -> tuple[bytes, str]:
        """One entry of the output folder: a file's bytes, or a folder zipped; with its name."""
        folder = self.released_output(job)
        if name in ("", ".", "..") or "/" in name or "\\" in name or name.startswith("."):
            raise Refused(f"No file {name!r} in job {job.id}'s outputs.", 404)
        path = folder / name
        if path.is_symlink() or not path.exists():
            raise Refused(f"No file {name!r} in job {job.id}'s outputs (GET .../files lists "
                          "them).", 404)
        if path.is_dir():
            return zip_folder(path, name), f"{name}.zip"
        return path.read_bytes(), name

    def results_zip(self, job: Job) -> bytes:
        return zip_folder(self.released_output(job), job.id)

    # -- life ----------------------------------------------------------------------------------

    def start(self) -> None:
        self.hold_state()
        self.queue.recover()
        self.queue.start()

    def hold_state(self) -> None:
        """Take the state directory for this process: a second server on the same state (and
        so the same queue) is refused while this one runs (an exclusive ``flock``, released by
        the kernel however this process ends)."""
        import fcntl

        if getattr(self, "_lock_file", None) is not None:
            return
        handle = open(self.store.root / "server.lock", "a+")  # noqa: SIM115 -- held for life
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise ConfigError(f"Another server (pid {holder}) serves the state directory "
                              f"{str(self.store.root)!r}: one server per state directory and "
                              "ledger. Stop it first.") from None
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock_file = handle

    def stop(self) -> None:
        running = len(self.queue.running)
        self.queue.stop()
        print(f"dppca-dask serve: stopped ({running} running job(s) stopped: refunded and "
              "queued again before their first noise draw, spent after it).", file=sys.stderr,
              flush=True)


@dataclass
class _Running:
    proc: subprocess.Popen[bytes]
    started: float
    term_at: float | None = None
    reason: str = ""
    log: Any = field(default=None, repr=False)


def _is_worker(pid: int, job_id: str) -> bool:
    """Whether ``pid`` is the worker process of ``job_id`` (a server that stopped left it)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return WORKER.encode() in cmdline and any(job_id.encode() in part for part in cmdline)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped has ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _stop_pid(pid: int, grace: float) -> None:
    """SIGTERM ``pid``, then SIGKILL after ``grace`` seconds; wait until it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            if not _alive(pid):
                return
            time.sleep(0.1)


class Queue:
    """Starts queued jobs as processes (at most ``max_running``), watches them, settles them."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.store = service.store
        self.running: dict[str, _Running] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="dppca-queue", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 -- the queue must outlive one bad job
                print(f"dppca-dask serve: queue error {type(exc).__name__}: {exc}",
                      file=sys.stderr, flush=True)
            self._wake.wait(0.5)
            self._wake.clear()

    def tick(self) -> None:
        limits = self.service.limits
        for job_id, run in list(self.running.items()):
            if run.proc.poll() is not None:
                self._settle(job_id, run.reason or "error")
                continue
            job = self.store.job(job_id)
            clock = time.monotonic()
            if run.term_at is None:
                if job is not None and job.cancel:
                    self._terminate(run, "cancel")
                elif clock - run.started > limits.job_time_limit_s:
                    self._terminate(run, "time limit")
            elif clock - run.term_at > limits.cancel_grace_s:
                with contextlib.suppress(ProcessLookupError):
                    run.proc.kill()
        while not self._stopping.is_set() and len(self.running) < self.service.config.max_running:
            queued = [j for j in self.store.jobs(states=("queued",)) if j.reservation]
            if not queued or not self._launch(queued[0]):
                break

    @staticmethod
    def _terminate(run: _Running, reason: str) -> None:
        run.reason, run.term_at = reason, time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            run.proc.send_signal(signal.SIGTERM)

    def _launch(self, job: Job) -> bool:
        service = self.service
        folder = self.store.job_dir(job.id)
        with service.lock:
            current = self.store.job(job.id)
            if current is None or current.state != "queued":
                return True
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            for stale in ("progress.json", "outcome.json", "drawn"):
                (folder / stale).unlink(missing_ok=True)
            for leftover in folder.glob(".output.tmp-*"):  # a killed attempt's temporary
                shutil.rmtree(leftover, ignore_errors=True)
            info = service.datasets.get(job.dataset)
            spec = {"config": job.config, "ledger": service.ledger_spec,
                    "reservation": job.reservation, "attempt": job.attempt + 1,
                    "group_sizes_public": bool(info and info.entry.group)}
            (folder / "job.json").write_text(json.dumps(spec))
            log = open(folder / "worker.log", "ab")  # noqa: SIM115 -- closed when it ends
            env = {**os.environ, "MPLBACKEND": "Agg"}
            proc = subprocess.Popen([sys.executable, "-m", WORKER, str(folder)], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=env)
            self.running[job.id] = _Running(proc, time.monotonic(), log=log)
            self.store.update(job.id, state="running", pid=proc.pid, attempt=job.attempt + 1)
        self.store.audit("started", job=job.id, analyst=job.analyst, pid=proc.pid)
        return True

    def _settle(self, job_id: str, reason: str) -> None:
        """A job's process has ended (or is gone): settle its reservation and its state."""
        run = self.running.pop(job_id, None)
        if run is not None and run.log is not None:
            run.log.close()
        service, ledger = self.service, self.service.ledger
        job = self.store.job(job_id)
        if job is None or job.reservation is None:
            return
        folder = self.store.job_dir(job_id)
        outcome: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            outcome = json.loads((folder / "outcome.json").read_text())
        error = str(outcome.get("error") or "killed")
        with service.lock:
            held = ledger.reservation(job.reservation)
            if held is not None and held.status == "reserved":  # its process could not settle
                if (folder / "drawn").exists():
                    ledger.fail_after_draw(job.reservation, error="Killed")
                else:
                    ledger.cancel(job.reservation, note="the job's process stopped before any "
                                  "noise was drawn")
                held = ledger.reservation(job.reservation)
            status = None if held is None else held.status
            fields: dict[str, Any] = {"pid": None, "cancel": 0}
            limit = f"{service.limits.job_time_limit_s:g} s"
            if status == "released":
                hidden = outcome.get("withheld")
                if hidden is None:
                    info = service.datasets.get(job.dataset)
                    hidden = _check_release(folder / "output", job.task,
                                            bool(info and info.entry.group))
                fields.update(state="released", message="", withheld="; ".join(hidden))
            elif status == "failed":
                why = {"cancel": "cancelled by the analyst after noise was drawn",
                       "time limit": f"stopped at the time limit ({limit}) after noise was "
                                     "drawn"}.get(reason, f"failed after noise was drawn ({error})")
                fields.update(state="failed", message=f"{why}: the budget stays spent")
            elif status == "cancelled" and reason in ("shutdown", "restart"):
                fields.update(state="queued", reservation=None, message="")
            elif status == "cancelled" and reason == "cancel":
                fields.update(state="cancelled", message="cancelled while running, before any "
                              "noise was drawn: the budget was refunded")
            elif status == "cancelled":
                why = (f"stopped at the time limit ({limit})" if reason == "time limit"
                       else f"failed ({error})")
                fields.update(state="failed", message=f"{why} before any noise was drawn: the "
                              "budget was refunded")
            else:
                fields.update(state="failed", message=f"its reservation is {status}: closed by "
                              "the custodian")
            self.store.update(job_id, **fields)
        self.store.audit("ended", job=job_id, analyst=job.analyst, state=fields["state"],
                         reservation=status)

    def recover(self) -> None:
        """Before the server takes requests: settle the jobs a stopped server left running,
        then make sure every queued job holds an open reservation (re-reserving the ones that
        were refunded when they were stopped)."""
        grace = self.service.limits.cancel_grace_s
        for job in self.store.jobs(states=("running",)):
            if job.pid is not None and _is_worker(job.pid, job.id):
                _stop_pid(job.pid, grace)
            self._settle(job.id, "restart")
        for job in self.store.jobs(states=("queued",)):
            if job.reservation is not None:
                held = self.service.ledger.reservation(job.reservation)
                if held is None or held.status != "reserved":
                    self.store.update(job.id, state="failed", message="its reservation was "
                                      "closed by the custodian while it waited")
                continue
            self._reserve_again(job)

    def _reserve_again(self, job: Job) -> None:
        from dppca_dask.errors import DPPCAError
        from dppca_dask.pipeline.config import RunConfig
        from dppca_dask.pipeline.runner import plan_run

        service = self.service
        info = service.datasets.get(job.dataset)
        try:
            if info is None:
                raise Refused(f"dataset {job.dataset!r} is no longer in the catalogue", 404)
            config = RunConfig.from_dict(job.config)
            plan = plan_run(config, cap_check=False)
            rid = service.ledger.reserve(
                info.identity, [r.as_dict() for r in plan.release.records], plan.spend,
                run_cap=service._run_cap(config), require_cap=True, task=config.task,
                output=job.config["output"]["directory"], analyst=job.analyst)
        except DPPCAError as exc:
            self.store.update(job.id, state="failed", message="not rerun after the server "
                              f"restarted: {exc}")
            return
        self.store.update(job.id, reservation=rid)

    def stop(self) -> None:
        """Stop taking jobs; stop the running ones (they refund or keep their reservations;
        a job stopped before its first draw is queued again for the next start)."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for run in self.running.values():
            self._terminate(run, "shutdown")
        deadline = time.monotonic() + self.service.limits.cancel_grace_s
        for job_id, run in list(self.running.items()):
            try:
                run.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                run.proc.kill()
                run.proc.wait(timeout=30)
            self._settle(job_id, "shutdown")


def _check_release(folder: Path, task: str, group_sizes_public: bool) -> list[str]:
    """The privacy check of a release whose worker stopped before making it."""
    from dppca_dask.results.base import load_result
    from dppca_dask.service.worker import withheld

    stores = sorted([*folder.glob(f"{task}.zarr"), *folder.glob(f"{task}.nc")])
    try:
        return withheld(load_result(stores[0]), group_sizes_public)
    except Exception as exc:  # noqa: BLE001 -- unreadable: withheld
        return [f"the release could not be checked ({type(exc).__name__})"]
