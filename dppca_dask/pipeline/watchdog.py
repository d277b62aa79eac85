"""The run watchdog: a computation on any cluster kind ends in bounded time.

While :func:`dppca_dask.pipeline.cluster.connect`'s compute waits for its results, a
:class:`Watchdog` thread asks the scheduler once a second for (workers connected, tasks
finished so far, tasks pending, the silent workers, the scheduler's own lateness) through the
probe of :mod:`dppca_dask.pipeline.watchdog_probe`. It cancels the computation, and records
why, when

* no worker has been connected for ``timeout`` seconds (``cluster.timeout``; all workers
  killed, batch jobs ended, pods evicted): without it the scheduler would hold the tasks as
  "no-worker" forever;
* no task has finished for ``stall_timeout`` seconds (``cluster.stall_timeout``) while tasks
  are pending and workers are connected: workers paused near their memory limit, a task blocked
  on its input. The time the scheduler's event loop ran late is not counted;
* the scheduler has not answered for ``timeout`` seconds and its process is stopped, gone, or
  cannot be seen from here (another host), or for ``stall_timeout`` seconds (at least
  ``timeout``) while its process runs (a loaded machine, a blocked event loop). A scheduler
  that is *gone* closes the connection and the compute fails at once.

A worker silent past its deadline (:func:`~dppca_dask.pipeline.liveness.worker_ttl`: at least
``cluster.timeout``; its silence counted while the scheduler's loop was responsive) is restarted
through its nanny only when its process is stopped (or hung: its CPU time stood still for
``stall_timeout``), and removed when it is gone or its nanny does not answer (stopped too); its
tasks rerun elsewhere and the release is unchanged. A worker whose process runs is never
restarted, however late its heartbeats (:func:`~dppca_dask.pipeline.liveness.judge_worker`;
Dask's own ``worker-ttl`` of 5 minutes still applies). Every restart and removal is a scheduler event of topic
``dppca-watchdog`` and an entry of :attr:`Watchdog.actions`.

The probe and its plugin are sent by value, so the scheduler needs only ``distributed``, not
this package. A scheduler that refuses pickled functions (``distributed.scheduler.pickle:
false``) is watched for its workers only (``scheduler_info``).

The same module sets the scheduler's ``allowed_failures`` (``cluster.allowed_failures``) for
the run and restores it afterwards (:func:`set_allowed_failures`).

No data passes through here: worker counts, task counts, process states and timings only.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
import weakref
from typing import Any

from dppca_dask.pipeline.liveness import (
    GONE,
    RUNNING,
    ProcessView,
    Sample,
    judge_scheduler,
    judge_worker,
    worker_ttl,
)
from dppca_dask.pipeline.watchdog_probe import (
    make_allowed_failures,
    make_identify,
    make_probe,
    make_remove,
)

__all__ = ["SILENT_SCHEDULERS", "Watchdog", "scheduler_process", "set_allowed_failures"]

PROBE_INTERVAL = 1.0
"""Seconds between two probes of the scheduler."""
NANNY_ANSWER = 10.0
"""Seconds a silent worker's nanny has to answer (at most the worker's deadline)."""

SILENT_SCHEDULERS: weakref.WeakSet[Any] = weakref.WeakSet()
"""Clients whose scheduler a watchdog found silent: the end of the run asks them nothing more
(no plugin removal, no allowed_failures restore), so a hung scheduler cannot hold it."""


def set_allowed_failures(client: Any, value: int, timeout: float | None = None) -> int | None:
    """Set the scheduler's ``allowed_failures`` to ``value``; returns the previous value (None
    when the scheduler refuses pickled functions: its own setting then applies). ``timeout``:
    seconds to wait for the scheduler's answer (``TimeoutError`` after; None: no limit)."""
    try:
        return int(client.run_on_scheduler(make_allowed_failures(value),
                                           callback_timeout=timeout))
    except (OSError, TimeoutError):
        raise
    except Exception:  # noqa: BLE001 -- e.g. the scheduler refuses pickled functions
        return None


def scheduler_process(client: Any, timeout: float = 10.0) -> tuple[int, float] | None:
    """The scheduler's (pid, process start time), asked once when the cluster is opened (a
    loaded scheduler may not answer the first probe of a computation); None when it does not
    answer or refuses pickled functions."""
    with contextlib.suppress(Exception):
        pid, started = client.run_on_scheduler(make_identify(), callback_timeout=timeout)
        return int(pid), float(started)
    return None


