"""The ranged score frame (``frame="ranged"``, the default): equivariant to units and location.

Per axis a, with scores s = Xv_a and the frame ε_f split by :func:`ranged_budgets` (three data
passes; docs/design/frame.md, "The ranged frame", for the proof and the measurements):

1. **locate** -- counts of s below every point of the signed geometric grid ±2^(i/256),
   |i| ≤ 256·80 (:func:`~dppca_dask.kernels.grids.signed_log_points`); the exponential mechanism
   over its intervals (:func:`~dppca_dask.privacy.quantiles.bin_quantile_from_counts`) picks one
   holding the median, [t_j, t_(j+1)) of width w (0.27 % of its magnitude);
2. **refine** -- counts of s on the window [t_j − w, t_(j+1) + w] cut into
   :data:`REFINE_PARTS` equal parts; the same selection picks the part holding the median and the
   centre c is its midpoint (resolution 3w/REFINE_PARTS ≈ 1.7e-7 of |c|);
3. **radius** -- counts of |s − c| below 2^(i/16), |i| ≤ 16·80
   (:func:`~dppca_dask.kernels.grids.log_points`); Durfee's AboveThreshold walks up the whole
   grid for Q, the 0.9 quantile of |s − c| (threshold n/10 below n: no run-on past the data,
   and the steps below the data cost nothing);
4. **tail** (only where n·ε_f > :data:`TAIL_MIN_N_EPS`; no further pass: the radius pass's
   counts) -- three Laplace counts of |s − c| ≥ Q, 2Q and 4Q (sensitivity 1 each, given the
   released c and Q), and R = F·Q with F from the tail they show (:func:`radius_factor`, a
   public map of the released counts): F = :data:`RADIUS_FACTOR` unless the counts' confidence
   bounds on q_0.995/Q say that factor misses.

Every grid is either multiplicative about 0 or placed by an earlier release, so the frame of
2^(k/256)·X + a is, in law, that of X moved and scaled alike for every k and for offsets a up to
about 10⁶ times the scores' spread (the refine step's resolution). Where no budget is left for
the tail counts (n·ε_f ≤ :data:`TAIL_MIN_N_EPS`, the demo's 583 included) the radius is the
fixed multiple F = 2.4 of the 0.9 quantile: it holds from clustered and uniform to t(3) tails,
not for t(2) and heavier; with the tail counts it holds for t(1)–t(3) tails too from n·ε_f ≈ 3500
(docs/design/frame.md states why and what was measured). Pure ε-DP; draw order: locate x,
locate y, refine x, refine y, radius x, radius y, then the tail counts of x (Q, 2Q, 4Q), of y.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import dask.array as da
import numpy as np

from dppca_dask.errors import BudgetError, UtilityWarning
from dppca_dask.graph.passes import row_block_sum
from dppca_dask.graph.rounds import Stage
from dppca_dask.kernels.grids import log_points, signed_log_points, window_points
from dppca_dask.kernels.scores import distance_log_counts, signed_log_counts, window_counts
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.mechanisms import (
    above_threshold,
    above_threshold_record,
    laplace_record,
    laplace_release,
)
from dppca_dask.privacy.quantiles import bin_quantile_from_counts, bin_quantile_record
from dppca_dask.results.frame import Frame

__all__ = [
    "LOCATE_OCTAVES",
    "LOCATE_STEPS",
    "RADIUS_FACTOR",
    "RADIUS_FACTOR_MAX",
    "RADIUS_FACTOR_MIN",
    "RANGED_MIN_N_EPS",
    "RANGED_QUANTILE",
    "RANGED_SHARES",
    "REFINE_PARTS",
    "SCALE_OCTAVES",
    "SCALE_STEPS",
    "TAIL_FACTORS",
    "TAIL_MAX_SHARE",
    "TAIL_MIN_N_EPS",
    "TAIL_QUANTILE",
    "TAIL_SPLIT",
    "TAIL_Z",
    "radius_factor",
    "ranged_budgets",
    "ranged_frame_stage",
    "ranged_records",
    "tail_ratio",
    "tail_share",
]

RANGED_SHARES = {"locate": 0.14, "refine": 0.13, "radius": 0.23}
"""Per-axis shares of the part of the frame ε not spent on the tail counts (all of it where
n·ε_f ≤ :data:`TAIL_MIN_N_EPS`; two axes: they sum to 1)."""
LOCATE_STEPS, LOCATE_OCTAVES = 256, 80
"""The locate grid ±2^(i/256), |i| ≤ 256·80: magnitudes 2^−80 … 2^80 (8e-25 … 1.2e24)."""
REFINE_PARTS = 3 * 16384
"""The refine window (three locate intervals) is cut into this many equal parts."""
SCALE_STEPS, SCALE_OCTAVES = 16, 80
"""The radius grid 2^(i/16), |i| ≤ 16·80, for |s − c| (4.4 % steps)."""
RANGED_QUANTILE = 0.9
"""The quantile of |s − c| the radius search targets: its threshold sits n/10 below n, so the
search almost never runs past the data (it would for the 0.995 quantile itself at this ε), and
every step below the data is almost free (count 0 against 0.9·n)."""
RADIUS_FACTOR = 2.4
"""R = F·Q_90 without tail counts (and F's default with them): the 0.995 quantile of
|s − median| is 1.0 (a cluster or a point mass at the edge), 1.1 (uniform), 1.7 (Gaussian), 2.3
(t(5), Laplace), 3.0 (t(3)) times the 0.9 quantile, all within [0.5, 3]/F for F = 2.4 with room
for the search's noise; t(2) (4.8) and heavier tails are not covered (docs/design/frame.md, "The
ranged frame": why the demo's budget affords no tail counts)."""
RADIUS_FACTOR_MAX = 64.0
"""The largest F the tail counts can set (a t(1) tail needs about 20)."""
RADIUS_FACTOR_MIN = 2.0
"""The smallest F the tail counts can set: below it a count whose noise happened to be 3–5
scales low (which the bounds miss with probability of order 1 %) would put t(3) tails (q_0.995
= 3.2·Q) under 0.5 × their quantile, while lower factors gain little on the light shapes
(clusters, uniform: q_0.995 ≈ Q) that could use them."""
TAIL_MIN_N_EPS = 600.0
"""The tail counts get a share of the frame ε only where n·ε_f exceeds this: up to it the centre
and Q need the whole frame ε (the demo: 5000 × 0.1167 = 583), and below it a count's noise
(about 1/ε counts) would swamp the tails it measures."""
TAIL_MAX_SHARE = 0.95
"""The tail counts' share of ε_f is TAIL_MAX_SHARE·(1 − TAIL_MIN_N_EPS/(n·ε_f)): 0 at the
threshold, 0.74 at n·ε_f = 3500; the centre and Q keep at least the ε they get at the threshold."""
TAIL_SPLIT = (1 / 6, 1 / 3, 1 / 2)
"""Shares of an axis's tail ε for the counts of |s − c| ≥ Q, 2Q and 4Q: the farthest count
tells a heavy tail from an outer cluster and needs the most precision."""
TAIL_QUANTILE = 0.995
"""The quantile of |s − c| the tail counts estimate (the frame's target)."""
TAIL_Z = 3.0
"""The tail counts' confidence bounds are count ± TAIL_Z Laplace scales (each misses with
probability e^(−3)/2 = 2.5 %)."""
TAIL_FACTORS = (0.65, 1.7, 2.0)
"""(low, high, cap) of :func:`radius_factor`: F = median(low·r_hi, :data:`RADIUS_FACTOR`,
high·r_lo), at most cap·r_hi, at least :data:`RADIUS_FACTOR_MIN`, with [r_lo, r_hi] the
counts' bounds on q_0.995/Q."""
RANGED_MIN_N_EPS = 500.0
"""``frame="auto"`` (the recommended) is ``"ranged"`` when n·ε_frame reaches this, else
``"capped"``: below it the locate selection over 81 923 candidates fails too often (probability
about 81 923·e^(−0.14·n·ε_frame/4): 2·10⁻⁴ at 500, 0.3 at 200) and the radius walk from 2^−80
may stop below the data; the capped frame's fixed-unit grids are then the better bet
(docs/design/frame.md). An explicit ``frame="ranged"`` below it warns."""
_AXES = ("x", "y")


def tail_share(n: int, eps: float) -> float:
    """The share of the frame ε spent on the tail counts (both axes), from n and ε only."""
    return TAIL_MAX_SHARE * max(0.0, 1.0 - TAIL_MIN_N_EPS / (n * eps))


def ranged_budgets(eps: float, n: int) -> dict[str, Any]:
    """The one split of the frame ``eps`` over n rows: per axis, ε of locate, refine and radius
    (floats) and of the three tail counts (``"tail"``: a tuple, empty where
    :func:`tail_share` is 0). Two axes sum to ``eps`` (basic composition)."""
    tail = tail_share(n, eps)
    out: dict[str, Any] = {name: share * (1.0 - tail) * eps
                           for name, share in RANGED_SHARES.items()}
    out["tail"] = tuple(0.5 * tail * eps * w for w in TAIL_SPLIT) if tail > 0 else ()
    return out


def _labels(axis: str, label: str) -> dict[str, str]:
    axis = f"{axis} ({label})" if label else axis
    return {
        "locate": f"frame centre {axis}: interval of the median on the signed "
                  f"geometric grid 2^(i/{LOCATE_STEPS})",
        "refine": f"frame centre {axis}: part of the median in the released window",
        "radius": f"frame radius {axis}: Durfee {RANGED_QUANTILE} quantile Q of |s - c| on the "
                  f"grid 2^(i/{SCALE_STEPS})",
        **{f"tail{j}": f"frame tail {axis}: count of |s - c| >= {2 ** j} x Q"
           for j in range(len(TAIL_SPLIT))},
    }


def ranged_records(eps: float, n: int, labels: tuple[str, str] = ("", "")) -> list[SpendRecord]:
    """The planned records of the ranged frame of ``eps`` over ``n`` rows, in the order the
    stage writes them (every field public: the grid sizes and search lengths are constants, the
    split a function of n and ε)."""
    budgets = ranged_budgets(eps, n)
    names = [_labels(axis, lab) for axis, lab in zip(_AXES, labels, strict=True)]
    sizes = {"locate": len(signed_log_points(LOCATE_STEPS, LOCATE_OCTAVES)),
             "refine": REFINE_PARTS + 1}
    out = [bin_quantile_record(component="score", epsilon=budgets[step], points=sizes[step],
                               note=names[a][step])
           for step in ("locate", "refine") for a in range(2)]
    steps = len(log_points(SCALE_STEPS, SCALE_OCTAVES))
    out += [above_threshold_record(component="score", eps=budgets["radius"], steps=steps,
                                   label=names[a]["radius"]) for a in range(2)]
    out += [laplace_record(component="score", eps=e, draws=1, sensitivity=1.0,
                           label=names[a][f"tail{j}"])
            for a in range(2) for j, e in enumerate(budgets["tail"])]
    return out


def tail_ratio(counts: Any, level: float) -> float:
    """q / Q from tail counts: ``counts[j]`` ≈ #{|s − c| ≥ 2^j·Q}, ``level`` the number of
    scores beyond the quantile q (n·(1 − q)). The counts are made non-negative and
    non-increasing, then read as a tail function through the points (2^j, counts[j]), linear in
    log-log: q lies where it crosses ``level``; past the last point it is extrapolated with the
    power law through the first and the last point. 1 where ``counts[0] <= level`` (q ≤ Q);
    ``inf`` where the last count is not below the first. Post-processing of released counts.

    Examples
    --------
    >>> tail_ratio([500, 500 / 2 ** 1.5, 500 / 4 ** 1.5], 25)  # Pareto 1.5: 20^(1/1.5)
    7.368062997280773
    >>> round(tail_ratio([500, 100, 10], 25), 3)  # between 2Q and 4Q
    3.036
    """
    m = np.minimum.accumulate(np.maximum(np.asarray(counts, dtype=np.float64), 0.0))
    if m[0] <= level:
        return 1.0
    for j in range(1, m.size):
        if m[j] < level:
            if m[j] <= 0.0:
                return 2.0 ** (j - 1)
            return 2.0 ** (j - 1 + math.log(m[j - 1] / level) / math.log(m[j - 1] / m[j]))
    if m[-1] >= m[0]:
        return math.inf
    alpha = math.log(m[0] / m[-1]) / ((m.size - 1) * math.log(2.0))  # Pareto tail index
    log2_r = (m.size - 1) + math.log2(m[-1] / level) / alpha
    return math.inf if log2_r > 1000 else 2.0 ** log2_r


def radius_factor(counts: Any, scales: Any, n: int) -> float:
    """F of R = F·Q from the released tail counts (``counts[j]``: #{|s − c| ≥ 2^j·Q} plus
    Laplace noise of scale ``scales[j]``) over n rows: post-processing of released values.

    The bounds r_lo, r_hi on q_0.995/Q are :func:`tail_ratio` of the counts moved by
    :data:`TAIL_Z` scales (down for r_lo, up for r_hi; the first count both ways). With (low,
    high, cap) = :data:`TAIL_FACTORS`, F = median(low·r_hi, :data:`RADIUS_FACTOR`, high·r_lo):
    the default factor stays unless the counts say it is too large (r_hi small: F ≥ low·r_hi)
    or too small (r_lo large: F = high·r_lo); then F ≤ cap·r_hi (a far count near 0 caps a
    heavy-looking start: an outer cluster, not a tail), and F within
    [:data:`RADIUS_FACTOR_MIN`, :data:`RADIUS_FACTOR_MAX`]. Noisy counts give wide bounds, and
    F = :data:`RADIUS_FACTOR`.

    Examples
    --------
    >>> round(radius_factor([500, 180, 65], [1.0, 1.0, 1.0], 5000), 2)  # a t(1.5)-like tail
    5.22
    >>> radius_factor([500, 0, 0], [1.0, 1.0, 1.0], 5000)  # nothing beyond 2Q
    2.0
    >>> radius_factor([500, 180, 65], [300.0, 300.0, 300.0], 5000)  # too noisy to tell
    2.4
    """
    m = np.asarray(counts, dtype=np.float64)
    b = TAIL_Z * np.asarray(scales, dtype=np.float64)
    level = (1.0 - TAIL_QUANTILE) * n
    ends = [m[0] - b[0], m[0] + b[0]]
    r_lo = min(tail_ratio(np.r_[first, m[1:] - b[1:]], level) for first in ends)
    r_hi = max(tail_ratio(np.r_[first, m[1:] + b[1:]], level) for first in ends)
    low, high, cap = TAIL_FACTORS
    factor = sorted([low * r_hi, RADIUS_FACTOR, high * r_lo])[1]
    return float(min(max(min(factor, cap * r_hi), RADIUS_FACTOR_MIN), RADIUS_FACTOR_MAX))


def _interval(points: np.ndarray, j: int) -> tuple[float, float, bool]:
    """The released interval j of :func:`bin_quantile_from_counts` on ``points`` as a bounded
    interval: the unbounded ends are replaced by the first or last bounded one (``True``: the
    selection fell outside the grid's range)."""
    outside = j == 0 or j == len(points)
    j = min(max(j, 1), len(points) - 1)
    return float(points[j - 1]), float(points[j]), outside


def ranged_frame_stage(
    x: da.Array,
    directions: np.ndarray,
    *,
    n: int,
    eps: float,
    rng: Any,
    labels: tuple[str, str] = ("PC1", "PC2"),
) -> Stage[tuple[Frame, tuple[SpendRecord, ...]]]:
    """The ranged frame of ``eps`` (the whole frame allocation) as a stage: three count passes."""
    budgets = ranged_budgets(eps, n)
    if n * eps < RANGED_MIN_N_EPS:
        warnings.warn(
            f"The ranged frame needs n * eps_frame >= {RANGED_MIN_N_EPS:g} to locate the scores "
            f"reliably; here it is {n * eps:.3g}, so the frame may be misplaced or far too "
            "narrow. Use frame='auto' (it takes 'capped' here) or a larger budget.",
            UtilityWarning, stacklevel=3)
    names = [_labels(axis, lab) for axis, lab in zip(_AXES, labels, strict=True)]
    records: list[SpendRecord] = []
    outside = [False, False]

    def select(counts: np.ndarray, step: str, a: int, q: float = 0.5) -> int:
        j, record = bin_quantile_from_counts(counts, n=n, q=q, epsilon=budgets[step], rng=rng,
                                             component="score", note=names[a][step])
        records.append(record)
        return j

    (located,) = yield (row_block_sum(x, signed_log_counts, directions, LOCATE_STEPS,
                                      LOCATE_OCTAVES, name="score-frame-locate"),)
    points = signed_log_points(LOCATE_STEPS, LOCATE_OCTAVES)
    lows, widths = [], []
    for a in range(2):
        lo, hi, out = _interval(points, select(located[a], "locate", a))
        outside[a] |= out
        lows.append(lo - (hi - lo))
        widths.append(3.0 * (hi - lo))
    (refined,) = yield (row_block_sum(x, window_counts, directions, (lows[0], lows[1]),
                                      (widths[0], widths[1]), REFINE_PARTS,
                                      name="score-frame-refine"),)
    centers, center_cells = [], []
    for a in range(2):
        window = window_points(lows[a], widths[a], REFINE_PARTS)
        j = select(refined[a], "refine", a)
        lo, hi, _ = _interval(window, j)
        centers.append(0.5 * (lo + hi))
        # the part the centre stands for; an unbounded end part leaves that side open
        center_cells.append((-math.inf if j == 0 else lo, math.inf if j == len(window) else hi))
    (dist,) = yield (row_block_sum(x, distance_log_counts, directions, np.array(centers),
                                   SCALE_STEPS, SCALE_OCTAVES, name="score-frame-radius"),)
    grid = log_points(SCALE_STEPS, SCALE_OCTAVES)
    indices, scales, capped = [], [], []
    for a in range(2):
        release = above_threshold(dist[a], threshold=RANGED_QUANTILE * n,
                                  eps=budgets["radius"], rng=rng, component="score",
                                  label=names[a]["radius"])
        records.append(release.record)
        index, hit_end = release.value
        indices.append(index)
        scales.append(float(grid[index]))
        capped.append(hit_end)
    factors = [RADIUS_FACTOR, RADIUS_FACTOR]
    for a in range(2):
        if not budgets["tail"]:
            break
        noisy = []
        for j, e in enumerate(budgets["tail"]):  # #{|s - c| >= 2^j Q}: sensitivity 1 given c, Q
            at = min(indices[a] + SCALE_STEPS * j, grid.size - 1)
            release = laplace_release(np.array([n - dist[a][at]], dtype=np.float64),
                                      sensitivity=1.0, eps=e, rng=rng, component="score",
                                      label=names[a][f"tail{j}"])
            records.append(release.record)
            noisy.append(float(release.value[0]))
        factors[a] = radius_factor(noisy, [1.0 / e for e in budgets["tail"]], n)
    radii = [factors[a] * scales[a] for a in range(2)]
    radius_cells: list[tuple[float, float]] = []
    for a in range(2):  # Q_90 in (below, Q]: the radius stands for that cell times the factor
        below = float(grid[indices[a] - 1]) if indices[a] > 0 else 0.0
        radius_cells.append((factors[a] * below, math.inf if capped[a] else radii[a]))
    frame = Frame("ranged", (centers[0], centers[1]), (radii[0], radii[1]),
                  scale=(scales[0], scales[1]),
                  center_cell=(center_cells[0], center_cells[1]),
                  radius_cell=(radius_cells[0], radius_cells[1]))
    _check(frame, labels, outside, capped, factors)
    return frame, tuple(records)


def _check(frame: Frame, labels: tuple[str, str], outside: list[bool],
           capped: list[bool], factors: list[float]) -> None:
    """Refuse a frame that is not finite and warn where a search hit the end of its grid
    (post-processing of released values only)."""
    for a in range(2):
        axis = f"{_AXES[a]} axis ({labels[a]})"
        lims = frame.limits(a)
        if not (math.isfinite(frame.radius[a]) and frame.radius[a] > 0
                and all(map(math.isfinite, lims))):
            raise BudgetError(f"The private frame radius for {axis} is not positive or finite. "
                              "Try a larger privacy budget.")
        if outside[a]:
            warnings.warn(
                f"The private frame's {axis}: the centre search chose an end of its grid "
                f"(scores of magnitude beyond 2^{LOCATE_OCTAVES}), so the frame is probably "
                "misplaced. Rescale the data by a public factor and rerun.",
                UtilityWarning, stacklevel=4)
        if frame.scale is not None and frame.scale[a] <= 2.0 ** -SCALE_OCTAVES:
            warnings.warn(
                f"The private frame's {axis}: {100 * RANGED_QUANTILE:.0f} % of the scores lie "
                f"within 2^-{SCALE_OCTAVES} of the centre (a point mass or a spread below the "
                "grid's range), so the frame may be far too narrow.",
                UtilityWarning, stacklevel=4)
        if capped[a]:
            warnings.warn(
                f"The private frame's {axis}: the radius search ran off its grid (distances "
                f"beyond 2^{SCALE_OCTAVES}), so the frame is wrong. Rescale the data by a "
                "public factor and rerun.", UtilityWarning, stacklevel=4)
        if factors[a] >= RADIUS_FACTOR_MAX:
            warnings.warn(
                f"The private frame's {axis}: the tail counts show a tail heavier than the "
                f"frame covers (radius capped at {RADIUS_FACTOR_MAX:g} x the 0.9 quantile), so "
                "the frame may be too narrow.", UtilityWarning, stacklevel=4)
