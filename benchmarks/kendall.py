"""Benchmark of the spherical Kendall pass: kernels, Dask overhead, out-of-core memory, blocks mode.

Plain Python; prints one table. ``python benchmarks/kendall.py`` (about 2-3 minutes on a 2-core
machine) or ``--quick`` (seconds; the CI smoke test). Every number of one table comes from one
run on the same data, so the ratios are meaningful even on a shared, noisy machine; timings are
the best of ``--repeat`` runs.

Sections (docs/performance.md explains them and the defaults they led to):

1. ``dgemm``: a large ``A @ B`` on one thread: the roofline (flop/s) the kernels are compared to.
2. ``kernel``: pairs/s of the reference, unfused NumPy and fused kernels on one thread, per p, on
   one off-diagonal tile (reference: a smaller tile); "roofline" = pairs/s · 4p / dgemm flop/s.
3. ``dask``: ``dp_loading`` from a Zarr store on disk through a LocalCluster with 1 and 2
   single-threaded workers vs the in-process kernel over the same work units on 1 and 2 threads.
4. ``ooc``: ``dp_loading(pairs="blocks")`` on a Zarr store larger than each worker's
   ``memory_limit``: peak RSS of the driver and of each worker; output identical to the in-memory
   run.
5. ``blocks``: ``pairs="blocks"`` accuracy (sin-theta distance of the top-3 directions to the full
   U-statistic's) and time, per ``pair_block``.
6. ``heavy`` (rows labelled "heavy ..." in the kernel section): the fused kernel on heavy-tailed
   data (multivariate t(1.5), t(3), 1 % outliers at 1e3 and 1e6) and on clustered data (4 and
   16 tight clusters 100 sd apart) vs Gaussian data, per p, on one thread: pairs/s, the ratio
   to Gaussian data measured in the same run and the fraction of pairs recomputed exactly (the
   kernel's ``TileStats``), with the production kernel (full tile) and the "before": the old
   mid-range centre for heavy tails (``centre="midrange"``), the one-centre kernel for clusters
   (``switch=False``), timed on ``heavy_before_rows`` rows of A against the full B.
7. ``roofline`` (first): per p in (10, 50, 100) and per data kind (Gaussian, multivariate t(2),
   4 tight clusters), the unfused kernel, the fused kernel before the column chunks ("old
   fused": whole 256 × b panels) and the fused kernel on 2 threads the way a pass runs them
   (one tile per thread concurrently, BLAS on one thread each) as % of the 2-thread dgemm
   roofline (pairs/s · 4p / flop/s of a large matmul on 2 BLAS threads, the best of the run),
   the dgemm timed in every pass between the kernels; "pass": the median of the per-pass
   ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

import numpy as np
import psutil
from threadpoolctl import threadpool_limits

from dppca_dask import dp_loading, privacy_control, spherical_kendall
from dppca_dask.graph.compute import use_compute
from dppca_dask.graph.kendall_layout import kendall_layout
from dppca_dask.graph.kendall_units import _unit
from dppca_dask.kernels import kendall_fused
from dppca_dask.kernels.kendall import TileStats, tile_blas_unfused, tile_reference
from dppca_dask.kernels.kendall_fused import tile_fused

PRIVACY = privacy_control(eps=1.0, delta=1e-6)
FULL = {
    "p": (10, 50, 100, 300), "tile": 4096, "ref_tile": 256, "dgemm": 3000,
    "e2e_n": 40_000, "e2e_p": 50, "workers": (1, 2),
    "ooc_n": 1_600_000, "ooc_p": 50, "ooc_limit": 512 * 2**20, "ooc_block": 2048,
    "blocks_n": 200_000, "blocks_p": 10, "blocks": (512, 2048, 8192),
    "heavy_p": (10, 50, 100), "heavy_before_rows": 256,
    "roof_p": (10, 50, 100), "roof_threads": 2, "roof_passes": 7, "roof_unfused_rows": 512,
}
QUICK = {
    "p": (10, 50), "tile": 512, "ref_tile": 64, "dgemm": 500,
    "e2e_n": 3_000, "e2e_p": 10, "workers": (2,),
    "ooc_n": 60_000, "ooc_p": 10, "ooc_limit": 512 * 2**20, "ooc_block": 512,
    "blocks_n": 3_000, "blocks_p": 5, "blocks": (64, 512),
    "heavy_p": (10,), "heavy_before_rows": 64,
    "roof_p": (10,), "roof_threads": 2, "roof_passes": 1, "roof_unfused_rows": 128,
}


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def spiked(n: int, p: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scales = np.linspace(3.0, 0.5, p) if p > 1 else np.ones(1)
    return rng.standard_t(5.0, size=(n, p)) * scales + 100.0


def write_zarr(x: np.ndarray, path: Path, chunk_rows: int) -> int:
    import zarr

    store = zarr.create_array(str(path), shape=x.shape, chunks=(chunk_rows, x.shape[1]),
                              dtype="f8", overwrite=True)
    for lo in range(0, len(x), 8 * chunk_rows):
        store[lo : lo + 8 * chunk_rows] = x[lo : lo + 8 * chunk_rows]
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


# --- 1-2: roofline and kernels --------------------------------------------------------------
def dgemm_flops(size: int, repeat: int) -> float:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(size, size)), rng.normal(size=(size, size))
    return 2.0 * size**3 / best(lambda: a @ b, repeat)


def kernel_rows(cfg: dict, repeat: int, peak: float) -> list[tuple]:
    tile_fused(spiked(20, 3))  # load the compiled kernel (numba cache) before timing
    rows = []
    for p in cfg["p"]:
        x = spiked(2 * cfg["tile"], p, seed=p)
        a, b = x[: cfg["tile"]], x[cfg["tile"] :]
        ra, rb = a[: cfg["ref_tile"]], b[: cfg["ref_tile"]]
        rates = {}
        for name, kernel, (u, v), times in (
            ("reference", tile_reference, (ra, rb), 1),
            ("unfused", tile_blas_unfused, (a, b), repeat),
            ("fused", tile_fused, (a, b), repeat),
        ):
            seconds = best(lambda kernel=kernel, u=u, v=v: kernel(u, v), times)
            rates[name] = u.shape[0] * v.shape[0] / seconds
        for name, rate in rates.items():
            rows.append(("kernel", f"{name} p={p}", f"{rate:.3g} pairs/s",
                         f"{rate * 4 * p / peak:.0%} of roofline"))
        rows.append(("kernel", f"fused/unfused p={p}", f"{rates['fused'] / rates['unfused']:.2f}x",
                     f"{rates['fused'] / rates['reference']:.0f}x reference"))
    return rows


# --- 6: heavy tails ----------------------------------------------------------------------------
HEAVY = ("gaussian", "t(1.5)", "t(3)", "outliers 1% x1e3", "outliers 1% x1e6",
         "4 clusters", "16 clusters")


def heavy_data(kind: str, n: int, p: int, seed: int) -> np.ndarray:
    """n rows of ``kind`` (HEAVY): spiked scales and an offset of 100, like ``spiked``."""
    rng = np.random.default_rng(seed)
    scales = np.linspace(3.0, 0.5, p) if p > 1 else np.ones(1)
    z = rng.normal(size=(n, p))
    if kind.startswith("t("):  # multivariate t: one chi-square mixing variable per row
        nu = float(kind[2:-1])
        z /= np.sqrt(rng.chisquare(nu, size=(n, 1)) / nu)
    elif kind.startswith("outliers"):
        z[rng.permutation(n)[: max(1, n // 100)]] *= float(kind.split("x")[-1])
    elif kind.endswith("clusters"):  # tight clusters 100 sd apart, rows in random order
        k = int(kind.split()[0])
        z += rng.normal(size=(k, p))[rng.integers(0, k, n)] * 100.0
    return z * scales + 100.0


def _before(kind: str, centre: str) -> dict[str, Any]:
    if centre == "median":
        return {}
    return {"switch": False} if kind.endswith("clusters") else {"centre": "midrange"}


def heavy_rows(cfg: dict, repeat: int) -> list[tuple]:
    """Per p: every dataset timed in turn, ``repeat`` rounds (so all see the same load)."""
    tile, sub = cfg["tile"], cfg["heavy_before_rows"]
    rows = []
    for p in cfg["heavy_p"]:
        tiles = {}
        for kind in HEAVY:
            x = heavy_data(kind, 2 * tile, p, seed=p)
            tiles[kind] = x[:tile], x[tile:]
        # "before": the mid-range centre for heavy tails; for clusters the one-centre kernel
        # (median, no switch to per-panel centres: the kernel before the switch existed)
        cases = [(kind, centre) for kind in HEAVY for centre in ("median", "midrange")]
        near, seconds = {}, {}
        for kind, centre in cases:
            a, b = tiles[kind]
            a = a if centre == "median" else a[:sub]
            stats = TileStats()
            tile_fused(a, b, **_before(kind, centre), stats=stats)
            near[kind, centre] = stats.near_fraction
            seconds[kind, centre] = np.inf
        for _ in range(repeat):
            for kind, centre in cases:
                if centre == "midrange" and near[kind, centre] > 0.01 and _ > 0:
                    continue  # the slow exact path: once is enough
                a, b = tiles[kind]
                a = a if centre == "median" else a[:sub]
                kw = _before(kind, centre)
                took = best(lambda a=a, b=b, kw=kw: tile_fused(a, b, **kw), 1)
                seconds[kind, centre] = min(seconds[kind, centre], took)
        rate = {
            case: (tile if case[1] == "median" else sub) * tile / seconds[case] for case in cases
        }
        gauss, gauss_before = rate["gaussian", "median"], rate["gaussian", "midrange"]
        for kind in HEAVY:
            new, old = rate[kind, "median"], rate[kind, "midrange"]
            what = "one centre" if kind.endswith("clusters") else "mid-range"
            rows.append(("kernel", f"heavy p={p} {kind}", f"{new:.3g} pairs/s",
                         f"{new / gauss:.2f}x gaussian, exact {near[kind, 'median']:.3%} | "
                         f"before ({what}): {old:.3g} pairs/s, {old / gauss_before:.3f}x, "
                         f"exact {near[kind, 'midrange']:.1%}"))
    return rows


# --- 7: the 2-thread roofline -----------------------------------------------------------------
ROOF_KINDS = ("gaussian", "t(2)", "4 clusters")


def _fresh_fused(a: np.ndarray, b: np.ndarray, **kw: Any) -> Any:
    """``tile_fused`` as a pass's first piece of a tile runs it: without the thread's memory of
    tile contexts (so the centre and the cluster analysis are paid, as once per tile in a pass)."""
    kendall_fused._SCRATCH.__dict__.pop("contexts", None)
    return tile_fused(a, b, **kw)


def _old_fused(a: np.ndarray, b: np.ndarray) -> Any:
    """The fused kernel before the column chunks: whole 256 × b panels (one chunk per panel is
    the old code path exactly)."""
    return _fresh_fused(a, b, panel_cols=2**62)


def roofline_rows(cfg: dict) -> list[tuple]:
    """Per p and data kind: the unfused, old fused and fused kernels on ``roof_threads`` threads the
    way a pass runs them (one tile per thread, concurrently, BLAS on one thread each: Dask's
    threads under ``threadpool_limits(1)``), as % of a large dgemm on the same number of BLAS
    threads -- roofline = pairs/s · 4p / dgemm flop/s. Every pass times the dgemm and then every
    kernel on every kind in turn (so all see the same load); printed: the kernel's best time
    against the best dgemm of the whole run (the roofline) and, as "pass", the median over
    passes of the kernel against the dgemm of its own pass. The unfused kernel runs on ``roof_unfused_rows``
    rows of A against the full B (its exact path makes full clustered tiles take minutes);
    the fused one on the full tile."""
    threads, tile, sub = cfg["roof_threads"], cfg["tile"], cfg["roof_unfused_rows"]
    size = cfg["dgemm"]
    rng = np.random.default_rng(1)
    m1, m2 = rng.normal(size=(size, size)), rng.normal(size=(size, size))
    kernels = {"unfused": tile_blas_unfused, "old fused": _old_fused, "fused": _fresh_fused}
    rows = []
    with ThreadPoolExecutor(threads) as pool:

        def on_threads(kernel: Callable, a: np.ndarray, b: np.ndarray) -> float:
            with threadpool_limits(1):
                start = time.perf_counter()
                list(pool.map(lambda _: kernel(a, b), range(threads)))
                return time.perf_counter() - start

        measured = []
        for p in cfg["roof_p"]:
            tiles = {}
            for kind in ROOF_KINDS:
                x = heavy_data(kind, 2 * tile, p, seed=p)
                tiles[kind] = x[:tile], x[tile:]
                for kernel in kernels.values():  # warm up (numba cache, scratch buffers)
                    on_threads(kernel, tiles[kind][0][: 2 * p + 8], tiles[kind][1])
            load = os.getloadavg()[0]
            gemm: list[float] = []
            took: dict[tuple[str, str], list[float]] = {}
            for _ in range(cfg["roof_passes"]):
                with threadpool_limits(threads):
                    gemm.append(best(lambda: m1 @ m2, 1))
                for kind in ROOF_KINDS:
                    a, b = tiles[kind]
                    for name, kernel in kernels.items():
                        rows_a = a[:sub] if name == "unfused" else a
                        took.setdefault((kind, name), []).append(on_threads(kernel, rows_a, b))
            measured.append((p, load, [2.0 * size**3 / t for t in gemm], took))
    # the roofline: the best dgemm of the whole run (a property of the machine, not of a p)
    peak = max(max(flops) for _, _, flops, _ in measured)
    for p, load, flops, took in measured:
        rows.append(("roofline", f"p={p} dgemm {size}^3 on {threads} BLAS threads",
                     f"best {max(flops) / 1e9:.1f} GFLOP/s, median {np.median(flops) / 1e9:.1f}",
                     f"roofline {peak / 1e9:.1f} (the run's best); load average {load:.1f}"))
        for kind in ROOF_KINDS:
            cells = []
            rate = {}
            for name in kernels:
                ra = sub if name == "unfused" else tile
                pairs = threads * ra * tile
                times = took[kind, name]
                rate[name] = pairs / min(times)
                median = np.median([pairs / t * 4 * p / f for t, f in zip(times, flops,
                                                                          strict=True)])
                cells.append(f"{name} {rate[name] * 4 * p / peak:.0%} (pass {median:.0%})")
            old = np.median(np.array(took[kind, "old fused"]) / np.array(took[kind, "fused"]))
            rows.append(("roofline", f"p={p} {kind}", " | ".join(cells),
                         f"fused {rate['fused']:.3g} pairs/s on {threads} threads; "
                         f"{old:.2f}x old fused (median of passes); "
                         f"{rate['fused'] / rate['unfused']:.1f}x unfused"))
    return rows


# --- 3: Dask overhead -------------------------------------------------------------------------
@contextlib.contextmanager
def local_cluster(workers: int, memory_limit: Any = "auto") -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      memory_limit=memory_limit, dashboard_address=":0",
                      silence_logs=40) as cluster, Client(cluster) as client:

        def run(*objs: Any) -> tuple[Any, ...]:
            return tuple(client.gather(client.compute(list(objs))))

        with use_compute(run):
            yield client


def in_process(x: np.ndarray, threads: int) -> float:
    """Seconds for the fused kernel over the pass's own work units, no Dask, ``threads``."""
    layout = kendall_layout(*x.shape)
    bounds = [0, *itertools.accumulate(layout.block_sizes)]
    blocks = [x[lo:hi] for lo, hi in itertools.pairwise(bounds)]

    def unit(pieces: tuple) -> Any:
        ids = tuple(sorted({k for piece in pieces for k in piece[:2]}))
        return _unit("fused", pieces, ids, *(blocks[k] for k in ids))

    start = time.perf_counter()
    with threadpool_limits(1), ThreadPoolExecutor(threads) as pool:
        list(pool.map(unit, layout.units))
    return time.perf_counter() - start


