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
