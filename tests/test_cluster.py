"""Cluster kinds, back-end-free planning, and real Dask processes on loopback.

The end-to-end tests start a real ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1
(free ports, each in its own process group), run ``dppca-dask run`` as a subprocess against them,
and kill workers or the scheduler by PID while the Kendall pass runs. Every wait is bounded and
every process started here is killed in a ``finally``, whatever happens.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from dask import delayed

from dppca_dask import ClusterError, ConfigError, load_result
from dppca_dask.cli import main
from dppca_dask.graph.compute import compute
from dppca_dask.graph.kendall_units import kendall_sum
from dppca_dask.io.data import as_data
from dppca_dask.pipeline.cluster import _client_compute, _security, connect, describe_cluster
from dppca_dask.pipeline.cluster_config import (
    AddressClusterConfig,
    KubernetesClusterConfig,
    LocalClusterConfig,
    SlurmClusterConfig,
    TLSConfig,
)
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.runner import execute
from tests.helpers import (
    LOOPBACK_BLOCK_ROWS,
    LOOPBACK_ROWS,
    loopback_config,
    write_loopback_data,
    write_store,
)

pytestmark = pytest.mark.xdist_group("processes")  # `pytest -n`: these run in turn

N_ROWS, BLOCK_ROWS = LOOPBACK_ROWS, LOOPBACK_BLOCK_ROWS
DASK = [sys.executable, "-m", "dask"]  # the `dask` CLI of this interpreter
WAIT = 60.0  # upper bound of every wait below, in seconds


# ---------------------------------------------------------------- helpers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until(predicate: Callable[[], object], what: str, timeout: float = WAIT) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop a process we started and everything it spawned (its own process group)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # also any child left behind by the group leader
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


class DaskProcesses:
    """A scheduler and workers started as real processes on 127.0.0.1."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.procs: list[subprocess.Popen] = []
        self.scheduler: subprocess.Popen | None = None
        self.address = f"tcp://127.0.0.1:{_free_port()}"

    def _start(self, args: list[str], log: str) -> subprocess.Popen:
        with open(self.directory / log, "w") as out:
            proc = subprocess.Popen(
                [*DASK, *args], cwd=self.directory, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def start(self, n_workers: int = 2) -> DaskProcesses:
        port = self.address.rsplit(":", 1)[1]
        self.scheduler = self._start(
            ["scheduler", "--host", "127.0.0.1", "--port", port, "--no-dashboard"],
            "scheduler.log")
        for i in range(n_workers):
            self._start(
                [
                    "worker", self.address, "--name", f"w{i}", "--nworkers", "1", "--nthreads",
                    "1", "--memory-limit", "2GiB", "--no-dashboard", "--death-timeout", "60",
                    "--local-directory", str(self.directory / f"w{i}"),
                ],
                f"worker-{i}.log",
            )
        return self

    def log(self, name: str) -> str:
        return (self.directory / name).read_text()

    def stop(self) -> None:
        for proc in reversed(self.procs):
            _kill_group(proc)


@contextlib.contextmanager
def dask_processes(
    directory: Path, n_workers: int = 2, meanwhile: Callable[[], None] | None = None
) -> Iterator[tuple[DaskProcesses, object]]:
    """Start the processes and a monitoring client; always stop both.

    ``meanwhile`` runs while the processes boot.
    """
    from distributed import Client

    directory.mkdir(parents=True, exist_ok=True)
    procs = DaskProcesses(directory)
    try:
        procs.start(n_workers)
        if meanwhile is not None:
            meanwhile()
        try:
            monitor = Client(procs.address, timeout=WAIT)
        except OSError as exc:
            raise AssertionError(f"{exc}\n{procs.log('scheduler.log')}") from None
        with monitor:
            monitor.wait_for_workers(n_workers, timeout=WAIT)
            yield procs, monitor
    finally:
        procs.stop()




def _run_cli(config: Path, *flags: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "dppca_dask.cli", "run", str(config), *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        cwd=config.parent, start_new_session=True,
    )


def _finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        _kill_group(proc)
    return proc.returncode, out


def _is_unit(key: object) -> bool:
    return str(key).startswith("_unit")


def _mid_pass(monitor: object) -> str | None:
    """A worker that holds a finished Kendall unit and is running another, if any."""
    held = monitor.has_what()
    for worker, keys in monitor.processing().items():
        if any(map(_is_unit, keys)) and any(map(_is_unit, held.get(worker, ()))):
            return worker
    return None


def _ledger_kinds(path: Path) -> list[str]:
    from dppca_dask.pipeline.ledger import Ledger

    return [e["kind"] for e in Ledger(path).events()]


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[dict]:
    """One dataset, the LocalCluster reference release, and a 2-worker cluster for the module."""
    base = tmp_path_factory.mktemp("cluster")
    data = base / "data.zarr"
    x = write_loopback_data(data)
    # in-process workers (no processes to spawn while the real ones boot); the runs below on
    # the address cluster are the multi-process ones, and must release the same directions
    ref_cfg = loopback_config(base, data, "local",
                              {"kind": "local", "n_workers": 2, "processes": False})
    reference = {}

    def run_reference() -> None:  # while the scheduler and workers boot
        cfg = RunConfig.from_dict(yaml.safe_load(ref_cfg.read_text()))
        reference["result"] = execute(cfg, progress=False).result

    with dask_processes(base / "dask", meanwhile=run_reference) as (procs, monitor):
        yield {"base": base, "data": data, "x": x, "reference": reference["result"],
               "procs": procs, "monitor": monitor}


def _same_release(path: Path, reference) -> None:
    fit = load_result(path / "loading.zarr")
    np.testing.assert_array_equal(fit.directions.values, reference.directions.values)
    assert fit.metadata["ledger"] == reference.metadata["ledger"]
    assert len(fit.metadata["ledger"]) == 1  # one release, one noise draw
    assert fit.metadata["rng"]["seeded"] is True


# ---------------------------------------------------------------- real processes


@pytest.mark.slow
def test_run__address_cluster_equals_local_cluster(shared):
    cfg = loopback_config(shared["base"], shared["data"], "address",
                  {"kind": "address", "address": shared["procs"].address, "timeout": 30})
    code, out = _finish(_run_cli(cfg))
    assert code == 0, out
    assert "Wrote" in out
    _same_release(shared["base"] / "address", shared["reference"])
    assert _ledger_kinds(shared["base"] / "address.ledger.sqlite") == ["reserve", "release"]


@pytest.mark.slow
def test_run__worker_killed_mid_pass_is_replaced_and_release_unchanged(shared):
    monitor, base = shared["monitor"], shared["base"]
    cfg = loopback_config(base, shared["data"], "killed",
                  {"kind": "address", "address": shared["procs"].address, "retries": 1})
    proc = _run_cli(cfg, "--quiet")
    try:
        victim = _wait_until(lambda: _mid_pass(monitor) or proc.poll() is not None,
                             "the Kendall pass to start")
        assert isinstance(victim, str), _finish(proc)
        pid = monitor.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)  # the worker process itself; its nanny starts a new one
        assert proc.poll() is None, "the kill came after the run had ended"
    finally:
        code, out = _finish(proc)
    assert code == 0, out
    _same_release(base / "killed", shared["reference"])
    assert _ledger_kinds(base / "killed.ledger.sqlite") == ["reserve", "release"]
    # The nanny replaced the killed worker: two workers again, one of them new.
    monitor.wait_for_workers(2, timeout=WAIT)
    assert victim not in monitor.scheduler_info()["workers"]
    logs = "".join(shared["procs"].log(f"worker-{i}.log") for i in range(2))
    assert f"Worker process {pid} was killed by signal 9" in logs


