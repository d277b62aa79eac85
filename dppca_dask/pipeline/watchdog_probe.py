"""The watchdog's scheduler side: functions that run on the Dask scheduler (and its nannies).

Everything here is defined inside a function, so cloudpickle sends it by value: the scheduler
needs only ``distributed`` (and psutil, which distributed requires), not this package.

:func:`make_probe`'s probe, run once a second by :class:`~dppca_dask.pipeline.watchdog.Watchdog`,
installs on its first call a scheduler plugin (named per computation) that

* counts the tasks finished (for ``cluster.stall_timeout``);
* measures the scheduler's own event-loop latency: a tick every 0.1 s notes how late it woke
  (:data:`TICK`, :data:`LATE_MIN`). A worker's silence is its heartbeat's age less the longest
  block of the loop since that heartbeat that goes on or ended in the last :data:`RECENT` s (a
  heartbeat that arrived while the loop was blocked may not have been read yet), and so are the
  gaps measured between heartbeats;
* looks at every worker silent for more than ``suspect`` s, every ``every`` s: its nanny reports
  the worker process's pid, psutil status and CPU time (a worker in the scheduler's own process
  is looked at directly); no answer within ``answer`` s is "unreachable", unless the scheduler's
  loop was itself blocked for half that time in one go (no conclusion then);
* restarts (through the nanny) or removes the workers the driver decided on
  (:func:`dppca_dask.pipeline.liveness.judge_worker`), each logged as an event of topic
  :data:`EVENT_TOPIC` on the scheduler.

The probe answers (workers, finished, pending, late seconds in all, the heartbeat gaps, the
silent workers with their samples, actions so far, the scheduler's pid and start time).
No data passes through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["EVENT_TOPIC", "LATE_MIN", "RECENT", "TICK", "make_allowed_failures",
           "make_identify", "make_probe", "make_remove"]

TICK = 0.1
"""Seconds between two ticks of the scheduler-side latency measurement."""
LATE_MIN = 0.1
"""A tick later than this (seconds) counts as the scheduler's loop running late."""
RECENT = 5.0
"""Seconds after a block of the scheduler's loop during which heartbeats that arrived in it may
still be unread: such a block is left out of a worker's silence only that long."""
EVENT_TOPIC = "dppca-watchdog"
"""Scheduler event topic of every restart and removal the watchdog makes."""