def dask_rows(cfg: dict, repeat: int, workdir: Path) -> list[tuple]:
    from distributed import get_task_stream

    n, p = cfg["e2e_n"], cfg["e2e_p"]
    x = spiked(n, p, seed=3)
    path = workdir / "e2e.zarr"
    write_zarr(x, path, 4096)
    pairs = n * (n - 1) / 2
    rows = []
    for workers in cfg["workers"]:
        with local_cluster(workers) as client:
            dp_loading(str(path), privacy=PRIVACY, rng=0)  # warm up: imports, numba cache
            kernel, total, busy = [], [], []
            for _ in range(repeat):  # interleaved, so both see the same machine load
                kernel.append(in_process(x, workers))
                with get_task_stream(client) as stream:
                    start = time.perf_counter()
                    dp_loading(str(path), privacy=PRIVACY, rng=0)
                    total.append(time.perf_counter() - start)
                busy.append(sum(
                    part["stop"] - part["start"] for task in stream.data
                    for part in task["startstops"]
                    if part["action"] == "compute" and str(task["key"]).startswith("_unit")
                ))
        kernel_s, total_s = min(kernel), min(total)
        unit_s = busy[total.index(total_s)] / workers
        rows.append(("dask", f"in-process fused, {workers} thread(s), n={n} p={p}",
                     f"{pairs / kernel_s:.3g} pairs/s", f"{kernel_s:.2f} s"))
        rows.append(("dask", f"dp_loading from Zarr, LocalCluster {workers} worker(s)",
                     f"{pairs / total_s:.3g} pairs/s",
                     f"{kernel_s / total_s:.0%} of in-process ({total_s:.2f} s)"))
        rows.append(("dask", f"  where the {total_s:.2f} s went",
                     f"work units {unit_s:.2f} s/worker",
                     f"everything else {total_s - unit_s:.2f} s ({1 - unit_s / total_s:.0%})"))
    return rows