@pytest.mark.slow
def test_run__scheduler_killed_mid_pass_fails_cleanly_and_writes_nothing(tmp_path, shared):
    cfg = None
    with dask_processes(tmp_path / "dask", n_workers=1) as (procs, monitor):
        cfg = loopback_config(tmp_path, shared["data"], "lost",
                      {"kind": "address", "address": procs.address, "timeout": 10})
        proc = _run_cli(cfg)  # with the progress bar, as a user would run it
        try:
            seen = _wait_until(lambda: _mid_pass(monitor) or proc.poll() is not None,
                               "the Kendall pass to start")
            assert isinstance(seen, str), _finish(proc)
            os.kill(procs.scheduler.pid, signal.SIGKILL)
        finally:
            code, out = _finish(proc, timeout=WAIT)
    lines = [line for line in out.splitlines() if line.startswith("Error")]
    assert code == 1, out
    assert lines == [f"Error: Lost the connection to the Dask scheduler at {procs.address} "
                     "during the run."], out
    assert "Traceback" not in out
    assert not (tmp_path / "lost").exists()
    assert not list(tmp_path.glob(".lost*"))  # no temporary output left behind either
    assert _ledger_kinds(tmp_path / "lost.ledger.sqlite") == ["reserve", "cancel"]


def _stopped_mid_pass(tmp_path: Path, shared: dict, name: str, n_workers: int, timeout: int,
                      stop: Callable[..., list[tuple[Callable[[int, int], None], int]]],
                      ) -> tuple[int, str, float, str]:
    """Run the CLI on a fresh loopback cluster, SIGSTOP what ``stop(procs, monitor, victim)``
    names (``(os.kill or os.killpg, pid)`` pairs) once the Kendall pass runs, and wait up to
    cluster.timeout + 30 s. Returns (exit code, output, seconds from the stop, the address);
    everything stopped is continued before the cluster is torn down."""
    with dask_processes(tmp_path / "dask", n_workers=n_workers) as (procs, monitor):
        cfg = loopback_config(tmp_path, shared["data"], name,
                              {"kind": "address", "address": procs.address, "timeout": timeout})
        proc = _run_cli(cfg, "--quiet")
        stopped: list[tuple[Callable[[int, int], None], int]] = []
        try:
            victim = _wait_until(lambda: _mid_pass(monitor) or proc.poll() is not None,
                                 "the Kendall pass to start")
            assert isinstance(victim, str), _finish(proc)
            for send, pid in stop(procs, monitor, victim):
                send(pid, signal.SIGSTOP)
                stopped.append((send, pid))
            start = time.monotonic()
            code, out = _finish(proc, timeout=timeout + 30)
            elapsed = time.monotonic() - start
        finally:
            _kill_group(proc)
            for send, pid in stopped:
                with contextlib.suppress(OSError):
                    send(pid, signal.SIGCONT)
    return code, out, elapsed, procs.address


