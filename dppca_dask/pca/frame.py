"""The private frame of ``dp_score``: a released rectangle that holds (nearly) all scores.

Four constructions (docs/spec/SPEC_dppca.md §6.3, §6.4; docs/design/frame.md):

* ``"ranged"`` (recommended, the default; pure ε-DP) -- equivariant to units and location: a
  private interval for the centre on a signed geometric grid, a refined centre inside it, then
  a private 0.9 quantile Q of |s − c| on a two-sided geometric grid, R = 2.4·Q, and where
  n·ε_frame exceeds 600 three noisy tail counts (beyond Q, 2Q, 4Q) that set the factor
  (:mod:`dppca_dask.pca.frame_ranged`). Three data passes.

* ``"durfee"`` (the seed's; pure ε-DP, no δ) -- per axis, the centre c is Durfee's unbounded
  two-sided median and the radius R the one-sided 0.995 quantile of |s − c|; each of the four
  searches gets ε_frame/4 (basic composition); the frame is c ± 1.2·R per axis. Two data passes
  (the radius needs the released centre): each returns count vectors on the public geometric grid
  (:mod:`dppca_dask.kernels.scores`) and the noisy searches run on the driver.
* ``"capped"`` (pure ε-DP; the radius cannot run away) -- the same centre (its share of ε is
  :data:`CAPPED_SHARES`), then from the same radius count pass per axis: S = Durfee's 0.5
  quantile of |s − c| (a coarse scale; its threshold is n/2 below n), and Q = Durfee's
  :data:`CAPPED_QUANTILE` quantile searched on the public grid points in [S, U·S] only (a capped
  search: it stops at U·S at the latest); R = Q, so S ≤ R ≤ U·S by construction
  (U = :data:`CAPPED_SPAN`). Same passes as ``"durfee"``.
* ``"smooth"`` (legacy, the released v0.1.0 frame) -- smooth-sensitivity quantiles (Nissim,
  Raskhodnikova & Smith 2007): the two medians and the 0.99 quantile of the Euclidean distance
  ‖s − c‖, each with (ε_frame/3, δ_frame/3); a square frame c ± 1.2·R. It needs the n × 2
  scores on the driver and δ (see :func:`dppca_dask.dp_score` for how that δ is taken).

RNG order: c_x (positive-side draws, then negative-side), c_y, R_x, R_y (SPEC §6.9); capped:
c_x, c_y, S_x, Q_x, S_y, Q_y; legacy: median x, median y, radius.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import dask.array as da
import numpy as np

from dppca_dask.errors import BudgetError, UtilityWarning
from dppca_dask.graph.passes import row_block_sum
from dppca_dask.graph.rounds import Stage, run
from dppca_dask.kernels.scores import center_counts, radius_counts
from dppca_dask.pca.frame_ranged import ranged_frame_stage, ranged_records
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import smooth_laplace, smooth_laplace_record
from dppca_dask.privacy.quantiles import (
    DEFAULT_BETA,
    DEFAULT_MAX_STEPS,
    signed_quantile_from_counts,
    signed_quantile_records,
    upper_from_counts,
    upper_grid,
    upper_records,
)
from dppca_dask.results.frame import INFLATE, Frame

__all__ = [
    "CAPPED_COARSE",
    "CAPPED_QUANTILE",
    "CAPPED_SHARES",
    "CAPPED_SPAN",
    "FRAME_METHODS",
    "INFLATE",
    "RADIUS_QUANTILE",
    "Frame",
    "capped_frame_stage",
    "capped_steps",
    "capped_window",
    "coarse_indices",
    "durfee_frame",
    "durfee_frame_stage",
    "frame_budgets",
    "frame_records",
    "frame_stage",
    "signed_cell",
    "smooth_frame",
    "smooth_sensitivity",
    "upper_cell",
]

FRAME_METHODS = ("auto", "ranged", "durfee", "capped", "smooth")
RADIUS_QUANTILE = 0.995
SMOOTH_RADIUS_QUANTILE = 0.99
_AXES = ("x", "y")

CAPPED_QUANTILE = RADIUS_QUANTILE
"""The quantile of |s − c| that the capped frame's radius search targets (as ``"durfee"``)."""
CAPPED_SPAN = 8.0
"""U: the radius search runs on the grid points in [S, U·S] only (S: the private median of
|s − c|), so S ≤ R ≤ U·S; docs/design/frame.md for the choice."""
CAPPED_SCALE_QUANTILE = 0.5
"""The quantile of |s − c| whose private value S is the capped search's coarse scale."""
CAPPED_COARSE = 20
"""The scale search uses every 20th grid point (:func:`coarse_indices`)."""
CAPPED_SHARES = {"centre": 0.10, "scale": 0.12, "radius": 0.28}
"""Per-axis shares of the frame ε (two axes: they sum to 1/2)."""


