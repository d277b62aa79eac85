"""CSPRNG (rng=None) vs PCG64 on default releases and on the exact samplers, best of 5.

Run: python benchmarks/rng_cost.py (about a minute; docs/privacy.md, "Randomness")
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

import dppca_dask as d
from dppca_dask.privacy.exact_noise import discrete_gaussian, discrete_laplace
from dppca_dask.privacy.rng import as_rng


def best(fn: Callable[[], Any], reps: int = 5) -> float:
    b = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        b = min(b, time.perf_counter() - t)
    return b


def main() -> None:
    warnings.simplefilter("ignore")
    x = np.random.default_rng(0).normal(size=(500, 20))
    priv = d.privacy_control(eps=1.0, delta=1e-5)
    control = d.clipped_control(C_clip=40)
    releases: dict[str, Callable[[Any], Any]] = {
        "dp_loading 500x20": lambda r: d.dp_loading(x, privacy=priv, rng=r),
        "dp_pca 500x20 k=3": lambda r: d.dp_pca(x, privacy=priv, k=3, scree_control=control,
                                                rng=r),
    }
    for name, fn in releases.items():
        cs = best(lambda fn=fn: fn(None))
        pcg = best(lambda fn=fn: fn(np.random.default_rng()))
        print(f"{name:30s} csprng {cs * 1e3:8.1f} ms  pcg64 {pcg * 1e3:8.1f} ms  "
              f"ratio {cs / pcg:.2f}")
    samplers: dict[str, tuple[Callable[[Any], Any], int]] = {
        "gaussian s=2^40, 1 draw": (lambda g: discrete_gaussian(g, Fraction(2**80), 1), 1),
        "gaussian s=2^40, 20100 draws": (
            lambda g: discrete_gaussian(g, Fraction(2**80), 20100), 20100),
        "gaussian s=5.6, 1e5 draws": (
            lambda g: discrete_gaussian(g, Fraction(3136, 100), 100000), 100000),
        "laplace b=2^40, 1 draw": (lambda g: discrete_laplace(g, Fraction(2**40), 1), 1),
        "laplace b=2^40, 1e5 draws": (
            lambda g: discrete_laplace(g, Fraction(2**40), 100000), 100000),
    }
    for name, (draw, n) in samplers.items():
        reps = 200 if n == 1 else 3
        cs_gen, pcg_gen = as_rng(None).generator, np.random.default_rng()
        cs = best(lambda draw=draw, g=cs_gen: draw(g), reps) / n
        pcg = best(lambda draw=draw, g=pcg_gen: draw(g), reps) / n
        print(f"{name:30s} csprng {cs * 1e6:8.2f} us/draw  pcg64 {pcg * 1e6:8.2f} us/draw  "
              f"ratio {cs / pcg:.2f}")


if __name__ == "__main__":
    main()
