"""The private row-clipping radius (issue 30 item 2): the default ``dp_covariance`` against the
public-constant configurations on light and heavy tails, outliers and other units.

``python benchmarks/covariance_radius.py`` (about 2 minutes on 2 cores) prints and writes
``benchmarks/results/covariance-radius.md`` (``--out``): per family, unit and ρ the median
Frobenius error ‖Σ̂ − Σ‖_F (in units of s², s the unit factor) and Mahalanobis error
‖Σ^{-1/2} Σ̂ Σ^{-1/2} − I‖_F over ``--reps`` repetitions (10), each a new dataset and new noise,
of:

* **default**: ``dp_covariance(X, rho=ρ)`` -- ``method="auto", clip="row", radius="private"``
  (5 % of ρ on the radius);
* **PACE-GGM (box)**: ``preset="seed"`` with the public bound B = 3·s (the bound
  benchmarks/covariance.py uses on standardised data, in the data's units);
* **SSP (row, R = 1.5√d)**: ``method="ssp", clip="row", radius=1.5·√d·s`` (the guide's
  public rule, in the data's units);
* **SSP (row, private)**: ``method="ssp"`` with the private radius;
* **SSP (row, 1.5√d literal)**: the guide's R = 1.5·√d taken literally in the data's units
  (what the rule gives a user who does not rescale; units ≠ 1 only).

Data: n = 5000 rows, d = 20, population Σ the correlation matrix of V diag(10, 5, 2, 1, …, 1) Vᵀ
(V a random rotation; benchmarks/utility.py's design with unit variances, so B = 3 and
R = 1.5√d are the rules' standardised values); families ``gaussian`` N(0, Σ), ``t3``/``t4``/``t5``
multivariate t scaled to covariance Σ, ``outliers`` N(0, Σ) with 2 % of the rows replaced by
15·√λ₁·u + N(0, I) along one unit vector u; each multiplied by s ∈ {1e-3, 1, 1e3}. The estimand is
the population Σ·s² (the clean one for ``outliers``).

The releases run through the package's own pieces on one exact statistic per repetition: the
row-norm counts (:func:`~dppca_dask.kernels.gram.row_norm_counts` on the public grid), the
searches (:func:`~dppca_dask.covariance.radius.release_radius`), the clipped second moment and
:func:`~dppca_dask.covariance.estimator.release_covariance` -- what ``dp_covariance`` runs,
without Dask (``tests/test_benchmarks.py`` checks the equality). The box and the public-radius
baselines are unit-equivariant by construction (their constants scale with s; the same noise
in normalised units), so they are computed once per repetition at s = 1 and shown for every s.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dppca_dask.covariance.estimator import release_covariance
from dppca_dask.covariance.pace_ggm import pace_ggm_control
from dppca_dask.covariance.radius import radius_grid, release_radius, split_rho
from dppca_dask.kernels.gram import ROW_SHRINK, row_norm_counts

N, D = 5000, 20
RHOS = (0.01, 0.1, 1.0)
FAMILIES = ("gaussian", "t3", "t4", "t5", "outliers")
UNITS = (1e-3, 1.0, 1e3)
BOUND, RADIUS_FACTOR = 3.0, 1.5
TARGET = 1.1
METHODS = ("default", "pace_box", "ssp_public", "ssp_private", "ssp_literal")
LABELS = {"default": "default (auto, row, private R)", "pace_box": "PACE-GGM (box, B = 3)",
          "ssp_public": "SSP (row, R = 1.5√d)", "ssp_private": "SSP (row, private R)",
          "ssp_literal": "SSP (row, 1.5√d literal)"}


def population(d: int = D, seed: int = 0) -> np.ndarray:
    """The correlation matrix of V diag(10, 5, 2, 1, …) Vᵀ, V a seeded random rotation."""
    rng = np.random.default_rng([seed, 7])
    lam = np.array([10.0, 5.0, 2.0] + [1.0] * (d - 3))
    v, _ = np.linalg.qr(rng.normal(size=(d, d)))
    s = (v * lam) @ v.T
    scale = 1.0 / np.sqrt(np.diag(s))
    return s * np.outer(scale, scale)


def sample(kind: str, n: int, rng: np.random.Generator, sigma: np.ndarray) -> np.ndarray:
    d = sigma.shape[0]
    z = rng.normal(size=(n, d)) @ np.linalg.cholesky(sigma).T
    if kind == "gaussian":
        return z
    if kind.startswith("t"):
        nu = int(kind[1:])
        w = rng.chisquare(nu, size=n) / nu
        return z * math.sqrt((nu - 2) / nu) / np.sqrt(w)[:, None]
    lam1 = float(np.linalg.eigvalsh(sigma)[-1])
    u = np.random.default_rng([0, 11]).normal(size=d)
    u /= np.linalg.norm(u)
    m = int(0.02 * n)
    rows = rng.choice(n, size=m, replace=False)
    z[rows] = 15.0 * math.sqrt(lam1) * u + rng.normal(size=(m, d))
    return z


def _row_clip(x: np.ndarray, radius: float) -> np.ndarray:
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    factor = np.ones_like(norms)
    over = norms > radius
    factor[over] = radius * ROW_SHRINK / norms[over]
    return x * factor[:, None]


def _release(x: np.ndarray, *, scale: float, rho: float, method: str, clip: str,
             rng: np.random.Generator) -> np.ndarray:
    n, d = x.shape
    c = _row_clip(x, scale) if clip == "row" else np.clip(x, -scale, scale)
    control = pace_ggm_control() if method == "pace_ggm" else (
        {"psd": True} if method == "ssp" else None)
    est = release_covariance(c.T @ c / n, n=n, bounds=np.full(d, scale), rho=rho, method=method,
                             control=control, rng=rng, mean=c.mean(axis=0), clip=clip)
    return est.covariance


def private_release(x: np.ndarray, *, rho: float, method: str, rng: np.random.Generator
                    ) -> tuple[np.ndarray, float]:
    """``dp_covariance(x, rho=rho, method=method)`` with the default private radius, on NumPy:
    the count pass, the two searches, then the method on the rest of ρ."""
    n, d = x.shape
    found = release_radius(row_norm_counts(x, radius_grid()), n=n, d=d, rho=rho, rng=rng,
                           warn=False)
    cov = _release(x, scale=found.radius, rho=split_rho(rho)[2], method=method, clip="row",
                   rng=rng)
    return cov, found.radius


class Errors:
    def __init__(self, sigma: np.ndarray) -> None:
        vals, vecs = np.linalg.eigh(sigma)
        self.sigma = sigma
        self.inv_sqrt = (vecs / np.sqrt(vals)) @ vecs.T

    def __call__(self, estimate: np.ndarray, unit: float) -> tuple[float, float]:
        est = estimate / unit**2
        white = self.inv_sqrt @ est @ self.inv_sqrt
        return (float(np.linalg.norm(est - self.sigma)),
                float(np.linalg.norm(white - np.eye(self.sigma.shape[0]))))


def run(reps: int, seed: int, rhos: Sequence[float] = RHOS, families: Sequence[str] = FAMILIES,
        units: Sequence[float] = UNITS, log: Any = print) -> dict[tuple[str, float, float, str],
                                                                   list[tuple[float, float]]]:
    sigma = population()
    errors = Errors(sigma)
    out: dict[tuple[str, float, float, str], list[tuple[float, float]]] = {}
    radius = RADIUS_FACTOR * math.sqrt(D)
    for f_i, kind in enumerate(families):
        started = time.perf_counter()
        for rep in range(reps):
            base = sample(kind, N, np.random.default_rng([seed, f_i, rep]), sigma)
            for r_i, rho in enumerate(rhos):
                def stream(m: int, r_i: int = r_i, rep: int = rep, f_i: int = f_i
                           ) -> np.random.Generator:
                    return np.random.default_rng([seed, f_i, rep, r_i, m])
                public = {
                    "pace_box": errors(_release(base, scale=BOUND, rho=rho, method="pace_ggm",
                                                clip="box", rng=stream(1)), 1.0),
                    "ssp_public": errors(_release(base, scale=radius, rho=rho, method="ssp",
                                                  clip="row", rng=stream(2)), 1.0),
                }
                for unit in units:
                    x = base * unit
                    for name, value in public.items():
                        out.setdefault((kind, unit, rho, name), []).append(value)
                    cov, _ = private_release(x, rho=rho, method="auto", rng=stream(3))
                    out.setdefault((kind, unit, rho, "default"), []).append(errors(cov, unit))
                    cov, _ = private_release(x, rho=rho, method="ssp", rng=stream(4))
                    out.setdefault((kind, unit, rho, "ssp_private"), []).append(
                        errors(cov, unit))
                    if unit != 1.0:
                        lit = _release(x, scale=radius, rho=rho, method="ssp", clip="row",
                                       rng=stream(2))
                        out.setdefault((kind, unit, rho, "ssp_literal"), []).append(
                            errors(lit, unit))
        log(f"  {kind}: {reps} repetitions in {time.perf_counter() - started:.0f} s")
    return out


def table(res: dict[tuple[str, float, float, str], list[tuple[float, float]]],
          rhos: Sequence[float] = RHOS, families: Sequence[str] = FAMILIES,
          units: Sequence[float] = UNITS) -> tuple[str, list[str]]:
    """The markdown table and the cells where the default misses the target."""
    shown = [m for m in METHODS if any(k[3] == m for k in res)]
    lines = ["Median Frobenius (units of s²) / Mahalanobis error; ratio = default / the better "
             "of PACE-GGM (box) and SSP (row, R = 1.5√d) in each error (target ≤ "
             f"{TARGET:g}).", "",
             "| family | unit s | ρ | " + " | ".join(LABELS[m] for m in shown)
             + " | ratio F / M |", "|" + "---|" * (4 + len(shown))]
    misses = []
    for kind in families:
        for unit in units:
            for rho in rhos:
                med = {m: tuple(float(np.median([e[i] for e in res[(kind, unit, rho, m)]]))
                                for i in (0, 1))
                       for m in shown if (kind, unit, rho, m) in res}
                ratio = [med["default"][i] / min(med["pace_box"][i], med["ssp_public"][i])
                         for i in (0, 1)]
                cells = [f"{med[m][0]:.3g} / {med[m][1]:.3g}" if m in med else "–"
                         for m in shown]
                flag = "" if max(ratio) <= TARGET else " **miss**"
                if flag:
                    misses.append(f"{kind}, s = {unit:g}, ρ = {rho:g}: {ratio[0]:.2f} / "
                                  f"{ratio[1]:.2f}")
                lines.append(f"| {kind} | {unit:g} | {rho:g} | " + " | ".join(cells)
                             + f" | {ratio[0]:.2f} / {ratio[1]:.2f}{flag} |")
    lines += ["", f"Cells missing the target: {len(misses)}"
              + (" (" + "; ".join(misses) + ")" if misses else "") + "."]
    return "\n".join(lines) + "\n", misses


def main(argv: Sequence[str] | None = None) -> dict[Any, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=3030)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"
                                             / "covariance-radius.md"))
    parser.add_argument("--quick", action="store_true", help="smoke run (seconds)")
    args = parser.parse_args(argv)
    rhos, families, units, reps = RHOS, FAMILIES, UNITS, args.reps
    if args.quick:
        rhos, families, units, reps = (1.0,), ("gaussian", "t4"), (1.0, 1e3), 1
    started = time.perf_counter()
    res = run(reps, args.seed, rhos, families, units)
    text, _ = table(res, rhos, families, units)
    seconds = time.perf_counter() - started
    header = (f"# The private radius against the public constants\n\n`python "
              f"benchmarks/covariance_radius.py --reps {reps} --seed {args.seed}` "
              f"(n = {N}, d = {D}; {seconds:.0f} s)\n\n")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(header + text)
    print(text)
    return res


if __name__ == "__main__":
    main()
