"""The exact samplers' cost per draw as a multiple of NumPy's standard normal (issue 31, item 3).

For the discrete Gaussian at s² = 1, 2^20, 2^40, 2^62, 2^82, 2^120 (s² in grid units: the
loading releases' s² is ~2^60-2^92) and the discrete Laplace at b ≈ s, batches of 1, 20 100 (a
p = 200 symmetric matrix) and 10^6 values, with a seeded NumPy Generator (PCG64) and with the
default CSPRNG (``rng=None``): time per value / time per value of
``numpy.random.default_rng().standard_normal(size)``: ``--reps`` passes over all the cells, each
timing the sampler and then the normal repeated over as long a span (a busy machine preempts
long spans more than short ones); a cell's ratio is the median of its passes' ratios (the
development machine's load moved between 2 and 10 during runs: a best-of-N on either side
alone then flatters or penalises the sampler at random). ``--before DIR`` runs the same measurement on the package in DIR (a checkout of an
earlier commit, e.g. ``git worktree add /tmp/before 41d2c6c``) in a subprocess during the same
run and prints its ratios beside them; its Python-int paths are slow, so a cell whose call takes
over 2 s is timed in one pass only, and its 10^6 batches at s² ≥ 2^62 or b ≥ 2^31 are timed on 10^5 values
(marked †). Then single-value releases (``gaussian_release``, ``laplace_release``) in µs.

Run: python benchmarks/exact_noise.py [--reps 5] [--before DIR] [--quick (a smoke run)]
(about a minute; with --before /path/to/main@41d2c6c about 10 minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

GAUSS = [("gaussian", f"s²=2^{e}", Fraction(2**e)) for e in (0, 20, 40, 62, 82, 120)]
LAPLACE = [("laplace", f"b=2^{e}", Fraction(2**e)) for e in (0, 10, 20, 31, 41, 60)]
SIZES = [1, 20100, 10**6]
GENERATORS = ["pcg64", "csprng"]
SLOW_CALL = 2.0  # seconds: a cell slower than this is timed once
BIG = {"s²=2^62", "s²=2^82", "s²=2^120", "b=2^31", "b=2^41", "b=2^60"}


def _seconds(fn: Callable[[], Any], inner: int) -> float:
    t = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t) / inner


def measure(reps: int, quick: bool, before: bool) -> dict[str, Any]:
    """Ratios for every (sampler, scale, size, generator) and the single releases' µs.

    ``reps`` passes over all the cells, each timing the sampler and the normal of its size in
    turn; a cell keeps its best time, the normal its best of the run, so every cell's best
    comes from the quietest of passes spread over the whole run."""
    from dppca_dask.privacy.budget import PrivacyBudget
    from dppca_dask.privacy.exact_noise import discrete_gaussian, discrete_laplace
    from dppca_dask.privacy.mechanisms import gaussian_release, laplace_release
    from dppca_dask.privacy.rng import as_rng

    samplers = {"gaussian": discrete_gaussian, "laplace": discrete_laplace}
    sizes = [1, 1000, 10**4] if quick else SIZES
    numpy_gen = np.random.default_rng(1)
    normal_gen = np.random.default_rng(2)
    csprng = as_rng(None).generator
    discrete_gaussian(numpy_gen, Fraction(9), 10)  # compile / load the kernels
    jobs = []
    for kind, label, scale in GAUSS + LAPLACE:
        for size in sizes:
            n = 10**5 if before and size == 10**6 and label in BIG else size
            for name in GENERATORS:
                gen = numpy_gen if name == "pcg64" else csprng
                samplers[kind](gen, scale, 1)
                jobs.append((f"{kind}|{label}|{size}|{name}", n,
                             lambda s=samplers[kind], g=gen, sc=scale, k=n: s(g, sc, k)))
    cells: dict[str, float] = {}
    ratios: dict[str, list[float]] = {}
    normals: dict[int, float] = {}
    for _ in range(reps):
        for key, n, draw in jobs:
            if cells.get(key, 0.0) * n > SLOW_CALL:  # a slow cell is timed in one pass only
                continue
            inner = 200 if n == 1 else 1
            d = _seconds(draw, inner)
            # the normal repeated over as long a time as the draw: a busy machine preempts a
            # 10 ms call less often than a 200 ms one, so equal spans are what compare
            unit = normals.get(n, _seconds(lambda k=n: normal_gen.standard_normal(k), 1))
            calls = max(1, min(round(d * inner / unit), 100_000))
            nrm = _seconds(lambda k=n: normal_gen.standard_normal(k), calls) / n
            ratios.setdefault(key, []).append((d / n) / nrm)
            normals[n] = min(normals.get(n, float("inf")), nrm * n)
            if d > SLOW_CALL:
                cells[key] = d / n  # marks the cell as timed
    for key, _, _ in jobs:
        cells[key] = float(np.median(ratios[key]))
    normals = {n: t / n for n, t in normals.items()}
    budget = PrivacyBudget(1.0, 1e-6)
    releases: dict[str, float] = {}
    for name in GENERATORS:
        def gauss(name: str = name) -> Any:  # a fresh generator, as a public call makes one
            rng = np.random.default_rng(3) if name == "pcg64" else as_rng(None).generator
            return gaussian_release(0.0, sensitivity=1.0, budget=budget, calibration="analytic",
                                    rng=rng, component="t")

        def lap(name: str = name) -> Any:
            rng = np.random.default_rng(3) if name == "pcg64" else as_rng(None).generator
            return laplace_release(np.zeros(1), sensitivity=1.0, eps=1.0, rng=rng,
                                   component="t")

        for label, fn in (("gaussian_release", gauss), ("laplace_release", lap)):
            fn()
            releases[f"{label}|{name}"] = min(_seconds(fn, 50) for _ in range(reps)) * 1e6
    return {"cells": cells, "normals": {str(k): v for k, v in normals.items()},
            "releases": releases, "sizes": sizes}


def _before(directory: str, reps: int, quick: bool) -> dict[str, Any]:
    code = ("import sys, json; sys.path.insert(0, sys.argv[1]); sys.argv[1:2] = [];"
            "import runpy; m = runpy.run_path(sys.argv[1], run_name='child');"
            "print(json.dumps(m['measure'](int(sys.argv[2]), sys.argv[3] == '1', True)))")
    out = subprocess.run([sys.executable, "-c", code, directory, __file__, str(reps),
                          "1" if quick else "0"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ratio(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def report(now: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    sizes = now["sizes"]
    head = " | ".join(f"{g} {s:,}" for g in ("PCG64", "CSPRNG") for s in sizes)
    lines = [f"| sampler | scale | {head} |", "|---|---|" + "---:|" * (2 * len(sizes))]
    for kind, label, _ in GAUSS + LAPLACE:
        row = []
        for g in GENERATORS:
            for s in sizes:
                key = f"{kind}|{label}|{s}|{g}"
                cell = _ratio(now["cells"][key])
                if before is not None:
                    dagger = "†" if s == 10**6 and label in BIG else ""
                    cell += f" ({_ratio(before['cells'].get(key))}{dagger})"
                row.append(cell)
        lines.append(f"| {kind} | {label} | " + " | ".join(row) + " |")
    lines.append("")
    lines.append("NumPy standard_normal, ns per value: " + ", ".join(
        f"{int(k):,}: {v * 1e9:.1f}" for k, v in now["normals"].items()))
    for key, us in now["releases"].items():
        release, gen = key.split("|")
        was = f" (before {before['releases'][key]:.0f} µs)" if before is not None else ""
        lines.append(f"single-value {release}, {gen}: {us:.0f} µs{was}")
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--before", help="a checkout of an earlier commit, measured alike")
    parser.add_argument("--quick", action="store_true", help="a smoke run: batches of 1, 10^3, 10^4, 2 passes")
    args = parser.parse_args(argv)
    reps = 2 if args.quick else args.reps
    load = os.getloadavg()[0]
    before = _before(str(Path(args.before).resolve()), reps, args.quick) if args.before else None
    now = measure(reps, args.quick, False)
    lines = report(now, before)
    lines.append(f"load average (1 min) at the start and the end: {load:.1f}, "
                 f"{os.getloadavg()[0]:.1f}")
    print(f"cost per value / NumPy standard_normal's (median of {reps} paired timings)"
          + ("; (before)" if before else ""))
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
