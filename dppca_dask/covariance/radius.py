"""The private row-clipping radius of ``dp_covariance(clip="row", radius="private")``.

A share :data:`RADIUS_SHARE` of the covariance budget ρ buys a private estimate of a quantile of
the row norms ‖x_i‖₂; the rest of ρ goes to the covariance release clipped at that radius
(docs/design/covariance_sensitivity.md, "The private radius"). Stages, in order:

1. one Dask pass (:func:`radius_graph`): the count of rows with norm below each point of the
   public two-sided geometric grid 2^(i/32), i = −166·32 … 166·32 (about 1e−50 … 1e50, so R²
   and the noise on it stay within the public bounds' range;
   :func:`~dppca_dask.privacy.quantiles.geometric_grid`);
2. on the driver (:func:`release_radius`), two exponential-mechanism selections of the interval
   between grid points that holds a quantile
   (:func:`~dppca_dask.privacy.quantiles.bin_quantile_from_counts`, the audited
   :func:`~dppca_dask.privacy.mechanisms.exponential_mechanism`; ρ = ε²/8 each; the released
   value is the interval's upper end, so a point mass of row norms inside one interval is
   selected, not tied with every point above it): the *scale* S,
   the median norm on every 16th grid point (2^(j/2)), with :data:`SCALE_FRACTION` of the
   share; then the *radius* R, the q-quantile on the 161 grid points of the window
   [S/2, 16·S] (:data:`WINDOW`; shifted inside the grid at its ends, so the number of candidates
   is public), with the rest. The window caps the damage of a search that overshoots: R ≤ 16·S.

Both grids are multiplicative and symmetric about 1, so data scaled by any factor in the grid's
range give the same release up to one grid step (the search is equivariant to units).

The quantile level is a rule of the public n, d and ρ only (:func:`radius_rule`): the number of
rows left outside the radius is k = min(n/2, max(k_noise, k_search, κ·n)) and q = 1 − k/n, with
k_noise = d/√ρ_cov (bias against noise), k_search = 2(ln 161 + 7)/ε_R (the search's rank error)
and κ = :data:`CONTAMINATION` (far outliers up to a few per cent stay outside). Nothing here reads
data except the pass; the radius, the scale and everything computed from them are released
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
from dppca_dask.privacy.quantiles import (
    bin_quantile_from_counts,
    bin_quantile_record,
    geometric_grid,
)

__all__ = [
    "CONTAMINATION",
    "PRIVATE",
    "RADIUS_SHARE",
    "SCALE_FRACTION",
    "WINDOW",
    "RadiusRelease",
    "RadiusRule",
    "radius_graph",
    "radius_grid",
    "radius_records",
    "radius_rule",
    "release_radius",
    "split_rho",
]

PRIVATE = "private"
"""The ``radius`` value that asks for the private radius."""

RADIUS_SHARE = 0.05
"""The share of the covariance ρ spent on the radius (scale and radius searches together)."""
SCALE_FRACTION = 0.25
"""The part of the radius share that the scale (median norm) search gets; the radius the rest."""
STEPS_PER_OCTAVE = 32
OCTAVES = 166
"""The grid 2^(i/32), |i| ≤ 166·32: about 1.1e−50 … 9.4e49 (R² within the bounds' range)."""
COARSE = 16
"""The scale search uses every 16th grid point (2^(j/2))."""
WINDOW = (1, 4)
"""The radius search's window in octaves around the scale S: [S/2^1, S·2^4]."""
CONTAMINATION = 0.04
"""κ: at least this fraction of the rows is left outside the radius (q ≤ 1 − κ)."""
SEARCH_MARGIN = 7.0
"""ln(1/p) of the search floor: a search overshooting to the rows' maximum or beyond has
probability about e^−7 ≈ 1e−3 at k = k_search."""

_COMPONENT = "radius"
_SCALE_NOTE = "row-norm scale: median of ||x_i|| on the public grid 2^(j/2)"
_RADIUS_NOTE = ("row-norm radius: quantile of ||x_i|| on the public grid 2^(i/32), in the window "
                "[scale/2, 16*scale]")


@functools.cache
def radius_grid() -> np.ndarray:
    """The public grid 2^(i/32), i = −166·32 … 166·32 (read-only)."""
    grid = geometric_grid(STEPS_PER_OCTAVE, OCTAVES)
    grid.flags.writeable = False
    return grid


def _coarse_indices() -> np.ndarray:
    return np.arange(0, radius_grid().size, COARSE)


def _window_size() -> int:
    return (WINDOW[0] + WINDOW[1]) * STEPS_PER_OCTAVE + 1


def split_rho(rho: float) -> tuple[float, float, float]:
    """``(ρ_scale, ρ_radius, ρ_covariance)`` of a covariance budget ρ (the one split)."""
    share = RADIUS_SHARE * rho
    scale = SCALE_FRACTION * share
    return scale, share - scale, rho - share


def _epsilons(rho: float) -> tuple[float, float]:
    scale, radius, _ = split_rho(rho)
    return math.sqrt(8.0 * scale), math.sqrt(8.0 * radius)


@dataclass(frozen=True)
class RadiusRule:
    """The public quantile rule: ``q`` (the targeted quantile of the row norms), ``outside``
    (k = (1 − q)·n rows), and which term set it (``"noise"``, ``"search"``,
    ``"contamination"`` or ``"half"``)."""

    q: float
    outside: float
    binding: str


def radius_rule(n: int, d: int, rho: float) -> RadiusRule:
    """The quantile the private radius targets, from the public n, d and ρ only.

    k = min(n/2, max(d/√ρ_cov, 2(ln W + 7)/ε_R, κ·n)), q = 1 − k/n (W = 161 candidates,
    ε_R the radius search's ε, κ = :data:`CONTAMINATION`).

    Examples
    --------
    >>> rule = radius_rule(5000, 20, 1.0)
    >>> round(rule.q, 4), rule.binding
    (0.96, 'contamination')
    """
    _, _, rho_cov = split_rho(rho)
    _, eps_radius = _epsilons(rho)
    terms = {"noise": d / math.sqrt(rho_cov),
             "search": 2.0 * (math.log(_window_size()) + SEARCH_MARGIN) / eps_radius,
             "contamination": CONTAMINATION * n}
    binding = max(terms, key=lambda name: terms[name])
    outside = terms[binding]
    if outside > n / 2:
        binding, outside = "half", n / 2
    return RadiusRule(1.0 - outside / n, outside, binding)


def radius_records(rho: float) -> tuple[SpendRecord, SpendRecord]:
    """The two records the radius spends, for a covariance budget ρ: the plan's and the fit's
    (one builder: :func:`~dppca_dask.privacy.quantiles.exponential_quantile_record`)."""
    eps_scale, eps_radius = _epsilons(rho)
    return (bin_quantile_record(component=_COMPONENT, epsilon=eps_scale,
                                points=int(_coarse_indices().size), note=_SCALE_NOTE,
                                pure=False),
            bin_quantile_record(component=_COMPONENT, epsilon=eps_radius,
                                points=_window_size(), note=_RADIUS_NOTE, pure=False))


def radius_graph(source: DataSource) -> Any:
    """The lazy count pass: ``counts[i] = #{rows with ‖x‖ < grid[i]}`` on :func:`radius_grid`."""
    return row_block_sum(source.array, row_norm_counts, radius_grid(), name="row-norm-counts")


@dataclass(frozen=True)
class RadiusRelease:
    """The released radius R and scale S (private), the public rule, and their two records."""

    radius: float
    scale: float
    rule: RadiusRule
    records: tuple[SpendRecord, ...]


def release_radius(counts: np.ndarray, *, n: int, d: int, rho: float, rng: Any,
                   warn: bool = True) -> RadiusRelease:
    """The two searches on the counts of :func:`radius_graph` (draw order: scale, radius).

    ``rho`` is the whole covariance budget; the searches spend :func:`split_rho`'s first two
    parts. With ``warn``, n·√ρ too small for the searches (public quantities only: the rule
    leaves more than a quarter of the rows outside, or the scale search's margin n·ε_S/4 is
    below ln(#candidates) + 7) raises a UtilityWarning.
    """
    grid = radius_grid()
    counts = np.asarray(counts)
    rule = radius_rule(n, d, rho)
    eps_scale, eps_radius = _epsilons(rho)
    scale_margin = n * eps_scale / 4 - math.log(_coarse_indices().size)
    if warn and (rule.outside > n / 4 or scale_margin < SEARCH_MARGIN):
        warnings.warn(
            f"dp_covariance's private radius: at n = {n} and rho = {rho:g} the searches are "
            f"unreliable (the radius targets the {rule.q:.3g} quantile of the row norms, so "
            f"about {100 * (1 - rule.q):.0f} % of the rows are clipped, and the scale search "
            "may miss the data). Give a public radius "
            "(radius=R) or more budget.", UtilityWarning, stacklevel=4)
    coarse = _coarse_indices()
    # interval selections (a point mass makes every grid point's count far from q·n; the
    # interval holding it scores 0): the released value is the chosen interval's upper end
    pick, scale_record = bin_quantile_from_counts(
        counts[coarse], n=n, q=0.5, epsilon=eps_scale, rng=rng, component=_COMPONENT,
        note=_SCALE_NOTE, pure=False)
    centre = int(coarse[min(pick, coarse.size - 1)])
    size = _window_size()
    start = min(max(centre - WINDOW[0] * STEPS_PER_OCTAVE, 0), grid.size - size)
    window = slice(start, start + size)
    index, radius_record = bin_quantile_from_counts(
        counts[window], n=n, q=rule.q, epsilon=eps_radius, rng=rng, component=_COMPONENT,
        note=_RADIUS_NOTE, pure=False)
    return RadiusRelease(float(grid[start + min(index, size - 1)]), float(grid[centre]), rule,
                         (scale_record, radius_record))
