"""A local cluster whose idle workers are near Dask's pause threshold is refused, not hung."""

from __future__ import annotations

import pytest

from dppca_dask import ClusterError
from dppca_dask.pipeline.cluster import connect
from dppca_dask.pipeline.cluster_config import LocalClusterConfig


def test_local_cluster__memory_limit_below_an_idle_worker_is_a_clear_error():
    cfg = LocalClusterConfig(kind="local", n_workers=1, memory_limit="320MiB")
    with pytest.raises(ClusterError, match=r"'cluster.memory_limit' .* idle worker already uses "
                                           r"\d+ MiB.* at least \d+ MiB"), \
            connect(cfg, progress=False):
        pass


def _slow(x):
    import time

    time.sleep(60)
    return x


def test_local_cluster__all_workers_gone_is_an_error_not_a_hang():
    import threading
    import time

    import dask
    from dask import delayed

    from dppca_dask.graph.compute import compute

    cfg = LocalClusterConfig(kind="local", n_workers=1, memory_limit="1GiB")
    with dask.config.set({"dppca.cluster.no-workers-timeout": 1.0}), \
            connect(cfg, progress=False) as client:

        def lose_workers() -> None:  # the worker processes go away and none comes back
            time.sleep(1.0)
            client.cluster.scale(0)

        threading.Thread(target=lose_workers, daemon=True).start()
        start = time.monotonic()
        with pytest.raises(ClusterError, match=r"^No Dask worker has been connected to the local cluster for 1 s"):
            compute(delayed(_slow)(1))
        assert time.monotonic() - start < 30
