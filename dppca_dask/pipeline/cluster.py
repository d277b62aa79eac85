"""Start or connect to a Dask cluster for a run: the only module that imports ``distributed``.

:func:`connect` is a context manager: it opens the cluster the config names (see
:mod:`dppca_dask.pipeline.cluster_config`), routes the library's single compute point through that client
(with ``retries`` and a progress bar), and closes what it opened. The optional back-ends
(dask-jobqueue for ``slurm``, dask-kubernetes for ``kubernetes``) are imported only here, only
when such a cluster is opened; :func:`describe_cluster` (used by ``plan``) needs neither.

Failure model: tasks are pure functions of the data and noise is drawn on the driver after the
one computation, so a worker that dies is harmless -- the scheduler reruns its tasks elsewhere and
the release is bit-identical. A lost *scheduler* (or workers that keep dying) ends the run with a
one-line :class:`~dppca_dask.errors.ClusterError`; the runner then writes nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import shutil
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError
from typing import Any

from dppca_dask.errors import ClusterError, PrivacyWarning
from dppca_dask.graph.compute import use_compute
from dppca_dask.pipeline.cluster_config import (
    BACKENDS,
    AddressClusterConfig,
    KubernetesClusterConfig,
    LocalClusterConfig,
    SlurmClusterConfig,
    TLSConfig,
)

__all__ = ["ClusterError", "connect", "describe_cluster"]

AnyCluster = (
    LocalClusterConfig | AddressClusterConfig | SlurmClusterConfig | KubernetesClusterConfig
)
_LOST = "Lost the connection to the Dask scheduler at {where} during the run"
_QUIET_LOGGERS = ("distributed.client", "distributed.utils")


def _load_backend(kind: str) -> Any:
    backend = BACKENDS[kind]
    try:
        module = importlib.import_module(backend.module)
    except ImportError as exc:
        raise ClusterError(
            f"The {kind!r} cluster kind needs {backend.package}, which is not installed "
            f"({exc}). Install it with: {backend.install_hint()}"
        ) from None
    return getattr(module, backend.attr)


def describe_cluster(config: AnyCluster) -> str:
    """What :func:`connect` would start or reach (used by ``plan``; imports no back-end).

    The first line names the cluster; further lines are indented by two spaces.
    """
    return config.describe()


def _security(tls: TLSConfig) -> Any:
    from distributed.security import Security

    files = {"ca_file": tls.ca_file, "cert": tls.cert, "key": tls.key}
    for key, path in files.items():
        if path is not None and not os.path.isfile(path):
            raise ClusterError(f"TLS file not found: cluster.security.{key} = {path!r}.")
    return Security(
        tls_ca_file=os.path.abspath(tls.ca_file),
        tls_client_cert=os.path.abspath(tls.cert),
        tls_client_key=os.path.abspath(tls.key) if tls.key else None,
        require_encryption=tls.require_encryption,
    )


def _wait_for_workers(client: Any, timeout: int, where: str) -> None:
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (TimeoutError, OSError):
        raise ClusterError(
            f"No Dask worker joined {where} within {timeout} s; start workers "
            "(or check the batch jobs / pods) and rerun."
        ) from None


def _check_submit_command(cluster_cls: Any) -> None:
    """Fail at once, not after ``timeout``, when the batch system's submit command is missing."""
    job = getattr(cluster_cls, "job_cls", None)
    command = (getattr(job, "submit_command", None) or "sbatch").split()[0]
    if shutil.which(command) is None:
        raise ClusterError(
            f"The 'slurm' cluster kind submits worker jobs with {command}, which is not on the "
            "PATH here: run the driver on a SLURM login or batch node."
        )


