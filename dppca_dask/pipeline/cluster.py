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

import asyncio
import contextlib
import importlib
import importlib.util
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
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
    split_host_port,
)
from dppca_dask.pipeline.watchdog import (
    SILENT_SCHEDULERS,
    Watchdog,
    scheduler_process,
    set_allowed_failures,
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


def _closing(stack: contextlib.ExitStack, manager: Any, what: str) -> Any:
    """``stack.enter_context(manager)``, except that an error while closing it never masks the
    error that ended the run (e.g. dask-jobqueue's ``AssertionError: Status.created`` from a
    SLURMCluster whose jobs never started, raised over "No Dask worker joined"), nor fails a run
    that succeeded: it becomes one line on stderr."""
    value = manager.__enter__()

    def close(exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        try:
            manager.__exit__(exc_type, exc, tb)
        except Exception as error:  # noqa: BLE001 -- any close error; reported, not raised
            detail = (str(error).strip().splitlines() or [""])[0]
            sys.stderr.write(f"Warning: closing {what} failed ({type(error).__name__}: {detail})"
                             + (", after the error reported below" if exc is not None else "")
                             + ".\n")
        return False

    stack.push(close)
    return value


def _open(config: AnyCluster, stack: contextlib.ExitStack) -> tuple[Any, str]:
    """Start or reach the cluster; returns (client, a description of where it is)."""
    from distributed import Client, LocalCluster

    if isinstance(config, LocalClusterConfig):
        _warn_if_exposed(config)
        # worker processes and the scheduler listen on loopback only (threads: in-process)
        host = {"host": "127.0.0.1"} if config.processes else {}
        try:
            cluster = _closing(stack, LocalCluster(
                n_workers=config.n_workers, threads_per_worker=config.threads_per_worker,
                memory_limit=config.memory_limit, processes=config.processes,
                # the scheduler always serves HTTP (health checks, JSON pages) even without the
                # dashboard: on 127.0.0.1 and a free port unless cluster.dashboard says
                dashboard_address=config.http_address,
                scheduler_kwargs={"dashboard": config.dashboard is not False},
                # a task's error comes back through the client (one CLI line): workers log
                # nothing below CRITICAL, e.g. no "Compute Failed" traceback per failed task
                silence_logs=logging.CRITICAL, **host,
            ), "the local cluster")
            client = _closing(stack, Client(cluster), "the Dask client")
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"Could not start the local Dask cluster: {exc}") from None
        if config.processes:
            _check_worker_memory(client)
        return client, "the local cluster"
    if isinstance(config, AddressClusterConfig):
        security = _security(config.security) if config.security else None
        try:
            client = _closing(
                stack, Client(config.address, timeout=config.timeout, security=security),
                "the Dask client")
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
            _check_job_size(config)
        try:
            if isinstance(config, SlurmClusterConfig):
                _warn_if_exposed(config)
                cluster = _closing(stack, cluster_cls(
                    **config.backend_kwargs(), scheduler_options=_scheduler_options(config),
                ), "the slurm cluster")
                _test_job_script(cluster, config)
                if config.adaptive is not None:
                    cluster.adapt(minimum_jobs=config.adaptive.minimum,
                                  maximum_jobs=config.adaptive.maximum)
                else:
                    cluster.scale(jobs=config.n_jobs or 1)
            else:
                cluster = _closing(stack, cluster_cls(
                    custom_cluster_spec=config.cluster_spec(),
                    namespace=config.namespace, shutdown_on_close=config.shutdown_on_close,
                    resource_timeout=config.timeout, quiet=True,
                ), f"the {kind} cluster")
            client = _closing(stack, Client(cluster), "the Dask client")
        except ClusterError:
            raise
        except Exception as exc:  # noqa: BLE001 -- the back-ends raise many types (kube, sbatch)
            first = (str(exc).strip().splitlines() or [""])[0]  # one line
            raise ClusterError(
                f"Could not start the {kind} cluster: {type(exc).__name__}: {first}"
            ) from None
        where = f"the {kind} cluster ({client.scheduler.address})"
        if isinstance(config, SlurmClusterConfig) and config.adaptive is not None \
                and config.adaptive.minimum == 0:
            return client, where  # no job before there is work: the first pass asks for them
    _wait_for_workers(client, config.timeout, where)
    return client, where


def _check_job_size(config: SlurmClusterConfig) -> None:
    """``cores`` and ``memory`` per worker job must come from the run config or from
    dask-jobqueue's site config (``jobqueue.slurm``); say which key, not dask-jobqueue's text."""
    import dask

    for key, example in (("cores", "8"), ("memory", "'32GiB'")):
        if getattr(config, key) is None and dask.config.get(f"jobqueue.slurm.{key}", None) is None:
            raise ClusterError(
                f"The 'cluster.slurm.{key}' setting must be given (per worker job, e.g. "
                f"{key}: {example}) when dask-jobqueue's config has no jobqueue.slurm.{key}. "
                "Got neither.")


def _scheduler_options(config: SlurmClusterConfig) -> dict[str, Any]:
    """dask-jobqueue's ``scheduler_options`` (site config ``jobqueue.slurm.scheduler-options``)
    with the dashboard of ``cluster.dashboard`` (dask-jobqueue's own default is ``:8787`` on every
    interface: two runs on one host collide, and the pages have no login)."""
    import dask

    options = dict(dask.config.get("jobqueue.slurm.scheduler-options", None) or {})
    options["dashboard_address"] = config.http_address
    options["dashboard"] = config.dashboard is not False
    return options


SBATCH_CHECK_TIMEOUT = 60
"""Seconds ``sbatch --test-only`` may take (it answers within a second when the controller runs)."""


def _test_job_script(cluster: Any, config: SlurmClusterConfig) -> None:
    """Ask sbatch whether the worker job could ever run, before any job is queued: a request the
    partition cannot satisfy (memory above the nodes', a missing partition) is rejected by
    ``sbatch`` itself, which dask-jobqueue would only log while the run waits ``timeout``."""
    job = getattr(cluster, "job_cls", None)
    submit = (getattr(job, "submit_command", None) or "sbatch").split()
    with tempfile.NamedTemporaryFile("w", suffix=".sh", prefix="dppca-worker-job-") as script:
        script.write(cluster.job_script())
        script.flush()
        try:
            done = subprocess.run([*submit, "--test-only", script.name], capture_output=True,
                                  text=True, timeout=SBATCH_CHECK_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            raise ClusterError(
                f"'{submit[0]} --test-only' did not answer within {SBATCH_CHECK_TIMEOUT} s: is "
                "the SLURM controller up (sinfo)?") from None
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        reason = "; ".join(dict.fromkeys(lines)) or f"exit status {done.returncode}"
        asked = ", ".join(f"{k}={v!r}" for k, v in config.backend_kwargs().items()
                          if k in ("cores", "memory", "processes", "walltime", "queue", "account",
                                   "job_extra_directives"))
        hint = ("Is the SLURM controller up (sinfo)?" if "contact" in reason.lower()
                else "Ask for what a node of the partition has (sinfo -N -l).")
        raise ClusterError(
            f"sbatch rejects the Dask worker jobs of cluster.kind 'slurm' ({asked or 'defaults'}"
            f"): {reason}. {hint}")


def _warn_if_exposed(config: LocalClusterConfig | SlurmClusterConfig) -> None:
    if config.dashboard_is_loopback:
        return
    what = "dashboard and HTTP pages" if config.dashboard is not False else "HTTP pages"
    warnings.warn(
        f"cluster.dashboard = {config.http_address!r} is not a loopback address: "
        f"the Dask scheduler's {what} (task keys, worker names, progress; no login) are "
        "reachable from the network. Use 127.0.0.1 and an SSH tunnel to view them remotely.",
        PrivacyWarning, stacklevel=2,
    )


def _client_compute(client: Any, progress: bool, config: AnyCluster, where: str,
                    lost: Callable[[], None]
                    ) -> tuple[Callable[..., tuple[Any, ...]], Callable[[Any], Any]]:
    """The routes of :func:`~dppca_dask.graph.compute.compute` and
    :func:`~dppca_dask.graph.compute.persist` through ``client``: each submits its graph, then
    waits under the watchdog (bounded waits, the progress bar when asked)."""
    from distributed import KilledWorker, futures_of
    from distributed import progress as show_progress
    from distributed import wait as wait_for
    from distributed.comm.core import CommClosedError

    timeout, stall = watch_timeouts(config)
    scheduler = scheduler_process(client)  # its process, looked at while it is silent

    def gone() -> ClusterError:
        lost()
        return ClusterError(_LOST.format(where=where) + ".")

    def submitted(submit: Callable[[], Any], futures_in: Callable[[Any], list[Any]],
                  finish: Callable[[Any], Any]) -> Any:
        if client.status != "running":  # lost before this computation (e.g. between stages)
            raise gone()
        try:
            out = submit()
        except OSError:  # submitting the graph failed: no task ran, so it is the connection
            raise gone() from None
        futures = futures_in(out)
        watchdog = Watchdog(client, futures, timeout=timeout, stall_timeout=stall, where=where,
                            scheduler=scheduler)
        try:
            if progress:
                show_progress(futures)
                sys.stdout.write("\n")
            while not watchdog.fired:  # bounded waits: the watchdog may have to step in
                try:
                    wait_for(futures, timeout=1.0)
                    break
                except TimeoutError:
                    continue
            if watchdog.fired:
                raise ClusterError(f"{watchdog.reason}.")
            return finish(out)
        except KilledWorker as exc:
            raise ClusterError(
                f"Dask workers kept dying while running task {exc.task!r} (more than "
                f"cluster.allowed_failures = {config.allowed_failures} times); check their "
                "memory limits and logs, or raise cluster.allowed_failures."
            ) from None
        except (CommClosedError, CancelledError) as exc:
            if watchdog.fired:
                raise ClusterError(f"{watchdog.reason}.") from None
            if client.status == "running" and not _connection_lost(exc):
                raise
            raise gone() from None
        finally:
            watchdog.stop()

    def run(*objs: Any) -> tuple[Any, ...]:
        return tuple(submitted(lambda: client.compute(list(objs), retries=config.retries),
                               list, client.gather))

    def finished(kept: Any) -> Any:
        for future in futures_of(kept):  # a failed task raises here, as gather would
            if future.status == "error":
                future.result()
        return kept

    def keep(obj: Any) -> Any:
        """Persist ``obj`` on the workers (they spill it past their memory target, and the
        scheduler recomputes a lost worker's blocks from its inputs) and wait for it."""
        return submitted(lambda: client.persist(obj, retries=config.retries), futures_of,
                         finished)

    return run, keep


def watch_timeouts(config: AnyCluster) -> tuple[float, float]:
    """(seconds without a worker, seconds without a finished task) before a run is stopped:
    ``cluster.timeout`` and ``cluster.stall_timeout``. The Dask config key
    ``dppca.cluster.no-workers-timeout`` (earlier versions) overrides ``cluster.timeout`` of a
    local cluster."""
    import dask

    timeout = float(config.timeout)
    if isinstance(config, LocalClusterConfig):
        timeout = float(dask.config.get("dppca.cluster.no-workers-timeout", timeout))
    return timeout, float(config.stall_timeout)


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


PAUSE_MARGIN = 0.75
"""A worker ready to work (:func:`_ready_to_work`) may use at most this share of its
memory_limit before any task (Dask pauses at 80 %; whether a task fits above it is
:func:`check_task_memory`'s question)."""


def _ready_to_work() -> None:
    """Import what a data pass imports and run the compiled Kendall kernel once on a tiny
    fixed block: the namespace loads lazily, so an idle worker holds about 70 MiB, against about
    250 MiB once it works (numpy, zarr, scipy, the compiled loops)."""
    import numpy as np

    importlib.import_module("zarr")
    importlib.import_module("dppca_dask.graph.passes")
    from dppca_dask.kernels.kendall_fused import tile_fused

    block = np.arange(64 * 3, dtype=np.float64).reshape(64, 3) ** 1.5 % 7.0
    tile_fused(block)


def _worker_memory(dask_worker: Any = None) -> tuple[int, int]:
    """(process RSS, memory_limit) of the worker it runs on (0: unknown), once it is ready to
    work."""
    _ready_to_work()
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


PAUSE_FRACTION = 0.8
"""Dask pauses a worker (it takes no new task) at this share of its memory_limit."""


def check_task_memory(client: Any, need: int, what: str) -> None:
    """Refuse a cluster whose workers cannot hold one task of ``need`` bytes below Dask's pause
    threshold on top of what they use now (a paused worker stalls the run; one above its limit
    is restarted and the task condemned)."""
    try:
        workers = client.scheduler_info().get("workers", {})
    except (OSError, TimeoutError):
        return  # the compute reports a lost connection
    room = []
    for info in workers.values():
        limit = int(info.get("memory_limit") or 0)
        if not limit:
            return  # a worker without a limit can hold it
        used = int((info.get("metrics") or {}).get("memory") or 0)
        room.append((PAUSE_FRACTION * limit - used, limit, used))
    if not room:
        return
    free, limit, used = max(room)
    if need > free:
        raise ClusterError(
            f"The run's tasks cannot fit a Dask worker: the largest needs about "
            f"{need / 2**20:,.0f} MiB ({what}), but the roomiest worker has "
            f"{max(free, 0) / 2**20:,.0f} MiB below Dask's pause threshold (80 % of its "
            f"{limit / 2**20:,.0f} MiB memory limit; it uses {used / 2**20:,.0f} MiB). Give the "
            "workers more memory (cluster.memory_limit), or use smaller row blocks "
            "(loading.block_rows, the input's row chunks). Nothing was read.")


@contextlib.contextmanager
def connect(
    config: AnyCluster, *, progress: bool = True, input_path: str | None = None,
    announce: bool | None = None, task_memory: tuple[int, str] | None = None,
) -> Iterator[Any]:
    """Open the configured cluster and route computations through it; yields the client.

    With ``input_path`` (a local path), every worker of a remote cluster is first asked whether
    it sees that path, so a missing shared file system is one clear error, not a task failure.
    ``announce`` (default: ``progress``) prints the dashboard's link on stderr.
    ``task_memory`` (bytes, what): the plan's peak per task; a cluster none of whose workers
    can hold it below Dask's pause threshold is refused before any data is read.
    """
    levels: dict[str, int] = {}

    def lost() -> None:  # the client logs its failed reconnection at ERROR level; we say it once
        for name in _QUIET_LOGGERS:
            logger = logging.getLogger(name)
            levels.setdefault(name, logger.level)
            logger.setLevel(logging.CRITICAL)

    quiet, note = _CancelledFeed(), _ClosedCommNote()
    scheduler_log = logging.getLogger("distributed.scheduler")
    batched_log = logging.getLogger("distributed.batched")
    scheduler_log.addFilter(quiet)
    batched_log.addFilter(note)
    try:
        with contextlib.ExitStack() as stack:
            client, where = _open(config, stack)
            if progress if announce is None else announce:
                _announce_dashboard(client, config)
            if input_path is not None and not isinstance(config, LocalClusterConfig):
                _check_input_reachable(client, input_path)
            if task_memory is not None:
                check_task_memory(client, *task_memory)
            _allow_failures(client, config, stack)
            with use_compute(*_client_compute(client, progress, config, where, lost)):
                yield client
    finally:
        scheduler_log.removeFilter(quiet)
        batched_log.removeFilter(note)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _allow_failures(client: Any, config: AnyCluster, stack: contextlib.ExitStack) -> None:
    """The scheduler reruns a task whose worker died up to ``cluster.allowed_failures`` times
    (Dask's ``distributed.scheduler.allowed-failures``, default 3, condemned most runs under
    churn); a shared scheduler gets its own value back at the end."""
    try:
        old = set_allowed_failures(client, config.allowed_failures)
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"The Dask scheduler did not answer ({type(exc).__name__}).") from None
    if old is not None and old != config.allowed_failures:
        stack.callback(_restore_failures, client, old)


RESTORE_TIMEOUT = 5.0
"""Seconds the end of a run waits for a shared scheduler to take its allowed_failures back (a
hung scheduler must not hold the run's end)."""


def _restore_failures(client: Any, value: int) -> None:
    if client.status == "running" and client not in SILENT_SCHEDULERS:
        with contextlib.suppress(Exception):
            set_allowed_failures(client, value, timeout=RESTORE_TIMEOUT)


class _CancelledFeed(logging.Filter):
    """Drops the one ``CancelledError`` traceback a scheduler in this process (``slurm``) logs
    when it closes while the progress bar's ``feed`` stream still sleeps: harmless, once per
    run. Every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, asyncio.CancelledError)


class _ClosedCommNote(logging.Filter):
    """Keeps distributed's INFO line "Batched Comm Closed ..." (a worker or client stream that
    closed; the scheduler recovers, and the watchdog stops a run that cannot) but drops the
    ``CommClosedError`` traceback it attaches, which read like a crash in a driver job's log.
    Records at WARNING or above, and any other exception, keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        from distributed.comm.core import CommClosedError

        exc = record.exc_info[1] if record.exc_info else None
        if record.levelno < logging.WARNING and isinstance(exc, CommClosedError):
            record.exc_info, record.exc_text = None, None
        return True


def _announce_dashboard(client: Any, config: AnyCluster) -> None:
    if isinstance(config, LocalClusterConfig | SlurmClusterConfig):
        if config.dashboard is not False:
            link = _dashboard_link(client, config)
            if importlib.util.find_spec("bokeh") is None:
                link += " (its pages need bokeh: pip install 'dppca_dask[dashboard]')"
            print(f"Dask dashboard: {link}", file=sys.stderr)
        return
    with contextlib.suppress(Exception):  # informative only
        if "dashboard" in client.scheduler_info().get("services", {}):
            print(f"Dask dashboard (if the scheduler serves one): {client.dashboard_link}",
                  file=sys.stderr)


def _dashboard_link(client: Any, config: LocalClusterConfig | SlurmClusterConfig) -> str:
    """The dashboard's URL on the host it listens on (``client.dashboard_link`` names the
    machine's address even when the server listens on 127.0.0.1 only)."""
    host = split_host_port(config.http_address)[0]
    port = client.scheduler_info().get("services", {}).get("dashboard")
    if port is None or host in ("", "0.0.0.0", "::"):
        return str(client.dashboard_link)
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/status"
