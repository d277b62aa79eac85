"""The ``cluster`` section of a run config: where the data passes run.

One model per kind, chosen by ``kind`` (a pydantic discriminated union, so an error names the kind
and the key, e.g. ``cluster.slurm.cores``):

- ``local`` (default): an embedded :class:`distributed.LocalCluster`;
- ``address``: a running scheduler (``tcp://host:8786``; ``tls://`` with ``security`` files);
- ``slurm``: worker jobs submitted by dask-jobqueue's ``SLURMCluster`` (extra ``[slurm]``);
- ``kubernetes``: a ``DaskCluster`` created by the dask-kubernetes operator's ``KubeCluster``
  (extra ``[kubernetes]``).

Every kind takes ``retries`` (how often a task that *raised* is rerun, passed to
``Client.compute``). A worker that dies needs no retries: the scheduler reruns its tasks
elsewhere, and the tasks are pure functions of the data, so the release is unchanged. Every kind
also takes the watchdog's bounds (:mod:`dppca_dask.pipeline.watchdog`): ``timeout`` (seconds
without any worker during a run; for ``address``, ``slurm`` and ``kubernetes`` also the wait for
the first worker), ``stall_timeout`` (seconds without a finished task while tasks are pending)
and ``allowed_failures`` (worker deaths a task may meet; set on the scheduler for the run).

This module only describes clusters; :mod:`dppca_dask.pipeline.cluster` starts them. It imports neither
``distributed`` nor the optional back-ends, so ``dppca-dask plan`` works without them.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import re
import sys
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    field_validator,
    model_validator,
)

__all__ = [
    "BACKENDS",
    "AdaptiveConfig",
    "AddressClusterConfig",
    "ClusterConfig",
    "KubernetesClusterConfig",
    "KubernetesResources",
    "LocalClusterConfig",
    "SlurmClusterConfig",
    "TLSConfig",
    "backend_installed",
    "is_loopback",
    "split_host_port",
]

SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")
_MEMORY = re.compile(r"^\d+(\.\d+)?\s*([kmgtp]i?b?|b)?$", re.IGNORECASE)
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


_REACH = "  the workers read the input path themselves: it must be reachable from every worker"


@dataclass(frozen=True)
class Backend:
    """An optional cluster back-end: where its class lives and which extra installs it."""

    module: str
    attr: str
    package: str
    extra: str

    def install_hint(self) -> str:
        return f"pip install 'dppca_dask[{self.extra}]'"


BACKENDS = {
    "slurm": Backend("dask_jobqueue", "SLURMCluster", "dask-jobqueue", "slurm"),
    "kubernetes": Backend("dask_kubernetes.operator", "KubeCluster", "dask-kubernetes",
                          "kubernetes"),
}


def backend_installed(kind: str) -> bool:
    """Whether the back-end of ``kind`` is importable (looked up, not imported)."""
    top = BACKENDS[kind].module.split(".")[0]
    if top in sys.modules:
        return sys.modules[top] is not None
    return importlib.util.find_spec(top) is not None


def _backend_state(kind: str) -> str:
    backend = BACKENDS[kind]
    if backend_installed(kind):
        return f"{backend.package} installed"
    return f"{backend.package} NOT installed: {backend.install_hint()}"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


ALLOWED_FAILURES = 25
"""Default of ``cluster.allowed_failures`` (docs/reliability.md: chosen by measurement)."""
STALL_TIMEOUT = 120
"""Default of ``cluster.stall_timeout`` in seconds (docs/reliability.md)."""


class _Cluster(_Model):
    retries: NonNegativeInt = 0
    """Reruns of a task that raised (e.g. a flaky object-store read); not needed for lost workers."""
    allowed_failures: NonNegativeInt = ALLOWED_FAILURES
    """How often a task may be on a worker that dies before the run stops (Dask's
    ``distributed.scheduler.allowed-failures``, set on the scheduler for the run)."""
    stall_timeout: PositiveInt = STALL_TIMEOUT
    """Seconds without any finished task, while tasks are pending, before the run stops."""

    def describe(self) -> str:
        """What would be started or reached; first line, then lines indented by two spaces."""
        raise NotImplementedError

    def _retries(self) -> list[str]:
        timeout = getattr(self, "timeout", None)
        lines = [f"  watchdog: {timeout} s without a worker or {self.stall_timeout} s without a "
                 f"finished task stop the run; allowed_failures {self.allowed_failures}"]
        return [*lines, f"  task retries: {self.retries}"] if self.retries else lines


def _memory(value: str | None) -> str | None:
    if value is not None and not _MEMORY.match(value.strip()):
        raise ValueError("must be a memory size such as '16GiB' or '4000MB'")
    return value


LOOPBACK_DASHBOARD = "127.0.0.1:0"


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``; an empty host means every interface) as (host, port).

    Examples
    --------
    >>> split_host_port("127.0.0.1:8787"), split_host_port("[::1]:0"), split_host_port(":8787")
    (('127.0.0.1', 8787), ('::1', 0), ('', 8787))
    """
    host, sep, port = address.strip().rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535 or any(c.isspace() for c in host):
        raise ValueError("must be host:port, e.g. 127.0.0.1:8787 (port 0: a free port)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (``localhost``, 127.0.0.0/8, ::1).

    Examples
    --------
    >>> [is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "", "0.0.0.0", "10.0.0.5")]
    [True, True, True, False, False, False]
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # "" (every interface) or a host name: not known to be loopback
        return False


