"""Selection mechanisms, which release an index rather than a noisy value:
:func:`above_threshold` (Durfee's monotone AboveThreshold, the private quantile searches of
:mod:`dppca_dask.privacy.quantiles`) and :func:`exponential_mechanism` (Gumbel-max, PACE-GGM's
selection). Their noise is continuous (exponential draws), but only the index leaves the
mechanism, never a noisy value."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.mechanisms.release import Release

__all__ = [
    "above_threshold",
    "above_threshold_record",
    "exponential_mechanism",
    "exponential_mechanism_record",
]


def above_threshold_record(*, component: str, eps: float, steps: int | None,
                           label: str = "", pure: bool = True) -> SpendRecord:
    """The record of one :func:`above_threshold` on a grid of ``steps`` counts (count
    sensitivity 1, Exp scale 2/ε; draws: the public upper bound ``steps + 1``, 0 where a plan
    does not state the grid): stated as ε-DP (default), or with ``pure=False`` as
    ρ = ε²/2-zCDP (an ε-DP mechanism is ε²/2-zCDP: Bun & Steinke 2016, Prop. 1.4), for a
    release composed in zCDP (the covariance's private radius). The one builder of this
    record: the plans and the mechanism call it."""
    draws = 0 if steps is None else steps + 1
    if pure:
        return SpendRecord(
            component=component, mechanism="durfee_above_threshold", eps=eps, delta=0.0,
            sensitivity=1.0, sensitivity_norm="count", noise="exponential", scale=2.0 / eps,
            draws=draws, note=label)
    return SpendRecord(
        component=component, mechanism="durfee_above_threshold", eps=0.0, delta=0.0,
        sensitivity=1.0, sensitivity_norm="count", noise="exponential", scale=2.0 / eps,
        rho=eps * eps / 2.0, calibration="zcdp", draws=draws,
        note=(f"epsilon = {eps!r} (pure DP). " + label).strip())


def above_threshold(
    counts: np.ndarray,
    *,
    threshold: float,
    eps: float,
    rng: Any,
    component: str,
    label: str = "",
    pure: bool = True,
) -> Release:
    """Durfee's monotone AboveThreshold on a non-decreasing count vector (pure ε-DP).

    T̃ = threshold + Exp(rate ε/2); step i = 0, 1, … stops at the first i with
    counts[i] + Exp(rate ε/2) ≥ T̃ (Durfee 2023, "Unbounded differentially private quantile and
    maximum estimation", Alg. 2; docs/spec/SPEC_dppca.md §5.5b). Counts have sensitivity 1 under
    replace-one adjacency and are monotone in i, so each step's comparison needs no further budget.
    Draw order: one exponential for the threshold, then one per step tried (the record states
    the public upper bound, one more than the grid length).

    Returns a :class:`Release` whose value is ``(index, capped)``: the stopping index (0-based),
    and whether the search ran off the end of the grid (then ``index`` is the last one). The
    record states ε, or with ``pure=False`` ρ = ε²/2 (:func:`above_threshold_record`).
    """
    scale = 2.0 / eps
    noisy_threshold = threshold + float(rng.exponential(scale))
    index, capped = len(counts) - 1, True
    for i, count in enumerate(counts):
        if float(count) + float(rng.exponential(scale)) >= noisy_threshold:
            index, capped = i, False
            break
    record = above_threshold_record(component=component, eps=eps, steps=len(counts), label=label,
                                    pure=pure)
    return Release((index, capped), record)


def exponential_mechanism_record(*, component: str, epsilon: float, sensitivity: float,
                                 size: int, note: str = "", pure: bool = False) -> SpendRecord:
    """The record of one :func:`exponential_mechanism` over ``size`` candidates (Gumbel scale
    2Δ/ε): stated as ρ = ε²/8-zCDP (default), or with ``pure=True`` as ε-DP (eps = ε, δ = 0, no
    ρ), for a release composed in pure DP (the ranged score frame). The one builder of this
    record."""
    if pure:
        return SpendRecord(
            component=component, mechanism="exponential_mechanism", eps=epsilon, delta=0.0,
            sensitivity=sensitivity, sensitivity_norm="score", noise="gumbel",
            scale=2.0 * sensitivity / epsilon, draws=size, note=note)
    return SpendRecord(
        component=component, mechanism="exponential_mechanism", eps=0.0, delta=0.0,
        sensitivity=sensitivity, sensitivity_norm="score", noise="gumbel",
        scale=2.0 * sensitivity / epsilon, rho=epsilon * epsilon / 8.0, calibration="zcdp",
        draws=size, note=(f"epsilon = {epsilon!r} (pure DP). " + note).strip())


def exponential_mechanism(
    scores: np.ndarray,
    *,
    epsilon: float,
    sensitivity: float,
    rng: Any,
    component: str,
    note: str = "",
    pure: bool = False,
) -> Release:
    """Exponential mechanism: index i with probability ∝ exp(ε·score_i/(2Δ)).

    Implemented as Gumbel-max: argmax_i ε·score_i/(2Δ) + G_i with G_i = −log E_i, E_i ~ Exp(1)
    (one ``rng.exponential`` call of ``len(scores)`` draws). ``sensitivity`` Δ bounds how much any
    one score changes between neighbouring datasets. It is ε-DP and ε²/8-zCDP (Cesar & Rogers
    2021); the record's ``rho`` is ε²/8 and its ``scale`` the Gumbel scale 2Δ/ε in score units.

    Examples
    --------
    >>> rel = exponential_mechanism(np.array([0.0, 50.0, 0.0]), epsilon=1.0, sensitivity=1.0,
    ...                             rng=np.random.default_rng(0), component="select")
    >>> rel.value, rel.record.rho
    (1, 0.125)
    """
    scores = np.asarray(scores, dtype=np.float64).ravel()
    if scores.size == 0 or not np.isfinite(scores).all():
        raise ValueError("The exponential mechanism needs a non-empty vector of finite scores.")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"The exponential mechanism needs a positive finite epsilon. "
                         f"Got {epsilon!r}.")
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ValueError(f"The exponential mechanism needs a positive finite sensitivity. "
                         f"Got {sensitivity!r}.")
    draws = np.asarray(rng.exponential(1.0, size=scores.size), dtype=np.float64)
    gumbel = -np.log(np.maximum(draws, np.finfo(np.float64).tiny))
    index = int(np.argmax(epsilon * scores / (2.0 * sensitivity) + gumbel))
    record = exponential_mechanism_record(component=component, epsilon=epsilon,
                                          sensitivity=sensitivity, size=int(scores.size),
                                          note=note, pure=pure)
    return Release(index, record)
