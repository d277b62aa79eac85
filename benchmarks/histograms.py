"""Score histograms at equal ε: total-variation distance of add, sparse and geometric (issue 18).

For each data set (2-D scores: Gaussian N(0, diag(9, 1)) and heavy-tailed t₃ × (3, 1)), n and
histogram ε: bin the n points on the default grid (round((n/ln n)^{1/3}) bins per axis, the
dp_score rule) over a fixed frame (centre 0, radius the true 0.995 quantile of |score| per axis,
inflated by 0.2 as dp_score does; the same frame for every method, so only the histogram
mechanism differs), release the cell counts with each mechanism at the same ε (δ = 1e-5 where
the mechanism uses one) and measure TV = ½ Σ_k |p̂_k − c_k/n| between the released normalised
histogram and the true one. A release with no mass (all zero after noise) counts as TV = 1.

* ``add``: :func:`~dppca_dask.privacy.mechanisms.gaussian_histogram` (exact discrete Gaussian,
  L2 sensitivity √2) with analytic calibration, the stronger baseline, and ``add (cl.)`` with the
  classical calibration (dp_score's Python default);
* ``sparse``: :func:`~dppca_dask.privacy.mechanisms.stability_histogram` (discrete Laplace 2/ε
  and a δ threshold);
* ``geometric``: :func:`~dppca_dask.privacy.mechanisms.geometric_histogram` (two-sided
  geometric 2/ε, pure ε: δ unused) as dp_score releases it: the noisy counts projected onto
  non-negative counts summing to the public n; ``geo (clip)``: the same noise with negative
  counts clipped to 0 instead (the post-processing before the projection).

    python benchmarks/histograms.py                 # the table in docs/guide/score.md (about a minute)
    python benchmarks/histograms.py --reps 20 --n 1000,5000 --eps 0.5

Prints a Markdown table: median TV over ``--reps`` repetitions (``--seed``: each data set,
method and repetition gets its own stream).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import numpy as np

from dppca_dask.pca.histograms import default_bins
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import (
    gaussian_histogram,
    geometric_histogram,
    stability_histogram,
)

DELTA = 1e-5
METHODS = ("add", "add_classical", "sparse", "geometric_clip", "geometric")
DATA: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "gaussian": lambda rng, n: rng.normal(size=(n, 2)) * [3.0, 1.0],
    "t3": lambda rng, n: rng.standard_t(3, size=(n, 2)) * [3.0, 1.0],
}


def true_counts(x: np.ndarray) -> np.ndarray:
    """Cell counts on the default grid over the fixed frame (points outside: edge bins)."""
    n = x.shape[0]
    m = default_bins(n)
    radius = np.quantile(np.abs(x), 0.995, axis=0) * 1.2
    idx = [np.clip(np.searchsorted(np.linspace(-r, r, m + 1), x[:, a], side="left"), 1, m) - 1
           for a, r in enumerate(radius)]
    counts = np.zeros((m, m), dtype=np.int64)
    np.add.at(counts, (idx[1], idx[0]), 1)
    return counts


def release(method: str, counts: np.ndarray, eps: float, rng: np.random.Generator
            ) -> np.ndarray:
    """The released normalised histogram (zeros when nothing survives)."""
    n = int(counts.sum())
    budget = PrivacyBudget(eps, DELTA)
    if method.startswith("add"):
        calibration = "classical" if method == "add_classical" else "analytic"
        value = gaussian_histogram(counts, budget=budget, calibration=calibration, rng=rng,
                                   component="bench").value
    elif method == "sparse":
        value = stability_histogram(counts, n=n, budget=budget, rng=rng,
                                    component="bench").value
    else:
        total = None if method == "geometric_clip" else n
        value = geometric_histogram(counts, eps=eps, rng=rng, component="bench",
                                    total=total).value
    mass = float(value.sum())
    return value / mass if mass > 0 else np.zeros_like(value, dtype=np.float64)


def tv(released: np.ndarray, counts: np.ndarray) -> float:
    if not released.sum() > 0:
        return 1.0
    return 0.5 * float(np.abs(released - counts / counts.sum()).sum())


def run(ns: Sequence[int], epss: Sequence[float], reps: int, seed: int) -> list[dict]:
    rows = []
    for d_i, (name, draw) in enumerate(DATA.items()):
        for n in ns:
            counts = true_counts(draw(np.random.default_rng([seed, d_i, n]), n))
            for e_i, eps in enumerate(epss):
                row: dict = {"data": name, "n": n, "bins": counts.shape[0], "eps": eps}
                for method in METHODS:  # both geometric columns: the same noise draws
                    m_i = METHODS.index("geometric" if method == "geometric_clip" else method)
                    values = [tv(release(method, counts, eps,
                                         np.random.default_rng([seed, d_i, n, e_i, m_i, r])),
                                 counts) for r in range(reps)]
                    row[method] = float(np.median(values))
                rows.append(row)
    return rows


def table(rows: list[dict], reps: int) -> str:
    lines = [f"Median TV distance to the true normalised histogram over {reps} repetitions "
             f"(δ = {DELTA:g} for add and sparse; geometric is pure ε); add: analytic "
             "calibration, add (cl.): classical; geo (clip): geometric noise with negatives "
             "clipped instead of projected; last columns: geometric / add (analytic), "
             "geometric / add (classical), geometric / sparse.", "",
             "| data | n | bins | ε | add | add (cl.) | sparse | geo (clip) | geometric | "
             "geo/add | geo/add (cl.) | geo/sparse |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['data']} | {r['n']} | {r['bins']}×{r['bins']} | {r['eps']:g} | "
            f"{r['add']:.4f} | {r['add_classical']:.4f} | {r['sparse']:.4f} | "
            f"{r['geometric_clip']:.4f} | {r['geometric']:.4f} | {r['geometric'] / r['add']:.2f} | "
            f"{r['geometric'] / r['add_classical']:.2f} | {r['geometric'] / r['sparse']:.2f} |")
    lines.append("")
    for base, label in (("add", "add (analytic)"), ("add_classical", "add (classical)"),
                        ("sparse", "sparse"), ("geometric_clip", "geo (clip)")):
        ratios = np.array([r["geometric"] / r[base] for r in rows])
        lines.append(f"geometric / {label}: median {np.median(ratios):.2f}, range "
                     f"{ratios.min():.2f}-{ratios.max():.2f} over {len(rows)} settings")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="1000,5000,20000")
    parser.add_argument("--eps", default="0.1,0.5,1,2")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = run([int(v) for v in args.n.split(",")], [float(v) for v in args.eps.split(",")],
               args.reps, args.seed)
    print(table(rows, args.reps))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return rows


if __name__ == "__main__":
    main()