class _Dashboard(_Cluster):
    """The ``dashboard`` key of the kinds whose scheduler runs in the driver (local, slurm).

    An address ``host:port`` where the scheduler's HTTP server listens (port 0: a free port,
    printed with the run), or ``false`` for no dashboard (the health and JSON pages then stay
    on a free port of 127.0.0.1). Default (and ``true``): ``127.0.0.1:0``. The pages have no
    login: another host than loopback serves them to the network and the run warns
    (:class:`~dppca_dask.errors.PrivacyWarning`). The pages need bokeh
    (``pip install 'dppca_dask[dashboard]'``). The key ``dashboard_address`` of earlier
    versions is read as ``dashboard``.
    """

    dashboard: Literal[False] | str = LOOPBACK_DASHBOARD

    @model_validator(mode="before")
    @classmethod
    def _legacy_dashboard_address(cls, data: Any) -> Any:
        if isinstance(data, dict) and "dashboard_address" in data:
            data = dict(data)
            address = data.pop("dashboard_address")
            if data.get("dashboard", True) is not False:
                data["dashboard"] = address
        return data

    @field_validator("dashboard", mode="before")
    @classmethod
    def _valid_dashboard(cls, value: Any) -> Any:
        if value is True:
            return LOOPBACK_DASHBOARD
        if isinstance(value, str):
            split_host_port(value)
            return value.strip()
        if value is not False:
            raise ValueError("must be an address host:port (port 0: a free port) or false")
        return value

    @property
    def http_address(self) -> str:
        """Where the scheduler's HTTP server listens (with or without the dashboard)."""
        return self.dashboard if self.dashboard is not False else LOOPBACK_DASHBOARD

    @property
    def dashboard_is_loopback(self) -> bool:
        return is_loopback(split_host_port(self.http_address)[0])

    def _http_line(self, prefix: str) -> str:
        what = (f"dashboard on {self.dashboard}" if self.dashboard is not False
                else f"dashboard off (HTTP pages on {self.http_address})")
        if not self.dashboard_is_loopback:
            what += " -- NOT loopback: reachable from the network, without a login"
        return f"  {prefix}{what}"


