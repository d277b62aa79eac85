"""``cluster.kind: slurm`` against a real SLURM controller, never a stand-in.

``.ci/run`` starts a single-node cluster on 127.0.0.1 (``deploy/slurm/ci-cluster.sh start``,
stopped at exit) and exports ``SLURM_CONF`` and ``CI_REQUIRE_SLURM=1``: there a missing
controller fails these tests. Elsewhere they are skipped, with the reason, only when no controller
answers (no ``sinfo``/``sbatch``, no config, or ``sinfo`` fails). Worker jobs are real batch jobs
running ``dask worker`` with this interpreter; every test checks that no job of its own is left
in the queue, and cancels any that is.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from dppca_dask import load_result
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.runner import execute
from tests.helpers import (
    LOOPBACK_BLOCK_ROWS,
    LOOPBACK_ROWS,
    loopback_config,
    write_loopback_data,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]  # -n: in turn

ROOT = Path(__file__).resolve().parents[1]
N_ROWS, BLOCK_ROWS = LOOPBACK_ROWS, LOOPBACK_BLOCK_ROWS
WAIT = 120.0  # upper bound of every wait below, in seconds
UP = ("idle", "mixed", "allocated", "completing")


def _no_controller() -> str | None:
    """Why no SLURM controller can be used here, or None when one answers."""
    missing = [cmd for cmd in ("sinfo", "sbatch", "squeue", "scancel", "scontrol")
               if shutil.which(cmd) is None]
    if missing:
        return f"no SLURM client on the PATH ({', '.join(missing)})"
    conf = os.environ.get("SLURM_CONF")
    if not os.path.isfile(conf or "/etc/slurm/slurm.conf"):  # never call a client without its
        return (f"SLURM_CONF={conf} does not exist" if conf  # config: it retries for 60 s
                else "SLURM_CONF is unset and /etc/slurm/slurm.conf does not exist")
    try:
        done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                              timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 30 s"
    if done.returncode != 0:
        return f"sinfo failed: {done.stderr.strip() or done.returncode}"
    if not set(done.stdout.split()) & set(UP):
        return f"no node is up (sinfo states: {done.stdout.split() or 'none'})"
    return None


@pytest.fixture(scope="module")
def controller() -> None:
    reason = _no_controller()
    if reason is None:
        return
    message = (f"no SLURM controller answers: {reason} (start one with "
               "'deploy/slurm/ci-cluster.sh start' and export SLURM_CONF)")
    if os.environ.get("CI_REQUIRE_SLURM") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _slurm(*args: str, timeout: float = 30) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert done.returncode == 0, f"{args}: {done.stderr}"
    return done.stdout


def _jobs(name: str, states: str = "PENDING,RUNNING,CONFIGURING") -> list[str]:
    return _slurm("squeue", "-h", "-n", name, "-t", states, "-o", "%i").split()


@pytest.fixture
def job_name(controller) -> Iterator[str]:
    """A job name of this test's worker jobs; afterwards none of them may still be queued."""
    name = f"dppca-test-{uuid.uuid4().hex[:8]}"
    yield name
    left = _jobs(name)
    if left:
        subprocess.run(["scancel", *left], timeout=30, check=False)
    assert not left, f"worker jobs {left} were left in the queue after the run"


def _wait_until(predicate: Callable[[], object], what: str, timeout: float = WAIT) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")




def _slurm_cluster(base: Path, job_name: str, **extra: object) -> dict:
    """One-core, 1 GiB worker jobs of this interpreter, on loopback (``interface: lo``)."""
    (base / "logs").mkdir(exist_ok=True)
    return {"kind": "slurm", "cores": 1, "memory": "1GiB", "processes": 1,
            "walltime": "00:15:00", "interface": "lo", "python": sys.executable,
            "log_directory": str(base / "logs"), "local_directory": str(base / "scratch"),
            "job_extra_directives": [f"--job-name={job_name}"], "timeout": 120, **extra}


class _Driver:
    """``dppca-dask run`` as a subprocess; its output is read as it comes. With ``tty`` its
    stdin/stdout/stderr are a pseudo-terminal, so it runs with the progress bar, as a user's."""

    def __init__(self, config: Path, *flags: str, tty: bool = False) -> None:
        command = [sys.executable, "-m", "dppca_dask.cli", "run", str(config), *flags]
        if tty:
            self._master, slave = os.openpty()
            self.proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave,
                                         cwd=config.parent, start_new_session=True)
            os.close(slave)
        else:
            self._master = None
            self.proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=config.parent, start_new_session=True)
        self.chunks: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        if self._master is None:
            assert self.proc.stdout is not None
            for chunk in iter(lambda: self.proc.stdout.read(256), b""):
                self.chunks.append(chunk.decode(errors="replace"))
            return
        while True:
            try:
                chunk = os.read(self._master, 4096)
            except OSError:  # EIO: the terminal's last writer has gone
                break
            if not chunk:
                break
            self.chunks.append(chunk.decode(errors="replace"))
        os.close(self._master)

    def finish(self, timeout: float = 300) -> tuple[int, str]:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=10)
            self._reader.join(timeout=10)
        return self.proc.returncode, "".join(self.chunks)