# --- 4: out-of-core ---------------------------------------------------------------------------
class PeakRss:
    """Polls the RSS of a set of processes every 20 ms and keeps the maxima."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.peak = dict.fromkeys(pids, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            for name, proc in self.procs.items():
                with contextlib.suppress(psutil.Error):
                    self.peak[name] = max(self.peak[name], proc.memory_info().rss)
            time.sleep(0.02)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _worker_peak_rss() -> int:
    """VmHWM (the process's own RSS high-water mark; ru_maxrss would include the parent's peak
    at spawn time, since Linux keeps it across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return psutil.Process().memory_info().rss


def ooc_rows(cfg: dict, workdir: Path) -> list[tuple]:
    n, p, limit, block = cfg["ooc_n"], cfg["ooc_p"], cfg["ooc_limit"], cfg["ooc_block"]
    x = spiked(n, p, seed=4)
    path = workdir / "ooc.zarr"
    stored = write_zarr(x, path, block)
    options = {"privacy": PRIVACY, "pairs": "blocks", "pair_block": block, "rng": 0}
    in_memory = dp_loading(x, **options).directions.values
    del x
    mib = 2**20
    with local_cluster(2, memory_limit=limit) as client:
        idle = list(client.run(_worker_peak_rss).values())
        pids = {f"worker {k}": pid for k, pid in enumerate(client.run(os.getpid).values())}
        before = psutil.Process().memory_info().rss
        with PeakRss({"driver": os.getpid(), **pids}) as rss:
            start = time.perf_counter()
            fit = dp_loading(str(path), **options)
            seconds = time.perf_counter() - start
        hwm = list(client.run(_worker_peak_rss).values())
    same = np.array_equal(fit.directions.values, in_memory)
    rows = [("ooc", f"store {stored / mib:.0f} MiB > worker memory_limit {limit / mib:.0f} MiB",
             f"n={n} p={p} pairs='blocks' b={block}", f"{seconds:.2f} s, identical: {same}")]
    rows.append(("ooc", "driver peak RSS during the pass", f"{rss.peak['driver'] / mib:.0f} MiB",
                 f"+{(rss.peak['driver'] - before) / mib:.0f} MiB over its start"))
    for k, peak in enumerate(hwm):
        rows.append(("ooc", f"worker {k} peak RSS (VmHWM)", f"{peak / mib:.0f} MiB",
                     f"{peak / limit:.2f} x memory_limit (idle worker: {idle[k] / mib:.0f} MiB)"))
    return rows


# --- 5: blocks mode ---------------------------------------------------------------------------
def sin_theta(u: np.ndarray, v: np.ndarray) -> float:
    return float(np.linalg.norm(u - v @ (v.T @ u), 2))


def top(k: np.ndarray, m: int = 3) -> np.ndarray:
    _, vectors = np.linalg.eigh(k)
    return vectors[:, ::-1][:, :m]


def blocks_rows(cfg: dict) -> list[tuple]:
    n, p = cfg["blocks_n"], cfg["blocks_p"]
    x = spiked(n, p, seed=5)
    start = time.perf_counter()
    full = spherical_kendall(x).values
    seconds = time.perf_counter() - start
    rows = [("blocks", f"pairs='all' n={n} p={p} (2 threads)", "sin-theta 0", f"{seconds:.2f} s")]
    for b in cfg["blocks"]:
        start = time.perf_counter()
        k = spherical_kendall(x, pairs="blocks", pair_block=b).values
        took = time.perf_counter() - start
        rows.append(("blocks", f"pairs='blocks' pair_block={b}",
                     f"sin-theta {sin_theta(top(k), top(full)):.2e}",
                     f"{took:.2f} s ({seconds / took:.0f}x faster)"))
    return rows


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> list[tuple]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI smoke test)")
    parser.add_argument("--repeat", type=int, default=None, help="best of N (default 3; quick 1)")
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["roofline", "kernel", "heavy", "dask", "ooc", "blocks"],
                        help="sections to skip")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    repeat = args.repeat or (1 if args.quick else 3)
    began = time.perf_counter()
    load = os.getloadavg()[0]
    with threadpool_limits(1):
        peak = dgemm_flops(cfg["dgemm"], repeat)
    rows = [("dgemm", f"{cfg['dgemm']}^3 on 1 thread", f"{peak / 1e9:.1f} GFLOP/s",
             f"load average {load:.1f} on {os.cpu_count()} cores")]
    workdir = Path(tempfile.mkdtemp(prefix="dppca-bench-"))
    try:
        if "roofline" not in args.skip:
            say("roofline: kernels on 2 threads vs dgemm on 2 threads")
            rows += roofline_rows(cfg)
        if "kernel" not in args.skip:
            say("kernels")
            with threadpool_limits(1):
                rows += kernel_rows(cfg, repeat, peak)
        if "heavy" not in args.skip:
            say("heavy tails")
            with threadpool_limits(1):
                rows += heavy_rows(cfg, repeat)
        if "dask" not in args.skip:
            say("dask: in-process vs LocalCluster")
            rows += dask_rows(cfg, min(repeat, 2), workdir)
        if "ooc" not in args.skip:
            say("out-of-core")
            rows += ooc_rows(cfg, workdir)
        if "blocks" not in args.skip:
            say("blocks mode")
            rows += blocks_rows(cfg)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rows.append(("total", "wall time", f"{time.perf_counter() - began:.0f} s",
                 f"load average now {os.getloadavg()[0]:.1f}"))
    widths = [max(len(str(r[k])) for r in rows) for k in range(4)]
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
