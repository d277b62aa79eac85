"""Fault injection on loopback clusters: every fault ends in an identical release or one error line.

Each fault runs ``dppca-dask run`` (a subprocess, seeded, its own ledger file) against real
``dask scheduler`` / ``dask worker`` processes on 127.0.0.1 (or a LocalCluster), injects the
fault while the Kendall pass runs, and prints one row: the outcome (``identical release`` -- the
directions equal the fault-free run's bit for bit, with one ledger release -- or ``clean error``
-- exit status 1, exactly one ``Error:`` line, no traceback, no output directory nor temporary
directory), the seconds from the fault to that outcome, and the ledger's events.

Faults: ``scheduler-loss`` (SIGKILL of the scheduler), ``scheduler-hung`` (SIGSTOP: the
process stays, its connections stay open, it answers nothing), ``worker-hung`` (SIGSTOP of one
worker process: its nanny lives on), one worker and its nanny hung, every worker and nanny
hung, ``workers-lost`` (every worker and its
nanny killed), ``churn`` (a worker process SIGKILLed every 3 s, its nanny restarts it),
``tiny-memory`` (LocalClusters with ``memory_limit`` 100MiB and 320MiB: below an idle
worker, and below a worker ready to work), ``store-gone`` (the input store
deleted mid-run), ``store-truncated`` (its chunk files truncated mid-run), both again during
pass 1 of a ``pca`` run, whose scree and score passes read the store again, ``sigterm`` and
``sigkill`` (of the driver), and two on a **loaded machine** (``HOG_FACTOR`` × the cores of
busy-looping processes for the whole run): no fault (judged: an identical release and 0
watchdog restarts or removals) and one worker hung (SIGSTOP; judged: an identical release
within ``cluster.timeout`` + 30 s of the fault). Every process started here is stopped by PID.

    python benchmarks/faults.py                 # all faults, the table of docs/reliability.md
    python benchmarks/faults.py churn --repeat 10
    python benchmarks/faults.py loaded          # the two loaded-machine rows only
    python benchmarks/faults.py tiny-memory     # the two memory-limit rows only
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import yaml

DASK = [sys.executable, "-m", "dask"]
N_ROWS, P, BLOCK_ROWS, ROW_CHUNK = 24_000, 5, 400, 2000
CHURN_ROWS = 36_000  # a pass of about 10 s on 3 single-thread workers: several kills per run
TIMEOUT = 10  # cluster.timeout of the runs, seconds
HOG_FACTOR = 5  # busy-looping processes per core for the loaded-machine rows
WAIT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Stop a process started here and its children (its own process group), by PID."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


@contextlib.contextmanager
def hogs(factor: int = HOG_FACTOR) -> Iterator[int]:
    """``factor`` × the cores of busy-looping processes for the duration; stopped by PID."""
    count = factor * (os.cpu_count() or 1)
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                              stdin=subprocess.DEVNULL, start_new_session=True)
             for _ in range(count)]
    try:
        time.sleep(2.0)  # the load is there before the run starts
        yield count
    finally:
        for proc in procs:
            kill_group(proc, signal.SIGKILL)


def watchdog_times(loop: Loopback) -> list[float]:
    """When the run's watchdog restarted or removed a worker (scheduler events of topic
    ``dppca-watchdog``; Unix times, the scheduler's clock = this machine's)."""
    with contextlib.suppress(Exception):
        return sorted(float(t) for t, _ in loop.monitor.get_events("dppca-watchdog"))
    return []


def watchdog_actions(loop: Loopback) -> int:
    """How many restarts and removals the run's watchdog made."""
    return len(watchdog_times(loop))


