"""Held-out kinds of data (issue 30 item 5): what the frame and the Kendall pass do on data of
kinds the other benchmarks and the tests do not contain.

The kinds are generated from a seed the tests do not use (``--seed``, default 20261202), from
one spiked covariance Σ (p variables, eigenvalues 10, 6, 4, 2, then 1) in a random basis:

* ``gaussian``: N(0, Σ) -- the reference every ratio is taken against;
* ``x 1e-6``, ``x 1e6``: the same rows in other units;
* ``offset 1e6 sd``: the same rows shifted by 10⁶ times their spread in every variable;
* ``t1.5``, ``t2``, ``t3``, ``t5``: multivariate t with the same scatter Σ;
* ``point mass``: a t(1) (Cauchy) bulk with 20 % of the rows at one point (jittered by 1e-6:
  the spherical Kendall matrix is undefined for duplicates, which dp_loading refuses);
* ``4/16/64 clusters``: equal clusters, centres 10 spreads apart, within-cluster scatter Σ/100;
* ``near-singular``: N(0, Σ') with the eigenvalues of Σ' from 1 down to 1e-8;

and, for the frame table only (:data:`FRAME_KINDS`; independent coordinates scaled by √Σ's
eigenvalues in the same random basis, so the first scores have these marginals):

* ``t1``: multivariate t(1) (Cauchy); ``t1 coords``: independent Cauchy coordinates;
* ``laplace``, ``uniform``, ``lognormal`` (skewed), ``exponential`` (skewed, light);
* ``two point masses``: 30 % and 30 % of the rows at two points (jittered by 1e-6), the rest
  Gaussian;
* ``t2 x 1e-6 + 1e6 sd``: t(2) rows shifted by 10⁶ spreads, then in units of 1e-6.

Two measurements, each in one run of this script:

**Frame** (``--frame``): per kind and run, private directions as dp_pca draws them (the exact
Kendall matrix once, then the loading Gaussian at ε/3, analytic, tight), the scores on the
first two, the frame stage dp_pca runs (:func:`dppca_dask.pca.frame.frame_stage`) at dp_pca's
frame ε (:data:`~dppca_dask.pca.score.FRAME_SHARE` of ε/3; ε = 1, the demo's, unless ``--eps``),
and per axis the ratio of the private radius to the true 0.995 quantile of |s − median(s)|. The
table gives the share of runs with both ratios in [0.5, 3] and the median and largest ratio.
``--frames ranged`` runs one frame only; ``--n`` and ``--eps`` set n·ε_frame.

**Grids** (``--grids``): the other releases whose mechanisms search public grids, on the
Gaussian kind in units 2^-20 and 2^20 (lattice scalings: a grid of powers of 2 moves by whole
steps) and shifted by 10⁶ spreads, with every user-given scale parameter scaled alike (C_clip,
pmwm's a and b by the square of the units, Huber's dyadic m₂ range by its fourth power): dp_scree
per method (k = 3 on the true directions, ε = 1; the private centre and a public one, the
data's mean), and dp_covariance (ρ = 0.1, the private row radius). Median over ``--runs`` of the
relative error of the first scree value and of the covariance (Frobenius); a release
equivariant to the change gives the Gaussian row's numbers.

**Kendall** (``--kendall``): one full :func:`~dppca_dask.pca.loading.spherical_kendall` pass per
kind (the tiled fast kernel through the Dask graph, not one tile), best of ``--repeat``, and its
speed relative to the Gaussian kind's, measured in the same run (interleaved).

    python benchmarks/heldout.py                  # both tables (about 10 minutes on 2 cores)
    python benchmarks/heldout.py --quick          # fewer runs and rows (about 2 minutes)
    python benchmarks/heldout.py --frame --runs 100
    python benchmarks/heldout.py --frame --runs 100 --frames ranged --eps 6
    python benchmarks/heldout.py --grids --runs 20
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable

import dask
import dask.array as da
import numpy as np

from dppca_dask.graph.rounds import run
from dppca_dask.pca.frame import frame_stage
from dppca_dask.pca.loading import kendall_sensitivity, spherical_kendall
from dppca_dask.pca.postprocess import ordered_eigh
from dppca_dask.pca.score import FRAME_SHARE
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import gaussian_symmetric_matrix

EPS, DELTA = 1.0, 1e-5
QUANTILE = 0.995
SEED = 20261202
FRAMES = ("ranged", "durfee", "capped")


def _basis(p: int, g: np.random.Generator) -> np.ndarray:
    return np.linalg.qr(g.normal(size=(p, p)))[0]


def _spikes(p: int) -> np.ndarray:
    return np.r_[10.0, 6.0, 4.0, 2.0, np.ones(max(p - 4, 0))][:p]


def _gaussian(n: int, p: int, g: np.random.Generator, values: np.ndarray | None = None
              ) -> np.ndarray:
    values = _spikes(p) if values is None else values
    return (g.normal(size=(n, p)) * np.sqrt(values)) @ _basis(p, g).T


def _t(df: float) -> Callable[[int, int, np.random.Generator], np.ndarray]:
    def make(n: int, p: int, g: np.random.Generator) -> np.ndarray:
        w = np.sqrt(df / g.chisquare(df, size=(n, 1)))
        return _gaussian(n, p, g) * w
    return make


def _point_mass(n: int, p: int, g: np.random.Generator) -> np.ndarray:
    x = _t(1.0)(n, p, g)
    at = g.random(n) < 0.2  # jittered by 1e-6: (near-)duplicates are refused (no direction)
    x[at] = x[0] + 1e-6 * g.normal(size=(int(at.sum()), p))
    return x


def _clusters(k: int) -> Callable[[int, int, np.random.Generator], np.ndarray]:
    def make(n: int, p: int, g: np.random.Generator) -> np.ndarray:
        centres = g.normal(size=(k, p)) * 10.0 * np.sqrt(_spikes(p).mean())
        return centres[g.integers(0, k, n)] + _gaussian(n, p, g) / 10.0
    return make


def _independent(draw: Callable[[np.random.Generator, tuple[int, int]], np.ndarray]
                 ) -> Callable[[int, int, np.random.Generator], np.ndarray]:
    def make(n: int, p: int, g: np.random.Generator) -> np.ndarray:
        return (draw(g, (n, p)) * np.sqrt(_spikes(p))) @ _basis(p, g).T
    return make


def _two_point_masses(n: int, p: int, g: np.random.Generator) -> np.ndarray:
    x = _gaussian(n, p, g)
    u = g.random(n)
    for at, point in ((u < 0.3, x[0]), (u > 0.7, 3.0 * x[1])):  # jittered: see _point_mass
        x[at] = point + 1e-6 * g.normal(size=(int(at.sum()), p))
    return x


KINDS: dict[str, Callable[[int, int, np.random.Generator], np.ndarray]] = {
    "gaussian": _gaussian,
    "x 1e-6": lambda n, p, g: _gaussian(n, p, g) * 1e-6,
    "x 1e6": lambda n, p, g: _gaussian(n, p, g) * 1e6,
    "offset 1e6 sd": lambda n, p, g: _gaussian(n, p, g) + 1e6 * np.sqrt(_spikes(p).mean()),
    "t1.5": _t(1.5), "t2": _t(2.0), "t3": _t(3.0), "t5": _t(5.0),
    "point mass": _point_mass,
    "4 clusters": _clusters(4), "16 clusters": _clusters(16), "64 clusters": _clusters(64),
    "near-singular": lambda n, p, g: _gaussian(n, p, g, np.logspace(0, -8, p)),
}
EXTRA_KINDS: dict[str, Callable[[int, int, np.random.Generator], np.ndarray]] = {
    "t1": _t(1.0),
    "t1 coords": _independent(lambda g, s: g.standard_t(1.0, size=s)),
    "laplace": _independent(lambda g, s: g.laplace(size=s) / np.sqrt(2.0)),
    "uniform": _independent(lambda g, s: (g.random(s) - 0.5) * np.sqrt(12.0)),
    "lognormal": _independent(lambda g, s: g.lognormal(size=s)),
    "exponential": _independent(lambda g, s: g.exponential(size=s)),
    "two point masses": _two_point_masses,
    "t2 x 1e-6 + 1e6 sd": lambda n, p, g: (_t(2.0)(n, p, g)
                                           + 1e6 * np.sqrt(_spikes(p).mean())) * 1e-6,
}
FRAME_KINDS = {**KINDS, **EXTRA_KINDS}
"""The frame table's kinds: the Kendall table's and kinds only the frame needs."""


def kind_data(name: str, n: int, p: int, seed: int) -> np.ndarray:
    """The rows of kind ``name`` (its own stream of ``seed``: the kinds do not share draws)."""
    index = (list(KINDS).index(name) if name in KINDS
             else 100 + list(EXTRA_KINDS).index(name))
    return FRAME_KINDS[name](n, p, np.random.default_rng([seed, index]))


def _directions(kendall: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    rel = gaussian_symmetric_matrix(
        kendall, sensitivity=kendall_sensitivity(n, bound="tight"),
        budget=PrivacyBudget(EPS / 3, DELTA / 3), calibration="analytic", rng=rng,
        component="loading")
    return ordered_eigh(rel.value)[1][:, :2]


def frame_table(n: int, p: int, runs: int, seed: int, eps: float = EPS,
                frames: tuple[str, ...] = FRAMES) -> list[str]:
    frame_eps = FRAME_SHARE * eps / 3
    rows = [f"Frame on held-out kinds: n = {n}, p = {p}, {runs} runs per kind, frame eps = "
            f"{frame_eps:.4g} (dp_pca at eps = {eps:g}), n * frame eps = {n * frame_eps:.0f}; "
            f"ratio = private radius / true {QUANTILE} quantile of |s - median|",
            f"{'kind':<19}" + "".join(f"{m + ' in [0.5,3]':>19}{'median':>8}{'min':>8}"
                                      f"{'max':>10}" for m in frames)]
    for name in FRAME_KINDS:
        x = kind_data(name, n, p, seed)
        kendall = np.asarray(spherical_kendall(x))
        ratios = {m: np.zeros((runs, 2)) for m in frames}
        for r, child in enumerate(np.random.SeedSequence([seed, 1]).spawn(runs)):
            streams = child.spawn(1 + len(FRAMES))  # one per frame of FRAMES, used or not
            scores = x @ _directions(kendall, n, np.random.default_rng(streams[0]))
            true_q = np.quantile(np.abs(scores - np.median(scores, axis=0)), QUANTILE, axis=0)
            xs = da.from_array(scores, chunks=scores.shape)
            for m, stream in zip(FRAMES, streams[1:], strict=True):
                if m not in frames:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    frame, _ = run(frame_stage(m, xs, np.eye(2), n=n, eps=frame_eps,
                                               rng=np.random.default_rng(stream)))
                ratios[m][r] = np.array(frame.radius) / true_q
        cells = ""
        for m in frames:
            ok = ((ratios[m] >= 0.5) & (ratios[m] <= 3.0)).all(axis=1).mean()
            cells += (f"{100 * ok:>18.1f}%{np.median(ratios[m]):>8.3g}"
                      f"{ratios[m].min():>8.3g}{ratios[m].max():>10.3g}")
        rows.append(f"{name:<19}{cells}")
    return rows


GRID_SHIFTS = {"gaussian": (0, 0.0), "x 2^-20": (-20, 0.0), "x 2^20": (20, 0.0),
               "offset 1e6 sd": (0, 1e6)}
"""The grid table's kinds: (log2 of the units, offset in spreads) applied to the Gaussian kind."""