def _check_radius(radius: float, axis: str | None, lims: tuple[float, float]) -> None:
    if not (math.isfinite(radius) and radius > 0) or not all(map(math.isfinite, lims)):
        where = f" for {axis}-axis" if axis else ""
        raise BudgetError(
            f"The private frame radius{where} is not positive. Try a larger privacy budget."
        )


def _check_resolution(frame: Frame, labels: tuple[str, str], floor: float, beta: float,
                      capped: tuple[bool, bool] = (False, False)) -> None:
    """Warn (:class:`~dppca_dask.errors.UtilityWarning`) when the released frame shows that the
    public grids do not fit the scores -- post-processing of the released values only.

    The grids are fixed in score units (docs/design/frame.md): a durfee radius within 5 steps
    of the grid's first point ``floor`` (the capped frame's scale at its coarse grid's first
    point) means a spread the grid does not resolve, so the frame is too wide; a centre far from 0 is resolved to 1 % of |c| only, and a capped radius within 1.5 x
    the median distance S means the scores sit at one distance from a centre that missed them
    (a Gaussian gives about 4 x S); a capped search that reached its cap U·S clamps a heavy
    tail. benchmarks/heldout.py measures each case."""
    for a in range(2):
        axis = f"{_AXES[a]} axis ({labels[a]})"
        # capped: S at the coarse grid's first point; durfee: r within 5 fine steps of 0
        spread, limit = ((frame.scale[a], floor) if frame.scale is not None
                         else (frame.radius[a], 5 * floor))
        if spread <= limit * (1 + 1e-12):
            warnings.warn(
                f"The private frame's {axis}: the search stopped at {spread:.3g}, within "
                f"{limit / floor:.0f} step(s) of its grid's first point ({floor:.3g} in score "
                "units), so the scores' spread is probably far smaller than the grid resolves "
                "and the frame far too wide. The grids are in the data's units: rescale the "
                "data by a public factor (e.g. to about unit spread) and rerun.",
                UtilityWarning, stacklevel=4)
        centre = frame.center[a]
        if (beta - 1.0) * abs(centre) > frame.radius[a] / 10:  # resolution > 10 % of r
            warnings.warn(
                f"The private frame's {axis}: the centre {centre:.6g} is far from 0 against "
                f"the radius {frame.radius[a]:.3g}; the centre search resolves it to "
                f"{100 * (beta - 1):.2g} % of |c| only, so the frame may be off-centre and "
                "wide. Subtract a public location (e.g. a known mean) from the data and rerun.",
                UtilityWarning, stacklevel=4)
        if capped[a]:
            warnings.warn(
                f"The private frame's {axis}: the capped radius search reached its cap "
                f"{CAPPED_SPAN:g} x the scale (a heavy tail), so more than "
                f"{100 * (1 - CAPPED_QUANTILE):.2g} % of the scores may lie outside the frame "
                "and be counted in the edge cells.", UtilityWarning, stacklevel=4)


