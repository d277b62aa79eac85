"""A measured path to 10⁸–10⁹ rows: the scheduler's cost of dp_pca's graphs, loopback scaling and
a projection to 16 and 64 nodes (issue 31 item 4).

Three measurements, then a projection from them:

1. **Graph cost at n = 10⁸ and 10⁹ (p = 100)**, without the arithmetic. The graphs dp_pca builds
   (``pairs="blocks"``) are built on a Zarr array of that shape that holds no chunk (metadata
   only: nothing is written or read): the Kendall pass (out-of-core mode: each work unit reads its
   rows), the pass that keeps the scores, one round on the kept scores (their blocks, held in
   memory by then, stand in as one task each) and, for comparison, one round on X as before the
   scores were kept. For each: tasks, seconds to build, the pickled
   graph's size (what a client sends the scheduler).
2. **Scheduler cost per task.** Each graph's dependency structure, every task replaced by a no-op
   (same keys, same dependencies), is submitted to a real ``dask scheduler`` process with
   ``dask worker`` processes on 127.0.0.1: wall seconds per task (the per-task overhead of
   scheduling, messaging and bookkeeping, which a real run pays on top of its arithmetic) and the
   scheduler process's peak memory over its idle size.
3. **Loopback scaling.** A real dp_pca (blocks, kept scores) on a Zarr store of ``--real-n`` rows
   × p through 1, 2 and 4 worker processes of one thread each: seconds and rows/s per worker.
   This machine has ``os.cpu_count()`` cores: beyond them the line is flat by construction.

Projection (printed, with its assumptions): a release's core-seconds at n rows are n / r (r: the
one-worker rate of 3), spread over N nodes × C cores; the scheduler handles the release's tasks
one at a time at the measured cost per task (2), whatever N. So

    T(N) ≈ n / (r · N · C) + tasks(n) · c_task

is linear in 1/N until the second term matters: the knee N* = n / (r · C · tasks(n) · c_task).

    python benchmarks/scale.py                       # n = 1e8 and 1e9, p = 100; ~10-20 min
    python benchmarks/scale.py --quick               # n = 1e7 graph, small real run (a minute)

Figures are recorded in docs/performance.md ("A measured path to 10⁸–10⁹ rows").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import dask
import dask.array as da
import numpy as np
import psutil
import zarr
from dask._task_spec import Task, TaskRef, convert_legacy_graph

MIB = 2**20


# --- 1. the graphs, built on a Zarr array that holds no chunk ------------------------------------


def empty_store(path: Path, n: int, p: int, chunk: int) -> da.Array:
    """A lazy n × p float64 array over a Zarr array with no chunk written (metadata only)."""
    root = zarr.open_group(path, mode="w")
    arr = root.create_array("X", shape=(n, p), chunks=(chunk, p), dtype="float64",
                            dimension_names=("sample", "variable"))
    return da.from_zarr(arr)


def build_graphs(x: da.Array, k: int) -> dict[str, tuple[Any, float]]:
    """The lazy objects of dp_pca's passes at this shape, with their build seconds."""
    from dppca_dask.graph.kendall_units import kendall_sum
    from dppca_dask.graph.kept_scores import Scores, leaf_group
    from dppca_dask.graph.passes import Leaves, row_block_sum
    from dppca_dask.kernels import scree as kernels
    from dppca_dask.kernels.scores import project

    out: dict[str, tuple[Any, float]] = {}
    start = time.perf_counter()
    total, _ = kendall_sum(x, pairs="blocks", reread="auto")
    out["Kendall pass (blocks, out of core)"] = (total, time.perf_counter() - start)

    v = np.linalg.qr(np.random.default_rng(0).normal(size=(x.shape[1], k)))[0]
    start = time.perf_counter()
    y = da.map_blocks(project, x, v, dtype=np.float64, chunks=(x.chunks[0], (k,)),
                      token="dppca-kept-scores")
    leaves = Leaves(tuple(int(c) for c in x.chunks[0]), leaf_group(max(x.chunks[0]), k))
    if leaves.group > 1:
        y = y.rechunk((leaves.blocks(), (k,)))
    out["keep the scores (reads X)"] = (y, time.perf_counter() - start)

    center = np.zeros(k)
    start = time.perf_counter()
    # the kept blocks are in the workers' memory when a round runs: stand-ins of their shape
    held = da.zeros(y.shape, chunks=y.chunks, dtype=np.float64)
    kept = Scores(held, v, kept=True, leaves=leaves)
    round_y = row_block_sum(kept.scores(range(k)), kernels.clipped_sums, center, 1.0,
                            leaves=leaves)
    out["one round on the kept scores"] = (round_y, time.perf_counter() - start)

    start = time.perf_counter()
    round_x = row_block_sum(Scores(x, v, kept=False).scores(range(k)), kernels.clipped_sums,
                            center, 1.0)
    out["one round on X (before)"] = (round_x, time.perf_counter() - start)
    return out


