"""ρ-zCDP Gaussian mechanisms (docs/spec/SPEC_covariance.md §2; accounting in
:mod:`dppca_dask.privacy.zcdp`): :func:`gaussian_zcdp` on a scalar or an array and
:func:`gaussian_zcdp_symmetric` on a symmetric matrix, exact discrete Gaussian on a public grid.

Records of zCDP-accounted mechanisms carry their cost in ``rho`` with calibration "zcdp"; their
``eps``/``delta`` fields are 0 because they were not calibrated to an (ε, δ) pair -- the release
reports ε for a chosen δ from the total ρ (dppca_dask.privacy.zcdp.zcdp_eps).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dppca_dask.privacy.accounting import SpendRecord, rounded_l2_sensitivity
from dppca_dask.privacy.exact_noise import (
    add_ints,
    discrete_gaussian,
    from_grid,
    round_up_rational,
    to_grid,
)
from dppca_dask.privacy.mechanisms.release import Release, join_notes
from dppca_dask.privacy.mechanisms.vech import mat2vec, vec2mat

__all__ = [
    "gaussian_zcdp",
    "gaussian_zcdp_record",
    "gaussian_zcdp_symmetric",
    "gaussian_zcdp_symmetric_record",
]


def _zcdp_sigma(sensitivity: float, rho: float) -> float:
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ValueError(f"A Gaussian mechanism needs a positive finite sensitivity. "
                         f"Got {sensitivity!r}.")
    if not (rho > 0 and math.isfinite(rho)):
        raise ValueError(f"A zCDP Gaussian mechanism needs a positive finite rho. Got {rho!r}.")
    return sensitivity / math.sqrt(2.0 * rho)


def _zcdp_calibration(sensitivity: float, rho: float, draws: int) -> dict[str, Any]:
    """The public grid γ, the inflated sensitivity and the integer variance
    s² ≥ (Δ/γ + √d)²/(2ρ) of a zCDP lattice Gaussian of ``draws`` values (CKS Thm 14)."""
    _zcdp_sigma(sensitivity, rho)
    grid, inflated = rounded_l2_sensitivity(sensitivity, draws)
    s2 = round_up_rational((Fraction(inflated) / Fraction(grid)) ** 2 / (2 * Fraction(rho)))
    return {"grid": grid, "sensitivity": inflated, "s2": s2,
            "scale": grid * math.sqrt(float(s2)),
            "note": f"exact discrete Gaussian on grid 2^{math.frexp(grid)[1] - 1}"}


def _exact_gaussian_zcdp(values: np.ndarray, sensitivity: float, rho: float,
                         rng: Any) -> np.ndarray:
    """γ·(round(values/γ) + N_Z(0, s²)): at most ρ-zCDP (CKS Thm 14)."""
    d = int(values.size)
    cal = _zcdp_calibration(sensitivity, rho, d)
    noisy = add_ints(to_grid(values, cal["grid"]), discrete_gaussian(rng, cal["s2"], d))
    return from_grid(noisy, cal["grid"])


def _zcdp_record(mechanism: str, norm: str, component: str, sensitivity: float | None,
                 rho: float, draws: int, note: str) -> SpendRecord:
    cal: dict[str, Any] = ({"grid": None, "sensitivity": None, "scale": None, "note": ""}
                           if sensitivity is None else _zcdp_calibration(sensitivity, rho, draws))
    return SpendRecord(
        component=component, mechanism=mechanism, eps=0.0, delta=0.0,
        sensitivity=cal["sensitivity"], sensitivity_norm=norm, noise="gaussian",
        scale=cal["scale"], rho=rho, calibration="zcdp", draws=draws,
        note=join_notes(note, cal["note"]), grid=cal["grid"])


def gaussian_zcdp_record(*, component: str, rho: float, draws: int,
                         sensitivity: float | None, note: str = "") -> SpendRecord:
    """The record of one :func:`gaussian_zcdp` of ``draws`` values with L2 sensitivity
    ``sensitivity`` (``None``: not stated by a plan). The one builder of this record: the plans
    and the mechanism call it."""
    return _zcdp_record("gaussian_zcdp", "l2", component, sensitivity, rho, draws, note)


def gaussian_zcdp_symmetric_record(*, component: str, rho: float, p: int,
                                   sensitivity: float | None, note: str = "") -> SpendRecord:
    """The record of one :func:`gaussian_zcdp_symmetric` of a p x p matrix (q = p(p+1)/2
    values, Frobenius sensitivity). The one builder of this record."""
    return _zcdp_record("gaussian_zcdp_symmetric", "frobenius", component, sensitivity, rho,
                        p * (p + 1) // 2, join_notes(
                            "diagonal sd = scale, off-diagonal sd = scale/sqrt(2)", note))


def gaussian_zcdp(
    value: Any,
    *,
    sensitivity: float,
    rho: float,
    rng: Any,
    component: str,
    note: str = "",
) -> Release:
    """Gaussian mechanism in ρ-zCDP: ``value`` + discrete Gaussian noise on a public grid.

    ``sensitivity`` is the L2 sensitivity Δ of the whole of ``value`` (a scalar or an array).
    The value is rounded to the grid γ and N_Z(0, s²) is added with s ≥ (Δ/γ + √d)/√(2ρ), so the
    cost is at most ρ exactly (Canonne, Kamath & Steinke 2020, Thm 14: the multivariate discrete
    Gaussian is Δ²/(2s²)-zCDP). ``scale`` in the record is the sd γ·s (≈ Δ/√(2ρ)). A scalar
    ``value`` gives a float.

    Examples
    --------
    >>> rel = gaussian_zcdp(0.5, sensitivity=0.1, rho=0.5, rng=np.random.default_rng(0),
    ...                     component="measure")
    >>> round(rel.record.scale, 6), rel.record.rho
    (0.1, 0.5)
    >>> rel.value == rel.record.grid * round(rel.value / rel.record.grid)
    True
    """
    arr = np.asarray(value, dtype=np.float64)
    record = gaussian_zcdp_record(component=component, rho=rho, draws=int(arr.size),
                                  sensitivity=sensitivity, note=note)
    noisy = _exact_gaussian_zcdp(arr.ravel(), sensitivity, rho, rng).reshape(arr.shape)
    return Release(float(noisy) if noisy.ndim == 0 else noisy, record)


def gaussian_zcdp_symmetric(
    matrix: np.ndarray,
    *,
    sensitivity: float,
    rho: float,
    rng: Any,
    component: str,
) -> Release:
    """Gaussian mechanism in ρ-zCDP on a symmetric matrix with Frobenius sensitivity Δ.

    The isometric vech (:func:`mat2vec`, q = p(p+1)/2 values) gets the exact zCDP lattice
    Gaussian of :func:`gaussian_zcdp` and is laid out by :func:`vec2mat` (diagonal sd σ,
    off-diagonal sd σ/√2), so the cost is at most ρ.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    p = matrix.shape[0]
    record = gaussian_zcdp_symmetric_record(component=component, rho=rho, p=p,
                                            sensitivity=sensitivity)
    out = _exact_gaussian_zcdp(mat2vec(matrix), sensitivity, rho, rng)
    return Release(vec2mat(out, p), record)
