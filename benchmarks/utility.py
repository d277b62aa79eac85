"""Utility of the package's recommended settings against its seed-exact settings (issue 18 item 5).

``python benchmarks/utility.py`` prints one table per part and writes them, with the settings and
the command, to ``benchmarks/results/utility.md`` (``--out``). Default size (n = 5000, p = 20,
ε ∈ {0.5, 1, 4}, 40 repetitions): 402 s on 2 cores shared with other work; ``--quick`` is a
smoke run.

Settings compared at equal privacy (total ε = ``--eps``, δ = 1e-5, replace-one):

* **seed-exact**: ``dp_pca(calibration="classical", sensitivity="seed", score_method="add")``
  (the R package's choices) and ``dp_covariance(method="pace_ggm", clip="box", bounds=B)``;
* **recommended**: ``dp_pca(calibration="analytic", sensitivity="tight",
  score_method="geometric")`` and ``dp_covariance(method="auto", clip="row", radius=R)``
  (row-clipped SSP plus shrinkage, docs/design/covariance_sensitivity.md); the covariance table
  also shows plain row-clipped SSP, ``method="ssp", clip="row"``.

Both ``dp_pca`` settings use the same frame (``"durfee"``, the seed's, so that the histogram
columns compare the noise alone; the frames are compared in benchmarks/frame.py), the private
centre and the clipped scree method with the public C_clip = 4·λ₁.

Data (n = ``--n`` rows (5000), p = 20, seeded generators; the population Σ = V diag(λ) Vᵀ with
λ = (10, 5, 2, 1, …, 1) and a random rotation V is the estimand of every part):

* ``gaussian``: N(0, Σ);
* ``t3``: multivariate t with 3 degrees of freedom and scale Σ/3 (covariance Σ; heavy tails);
* ``contaminated``: N(0, Σ) with 1 % of the rows replaced by outliers at 15·√λ₁ along one random
  unit vector (plus N(0, I) jitter); the estimand stays the clean Σ.

Public constants (from the generator's parameters, never from the data): C_clip = 4λ₁ = 40, box
bound B = 3√λ₁, row radius R = 1.5·√(tr Σ).

Errors (median and interquartile range over the repetitions; each repetition draws a new
dataset and new noise):

* directions: ‖sin Θ(V̂_k, V_k)‖₂, the sine of the largest principal angle between the released
  k-dimensional subspace and Σ's top k eigenvectors (k = 3);
* PVE/scree: the relative error |λ̂_ℓ − λ_ℓ|/λ_ℓ of the private scree values (mean over the k
  components) and of the private PVE against λ_ℓ/Σ_{j≤k} λ_j;
* histograms: the total-variation distance ½Σ|p̂ − p| between the released cell probabilities
  and the data's own cell proportions on the same (released) grid;
* covariance: ‖Σ̂ − Σ‖_F and the Mahalanobis error ‖Σ^{-1/2} Σ̂ Σ^{-1/2} − I‖_F.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dppca_dask import dp_covariance, dp_pca, privacy_control

P = 20
K = 3
LAMBDA = np.array([10.0, 5.0, 2.0] + [1.0] * (P - 3))
DATASETS = ("gaussian", "t3", "contaminated")
SETTINGS = {
    "seed-exact": {"calibration": "classical", "sensitivity": "seed", "score_method": ["add"],
                   "frame": "durfee"},
    "recommended": {"calibration": "analytic", "sensitivity": "tight",
                    "score_method": ["geometric"], "frame": "durfee"},
}
DELTA = 1e-5
C_CLIP = 4.0 * LAMBDA[0]
BOUND = 3.0 * float(np.sqrt(LAMBDA[0]))
RADIUS = 1.5 * float(np.sqrt(LAMBDA.sum()))


def population(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(Σ, V): the population covariance and its eigenvectors (columns, decreasing λ)."""
    rng = np.random.default_rng([seed, 7])
    v, _ = np.linalg.qr(rng.normal(size=(P, P)))
    return (v * LAMBDA) @ v.T, v


