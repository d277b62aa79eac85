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
from dppca_dask.privacy.mechanisms import above_threshold, above_threshold_record
from dppca_dask.privacy.rng import as_rng

__all__ = [
    "DEFAULT_BETA",
    "DEFAULT_MAX_STEPS",
    "QuantileRelease",
    "durfee_quantile",
    "durfee_upper",
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
