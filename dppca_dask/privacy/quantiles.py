"""Private quantiles by Durfee's unbounded search on public geometric grids (docs/spec/SPEC_dppca.md §5.5b).

The data pass computes, once, the count of values strictly below every grid point
(:mod:`dppca_dask.kernels.counts`); this module runs the noisy search on the driver through
:func:`dppca_dask.privacy.mechanisms.above_threshold` and turns the stopping index into a value.

* one-sided ``upper``: grid t_i = β^i + lower − 1 (i = 1 … max_steps), T̃ = q·n + Exp(ε/2);
* two-sided ``quantile`` (Durfee 2023, Algorithm 4): the one-sided search with ε/2 on
  max(βx + β − 1, 0) at q and on max(−βx + β − 1, 0) at 1 − q (both always run, positive side
  first); k± = round(ln(1 + raw±)/ln β) − 1 floored at 0; the answer is β^{k+} − 1 if the
  positive side stopped past its first step, else −(β^{k−} − 1) if the negative side did, else 0.

Both are pure ε-DP (no δ); the records returned say so.

A third search, :func:`exponential_quantile_from_counts`, is the exponential mechanism over a
finite window of a two-sided geometric grid 2^(i/s) (:func:`geometric_grid`, i negative too), with
the score −|#{x < t_i} − q·n| of sensitivity 1 (replace-one): ε-DP and ε²/8-zCDP (its record is
:func:`~dppca_dask.privacy.mechanisms.exponential_mechanism_record`'s). The grid is
multiplicative, so values scaled by a power of 2^(1/s) move the scores by whole steps: the search
is equivariant to units (``dp_covariance``'s private row-norm radius).
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from dppca_dask._validation import bad_param, parse_int, parse_real
from dppca_dask.errors import InputError
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.mechanisms import (
    above_threshold,
    above_threshold_record,
    exponential_mechanism,
    exponential_mechanism_record,
)
from dppca_dask.privacy.rng import as_rng

__all__ = [
    "DEFAULT_BETA",
    "DEFAULT_MAX_STEPS",
    "QuantileRelease",
    "bin_quantile_from_counts",
    "bin_quantile_record",
    "durfee_quantile",
    "durfee_upper",
    "exponential_quantile_from_counts",
    "exponential_quantile_record",
    "geometric_grid",
    "signed_quantile_from_counts",
    "signed_quantile_records",
    "upper_from_counts",
    "upper_records",
    "upper_grid",
    "validate_durfee",
]

DEFAULT_BETA = 1.01
DEFAULT_MAX_STEPS = 5000
LOWER_BOUND_MESSAGE = "Durfee's one-sided estimator requires a valid public lower bound."


@dataclass(frozen=True)
class QuantileRelease:
    """A private quantile, the records of the searches that produced it, and whether any capped."""

    value: float
    records: tuple[SpendRecord, ...]
    capped: bool


def upper_grid(beta: float, max_steps: int, lower: float = 0.0) -> np.ndarray:
    """The public grid t_i = β^i + lower − 1, i = 1 … max_steps (non-finite → largest double).

    Examples
    --------
    >>> upper_grid(1.01, 3).round(6).tolist()
    [0.01, 0.0201, 0.030301]
    """
    points = []
    for i in range(1, max_steps + 1):
        t = math.pow(beta, i) + lower - 1.0 if i * math.log(beta) < 709 else math.inf
        points.append(t if math.isfinite(t) else sys.float_info.max)
    return np.array(points)


def validate_durfee(
    q: float, eps: float, beta: float, max_steps: int, owner: str
) -> tuple[float, float, float, int]:
    """Check the search parameters (q in (0,1), ε > 0, β > 1, max_steps ≥ 1)."""
    return (
        parse_real(q, "q", owner, low=0.0, high=1.0),
        parse_real(eps, "eps", owner, low=0.0),
        parse_real(beta, "beta", owner, low=1.0),
        parse_int(max_steps, "max_steps", owner, low=1),
    )


def upper_from_counts(
    counts: np.ndarray,
    grid: np.ndarray,
    *,
    n: int,
    q: float,
    eps: float,
    rng: Any,
    component: str,
    label: str = "",
    warn: bool = True,
) -> QuantileRelease:
    """One-sided Durfee search given ``counts[i] = #{x < grid[i]}`` (the data pass's output)."""
    release = above_threshold(
        np.asarray(counts), threshold=q * n, eps=eps, rng=rng, component=component, label=label
    )
    index, capped = release.value
    if capped and warn:
        warnings.warn(
            "Durfee quantile search reached `max_steps`; the estimate is the largest grid point. "
            "Increase `max_steps` or `beta`.",
            UserWarning,
            stacklevel=3,
        )
    return QuantileRelease(float(grid[index]), (release.record,), capped)