def _open(config: AnyCluster, stack: contextlib.ExitStack) -> tuple[Any, str]:
    """Start or reach the cluster; returns (client, a description of where it is)."""
    from distributed import Client, LocalCluster

    if isinstance(config, LocalClusterConfig):
        _warn_if_exposed(config)
        # worker processes and the scheduler listen on loopback only (threads: in-process)
        host = {"host": "127.0.0.1"} if config.processes else {}
        try:
            cluster = stack.enter_context(LocalCluster(
                n_workers=config.n_workers, threads_per_worker=config.threads_per_worker,
                memory_limit=config.memory_limit, processes=config.processes,
                # the scheduler always serves HTTP (health checks, JSON pages) even without the
                # dashboard: on 127.0.0.1 and a free port unless cluster.dashboard_address says
                dashboard_address=config.dashboard_address,
                scheduler_kwargs={"dashboard": config.dashboard},
                # a task's error comes back through the client (one CLI line): workers log
                # nothing below CRITICAL, e.g. no "Compute Failed" traceback per failed task
                silence_logs=logging.CRITICAL, **host,
            ))
            client = stack.enter_context(Client(cluster))
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"Could not start the local Dask cluster: {exc}") from None
        if config.processes:
            _check_worker_memory(client)
        return client, "the local cluster"
    if isinstance(config, AddressClusterConfig):
        security = _security(config.security) if config.security else None
        try:
            client = stack.enter_context(
                Client(config.address, timeout=config.timeout, security=security)
            )
        except (OSError, TimeoutError) as exc:
            raise ClusterError(
                f"Could not reach the Dask scheduler at {config.address} within "
                f"{config.timeout} s ({exc})."
            ) from None
        where = config.address
    else:
        kind = config.kind
        cluster_cls = _load_backend(kind)
        if isinstance(config, SlurmClusterConfig):
            _check_submit_command(cluster_cls)
        try:
            if isinstance(config, SlurmClusterConfig):
                cluster = stack.enter_context(cluster_cls(**config.backend_kwargs()))
                if config.adaptive is not None:
                    cluster.adapt(minimum_jobs=config.adaptive.minimum,
                                  maximum_jobs=config.adaptive.maximum)
                else:
                    cluster.scale(jobs=config.n_jobs or 1)
            else:
                cluster = stack.enter_context(cluster_cls(
                    custom_cluster_spec=config.cluster_spec(),
                    namespace=config.namespace, shutdown_on_close=config.shutdown_on_close,
                    resource_timeout=config.timeout, quiet=True,
                ))
            client = stack.enter_context(Client(cluster))
        except ClusterError:
            raise
        except Exception as exc:  # noqa: BLE001 -- the back-ends raise many types (kube, sbatch)
            raise ClusterError(
                f"Could not start the {kind} cluster: {type(exc).__name__}: {exc}"
            ) from None
        where = f"the {kind} cluster ({client.scheduler.address})"
    _wait_for_workers(client, config.timeout, where)
    return client, where


def _warn_if_exposed(config: LocalClusterConfig) -> None:
    if config.dashboard_is_loopback:
        return
    what = "dashboard and HTTP pages" if config.dashboard else "HTTP pages"
    warnings.warn(
        f"cluster.dashboard_address = {config.dashboard_address!r} is not a loopback address: "
        f"the Dask scheduler's {what} (task keys, worker names, progress; no login) are "
        "reachable from the network. Use 127.0.0.1 and an SSH tunnel to view them remotely.",
        PrivacyWarning, stacklevel=2,
    )


def _client_compute(client: Any, progress: bool, retries: int, where: str,
                    lost: Callable[[], None]) -> Callable[..., tuple[Any, ...]]:
    from distributed import KilledWorker
    from distributed import progress as show_progress
    from distributed.comm.core import CommClosedError

    def gone() -> ClusterError:
        lost()
        return ClusterError(_LOST.format(where=where) + ".")

    def run(*objs: Any) -> tuple[Any, ...]:
        if client.status != "running":  # lost before this computation (e.g. between stages)
            raise gone()
        try:
            futures = client.compute(list(objs), retries=retries)
        except OSError:  # submitting the graph failed: no task ran, so it is the connection
            raise gone() from None
        watchdog = _NoWorkers(client, futures) if where == "the local cluster" else None
        try:
            if progress:
                show_progress(futures)
                sys.stdout.write("\n")
            return tuple(client.gather(futures))
        except KilledWorker as exc:
            raise ClusterError(
                f"Dask workers kept dying while running task {exc.task!r} (more than "
                "distributed.scheduler.allowed-failures times); check their memory limits "
                "and logs."
            ) from None
        except (CommClosedError, CancelledError) as exc:
            if watchdog is not None and watchdog.fired:
                raise ClusterError(
                    f"The local cluster has had no Dask workers for {watchdog.timeout:g} s: its "
                    "worker processes are gone (killed by the system, e.g. out of memory?). "
                    "Nothing was released; check cluster.memory_limit and the machine's "
                    "memory.") from None
            if client.status == "running" and not _connection_lost(exc):
                raise
            raise gone() from None
        finally:
            if watchdog is not None:
                watchdog.stop()

    return run