@pytest.mark.slow
def test_run__worker_hung_mid_pass_is_restarted_and_release_unchanged(tmp_path, shared):
    """A stopped (SIGSTOP) worker process sends no heartbeat but keeps its tasks: after
    cluster.timeout s the watchdog has the scheduler restart it through its nanny, its tasks
    rerun elsewhere, and the release is the reference's (before: a stall error after
    cluster.stall_timeout, or a wait for Dask's 5-minute worker-ttl)."""
    timeout = 6
    code, out, elapsed, _ = _stopped_mid_pass(
        tmp_path, shared, "stopped", 2, timeout,
        lambda procs, monitor, victim: [
            (os.kill, monitor.run(os.getpid, workers=[victim])[victim])])
    assert code == 0, out
    assert elapsed < timeout + 30
    _same_release(tmp_path / "stopped", shared["reference"])
    assert _ledger_kinds(tmp_path / "stopped.ledger.sqlite") == ["reserve", "release"]


@pytest.mark.slow
def test_run__worker_and_nanny_hung_mid_pass_is_removed_and_release_unchanged(tmp_path, shared):
    """A worker stopped together with its nanny (the whole process group): the restart gets no
    answer, so the silent worker is removed and its tasks rerun on the other one (before: a
    hang until cluster.stall_timeout)."""
    timeout = 6
    code, out, elapsed, _ = _stopped_mid_pass(  # the first worker's nanny leads its group
        tmp_path, shared, "frozen", 2, timeout,
        lambda procs, monitor, victim: [(os.killpg, procs.procs[1].pid)])
    assert code == 0, out
    assert elapsed < timeout + 30
    _same_release(tmp_path / "frozen", shared["reference"])
    assert _ledger_kinds(tmp_path / "frozen.ledger.sqlite") == ["reserve", "release"]


@pytest.mark.slow
def test_run__scheduler_hung_mid_pass_is_one_error_line_and_a_refund(tmp_path, shared):
    """A stopped (SIGSTOP) scheduler keeps its connections open and answers nothing: the run
    ends within cluster.timeout + 30 s with the watchdog's line and a refund; its end asks the
    silent scheduler nothing more (before: restoring allowed_failures waited forever)."""
    timeout = 6
    code, out, elapsed, address = _stopped_mid_pass(
        tmp_path, shared, "hung", 1, timeout,
        lambda procs, monitor, victim: [(os.kill, procs.scheduler.pid)])
    lines = [line for line in out.splitlines() if line.startswith("Error")]
    assert code == 1, out
    assert lines == [f"Error: The Dask scheduler at {address} has not answered for "
                     f"{timeout} s (cluster.timeout) during the run: is its process stopped "
                     "or overloaded? Nothing was released."], out
    assert "Traceback" not in out
    assert elapsed < timeout + 30
    assert not (tmp_path / "hung").exists()
    assert not list(tmp_path.glob(".hung*"))
    assert _ledger_kinds(tmp_path / "hung.ledger.sqlite") == ["reserve", "cancel"]