class _SchedulerProcess:
    """The scheduler's process, when it runs on this machine (same pid and start time as the
    probe reports), looked at while the scheduler is silent."""

    def __init__(self) -> None:
        self.process: Any = None
        self.samples: list[tuple[float, str, float | None]] = []  # (monotonic, status, cpu)

    def learn(self, pid: Any, started: Any) -> None:
        if self.process is not None or pid is None:
            return
        import psutil  # type: ignore[import-untyped]  # a dependency of distributed

        with contextlib.suppress(Exception):  # another host, another pid namespace: not seen
            process = psutil.Process(int(pid))
            if abs(process.create_time() - float(started)) < 0.05:
                self.process = process

    def look(self) -> tuple[Sample, ...]:
        if self.process is None:
            return ()
        import psutil

        now = time.monotonic()
        try:
            with self.process.oneshot():
                times, status = self.process.cpu_times(), str(self.process.status())
            self.samples.append((now, status, float(times.user + times.system)))
        except psutil.Error:
            self.samples.append((now, GONE, None))
        del self.samples[:-32]
        return tuple((now - t, s, c) for t, s, c in self.samples)


class Watchdog:
    """Cancels ``futures`` when the cluster has had no worker for ``timeout`` s, no task has
    finished for ``stall_timeout`` s while tasks were pending, or the scheduler has stopped
    answering; restarts or removes stopped workers. ``scheduler``: the scheduler's
    :func:`scheduler_process`, so that its process is known before the first answer. After :meth:`stop`, :attr:`reason` is None
    or one sentence saying why it fired; :attr:`actions` lists (worker, "restart"/"remove"),
    :attr:`spared` the workers silent past their deadline that were kept (their process ran)."""

    def __init__(self, client: Any, futures: Any, *, timeout: float, stall_timeout: float,
                 where: str, interval: float = PROBE_INTERVAL,
                 scheduler: tuple[int, float] | None = None) -> None:
        self.timeout, self.stall_timeout, self.where = float(timeout), float(stall_timeout), where
        self.interval = min(interval, self.timeout / 4, self.stall_timeout / 4)
        self.reason: str | None = None
        self.silent = False  # fired because the scheduler stopped answering
        self.ttl = self.timeout  # the workers' deadline, from the latest answer
        self.actions: list[tuple[str, str]] = []
        self.spared: set[str] = set()  # workers silent past the deadline whose process ran
        self.late = 0.0  # seconds the scheduler's event loop ran late, as last reported
        self._client, self._futures = client, futures
        self._name = f"dppca-watchdog-{uuid.uuid4().hex[:12]}"
        self._probe = make_probe(self._name)
        self._scheduler_side = True
        self._orders: dict[str, list[tuple[str, str]]] = {"restart": [], "remove": []}
        self._acted: dict[str, float] = {}  # worker -> when its action was sent
        self._scheduler = _SchedulerProcess()
        if scheduler is not None:  # (pid, start time) of scheduler_process
            self._scheduler.learn(*scheduler)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name="dppca-watchdog")
        self._thread.start()

    @property
    def fired(self) -> bool:
        return self.reason is not None

    def _params(self) -> dict[str, Any]:
        answer = min(self.ttl, NANNY_ANSWER)
        return {"suspect": self.ttl / 2, "answer": answer,
                "every": max(1.0, min(5.0, self.ttl / 5)), **self._orders}

    def _ask(self) -> dict[str, Any]:
        """The probe's answer; only ``workers`` without the scheduler-side probe."""
        wait = max(1.0, min(10.0, self.timeout / 2))
        if self._scheduler_side:
            try:
                answer = self._client.run_on_scheduler(self._probe, self._params(),
                                                       callback_timeout=wait)
            except (OSError, TimeoutError):
                raise
            except Exception:  # noqa: BLE001 -- no pickled functions: workers only
                self._scheduler_side = False
            else:
                self._orders = {"restart": [], "remove": []}  # delivered
                return dict(answer)
        info = self._client.scheduler_info()
        return {"workers": len(info.get("workers", {}))}

    def _judge_workers(self, answer: dict[str, Any], now: float) -> None:
        self.ttl = worker_ttl(self.timeout, int(answer["workers"]), answer.get("gaps", ()))
        for address, silence, samples in answer.get("silent", ()):
            view = ProcessView(float(silence), tuple(tuple(s) for s in samples))
            action = judge_worker(view, self.ttl, self.stall_timeout)
            if action == "keep":
                if view.silence >= self.ttl and view.state == RUNNING:
                    self.spared.add(address)  # late, but its process runs
                continue
            if now - self._acted.get(address, -float("inf")) < self.ttl:
                continue
            self._acted[address] = now
            self.actions.append((address, action))
            why = (f"no heartbeat for {silence:.0f} s (deadline {self.ttl:.0f} s); "
                   f"its process: {view.state}")
            self._orders[action].append((address, why))

    def _watch(self) -> None:
        now = time.monotonic()
        empty_since: float | None = None
        silent_since: float | None = None  # the scheduler's last answer
        last_finish, finished = now, -1
        late: float | None = None
        while not self._done.wait(self.interval):
            now = time.monotonic()
            try:
                answer = self._ask()
            except TimeoutError:
                silent_since = silent_since if silent_since is not None else now - self.interval
                view = ProcessView(now - silent_since, self._scheduler.look())
                verdict = judge_scheduler(view, self.timeout, self.stall_timeout)
                if verdict is not None:
                    self.silent = True
                    SILENT_SCHEDULERS.add(self._client)
                    self._fire(self._silent_reason(verdict, view.silence))
                    return
                continue
            except (OSError, RuntimeError):  # connection gone: the compute reports it
                return
            silent_since = None
            self._scheduler.samples.clear()
            self._scheduler.learn(answer.get("pid"), answer.get("started"))
            workers, done, pending = (int(answer["workers"]), answer.get("finished"),
                                      answer.get("pending"))
            if answer.get("late") is not None:  # the scheduler's late time is not a stall
                if late is not None:
                    last_finish += max(0.0, float(answer["late"]) - late)
                late = self.late = float(answer["late"])
            if done is not None and done != finished:
                finished, last_finish = done, now
            if "silent" in answer:
                self._judge_workers(answer, now)
            if workers:
                empty_since = None
            else:
                empty_since = empty_since if empty_since is not None else now
                if now - empty_since >= self.timeout:
                    self._fire(f"No Dask worker has been connected to {self.where} for "
                               f"{self.timeout:g} s (cluster.timeout) during the run: its "
                               "workers are gone (killed, e.g. out of memory? batch jobs or "
                               "pods ended? stopped, so removed?). "
                               "Nothing was released; check the workers' logs and memory")
                    return
            if not pending or not workers:
                last_finish = now
            elif now - last_finish >= self.stall_timeout:
                self._fire(f"No Dask task finished for {self.stall_timeout:g} s "
                           f"(cluster.stall_timeout) while {pending} were pending on "
                           f"{workers} worker(s) at {self.where}: are the workers paused near "
                           "their memory limit, or is a task blocked reading its input? "
                           "Nothing was released; check the workers' memory and logs")
                return

    def _silent_reason(self, verdict: str, silence: float) -> str:
        if verdict == "timeout":
            return (f"The Dask scheduler at {self.where} has not answered for "
                    f"{self.timeout:g} s (cluster.timeout) during the run: is its "
                    "process stopped or overloaded? Nothing was released")
        return (f"The Dask scheduler at {self.where} has not answered for {silence:.0f} s "
                f"during the run although its process is running (cluster.stall_timeout "
                f"{self.stall_timeout:g} s): is its machine overloaded, or its event loop "
                "blocked? Nothing was released")

    def _fire(self, reason: str) -> None:
        self.reason = reason

        def cancel() -> None:  # in its own thread: a hung scheduler must not hold the watchdog
            with contextlib.suppress(Exception):  # the run stops either way
                self._client.cancel(self._futures)

        threading.Thread(target=cancel, daemon=True, name="dppca-watchdog-cancel").start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=15)
        if self._scheduler_side and not self.silent and self._client.status == "running":
            with contextlib.suppress(Exception):  # cleanup only
                self._client.run_on_scheduler(make_remove(self._name), callback_timeout=5)
