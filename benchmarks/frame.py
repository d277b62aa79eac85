"""The score plot's private frame: Durfee (the seed's) against the capped frame (issue 18 item 2).

The demo settings (``dppca-dask demo``: the SPEC 'gau' data, 5000 × 20 in five groups, dp_pca at
ε = 1, δ = 1e-5 in equal thirds, analytic calibration, tight sensitivity, grouped geometric
histograms on the default 8 × 8 grid). The exact spherical Kendall matrix is computed once; each
run then draws its own private directions from it with the loading mechanism (the same
``gaussian_symmetric_matrix`` release dp_pca makes), and runs only the score stage's frame and
histograms on those directions: the frame stage itself (:func:`dppca_dask.pca.frame.frame_stage`,
the code dp_pca runs, on the in-memory scores) and the grouped geometric histograms
(:func:`dppca_dask.pca.histograms.release_histograms`). Both frames see the same directions.

Per run and axis: ratio = private radius / the true 0.995 quantile of |s − median(s)|. Histogram
TV (mean over the five groups of ½ Σ |p̂ − p|):

* ``TV own grid``: against the observed proportions on the private frame's own grid (the
  histogram noise);
* ``TV ref grid``: the released histogram spread uniformly over its cells and integrated over
  the reference grid (the true median ± 1.2 × the true 0.995 quantile per axis, 8 × 8 bins, mass
  beyond it in the edge cells), against the observed proportions there: what a frame that is too
  wide (coarse cells) or too narrow (mass clamped into the edges) costs.

    python benchmarks/frame.py                   # the docs/performance.md table (1000 runs)
    python benchmarks/frame.py --runs 200 --seed 7
    python benchmarks/frame.py --shapes          # also: the capped frame on other score shapes
"""

from __future__ import annotations

import argparse
import time
import warnings

import dask
import dask.array as da
import numpy as np

from dppca_dask.graph.rounds import run
from dppca_dask.io.datasets import make_gau
from dppca_dask.pca.frame import FRAME_METHODS, Frame, frame_stage
from dppca_dask.pca.histograms import default_bins, frame_breaks, release_histograms
from dppca_dask.pca.loading import kendall_sensitivity, spherical_kendall
from dppca_dask.pca.postprocess import ordered_eigh
from dppca_dask.pca.score import FRAME_SHARE
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import gaussian_symmetric_matrix

EPS, DELTA = 1.0, 1e-5
METHODS = ("durfee", "capped", "ranged")
QUANTILE = 0.995