class LocalClusterConfig(_Dashboard):
    """An embedded :class:`distributed.LocalCluster` (the default).

    The scheduler and the workers listen on 127.0.0.1; ``dashboard`` (see :class:`_Dashboard`)
    is where the scheduler's dashboard listens, by default a free port on 127.0.0.1.
    """

    kind: Literal["local"] = "local"
    n_workers: PositiveInt | None = None
    threads_per_worker: PositiveInt = 1
    memory_limit: str | NonNegativeInt = "auto"
    processes: bool = True
    timeout: PositiveInt = 60
    """Seconds a running computation may go without any worker (they were killed) before the
    run stops (the Dask config key ``dppca.cluster.no-workers-timeout`` of earlier versions
    overrides it)."""

    def describe(self) -> str:
        """
        Examples
        --------
        >>> print(LocalClusterConfig(n_workers=2).describe())
        embedded LocalCluster: 2 worker(s) x 1 thread(s), memory_limit=auto, processes
          scheduler and workers on 127.0.0.1; dashboard on 127.0.0.1:0
          watchdog: 60 s without a worker or 120 s without a finished task stop the run; allowed_failures 25
        >>> print(LocalClusterConfig(n_workers=2, dashboard=False).describe().splitlines()[1])
          scheduler and workers on 127.0.0.1; dashboard off (HTTP pages on 127.0.0.1:0)
        """
        kind = "processes" if self.processes else "threads"
        where = "on 127.0.0.1" if self.processes else "in this process"
        return "\n".join([
            f"embedded LocalCluster: {self.n_workers or 'auto'} worker(s) x "
            f"{self.threads_per_worker} thread(s), memory_limit={self.memory_limit}, {kind}",
            self._http_line(f"scheduler and workers {where}; "), *self._retries()])


class TLSConfig(_Model):
    """PEM files for a ``tls://`` scheduler (``distributed.security.Security``)."""

    ca_file: str = Field(min_length=1)
    cert: str = Field(min_length=1)
    key: str | None = Field(default=None, min_length=1)
    """Private key; leave out when it is inside ``cert``."""
    require_encryption: bool = True


class AddressClusterConfig(_Cluster):
    """A running Dask scheduler, e.g. ``tcp://10.0.0.5:8786``.

    ``timeout`` bounds both the connection and the wait for a first worker (seconds).
    """

    kind: Literal["address"]
    address: str = Field(min_length=1)
    timeout: PositiveInt = 30
    security: TLSConfig | None = None

    @field_validator("address")
    @classmethod
    def _valid_address(cls, value: str) -> str:
        scheme, sep, rest = value.partition("://")
        if not sep:
            scheme, rest = "tcp", value
        if scheme not in SCHEMES or not rest or any(c.isspace() for c in value):
            raise ValueError(
                "must be a scheduler address such as tcp://host:8786 or tls://host:8786"
            )
        return value

    @property
    def scheme(self) -> str:
        scheme, sep, _ = self.address.partition("://")
        return scheme if sep else "tcp"

    @model_validator(mode="after")
    def _tls_needs_tls_address(self) -> AddressClusterConfig:
        if self.security is not None and self.scheme not in ("tls", "wss"):
            raise ValueError("'security' (TLS files) needs a tls:// or wss:// scheduler address")
        return self

    def describe(self) -> str:
        """
        Examples
        --------
        >>> print(AddressClusterConfig(kind="address", address="tcp://h:8786").describe())
        existing scheduler at tcp://h:8786 (connect timeout 30 s)
          the workers read the input path themselves: it must be reachable from every worker
          watchdog: 30 s without a worker or 120 s without a finished task stop the run; allowed_failures 25
        """
        lines = [f"existing scheduler at {self.address} (connect timeout {self.timeout} s)"]
        if self.security is not None:
            tls = self.security
            lines.append(f"  TLS: ca_file={tls.ca_file}, cert={tls.cert}"
                         + (f", key={tls.key}" if tls.key else ""))
        return "\n".join([*lines, _REACH, *self._retries()])


class AdaptiveConfig(_Model):
    """Bounds for adaptive scaling, in batch jobs."""

    minimum: NonNegativeInt = 0
    maximum: PositiveInt

    @model_validator(mode="after")
    def _ordered(self) -> AdaptiveConfig:
        if self.minimum > self.maximum:
            raise ValueError("'minimum' must not exceed 'maximum'")
        return self