def loaded_faults(base: Path, data: Path, reference: np.ndarray) -> Iterator[Outcome]:
    """The loaded-machine rows: a fault-free run and one hung worker, under CPU hogs."""
    with hogs() as count, Loopback(base / "dask-loaded", n_workers=2) as loop:
        outcome = run_with(base, data, "loaded", address(loop), None, None,
                           f"loaded machine ({count} CPU hogs, {HOG_FACTOR}x the cores), "
                           "no fault", reference, limit=600)
        actions = watchdog_actions(loop)
        outcome.detail = f"{actions} watchdog restarts/removals; {outcome.detail}".rstrip("; ")
        if actions != 0 and outcome.outcome == "identical release":
            outcome.outcome = "RESTARTED healthy work"
        yield outcome
    with hogs() as count, Loopback(base / "dask-loaded-hung", n_workers=2) as loop:
        stopped: list[int] = []
        at: list[float] = []

        def stop(proc: subprocess.Popen, loop: Loopback = loop) -> None:
            pid = loop.worker_pids()[0]
            at.append(time.time())
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)

        try:
            outcome = run_with(base, data, "loaded-hung", address(loop), stop, loop,
                               f"one worker hung on a loaded machine ({count} CPU hogs; "
                               f"SIGSTOP; cluster.timeout {TIMEOUT} s)", reference, limit=600)
        finally:
            for pid in stopped:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)
        bound = TIMEOUT + 30
        acted = watchdog_times(loop)
        if acted and at:
            late = acted[0] - at[0]
            when = (f"restarted {late:.1f} s after the fault "
                    f"({'within' if late <= bound else 'PAST'} cluster.timeout + 30 s)")
        else:
            when = "no restart"
        outcome.detail = f"{len(acted)} watchdog restarts/removals, {when}; {outcome.detail}"
        outcome.detail = outcome.detail.rstrip("; ")
        yield outcome


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Loopback:
    """A ``dask scheduler`` and ``dask worker`` processes (each with a nanny) on 127.0.0.1."""

    def __init__(self, directory: Path, n_workers: int = 3, memory: str = "1GiB") -> None:
        self.directory, self.n_workers, self.memory = directory, n_workers, memory
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.monitor: Any = None

    def _start(self, args: list[str], log: str) -> subprocess.Popen:
        with open(self.directory / log, "w") as out:
            return subprocess.Popen([*DASK, *args], cwd=self.directory, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)

    def __enter__(self) -> Loopback:  # noqa: PYI034
        from distributed import Client

        self.directory.mkdir(parents=True, exist_ok=True)
        port = self.address.rsplit(":", 1)[1]
        self.scheduler = self._start(["scheduler", "--host", "127.0.0.1", "--port", port,
                                      "--no-dashboard"], "scheduler.log")
        for i in range(self.n_workers):
            self.workers.append(self._start(
                ["worker", self.address, "--name", f"w{i}", "--nworkers", "1", "--nthreads", "1",
                 "--memory-limit", self.memory, "--no-dashboard", "--death-timeout", "60",
                 "--host", "127.0.0.1", "--local-directory", str(self.directory / f"w{i}")],
                f"worker-{i}.log"))
        try:
            self.monitor = Client(self.address, timeout=WAIT)
            self.monitor.wait_for_workers(self.n_workers, timeout=WAIT)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.monitor is not None:
            with contextlib.suppress(Exception):
                self.monitor.close(timeout=5)
        for proc in [*self.workers, *([self.scheduler] if self.scheduler else [])]:
            kill_group(proc)

    def mid_pass(self) -> bool:
        """Whether a Kendall work unit (keys ``_unit...``) is running."""
        with contextlib.suppress(Exception):
            return any(str(k).startswith("_unit") for keys in self.monitor.processing().values()
                       for k in keys)
        return False

    def worker_pids(self) -> list[int]:
        with contextlib.suppress(Exception):
            return list(self.monitor.run(os.getpid, wait=True).values())
        return []


def write_data(path: Path, n: int = N_ROWS) -> None:
    x = np.random.default_rng(11).normal(size=(n, P)) * [4.0, 2.0, 1.0, 1.0, 0.5] + 1e3
    ds = xr.Dataset({"X": (("sample", "variable"), x)},
                    coords={"variable": np.array(list("abcde"), dtype=object)})
    ds.chunk({"sample": ROW_CHUNK}).to_zarr(path, consolidated=False)


