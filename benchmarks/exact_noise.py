"""Draws per second of the exact samplers (dppca_dask.privacy.exact_noise), best of 3.

Run: python benchmarks/exact_noise.py
"""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np

from dppca_dask.privacy.exact_noise import discrete_gaussian, discrete_laplace, round_up_rational


def rate(fn, n: int, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn(n)
        best = min(best, time.perf_counter() - t)
    return n / best


def main() -> None:
    rng = np.random.default_rng()
    cases = {
        "gaussian sigma=5.6 (histogram counts)": lambda n: discrete_gaussian(
            rng, round_up_rational(Fraction(31.36)), n),
        "gaussian sigma=2^40 (grid units)": lambda n: discrete_gaussian(rng, Fraction(2**80), n),
        "laplace b=2 (stability histogram)": lambda n: discrete_laplace(rng, Fraction(2), n),
        "laplace b=2^40 (grid units)": lambda n: discrete_laplace(rng, Fraction(2**40), n),
    }
    print(f"{'sampler':42s} {'1e3 draws/s':>14s} {'1e5 draws/s':>14s}")
    for name, fn in cases.items():
        print(f"{name:42s} {rate(fn, 1000):14.3g} {rate(fn, 100000):14.3g}")
    t = time.perf_counter()
    discrete_gaussian(rng, Fraction(2**92), 20100)
    print(f"p = 200 matrix (20 100 draws, sigma = 2^46): {time.perf_counter() - t:.3f} s")
    t = time.perf_counter()
    discrete_gaussian(rng, round_up_rational(Fraction(31.36)), 10**6)
    print(f"1e6 histogram cells: {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