class SlurmClusterConfig(_Dashboard):
    """Workers in SLURM batch jobs, submitted by ``dask_jobqueue.SLURMCluster``.

    Unset keys fall back to dask-jobqueue's own configuration (``jobqueue.slurm`` in
    ``~/.config/dask/jobqueue.yaml``; see ``deploy/slurm/jobqueue.yaml``). ``n_jobs`` fixed jobs
    (default 1) or ``adaptive`` bounds; ``timeout`` bounds the wait for the first worker (with
    ``adaptive: {minimum: 0}`` no job runs before the first pass asks for workers, so there is no
    such wait). ``interface`` is the network interface the scheduler (in the driver) and the workers
    advertise and listen on, e.g. ``ib0``; ``lo`` on a single node where only loopback traffic
    may flow (the CI cluster of ``deploy/slurm/ci-cluster.sh``). Without it the scheduler
    advertises the host's first non-loopback address. ``dashboard`` is the scheduler's dashboard
    in the driver's process (see :class:`_Dashboard`; default a free port on 127.0.0.1).
    Before any job is queued, the worker job script is checked with ``sbatch --test-only``: a
    request the partition cannot satisfy is one error with sbatch's reason, at once.
    """

    kind: Literal["slurm"]
    cores: PositiveInt | None = None
    memory: str | None = None
    processes: PositiveInt | None = None
    walltime: str | None = None
    queue: str | None = None
    account: str | None = None
    job_extra_directives: list[str] | None = None
    job_script_prologue: list[str] | None = None
    worker_extra_args: list[str] | None = None
    local_directory: str | None = None
    log_directory: str | None = None
    interface: str | None = None
    python: str | None = None
    n_jobs: PositiveInt | None = None
    adaptive: AdaptiveConfig | None = None
    timeout: PositiveInt = 600

    @field_validator("memory")
    @classmethod
    def _valid_memory(cls, value: str | None) -> str | None:
        return _memory(value)

    @model_validator(mode="after")
    def _one_scaling(self) -> SlurmClusterConfig:
        if self.n_jobs is not None and self.adaptive is not None:
            raise ValueError("give either 'n_jobs' or 'adaptive', not both")
        return self

    def backend_kwargs(self) -> dict[str, Any]:
        """The keyword arguments given to ``dask_jobqueue.SLURMCluster``; unset keys are left
        out, so dask-jobqueue's own configuration applies.

        Examples
        --------
        >>> SlurmClusterConfig(kind="slurm", cores=8, memory="32GiB").backend_kwargs()
        {'cores': 8, 'memory': '32GiB'}
        """
        return {k: getattr(self, k) for k in _SLURM_KEYS if getattr(self, k) is not None}

    def describe(self) -> str:
        scaling = (f"adaptive, {self.adaptive.minimum} to {self.adaptive.maximum} job(s)"
                   if self.adaptive else f"{self.n_jobs or 1} job(s)")
        args = ", ".join(f"{k}={v!r}" for k, v in self.backend_kwargs().items())
        return "\n".join([
            f"SLURM batch jobs via dask_jobqueue.SLURMCluster ({_backend_state('slurm')})",
            f"  {scaling}: SLURMCluster({args})",
            "  unset keys come from dask-jobqueue's config (jobqueue.slurm); the scheduler runs "
            "in this process and the workers must reach it",
            ("  no wait for a first worker: the first pass asks for the jobs"
             if self.adaptive is not None and self.adaptive.minimum == 0
             else f"  wait for the first worker: up to {self.timeout} s"),
            self._http_line("scheduler in the driver; "), _REACH, *self._retries()])


_SLURM_KEYS = (
    "cores", "memory", "processes", "walltime", "queue", "account", "job_extra_directives",
    "job_script_prologue", "worker_extra_args", "local_directory", "log_directory", "interface",
    "python",
)


class KubernetesResources(_Model):
    """Container resources of the scheduler and worker pods, as in a Kubernetes pod spec."""

    requests: dict[str, str | int | float] = Field(default_factory=dict)
    limits: dict[str, str | int | float] = Field(default_factory=dict)


