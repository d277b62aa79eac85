"""The private row-clipping radius of ``dp_covariance(clip="row", radius="private")``.

A share :data:`RADIUS_SHARE` of the covariance budget ρ buys a private quantile of the row norms
‖x_i‖₂; the rest of ρ goes to the covariance release clipped at it
(docs/design/covariance_sensitivity.md, "The private radius"). Stages, in order:

1. one Dask pass (:func:`radius_graph`): the count of rows with norm below each point of the
   public two-sided geometric grid 2^(i/32), i = −166·32 … 166·32 (about 1e−50 … 1e50, so R²
   and the noise on it stay within the public bounds' range;
   :func:`~dppca_dask.privacy.quantiles.geometric_grid`);
2. on the driver (:func:`release_radius`), three AboveThreshold searches up the grid (the
   audited :func:`~dppca_dask.privacy.mechanisms.above_threshold`, Durfee's monotone search:
   each stops at the first grid point whose noisy count passes the noisy target, so grid points
   above the target -- a point mass, the empty norms above the data or between the bulk and far
   outliers -- never share the choice; stated as ρ = ε²/2-zCDP each):

   * the *robust* radius R_r, the (1 − max(κ, f))-quantile, κ = :data:`CONTAMINATION`, searched
     from the bottom of the grid (no public scale needed);
   * the *gap test*: from R_r up to 2^h·R_r (h = :data:`GAP_OCTAVES`), the (1 − f/3)-quantile;
     if the search runs off that window, the top rows lie beyond an empty stretch of norms --
     far outliers, not a tail -- and the release uses R_r;
   * the *tail* radius R_t: from R_r up, the (1 − f)-quantile, f the rule's tail fraction
     (:func:`radius_rule`); the release's radius unless the test found a gap. When f ≥ κ the
     robust search already targets it and this second search refines R_r from below (a search
     starting near its target stops early less often than one climbing the whole grid).

Every grid is multiplicative and symmetric about 1, so data scaled by a power of 2^(1/32) move
every count by whole grid steps and the release with them (the search is equivariant to units).

The fractions are rules of the public n, d and ρ only (:func:`radius_rule`). Nothing here reads
data except the pass; the radii, the gap flag and everything computed from them are released
values.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from dppca_dask.errors import UtilityWarning
from dppca_dask.graph.passes import row_block_sum
from dppca_dask.io.data import DataSource
from dppca_dask.kernels.gram import row_norm_counts
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.mechanisms import above_threshold, above_threshold_record
from dppca_dask.privacy.quantiles import geometric_grid

__all__ = [
    "CONTAMINATION",
    "GAP_DIVISOR",
    "GAP_OCTAVES",
    "PRIVATE",
    "RADIUS_SHARE",
    "SEARCH_SHARES",
    "TAIL_COEFFICIENT",
    "TAIL_EXPONENT",
    "RadiusRelease",
    "RadiusRule",
    "radius_graph",
    "radius_grid",
    "radius_records",
    "radius_rule",
    "release_radius",
    "search_epsilons",
    "split_rho",
]

PRIVATE = "private"
"""The ``radius`` value that asks for the private radius."""

RADIUS_SHARE = 0.10
"""The share of the covariance ρ spent on the radius (the three searches together)."""
SEARCH_SHARES = (0.4, 0.2, 0.4)
"""The parts of the radius share of the robust search, the gap test and the tail search."""
STEPS_PER_OCTAVE = 32
OCTAVES = 166
"""The grid 2^(i/32), |i| ≤ 166·32: about 1.1e−50 … 9.4e49 (R² within the bounds' range)."""
CONTAMINATION = 0.10
"""κ: the robust radius leaves at least this fraction of the rows outside (far outliers up to a
few per cent, and heavy tails beyond the gap test's window, are clipped at it)."""
TAIL_COEFFICIENT = 0.5
"""C of the tail fraction f = C·(d/(n·√ρ_cov))^a (:func:`radius_rule`)."""
TAIL_EXPONENT = 0.55
"""a of the tail fraction (fitted: docs/design/covariance_sensitivity.md, "The quantile rule")."""
GAP_OCTAVES = 2
"""h: the gap test and the tail search look at most 2^h above the robust radius."""
GAP_DIVISOR = 3.0
"""The gap test targets the (1 − f/3)-quantile: deeper than the tail radius, so contamination
between f/3 and f of the rows is caught without the tail radius itself landing in it."""
SEARCH_MARGIN = 7.0
"""ln(1/p) of the warning: the robust search stopping early on the empty grid below the data
has probability about e^−7 ≈ 1e−3 or less when its margin is at least this."""

_COMPONENT = "radius"
_NOTES = (
    "row-norm radius, robust: the (1 - max(kappa, f)) quantile of ||x_i|| on the public grid "
    "2^(i/32), searched up from its bottom",
    "row-norm radius, gap test: the (1 - f/3) quantile within 2^2 above the robust radius "
    "(running off the window: the top rows are beyond a gap, the robust radius is used)",
    "row-norm radius, tail: the (1 - f) quantile within 2^2 above the robust radius",
)


@functools.cache
def radius_grid() -> np.ndarray:
    """The public grid 2^(i/32), i = −166·32 … 166·32 (read-only)."""
    grid = geometric_grid(STEPS_PER_OCTAVE, OCTAVES)
    grid.flags.writeable = False
    return grid


def _window_size() -> int:
    return GAP_OCTAVES * STEPS_PER_OCTAVE + 1


def split_rho(rho: float) -> tuple[float, float, float, float]:
    """``(ρ_robust, ρ_gap, ρ_tail, ρ_covariance)`` of a covariance budget ρ (the one split)."""
    share = RADIUS_SHARE * rho
    robust, gap = SEARCH_SHARES[0] * share, SEARCH_SHARES[1] * share
    return robust, gap, share - robust - gap, rho - share


def search_epsilons(rho: float) -> tuple[float, float, float]:
    """The three searches' ε (each ε-DP, hence ε²/2-zCDP: ε = √(2ρ_search))."""
    robust, gap, tail, _ = split_rho(rho)
    return math.sqrt(2.0 * robust), math.sqrt(2.0 * gap), math.sqrt(2.0 * tail)


@dataclass(frozen=True)
class RadiusRule:
    """The public quantile rule: ``q`` the tail quantile 1 − f of the row norms,
    ``q_robust`` = 1 − max(κ, f), ``q_gap`` = 1 − f/3 (the gap test's), ``outside`` the rows the
    tail radius leaves outside (f·n), and ``binding``: ``"tail"`` when f < κ, else
    ``"robust"`` (f ≥ κ: the robust search targets f too) or ``"half"`` (f capped at ½)."""

    q: float
    q_robust: float
    q_gap: float
    outside: float
    binding: str


def radius_rule(n: int, d: int, rho: float) -> RadiusRule:
    """The quantiles the private radius targets, from the public n, d and ρ only.

    The tail fraction f = C·(d/(n·√ρ_cov))^a (C = :data:`TAIL_COEFFICIENT`, a =
    :data:`TAIL_EXPONENT`, ρ_cov the method's part of ρ, f ≤ ½), i.e. k = f·n = C·n^(1−a)·
    (d/√ρ_cov)^a rows outside: between the noise-balance count d/√ρ_cov (a = 1) and a share of
    n (a = 0), a fitted on exact radii (docs/design/covariance_sensitivity.md, "The quantile
    rule"). The robust radius targets 1 − max(κ, f), the gap test 1 − f/3.

    Examples
    --------
    >>> rule = radius_rule(5000, 20, 1.0)
    >>> round(1 - rule.q, 4), round(1 - rule.q_robust, 2), rule.binding
    (0.0247, 0.1, 'tail')
    """
    rho_cov = split_rho(rho)[3]
    tail = TAIL_COEFFICIENT * (d / (n * math.sqrt(rho_cov))) ** TAIL_EXPONENT
    binding = "tail" if tail < CONTAMINATION else "robust"
    if tail > 0.5:
        binding, tail = "half", 0.5
    return RadiusRule(1.0 - tail, 1.0 - max(CONTAMINATION, tail), 1.0 - tail / GAP_DIVISOR,
                      tail * n, binding)


def radius_records(rho: float) -> tuple[SpendRecord, SpendRecord, SpendRecord]:
    """The three records the radius spends, for a covariance budget ρ: the plan's and the fit's
    (one builder: :func:`~dppca_dask.privacy.mechanisms.above_threshold_record`, zCDP form)."""
    steps = (radius_grid().size, _window_size(), _window_size())
    return tuple(  # type: ignore[return-value]
        above_threshold_record(component=_COMPONENT, eps=eps, steps=size, label=note,
                               pure=False)
        for eps, size, note in zip(search_epsilons(rho), steps, _NOTES, strict=True))


def radius_graph(source: DataSource) -> Any:
    """The lazy count pass: ``counts[i] = #{rows with ‖x‖ < grid[i]}`` on :func:`radius_grid`."""
    return row_block_sum(source.array, row_norm_counts, radius_grid(), name="row-norm-counts")


@dataclass(frozen=True)
class RadiusRelease:
    """The released radius R, the robust radius R_r and whether the gap test fired (private
    values), the public rule, and the three records."""

    radius: float
    robust: float
    gap: bool
    rule: RadiusRule
    records: tuple[SpendRecord, ...]


def _search(counts: np.ndarray, start: int, size: int, target: float, eps: float, rng: Any,
            note: str) -> tuple[int, bool, SpendRecord]:
    """AboveThreshold on the ``size`` grid points from ``start`` (moved inside the grid at its
    top end, so the number of points is public): (grid index, ran off the end, record)."""
    start = min(start, counts.size - size)
    release = above_threshold(counts[start:start + size], threshold=target, eps=eps, rng=rng,
                              component=_COMPONENT, label=note, pure=False)
    index, capped = release.value
    return start + int(index), bool(capped), release.record


def release_radius(counts: np.ndarray, *, n: int, d: int, rho: float, rng: Any,
                   warn: bool = True) -> RadiusRelease:
    """The three searches on the counts of :func:`radius_graph` (draw order: robust, gap, tail).

    ``rho`` is the whole covariance budget; the searches spend :func:`split_rho`'s first three
    parts. With ``warn``, n·√ρ too small for the searches (public quantities only: the rule
    leaves more than a quarter of the rows outside, or the robust search's margin
    q_robust·n·ε/2 is below ln(grid size) + 7, so it may stop on the empty grid below the data)
    raises a UtilityWarning.
    """
    grid = radius_grid()
    counts = np.asarray(counts)
    rule = radius_rule(n, d, rho)
    eps_robust, eps_gap, eps_tail = search_epsilons(rho)
    margin = rule.q_robust * n * eps_robust / 2.0 - math.log(grid.size)
    if warn and (rule.outside > n / 4 or margin < SEARCH_MARGIN):
        warnings.warn(
            f"dp_covariance's private radius: at n = {n} and rho = {rho:g} the searches are "
            f"unreliable (the radius targets the {rule.q:.3g} quantile of the row norms, so "
            f"about {100 * (1 - rule.q):.0f} % of the rows are clipped, and the search may stop "
            "below the data). Give a public radius (radius=R) or more budget.",
            UtilityWarning, stacklevel=4)
    robust, _, robust_record = _search(counts, 0, grid.size, rule.q_robust * n, eps_robust,
                                       rng, _NOTES[0])
    size = _window_size()
    _, gap, gap_record = _search(counts, robust, size, rule.q_gap * n, eps_gap, rng, _NOTES[1])
    tail, _, tail_record = _search(counts, robust, size, rule.q * n, eps_tail, rng, _NOTES[2])
    # post-processing of the released indices and the released gap flag
    chosen = robust if gap else tail
    return RadiusRelease(float(grid[chosen]), float(grid[robust]), gap, rule,
                         (robust_record, gap_record, tail_record))