@pytest.mark.slow
def test_run__all_workers_killed_mid_pass_is_one_error_line_and_a_refund(tmp_path, shared):
    """Every worker (nanny and process) killed mid-pass: no hang -- one error line within
    cluster.timeout + 30 s, the reservation refunded, no output nor temporary directory."""
    timeout = 5
    with dask_processes(tmp_path / "dask", n_workers=2) as (procs, monitor):
        cfg = loopback_config(tmp_path, shared["data"], "nobody",
                      {"kind": "address", "address": procs.address, "timeout": timeout})
        proc = _run_cli(cfg)
        try:
            seen = _wait_until(lambda: _mid_pass(monitor) or proc.poll() is not None,
                               "the Kendall pass to start")
            assert isinstance(seen, str), _finish(proc)
            for worker in procs.procs[1:]:  # SIGKILL to every group at once: a SIGTERM'd
                with contextlib.suppress(ProcessLookupError):  # worker retires gracefully
                    os.killpg(worker.pid, signal.SIGKILL)  # while the other ends the pass
            killed = time.monotonic()
            for worker in procs.procs[1:]:
                _kill_group(worker)  # reaped (the nanny too: nothing restarts it)
            code, out = _finish(proc, timeout=timeout + 30)
            elapsed = time.monotonic() - killed
        finally:
            _kill_group(proc)
    lines = [line for line in out.splitlines() if line.startswith("Error")]
    assert code == 1, out
    assert len(lines) == 1, out
    assert lines[0].startswith(f"Error: No Dask worker has been connected to {procs.address} "
                               f"for {timeout} s (cluster.timeout) during the run"), out
    assert "Traceback" not in out
    assert elapsed < timeout + 30
    assert not (tmp_path / "nobody").exists()
    assert not list(tmp_path.glob(".nobody*"))
    assert _ledger_kinds(tmp_path / "nobody.ledger.sqlite") == ["reserve", "cancel"]


# ---------------------------------------------------------------- in-process clusters


def test_connect__unreachable_scheduler_is_one_clear_error():
    cfg = AddressClusterConfig(kind="address", address=f"tcp://127.0.0.1:{_free_port()}",
                               timeout=1)
    with pytest.raises(ClusterError, match="Could not reach the Dask scheduler at tcp://127"), \
            connect(cfg, progress=False):
        pass


def test_connect__scheduler_without_workers_times_out():
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cluster:
        cfg = AddressClusterConfig(kind="address", address=cluster.scheduler_address, timeout=1)
        with pytest.raises(ClusterError, match="No Dask worker joined"), \
                connect(cfg, progress=False):
            pass


def test_connect__scheduler_lost_between_computations():
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=1, processes=False, dashboard_address=":0")
    cfg = AddressClusterConfig(kind="address", address=cluster.scheduler_address, timeout=2)
    try:
        with connect(cfg, progress=False):
            assert compute(delayed(sum)([1, 2])) == (3,)
            cluster.close()
            start = time.monotonic()
            with pytest.raises(ClusterError, match="^Lost the connection to the Dask scheduler"):
                compute(delayed(sum)([1, 2]))
            assert time.monotonic() - start < 10
    finally:
        cluster.close()


def test_connect__input_not_visible_on_workers(tmp_path):
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster:
        cfg = AddressClusterConfig(kind="address", address=cluster.scheduler_address, timeout=5)
        with pytest.raises(ClusterError, match=r"not visible on 1 of 1 Dask worker\(s\)"), \
                connect(cfg, progress=False, input_path=str(tmp_path / "nowhere.zarr")):
            pass
        with connect(cfg, progress=False, input_path=str(tmp_path)):
            pass


def test_connect__retries_rerun_a_failing_task(tmp_path):
    marker = tmp_path / "failed-once"

    def flaky() -> int:
        if not marker.exists():
            marker.write_text("")
            raise OSError("transient read error")
        return 7

    local = {"kind": "local", "n_workers": 1, "processes": False}
    with connect(LocalClusterConfig(**local, retries=1), progress=False):
        assert compute(delayed(flaky, pure=False)()) == (7,)
    marker.unlink()
    with connect(LocalClusterConfig(**local), progress=False), \
            pytest.raises(OSError, match="transient"):
        compute(delayed(flaky, pure=False)())