SIDES = ("positive side", "negative side")
"""The two one-sided searches of a signed quantile, in the order they run."""


def _side_eps(eps: float) -> float:
    """Each side's ε of a signed quantile of ε (the one split)."""
    return eps / 2


def upper_records(eps: float, *, component: str, steps: int | None = None,
                  label: str = "") -> tuple[SpendRecord, ...]:
    """The planned records of one :func:`upper_from_counts` search on a grid of ``steps``
    points (``None``: the plan does not state the draws)."""
    return (above_threshold_record(component=component, eps=eps, steps=steps, label=label),)


def signed_quantile_records(eps: float, *, component: str, steps: int | None = None,
                            label: str = "") -> tuple[SpendRecord, ...]:
    """The planned records of one :func:`signed_quantile_from_counts` of ε: one search per side
    with ε/2 each."""
    return tuple(above_threshold_record(component=component, eps=_side_eps(eps), steps=steps,
                                        label=f"{label} ({side})") for side in SIDES)


def signed_quantile_from_counts(
    pos_counts: np.ndarray,
    neg_counts: np.ndarray,
    grid: np.ndarray,
    *,
    n: int,
    q: float,
    eps: float,
    beta: float,
    rng: Any,
    component: str,
    label: str = "",
) -> QuantileRelease:
    """Two-sided Durfee quantile from the counts of :func:`~dppca_dask.kernels.counts.signed_count_below`."""
    pos = upper_from_counts(pos_counts, grid, n=n, q=q, eps=_side_eps(eps), rng=rng,
                            component=component, label=f"{label} ({SIDES[0]})", warn=False)
    neg = upper_from_counts(neg_counts, grid, n=n, q=1.0 - q, eps=_side_eps(eps), rng=rng,
                            component=component, label=f"{label} ({SIDES[1]})", warn=False)
    log_beta = math.log(beta)
    k_pos = max(round(math.log1p(pos.value) / log_beta) - 1, 0)
    k_neg = max(round(math.log1p(neg.value) / log_beta) - 1, 0)
    if not pos.capped and k_pos > 0:
        value = math.pow(beta, k_pos) - 1.0
    elif not neg.capped and k_neg > 0:
        value = -(math.pow(beta, k_neg) - 1.0)
    else:
        value = 0.0
    capped = pos.capped or neg.capped
    if capped:
        warnings.warn(
            "Durfee signed quantile search reached `max_steps`; the estimate may be poor. "
            "Increase `max_steps` or `beta`.",
            UserWarning,
            stacklevel=2,
        )
    return QuantileRelease(value, pos.records + neg.records, capped)


def _values(x: Any, owner: str) -> np.ndarray:
    values = np.asarray(x, dtype=np.float64).ravel()
    if values.size == 0:
        raise InputError(f"The 'x' parameter of {owner} must hold at least one value.")
    if not np.isfinite(values).all():
        raise InputError(f"The 'x' parameter of {owner} must contain only finite values.")
    return values


