"""Laplace mechanisms with exact discrete Laplace noise: :func:`laplace_release` (pure ε-DP on a
vector with L1 sensitivity, dp_scree) and :func:`smooth_laplace` (smooth-sensitivity release of
one statistic, the legacy "smooth" frame). Both round to a public grid and output γ·(integer)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dppca_dask.privacy.accounting import SpendRecord, public_grid
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.exact_noise import (
    add_ints,
    discrete_laplace,
    from_grid,
    round_up_rational,
    to_grid,
)
from dppca_dask.privacy.mechanisms.release import Release, join_notes

__all__ = [
    "SMOOTH_GRID",
    "laplace_record",
    "laplace_release",
    "smooth_laplace",
    "smooth_laplace_record",
]


def _laplace_calibration(sensitivity: float, draws: int, eps: float) -> tuple[float, Fraction]:
    """The public grid γ and the grid-unit scale b ≥ (Δ/γ + d)/ε (exact) of :func:`laplace_release`."""
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ValueError(f"The Laplace mechanism needs a positive finite sensitivity. "
                         f"Got {sensitivity!r}.")
    d = max(draws, 1)
    grid = public_grid(sensitivity, d, "l1")
    return grid, round_up_rational((Fraction(sensitivity) / Fraction(grid) + d) / Fraction(eps))


def laplace_record(*, component: str, eps: float, draws: int, sensitivity: float,
                   label: str = "") -> SpendRecord:
    """The record of one :func:`laplace_release` of ``draws`` values with L1 sensitivity
    ``sensitivity``: the grid-inflated sensitivity Δ + γ·d and the scale γ·b ≈ Δ/ε (the one
    builder of this record: the plans and the mechanism call it)."""
    grid, scale = _laplace_calibration(sensitivity, draws, eps)
    grid_sens = Fraction(sensitivity) / Fraction(grid) + max(draws, 1)
    return SpendRecord(
        component=component, mechanism="laplace", eps=eps, delta=0.0,
        sensitivity=float(grid_sens * Fraction(grid)), sensitivity_norm="l1", noise="laplace",
        scale=float(scale * Fraction(grid)), draws=draws,
        note=join_notes(label, f"exact discrete Laplace on grid 2^{math.frexp(grid)[1] - 1}"),
        grid=grid)


def laplace_release(
    values: Any,
    *,
    sensitivity: float,
    eps: float,
    rng: Any,
    component: str,
    label: str = "",
) -> Release:
    """Laplace mechanism (pure ε-DP) on a vector with L1 sensitivity ``sensitivity``.

    Rounds the d values to the public grid γ (γ·d ≤ 2^-30·Δ), adds i.i.d. discrete Laplace noise
    with scale b ≥ (Δ/γ + d)/ε in grid units and returns γ·(integer): integer neighbours differ
    by at most Δ/γ + d in L1, so the pmf ratio is at most e^ε exactly. ``scale`` in the record
    is γ·b ≈ Δ/ε.

    Examples
    --------
    >>> rel = laplace_release(np.zeros(3), sensitivity=2.0, eps=0.5,
    ...                       rng=np.random.default_rng(0), component="scree")
    >>> round(rel.record.scale, 6), rel.record.draws
    (4.0, 3)
    """
    arr = np.asarray(values, dtype=np.float64)
    record = laplace_record(component=component, eps=eps, draws=int(arr.size),
                            sensitivity=sensitivity, label=label)
    grid, scale = _laplace_calibration(sensitivity, int(arr.size), eps)
    noisy = add_ints(to_grid(arr, grid), discrete_laplace(rng, scale, int(arr.size)))
    return Release(from_grid(noisy, grid).reshape(arr.shape), record)


SMOOTH_GRID = 2.0 ** -40
"""Default public grid of :func:`smooth_laplace` (its scale is data-dependent, so the grid
cannot be derived from it)."""


def smooth_laplace_record(*, component: str, budget: PrivacyBudget, label: str = "",
                          grid: float = SMOOTH_GRID) -> SpendRecord:
    """The record of one :func:`smooth_laplace` (its sensitivity and scale are data-dependent
    and not recorded; one draw). The one builder of this record."""
    return SpendRecord(
        component=component, mechanism="smooth_sensitivity_laplace", eps=budget.eps,
        delta=budget.delta, sensitivity=None, sensitivity_norm="smooth", noise="laplace",
        scale=None, draws=1,
        note=join_notes(label, "sensitivity and scale are data-dependent (smooth sensitivity) and "
                        "not recorded; exact discrete Laplace"),
        grid=grid)


def smooth_laplace(
    value: float,
    *,
    smooth_sensitivity: float,
    budget: PrivacyBudget,
    rng: Any,
    component: str,
    label: str = "",
    grid: float = SMOOTH_GRID,
) -> Release:
    """Smooth-sensitivity Laplace release of a statistic (Nissim, Raskhodnikova & Smith 2007).

    γ·(round(value/γ) + Z), Z discrete Laplace with scale 2·(SS + γ)/(εγ) (exact rational): SS + γ
    is a β-smooth bound on the local sensitivity of the rounded statistic, and the discrete
    Laplace keeps the sliding and dilation properties the proof needs (docs/privacy.md).
    ``grid`` must be public (a power of two chosen without looking at the data). The scale and
    SS are data-dependent, so the record carries neither. One draw.
    """
    if not (math.isfinite(grid) and grid > 0 and math.frexp(grid)[0] == 0.5):
        raise ValueError(f"smooth_laplace needs a public power-of-two grid; got {grid!r}.")
    if not (smooth_sensitivity >= 0 and math.isfinite(smooth_sensitivity)):
        raise ValueError(f"smooth_laplace needs a finite smooth sensitivity >= 0; got "
                         f"{smooth_sensitivity!r}.")
    scale = 2 * (Fraction(smooth_sensitivity) + Fraction(grid)) / Fraction(budget.eps)
    noisy = add_ints(to_grid(np.array([value]), grid),
                     discrete_laplace(rng, scale / Fraction(grid), 1))
    record = smooth_laplace_record(component=component, budget=budget, label=label, grid=grid)
    return Release(float(from_grid(noisy, grid)[0]), record)