def test_connect__closed_comm_note_keeps_its_line_but_not_its_traceback():
    """distributed logs "Batched Comm Closed" at INFO with a CommClosedError traceback when a
    stream closes mid-run (seen in a SLURM driver job's log); during connect() the line stays
    and the traceback goes. A WARNING keeps its traceback; outside connect() nothing changes."""
    import logging

    from distributed.comm.core import CommClosedError

    log = logging.getLogger("distributed.batched")

    def emit(level: int) -> logging.LogRecord:
        try:
            raise CommClosedError("closed")
        except CommClosedError:
            record = log.makeRecord(log.name, level, __file__, 0, "Batched Comm Closed %r",
                                    ("<TCP>",), sys.exc_info())
        kept = log.filter(record)
        assert kept
        return record

    local = {"kind": "local", "n_workers": 1, "processes": False}
    with connect(LocalClusterConfig(**local), progress=False):
        info, warning = emit(logging.INFO), emit(logging.WARNING)
    assert info.exc_info is None and info.getMessage() == "Batched Comm Closed '<TCP>'"
    assert warning.exc_info is not None
    assert emit(logging.INFO).exc_info is not None  # the filter left with connect()


def test_client_compute__passes_retries(monkeypatch):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        seen = {}
        real = client.compute

        def spy(objs, retries):
            seen["retries"] = retries
            return real(objs, retries=retries)

        monkeypatch.setattr(client, "compute", spy)
        cfg = AddressClusterConfig(kind="address", address="tcp://127.0.0.1:1", retries=3)
        run, _ = _client_compute(client, False, cfg, "somewhere", lambda: None)
        assert run(delayed(1), delayed(2)) == (1, 2)
    assert seen["retries"] == 3