def durfee_upper(
    x: Any,
    q: float,
    eps: float,
    *,
    lower: float = 0.0,
    beta: float = DEFAULT_BETA,
    max_steps: int = DEFAULT_MAX_STEPS,
    rng: Any = None,
    component: str = "quantile",
) -> QuantileRelease:
    """Private q-quantile of in-memory values ≥ ``lower`` (one-sided Durfee search, pure ε-DP).

    Examples
    --------
    >>> x = np.random.default_rng(0).exponential(size=2000)
    >>> est = durfee_upper(x, 0.5, 1.0, rng=1).value
    >>> bool(0.5 < est < 0.9)  # the true median is ln 2 ≈ 0.69
    True
    """
    owner = "durfee_upper"
    q, eps, beta, max_steps = validate_durfee(q, eps, beta, max_steps, owner)
    lower = parse_real(lower, "lower", owner)
    values = _values(x, owner)
    if (values < lower).any():
        raise InputError(LOWER_BOUND_MESSAGE)
    grid = upper_grid(beta, max_steps, lower)
    state = as_rng(rng, owner=owner)
    # Lazy, upward (privacy -> kernels): the one data-side count of the in-memory convenience;
    # a documented exception of tests/test_layout.py (the count-based searches need no kernel).
    from dppca_dask.kernels.counts import count_below

    return upper_from_counts(count_below(values, grid), grid, n=values.size, q=q, eps=eps,
                             rng=state.generator, component=component)


def durfee_quantile(
    x: Any,
    q: float,
    eps: float,
    *,
    beta: float = DEFAULT_BETA,
    max_steps: int = DEFAULT_MAX_STEPS,
    rng: Any = None,
    component: str = "quantile",
) -> QuantileRelease:
    """Private q-quantile of unbounded in-memory values (two-sided Durfee search, pure ε-DP).

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(loc=-3.0, size=5000)
    >>> est = durfee_quantile(x, 0.5, 1.0, rng=2).value
    >>> bool(-3.2 < est < -2.8)
    True
    """
    owner = "durfee_quantile"
    q, eps, beta, max_steps = validate_durfee(q, eps, beta, max_steps, owner)
    values = _values(x, owner)
    grid = upper_grid(beta, max_steps)
    from dppca_dask.kernels.counts import signed_count_below  # lazy, upward: as in durfee_upper

    pos, neg = signed_count_below(values, grid, beta)
    state = as_rng(rng, owner=owner)
    if not isinstance(component, str):
        raise bad_param("component", owner, "a str", component)
    return signed_quantile_from_counts(pos, neg, grid, n=values.size, q=q, eps=eps, beta=beta,
                                       rng=state.generator, component=component)


def geometric_grid(steps_per_octave: int, octaves: int) -> np.ndarray:
    """The public two-sided geometric grid t_i = 2^(i/s), i = −s·o … s·o (s = ``steps_per_octave``,
    o = ``octaves``): 2·s·o + 1 points from 2^−o to 2^o, symmetric in log scale about 1.

    Examples
    --------
    >>> geometric_grid(2, 1).tolist() == [0.5, 2 ** -0.5, 1.0, 2 ** 0.5, 2.0]
    True
    """
    steps = parse_int(steps_per_octave, "steps_per_octave", "geometric_grid", low=1)
    span = parse_int(octaves, "octaves", "geometric_grid", low=1)
    if span > 1000:  # 2^±1000 stay finite, normal doubles
        raise bad_param("octaves", "geometric_grid", "an int in [1, 1000]", octaves)
    return np.exp2(np.arange(-steps * span, steps * span + 1, dtype=np.float64) / steps)


def exponential_quantile_record(*, component: str, epsilon: float, size: int,
                                note: str = "") -> SpendRecord:
    """The record of one :func:`exponential_quantile_from_counts` over ``size`` grid points:
    the exponential mechanism's (score sensitivity 1, ρ = ε²/8)."""
    return exponential_mechanism_record(component=component, epsilon=epsilon, sensitivity=1.0,
                                        size=size, note=note)


