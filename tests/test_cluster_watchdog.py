"""The run watchdog (dppca_dask/pipeline/watchdog.py) on in-process clusters: a stalled
computation and an empty cluster end in one ClusterError in bounded time, never a hang."""

from __future__ import annotations

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

pytestmark = pytest.mark.xdist_group("processes")  # `pytest -n`: these run in turn


def _blocked(x, seconds):
    time.sleep(seconds)
    return x


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
