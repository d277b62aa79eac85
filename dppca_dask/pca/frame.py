"""The private frame of ``dp_score``: a released rectangle that holds (nearly) all scores.

Two constructions (docs/spec/SPEC_dppca.md §6.3, §6.4):

* ``"durfee"`` (recommended; pure ε-DP, no δ) -- per axis, the centre c is Durfee's unbounded
  two-sided median and the radius R the one-sided 0.995 quantile of |s − c|; each of the four
  searches gets ε_frame/4 (basic composition); the frame is c ± 1.2·R per axis. Two data passes
  (the radius needs the released centre): each returns count vectors on the public geometric grid
  (:mod:`dppca_dask.kernels.scores`) and the noisy searches run on the driver.
* ``"smooth"`` (legacy, the released v0.1.0 frame) -- smooth-sensitivity quantiles (Nissim,
  Raskhodnikova & Smith 2007): the two medians and the 0.99 quantile of the Euclidean distance
  ‖s − c‖, each with (ε_frame/3, δ_frame/3); a square frame c ± 1.2·R. It needs the n × 2
  scores on the driver and δ (see :func:`dppca_dask.dp_score` for how that δ is taken).

RNG order: c_x (positive-side draws, then negative-side), c_y, R_x, R_y (SPEC §6.9); legacy:
median x, median y, radius.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np

from dppca_dask.errors import BudgetError
from dppca_dask.graph.passes import row_block_sum
from dppca_dask.graph.rounds import Stage, run
from dppca_dask.kernels.scores import center_counts, project, radius_counts
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import smooth_laplace
from dppca_dask.privacy.quantiles import (
    DEFAULT_BETA,
    DEFAULT_MAX_STEPS,
    signed_quantile_from_counts,
    upper_from_counts,
    upper_grid,
)

__all__ = [
    "FRAME_METHODS",
    "INFLATE",
    "RADIUS_QUANTILE",
    "Frame",
    "durfee_frame",
    "durfee_frame_stage",
    "score_array",
    "smooth_frame",
    "smooth_sensitivity",
]

FRAME_METHODS = ("durfee", "smooth")
INFLATE = 0.20
RADIUS_QUANTILE = 0.995
SMOOTH_RADIUS_QUANTILE = 0.99
_AXES = ("x", "y")


@dataclass(frozen=True)
class Frame:
    """A released frame: per-axis centre and radius; limits are centre ± (1 + inflate)·radius."""

    method: str
    center: tuple[float, float]
    radius: tuple[float, float]
    inflate: float = INFLATE

    def limits(self, axis: int) -> tuple[float, float]:
        half = (1.0 + self.inflate) * self.radius[axis]
        return (self.center[axis] - half, self.center[axis] + half)

    @property
    def xlim(self) -> tuple[float, float]:
        return self.limits(0)

    @property
    def ylim(self) -> tuple[float, float]:
        return self.limits(1)


def _check_radius(radius: float, axis: str | None, lims: tuple[float, float]) -> None:
    if not (math.isfinite(radius) and radius > 0) or not all(map(math.isfinite, lims)):
        where = f" for {axis}-axis" if axis else ""
        raise BudgetError(
            f"The private frame radius{where} is not positive. Try a larger privacy budget."
        )


def durfee_frame(
    x: da.Array,
    directions: np.ndarray,
    *,
    n: int,
    eps: float,
    rng: Any,
    labels: tuple[str, str] = ("PC1", "PC2"),
    beta: float = DEFAULT_BETA,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> tuple[Frame, tuple[SpendRecord, ...]]:
    """The recommended pure-DP frame (SPEC §6.3) from two count passes over ``x`` (n × p).

    ``eps`` is the whole frame allocation; each of the four searches gets ``eps/4``.
    """
    return run(durfee_frame_stage(x, directions, n=n, eps=eps, rng=rng, labels=labels,
                                        beta=beta, max_steps=max_steps))


def durfee_frame_stage(
    x: da.Array,
    directions: np.ndarray,
    *,
    n: int,
    eps: float,
    rng: Any,
    labels: tuple[str, str] = ("PC1", "PC2"),
    beta: float = DEFAULT_BETA,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> Stage[tuple[Frame, tuple[SpendRecord, ...]]]:
    """:func:`durfee_frame` as a stage (:mod:`dppca_dask.graph.rounds`): its two count passes."""
    each = eps / 4.0
    grid = upper_grid(beta, max_steps)
    (pos, neg), = yield (row_block_sum(x, center_counts, directions, grid, beta,
                                       name="score-center-counts"),)
    records: list[SpendRecord] = []
    centers = []
    for a in range(2):
        rel = signed_quantile_from_counts(
            pos[a], neg[a], grid, n=n, q=0.5, eps=each, beta=beta, rng=rng, component="score",
            label=f"frame centre {_AXES[a]} ({labels[a]}): Durfee median",
        )
        centers.append(rel.value)
        records.extend(rel.records)
    center = np.array(centers)
    (dist,) = yield (row_block_sum(x, radius_counts, directions, center, grid,
                                   name="score-radius-counts"),)
    radii = []
    for a in range(2):
        rel = upper_from_counts(
            dist[a], grid, n=n, q=RADIUS_QUANTILE, eps=each, rng=rng, component="score",
            label=f"frame radius {_AXES[a]} ({labels[a]}): Durfee {RADIUS_QUANTILE} quantile",
        )
        radii.append(rel.value)
        records.extend(rel.records)
    frame = Frame("durfee", (centers[0], centers[1]), (radii[0], radii[1]))
    for a in range(2):
        _check_radius(radii[a], _AXES[a], frame.limits(a))
    return frame, tuple(records)


def smooth_sensitivity(values: np.ndarray, q: float, eps: float, delta: float) -> tuple[float, float]:
    """The q-quantile xs[r] and its β-smooth sensitivity, β = ε/(2 ln(1/δ)) (SPEC §6.4(i)).

    r = max(1, min(n, ⌈qn⌉)); A_k = max over windows [r+t−k−1, r+t] inside [1, n] of
    xs[r+t] − xs[r+t−k−1] (t = 0 … k+1; windows outside are skipped, no padding);
    SS = max_k e^{−βk}·A_k, stopping once e^{−βk}·(xs[n] − xs[1]) falls below the running SS.

    Examples
    --------
    >>> x = np.array([1, 2, 4, 7, 11, 16, 22, 29, 37, 46], dtype=float)
    >>> value, ss = smooth_sensitivity(x, 0.5, 1.0, 1e-3)
    >>> value, round(ss, 10)
    (11.0, 27.204302376)
    """
    xs = np.sort(np.asarray(values, dtype=np.float64))
    n = xs.size
    r = max(1, min(n, math.ceil(q * n)))
    beta = eps / (2.0 * math.log(1.0 / delta))
    span = float(xs[-1] - xs[0])
    ss = 0.0
    for k in range(n):
        weight = math.exp(-beta * k)
        if weight * span < ss:
            break
        t = np.arange(max(0, k + 2 - r), min(k + 1, n - r) + 1)
        if t.size == 0:
            continue
        widest = float(np.max(xs[r + t - 1] - xs[r + t - k - 2]))
        ss = max(ss, weight * widest)
    return float(xs[r - 1]), ss


def score_array(x: da.Array, directions: np.ndarray) -> da.Array:
    """The lazy n × 2 scores of ``x`` (columns in one chunk) on ``directions``."""
    return da.map_blocks(project, x, directions, dtype=np.float64,
                         chunks=(x.chunks[0], (directions.shape[1],)))


def smooth_frame(
    scores: np.ndarray,
    *,
    budget: PrivacyBudget,
    rng: Any,
    labels: tuple[str, str] = ("PC1", "PC2"),
) -> tuple[Frame, tuple[SpendRecord, ...]]:
    """The legacy v0.1.0 frame (SPEC §6.4(iii)) from in-memory scores (n × 2).

    ``budget`` is the frame's (ε, δ); each of the three quantiles gets a third of both.
    """
    third = PrivacyBudget(budget.eps / 3.0, budget.delta / 3.0)
    records = []
    centers = []
    for a in range(2):
        value, ss = smooth_sensitivity(scores[:, a], 0.5, third.eps, third.delta)
        rel = smooth_laplace(value, smooth_sensitivity=ss, budget=third, rng=rng,
                             component="score",
                             label=f"frame centre {_AXES[a]} ({labels[a]}): smooth-sensitivity median")
        centers.append(rel.value)
        records.append(rel.record)
    dist = np.hypot(scores[:, 0] - centers[0], scores[:, 1] - centers[1])
    value, ss = smooth_sensitivity(dist, SMOOTH_RADIUS_QUANTILE, third.eps, third.delta)
    rel = smooth_laplace(value, smooth_sensitivity=ss, budget=third, rng=rng, component="score",
                         label="frame radius: smooth-sensitivity 0.99 quantile of the distance")
    records.append(rel.record)
    radius = rel.value
    frame = Frame("smooth", (centers[0], centers[1]), (radius, radius))
    _check_radius(radius, None, frame.xlim)
    _check_radius(radius, None, frame.ylim)
    return frame, tuple(records)