def write_config(base: Path, data: Path, name: str, cluster: dict[str, Any],
                 task: str = "loading") -> Path:
    section = ({"pca": {"block_rows": BLOCK_ROWS, "scree_control": {"clipped": {"C_clip": 100}}}}
               if task == "pca" else {"loading": {"block_rows": BLOCK_ROWS}})
    cfg = {
        "input": {"path": str(data), "array": "X"}, "task": task,
        "privacy": {"eps": 1.0, "delta": 1e-5}, **section,
        "cluster": cluster, "output": {"directory": str(base / name), "formats": ["zarr"]},
        "budget_ledger": {"path": str(base / f"{name}.ledger.sqlite")}, "rng": 2024,
    }
    path = base / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def start_run(config: Path) -> subprocess.Popen:
    env = {**os.environ, "DPPCA_LEDGER__ALLOW_RUN_CONFIG": "true",
           "DPPCA_LEDGER__URL": str(config.with_suffix(".deployment.sqlite"))}
    return subprocess.Popen(
        [sys.executable, "-m", "dppca_dask.cli", "run", str(config), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        cwd=config.parent, start_new_session=True, env=env)


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int | None, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, _ = proc.communicate()
        return None, out + f"\n[HANG: killed after {timeout:g} s]"
    finally:
        kill_group(proc)
    return proc.returncode, out


def ledger_kinds(path: Path) -> list[str]:
    from dppca_dask.pipeline.ledger import Ledger

    def name(event: dict[str, Any]) -> str:  # a failure after noise is a release event
        return "failed (kept as spent)" if event["status"] == "failed" else event["kind"]

    return [name(e) for e in Ledger(path).events()] if path.exists() else []


def directions(path: Path) -> np.ndarray | None:
    from dppca_dask import load_result

    for store in ("loading.zarr", "pca.zarr"):
        with contextlib.suppress(Exception):
            return np.asarray(load_result(path / store).directions.values)
    return None


@dataclass
class Outcome:
    fault: str
    outcome: str
    seconds: float
    ledger: list[str]
    detail: str
    kills: int = 0

    def row(self) -> str:
        return (f"| {self.fault} | {self.outcome} | {self.seconds:.1f} | "
                f"{', '.join(self.ledger) or '-'} | {self.detail} |")


def judge(fault: str, base: Path, name: str, code: int | None, out: str, seconds: float,
          reference: np.ndarray | None) -> Outcome:
    kinds = ledger_kinds(base / f"{name}.ledger.sqlite")
    errors = [line for line in out.splitlines() if line.startswith("Error")]
    leftovers = list(base.glob(f".{name}*"))
    if code == 0:
        got = directions(base / name)
        same = got is not None and reference is not None and np.array_equal(got, reference)
        ok = same and kinds == ["reserve", "release"]
        return Outcome(fault, "identical release" if ok else "DIFFERENT release", seconds,
                       kinds, "")
    stopped = [line for line in out.splitlines() if line.startswith("Terminated")]
    tidy = "Traceback" not in out and not (base / name).exists() and not leftovers
    clean = tidy and code == 1 and len(errors) == 1
    if tidy and code == 143 and len(stopped) == 1:  # SIGTERM: the CLI's own exit status
        errors, clean = stopped, True
        what = "clean stop (exit 143)"
    elif code == -signal.SIGKILL:  # nothing runs after kill -9; the reservation stays open
        errors = ["nothing can run after kill -9: the reservation stays `reserved` until the "
                  "custodian runs `dppca-dask budget release` (it sees that the pid is dead)"]
        what = "killed (exit -9), by design"
    else:
        what = "clean error" if clean else ("HANG" if code is None else f"UNCLEAN exit {code}")
    detail = errors[0].removeprefix("Error: ") if errors else out.strip().splitlines()[-1:] and \
        out.strip().splitlines()[-1]
    return Outcome(fault, what, seconds, kinds, str(detail)[:160])


# ------------------------------------------------------------------ faults


def run_with(base: Path, data: Path, name: str, cluster: dict[str, Any], inject: Callable[
        [subprocess.Popen], None] | None, loop: Loopback | None, fault: str,
        reference: np.ndarray | None, limit: float = TIMEOUT + 30, task: str = "loading",
        ) -> Outcome:
    config = write_config(base, data, name, cluster, task)
    proc = start_run(config)
    start = time.monotonic()
    try:
        if inject is not None:
            if loop is not None:
                wait_until(lambda: loop.mid_pass() or proc.poll() is not None,
                           "the Kendall pass to start")
            start = time.monotonic()
            inject(proc)
        code, out = finish(proc, limit + 60)
    finally:
        kill_group(proc)
    return judge(fault, base, name, code, out, time.monotonic() - start, reference)


def address(loop: Loopback, **extra: Any) -> dict[str, Any]:
    return {"kind": "address", "address": loop.address, "timeout": TIMEOUT, **extra}


def reference_release(base: Path, data: Path, task: str = "loading") -> np.ndarray:
    name = f"reference-{task}"
    cfg = write_config(base, data, name, {"kind": "local", "n_workers": 2, "processes": False},
                       task)
    code, out = finish(start_run(cfg), 300)
    if code != 0:
        raise RuntimeError(out)
    got = directions(base / name)
    assert got is not None
    return got


def churn_killer(loop: Loopback, stop: threading.Event, every: float, seed: int,
                 kills: list[int]) -> None:
    """SIGKILL one worker process (not its nanny) every ``every`` seconds until ``stop``."""
    pick = random.Random(seed)
    while not stop.wait(every):
        pids = loop.worker_pids()
        if pids and not stop.is_set():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pick.choice(pids), signal.SIGKILL)
                kills.append(1)


