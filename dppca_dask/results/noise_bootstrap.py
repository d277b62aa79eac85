"""Parametric bootstrap of the private directions' angles from the public noise law --
post-processing, no budget, no data (issue 33; docs/intervals.md).

The loading release is ``M̂ = K + E`` with ``E`` the symmetric lattice Gaussian of diagonal sd
σ and off-diagonal sd σ/√2 (:mod:`~dppca_dask.results.direction_intervals`), a law invariant
under rotations: the angle between the j-th eigenvector of ``K + E`` and that of ``K`` depends
on ``K``'s eigenvalues only. The bootstrap takes the released eigenvalues λ̂ for them: it draws
``diag(λ̂) + E*`` with ``E*`` from the same law and, per component j, the angle between the
draw's j-th eigenvector (eigenvalues decreasing) and the j-th axis. The bound of component j is
the ``1 − α/p`` quantile of its simulated angles (Bonferroni over the p components); a bound
that reaches :data:`IDENTIFIABLE_DEGREES` is replaced by 90° (no bound: not identifiable).

This is an approximation, not a guarantee: the released eigenvalues stand in for the
noise-free ones, and noise spreads them apart, so near ties look better separated than they
are. benchmarks/intervals.py measures the coverage on held-out designs; the Davis–Kahan bound
(guaranteed, and several times wider) is kept beside it. Above :data:`MAX_DIMENSION` the
simulation is not run and the guaranteed bound is the only one. The simulation uses its own
fixed stream (:data:`STREAM`), so a release's bounds are reproducible; the stream carries no
information about the data.
"""

from __future__ import annotations

import math

import numpy as np
from threadpoolctl import threadpool_limits

__all__ = ["IDENTIFIABLE_DEGREES", "MAX_DIMENSION", "MAX_DRAWS", "MIN_DRAWS", "STREAM",
           "angle_bootstrap", "bootstrap_draws"]

MIN_DRAWS = 2000
"""Fewest simulated noise matrices per release."""

MAX_DRAWS = 8000
"""Most simulated noise matrices per release (p > 20 at 95 %: fewer than 20 simulated angles
beyond the Bonferroni quantile, 13 at p = 30)."""

TAIL_DRAWS = 20
"""Simulated angles beyond each component's Bonferroni quantile: the draws are
``TAIL_DRAWS·p/α`` within [MIN_DRAWS, MAX_DRAWS]."""

MAX_DIMENSION = 30
"""Largest p bootstrapped (8000 eigen-decompositions of 30 x 30, one BLAS thread: 2 s on a
loaded core); larger releases keep the guaranteed Davis–Kahan bound only."""

IDENTIFIABLE_DEGREES = 45.0
"""A direction whose angle bound is below this is identifiable: closer to ±v_j than to any
direction orthogonal to it."""

STREAM = 33
"""The bootstrap's fixed public stream (not a seed of any release; no data enters it)."""

_BATCH = 250


def bootstrap_draws(p: int, level: float) -> int:
    """The number of simulated noise matrices for p components at ``level``.

    >>> bootstrap_draws(6, 0.95), bootstrap_draws(30, 0.95)
    (2400, 8000)
    """
    return min(MAX_DRAWS, max(MIN_DRAWS, math.ceil(TAIL_DRAWS * p / (1.0 - level) - 1e-9)))


def angle_bootstrap(eigenvalues: np.ndarray, sd: float, *, level: float = 0.95
                    ) -> np.ndarray:
    """Per component (``eigenvalues`` of the release, decreasing): the bootstrap angle bound in
    degrees, 90 where it reaches :data:`IDENTIFIABLE_DEGREES` (module docstring).

    >>> [round(float(a), 1) for a in angle_bootstrap(np.array([0.6, 0.3, 0.1]), 0.01)]
    [3.3, 5.1, 4.9]
    >>> angle_bootstrap(np.array([0.5, 0.5, 0.0]), 0.01).tolist()[:2]
    [90.0, 90.0]
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    p = lam.size
    if p == 1:
        return np.zeros(1)
    draws = bootstrap_draws(p, level)
    gen = np.random.default_rng(STREAM)
    upper = np.triu(np.ones((p, p), dtype=bool))
    sds = np.full((p, p), float(sd) / math.sqrt(2.0))
    np.fill_diagonal(sds, float(sd))
    center = np.diag(lam)
    angles = np.empty((draws, p))
    with threadpool_limits(limits=1, user_api="blas"):  # small matrices: threads only contend
        _simulate(angles, center, sds, upper, gen)
    bound = np.quantile(angles, 1.0 - (1.0 - level) / p, axis=0, method="higher")
    return np.where(bound < IDENTIFIABLE_DEGREES, bound, 90.0)


def _simulate(angles: np.ndarray, center: np.ndarray, sds: np.ndarray, upper: np.ndarray,
              gen: np.random.Generator) -> None:
    """Fill ``angles`` (draws x p) with the simulated angles, in batches."""
    draws, p = angles.shape
    for start in range(0, draws, _BATCH):
        size = min(_BATCH, draws - start)
        noise = np.zeros((size, p, p))
        noise[:, upper] = gen.standard_normal((size, int(upper.sum()))) * sds[upper]
        noise = noise + np.triu(noise, 1).transpose(0, 2, 1)
        _, vectors = np.linalg.eigh(center[None] + noise)
        cos = np.abs(np.diagonal(vectors[:, :, ::-1], axis1=1, axis2=2))
        angles[start:start + size] = np.degrees(np.arccos(np.clip(cos, 0.0, 1.0)))
