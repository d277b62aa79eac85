"""Stopped or starved? The watchdog's decisions about silent processes, as pure functions.

A worker that sends no heartbeat, or a scheduler that does not answer, is either *stopped* (a
SIGSTOP, a dead process, a hung nanny or host) or only *late* (a loaded machine: the issue's
fault-free run saw the scheduler's event loop unresponsive for 20 s and a worker's for 32 s
while it imported the package). Silence alone cannot tell them apart, so the watchdog
(:mod:`dppca_dask.pipeline.watchdog`) also looks at the silent process itself and decides here:

* a worker's silence is counted in seconds during which the scheduler's own event loop was
  responsive (its lateness is subtracted: a late scheduler extends every deadline);
* its deadline is :func:`worker_ttl`: ``cluster.timeout``, or more when the heartbeats are
  slower (Dask's 10 x its heartbeat interval, 5 x the median gap measured between heartbeats);
* past it, :func:`judge_worker` restarts only a worker whose process is *stopped*; it removes
  one that is gone or whose nanny does not answer. A worker whose process runs is never
  restarted for late heartbeats; only one whose CPU time has also stood still for
  ``cluster.stall_timeout`` (a hung process; a task that holds the GIL while it waits, e.g. on
  slow storage, looks the same until then);
* :func:`judge_scheduler`: a silent scheduler whose process is stopped, or cannot be seen
  (another host), ends the run after ``cluster.timeout``; one whose process runs, after
  ``cluster.stall_timeout``.

The process is seen through :data:`Sample` s: the psutil status and CPU time of the worker
process, read by its nanny (any host) or, for a worker in the scheduler's own process, by the
scheduler; for the scheduler, by the driver when it runs on the same machine. Nothing here
imports ``distributed`` or reads data.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BLIND",
    "GONE",
    "PENDING",
    "RUNNING",
    "STOPPED",
    "UNREACHABLE",
    "ProcessView",
    "Sample",
    "heartbeat_interval",
    "judge_scheduler",
    "judge_worker",
    "worker_ttl",
]

RUNNING, STOPPED, GONE = "running", "stopped", "gone"
UNREACHABLE = "unreachable"
"""The nanny did not answer (stopped with its worker, or its host is cut off)."""
BLIND = "blind"
"""The process cannot be seen (no nanny and another process, another host)."""
PENDING = "pending"
"""Not looked at yet."""

Sample = tuple[float, str, float | None]
"""One look at a process: (age in seconds, status, CPU seconds used so far or None). The status
is psutil's (``"running"``, ``"sleeping"``, ``"stopped"``, ``"zombie"``, ...) or one of
:data:`GONE`, :data:`UNREACHABLE`, :data:`BLIND`."""

Action = Literal["keep", "restart", "remove"]

HEARTBEATS = 10
"""A worker is silent after this many of Dask's heartbeat intervals (Dask's own ``worker-ttl``
check uses the same factor)."""
MEASURED_GAPS = 5
"""... or after this many times the median gap measured between heartbeats (the scheduler's
lateness left out), once :data:`MIN_GAPS` gaps were measured."""
MIN_GAPS = 8
"""Gaps needed before they count: the first gap of a run may be one long task's."""
BLIND_FACTOR = 3
"""A worker whose process cannot be seen is judged by its heartbeats alone, after this many
times its deadline."""


def heartbeat_interval(n_workers: int) -> float:
    """Dask's heartbeat interval for a cluster of ``n_workers`` workers (seconds).

    >>> heartbeat_interval(2), heartbeat_interval(1000)
    (0.5, 6.0)
    """
    if n_workers <= 10:
        return 0.5
    if n_workers < 50:
        return 1.0
    if n_workers < 200:
        return 2.0
    return n_workers / 200 + 1


