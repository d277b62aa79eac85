"""The default ``dp_covariance`` on held-out kinds of data, through the user's path (issue 30 item 2).

Per kind, ρ and seed: ``dp_covariance(x, rho=ρ)`` itself (``method="auto"``, row clipping at the
private radius) against two public-constant baselines in the data's units: box-clipped PACE-GGM
(``preset="seed"``, bound B = 3·sd per variable) and row-clipped SSP with the public radius
R = 1.5·√tr M. Error: relative Frobenius error ‖Σ̂ − M‖_F / ‖M‖_F against the second moment M of
a 400 000-row sample of the same kind (what the row-clipped releases estimate; the data are
centred by construction but for the shifted kind). Printed: the median over ``--seeds`` of
default / better baseline, per kind and ρ.

Kinds (n = 5000, d = 20, from seeds the tests do not use): gaussian (the spiked design of
benchmarks/heldout.py), × 1e6, shifted by 5 sd, 4 clusters, a near-singular Σ, multivariate
t(2.5), and a point mass (20 % of the rows at one point of norm about 2× the bulk's).

    python benchmarks/covariance_heldout.py            # about 3 minutes on 2 cores
    python benchmarks/covariance_heldout.py --seeds 3
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable

import numpy as np

from dppca_dask import dp_covariance

N, D, SAMPLE = 5000, 20, 400_000
SEED = 20261203


def _basis(g: np.random.Generator) -> np.ndarray:
    return np.linalg.qr(np.random.default_rng(SEED).normal(size=(D, D)))[0]


def _spikes(values: np.ndarray | None = None) -> np.ndarray:
    return np.r_[10.0, 6.0, 4.0, 2.0, np.ones(D - 4)] if values is None else values


def _gaussian(n: int, g: np.random.Generator, values: np.ndarray | None = None) -> np.ndarray:
    return (g.normal(size=(n, D)) * np.sqrt(_spikes(values))) @ _basis(g).T / np.sqrt(2.2)


def _point_mass(n: int, g: np.random.Generator) -> np.ndarray:
    x = _gaussian(n, g)
    at = g.random(n) < 0.2
    point = np.random.default_rng(SEED + 1).normal(size=D)
    point *= 2.0 * np.sqrt(D) / np.linalg.norm(point)
    x[at] = point + 1e-6 * g.normal(size=(int(at.sum()), D))
    return x


def _clusters(n: int, g: np.random.Generator) -> np.ndarray:
    centres = np.random.default_rng(SEED + 2).normal(size=(4, D)) * 1.5
    return centres[g.integers(0, 4, n)] + _gaussian(n, g) / 2


def _t(n: int, g: np.random.Generator) -> np.ndarray:
    df = 2.5
    return _gaussian(n, g) * np.sqrt(df / g.chisquare(df, size=(n, 1)))


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "gaussian": _gaussian,
    "x 1e6": lambda n, g: _gaussian(n, g) * 1e6,
    "shifted 5 sd": lambda n, g: _gaussian(n, g) + 5.0,
    "4 clusters": _clusters,
    "near-singular": lambda n, g: _gaussian(n, g, np.logspace(0, -6, D)),
    "t(2.5)": _t,
    "point mass": _point_mass,
}


def _error(est: np.ndarray, m: np.ndarray) -> float:
    return float(np.linalg.norm(est - m) / np.linalg.norm(m))


def run(seeds: int, rhos: tuple[float, ...]) -> list[str]:
    rows = [f"dp_covariance on held-out kinds: n = {N}, d = {D}, {seeds} seeds; median relative "
            "Frobenius error, default / better of (box PACE-GGM B = 3 sd, row SSP R = 1.5 sqrt(tr M))",
            f"{'kind':<15}" + "".join(f"{'rho = ' + format(r, 'g'):>26}" for r in rhos)]
    for k, (name, make) in enumerate(KINDS.items()):
        m_sample = make(SAMPLE, np.random.default_rng([SEED, k, 999]))
        m = m_sample.T @ m_sample / SAMPLE
        cells = ""
        for rho in rhos:
            ratios, defaults = [], []
            for s in range(seeds):
                x = make(N, np.random.default_rng([SEED, k, s]))
                sd = x.std(axis=0)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    default = dp_covariance(x, rho=rho, rng=SEED + 1000 * k + 10 * s + 1)
                    box = dp_covariance(x, rho=rho, preset="seed", bounds=3.0 * sd,
                                        rng=SEED + 1000 * k + 10 * s + 2)
                    ssp = dp_covariance(x, rho=rho, method="ssp", clip="row",
                                        radius=1.5 * float(np.sqrt(np.trace(m))),
                                        rng=SEED + 1000 * k + 10 * s + 3)
                err = _error(default.covariance.values, m)
                best = min(_error(box.covariance.values, m), _error(ssp.covariance.values, m))
                ratios.append(err / best)
                defaults.append(err)
            cells += f"{np.median(ratios):>14.2f} ({np.median(defaults):.3g})".rjust(26)
        rows.append(f"{name:<15}{cells}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    start = time.perf_counter()
    print("\n".join(run(args.seeds, (0.1, 1.0))))
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