def grid_table(n: int, p: int, runs: int, seed: int) -> list[str]:
    from dppca_dask import (
        clipped_control,
        dp_covariance,
        dp_scree,
        huber_control,
        pmwm_control,
        privacy_control,
    )

    base = kind_data("gaussian", n, p, seed)
    k = 3
    directions = np.linalg.eigh(np.cov(base.T))[1][:, ::-1][:, :k]
    spread = float(np.sqrt(_spikes(p).mean()))
    privacy = privacy_control(eps=1.0, delta=1e-5)
    columns = [f"{m} ({c})" for m in ("clipped", "pmwm", "huber") for c in ("private", "mean")]
    rows = [f"Public grids on the gaussian kind in other units and shifted: n = {n}, p = {p}, "
            f"{runs} runs; median relative error of the first scree value (dp_scree, k = {k}, "
            "eps = 1; centre private or the data's mean) and of the covariance (dp_covariance, "
            "rho = 0.1, private radius)",
            f"{'kind':<15}" + "".join(f"{c:>17}" for c in columns) + f"{'covariance':>12}"]
    for name, (units, shift) in GRID_SHIFTS.items():
        x = (base + shift * spread) * 2.0 ** units
        s2 = 4.0 ** units
        controls = {"clipped": clipped_control(C_clip=40 * s2),
                    "pmwm": pmwm_control(a=0, b=200 * s2, trim_const=10, eta=0.01),
                    "huber": huber_control(k_min_m2=-10 + 4 * units, k_max_m2=14 + 4 * units,
                                           m2_frac=0.25)}
        cells = ""
        for method, control in controls.items():
            for center in ("private", "mean"):
                errors = []
                for r in range(runs):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        fit = dp_scree(x, privacy=privacy, k=k, method=method, control=control,
                                       V_dp=directions, non_private=True, rng=r,
                                       center="private" if center == "private"
                                       else x.mean(axis=0))
                    truth = fit.nonprivate["scree"].values[0]
                    errors.append(abs(float(fit.scree_raw.values[0, 0]) - truth) / truth)
                cells += f"{np.median(errors):>17.3g}"
        errors = []
        for r in range(runs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sigma = dp_covariance(x, rho=0.1, rng=r).covariance.values
            truth = x.T @ x / n
            errors.append(float(np.linalg.norm(sigma - truth) / np.linalg.norm(truth)))
        rows.append(f"{name:<15}{cells}{np.median(errors):>12.3g}")
    return rows


def kendall_table(n: int, p: int, repeat: int, seed: int) -> list[str]:
    data = {name: kind_data(name, n, p, seed) for name in KINDS}
    best = dict.fromkeys(KINDS, np.inf)
    spherical_kendall(data["gaussian"])  # compile and warm up first (not timed)
    for _ in range(repeat):  # interleaved: each repeat times every kind once
        for name, x in data.items():
            start = time.perf_counter()
            spherical_kendall(x)
            best[name] = min(best[name], time.perf_counter() - start)
    base = best["gaussian"]
    rows = [f"Full spherical_kendall pass on held-out kinds: n = {n}, p = {p}, best of {repeat}, "
            "speed relative to the gaussian kind (one run)",
            f"{'kind':<15}{'seconds':>10}{'speed':>8}"]
    rows += [f"{name:<15}{best[name]:>10.3f}{base / best[name]:>7.2f}x" for name in KINDS]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frame", action="store_true", help="the frame table only")
    parser.add_argument("--kendall", action="store_true", help="the Kendall table only")
    parser.add_argument("--grids", action="store_true", help="the public-grid table only")
    parser.add_argument("--quick", action="store_true", help="fewer runs and rows")
    parser.add_argument("--runs", type=int, default=None, help="frame runs per kind")
    parser.add_argument("--repeat", type=int, default=3, help="Kendall repeats per kind")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--n", type=int, default=None, help="frame rows (default 5000)")
    parser.add_argument("--eps", type=float, default=EPS,
                        help="dp_pca's eps for the frame (default 1, the demo's)")
    parser.add_argument("--frames", default=",".join(FRAMES),
                        help=f"frames to run, comma-separated (default {','.join(FRAMES)})")
    args = parser.parse_args()
    both = not (args.frame or args.kendall or args.grids)
    runs = args.runs or (10 if args.quick else 40)
    dask.config.set(scheduler="threads")
    if args.frame or both:
        n = args.n or (2000 if args.quick else 5000)
        frames = tuple(m for m in FRAMES if m in args.frames.split(","))
        print("\n".join(frame_table(n, 20, runs, args.seed, args.eps, frames)), flush=True)
    if args.grids:
        print("\n".join(grid_table(args.n or 5000, 20, args.runs or 10, args.seed)), flush=True)
    if args.kendall or both:
        n = 2000 if args.quick else 4000
        print("\n".join(kendall_table(n, 50, 2 if args.quick else args.repeat, args.seed)))


if __name__ == "__main__":
    main()
