"""The run watchdog: a computation on any cluster kind ends in bounded time.

While :func:`dppca_dask.pipeline.cluster.connect`'s compute waits for its results, a
:class:`Watchdog` thread asks the scheduler once a second for (workers connected, tasks
finished so far, tasks pending). It cancels the computation, and records why, when

* no worker has been connected for ``timeout`` seconds (``cluster.timeout``; all workers
  killed, batch jobs ended, pods evicted): without it the scheduler would hold the tasks as
  "no-worker" forever;
* no task has finished for ``stall_timeout`` seconds (``cluster.stall_timeout``) while tasks
  are pending and workers are connected: workers paused near their memory limit, a task blocked
  on its input;
* the scheduler has not answered for ``timeout`` seconds (a stopped or hung scheduler process;
  a scheduler that is *gone* closes the connection and the compute fails at once).

A worker that has sent no heartbeat for ``timeout`` seconds (a stopped or hung worker process,
whose tasks would otherwise wait until Dask's ``worker-ttl`` of 5 minutes) is restarted by
the scheduler through its nanny from the probe (the scheduler's own ``check_worker_ttl``), or
removed when that gets no answer (its nanny is stopped too); its tasks rerun elsewhere and the
release is unchanged.

The count of finished tasks comes from a small scheduler plugin that the probe installs on the
scheduler (named per computation, removed at the end). The probe and the plugin are defined
inside functions, so cloudpickle sends them by value: the scheduler needs only ``distributed``,
not this package. A scheduler that refuses pickled functions
(``distributed.scheduler.pickle: false``) is watched for its workers only (``scheduler_info``).

The same probe sets the scheduler's ``allowed_failures`` (``cluster.allowed_failures``) for the
run and restores it afterwards (:func:`set_allowed_failures`).

No data passes through here: worker counts, task counts and timings only.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["SILENT_SCHEDULERS", "Watchdog", "set_allowed_failures"]

PROBE_INTERVAL = 1.0
"""Seconds between two probes of the scheduler."""

SILENT_SCHEDULERS: weakref.WeakSet[Any] = weakref.WeakSet()
"""Clients whose scheduler a watchdog found silent: the end of the run asks them nothing more
(no plugin removal, no allowed_failures restore), so a hung scheduler cannot hold it."""


def _make_probe(name: str, ttl: float | None = None) -> Callable[..., tuple[int, int, int]]:
    """A function run on the scheduler: (workers, tasks finished since installed, pending).

    With ``ttl``: a worker whose last heartbeat is older than ``ttl`` seconds (a stopped or
    hung worker process: its tasks would wait forever) is handed to the scheduler's own
    ``check_worker_ttl`` with ``worker_ttl = ttl`` for that call, which restarts it through its
    nanny (or removes it); one still silent after that (its nanny is stopped too: the restart
    gets no answer within min(ttl, 10) s) is removed. Its tasks then run elsewhere."""

    def probe(dask_scheduler: Any = None) -> tuple[int, int, int]:
        plugin = dask_scheduler.plugins.get(name)
        if plugin is None:
            from distributed.diagnostics.plugin import SchedulerPlugin

            class Finished(SchedulerPlugin):
                def __init__(self) -> None:
                    self.count = 0
                    self.restarting = False
                    self.restart_task: Any = None

                def transition(self, key: Any, start: str, finish: str, *args: Any,
                               **kwargs: Any) -> None:
                    if finish in ("memory", "erred"):
                        self.count += 1

            plugin = Finished()
            dask_scheduler.add_plugin(plugin, name=name)
        workers = dask_scheduler.workers
        if ttl and not plugin.restarting:
            from distributed.metrics import time as clock

            now = clock()
            if any(now - ws.last_seen > ttl for ws in workers.values()):
                import asyncio
                import contextlib

                plugin.restarting = True
                before = dask_scheduler.worker_ttl

                async def restart() -> None:
                    dask_scheduler.worker_ttl = ttl
                    try:
                        with contextlib.suppress(asyncio.TimeoutError):  # a stopped nanny
                            await asyncio.wait_for(dask_scheduler.check_worker_ttl(),
                                                   min(ttl, 10.0))
                        late = clock()
                        for ws in list(dask_scheduler.workers.values()):
                            if late - ws.last_seen > ttl:  # still silent: its tasks go elsewhere
                                await dask_scheduler.remove_worker(
                                    ws.address, stimulus_id=f"dppca-watchdog-silent-{late}",
                                    close=False)
                    finally:
                        dask_scheduler.worker_ttl = before
                        plugin.restarting = False

                plugin.restart_task = asyncio.ensure_future(restart())  # held: not collected
        pending = (len(dask_scheduler.queued) + len(dask_scheduler.unrunnable)
                   + sum(len(ws.processing) for ws in workers.values()))
        return len(workers), int(plugin.count), int(pending)

    return probe


def _make_remove(name: str) -> Callable[..., None]:
    def remove(dask_scheduler: Any = None) -> None:
        if name in dask_scheduler.plugins:
            dask_scheduler.remove_plugin(name=name)

    return remove


def _make_allowed_failures(value: int | None) -> Callable[..., int]:
    def swap(dask_scheduler: Any = None) -> int:
        old = int(dask_scheduler.allowed_failures)
        if value is not None:
            dask_scheduler.allowed_failures = value
        return old

    return swap


def set_allowed_failures(client: Any, value: int, timeout: float | None = None) -> int | None:
    """Set the scheduler's ``allowed_failures`` to ``value``; returns the previous value (None
    when the scheduler refuses pickled functions: its own setting then applies). ``timeout``:
    seconds to wait for the scheduler's answer (``TimeoutError`` after; None: no limit)."""
    try:
        return int(client.run_on_scheduler(_make_allowed_failures(value),
                                           callback_timeout=timeout))
    except (OSError, TimeoutError):
        raise
    except Exception:  # noqa: BLE001 -- e.g. the scheduler refuses pickled functions
        return None