def upper_cell(grid: np.ndarray, value: float, capped: bool) -> tuple[float, float]:
    """The grid cell a one-sided Durfee search's answer ``value`` (a point of ``grid``) stands
    for: (the point below it, ``value``] -- 0 below the first point, an open upper end where the
    search ran off its grid or to its cap (a public function of the released value).

    Examples
    --------
    >>> g = upper_grid(1.01, 5)
    >>> [round(v, 6) for v in upper_cell(g, float(g[2]), False)]
    [0.0201, 0.030301]
    >>> upper_cell(g, float(g[0]), True)[1]
    inf
    """
    i = int(np.searchsorted(grid, value, side="left"))
    below = float(grid[i - 1]) if i > 0 else 0.0
    return below, (math.inf if capped else float(value))


def signed_cell(value: float, capped: bool, beta: float = DEFAULT_BETA) -> tuple[float, float]:
    """The cell of the signed grid ±(β^k − 1) that a two-sided Durfee median ``value`` stands
    for. :func:`~dppca_dask.privacy.quantiles.signed_quantile_from_counts` answers the first
    point of a side with half the values beyond it, so the median lies in [(v + 1)/β − 1, v]
    for v > 0 and in [v, 1 − (1 − v)/β] for v < 0; 0 (both first searches stopped at once)
    stands for [−(β − 1), β − 1]. Unbounded when a side's search ran off its grid.

    Examples
    --------
    >>> [round(v, 6) for v in signed_cell(0.0201, False)]
    [0.01, 0.0201]
    >>> [round(v, 6) for v in signed_cell(0.0, False)]
    [-0.01, 0.01]
    >>> [round(v, 6) for v in signed_cell(-0.0201, False)]
    [-0.0201, -0.01]
    """
    if capped:
        return -math.inf, math.inf
    if value > 0:
        return float((value + 1.0) / beta - 1.0), float(value)
    if value < 0:
        return float(value), float(1.0 - (1.0 - value) / beta)
    return -(beta - 1.0), beta - 1.0


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


def frame_budgets(method: str, budget: PrivacyBudget) -> dict[str, PrivacyBudget]:
    """Each search's budget of a frame of ``budget`` (the one split; pure DP searches get no δ):
    ``centre`` (each axis's Durfee median), ``radius`` and, for "capped", ``scale``; for
    "smooth" each of the three smooth-sensitivity quantiles (``centre``, ``radius``) gets a third
    of ε and δ."""
    if method == "durfee":
        each = PrivacyBudget(budget.eps / 4.0, 0.0)
        return {"centre": each, "radius": each}
    if method == "capped":
        return {name: PrivacyBudget(share * budget.eps, 0.0)
                for name, share in CAPPED_SHARES.items()}
    third = PrivacyBudget(budget.eps / 3.0, budget.delta / 3.0)
    return {"centre": third, "radius": third}


def _centre_stage(
    x: da.Array, directions: np.ndarray, grid: np.ndarray, *, n: int, eps: float, rng: Any,
    labels: tuple[str, str], beta: float,
) -> Stage[tuple[list[float], list[SpendRecord], list[tuple[float, float]]]]:
    """The frame centre of both axes (and the grid cell each stands for) (one count pass, then a Durfee median per axis at
    ``eps`` each), shared by the durfee and the capped frames."""
    (pos, neg), = yield (row_block_sum(x, center_counts, directions, grid, beta,
                                       name="score-center-counts"),)
    records: list[SpendRecord] = []
    centers = []
    cells = []
    for a in range(2):
        rel = signed_quantile_from_counts(
            pos[a], neg[a], grid, n=n, q=0.5, eps=eps, beta=beta, rng=rng, component="score",
            label=f"frame centre {_AXES[a]} ({labels[a]}): Durfee median",
        )
        centers.append(rel.value)
        cells.append(signed_cell(rel.value, rel.capped, beta))
        records.extend(rel.records)
    return centers, records, cells


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
    each = frame_budgets("durfee", PrivacyBudget(eps, 0.0))["radius"].eps
    grid = upper_grid(beta, max_steps)
    centers, records, cells = yield from _centre_stage(x, directions, grid, n=n, eps=each,
                                                       rng=rng, labels=labels, beta=beta)
    (dist,) = yield (row_block_sum(x, radius_counts, directions, np.array(centers), grid,
                                   name="score-radius-counts"),)
    radii, radius_cells = [], []
    for a in range(2):
        rel = upper_from_counts(
            dist[a], grid, n=n, q=RADIUS_QUANTILE, eps=each, rng=rng, component="score",
            label=f"frame radius {_AXES[a]} ({labels[a]}): Durfee {RADIUS_QUANTILE} quantile",
        )
        radii.append(rel.value)
        radius_cells.append(upper_cell(grid, rel.value, rel.capped))
        records.extend(rel.records)
    frame = Frame("durfee", (centers[0], centers[1]), (radii[0], radii[1]),
                  center_cell=(cells[0], cells[1]),
                  radius_cell=(radius_cells[0], radius_cells[1]))
    for a in range(2):
        _check_radius(radii[a], _AXES[a], frame.limits(a))
    _check_resolution(frame, labels, float(grid[0]), beta)
    return frame, tuple(records)