class _NoWorkers:
    """Cancels a computation on the local cluster once it has had no worker for ``timeout``
    seconds (Dask config ``dppca.cluster.no-workers-timeout``, default 60): a gather on a
    cluster whose worker processes are gone would otherwise wait forever."""

    def __init__(self, client: Any, futures: Any) -> None:
        import dask

        self.timeout = float(dask.config.get("dppca.cluster.no-workers-timeout", 60.0))
        self.fired = False
        self._client, self._futures = client, futures
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        empty_since: float | None = None
        while not self._done.wait(min(1.0, self.timeout / 4)):
            try:
                workers = self._client.scheduler_info().get("workers", {})
            except (OSError, RuntimeError, TimeoutError):  # the caller handles the connection
                return
            if workers:
                empty_since = None
                continue
            empty_since = empty_since if empty_since is not None else time.monotonic()
            if time.monotonic() - empty_since >= self.timeout:
                self.fired = True
                self._client.cancel(self._futures)
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)


def _connection_lost(exc: BaseException) -> bool:
    reason = str(getattr(exc, "reason", "") or "") + str(exc)
    return isinstance(exc, OSError) or "connection" in reason


def _check_input_reachable(client: Any, path: str) -> None:
    if "://" in path:
        return
    path = os.path.abspath(path)
    seen = client.run(os.path.exists, path)
    missing = sorted(w for w, ok in seen.items() if not ok)
    if missing:
        raise ClusterError(
            f"The input {path!r} is not visible on {len(missing)} of {len(seen)} Dask "
            f"worker(s) (e.g. {missing[0]}). The workers read the data themselves: put it on a "
            "file system every worker mounts at the same path, or use an object-store URL "
            "(input.storage_options)."
        )


PAUSE_MARGIN = 0.6
"""An idle worker may use at most this share of its memory_limit (Dask pauses at 80 %)."""


def _worker_memory(dask_worker: Any = None) -> tuple[int, int]:
    """(process RSS, memory_limit) of the worker it runs on (0: unknown)."""
    rss = int(dask_worker.monitor.get_process_memory()) if dask_worker is not None else 0
    limit = getattr(getattr(dask_worker, "memory_manager", None), "memory_limit", None) or 0
    return rss, int(limit)


def _check_worker_memory(client: Any) -> None:
    """Refuse a local cluster whose idle workers are already near Dask's pause threshold: such
    a run would stall (paused workers take no task) instead of failing."""
    try:
        sizes = client.run(_worker_memory).values()
    except (OSError, TimeoutError) as exc:  # e.g. a worker killed at start by its nanny
        raise ClusterError(f"The local cluster's workers did not survive their start "
                           f"({type(exc).__name__}): is 'cluster.memory_limit' below what an idle "
                           "worker needs (about 250 MiB)?") from None
    for rss, limit in sizes:
        if limit and rss > PAUSE_MARGIN * limit:
            need = 2 ** math.ceil(math.log2(2.0 * rss))
            raise ClusterError(
                f"The 'cluster.memory_limit' setting of the local cluster must leave room to work: "
                f"an idle worker already uses {rss / 2**20:.0f} MiB, "
                f"{rss / limit:.0%} of its {limit / 2**20:.0f} MiB (Dask pauses workers at 80 %, "
                f"and the run would stall). Give each worker at least {need / 2**20:.0f} MiB."
            )


@contextlib.contextmanager
def connect(
    config: AnyCluster, *, progress: bool = True, input_path: str | None = None
) -> Iterator[Any]:
    """Open the configured cluster and route computations through it; yields the client.

    With ``input_path`` (a local path), every worker of a remote cluster is first asked whether
    it sees that path, so a missing shared file system is one clear error, not a task failure.
    """
    levels: dict[str, int] = {}

    def lost() -> None:  # the client logs its failed reconnection at ERROR level; we say it once
        for name in _QUIET_LOGGERS:
            logger = logging.getLogger(name)
            levels.setdefault(name, logger.level)
            logger.setLevel(logging.CRITICAL)

    try:
        with contextlib.ExitStack() as stack:
            client, where = _open(config, stack)
            if progress:
                _announce_dashboard(client, config)
            if input_path is not None and not isinstance(config, LocalClusterConfig):
                _check_input_reachable(client, input_path)
            with use_compute(_client_compute(client, progress, config.retries, where, lost)):
                yield client
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _announce_dashboard(client: Any, config: AnyCluster) -> None:
    if isinstance(config, LocalClusterConfig):
        if config.dashboard:
            print(f"Dask dashboard: {client.dashboard_link}")
        return
    with contextlib.suppress(Exception):  # informative only
        if "dashboard" in client.scheduler_info().get("services", {}):
            print(f"Dask dashboard (if the scheduler serves one): {client.dashboard_link}")