def _self_signed(directory: Path) -> dict[str, str]:
    """A self-signed certificate for 127.0.0.1, used as CA and as certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dppca-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    files = {"ca_file": directory / "ca.pem", "cert": directory / "cert.pem",
             "key": directory / "key.pem"}
    pem = cert.public_bytes(serialization.Encoding.PEM)
    files["ca_file"].write_bytes(pem)
    files["cert"].write_bytes(pem)
    files["key"].write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()))
    return {k: str(v) for k, v in files.items()}


def test_connect__tls_scheduler_with_security_files(tmp_path):
    pytest.importorskip("cryptography")
    from distributed import LocalCluster
    from distributed.security import Security

    files = _self_signed(tmp_path)
    tls = TLSConfig(**files)
    security = _security(tls)
    assert security.tls_ca_file == files["ca_file"] and security.require_encryption
    server = Security(tls_ca_file=files["ca_file"], tls_scheduler_cert=files["cert"],
                      tls_scheduler_key=files["key"], tls_worker_cert=files["cert"],
                      tls_worker_key=files["key"], tls_client_cert=files["cert"],
                      tls_client_key=files["key"], require_encryption=True)
    with LocalCluster(n_workers=1, processes=False, protocol="tls://", security=server,
                      host="127.0.0.1", dashboard_address=":0") as cluster:
        assert cluster.scheduler_address.startswith("tls://")
        cfg = AddressClusterConfig(kind="address", address=cluster.scheduler_address,
                                   timeout=10, security=tls)
        with connect(cfg, progress=False):
            assert compute(delayed(sum)([1, 2])) == (3,)
    missing = TLSConfig(ca_file=files["ca_file"], cert=str(tmp_path / "nope.pem"))
    with pytest.raises(ClusterError, match=r"TLS file not found: cluster.security.cert"):
        _security(missing)


# ---------------------------------------------------------------- data locality


def test_graph__reads_zarr_on_workers_no_embedded_data(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50_000, 8))
    write_store(tmp_path / "big.zarr", x, chunk=10_000)
    monkeypatch.chdir(tmp_path)
    source = as_data("big.zarr", array="X")  # a relative path, as in a config file
    graph, _ = kendall_sum(source.array, block_rows=5_000)
    # What the driver ships to the scheduler: Zarr reads, not the 3.2 MB of data.
    blob = pickle.dumps(dict(graph.__dask_graph__()))
    assert len(blob) < 0.01 * x.nbytes
    # A worker running in another directory reads the same store.
    array = pickle.dumps(source.array)
    monkeypatch.chdir(tmp_path.parent)
    np.testing.assert_array_equal(pickle.loads(array).compute(scheduler="sync"), x)


# ---------------------------------------------------------------- config and plan


def _plan_config(tmp_path: Path, cluster: dict) -> Path:
    data = tmp_path / "small.zarr"
    write_store(data, np.random.default_rng(1).normal(size=(50, 3)))
    cfg = {"input": {"path": str(data), "array": "X"}, "privacy": {"eps": 1, "delta": 1e-5},
           "cluster": cluster, "output": {"directory": str(tmp_path / "out")}}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


SLURM = {"kind": "slurm", "cores": 8, "memory": "32GiB", "walltime": "02:00:00",
         "queue": "normal", "job_extra_directives": ["--exclusive"], "n_jobs": 4}
KUBE = {"kind": "kubernetes", "image": "dppca-dask:0.1.0", "n_workers": 3,
        "resources": {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}}}


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        (SLURM, ["SLURM batch jobs via dask_jobqueue.SLURMCluster (dask-jobqueue NOT installed: "
                 "pip install 'dppca_dask[slurm]')",
                 "4 job(s): SLURMCluster(cores=8, memory='32GiB', walltime='02:00:00', "
                 "queue='normal', job_extra_directives=['--exclusive'])"]),
        ({"kind": "slurm", "adaptive": {"minimum": 1, "maximum": 10}},
         ["adaptive, 1 to 10 job(s): SLURMCluster()"]),
        (KUBE, ["Kubernetes DaskCluster 'dppca' via dask_kubernetes.operator.KubeCluster "
                "(dask-kubernetes NOT installed: pip install 'dppca_dask[kubernetes]')",
                "image dppca-dask:0.1.0, 3 worker(s) x 1 thread(s)",
                "limits {'memory': '8Gi'}"]),
        ({"kind": "address", "address": "tls://10.1.2.3:8786", "retries": 2,
          "security": {"ca_file": "ca.pem", "cert": "me.pem", "key": "me.key"}},
         ["existing scheduler at tls://10.1.2.3:8786", "TLS: ca_file=ca.pem, cert=me.pem, "
          "key=me.key", "task retries: 2"]),
    ],
)
def test_cli_plan__remote_kinds_without_backends(tmp_path, monkeypatch, cluster, expected):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)
    monkeypatch.setitem(sys.modules, "dask_kubernetes", None)
    result = CliRunner().invoke(main, ["plan", str(_plan_config(tmp_path, cluster))])
    assert result.exit_code == 0, result.output
    for text in expected:
        assert text in result.output
    assert "the workers read the input path themselves" in result.output


@pytest.mark.parametrize(("cluster", "extra"), [(SLURM, "slurm"), (KUBE, "kubernetes")])
def test_cli_run__missing_backend_names_the_extra(tmp_path, monkeypatch, cluster, extra):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)
    monkeypatch.setitem(sys.modules, "dask_kubernetes", None)
    result = CliRunner().invoke(main, ["run", "-q", str(_plan_config(tmp_path, cluster))])
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1
    assert f"pip install 'dppca_dask[{extra}]'" in result.output
    assert not (tmp_path / "out").exists()


def test_kubernetes_cluster_spec__operator_layout():
    spec = KubernetesClusterConfig(**KUBE, env={"A": "1"}).cluster_spec()
    assert spec["apiVersion"] == "kubernetes.dask.org/v1" and spec["kind"] == "DaskCluster"
    worker = spec["spec"]["worker"]
    assert worker["replicas"] == 3
    (container,) = worker["spec"]["containers"]
    assert container["args"][:2] == ["dask", "worker"]
    assert container["resources"] == KUBE["resources"]
    assert container["env"] == [{"name": "A", "value": "1"}]
    scheduler = spec["spec"]["scheduler"]
    assert scheduler["spec"]["containers"][0]["args"][:2] == ["dask", "scheduler"]
    assert scheduler["service"]["selector"]["dask.org/cluster-name"] == "dppca"
    assert {p["port"] for p in scheduler["service"]["ports"]} == {8786, 8787}


def test_slurm_backend_kwargs__accepted_by_dask_jobqueue():
    jobqueue = pytest.importorskip("dask_jobqueue")
    cfg = SlurmClusterConfig(**SLURM)
    with jobqueue.SLURMCluster(**cfg.backend_kwargs()) as cluster:  # no job is submitted
        script = cluster.job_script()
    assert "#SBATCH -p normal" in script and "#SBATCH --exclusive" in script


@pytest.mark.parametrize(
    ("cluster", "key"),
    [
        ({"kind": "address", "address": "http://h:8786"}, "cluster.address.address"),
        ({"kind": "address", "address": "tcp://h:8786", "security": {"ca_file": "a",
          "cert": "b"}}, "needs a tls:// or wss:// scheduler address"),
        ({"kind": "address", "address": "tls://h:1", "security": {"cert": "b"}},
         "cluster.address.security.ca_file' is required"),
        ({"kind": "local", "retries": -1}, "cluster.local.retries"),
        ({"kind": "slurm", "n_jobs": 2, "adaptive": {"maximum": 3}}, "either 'n_jobs' or"),
        ({"kind": "slurm", "adaptive": {"minimum": 4, "maximum": 3}}, "must not exceed"),
        ({"kind": "slurm", "memory": "lots"}, "cluster.slurm.memory"),
        ({"kind": "slurm", "partition": "x"}, "cluster.slurm.partition' is not a known"),
        ({"kind": "kubernetes"}, "cluster.kubernetes.image' is required"),
        ({"kind": "kubernetes", "image": "i", "name": "Bad_Name"}, "cluster.kubernetes.name"),
        ({"kind": "kubernetes", "image": "i", "resources": {"gpus": 1}},
         "cluster.kubernetes.resources.gpus"),
    ],
)
def test_cluster_config__bad_values_name_the_key(tmp_path, cluster, key):
    base = yaml.safe_load(_plan_config(tmp_path, {"kind": "local"}).read_text())
    with pytest.raises(ConfigError, match=key.replace("(", r"\(")):
        RunConfig.from_dict({**base, "cluster": cluster})


def test_describe_cluster__local_default():
    assert describe_cluster(LocalClusterConfig()).startswith(
        "embedded LocalCluster: auto worker(s) x 1 thread(s)")


def _http_hosts(client) -> set[str]:
    """The hosts the (in-process) scheduler's HTTP server listens on."""
    sockets = client.cluster.scheduler.http_server._sockets.values()
    return {sock.getsockname()[0] for sock in sockets}