@pytest.fixture(scope="module")
def shared(tmp_path_factory, controller) -> dict:
    """One dataset and the LocalCluster reference release of it."""
    base = tmp_path_factory.mktemp("slurm")
    data = base / "data.zarr"
    write_loopback_data(data)
    ref_cfg = loopback_config(base, data, "local",
                              {"kind": "local", "n_workers": 2, "processes": False})
    reference = execute(RunConfig.from_dict(yaml.safe_load(ref_cfg.read_text())),
                        progress=False).result
    return {"base": base, "data": data, "reference": reference}


def _same_release(path: Path, reference) -> None:
    fit = load_result(path / "loading.zarr")
    np.testing.assert_array_equal(fit.directions.values, reference.directions.values)
    assert fit.metadata["ledger"] == reference.metadata["ledger"]
    assert len(fit.metadata["ledger"]) == 1  # one release, one noise draw


def _ledger_kinds(path: Path) -> list[str]:
    from dppca_dask.pipeline.ledger import Ledger

    return [e["kind"] for e in Ledger(path).events()]


def _job_logs(base: Path) -> list[Path]:
    return sorted((base / "logs").glob("*.err"))


# ---------------------------------------------------------------- runs


def test_run__slurm_cluster_equals_local_cluster(tmp_path, shared, job_name):
    cfg = loopback_config(tmp_path, shared["data"], "slurm",
                  _slurm_cluster(tmp_path, job_name, n_jobs=2))
    code, out = _Driver(cfg, tty=True).finish()  # on a terminal: with the progress bar
    assert code == 0, out
    _same_release(tmp_path / "slurm", shared["reference"])
    assert _ledger_kinds(tmp_path / "slurm.ledger.sqlite") == ["reserve", "release"]
    assert len(_job_logs(tmp_path)) == 2  # two real batch jobs ran the workers
    # the dashboard on a free loopback port, printed; no CancelledError traceback from the
    # scheduler (it runs in the driver) when the progress bar's feed closes
    assert "% Completed" in out, out  # the progress bar ran (its feed stream was open)
    assert re.search(r"^Dask dashboard: http://127\.0\.0\.1:\d+/status\r?$", out, re.MULTILINE), out
    assert ":8787/" not in out
    assert "Traceback" not in out and "CancelledError" not in out, out


def test_run__slurm_adaptive_scales_from_zero(tmp_path, shared, job_name):
    cfg = loopback_config(tmp_path, shared["data"], "adaptive",
                  _slurm_cluster(tmp_path, job_name, adaptive={"minimum": 0, "maximum": 2}))
    started = time.monotonic()
    code, out = _Driver(cfg, "--quiet").finish()
    assert code == 0, out
    assert time.monotonic() - started < WAIT  # not the wait for a first worker (timeout)
    _same_release(tmp_path / "adaptive", shared["reference"])
    assert 1 <= len(_job_logs(tmp_path)) <= 2  # jobs submitted for the work, within the bounds


def _scheduler_address(job_id: str) -> str:
    script = _slurm("scontrol", "write", "batch_script", job_id, "-")
    match = re.search(r"tcp://127\.0\.0\.1:\d+", script)
    assert match, script
    return match.group(0)


def _mid_pass(monitor) -> str | None:
    """A worker that holds a finished Kendall unit and is running another, if any."""
    def unit(key: object) -> bool:
        return str(key).startswith("_unit")

    held = monitor.has_what()
    for worker, keys in monitor.processing().items():
        if any(map(unit, keys)) and any(map(unit, held.get(worker, ()))):
            return worker
    return None


def test_run__scancel_of_a_worker_job_mid_pass_keeps_the_release(tmp_path, shared, job_name):
    from distributed import Client

    cfg = loopback_config(tmp_path, shared["data"], "scancel",
                  _slurm_cluster(tmp_path, job_name, n_jobs=2))
    driver = _Driver(cfg, "--quiet")
    try:
        running = _wait_until(lambda: len(_jobs(job_name, "RUNNING")) == 2 and _jobs(job_name),
                              "two running worker jobs")
        with Client(_scheduler_address(running[0]), timeout=30) as monitor:
            monitor.wait_for_workers(2, timeout=WAIT)
            victim = _wait_until(lambda: _mid_pass(monitor) or driver.proc.poll() is not None,
                                 "the Kendall pass to start")
            assert isinstance(victim, str), driver.finish()
            job = monitor.run(lambda: os.environ["SLURM_JOB_ID"], workers=[victim])[victim]
            _slurm("scancel", job)
            assert driver.proc.poll() is None, "the scancel came after the run had ended"
            _wait_until(lambda: victim not in monitor.scheduler_info()["workers"],
                        "the cancelled worker to leave")
    finally:
        code, out = driver.finish()
    assert code == 0, out
    _same_release(tmp_path / "scancel", shared["reference"])
    assert _ledger_kinds(tmp_path / "scancel.ledger.sqlite") == ["reserve", "release"]
    log = next(p for p in _job_logs(tmp_path) if p.name.endswith(f"-{job}.err"))
    assert re.search(rf"JOB {job} ON \S+ CANCELLED", log.read_text()), log.read_text()