def worker_ttl(timeout: float, n_workers: int, gaps: Sequence[float] = ()) -> float:
    """Seconds of silence after which a worker is looked at as possibly stopped: at least
    ``timeout`` (``cluster.timeout``), longer when the heartbeats are slow (many workers, or a
    loaded machine: ``gaps`` are the measured seconds between heartbeats).

    >>> worker_ttl(10, 2), worker_ttl(10, 2, [3.0] * 8), worker_ttl(10, 2, [14.0])
    (10.0, 15.0, 10.0)
    >>> worker_ttl(10, 1000)
    60.0
    """
    measured = statistics.median(gaps) if len(gaps) >= MIN_GAPS else 0.0
    return max(float(timeout), HEARTBEATS * heartbeat_interval(n_workers),
               MEASURED_GAPS * measured)


def state_of(status: str | None) -> str:
    """:data:`RUNNING`, :data:`STOPPED`, :data:`GONE`, :data:`UNREACHABLE`, :data:`BLIND` or
    :data:`PENDING` (None) from a sample's status."""
    if status is None:
        return PENDING
    if status in ("stopped", "tracing-stop"):
        return STOPPED
    if status in ("zombie", "dead", GONE):
        return GONE
    if status in (UNREACHABLE, BLIND):
        return status
    return RUNNING  # running, sleeping, disk-sleep, idle, waking, ...


@dataclass(frozen=True)
class ProcessView:
    """A silent process: ``silence`` seconds without a heartbeat (worker) or an answer
    (scheduler), and the ``samples`` of its process, oldest first."""

    silence: float
    samples: tuple[Sample, ...] = ()

    @property
    def state(self) -> str:
        return state_of(self.samples[-1][1] if self.samples else None)

    @property
    def frozen(self) -> float:
        """Seconds over which the samples saw the process's CPU time stand still (0: it
        advanced at the last look, or there are fewer than two looks)."""
        if not self.samples or self.samples[-1][2] is None:
            return 0.0
        age, _, cpu = self.samples[-1]
        first = age
        for old_age, status, old_cpu in reversed(self.samples[:-1]):
            if old_cpu != cpu or state_of(status) != RUNNING:
                break
            first = old_age
        return first - age


def judge_worker(view: ProcessView, ttl: float, hung: float) -> Action:
    """What to do with a worker silent for ``view.silence`` s, its deadline ``ttl`` s.

    Restart (through its nanny) only a stopped process, or one whose CPU time stood still for
    ``hung`` s (at least ``ttl``); remove one that is gone or whose nanny does not answer (its
    tasks rerun elsewhere); keep a running one, whatever its silence (a loaded machine).

    >>> judge_worker(ProcessView(30.0, ((1.0, "stopped", 5.0),)), 10.0, 120.0)
    'restart'
    >>> judge_worker(ProcessView(30.0, ((9.0, "running", 5.0), (1.0, "running", 5.5))),
    ...              10.0, 120.0)
    'keep'
    """
    if view.silence < ttl:
        return "keep"
    state = view.state
    if state == STOPPED:
        return "restart"
    if state in (GONE, UNREACHABLE):
        return "remove"
    if state == RUNNING:
        return "restart" if view.frozen >= max(ttl, hung) else "keep"
    if state == BLIND:
        return "restart" if view.silence >= BLIND_FACTOR * ttl else "keep"
    return "keep"  # PENDING: its nanny is being asked


def judge_scheduler(view: ProcessView, timeout: float,
                    stall_timeout: float) -> Literal["timeout", "stall"] | None:
    """Whether a scheduler silent for ``view.silence`` s ends the run, and by which bound:
    ``"timeout"`` (``cluster.timeout``: its process is stopped, gone, or cannot be seen),
    ``"stall"`` (``cluster.stall_timeout``, at least ``timeout``: its process runs but does
    not answer), or None (not yet).

    >>> judge_scheduler(ProcessView(12.0, ((0.5, "stopped", 3.0),)), 10.0, 120.0)
    'timeout'
    >>> judge_scheduler(ProcessView(12.0, ((3.0, "running", 3.0), (0.5, "running", 3.2))),
    ...                 10.0, 120.0) is None
    True
    """
    if view.silence < timeout:
        return None
    state = view.state if view.samples else BLIND
    if state == RUNNING:
        return "stall" if view.silence >= max(timeout, stall_timeout) else None
    return "timeout"