def sample(kind: str, n: int, rng: np.random.Generator, sigma: np.ndarray) -> np.ndarray:
    chol = np.linalg.cholesky(sigma)
    z = rng.normal(size=(n, P)) @ chol.T
    if kind == "gaussian":
        return z
    if kind == "t3":  # scale Σ/3: covariance Σ·(3/(3-2))/3 = Σ
        w = rng.chisquare(3, size=n) / 3.0
        return z / np.sqrt(3.0) / np.sqrt(w)[:, None]
    outliers = max(1, n // 100)
    u = np.random.default_rng([0, 11]).normal(size=P)
    u /= np.linalg.norm(u)
    rows = rng.choice(n, size=outliers, replace=False)
    z[rows] = 15.0 * np.sqrt(LAMBDA[0]) * u + rng.normal(size=(outliers, P))
    return z


def sin_theta(v_hat: np.ndarray, v: np.ndarray) -> float:
    q, _ = np.linalg.qr(v_hat)
    s = np.linalg.svd(v.T @ q, compute_uv=False)
    return float(np.sqrt(max(0.0, 1.0 - float(s.min()) ** 2)))


def pca_errors(fit: Any, v: np.ndarray) -> dict[str, float]:
    directions = np.asarray(fit.directions.values)[:, :K]
    scree = np.asarray(fit.scree.dataset["scree"].values)[0, :K]
    pve = np.asarray(fit.scree.dataset["pve"].values)[0, :K]
    true_pve = LAMBDA[:K] / LAMBDA[:K].sum()
    score = fit.score
    released = np.asarray(score.probability.values)[0]
    observed = np.asarray(score.nonprivate_probability.values)
    return {
        "sin_theta": sin_theta(directions, v[:, :K]),
        "scree": float(np.mean(np.abs(scree - LAMBDA[:K]) / LAMBDA[:K])),
        "pve": float(np.mean(np.abs(pve - true_pve) / true_pve)),
        "tv": 0.5 * float(np.abs(released - observed).sum()),
    }


class Mahalanobis:
    def __init__(self, sigma: np.ndarray) -> None:
        vals, vecs = np.linalg.eigh(sigma)
        self.sigma = sigma
        self.inv_sqrt = (vecs / np.sqrt(vals)) @ vecs.T

    def __call__(self, est: np.ndarray) -> tuple[float, float]:
        white = self.inv_sqrt @ est @ self.inv_sqrt
        return (float(np.linalg.norm(est - self.sigma)),
                float(np.linalg.norm(white - np.eye(P))))


COVARIANCE: dict[str, dict[str, Any]] = {
    "seed-exact (PACE-GGM, box)": {"method": "pace_ggm", "clip": "box", "bounds": BOUND},
    "recommended (auto, row)": {"method": "auto", "clip": "row", "radius": RADIUS},
    "SSP (row)": {"method": "ssp", "clip": "row", "radius": RADIUS},
}


def run(n: int, reps: int, eps_values: Sequence[float], seed: int,
        log: Callable[[str], None]) -> dict[str, Any]:
    sigma, v = population()
    maha = Mahalanobis(sigma)
    pca: dict[tuple[float, str, str], list[dict[str, float]]] = {}
    cov: dict[tuple[float, str, str], list[tuple[float, float]]] = {}
    for e_i, eps in enumerate(eps_values):
        pc = privacy_control(eps=eps, delta=DELTA)
        for d_i, kind in enumerate(DATASETS):
            started = time.perf_counter()
            for rep in range(reps):
                x = sample(kind, n, np.random.default_rng([seed, e_i, d_i, rep]), sigma)
                for s_i, (name, opts) in enumerate(SETTINGS.items()):
                    fit = dp_pca(x, privacy=pc, k=K, scree_control={"clipped": {"C_clip": C_CLIP}},
                                 non_private=True, rng=np.random.default_rng([seed, e_i, d_i, rep, s_i]), **opts)
                    pca.setdefault((eps, kind, name), []).append(pca_errors(fit, v))
                for c_i, (name, copts) in enumerate(COVARIANCE.items()):
                    est = dp_covariance(x, eps=eps, delta=DELTA,
                                        rng=np.random.default_rng([seed, e_i, d_i, rep, 10 + c_i]),
                                        **copts)
                    cov.setdefault((eps, kind, name), []).append(
                        maha(np.asarray(est.covariance.values)))
            log(f"  eps = {eps:g}, {kind}: {reps} repetitions in "
                f"{time.perf_counter() - started:.0f} s")
    return {"pca": pca, "cov": cov}


def _cell(values: Sequence[float]) -> str:
    q25, q50, q75 = np.percentile(values, [25, 50, 75])
    return f"{q50:.3g} [{q25:.3g}, {q75:.3g}]"


def tables(res: dict[str, Any], eps_values: Sequence[float]) -> str:
    pca, cov = res["pca"], res["cov"]
    parts = [("Directions: sin-theta subspace error (k = 3)", "sin_theta"),
             ("Scree: relative error of the private scree values (mean over PC1-PC3)", "scree"),
             ("PVE: relative error of the private PVE (mean over PC1-PC3)", "pve"),
             ("Score histograms: total-variation distance to the data's own cell proportions",
              "tv")]
    out = []
    seed_name, rec_name = list(SETTINGS)
    for title, key in parts:
        lines = [f"### {title}", "",
                 "| ε | data | seed-exact | recommended | ratio (medians) |", "|---|---|---|---|---|"]
        for eps in eps_values:
            for kind in DATASETS:
                a = [r[key] for r in pca[(eps, kind, seed_name)]]
                b = [r[key] for r in pca[(eps, kind, rec_name)]]
                lines.append(f"| {eps:g} | {kind} | {_cell(a)} | {_cell(b)} | "
                             f"{np.median(b) / np.median(a):.2f} |")
        out.append("\n".join(lines))
    names = list(COVARIANCE)
    lines = ["### Covariance: Frobenius / Mahalanobis error against the population Σ", "",
             "| ε | data | " + " | ".join(f"{m} F" for m in names) + " | "
             + " | ".join(f"{m} M" for m in names) + " | ratio rec./seed F, M |",
             "|" + "---|" * (3 + 2 * len(names))]
    for eps in eps_values:
        for kind in DATASETS:
            vals = {m: np.array(cov[(eps, kind, m)]) for m in names}
            ratio_f = np.median(vals[names[1]][:, 0]) / np.median(vals[names[0]][:, 0])
            ratio_m = np.median(vals[names[1]][:, 1]) / np.median(vals[names[0]][:, 1])
            lines.append(f"| {eps:g} | {kind} | "
                         + " | ".join(_cell(vals[m][:, 0]) for m in names) + " | "
                         + " | ".join(_cell(vals[m][:, 1]) for m in names)
                         + f" | {ratio_f:.2f}, {ratio_m:.2f} |")
    out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def scree_grid(reps: int = 20, log: Callable[[str], None] = print) -> str:
    """The measurement behind the scree ``UtilityWarning`` criterion (docs/design/scree.md,
    "Expected noise and reliability"): the three methods with the controls of configs/scree.yaml
    on the demo data and on Gaussian data, true directions supplied, k = 5, over n and the scree
    ε; for Huber, the share of runs whose value errs by more than 50 % against the criterion's
    verdict."""
    import warnings

    from dppca_dask import dp_scree
    from dppca_dask.errors import UtilityWarning
    from dppca_dask.io.datasets import make_gau
    from dppca_dask.pca.scree_controls import huber_control
    from dppca_dask.pca.scree_utility import method_noise
    from dppca_dask.privacy.budget import PrivacyBudget

    controls = {"huber": {"k_min_m2": -10, "k_max_m2": 15, "m2_frac": 0.25},
                "clipped": {"C_clip": 150},
                "pmwm": {"a": 0, "b": 200, "trim_const": 10, "eta": 0.01, "beta": 1.01,
                         "split_mode": False}}  # configs/scree.yaml; huber first (row 0)
    huber = huber_control(**controls["huber"])
    lines = ["| data | n | scree ε | predicted relative sd | right bin | flagged | runs with "
             "error > 50 %: worst PC (PC1) |", "|---|---:|---:|---:|---:|:---:|---|"]
    for kind in ("demo", "Gaussian"):
        for n in (5000, 50000):
            if kind == "demo":
                x = make_gau(n // 5, rng=0).drop(columns="group").to_numpy()
            else:
                x = np.random.default_rng(0).normal(size=(n, 20)) * np.sqrt(np.linspace(40, 1, 20))
            centred = x - x.mean(axis=0)
            vals, vecs = np.linalg.eigh(centred.T @ centred / (n - 1))
            v, truth = vecs[:, ::-1][:, :5], vals[::-1][:5]
            for eps in (0.5, 2.0, 8.0, 32.0):
                errs = []
                for seed in range(reps):
                    with warnings.catch_warnings():  # the verdict is a column of the table
                        warnings.simplefilter("ignore", UtilityWarning)
                        fit = dp_scree(x, privacy=privacy_control(eps=2 * eps, delta=DELTA),
                                       k=5,
                                       method=list(controls), control=controls, V_dp=v,
                                       mono=False, rng=seed + 1, calibration="analytic",
                                       sensitivity="tight")
                    errs.append(np.asarray(fit.dataset["scree_raw"].values)[0] / truth - 1)
                share = (np.abs(np.array(errs)) > 0.5).mean(axis=0)
                noise = method_noise("huber", huber, n=n, k=5,
                                     budget=PrivacyBudget(0.8 * eps, 0.8 * DELTA / 2),
                                     calibration="analytic")
                lines.append(f"| {kind} | {n} | {eps:g} | {noise.relative_sd:.3f} | "
                             f"{noise.bin_probability:.2f} | {'yes' if noise.unreliable else 'no'}"
                             f" | {share.max():.0%} ({share[0]:.0%}) |")
                log(lines[-1])
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="rows per dataset")
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--eps", default="0.5,1,4", help="comma-separated total eps values")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "utility.md"))
    parser.add_argument("--quick", action="store_true", help="smoke run (n = 500, 2 reps)")
    parser.add_argument("--scree-grid", action="store_true",
                        help="only the scree reliability grid of docs/design/scree.md")
    args = parser.parse_args(argv)
    if args.scree_grid:
        text = scree_grid()
        print(text)
        return text
    n, reps = (500, 2) if args.quick else (args.n, args.reps)
    eps_values = [float(e) for e in args.eps.split(",")]
    started = time.perf_counter()
    res = run(n, reps, eps_values, args.seed, log=lambda m: print(m, flush=True))
    seconds = time.perf_counter() - started
    command = "python benchmarks/utility.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = tables(res, eps_values)
    header = (f"# Utility: recommended vs seed-exact settings\n\n"
              f"`{command.strip()}` (n = {n}, p = {P}, k = {K}, {reps} repetitions, "
              f"δ = {DELTA:g}; {seconds:.0f} s on this machine). Median [IQR]; ratio < 1: the "
              "recommended settings are better. Settings, data and errors: the docstring of "
              "benchmarks/utility.py.\n\n")
    print("\n" + text)
    if not args.quick:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(header + text)
        print(f"Wrote {args.out}")
    return text


if __name__ == "__main__":
    main()