def test_run__impossible_memory_request_fails_at_once_with_sbatchs_reason(
        tmp_path, shared, job_name):
    # what sbatch itself says about such a request
    probe = subprocess.run(["sbatch", "--test-only", "--mem=4000G", "--wrap", "true"],
                           capture_output=True, text=True, timeout=30, check=False)
    assert probe.returncode != 0
    reason = probe.stderr.strip().splitlines()[-1].split(":", 1)[-1].strip()
    assert reason
    cfg = loopback_config(tmp_path, shared["data"], "huge",
                  _slurm_cluster(tmp_path, job_name, memory="4000GiB", timeout=600))
    started = time.monotonic()
    code, out = _Driver(cfg).finish(timeout=60)
    elapsed = time.monotonic() - started
    assert code == 1, out
    errors = [line for line in out.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, out
    assert errors[0].startswith("Error: sbatch rejects the Dask worker jobs of cluster.kind "
                                "'slurm' (cores=1, memory='4000GiB'"), out
    assert reason in errors[0], (reason, out)
    assert "Traceback" not in out and "AssertionError" not in out and "Warning" not in out, out
    assert elapsed < 30, f"{elapsed:.1f} s"
    assert not (tmp_path / "huge").exists()
    assert not _job_logs(tmp_path)  # no worker job was ever queued
    assert _ledger_kinds(tmp_path / "huge.ledger.sqlite") in ([], ["reserve", "cancel"])


def test_sbatch__driver_job_script_runs_the_release(tmp_path, shared, job_name):
    """deploy/slurm/dppca.sbatch submitted as it ships: the driver is itself a batch job and
    submits its worker jobs (settings from DASK_CONFIG, as on a site)."""
    venv = Path(sys.prefix)
    if not (venv / "bin" / "activate").is_file():  # not a venv: an activate that finds ours
        venv = tmp_path / "env"
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "activate").write_text(
            f'export PATH="{sysconfig.get_path("scripts")}:{Path(sys.executable).parent}:$PATH"\n')
    cluster = _slurm_cluster(tmp_path, job_name, n_jobs=2)
    del cluster["python"], cluster["interface"]  # from the site config below
    cfg = loopback_config(tmp_path, shared["data"], "driver-job", cluster)
    site = tmp_path / "jobqueue.yaml"
    site.write_text(yaml.safe_dump({"jobqueue": {"slurm": {
        "interface": "lo", "job-script-prologue": [f"source {venv}/bin/activate"]}}}))
    env = {**os.environ, "DPPCA_VENV": str(venv), "DPPCA_CONFIG": str(cfg),
           "DASK_CONFIG": str(site)}
    job = subprocess.run(
        ["sbatch", "--parsable", str(ROOT / "deploy" / "slurm" / "dppca.sbatch")],
        capture_output=True, text=True, timeout=30, check=True, cwd=tmp_path, env=env,
    ).stdout.strip().split(";")[0]
    try:
        _wait_until(lambda: not _slurm("squeue", "-h", "-j", job, "-o", "%i").strip(),
                    "the driver job to end", timeout=300)
    finally:
        subprocess.run(["scancel", job], timeout=30, check=False)
    out = (tmp_path / f"dppca-driver-{job}.out").read_text()
    assert "SLURM batch jobs via dask_jobqueue.SLURMCluster" in out  # the plan, first
    assert f"Wrote {tmp_path / 'driver-job'}/" in out, out
    assert "Traceback" not in out, out
    _same_release(tmp_path / "driver-job", shared["reference"])
    assert len(_job_logs(tmp_path)) == 2  # the driver's own worker jobs


@pytest.mark.parametrize(("missing", "given"), [("cores", {"memory": "1GiB"}),
                                                ("memory", {"cores": 1})])
def test_connect__slurm_job_size_unset_names_the_key(controller, missing, given):
    from dppca_dask import ClusterError
    from dppca_dask.pipeline.cluster import connect
    from dppca_dask.pipeline.cluster_config import SlurmClusterConfig

    cfg = SlurmClusterConfig(kind="slurm", interface="lo", **given)
    with pytest.raises(ClusterError, match=rf"^The 'cluster\.slurm\.{missing}' setting must be "
                                           rf"given .* no jobqueue\.slurm\.{missing}\. Got "
                                           r"neither\.$"), connect(cfg, progress=False):
        pass