def exponential_quantile_from_counts(
    counts: np.ndarray,
    grid: np.ndarray,
    *,
    n: int,
    q: float,
    epsilon: float,
    rng: Any,
    component: str,
    note: str = "",
) -> tuple[int, SpendRecord]:
    """Private q-quantile by the exponential mechanism over the points of ``grid``.

    ``counts[i] = #{x < grid[i]}`` (the data pass's output, for these points only). Score of
    point i: −|counts[i] − q·n|; one value replaced changes every count by at most 1, so the
    score sensitivity is 1 and the selection is ε-DP and ε²/8-zCDP (Cesar & Rogers 2021). Only
    the index is released. Returns ``(index, record)``; every point of ``grid`` is a candidate
    (``len(grid)`` Gumbel draws, a public number).

    Examples
    --------
    >>> grid = geometric_grid(4, 10)
    >>> counts = np.searchsorted(np.sort(np.arange(1.0, 101.0)), grid, side="left")
    >>> i, rec = exponential_quantile_from_counts(counts, grid, n=100, q=0.5, epsilon=2.0,
    ...                                           rng=np.random.default_rng(0), component="c")
    >>> bool(40 < grid[i] < 60), rec.rho, rec.draws
    (True, 0.5, 81)
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape != np.shape(grid):
        raise ValueError("exponential_quantile_from_counts needs one count per grid point. "
                         f"Got {counts.shape} counts for {np.shape(grid)} points.")
    scores = -np.abs(counts - q * n)
    release = exponential_mechanism(scores, epsilon=epsilon, sensitivity=1.0, rng=rng,
                                    component=component, note=note)
    return int(release.value), release.record


def bin_quantile_record(*, component: str, epsilon: float, points: int,
                        note: str = "", pure: bool = True) -> SpendRecord:
    """The record of one :func:`bin_quantile_from_counts` on a grid of ``points`` points: the
    exponential mechanism's over its ``points + 1`` intervals (score sensitivity 1), stated as
    pure ε (default) or, with ``pure=False``, as ρ = ε²/8-zCDP."""
    return exponential_mechanism_record(component=component, epsilon=epsilon, sensitivity=1.0,
                                        size=points + 1, note=note, pure=pure)


def bin_quantile_from_counts(
    counts: np.ndarray,
    *,
    n: int,
    q: float,
    epsilon: float,
    rng: Any,
    component: str,
    note: str = "",
    pure: bool = True,
) -> tuple[int, SpendRecord]:
    """Private interval holding the q-quantile, by the exponential mechanism over intervals.

    ``counts[i] = #{x < t_i}`` for the m grid points t_0 < … < t_(m−1) (the data pass's output).
    Candidate j = 0 … m is the interval [t_(j−1), t_j) with t_(−1) = −∞ and t_m = +∞, whose count
    range is [lo_j, hi_j] = [counts[j−1], counts[j]] (0 below the first point, n above the last);
    its score is −max(0, lo_j − q·n, q·n − hi_j). One value replaced changes every count by at most
    1, so every score by at most 1: the selection is ε-DP and ε²/8-zCDP (recorded as pure ε, the
    score frame's, or with ``pure=False`` as ρ = ε²/8, the covariance radius's). Only the index is released (m + 1 Gumbel draws, a public number).

    Examples
    --------
    >>> grid = np.array([1.0, 2.0, 4.0, 8.0])
    >>> counts = np.searchsorted(np.full(100, 3.0), grid, side="left")  # every value in [2, 4)
    >>> j, rec = bin_quantile_from_counts(counts, n=100, q=0.5, epsilon=2.0,
    ...                                   rng=np.random.default_rng(0), component="c")
    >>> j, rec.draws  # the interval [grid[1], grid[2])
    (2, 5)
    """
    counts = np.asarray(counts, dtype=np.float64).ravel()
    target = q * n
    lo = np.concatenate([[0.0], counts])
    hi = np.concatenate([counts, [float(n)]])
    scores = -np.maximum(0.0, np.maximum(lo - target, target - hi))
    release = exponential_mechanism(scores, epsilon=epsilon, sensitivity=1.0, rng=rng,
                                    component=component, note=note, pure=pure)
    return int(release.value), release.record