def make_probe(name: str) -> Callable[..., dict[str, Any]]:
    """The probe, run on the scheduler with ``params`` (suspect, answer, every: seconds;
    restart, remove: lists of (worker address, reason))."""
    tick_s, late_min, recent_s, topic = TICK, LATE_MIN, RECENT, EVENT_TOPIC

    def probe(params: dict[str, Any] | None = None, dask_scheduler: Any = None) -> dict[str, Any]:
        import asyncio
        import os
        from collections import deque

        import psutil  # type: ignore[import-untyped]  # a dependency of distributed
        from distributed.metrics import time as clock

        params = params or {}
        suspect = float(params.get("suspect", 5.0))
        answer = float(params.get("answer", 10.0))
        every = float(params.get("every", 2.0))
        watch = dask_scheduler.plugins.get(name)

        def longest_block(since: float, until: float, recent: float = float("inf")) -> float:
            """The longest time the scheduler's loop was blocked in one go within [since,
            until], of the blocks that go on or ended less than ``recent`` s before ``until``."""
            blocks = [min(end, until) - max(end - late, since) for end, late in watch.marks
                      if end > max(since, until - recent)]
            if until - watch.due > late_min:  # a tick overdue now: the loop is late now
                blocks.append(until - max(watch.due, since))
            return max(blocks, default=0.0)

        def unread(since: float, until: float) -> float:
            """How long a heartbeat may have waited unread (a heartbeat that arrived while the
            loop was blocked is read after the block; one delayed by a block that ended more
            than ``recent_s`` ago has been read): the longest such block since ``since``. A
            busy loop, late by a little at every tick, delays each heartbeat by a little only."""
            return longest_block(since, until, recent_s)

        if watch is None:
            from distributed.diagnostics.plugin import SchedulerPlugin

            class Watch(SchedulerPlugin):
                def __init__(self) -> None:
                    self.count, self.actions, self.late = 0, 0, 0.0
                    self.due = clock() + tick_s
                    self.marks: deque[tuple[float, float]] = deque(maxlen=4096)
                    self.gaps: deque[float] = deque(maxlen=64)
                    self.seen: dict[str, float] = {}
                    self.samples: dict[str, deque[tuple[float, str, float | None]]] = {}
                    self.tasks: dict[str, Any] = {}  # held: not collected while they run
                    self.started = psutil.Process().create_time()

                def transition(self, key: Any, start: str, finish: str, *args: Any,
                               **kwargs: Any) -> None:
                    if finish in ("memory", "erred"):
                        self.count += 1

            watch = Watch()
            dask_scheduler.add_plugin(watch, name=name)

            async def tick() -> None:
                while dask_scheduler.plugins.get(name) is watch:
                    watch.due = clock() + tick_s
                    await asyncio.sleep(tick_s)
                    late = clock() - watch.due
                    if late > late_min:
                        watch.late += late
                        watch.marks.append((clock(), late))

            watch.tasks["tick"] = asyncio.ensure_future(tick())

        def nanny_view(dask_worker: Any = None) -> tuple[int | None, str, float | None]:
            import psutil

            pid = dask_worker.pid  # the nanny's worker process; None when it is not alive
            if pid is None:
                return None, "gone", None
            try:
                process = psutil.Process(pid)
                with process.oneshot():
                    times, status = process.cpu_times(), process.status()
            except psutil.NoSuchProcess:
                return pid, "gone", None
            return pid, str(status), float(times.user + times.system)

        async def look(address: str, nanny: str | None, pid: int,
                       samples: deque[tuple[float, str, float | None]]) -> None:
            start = clock()
            status, cpu = "blind", None
            try:
                if nanny:
                    from distributed.protocol.pickle import dumps
                    from distributed.protocol.serialize import Serialized, deserialize

                    try:
                        reply = await asyncio.wait_for(
                            dask_scheduler.rpc(nanny).run(function=dumps(nanny_view)), answer)
                    except (TimeoutError, OSError):
                        if longest_block(start, clock()) > answer / 2:
                            return  # the scheduler was late itself: no conclusion
                        status = "unreachable"
                    else:
                        if reply.get("status") == "OK":
                            got = reply["result"]
                            if isinstance(got, Serialized):
                                got = deserialize(got.header, got.frames)
                            found, status, cpu = got
                            if found is None or (pid and found != pid):  # not that process
                                status, cpu = "gone", None
                elif pid == os.getpid():  # a worker thread of the scheduler's own process
                    me = psutil.Process()
                    times = me.cpu_times()
                    status, cpu = str(me.status()), float(times.user + times.system)
            except Exception:  # noqa: BLE001 -- the look fails: the process is not seen
                status, cpu = "blind", None
            samples.append((clock(), status, cpu))

        def act(address: str, what: str, why: str) -> None:
            running = watch.tasks.get(f"act-{address}")
            if address not in dask_scheduler.workers or (running and not running.done()):
                return
            watch.actions += 1
            dask_scheduler.log_event(topic, {"action": what, "worker": address, "why": why})
            stimulus = f"dppca-watchdog-{what}-{clock()}"

            async def run() -> None:
                import contextlib

                with contextlib.suppress(Exception):  # e.g. the worker left meanwhile
                    if what == "restart":
                        await dask_scheduler.restart_workers(
                            [address], wait_for_workers=False, timeout=answer,
                            on_error="return", stimulus_id=stimulus)
                    else:
                        await dask_scheduler.remove_worker(address, stimulus_id=stimulus,
                                                           close=False)

            watch.tasks[f"act-{address}"] = asyncio.ensure_future(run())

        for what in ("restart", "remove"):
            for address, why in params.get(what, ()):
                act(address, what, why)

        now = clock()
        workers = dask_scheduler.workers
        silent = []
        for address, ws in workers.items():
            last, before = ws.last_seen, watch.seen.get(address)
            if before is not None and last > before:
                watch.gaps.append(max(0.0, last - before - unread(before, last)))
            watch.seen[address] = last
            silence = max(0.0, now - last - unread(last, now))
            if silence < suspect:
                watch.samples.pop(address, None)
                continue
            samples = watch.samples.setdefault(address, deque(maxlen=32))
            looking = watch.tasks.get(f"look-{address}")
            if (looking is None or looking.done()) and (
                    not samples or now - samples[-1][0] >= every):
                watch.tasks[f"look-{address}"] = asyncio.ensure_future(
                    look(address, ws.nanny, int(ws.pid or 0), samples))
            silent.append((address, silence, [(now - t, s, c) for t, s, c in samples]))
        for address in [a for a in watch.seen if a not in workers]:
            watch.seen.pop(address, None)
            watch.samples.pop(address, None)
        for key in [k for k, t in watch.tasks.items() if k != "tick" and t.done()]:
            del watch.tasks[key]
        pending = (len(dask_scheduler.queued) + len(dask_scheduler.unrunnable)
                   + sum(len(ws.processing) for ws in workers.values()))
        return {"workers": len(workers), "finished": int(watch.count), "pending": int(pending),
                "late": watch.late + (now - watch.due if now - watch.due > late_min else 0.0),
                "gaps": list(watch.gaps), "silent": silent, "actions": int(watch.actions),
                "pid": os.getpid(), "started": watch.started}

    return probe


def make_remove(name: str) -> Callable[..., None]:
    """Removes the probe's plugin (its tick ends with it)."""

    def remove(dask_scheduler: Any = None) -> None:
        watch = dask_scheduler.plugins.get(name)
        if watch is not None:
            dask_scheduler.remove_plugin(name=name)
            tick = getattr(watch, "tasks", {}).get("tick")
            if tick is not None:
                tick.cancel()

    return remove


def make_identify() -> Callable[..., tuple[int, float]]:
    """The scheduler's (pid, process start time): the driver looks at that process while the
    scheduler is silent, when it runs on the same machine."""

    def identify(dask_scheduler: Any = None) -> tuple[int, float]:
        import os

        import psutil

        return os.getpid(), float(psutil.Process().create_time())

    return identify


def make_allowed_failures(value: int | None) -> Callable[..., int]:
    """Sets the scheduler's ``allowed_failures`` to ``value`` (None: unchanged); returns the
    previous value."""

    def swap(dask_scheduler: Any = None) -> int:
        old = int(dask_scheduler.allowed_failures)
        if value is not None:
            dask_scheduler.allowed_failures = value
        return old

    return swap
