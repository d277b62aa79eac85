"""Start or connect to a Dask cluster for a run: the only module that imports ``distributed``.

:func:`connect` is a context manager: it opens the cluster the config names (an embedded
``LocalCluster`` by default, or an existing scheduler by address), routes the library's single
compute point through that client with a progress bar, and closes what it opened.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from dppca_dask.config import AddressClusterConfig, LocalClusterConfig
from dppca_dask.errors import DPPCAError
from dppca_dask.kernels.graph import use_compute

__all__ = ["ClusterError", "connect", "describe_cluster"]


class ClusterError(DPPCAError):
    """The cluster could not be started or reached, or was lost during a run."""


def describe_cluster(config: LocalClusterConfig | AddressClusterConfig) -> str:
    """One line saying what :func:`connect` would start or reach (used by ``plan``)."""
    if isinstance(config, AddressClusterConfig):
        return f"existing scheduler at {config.address}"
    workers = config.n_workers or "auto"
    kind = "processes" if config.processes else "threads"
    return (
        f"embedded LocalCluster: {workers} worker(s) x {config.threads_per_worker} thread(s), "
        f"memory_limit={config.memory_limit}, {kind}"
    )


def _client_compute(client: Any, progress: bool) -> Any:
    from distributed import progress as show_progress

    def run(*objs: Any) -> tuple[Any, ...]:
        futures = client.compute(list(objs))
        if progress:
            show_progress(futures)
            sys.stdout.write("\n")
        return tuple(client.gather(futures))

    return run


@contextlib.contextmanager
def connect(
    config: LocalClusterConfig | AddressClusterConfig, *, progress: bool = True
) -> Iterator[Any]:
    """Open the configured cluster and route computations through it; yields the client."""
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        try:
            if isinstance(config, AddressClusterConfig):
                client = stack.enter_context(
                    Client(config.address, timeout=config.timeout)
                )
            else:
                cluster = stack.enter_context(
                    LocalCluster(
                        n_workers=config.n_workers,
                        threads_per_worker=config.threads_per_worker,
                        memory_limit=config.memory_limit,
                        processes=config.processes,
                        dashboard_address=":0" if config.dashboard else None,
                        silence_logs=40,
                    )
                )
                client = stack.enter_context(Client(cluster))
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"Could not start or reach the Dask cluster: {exc}") from None
        if config.kind == "local" and config.dashboard and progress:
            print(f"Dask dashboard: {client.dashboard_link}")
        with use_compute(_client_compute(client, progress)):
            yield client