def churn_runs(base: Path, data: Path, reference: np.ndarray, repeat: int, every: float = 3.0,
               allowed_failures: int | None = None) -> list[Outcome]:
    outcomes = []
    with Loopback(base / "dask-churn", n_workers=3) as loop:
        for i in range(repeat):
            loop.monitor.wait_for_workers(3, timeout=WAIT)
            stop = threading.Event()
            kills: list[int] = []
            extra = {} if allowed_failures is None else {"allowed_failures": allowed_failures}
            killer = threading.Thread(target=churn_killer, args=(loop, stop, every, i, kills),
                                      daemon=True)

            def inject(proc: subprocess.Popen, killer: threading.Thread = killer) -> None:
                killer.start()

            try:
                outcome = run_with(base, data, f"churn{i}", address(loop, **extra), inject,
                                   loop, "churn", reference, limit=300)
            finally:
                stop.set()
                killer.join(timeout=10)
            outcome.kills = len(kills)
            outcome.detail = f"{len(kills)} worker(s) killed; {outcome.detail}".rstrip("; ")
            outcomes.append(outcome)
    return outcomes


def tiny_memory(base: Path, data: Path, reference: np.ndarray) -> Iterator[Outcome]:
    for limit in ("100MiB", "320MiB"):  # below an idle worker; below a worker ready to work
        yield run_with(base, data, f"tiny-{limit}", {"kind": "local", "n_workers": 1,
                                                     "memory_limit": limit},
                       None, None, f"tiny memory (LocalCluster {limit})", reference)


