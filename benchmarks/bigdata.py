"""Big data end to end: dp_pca on a Zarr store larger than the workers' memory (issue 14, item 5).

Writes a synthetic spiked store once (n × p float64, 4096-row chunks, streamed: never held in
memory), then runs ``dp_pca(pairs="auto")`` -- blocks above the all-pairs work threshold --
through a LocalCluster of worker processes with a small ``memory_limit``, and prints:

* wall time of every data pass (the pass log: Kendall, scree centre and methods, score frame
  and cells) and of the whole release;
* worker peak RSS (VmHWM) against the memory limit, driver RSS over its idle size, spilled keys,
  and whether distributed warned about a large graph;
* with ``--scaling``: the same release on 1 worker, for a 1 → 2 worker line;
* the same release with the scores on the released directions kept on the workers
  (``dppca.scores.keep``, :mod:`dppca_dask.graph.kept_scores`) and without (every pass after the
  Kendall pass re-reads X), in one run: the non-Kendall seconds and share of each, and whether
  the two releases are bit-identical (``--keep both``, the default; ``true``/``false`` runs one).

    python benchmarks/bigdata.py                       # n = 1e7, p = 50 (~4 GB), 2 x 1 GiB workers
    python benchmarks/bigdata.py --n 2000000 --memory 400MiB --scaling
    python benchmarks/bigdata.py --quick               # n = 4e5 smoke run

Figures are recorded in docs/performance.md ("Big data end to end").
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Self

import dask
import dask.array as da
import numpy as np
import psutil

from dppca_dask import clipped_control, dp_pca, privacy_control
from dppca_dask.graph.passlog import record_passes

MIB = 2**20


def write_store(path: Path, n: int, p: int, chunk: int, seed: int = 1) -> int:
    """A spiked model (variance 4 along one direction, 1 elsewhere), written chunk by chunk."""
    if (path / "zarr.json").exists():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    rng = da.random.default_rng(seed)
    v = np.random.default_rng(seed).normal(size=p)
    v /= np.linalg.norm(v)
    z = rng.standard_normal((n, p), chunks=(chunk, p))
    g = rng.standard_normal((n, 1), chunks=(chunk, 1))
    x = z + g * (np.sqrt(3.0) * v)
    with dask.config.set(scheduler="threads"):
        da.to_zarr(x, str(path))
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _vmhwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _spilled(dask_worker=None) -> int:  # type: ignore[no-untyped-def]
    slow = getattr(getattr(dask_worker, "data", None), "slow", None)
    return len(slow) if slow is not None else 0


class _Peak:
    def __init__(self, pid: int) -> None:
        self.proc, self.peak, self._stop = psutil.Process(pid), 0, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.05)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class _LargeGraph(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "large graph" in record.getMessage().lower():
            self.seen.append(record.getMessage()[:100])


def run(path: Path, workers: int, memory: str, k: int, keep: bool) -> dict:
    from distributed import Client, LocalCluster

    graph_log = _LargeGraph()
    logging.getLogger("distributed").addHandler(graph_log)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      memory_limit=memory, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        idle = list(client.run(_vmhwm).values())
        driver = psutil.Process().memory_info().rss
        with _Peak(os.getpid()) as peak, record_passes() as passes, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            with dask.config.set({"dppca.scores.keep": keep}):
                fit = dp_pca(str(path), privacy=privacy_control(eps=1.0, delta=1e-6), k=k,
                             scree_control=clipped_control(C_clip=40.0), pairs="auto",
                             calibration="analytic", sensitivity="tight", rng=3)
            seconds = time.perf_counter() - start
        hwm = list(client.run(_vmhwm).values())
        spilled = sum(client.run(_spilled).values())
    logging.getLogger("distributed").removeHandler(graph_log)
    return {"seconds": seconds, "passes": passes, "idle": idle, "hwm": hwm,
            "driver": peak.peak - driver, "spilled": spilled, "large_graph": graph_log.seen,
            "pairs": fit.loading.metadata["pairs"], "pve": fit.scree.pve.values[0],
            "release": _release(fit)}


def _release(fit) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    """Every released array of the three parts (to compare two runs bit for bit)."""
    return {f"{name}/{var}": part.dataset[var].values
            for name, part in (("loading", fit.loading), ("scree", fit.scree),
                               ("score", fit.score))
            for var in part.dataset.data_vars}


def _kendall_seconds(passes) -> float:  # type: ignore[no-untyped-def]
    return sum(r.seconds for r in passes if any(o.startswith("Kendall") for o in r.outputs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--p", type=int, default=50)
    parser.add_argument("--chunk", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory", default="1GiB", help="memory_limit per worker")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where the store goes (kept for reuse)")
    parser.add_argument("--scaling", action="store_true", help="also run on 1 worker")
    parser.add_argument("--quick", action="store_true", help="n = 400 000 smoke run")
    parser.add_argument("--keep", choices=["both", "true", "false"], default="both",
                        help="keep the scores on the workers (dppca.scores.keep); both: each, "
                             "in one run")
    args = parser.parse_args()
    n = 400_000 if args.quick else args.n
    base = Path(args.dir or tempfile.gettempdir()) / f"dppca-bigdata-{n}x{args.p}.zarr"
    start = time.perf_counter()
    size = write_store(base, n, args.p, args.chunk)
    print(f"store: {base} ({size / MIB:,.0f} MiB on disk, {8 * n * args.p / MIB:,.0f} MiB as "
          f"float64; n = {n:,}, p = {args.p}, {args.chunk}-row chunks; "
          f"{time.perf_counter() - start:.0f} s to write or find)")
    limit = dask.utils.parse_bytes(args.memory)
    keeps = {"both": [False, True], "true": [True], "false": [False]}[args.keep]
    runs = [(w, keep) for w in [args.workers] + ([1] if args.scaling and args.workers != 1
                                                  else []) for keep in keeps]
    results = {}
    for workers, keep in runs:
        r = run(base, workers, args.memory, args.k, keep)
        results[workers, keep] = r
        kendall = _kendall_seconds(r["passes"])
        rest = r["seconds"] - kendall
        print(f"\n{workers} worker(s) x {args.memory} (store = "
              f"{8 * n * args.p / (workers * limit):.1f}x their total memory), scores "
              f"{'kept' if keep else 'not kept'}: dp_pca pairs='auto' -> {r['pairs']}: "
              f"{r['seconds']:.1f} s (Kendall {kendall:.1f} s; everything else {rest:.1f} s = "
              f"{rest / r['seconds']:.0%})")
        for rec in r["passes"]:
            print(f"  pass {rec.index}: {rec.seconds:7.1f} s  {', '.join(rec.outputs)}  "
                  f"({rec.tasks:,} tasks)")
        for w, (peak, idle) in enumerate(zip(r["hwm"], r["idle"], strict=True)):
            print(f"  worker {w}: peak RSS {peak / MIB:,.0f} MiB = {peak / limit:.2f} x "
                  f"memory_limit (idle {idle / MIB:,.0f} MiB)")
        print(f"  driver: +{r['driver'] / MIB:,.0f} MiB over its idle size; spilled keys: "
              f"{r['spilled']}; large-graph warnings: {len(r['large_graph'])}")
        print(f"  private PVE of the first {args.k} PCs: {np.round(r['pve'], 3).tolist()}")
    for workers in dict.fromkeys(w for w, _ in runs):
        if (workers, False) in results and (workers, True) in results:
            apart, kept = results[workers, False], results[workers, True]
            same = all(np.array_equal(apart["release"][key], kept["release"][key])
                       for key in apart["release"])
            rest = [r["seconds"] - _kendall_seconds(r["passes"]) for r in (apart, kept)]
            print(f"\nkept scores, {workers} worker(s): everything but the Kendall pass "
                  f"{rest[0]:.1f} s -> {rest[1]:.1f} s ({rest[1] / rest[0]:.2f}x; share "
                  f"{rest[0] / apart['seconds']:.0%} -> {rest[1] / kept['seconds']:.0%}); "
                  f"whole release {apart['seconds']:.1f} s -> {kept['seconds']:.1f} s; "
                  f"releases {'bit-identical' if same else 'DIFFER'}")
    if args.scaling and args.workers != 1:
        last = keeps[-1]
        one, many = results[1, last]["seconds"], results[args.workers, last]["seconds"]
        print(f"\nscaling: 1 worker {one:.1f} s, {args.workers} workers {many:.1f} s "
              f"({one / many:.2f}x)")
        rate = n / many / args.workers
        print(f"per-core rate: {rate:,.0f} rows/s; projected at 64 cores: "
              f"{n / (rate * 64):.1f} s for this n, {1e9 / (rate * 64) / 60:.1f} min for n = 1e9")


if __name__ == "__main__":
    main()
