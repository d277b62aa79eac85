"""The run watchdog (dppca_dask/pipeline/watchdog.py) on in-process clusters: a stalled
computation and an empty cluster end in one ClusterError in bounded time, never a hang."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from dask import delayed

from dppca_dask import ClusterError
from dppca_dask.graph.compute import compute
from dppca_dask.pipeline.cluster import connect, watch_timeouts
from dppca_dask.pipeline.cluster_config import (
    ALLOWED_FAILURES,
    AddressClusterConfig,
    LocalClusterConfig,
)
from dppca_dask.pipeline.watchdog import Watchdog
from dppca_dask.pipeline.watchdog_probe import EVENT_TOPIC

pytestmark = pytest.mark.xdist_group("processes")  # `pytest -n`: these run in turn

LOAD = 3  # CPU hogs per core of this machine


def _blocked(x, seconds):
    time.sleep(seconds)
    return x


def _held(x, seconds):
    """A task that holds the GIL for ``seconds`` (like a long import): its worker's event loop
    sends no heartbeat meanwhile, while its process runs."""
    ctypes.PyDLL(None).usleep(int(seconds * 1e6))
    return x


@pytest.fixture
def cpu_hogs():
    """``start(per_core)``: busy-loop processes at ``per_core`` x the cores this process may
    use, until the test ends (killed and reaped by PID in the finaliser)."""
    hogs: list[subprocess.Popen] = []

    def start(per_core: int) -> None:
        for _ in range(per_core * len(os.sched_getaffinity(0))):
            hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                         stdin=subprocess.DEVNULL, start_new_session=True))

    yield start
    for hog in hogs:
        with contextlib.suppress(ProcessLookupError):
            hog.kill()
    for hog in hogs:
        hog.wait(timeout=30)


def _watched(client, futures, timeout, stall_timeout=60, limit=90):
    """Wait (at most ``limit`` s) for ``futures`` under a Watchdog; returns it and the results."""
    from distributed import wait

    watchdog = Watchdog(client, futures, timeout=timeout, stall_timeout=stall_timeout,
                        where="the local cluster")
    try:
        wait(futures, timeout=limit)
        return watchdog, client.gather(futures)
    finally:
        watchdog.stop()


@pytest.mark.slow
def test_watchdog__no_task_finishing_is_a_stall_error():
    # worker processes: closing the cluster ends the blocked task (a thread would be waited for)
    cfg = LocalClusterConfig(n_workers=1, memory_limit="1GiB", stall_timeout=2)
    with connect(cfg, progress=False):
        start = time.monotonic()
        with pytest.raises(ClusterError, match=r"^No Dask task finished for 2 s "
                                               r"\(cluster.stall_timeout\) while 1 were pending"):
            compute(delayed(_blocked)(1, 60))
        assert time.monotonic() - start < 20


def test_watchdog__short_tasks_are_not_a_stall():
    cfg = LocalClusterConfig(n_workers=1, processes=False, stall_timeout=1)
    with connect(cfg, progress=False):
        parts = [delayed(_blocked)(i, 0.2) for i in range(12)]  # 2.4 s, each task 0.2 s
        assert compute(delayed(sum)(parts)) == (66,)


@pytest.mark.slow
def test_watchdog__no_worker_for_timeout_is_an_error():
    cfg = LocalClusterConfig(n_workers=1, memory_limit="1GiB", timeout=2)
    with connect(cfg, progress=False) as client:

        def lose_workers() -> None:
            time.sleep(1.0)
            client.cluster.scale(0)

        threading.Thread(target=lose_workers, daemon=True).start()
        start = time.monotonic()
        with pytest.raises(ClusterError, match=r"^No Dask worker has been connected to the local cluster for 2 s "
                                              r"\(cluster.timeout\)"):
            compute(delayed(_blocked)(1, 60))
        assert time.monotonic() - start < 30


def test_connect__sets_allowed_failures_on_the_scheduler_for_the_run():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as monitor:
        before = monitor.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures)
        cfg = AddressClusterConfig(kind="address", address=cluster.scheduler_address,
                                   allowed_failures=7)
        with connect(cfg, progress=False):
            during = monitor.run_on_scheduler(
                lambda dask_scheduler: dask_scheduler.allowed_failures)
        after = monitor.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures)
    assert (before, during, after) == (3, 7, 3)


def test_watch_timeouts__defaults_and_the_legacy_key():
    import dask

    assert watch_timeouts(LocalClusterConfig()) == (60.0, 120.0)
    assert LocalClusterConfig().allowed_failures == ALLOWED_FAILURES
    with dask.config.set({"dppca.cluster.no-workers-timeout": 3}):
        assert watch_timeouts(LocalClusterConfig()) == (3.0, 120.0)
        assert watch_timeouts(AddressClusterConfig(kind="address", address="h:1")) == (30.0, 120.0)


@pytest.mark.slow
def test_watchdog__a_loaded_machine_restarts_no_worker(cpu_hogs):
    """CPU hogs at 3 x the cores, and tasks that hold the GIL for 7 s: both workers send no
    heartbeat for longer than their deadline (5 s), but their processes run, so neither is
    restarted (before: both were, and the run ended in "No Dask worker")."""
    cfg = LocalClusterConfig(n_workers=2, threads_per_worker=1, memory_limit="1GiB")
    with connect(cfg, progress=False) as client:
        pids = client.run(os.getpid)
        cpu_hogs(LOAD)
        futures = client.compute([delayed(_held)(i, 7.0) for i in range(2)])
        watchdog, results = _watched(client, futures, timeout=2)
        assert results == [0, 1]
        assert client.run(os.getpid) == pids
        assert client.get_events(EVENT_TOPIC) == ()
    assert watchdog.actions == []
    assert watchdog.spared == set(pids)  # both were late past the deadline, and kept
    assert not watchdog.fired


@pytest.mark.slow
def test_watchdog__a_stopped_worker_on_a_loaded_machine_is_restarted(cpu_hogs):
    """A worker process stopped with SIGSTOP mid-task, with CPU hogs at 3 x the cores: its
    nanny reports it stopped, the watchdog restarts it once past its deadline (5 s), its tasks
    rerun, and the results are complete."""
    cfg = LocalClusterConfig(n_workers=2, threads_per_worker=1, memory_limit="1GiB")
    with connect(cfg, progress=False) as client:
        pids = client.run(os.getpid)
        cpu_hogs(LOAD)
        futures = client.compute([delayed(_blocked)(i, 0.5) for i in range(10)])
        victim = next(iter(pids))
        deadline = time.monotonic() + 30
        while not client.processing().get(victim) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(pids[victim], signal.SIGSTOP)
        start = time.monotonic()
        try:
            watchdog, results = _watched(client, futures, timeout=2)
            elapsed = time.monotonic() - start
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pids[victim], signal.SIGCONT)
        events = [e for _, e in client.get_events(EVENT_TOPIC)]
    assert results == list(range(10))
    assert watchdog.actions == [(victim, "restart")]
    assert [(e["action"], e["worker"]) for e in events] == [("restart", victim)]
    assert "its process: stopped" in events[0]["why"]
    assert elapsed < 2 + 30


@pytest.mark.slow
def test_watchdog__a_late_scheduler_extends_every_deadline():
    """The scheduler's event loop blocked for 8 s (cluster.timeout 2 s): the heartbeats that
    arrived meanwhile are read late, so the workers look silent for 8 s, and the scheduler does
    not answer for 8 s; its lateness is not counted as their silence (no restart), and a
    scheduler whose process runs is given cluster.stall_timeout (no error)."""
    cfg = LocalClusterConfig(n_workers=2, threads_per_worker=1, memory_limit="1GiB")
    with connect(cfg, progress=False) as client:
        pids = client.run(os.getpid)
        futures = client.compute([delayed(_blocked)(i, 1.0) for i in range(6)])
        watchdog = Watchdog(client, futures, timeout=2, stall_timeout=60,
                            where="the local cluster")
        try:
            time.sleep(1.5)  # the probe answered at least once
            client.run_on_scheduler(time.sleep, 8.0)  # blocks the scheduler's event loop
            assert client.gather(futures) == list(range(6))
        finally:
            watchdog.stop()
        assert client.run(os.getpid) == pids
    assert watchdog.late >= 7.0
    assert watchdog.spared == set()  # never silent past the deadline: the lateness is left out
    assert watchdog.actions == []
    assert not watchdog.fired