def private_directions(kendall: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """The first two private directions of one dp_pca run (loading third, analytic, tight)."""
    rel = gaussian_symmetric_matrix(
        kendall, sensitivity=kendall_sensitivity(n, bound="tight"),
        budget=PrivacyBudget(EPS / 3, DELTA / 3), calibration="analytic", rng=rng,
        component="loading")
    return ordered_eigh(rel.value)[1][:, :2]


def one_sided_overlap(src: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """M[i, j]: the share of source cell i inside reference cell j (beyond the reference edges:
    the edge cells, as the histograms clamp)."""
    lo = np.clip(src[:-1, None], ref[None, :-1], ref[None, 1:])
    hi = np.clip(src[1:, None], ref[None, :-1], ref[None, 1:])
    m = (hi - lo) / (src[1:] - src[:-1])[:, None]
    m[:, 0] += np.clip((ref[0] - src[:-1]) / (src[1:] - src[:-1]), 0.0, 1.0)
    m[:, -1] += np.clip((src[1:] - ref[-1]) / (src[1:] - src[:-1]), 0.0, 1.0)
    return m


def cell_counts(s: np.ndarray, codes: np.ndarray, groups: int, xb: np.ndarray,
                yb: np.ndarray) -> np.ndarray:
    """Per-group counts (group, m_y, m_x), R's cut(right=TRUE, include.lowest=TRUE), clamped."""
    jx = np.clip(np.searchsorted(xb, s[:, 0], side="left") - 1, 0, len(xb) - 2)
    jy = np.clip(np.searchsorted(yb, s[:, 1], side="left") - 1, 0, len(yb) - 2)
    flat = np.bincount((codes * (len(yb) - 1) + jy) * (len(xb) - 1) + jx,
                       minlength=groups * (len(xb) - 1) * (len(yb) - 1))
    return flat.reshape(groups, len(yb) - 1, len(xb) - 1)


def frame_of(method: str, scores: np.ndarray, rng: np.random.Generator) -> Frame:
    """The frame stage dp_pca runs, on in-memory scores (directions: the identity)."""
    x = da.from_array(scores, chunks=scores.shape)
    fr, _ = run(frame_stage(method, x, np.eye(2), n=scores.shape[0],
                            eps=FRAME_SHARE * EPS / 3, rng=rng))
    return fr


def one_run(method: str, scores: np.ndarray, codes: np.ndarray, groups: int, bins: int,
            ref: tuple[np.ndarray, np.ndarray], ref_prob: np.ndarray, true_q: np.ndarray,
            rng: np.random.Generator) -> tuple[np.ndarray, float, float]:
    """(ratios per axis, TV own grid, TV ref grid) of one frame + histogram release."""
    fr = frame_of(method, scores, rng)
    xb, yb = frame_breaks(fr, (bins, bins))
    counts = cell_counts(scores, codes, groups, xb, yb)
    sizes = counts.sum(axis=(1, 2))
    hist = release_histograms(counts, sizes, methods=("geometric",),
                              budget=PrivacyBudget((1 - FRAME_SHARE) * EPS / 3, 0.0),
                              calibration="analytic", rng=rng)
    prob = hist.probability[0]  # (group, m_y, m_x)
    own = 0.5 * np.abs(prob - counts / sizes[:, None, None]).sum(axis=(1, 2)).mean()
    mx, my = one_sided_overlap(xb, ref[0]), one_sided_overlap(yb, ref[1])
    mapped = np.einsum("yi,gyx,xj->gij", my, prob, mx)
    tv_ref = 0.5 * np.abs(mapped - ref_prob).sum(axis=(1, 2)).mean()
    return np.array(fr.radius) / true_q, float(own), float(tv_ref)


def demo_runs(runs: int, seed: int) -> dict[str, dict[str, np.ndarray]]:
    frame = make_gau(1000, rng=0)
    codes = frame["group"].factorize(sort=True)[0]
    x = frame.drop(columns="group").to_numpy()
    n = x.shape[0]
    groups = int(codes.max()) + 1
    bins = default_bins(n)
    kendall = np.asarray(spherical_kendall(x))
    out = {m: {"ratio": np.zeros((runs, 2)), "tv_own": np.zeros(runs), "tv_ref": np.zeros(runs)}
           for m in METHODS}
    for r, child in enumerate(np.random.SeedSequence(seed).spawn(runs)):
        streams = child.spawn(1 + len(METHODS))
        scores = x @ private_directions(kendall, n, np.random.default_rng(streams[0]))
        med = np.median(scores, axis=0)
        true_q = np.quantile(np.abs(scores - med), QUANTILE, axis=0)
        ref = tuple(np.linspace(med[a] - 1.2 * true_q[a], med[a] + 1.2 * true_q[a], bins + 1)
                    for a in range(2))
        ref_counts = cell_counts(scores, codes, groups, *ref)
        ref_prob = ref_counts / ref_counts.sum(axis=(1, 2))[:, None, None]
        for m, stream in zip(METHODS, streams[1:], strict=True):
            ratio, own, tv_ref = one_run(m, scores, codes, groups, bins, ref, ref_prob, true_q,
                                         np.random.default_rng(stream))
            out[m]["ratio"][r], out[m]["tv_own"][r], out[m]["tv_ref"][r] = ratio, own, tv_ref
    return out


SHAPES = {
    "gaussian": lambda g, n: g.normal(size=n),
    "uniform": lambda g, n: g.uniform(-1, 1, n),
    "laplace": lambda g, n: g.laplace(size=n),
    "t3": lambda g, n: g.standard_t(3, n),
    "two modes": lambda g, n: np.r_[g.normal(-3, 1, n // 2), g.normal(3, 1, n - n // 2)],
    "10 % wide": lambda g, n: np.r_[g.normal(0, 1, n - n // 10), g.normal(0, 5, n // 10)],
    "lognormal": lambda g, n: g.lognormal(0, 1, n),
    "exponential": lambda g, n: g.exponential(size=n),
}


def shape_runs(runs: int, seed: int, n: int = 5000) -> dict[str, np.ndarray]:
    """The capped and durfee frames' radius ratio on the x axis of other score shapes (y: a
    Gaussian), at the demo's frame ε; one data set per shape, ``runs`` frames each."""
    out = {}
    for k, (name, draw) in enumerate(SHAPES.items()):
        g = np.random.default_rng([seed, k])
        scores = np.column_stack([draw(g, n), g.normal(size=n)]) * 3.0 + 10.0
        true_q = np.quantile(np.abs(scores - np.median(scores, axis=0)), QUANTILE, axis=0)
        for m in METHODS:
            streams = np.random.SeedSequence([seed, k, METHODS.index(m)]).spawn(runs)
            out[f"{name}/{m}"] = np.array(
                [frame_of(m, scores, np.random.default_rng(s)).radius[0] / true_q[0]
                 for s in streams])
    return out


def summary(ratio: np.ndarray) -> str:
    inside = float(np.mean((ratio >= 0.5) & (ratio <= 3.0)))
    q = np.percentile(ratio, [0, 0.1, 1, 50, 99, 99.9, 100])
    return " | ".join(f"{v:.3g}" for v in q) + f" | {100 * inside:.1f} %"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--shapes", action="store_true", help="also other score shapes (200 runs)")
    args = ap.parse_args(argv)
    assert set(METHODS) <= set(FRAME_METHODS)
    warnings.simplefilter("ignore", UserWarning)  # Durfee's max_steps warning
    start = time.perf_counter()
    with dask.config.set(scheduler="synchronous"):
        res = demo_runs(args.runs, args.seed)
    print(f"Demo settings, {args.runs} runs (seed {args.seed}): radius / true {QUANTILE} "
          "quantile of |s - median|\n")
    print("| frame | axis | min | 0.1 % | 1 % | median | 99 % | 99.9 % | max | in [0.5, 3] |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m in METHODS:
        for a, axis in enumerate(("PC1", "PC2")):
            print(f"| {m} | {axis} | {summary(res[m]['ratio'][:, a])} |")
    print("\n| frame | both axes in [0.5, 3] | TV own grid: median (mean) | "
          "TV ref grid: median (mean) | TV ref grid: 99 % |")
    print("|---|---:|---:|---:|---:|")
    for m in METHODS:
        r = res[m]["ratio"]
        both = float(np.mean(((r >= 0.5) & (r <= 3.0)).all(axis=1)))
        own, ref = res[m]["tv_own"], res[m]["tv_ref"]
        print(f"| {m} | {100 * both:.1f} % | {np.median(own):.4f} ({own.mean():.4f}) | "
              f"{np.median(ref):.4f} ({ref.mean():.4f}) | {np.percentile(ref, 99):.4f} |")
    if args.shapes:
        with dask.config.set(scheduler="synchronous"):
            shapes = shape_runs(200, args.seed)
        print("\nOther shapes (x axis, n = 5000, 200 frames each)\n")
        print("| shape / frame | min | 0.1 % | 1 % | median | 99 % | 99.9 % | max | in [0.5, 3] |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, ratio in shapes.items():
            print(f"| {name} | {summary(ratio)} |")
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
