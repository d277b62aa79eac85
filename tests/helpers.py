"""Helpers shared by several test files (oracles and guards); test files import only from here."""

from __future__ import annotations

import contextlib
import math
import struct
import zlib
from pathlib import Path
from typing import Any

import dask
import numpy as np


def brute_force(x: np.ndarray, y: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Literal double loop over pairs: the independent oracle."""
    p = x.shape[1]
    total, count = np.zeros((p, p)), 0
    if y is None:
        pairs = [(x[i], x[j]) for i in range(len(x)) for j in range(i + 1, len(x))]
    else:
        pairs = [(a, b) for a in x for b in y]
    for a, b in pairs:
        d = b - a
        total += np.outer(d, d) / np.dot(d, d)
        count += 1
    return total, count


def kendall_datasets(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(40, 5))
    clusters = np.vstack(
        [rng.normal(size=(20, 3)) * 1e-3 + c for c in (1e4, -1e4, 5e3 + 1j * 0)]
    ).real
    return {
        "gaussian": base,
        "offset_1e6": base + 1e6,
        "offset_1e9_per_column": base + np.array([1e9, -1e9, 3e8, 0.0, 7.0]),
        "tight_clusters_far": clusters,
        "heavy_tails": rng.standard_t(1.5, size=(40, 4)),
        "scaled_tiny": base * 1e-6,
        "one_column": rng.normal(size=(30, 1)),
    }


def _no_compute(dsk, keys, **kwargs):
    raise RuntimeError("a dask computation was triggered")


@contextlib.contextmanager
def benchmark_module(name: str, module: str) -> Any:
    """``benchmarks/<name>.py`` imported as ``module`` for the block (then unregistered)."""
    import importlib.util
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(module, script)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[module] = bench
    try:
        spec.loader.exec_module(bench)
        yield bench
    finally:
        del sys.modules[module]


@contextlib.contextmanager
def raise_if_dask_computes():
    """Like xarray's helper: any dask compute inside the block raises."""
    with dask.config.set(scheduler=_no_compute):
        yield


def _one_pixel_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff")) + chunk(b"IEND", b""))


PLACEHOLDER_PNG = _one_pixel_png()


@contextlib.contextmanager
def figures_not_rendered():
    """Every figure is still built from its data, but never drawn: ``Figure.savefig`` writes a
    fixed one-pixel PNG and ``Figure.draw_without_rendering`` (label repelling) does nothing.

    For tests whose assertions never look at a figure's pixels (privacy, spend accounting);
    drawing is most of an end-to-end run's time. The plot and report tests draw for real.
    """
    from matplotlib.figure import Figure

    def savefig(self, fname, *args, **kwargs):
        if hasattr(fname, "write"):
            fname.write(PLACEHOLDER_PNG)
        else:
            Path(fname).write_bytes(PLACEHOLDER_PNG)

    saved = Figure.savefig, Figure.draw_without_rendering
    Figure.savefig, Figure.draw_without_rendering = savefig, lambda self: None
    try:
        yield
    finally:
        Figure.savefig, Figure.draw_without_rendering = saved


def literal_upper(x, q, eps, rng, lower=0.0, beta=1.01, max_steps=5000):
    """SPEC §5.5b written out step by step: the oracle."""
    n = len(x)
    t_noisy = q * n + rng.exponential(2.0 / eps)
    t = None
    for i in range(1, max_steps + 1):
        t = beta**i + lower - 1
        if np.sum(x < t) + rng.exponential(2.0 / eps) >= t_noisy:
            return t, False
    return t, True


def literal_quantile(x, q, eps, rng, beta=1.01, max_steps=5000):
    raw_pos, cap_pos = literal_upper(np.maximum(beta * x + beta - 1, 0), q, eps / 2, rng,
                                     beta=beta, max_steps=max_steps)
    raw_neg, cap_neg = literal_upper(np.maximum(-beta * x + beta - 1, 0), 1 - q, eps / 2, rng,
                                     beta=beta, max_steps=max_steps)
    k_pos = max(round(math.log(1 + raw_pos) / math.log(beta)) - 1, 0)
    k_neg = max(round(math.log(1 + raw_neg) / math.log(beta)) - 1, 0)
    if not cap_pos and k_pos > 0:
        return beta**k_pos - 1
    if not cap_neg and k_neg > 0:
        return -(beta**k_neg - 1)
    return 0.0


def example_results() -> dict[str, Any]:
    """One small fit of every result type (non-private references stored where an estimator
    can store them, two mechanisms where it has several), keyed by a short label. Tests that
    walk every result type check that these labels cover every registered ``kind``."""
    from dppca_dask import (
        clipped_control,
        dp_covariance,
        dp_loading,
        dp_pca,
        dp_score,
        dp_scree,
        pace_ggm_control,
        privacy_control,
    )

    x = np.random.default_rng(11).normal(size=(300, 4)) * [3.0, 2.0, 1.0, 0.5]
    groups = np.repeat(["a", "b"], 150)
    pc = privacy_control(eps=4, delta=1e-4)
    an = {"calibration": "analytic"}
    control = {"clipped": clipped_control(C_clip=40),
               "pmwm": {"a": 0, "b": 60, "trim_const": 5, "eta": 0.01}}
    return {
        "loading": dp_loading(x, privacy=pc, non_private=True, rng=1, **an),
        "scree": dp_scree(x, privacy=pc, k=2, method=["clipped", "pmwm"], control=control,
                          non_private=True, rng=2, **an),
        "score": dp_score(x, privacy=pc, bins=(4, 3), method=("add", "sparse"), group=groups,
                          non_private=True, rng=3, **an),
        "pca": dp_pca(x, privacy=pc, k=2, bins=4, scree_control=control["clipped"],
                      group=groups, non_private=True, rng=4, **an),
        "covariance": dp_covariance(x, preset="seed", rho=0.5, bounds=8.0, rng=5, report_clipping=True,
                                    control=pace_ggm_control(mean="measure")),
        # unseeded: a caller-seeded release is NOT PRIVATE (reproducible from the seed)
        "covariance_ssp": dp_covariance(x, rho=0.5, bounds=8.0, method="ssp"),
        "covariance_private": dp_covariance(x, rho=0.5, bounds=8.0, method="diagonal"),
    }


LOOPBACK_ROWS, LOOPBACK_BLOCK_ROWS = 12_000, 400
"""The store of the cluster tests (test_cluster.py, test_slurm.py): 30 row blocks, 12 Kendall
work units."""


def write_store(path: Path | str, x: np.ndarray, *, names: list[str] | None = None,
                chunk: int | None = None, labels: dict[str, np.ndarray] | None = None,
                array: str = "X") -> Path:
    """Write the tests' standard input: a Zarr store with ``x`` as ``array`` on (sample, variable).

    The one factory for a data store the tests run on (as `dppca-dask convert` writes one):
    ``names`` become the ``variable`` coordinate, ``chunk`` the rows per chunk (None: one chunk),
    ``labels`` extra per-sample variables (grouping columns; strings are stored as objects, as
    from pandas). An existing store at ``path`` is replaced. Tests of other layouts (raw arrays,
    missing chunks, Zarr v2, remote URLs) write those by hand on purpose. Returns ``path``.
    """
    import shutil

    import xarray as xr

    path = Path(path)
    shutil.rmtree(path, ignore_errors=True)
    variables: dict[str, Any] = {array: (("sample", "variable"), np.asarray(x))}
    for name, values in (labels or {}).items():
        values = np.asarray(values)
        variables[name] = (("sample",), values.astype(object) if values.dtype.kind in "US"
                           else values)
    coords = {"variable": np.array(names, dtype=object)} if names is not None else None
    ds = xr.Dataset(variables, coords=coords)
    if chunk is not None:
        ds = ds.chunk({"sample": chunk})
    ds.to_zarr(path, consolidated=False)
    return path


def write_loopback_data(path: Path) -> np.ndarray:
    """The cluster tests' 12 000 x 5 Zarr store (4000-row chunks); returns its values."""
    x = np.random.default_rng(11).normal(size=(LOOPBACK_ROWS, 5)) * [4.0, 2.0, 1.0, 1.0, 0.5] + 1e3
    write_store(path, x, names=list("abcde"), chunk=4000)
    return x


def loopback_config(base: Path, data: Path, name: str, cluster: dict) -> Path:
    """A seeded loading run config on ``cluster``, its output and ledger under ``base``."""
    import yaml

    cfg = {
        "input": {"path": str(data), "array": "X"},
        "task": "loading",
        "privacy": {"eps": 1.0, "delta": 1e-5},
        "loading": {"block_rows": LOOPBACK_BLOCK_ROWS},
        "cluster": cluster,
        "output": {"directory": str(base / name), "formats": ["zarr"]},
        "budget_ledger": {"path": str(base / f"{name}.ledger.sqlite")},
        "rng": 2024,
    }
    path = base / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path