def materialize(obj: Any) -> tuple[dict, list]:
    graph = dict(obj.__dask_graph__())
    keys = obj.__dask_keys__()
    flat: list = []

    def walk(item: Any) -> None:
        if isinstance(item, list):
            for sub in item:
                walk(sub)
        else:
            flat.append(item)

    walk(keys if isinstance(keys, list) else [keys])
    return graph, flat


# --- 2. the scheduler's cost: the same graph of no-ops on real processes -------------------------


def _noop(*args: Any) -> None:
    return None


def noop_graph(graph: dict) -> dict:
    """The same keys and dependencies, every task a no-op (no arithmetic, no data)."""
    tasks = convert_legacy_graph(graph)
    return {key: Task(key, _noop, *(TaskRef(d) for d in sorted(task.dependencies, key=str)))
            for key, task in tasks.items()}


class _Peak:
    """Peak RSS of a process, polled every 20 ms."""

    def __init__(self, pid: int) -> None:
        self.proc, self.peak, self.stop = psutil.Process(pid), 0, threading.Event()

    def _poll(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.02)

    def __enter__(self) -> Self:
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


@contextlib.contextmanager
def loopback(workers: int, base: Path) -> Iterator[tuple[Any, int]]:
    """A ``dask scheduler`` and ``workers`` ``dask worker`` processes on 127.0.0.1 (stopped by
    PID); yields (client, scheduler pid)."""
    from distributed import Client

    bindir = Path(sys.executable).parent
    file = base / f"scheduler-{time.monotonic_ns()}.json"  # a new one: never a stale address
    # One BLAS thread per single-threaded worker, as Dask's nanny sets for the workers it spawns
    # (distributed.nanny.pre-spawn-environ); these workers run without a nanny, and OpenBLAS
    # would otherwise start a thread per core in each of them: 2 workers on 2 cores then ran
    # 0.65x the speed of one, 4 workers 0.34x (measured 2026-12-07).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    procs = [subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1",
                               "--port", "0", "--dashboard-address", ":0", "--scheduler-file",
                               str(file)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    try:
        deadline = time.time() + 60
        while not file.exists() and time.time() < deadline:
            time.sleep(0.1)
        for _ in range(workers):
            procs.append(subprocess.Popen(
                [str(bindir / "dask"), "worker", "--scheduler-file", str(file), "--nthreads",
                 "1", "--nworkers", "1", "--memory-limit", "2GiB", "--host", "127.0.0.1",
                 "--dashboard-address", ":0", "--no-nanny"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(scheduler_file=str(file), timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
            yield client, procs[0].pid
    finally:
        for proc in reversed(procs):
            proc.kill()
            proc.wait()


def schedule(graph: dict, keys: list, workers: int, base: Path) -> dict[str, float]:
    """Submit the no-op graph; seconds to submit and to finish, scheduler memory growth."""
    noops = noop_graph(graph)
    with loopback(workers, base) as (client, pid):
        proc = psutil.Process(pid)
        idle = proc.memory_info().rss
        cpu0 = sum(proc.cpu_times()[:2])
        with _Peak(pid) as peak:
            start = time.perf_counter()
            futures = client.get(noops, keys, sync=False)
            submitted = time.perf_counter() - start
            client.gather(futures)
            seconds = time.perf_counter() - start
        cpu = sum(proc.cpu_times()[:2]) - cpu0
        return {"submit": submitted, "seconds": seconds, "peak": peak.peak - idle,
                "per_task": seconds / len(noops), "cpu_per_task": cpu / len(noops)}


# --- 3. loopback scaling: a real release -----------------------------------------------------------


def write_real(path: Path, n: int, p: int, chunk: int) -> None:
    if (path / "zarr.json").exists():
        return
    root = zarr.open_group(path, mode="w")
    arr = root.create_array("X", shape=(n, p), chunks=(chunk, p), dtype="float64",
                            dimension_names=("sample", "variable"))
    rng = np.random.default_rng(2031)
    spike = rng.normal(size=p)
    spike /= np.linalg.norm(spike)
    for lo in range(0, n, chunk):
        rows = min(chunk, n - lo)
        z = rng.standard_normal((rows, p))
        arr[lo:lo + rows] = z + rng.standard_normal((rows, 1)) * (np.sqrt(3.0) * spike)


def real_release(path: Path, workers: int, base: Path, k: int) -> float:
    from dppca_dask import clipped_control, dp_pca, privacy_control

    with loopback(workers, base) as (client, _), warnings.catch_warnings(), \
            dask.config.set({"dppca.scores.keep": True}):
        warnings.simplefilter("ignore")
        client.run(lambda: None)
        start = time.perf_counter()
        dp_pca(str(path), privacy=privacy_control(eps=1.0, delta=1e-6), k=k,
               scree_control=clipped_control(C_clip=40.0), pairs="blocks", rng=3)
        return time.perf_counter() - start


# --- main ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, nargs="+", default=[1e8, 1e9])
    parser.add_argument("--p", type=int, default=100)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=4096,
                        help="rows per Zarr chunk of the stores (4096: the pair groups, so the "
                             "Kendall units read their rows themselves; larger chunks add two "
                             "rechunk tasks per group)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--real-n", type=int, default=400_000)
    parser.add_argument("--cores-per-node", type=int, default=32)
    parser.add_argument("--nodes", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--noop-max-tasks", type=int, default=400_000,
                        help="submit no-op graphs up to this many tasks (bigger: scaled)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.n, args.real_n, args.workers = [1e7], 100_000, [1, 2]
    base = Path(tempfile.mkdtemp(prefix="dppca-scale-"))
    print(f"machine: {os.cpu_count()} cores; p = {args.p}, k = {args.k}, Zarr chunks of "
          f"{args.chunk} rows ({8 * args.chunk * args.p / MIB:.0f} MiB)")
    try:
        graphs = {}
        print("\n1-2. dp_pca's graphs (pairs='blocks'), built on a Zarr array holding no chunk; "
              f"the no-op copy run on a dask scheduler + {max(args.workers)} worker process(es)")
        print(f"{'n':>8} {'pass':<36} {'tasks':>9} {'build s':>8} {'pickled':>10} "
              f"{'sched s':>8} {'ms/task':>8} {'cpu ms':>7} {'sched +MiB':>10}")
        per_task, cpu_task = [], []
        for n_float in args.n:
            n = int(n_float)
            x = empty_store(base / f"virtual-{n}.zarr", n, args.p, args.chunk)
            built = build_graphs(x, args.k)
            total_tasks = 0
            for name, (obj, seconds) in built.items():
                graph, keys = materialize(obj)
                size = len(pickle.dumps(graph, protocol=5))
                tasks = len(graph)
                if name != "one round on X (before)":
                    total_tasks += tasks * (4 if name.startswith("one round") else 1)
                run = ""
                if tasks <= args.noop_max_tasks:
                    r = schedule(graph, keys, max(args.workers), base)
                    per_task.append(r["per_task"])
                    cpu_task.append(r["cpu_per_task"])
                    run = (f"{r['seconds']:8.1f} {1e3 * r['per_task']:8.3f} "
                           f"{1e3 * r['cpu_per_task']:7.3f} {r['peak'] / MIB:10.0f}")
                print(f"{n:8.0e} {name:<36} {tasks:9,d} {seconds:8.2f} {size / MIB:8.1f}Mi "
                      f"{run}")
                del graph
            graphs[n] = total_tasks
            print(f"{n:8.0e} {'release (Kendall, keep, 4 rounds)':<36} {total_tasks:9,d}")
        # The scheduler's own CPU per task is what limits a large cluster (its workers' share
        # of a task's overhead is spread over them); the wall per task here also holds the
        # loopback workers' share on the same cores, an upper figure.
        c_task = float(np.median(cpu_task))
        print(f"   wall per task (scheduler and workers on {os.cpu_count()} cores): median "
              f"{1e3 * float(np.median(per_task)):.3f} ms; the scheduler's CPU per task: median "
              f"{1e3 * c_task:.3f} ms (used below)")

        print(f"\n3. loopback scaling: dp_pca (blocks, kept scores) on {args.real_n:,} x "
              f"{args.p} (Zarr, {args.chunk}-row chunks)")
        real = base / "real.zarr"
        write_real(real, args.real_n, args.p, min(args.chunk, args.real_n))
        times = {}
        for w in args.workers:
            times[w] = real_release(real, w, base, args.k)
            print(f"  {w} worker(s): {times[w]:7.1f} s  {args.real_n / times[w] / w:10,.0f} "
                  f"rows/s per worker  speed-up {times[args.workers[0]] / times[w]:.2f}x")
        rate = args.real_n / times[1] if 1 in times else args.real_n / times[min(times)]

        print(f"\n4. projection (assumed: {args.cores_per_node} cores per node, each at the "
              f"measured one-worker rate r = {rate:,.0f} rows/s; scheduler cost "
              f"{1e3 * c_task:.3f} ms of its CPU per task, the median over the no-op runs)")
        print(f"{'n':>8} {'tasks':>9} {'core-hours':>10} " + " ".join(
            f"{f'{N} nodes':>18}" for N in args.nodes) + f" {'knee (nodes)':>13}")
        for n, tasks in graphs.items():
            work = n / rate
            cells = []
            for nodes in args.nodes:
                compute = work / (nodes * args.cores_per_node)
                sched = tasks * c_task
                cells.append(f"{(compute + sched) / 60:7.1f} min ({sched / (compute + sched):3.0%}"
                             " sch)")
            knee = work / (args.cores_per_node * tasks * c_task)
            print(f"{n:8.0e} {tasks:9,d} {work / 3600:10.1f} " + " ".join(
                f"{c:>18}" for c in cells) + f" {knee:13,.0f}")
        print("\nLinear while the scheduler's share (sch) is small: past the knee more nodes "
              "no longer shorten the run; larger Zarr chunks or pair groups (fewer tasks) move "
              "the knee out.")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
