"""The release service as a real server (issue 35 item 8): ``dppca-dask serve`` processes on
127.0.0.1, started and stopped by PID, with real job processes, the real ledger and the real
client (``dppca-dask submit``/``remote``, :mod:`dppca_dask.client`).

Where a test must stop a job at a known point, its server runs with a ``sitecustomize`` on its
``PYTHONPATH`` (:data:`HOOK`) that holds the job's process before its fit (no noise drawn) or
after it (the outputs written to the temporary folder) until the test creates a file.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import httpx
import pytest
import yaml

from dppca_dask.client import Client, ServerError
from dppca_dask.io.datasets import write_demo_dataset
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.service.store import ServiceStore
from tests.test_service import admitting

pytestmark = pytest.mark.xdist_group("processes")  # `pytest -n`: these run in turn

HOOK = '''"""Test hook of tests/test_service_server.py: on the PYTHONPATH of a test's server,
so that its job processes (``python -m dppca_dask.service.worker JOB_DIR``) can be held.

With ``DPPCA_TEST_PAUSE=DIR`` a worker writes ``DIR/<job>.fit`` just before the fit (no noise
drawn yet) and waits for ``DIR/go-fit`` (or ``DIR/go-fit-N`` for its N-th attempt); then
``DIR/<job>.write`` once the noise is drawn and the outputs are in the temporary folder, and
waits for ``DIR/go-write`` (or ``DIR/go-write-N``). Other processes are left alone.
"""

import json
import os
import sys
import time
from pathlib import Path

_PAUSE = os.environ.get("DPPCA_TEST_PAUSE")
_ARGV = getattr(sys, "orig_argv", sys.argv)

if _PAUSE and "dppca_dask.service.worker" in _ARGV:
    import dataclasses

    from dppca_dask.pipeline import runner
    from dppca_dask.pipeline.tasks import TASKS

    _DIR = Path(_PAUSE)
    _JOB = Path(_ARGV[-1]).name
    _ATTEMPT = json.loads((Path(_ARGV[-1]) / "job.json").read_text())["attempt"]

    def _hold(point: str) -> None:
        (_DIR / f"{_JOB}.{point}").write_text(str(os.getpid()))
        deadline = time.monotonic() + 600
        go = (_DIR / f"go-{point}", _DIR / f"go-{point}-{_ATTEMPT}")
        while not any(g.exists() for g in go) and time.monotonic() < deadline:
            time.sleep(0.2)

    for _task, _spec in list(TASKS.items()):
        def _fit(*args, _original=_spec.fit, **kwargs):
            _hold("fit")
            return _original(*args, **kwargs)

        TASKS[_task] = dataclasses.replace(_spec, fit=_fit)

    _write = runner._write_outputs

    def _slow(tmp, *args, **kwargs):
        _write(tmp, *args, **kwargs)
        _hold("write")

    runner._write_outputs = _slow
'''
"""The ``sitecustomize`` of a test server whose jobs can be held (``DPPCA_TEST_PAUSE``)."""

LOADING = "input: {path: gau}\ntask: loading\nprivacy: {eps: 1, delta: 1.0e-6}\n"
PRIVATE_FILES = {"config.yaml", "summary.txt", "report.html", "loading.zarr", "loading.png"}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "gau.zarr"
    write_demo_dataset(path, n_per_group=8)
    return path


class Server:
    """A ``dppca-dask serve`` process of ``folder/service.yaml`` on 127.0.0.1 (a free port)."""

    def __init__(self, folder: Path, pause: Path | None = None) -> None:
        self.folder, self.pause = folder, pause
        self.proc: subprocess.Popen | None = None
        self.url = ""

    @property
    def file(self) -> Path:
        return self.folder / "service.yaml"

    def write(self, data: Path, **extra) -> Server:
        settings = {"state_directory": "state", "ledger": "ledger.sqlite",
                    "datasets": [{"name": "gau", "path": str(data), "array": "X",
                                  "group": "group", "cap": {"eps": 50, "delta": 1e-5}}],
                    "cluster": {"kind": "local", "n_workers": 1, "processes": False},
                    "limits": {"cancel_grace_s": 20}, **extra}
        self.file.write_text(yaml.safe_dump(settings))
        return self

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "DPPCA_TEST_PAUSE"}
        if self.pause is not None:
            hooks = self.folder / "hooks"
            hooks.mkdir(exist_ok=True)
            (hooks / "sitecustomize.py").write_text(HOOK)
            env["PYTHONPATH"] = os.pathsep.join(
                [str(hooks), *filter(None, [env.get("PYTHONPATH")])])
            env["DPPCA_TEST_PAUSE"] = str(self.pause)
        return env

    def start(self, *, expect_up: bool = True) -> Server:
        log = open(self.folder / "server.log", "a")  # the process holds it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dppca_dask.cli", "serve", str(self.file), "--port", "0"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env(),
            start_new_session=True, cwd=self.folder)
        log.close()
        _STARTED.append(self)
        if not expect_up:
            return self
        deadline = time.monotonic() + 120
        while True:
            text = (self.folder / "server.log").read_text()
            lines = [ln for ln in text.splitlines() if ln.startswith("dppca-dask serve: http")]
            if lines and f"pid {self.proc.pid}." in lines[-1]:
                self.url = lines[-1].split()[2].rstrip("/")
                break
            assert self.proc.poll() is None, text
            assert time.monotonic() < deadline, text
            time.sleep(0.2)
        while True:  # the socket is bound; it listens once the jobs left are settled
            try:
                if httpx.get(f"{self.url}/api/v1/health").status_code == 200:
                    return self
            except httpx.ConnectError:
                pass
            assert self.proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120) -> int:
        """Signal the server by its PID and wait; SIGTERM must end in a clean stop (uvicorn
        re-raises the signal after its shutdown, so the status is -SIGTERM)."""
        assert self.proc is not None
        os.kill(self.proc.pid, sig)
        code = self.proc.wait(timeout=timeout)
        if sig == signal.SIGTERM:
            log = (self.folder / "server.log").read_text()
            assert code == -signal.SIGTERM and "dppca-dask serve: stopped (" in log, log[-2000:]
            assert "Traceback" not in log, log[-3000:]
        return code

    def token(self, analyst: str) -> str:
        return ServiceStore(self.folder / "state").add_token(analyst)[1]

    def client(self, analyst: str) -> Client:
        return Client(self.url, self.token(analyst))

    def ledger(self) -> Ledger:
        return Ledger(self.folder / "ledger.sqlite", create=False)

    def workers(self) -> list[int]:
        store = ServiceStore(self.folder / "state")
        return [j.pid for j in store.jobs() if j.pid is not None]


_STARTED: list[Server] = []


@pytest.fixture(autouse=True)
def _reap():
    """Every server a test started is gone when it ends, and so is every job process."""
    start = len(_STARTED)
    yield
    for server in _STARTED[start:]:
        pids = server.workers() if (server.folder / "state").is_dir() else []
        if server.proc is not None and server.proc.poll() is None:
            os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait(timeout=60)
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    del _STARTED[start:]


def _wait_for(path: Path, proc: subprocess.Popen | None = None, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc is None or proc.poll() is None, "the server stopped"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)


def _one_line(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, (status, response.status_code, response.text)
    body = response.json()["error"]
    assert body["status"] == status and "\n" not in body["message"]
    assert "Traceback" not in response.text and 'File "' not in response.text
    return str(body["message"])


def test_server__auth_failures_bad_requests_and_a_tampered_log(tmp_path, data):
    server = Server(tmp_path).write(data, max_running=0, limits={"max_config_bytes": 4096,
                                                                "max_request_bytes": 65536})
    server.start()
    url = f"{server.url}/api/v1"
    alice = server.token("alice")
    revoked = subprocess.run([sys.executable, "-m", "dppca_dask.cli", "serve", "token", "add",
                              str(server.file), "mallory"], capture_output=True, text=True,
                             check=True, cwd=tmp_path).stdout.strip()
    assert revoked.startswith("dppca_")
    assert "dppca_" not in (tmp_path / "state" / "service.sqlite").read_bytes().decode("latin-1")
    ok = httpx.get(f"{url}/datasets", headers={"Authorization": f"Bearer {revoked}"})
    assert ok.status_code == 200
    subprocess.run([sys.executable, "-m", "dppca_dask.cli", "serve", "token", "revoke",
                    str(server.file), "mallory"], check=True, capture_output=True)
    events = server.ledger().events()
    for headers in ({}, {"Authorization": "Bearer"}, {"Authorization": f"Token {alice}"},
                    {"Authorization": f"Bearer {revoked}"}, {"Authorization": "Bearer x.y.z"}):
        for method, path in (("GET", "/datasets"), ("POST", "/jobs"), ("GET", "/jobs/abc")):
            response = httpx.request(method, f"{url}{path}", headers=headers,
                                     json={"config": LOADING})
            _one_line(response, 401)
            assert response.headers["www-authenticate"] == 'Bearer realm="dppca"'
    assert server.ledger().events() == events  # no trace beyond the audit log
    audit = (tmp_path / "state" / "audit.log").read_text().splitlines()
    assert sum(json.loads(a)["event"] == "unauthenticated" for a in audit) == 15
    auth = {"Authorization": f"Bearer {alice}"}
    bad = {
        400: httpx.post(f"{url}/jobs", headers={**auth, "content-type": "application/json"},
                        content=b'{"config": '),
        404: httpx.post(f"{url}/jobs", headers=auth, json={"config": LOADING.replace(
            "gau", "census")}),
        405: httpx.put(f"{url}/jobs", headers=auth),
        413: httpx.post(f"{url}/jobs", headers=auth, json={"config": LOADING + "#" * 5000}),
        422: httpx.post(f"{url}/jobs", headers=auth, json={"config": LOADING + "rng: 7\n"}),
    }
    for status, response in bad.items():
        _one_line(response, status)
    big = httpx.post(f"{url}/jobs", headers={**auth, "content-type": "application/json"},
                     content=b'{"config": "' + b"a" * 200_000 + b'"}')
    assert "limits.max_request_bytes" in _one_line(big, 413)
    malformed = [":", "- a\n- b", "input: {path: gau}\nprivacy: {eps: 1, delta: 1e-6}\n"
                 "privacy: {eps: 9}", "input: {path: gau}\nprivacy: {eps: one}", "\x00\x01"]
    for text in malformed:
        _one_line(httpx.post(f"{url}/plan", headers=auth, json={"config": text}), 422)
    assert server.ledger().events() == events  # nothing refused reached the ledger
    second = subprocess.run([sys.executable, "-m", "dppca_dask.cli", "serve", str(server.file),
                             "--port", "0"], capture_output=True, text=True, timeout=120,
                            check=False)
    assert second.returncode == 1, second.stderr
    assert second.stderr.strip().splitlines()[-1] == (
        f"Error: Another server (pid {server.proc.pid}) serves the state directory "
        f"'{tmp_path / 'state'}': one server per state directory and ledger. Stop it first.")
    server.stop()  # SIGTERM: a clean stop
    # Someone lowers a release's recorded spend in the ledger: the server refuses to start.
    con = sqlite3.connect(tmp_path / "ledger.sqlite")
    con.execute("UPDATE events SET note = 'eps = 1000, delta = 1e-05' WHERE kind = 'cap'")
    con.commit()
    con.close()
    server.start(expect_up=False)
    assert server.proc.wait(timeout=120) == 1
    log = (tmp_path / "server.log").read_text().splitlines()
    assert log[-1].startswith("Error: Refused to start: the release log of the ledger "), log
    assert "entry #1 (cap) was edited" in log[-1]
    verify = subprocess.run([sys.executable, "-m", "dppca_dask.cli", "budget", "verify",
                             "--ledger", str(tmp_path / "ledger.sqlite")], capture_output=True,
                            text=True, check=False)
    assert verify.returncode == 1 and "entry #1 (cap) was edited" in verify.stderr


@pytest.mark.slow
def test_server__eight_concurrent_submissions_then_a_restart_runs_the_queue(tmp_path, data):
    # the dataset's cap admits three releases, each analyst's two: of 4 + 4 concurrent
    # submissions exactly three are queued (at most two of one analyst), whatever the order
    caps = {"cap": {"eps": admitting(data, 3), "delta": 1e-5},
            "analyst_cap": {"eps": admitting(data, 2), "delta": 1e-5}}
    server = Server(tmp_path).write(data, max_running=0)
    settings = yaml.safe_load(server.file.read_text())
    settings["datasets"][0].update(caps)
    server.file.write_text(yaml.safe_dump(settings))
    server.start()
    tokens = {name: server.token(name) for name in ("alice", "bob")}
    outcomes: list[tuple[str, int, dict]] = []
    gate = threading.Barrier(8)

    def submit(name: str) -> None:
        gate.wait()
        response = httpx.post(f"{server.url}/api/v1/jobs", json={"config": LOADING},
                              headers={"Authorization": f"Bearer {tokens[name]}"}, timeout=120)
        outcomes.append((name, response.status_code, response.json()))

    threads = [threading.Thread(target=submit, args=(name,)) for name in ["alice", "bob"] * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(code for _, code, _ in outcomes)
    assert codes == [202] * 3 + [409] * 5, outcomes
    accepted = [(name, body["id"]) for name, code, body in outcomes if code == 202]
    assert max(sum(n == who for n, _ in accepted) for who in ("alice", "bob")) <= 2
    assert all("past the" in body["error"]["message"] for _, code, body in outcomes
               if code == 409)
    ledger = server.ledger()
    assert sorted(r.status for r in ledger.reservations()) == ["reserved"] * 3
    assert sum(e["kind"] == "refuse" for e in ledger.events()) == 5
    # a stop with three queued jobs; they resume after the restart, three at a time
    server.stop()
    settings["max_running"] = 3
    server.file.write_text(yaml.safe_dump(settings))
    server.start()
    for name, job_id in accepted:
        client = Client(server.url, tokens[name])
        final = client.wait(job_id, poll=1.0, timeout=600)
        assert final["state"] == "released", final
        assert final["passes"] == {"done": 1, "planned": 1}
        assert {f["name"] for f in final["files"]} == PRIVATE_FILES
    name, job_id = accepted[0]
    other = "bob" if name == "alice" else "alice"
    client = Client(server.url, tokens[name])
    archive = zipfile.ZipFile(io.BytesIO(client._request("GET", f"/jobs/{job_id}/results.zip"
                                                         ).content))
    names = archive.namelist()
    assert {n.split("/")[1] for n in names} == PRIVATE_FILES, names
    assert all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in archive.infolist())
    assert client.file(job_id, "summary.txt").startswith(b"Differentially Private")
    assert zipfile.ZipFile(io.BytesIO(client.file(job_id, "loading.zarr"))).namelist()
    for bad in ("%2e%2e%2fjob.json", "%2e%2e", "..%2f..%2fservice.sqlite", ".output.tmp",
                "worker.log", "job.json", "%2fetc%2fpasswd"):
        response = httpx.get(f"{server.url}/api/v1/jobs/{job_id}/files/{bad}",
                             headers={"Authorization": f"Bearer {tokens[name]}"})
        _one_line(response, 404)
    with pytest.raises(ServerError) as info:
        Client(server.url, tokens[other]).job(job_id)
    assert info.value.status == 404
    ledger = server.ledger()
    assert sorted(r.status for r in ledger.reservations()) == ["released"] * 3
    assert ledger.verify().ok
    server.stop()


@pytest.mark.slow
def test_server__disconnected_client_and_restarts_before_and_after_the_noise(tmp_path, data):
    pause = tmp_path / "pause"
    pause.mkdir()
    server = Server(tmp_path, pause=pause).write(data, max_running=1)
    server.start()
    token = server.token("alice")
    config = tmp_path / "job.yaml"
    config.write_text(LOADING + "output: {directory: out/first}\n")
    env = {**os.environ, "DPPCA_SERVER": server.url, "DPPCA_TOKEN": token}
    # 1. the client goes away mid-run; the job goes on, and `remote fetch` downloads it later
    client_proc = subprocess.Popen([sys.executable, "-m", "dppca_dask.cli", "submit",
                                    str(config)], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, start_new_session=True)
    store = ServiceStore(tmp_path / "state")
    deadline = time.monotonic() + 120
    while not store.jobs():
        assert time.monotonic() < deadline
        time.sleep(0.2)
    (first,) = store.jobs()
    _wait_for(pause / f"{first.id}.fit", server.proc)
    os.killpg(client_proc.pid, signal.SIGKILL)
    client_proc.wait(timeout=60)
    (pause / "go-fit").touch()
    (pause / "go-write").touch()
    fetched = subprocess.run([sys.executable, "-m", "dppca_dask.cli", "remote", "fetch",
                              first.id, "--output", "out/first"], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=600, check=False)
    assert fetched.returncode == 0, fetched.stderr
    assert {p.name for p in (tmp_path / "out" / "first").iterdir()} == PRIVATE_FILES
    # 2. the server is killed (SIGKILL) while a job waits before its first draw: after the
    # restart, its process is stopped (refunded), and it runs again on a new reservation
    (pause / "go-fit").unlink()
    (pause / "go-write").unlink()
    client = Client(server.url, token)
    second = client.submit(LOADING)["id"]
    _wait_for(pause / f"{second}.fit", server.proc)
    orphan = store.job(second).pid
    assert server.stop(signal.SIGKILL) == -signal.SIGKILL
    assert os.path.exists(f"/proc/{orphan}")  # the job's process outlived its server
    (pause / "go-fit-2").touch()  # the rerun may go on, the orphan (attempt 1) may not
    server.start()
    _wait_for(pause / f"{second}.write", server.proc)  # rerun, and noise drawn this time
    # 3. server and job process both killed after the draw: the noted draw keeps it spent
    rerun = store.job(second).pid
    assert rerun != orphan and store.job(second).attempt == 2
    assert server.stop(signal.SIGKILL) == -signal.SIGKILL
    os.killpg(rerun, signal.SIGKILL)
    assert (tmp_path / "state" / "jobs" / second / "drawn").exists()
    server.start()
    final = Client(server.url, token).job(second)
    assert final["state"] == "failed" and "after noise was drawn" in final["message"], final
    assert "the budget stays spent" in final["message"]
    ledger = server.ledger()
    trail = [(e["kind"], e["status"]) for e in ledger.events()
             if e["reservation"] in {r.id for r in ledger.reservations()[1:]}]
    assert trail == [("reserve", "reserved"), ("cancel", "cancelled"),
                     ("reserve", "reserved"), ("release", "failed")], trail
    notes = [r.note for r in ledger.reservations()]
    assert notes[-1] == "failed after noise was drawn: Killed"
    assert ledger.verify().ok
    server.stop()


@pytest.mark.slow
def test_server__cancel_a_running_job_and_the_time_limit(tmp_path, data):
    pause = tmp_path / "pause"
    pause.mkdir()
    server = Server(tmp_path, pause=pause).write(data, max_running=1, limits={
        "job_time_limit_s": 40, "cancel_grace_s": 20})
    server.start()
    client = server.client("alice")
    first = client.submit(LOADING)["id"]
    _wait_for(pause / f"{first}.fit", server.proc)
    assert client.job(first)["state"] == "running"
    assert client.cancel(first)["cancelling"] is True
    ended = client.wait(first, poll=0.5, timeout=120)
    assert ended["state"] == "cancelled" and "refunded" in ended["message"], ended
    with pytest.raises(ServerError) as info:
        client.cancel(first)
    assert info.value.status == 409
    second = client.submit(LOADING)["id"]  # held before its fit past the time limit
    ended = client.wait(second, poll=1.0, timeout=300)
    assert ended["state"] == "failed" and "time limit (40 s)" in ended["message"], ended
    assert "refunded" in ended["message"]
    ledger = server.ledger()
    assert [r.status for r in ledger.reservations()] == ["cancelled", "cancelled"]
    assert ledger.spent(ledger.reservations()[0].dataset) is None
    server.stop()