class KubernetesClusterConfig(_Cluster):
    """A ``DaskCluster`` created through the dask-kubernetes operator (``KubeCluster``).

    ``image`` must have this package installed (``deploy/Dockerfile`` builds one); ``timeout``
    bounds the wait for the pods and for the first worker.
    """

    kind: Literal["kubernetes"]
    image: str = Field(min_length=1)
    name: str = "dppca"
    namespace: str | None = None
    n_workers: PositiveInt = 2
    threads_per_worker: PositiveInt = 1
    resources: KubernetesResources = Field(default_factory=KubernetesResources)
    env: dict[str, str] = Field(default_factory=dict)
    timeout: PositiveInt = 600
    shutdown_on_close: bool = True

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if len(value) > 40 or not _K8S_NAME.match(value):
            raise ValueError(
                "must be a lower-case DNS label of at most 40 characters (a-z, 0-9, '-')"
            )
        return value

    def cluster_spec(self) -> dict[str, Any]:
        """The ``DaskCluster`` resource given to ``KubeCluster(custom_cluster_spec=...)``.

        The layout of ``dask_kubernetes.operator.make_cluster_spec``, with the ``dask scheduler``
        / ``dask worker`` commands of current ``distributed``.

        Examples
        --------
        >>> cfg = KubernetesClusterConfig(kind="kubernetes", image="dppca-dask:0.1.0", n_workers=3)
        >>> spec = cfg.cluster_spec()
        >>> spec["kind"], spec["spec"]["worker"]["replicas"]
        ('DaskCluster', 3)
        """
        env = [{"name": k, "value": v} for k, v in self.env.items()]
        resources = {k: v for k, v in self.resources.model_dump().items() if v}

        def container(name: str, args: list[str], ports: dict[str, int]) -> dict[str, Any]:
            return {
                "name": name, "image": self.image, "args": args, "env": env,
                "resources": resources,
                "ports": [{"name": p, "containerPort": n, "protocol": "TCP"}
                          for p, n in ports.items()],
            }

        worker = container(
            "worker",
            ["dask", "worker", "--name", "$(DASK_WORKER_NAME)", "--nthreads",
             str(self.threads_per_worker), "--dashboard", "--dashboard-address", "8788"],
            {"http-dashboard": 8788},
        )
        ports = {"tcp-comm": 8786, "http-dashboard": 8787}
        scheduler = container("scheduler", ["dask", "scheduler", "--host", "0.0.0.0"], ports)
        probe = {"httpGet": {"port": "http-dashboard", "path": "/health"}}
        scheduler["readinessProbe"] = {**probe, "initialDelaySeconds": 0, "periodSeconds": 1,
                                       "timeoutSeconds": 300}
        scheduler["livenessProbe"] = {**probe, "initialDelaySeconds": 15, "periodSeconds": 20}
        service = {
            "type": "ClusterIP",
            "selector": {"dask.org/cluster-name": self.name, "dask.org/component": "scheduler"},
            "ports": [{"name": p, "protocol": "TCP", "port": n, "targetPort": p}
                      for p, n in ports.items()],
        }
        return {
            "apiVersion": "kubernetes.dask.org/v1",
            "kind": "DaskCluster",
            "metadata": {"name": self.name},
            "spec": {
                "idleTimeout": 0,
                "worker": {"replicas": self.n_workers, "spec": {"containers": [worker]}},
                "scheduler": {"spec": {"containers": [scheduler]}, "service": service},
            },
        }

    def describe(self) -> str:
        res = self.resources
        return "\n".join([
            f"Kubernetes DaskCluster {self.name!r} via dask_kubernetes.operator.KubeCluster "
            f"({_backend_state('kubernetes')})",
            f"  image {self.image}, {self.n_workers} worker(s) x {self.threads_per_worker} "
            f"thread(s), namespace {self.namespace or '(current)'}",
            f"  resources: requests {res.requests or '-'}, limits {res.limits or '-'}",
            f"  wait for the pods and the first worker: up to {self.timeout} s; the cluster is "
            + ("deleted at the end" if self.shutdown_on_close else "kept at the end"),
            _REACH, *self._retries()])


ClusterConfig = Annotated[
    LocalClusterConfig | AddressClusterConfig | SlurmClusterConfig | KubernetesClusterConfig,
    Field(discriminator="kind"),
]