def test_connect__local_cluster_listens_on_loopback_only():
    cfg = LocalClusterConfig(n_workers=1, processes=True, dashboard=True)
    with connect(cfg, progress=False) as client:
        assert _http_hosts(client) == {"127.0.0.1"}
        assert client.dashboard_link.startswith("http://127.0.0.1:")
        assert client.scheduler.address.startswith("tcp://127.0.0.1:")
        workers = client.scheduler_info()["workers"]
        assert workers and all(w.startswith("tcp://127.0.0.1:") for w in workers)
    assert "; dashboard on 127.0.0.1:0" in describe_cluster(LocalClusterConfig())
    assert "dashboard off (HTTP pages on 127.0.0.1:0)" in describe_cluster(
        LocalClusterConfig(dashboard=False))


def test_connect__dashboard_default_is_a_free_loopback_port_printed_with_the_run(capsys):
    cfg = LocalClusterConfig(n_workers=1, processes=False)
    assert cfg.dashboard == "127.0.0.1:0" == LocalClusterConfig(dashboard=True).dashboard
    with connect(cfg) as one, connect(cfg) as two:  # two runs at once: no port collision
        ports = [c.scheduler_info()["services"]["dashboard"] for c in (one, two)]
        assert len(set(ports)) == 2 and 8787 not in ports
        assert _http_hosts(one) == _http_hosts(two) == {"127.0.0.1"}
        links = [f"http://127.0.0.1:{port}/status" for port in ports]
        for link in links:  # the printed link answers
            with urllib.request.urlopen(link, timeout=10) as page:  # bokeh's status page
                assert b"bokeh" in page.read().lower()
    printed = [ln for ln in capsys.readouterr().err.splitlines() if "dashboard" in ln]
    assert sorted(printed) == sorted(f"Dask dashboard: {a}" for a in links)
    with connect(LocalClusterConfig(n_workers=1, processes=False, dashboard=False)) as off:
        port = off.scheduler_info()["services"]["dashboard"]  # the HTTP server's name
        assert _http_hosts(off) == {"127.0.0.1"}  # health pages only, on loopback
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10)
    assert "dashboard" not in str(capsys.readouterr()).lower()


@pytest.mark.parametrize(("value", "rule"), [
    (8787, "an address host:port"), ("8787", "must be host:port"), (None, "an address host:port"),
])
def test_cluster_config__bad_dashboard_names_the_key(tmp_path, value, rule):
    base = yaml.safe_load(_plan_config(tmp_path, {"kind": "local"}).read_text())
    for kind in ("local", "slurm"):
        with pytest.raises(ConfigError, match=rf"cluster\.{kind}\.dashboard.*{rule}"):
            RunConfig.from_dict({**base, "cluster": {"kind": kind, "dashboard": value}})


