"""Grouped ``dp_score`` and ``dp_pca`` out of core: a store of twice the workers' memory.

Writes a grouped 1.05·10⁷ × 20 Zarr store (float32 on disk, 1.6 GiB as float64: twice the
total of 2 × 400 MiB LocalCluster workers), then runs grouped ``dp_score`` and ``dp_pca``
(supplied directions) on it through the LocalCluster and prints the seconds of each step. Before
the group labels stayed on the workers (dppca_dask/graph/groups.py), a task that gathered the n
labels died with ``KilledWorker``. The test suite checks the same property in seconds
(``tests/test_faults.py``: no task holds more rows than a chunk; the worker processes give the
threaded release); this is the run at the size where it matters (minutes; docs/reliability.md).

    python benchmarks/out_of_core.py                  # 1.05e7 rows, chunks of 250 000
    python benchmarks/out_of_core.py --rows 2000000   # a smaller run
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import xarray as xr
import zarr

from dppca_dask import dp_pca, dp_score, privacy_control
from dppca_dask.errors import PrivacyWarning
from dppca_dask.pipeline.cluster import connect
from dppca_dask.pipeline.cluster_config import LocalClusterConfig

P, WORKERS, WORKER_MEMORY = 20, 2, 400 * 2**20


def write_store(path: Path, n: int, chunk: int) -> None:
    """The grouped store, written one chunk at a time (integer values × a per-column scale)."""
    root = zarr.open_group(path, mode="w")
    xs = root.create_array("X", shape=(n, P), chunks=(chunk, P), dtype="float32",
                           dimension_names=("sample", "variable"))
    gs = root.create_array("g", shape=(n,), chunks=(chunk,), dtype="int8",
                           dimension_names=("sample",))
    rng = np.random.default_rng(3)
    scale = np.linspace(3, 0.5, P).astype(np.float32)
    for lo in range(0, n, chunk):
        rows = min(chunk, n - lo)
        xs[lo:lo + rows] = rng.integers(-8, 9, size=(rows, P)).astype(np.float32) * scale
        gs[lo:lo + rows] = rng.integers(0, 3, size=rows).astype(np.int8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_500_000)
    parser.add_argument("--chunk", type=int, default=250_000)
    args = parser.parse_args()
    privacy = privacy_control(eps=1.0, delta=1e-9)
    v = np.eye(P)[:, :2]
    print(f"{args.rows} x {P} rows ({8 * args.rows * P / 2**30:.2f} GiB as float64) on "
          f"{WORKERS} x {WORKER_MEMORY / 2**20:.0f} MiB workers")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.zarr"
        start = time.perf_counter()
        write_store(path, args.rows, args.chunk)
        print(f"write store: {time.perf_counter() - start:.1f} s")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            start = time.perf_counter()
            with connect(LocalClusterConfig(n_workers=WORKERS, memory_limit=WORKER_MEMORY),
                         progress=False):
                print(f"start cluster: {time.perf_counter() - start:.1f} s")
                data = xr.open_zarr(path, consolidated=False)
                for name, fit in (
                        ("dp_score", lambda: dp_score(data, group="g", privacy=privacy,
                                                      V_dp=v, bins=20, rng=1)),
                        ("dp_pca", lambda: dp_pca(data, group="g", privacy=privacy, V_dp=v,
                                                  k=2, bins=20, rng=2,
                                                  scree_control={"C_clip": 30.0}))):
                    start = time.perf_counter()
                    result = fit()
                    groups = getattr(result, "groups", None) or result.score.groups
                    print(f"{name}: {time.perf_counter() - start:.1f} s (groups {groups})")


if __name__ == "__main__":
    main()