class Watchdog:
    """Cancels ``futures`` when the cluster has had no worker for ``timeout`` s, no task has
    finished for ``stall_timeout`` s while tasks were pending, or the scheduler has not answered
    for ``timeout`` s. After :meth:`stop`, :attr:`reason` is None or one sentence saying which."""

    def __init__(self, client: Any, futures: Any, *, timeout: float, stall_timeout: float,
                 where: str, interval: float = PROBE_INTERVAL) -> None:
        self.timeout, self.stall_timeout, self.where = float(timeout), float(stall_timeout), where
        self.interval = min(interval, self.timeout / 4, self.stall_timeout / 4)
        self.reason: str | None = None
        self.silent = False  # fired because the scheduler stopped answering
        self._client, self._futures = client, futures
        self._name = f"dppca-watchdog-{uuid.uuid4().hex[:12]}"
        self._probe = _make_probe(self._name, self.timeout)
        self._scheduler_side = True
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name="dppca-watchdog")
        self._thread.start()

    @property
    def fired(self) -> bool:
        return self.reason is not None

    def _ask(self) -> tuple[int, int | None, int | None]:
        """(workers, finished, pending); finished and pending None without the plugin."""
        wait = max(1.0, min(10.0, self.timeout / 2))
        if self._scheduler_side:
            try:
                return self._client.run_on_scheduler(self._probe, callback_timeout=wait)
            except (OSError, TimeoutError):
                raise
            except Exception:  # noqa: BLE001 -- no pickled functions: workers only
                self._scheduler_side = False
        info = self._client.scheduler_info()
        return len(info.get("workers", {})), None, None

    def _watch(self) -> None:
        now = time.monotonic()
        empty_since: float | None = None
        silent_since: float | None = None  # the scheduler's last answer
        last_finish, finished = now, -1
        while not self._done.wait(self.interval):
            now = time.monotonic()
            try:
                workers, done, pending = self._ask()
            except TimeoutError:
                silent_since = silent_since if silent_since is not None else now - self.interval
                if now - silent_since >= self.timeout:
                    self.silent = True
                    SILENT_SCHEDULERS.add(self._client)
                    self._fire(f"The Dask scheduler at {self.where} has not answered for "
                               f"{self.timeout:g} s (cluster.timeout) during the run: is its "
                               "process stopped or overloaded? Nothing was released")
                    return
                continue
            except (OSError, RuntimeError):  # connection gone: the compute reports it
                return
            silent_since = None
            if done is not None and done != finished:
                finished, last_finish = done, now
            if workers:
                empty_since = None
            else:
                empty_since = empty_since if empty_since is not None else now
                if now - empty_since >= self.timeout:
                    self._fire(f"No Dask worker has been connected to {self.where} for "
                               f"{self.timeout:g} s (cluster.timeout) during the run: its "
                               "workers are gone (killed, e.g. out of memory? batch jobs or "
                               "pods ended? hung, so removed after sending no heartbeat?). "
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
                self._client.run_on_scheduler(_make_remove(self._name), callback_timeout=5)
