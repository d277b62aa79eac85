"""The ranged score frame (``frame="ranged"``, the default): equivariant to units and location.

Per axis a, with scores s = Xv_a and the frame ε_f split by :data:`RANGED_SHARES` (three data
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
   grid for Q_90, the 0.9 quantile of |s − c| (threshold n/10 below n: no run-on past the data,
   and the steps below the data cost nothing), and R = :data:`RADIUS_FACTOR`·Q_90.

Every grid is either multiplicative about 0 or placed by an earlier release, so the frame of
2^(k/256)·X + a is, in law, that of X moved and scaled alike for every k and for offsets a up to
about 10⁶ times the scores' spread (the refine step's resolution). The radius is a fixed multiple
of the 0.9 quantile, so how well it tracks the 0.995 quantile depends on the tail's shape: it
holds from clustered and uniform to t(3) tails, not for t(2) and heavier (docs/design/frame.md
states why and what was measured). Pure ε-DP; draw order: locate x, locate y, refine x, refine
y, radius x, radius y.
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
from dppca_dask.privacy.mechanisms import above_threshold, above_threshold_record
from dppca_dask.privacy.quantiles import bin_quantile_from_counts, bin_quantile_record
from dppca_dask.results.frame import Frame

__all__ = [
    "LOCATE_OCTAVES",
    "LOCATE_STEPS",
    "RANGED_MIN_N_EPS",
    "RANGED_QUANTILE",
    "RADIUS_FACTOR",
    "RANGED_SHARES",
    "REFINE_PARTS",
    "SCALE_OCTAVES",
    "SCALE_STEPS",
    "ranged_frame_stage",
    "ranged_records",
]

RANGED_SHARES = {"locate": 0.14, "refine": 0.13, "radius": 0.23}
"""Per-axis shares of the frame ε (two axes: they sum to 1)."""
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
"""R = F·Q_90: the 0.995 quantile of |s − median| is 1.0 (a cluster or a point mass at the
edge), 1.1 (uniform), 1.7 (Gaussian), 2.3 (t(5), Laplace), 3.0 (t(3)) times the 0.9 quantile,
all within [0.5, 3]/F for F = 2.4 with room for the search's noise; t(2) (4.8) and heavier
tails are not covered (docs/design/frame.md, "The ranged frame": why no two-quantile tail
extrapolation is used at this ε)."""
RANGED_MIN_N_EPS = 500.0
"""``frame="auto"`` (the recommended) is ``"ranged"`` when n·ε_frame reaches this, else
``"capped"``: below it the locate selection over 81 923 candidates fails too often (probability
about 81 923·e^(−0.14·n·ε_frame/4): 2·10⁻⁴ at 500, 0.3 at 200) and the radius walk from 2^−80
may stop below the data; the capped frame's fixed-unit grids are then the better bet
(docs/design/frame.md). An explicit ``frame="ranged"`` below it warns."""
_AXES = ("x", "y")


def _budgets(eps: float) -> dict[str, float]:
    return {name: share * eps for name, share in RANGED_SHARES.items()}


def _labels(axis: str, label: str) -> dict[str, str]:
    axis = f"{axis} ({label})" if label else axis
    return {
        "locate": f"frame centre {axis}: interval of the median on the signed "
                  f"geometric grid 2^(i/{LOCATE_STEPS})",
        "refine": f"frame centre {axis}: part of the median in the released window",
        "radius": f"frame radius {axis}: Durfee {RANGED_QUANTILE} quantile of |s - c| on the "
                  f"grid 2^(i/{SCALE_STEPS}), times {RADIUS_FACTOR:g}",
    }


def ranged_records(eps: float, labels: tuple[str, str] = ("", "")) -> list[SpendRecord]:
    """The planned records of the ranged frame of ``eps``, in the order the stage writes them
    (every field public: the grid sizes and search lengths are constants)."""
    budgets = _budgets(eps)
    names = [_labels(axis, lab) for axis, lab in zip(_AXES, labels, strict=True)]
    sizes = {"locate": len(signed_log_points(LOCATE_STEPS, LOCATE_OCTAVES)),
             "refine": REFINE_PARTS + 1}
    out = [bin_quantile_record(component="score", epsilon=budgets[step], points=sizes[step],
                               note=names[a][step])
           for step in ("locate", "refine") for a in range(2)]
    steps = len(log_points(SCALE_STEPS, SCALE_OCTAVES))
    out += [above_threshold_record(component="score", eps=budgets["radius"], steps=steps,
                                   label=names[a]["radius"]) for a in range(2)]
    return out


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
    budgets = _budgets(eps)
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
    radii, scales, capped = [], [], []
    radius_cells: list[tuple[float, float]] = []
    for a in range(2):
        release = above_threshold(dist[a], threshold=RANGED_QUANTILE * n,
                                  eps=budgets["radius"], rng=rng, component="score",
                                  label=names[a]["radius"])
        records.append(release.record)
        index, hit_end = release.value
        q90 = float(grid[index])
        radii.append(RADIUS_FACTOR * q90)
        scales.append(q90)
        capped.append(hit_end)
        below = float(grid[index - 1]) if index > 0 else 0.0  # Q_90 in (below, q90]
        radius_cells.append((RADIUS_FACTOR * below, math.inf if hit_end else radii[-1]))
    frame = Frame("ranged", (centers[0], centers[1]), (radii[0], radii[1]),
                  scale=(scales[0], scales[1]),
                  center_cell=(center_cells[0], center_cells[1]),
                  radius_cell=(radius_cells[0], radius_cells[1]))
    _check(frame, labels, outside, capped)
    return frame, tuple(records)


def _check(frame: Frame, labels: tuple[str, str], outside: list[bool],
           capped: list[bool]) -> None:
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