def all_faults(base: Path, data: Path, reference: np.ndarray) -> Iterator[Outcome]:
    with Loopback(base / "dask-s", n_workers=2) as loop:
        yield run_with(base, data, "scheduler", address(loop),
                       lambda proc: os.kill(loop.scheduler.pid, signal.SIGKILL),  # type: ignore[union-attr]
                       loop, "scheduler loss (SIGKILL)", reference)
    hung: list[tuple[str, str, Callable[[Loopback], list[tuple[Callable[[int, int], None], int]]]]] = [
        ("hung", "scheduler hung", lambda loop: [(os.kill, loop.scheduler.pid)]),  # type: ignore[union-attr]
        ("worker-hung", "one worker hung", lambda loop: [(os.kill, loop.worker_pids()[0])]),
        ("group-hung-1", "one worker and its nanny hung",
         lambda loop: [(os.killpg, w.pid) for w in loop.workers[:1]]),
        ("group-hung-2", "every worker and nanny hung",
         lambda loop: [(os.killpg, w.pid) for w in loop.workers]),
    ]
    for name, who, targets in hung:  # SIGSTOP: the processes stay, answering nothing
        with Loopback(base / f"dask-{name}", n_workers=2) as loop:
            stopped: list[tuple[Callable[[int, int], None], int]] = []

            def stop(proc: subprocess.Popen, loop: Loopback = loop, targets: Any = targets,
                     stopped: list = stopped) -> None:
                for send, pid in targets(loop):
                    send(pid, signal.SIGSTOP)
                    stopped.append((send, pid))

            try:
                yield run_with(base, data, name, address(loop), stop, loop,
                               f"{who} (SIGSTOP; cluster.timeout {TIMEOUT} s)", reference)
            finally:
                for send, pid in stopped:
                    with contextlib.suppress(OSError):
                        send(pid, signal.SIGCONT)
    with Loopback(base / "dask-w", n_workers=2) as loop:
        def kill_workers(proc: subprocess.Popen) -> None:
            for worker in loop.workers:
                kill_group(worker, signal.SIGKILL)

        yield run_with(base, data, "workers", address(loop), kill_workers, loop,
                       f"all workers lost (cluster.timeout {TIMEOUT} s)", reference)
    yield from churn_runs(base, data, reference, 1)
    yield from tiny_memory(base, data, reference)
    damages = [(f"{fault}{where}", damage, task)
               for task, where in (("loading", " mid-run"),
                                   ("pca", " during pass 1 of a pca run (later passes reread it)"))
               for fault, damage in (("store disappears", "gone"), ("store truncated", "truncated"))]
    references = {"loading": reference, "pca": reference_release(base, data, "pca")}
    for fault, damage, task in damages:
        name = f"store-{damage}-{task}"
        copy = base / f"data-{damage}-{task}.zarr"
        shutil.copytree(data, copy)
        with Loopback(base / f"dask-{damage}-{task}", n_workers=2) as loop:
            def hurt(proc: subprocess.Popen, copy: Path = copy, damage: str = damage) -> None:
                if damage == "gone":
                    shutil.rmtree(copy)
                    return
                for f in (copy / "X").rglob("*"):
                    if f.is_file() and f.name != "zarr.json":
                        f.write_bytes(f.read_bytes()[:7])

            yield run_with(base, copy, name, address(loop), hurt, loop, fault,
                           references[task], task=task)
    for sig, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGKILL, "SIGKILL")):
        with Loopback(base / f"dask-{name}", n_workers=2) as loop:
            yield run_with(base, data, name.lower(), address(loop),
                           lambda proc, sig=sig: os.kill(proc.pid, sig), loop,
                           f"driver {name}", reference)
    yield from loaded_faults(base, data, reference)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fault", nargs="?", choices=["all", "churn", "loaded", "tiny-memory"], default="all")
    parser.add_argument("--repeat", type=int, default=10, help="churn runs (churn only)")
    parser.add_argument("--every", type=float, default=3.0, help="seconds between churn kills")
    parser.add_argument("--allowed-failures", type=int, default=None)
    parser.add_argument("--rows", type=int, default=None,
                        help=f"rows of the data (default {N_ROWS}; churn {CHURN_ROWS})")
    args = parser.parse_args(argv)
    if args.rows is None:
        args.rows = CHURN_ROWS if args.fault == "churn" else N_ROWS
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks: stop PIDs
    with tempfile.TemporaryDirectory(prefix="dppca-faults-") as tmp:
        base = Path(tmp)
        data = base / "data.zarr"
        write_data(data, args.rows)
        reference = reference_release(base, data)
        print(f"data: {args.rows} x {P} Zarr, {BLOCK_ROWS}-row blocks; cluster.timeout {TIMEOUT} s")
        print("| fault | outcome | seconds to outcome | ledger events | error line |")
        print("| --- | --- | --- | --- | --- |")
        if args.fault == "churn":
            found = churn_runs(base, data, reference, args.repeat, args.every,
                               args.allowed_failures)
            print(f"(allowed_failures {args.allowed_failures or 'default'})")
        else:
            found = []
            faults = {"loaded": loaded_faults, "tiny-memory": tiny_memory}.get(args.fault, all_faults)
            for outcome in faults(base, data, reference):
                found.append(outcome)
                print(outcome.row(), flush=True)
        if args.fault == "churn":
            for outcome in found:
                print(outcome.row(), flush=True)
            same = sum(o.outcome == "identical release" for o in found)
            print(f"churn every {args.every:g} s: {same} of {len(found)} identical releases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