def test_connect__dashboard_address_elsewhere_warns():
    from dppca_dask.errors import PrivacyWarning

    cfg = LocalClusterConfig(n_workers=1, processes=False, dashboard_address="0.0.0.0:0")
    assert "NOT loopback" in describe_cluster(cfg)
    with pytest.warns(PrivacyWarning, match=r"'0.0.0.0:0' is not a loopback address"), \
            connect(cfg, progress=False) as client:
        assert _http_hosts(client) == {"0.0.0.0"}
    port = _free_port()
    with connect(LocalClusterConfig(n_workers=1, processes=False,
                                    dashboard_address=f"localhost:{port}"), progress=False) as c:
        assert {h.split("%")[0] for h in _http_hosts(c)} <= {"127.0.0.1", "::1"}
        assert c.dashboard_link.endswith(f":{port}/status")


@pytest.mark.parametrize("address", ["8787", "host:port", "127.0.0.1:70000", "a b:1"])
def test_local_cluster_config__bad_dashboard_address(address):
    with pytest.raises(ValueError, match="must be host:port"):
        LocalClusterConfig(dashboard_address=address)


# ---------------------------------------------------------------- back-ends, faked


def _fake_module(monkeypatch, name: str, **attrs) -> None:
    import types

    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    for part in (name.split(".")[0], name):
        monkeypatch.setitem(sys.modules, part, module)


def test_connect__slurm_without_sbatch_on_the_path_fails_at_once(tmp_path, monkeypatch):
    pytest.importorskip("dask_jobqueue")
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    started = time.monotonic()
    with pytest.raises(ClusterError, match="submits worker jobs with sbatch, which is not on the "
                                           "PATH"), connect(SlurmClusterConfig(**SLURM)):
        pass
    assert time.monotonic() - started < 5


def test_connect__kubernetes_path_with_a_stand_in_backend(monkeypatch):
    from distributed import LocalCluster

    calls: dict = {}

    class KubeCluster(LocalCluster):  # a local stand-in for the operator's cluster
        def __init__(self, *, custom_cluster_spec, namespace, shutdown_on_close,
                     resource_timeout, quiet):
            calls.update(spec=custom_cluster_spec, namespace=namespace, timeout=resource_timeout)
            n = custom_cluster_spec["spec"]["worker"]["replicas"]
            super().__init__(n_workers=n, processes=False, dashboard_address=":0")

    _fake_module(monkeypatch, "dask_kubernetes.operator", KubeCluster=KubeCluster)
    cfg = KubernetesClusterConfig(**KUBE, namespace="stats", timeout=30)
    with connect(cfg, progress=False) as client:
        assert len(client.scheduler_info()["workers"]) == 3
        assert compute(delayed(sum)([1, 2])) == (3,)
    assert calls == {"spec": cfg.cluster_spec(), "namespace": "stats", "timeout": 30}

    class Broken:
        def __init__(self, **kwargs):
            raise RuntimeError("no kube config found")

    _fake_module(monkeypatch, "dask_kubernetes.operator", KubeCluster=Broken)
    with pytest.raises(ClusterError, match="Could not start the kubernetes cluster: "
                                           "RuntimeError: no kube config found"), \
            connect(cfg, progress=False):
        pass


class _CloseFails:
    """Mixin: a cluster whose close raises, as a never-started SLURMCluster's does."""

    def close(self, *args, **kwargs):
        super().close(*args, **kwargs)
        raise AssertionError("Status.created")


def test_connect__an_error_while_closing_never_masks_the_original_one(monkeypatch, capsys):
    from distributed import LocalCluster

    class KubeCluster(_CloseFails, LocalCluster):  # no worker ever joins; closing raises
        def __init__(self, **kwargs):
            super().__init__(n_workers=0, processes=False, dashboard_address=":0")

    _fake_module(monkeypatch, "dask_kubernetes.operator", KubeCluster=KubeCluster)
    cfg = KubernetesClusterConfig(**KUBE, timeout=1)
    with pytest.raises(ClusterError, match="No Dask worker joined the kubernetes cluster"), \
            connect(cfg, progress=False):
        pass
    assert capsys.readouterr().err == (
        "Warning: closing the kubernetes cluster failed (AssertionError: Status.created), "
        "after the error reported below.\n")

    class Works(_CloseFails, LocalCluster):  # a run that succeeded stays a success
        def __init__(self, **kwargs):
            super().__init__(n_workers=1, processes=False, dashboard_address=":0")

    _fake_module(monkeypatch, "dask_kubernetes.operator", KubeCluster=Works)
    with connect(cfg, progress=False):
        assert compute(delayed(sum)([1, 2])) == (3,)
    assert capsys.readouterr().err == (
        "Warning: closing the kubernetes cluster failed (AssertionError: Status.created).\n")