def capped_frame_stage(
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
    """The capped frame as a stage (module docstring; proof in docs/design/frame.md).

    ``eps`` is the whole frame allocation, split per axis by :data:`CAPPED_SHARES`. The passes
    are those of :func:`durfee_frame_stage`; the scale S and the capped search both run on the
    one radius count vector of their axis.
    """
    shares = {name: b.eps for name, b in frame_budgets("capped", PrivacyBudget(eps, 0.0)).items()}
    grid = upper_grid(beta, max_steps)
    coarse = coarse_indices(len(grid))
    centers, records, cells = yield from _centre_stage(x, directions, grid, n=n,
                                                       eps=shares["centre"], rng=rng,
                                                       labels=labels, beta=beta)
    (dist,) = yield (row_block_sum(x, radius_counts, directions, np.array(centers), grid,
                                   name="score-radius-counts"),)
    radii, scales, capped = [], [], []
    radius_cells: list[tuple[float, float]] = []
    for a in range(2):
        scale = upper_from_counts(
            dist[a][coarse], grid[coarse], n=n, q=CAPPED_SCALE_QUANTILE,
            eps=shares["scale"], rng=rng,
            component="score", warn=False,
            label=f"frame scale {_AXES[a]} ({labels[a]}): Durfee median of |s - c| on the "
                  f"coarse grid")
        window = capped_window(grid, scale.value)
        search = upper_from_counts(
            dist[a][window], grid[window], n=n, q=CAPPED_QUANTILE, eps=shares["radius"],
            rng=rng, component="score", warn=False,
            label=f"frame radius {_AXES[a]} ({labels[a]}): Durfee {CAPPED_QUANTILE} quantile "
                  f"capped at {CAPPED_SPAN:g} x the scale")
        radii.append(search.value)
        scales.append(scale.value)
        capped.append(search.capped)
        radius_cells.append(upper_cell(grid, search.value, search.capped))
        records.extend(scale.records + search.records)
    frame = Frame("capped", (centers[0], centers[1]), (radii[0], radii[1]),
                  scale=(scales[0], scales[1]), center_cell=(cells[0], cells[1]),
                  radius_cell=(radius_cells[0], radius_cells[1]))
    for a in range(2):
        _check_radius(radii[a], _AXES[a], frame.limits(a))
    _check_resolution(frame, labels, float(grid[coarse][0]), beta, (capped[0], capped[1]))
    return frame, tuple(records)


def coarse_indices(length: int) -> np.ndarray:
    """The coarse grid of the capped frame's scale search: every :data:`CAPPED_COARSE`-th point
    of the fine grid (β^(20j) − 1 for β = 1.01: about 22 % apart), so the search takes few steps
    and each step's chance to stop early is paid fewer times.

    Examples
    --------
    >>> coarse_indices(100).tolist()
    [19, 39, 59, 79, 99]
    """
    return np.arange(CAPPED_COARSE - 1, length, CAPPED_COARSE)


def capped_steps(beta: float = DEFAULT_BETA) -> int:
    """K, the public length of the capped search: enough grid steps to go from S to U·S where
    the grid is geometric (K = ⌈ln U / ln β⌉ + 1; 210 for U = 8, β = 1.01).

    Examples
    --------
    >>> capped_steps(1.01)
    210
    """
    return math.ceil(math.log(CAPPED_SPAN) / math.log(beta)) + 1


def capped_window(grid: np.ndarray, scale: float, beta: float = DEFAULT_BETA) -> np.ndarray:
    """The capped search's K grid indices given the released scale S (a grid point): those of
    the points in [S, U·S], in order, the last one repeated up to length K (a repeated count
    keeps the count vector monotone; the length, hence the draws, is public).

    Examples
    --------
    >>> g = upper_grid(1.01, 1000)
    >>> w = capped_window(g, float(g[250]))
    >>> len(w), int(w[0]), bool(g[w[-1]] <= CAPPED_SPAN * g[250] < g[w[-1] + 1])
    (210, 250, True)
    """
    lo = int(np.searchsorted(grid, scale, side="left"))
    hi = max(int(np.searchsorted(grid, CAPPED_SPAN * scale, side="right")), lo + 1)
    return np.minimum(np.arange(lo, lo + capped_steps(beta)), hi - 1)


def frame_stage(
    method: str,
    x: da.Array,
    directions: np.ndarray,
    *,
    n: int,
    eps: float,
    rng: Any,
    labels: tuple[str, str] = ("PC1", "PC2"),
) -> Stage[tuple[Frame, tuple[SpendRecord, ...]]]:
    """The count-pass frame ``method`` ("ranged", "durfee" or "capped") as a stage."""
    make = {"ranged": ranged_frame_stage, "durfee": durfee_frame_stage,
            "capped": capped_frame_stage}[method]
    return make(x, directions, n=n, eps=eps, rng=rng, labels=labels)


def frame_records(method: str, eps: float, delta: float = 0.0, *,
                  n: int | None = None) -> list[SpendRecord]:
    """The frame's planned records (``eps``, ``delta``: the frame's allocation; δ is used by
    "smooth" only; ``n``: the public number of rows, which the ranged frame's split needs), in
    the order the stage writes them, from the searches' record builders and
    :func:`frame_budgets`. Every field is public but the smooth quantiles' scale."""
    if method == "ranged":
        if n is None:
            raise ValueError("frame_records('ranged', ...) needs n: its split depends on n * eps.")
        return ranged_records(eps, n)
    parts = frame_budgets(method, PrivacyBudget(eps, delta if method == "smooth" else 0.0))
    if method == "smooth":
        return [smooth_laplace_record(component="score", budget=parts["centre"], label=label)
                for label in ("frame centre x: smooth-sensitivity median",
                              "frame centre y: smooth-sensitivity median",
                              "frame radius: smooth-sensitivity 0.99 quantile of the distance")]
    out = [r for axis in _AXES
           for r in signed_quantile_records(parts["centre"].eps, component="score",
                                            steps=DEFAULT_MAX_STEPS,
                                            label=f"frame centre {axis}: Durfee median")]
    for axis in _AXES:
        if method == "durfee":
            out += upper_records(parts["radius"].eps, component="score", steps=DEFAULT_MAX_STEPS,
                                 label=f"frame radius {axis}: Durfee {RADIUS_QUANTILE} quantile")
        else:
            out += upper_records(parts["scale"].eps, component="score",
                                 steps=len(coarse_indices(DEFAULT_MAX_STEPS)),
                                 label=f"frame scale {axis}: Durfee median of |s - c| on the "
                                       "coarse grid")
            out += upper_records(parts["radius"].eps, component="score", steps=capped_steps(),
                                 label=f"frame radius {axis}: Durfee {CAPPED_QUANTILE} quantile "
                                       f"capped at {CAPPED_SPAN:g} x the scale")
    return out


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
    third = frame_budgets("smooth", budget)["centre"]
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
