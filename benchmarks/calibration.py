"""Utility of the four noise settings of dp_loading: calibration x sensitivity bound.

classical / analytic Gaussian calibration x seed (4/n) / tight (2*sqrt(2)/n) Frobenius
sensitivity. Reports the median subspace error ||sin Theta||_F between the top-k private
directions and the exact (non-private) Kendall eigenvectors, over repetitions, on a Gaussian and a
heavy-tailed (multivariate t, 1.5 degrees of freedom) dataset with the same scatter.

The exact Kendall matrix is computed once per dataset with `spherical_kendall`; each repetition
then runs the release exactly as dp_loading does (mechanisms.gaussian_symmetric_matrix with the
dp_loading sensitivity, then the ordered eigen-decomposition).

    python benchmarks/calibration.py           # about 20 s
    python benchmarks/calibration.py --quick
"""

from __future__ import annotations

import argparse

import numpy as np

from dppca_dask import spherical_kendall
from dppca_dask.pca.loading import kendall_sensitivity
from dppca_dask.pca.postprocess import ordered_eigh
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import gaussian_symmetric_matrix

SETTINGS = [("classical", "seed"), ("analytic", "seed"), ("classical", "tight"),
            ("analytic", "tight")]


def datasets(n: int, p: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    scales = np.linspace(3.0, 1.0, p) ** 2
    z = rng.normal(size=(n, p)) * np.sqrt(scales)
    chi = rng.chisquare(1.5, size=(n, 1)) / 1.5
    return {"gaussian": z, "t(1.5)": z / np.sqrt(chi)}


def sin_theta(v: np.ndarray, w: np.ndarray) -> float:
    """||sin Theta||_F between the column spaces of two orthonormal n x k matrices."""
    k = v.shape[1]
    return float(np.sqrt(max(k - np.linalg.norm(v.T @ w) ** 2, 0.0)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--p", type=int, default=10)
    parser.add_argument("--k", type=int, default=3)
    args = parser.parse_args()
    reps = 20 if args.quick else 200
    eps_grid = (0.1, 0.3, 1.0, 3.0, 10.0) if not args.quick else (0.3, 3.0)
    delta = 1e-5
    rng = np.random.default_rng(2026)
    print(f"Median ||sin Theta||_F of the top {args.k} private directions vs the exact Kendall "
          f"eigenvectors; n = {args.n}, p = {args.p}, delta = {delta:g}, {reps} releases each")
    header = "".join(f"{c + '/' + s:>16}" for c, s in SETTINGS)
    for name, x in datasets(args.n, args.p, rng).items():
        k_exact = spherical_kendall(x).values
        _, exact = ordered_eigh(k_exact)
        top = exact[:, : args.k]
        print(f"\n{name:<10} {'eps':>6}  {header}")
        for eps in eps_grid:
            row = []
            for calibration, bound in SETTINGS:
                sens = kendall_sensitivity(args.n, bound=bound)
                errors = []
                for _ in range(reps):
                    noisy = gaussian_symmetric_matrix(
                        k_exact, sensitivity=sens, budget=PrivacyBudget(eps, delta),
                        calibration=calibration, rng=rng, component="loading").value
                    errors.append(sin_theta(ordered_eigh(noisy)[1][:, : args.k], top))
                row.append(np.median(errors))
            print(f"{'':<10} {eps:>6g}  " + "".join(f"{v:>16.4f}" for v in row))


if __name__ == "__main__":
    main()
