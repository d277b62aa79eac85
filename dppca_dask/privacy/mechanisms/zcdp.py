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
    "gaussian_zcdp_symmetric",
]


def _zcdp_sigma(sensitivity: float, rho: float) -> float:
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ValueError(f"A Gaussian mechanism needs a positive finite sensitivity. "
                         f"Got {sensitivity!r}.")
    if not (rho > 0 and math.isfinite(rho)):
        raise ValueError(f"A zCDP Gaussian mechanism needs a positive finite rho. Got {rho!r}.")
    return sensitivity / math.sqrt(2.0 * rho)


def _exact_gaussian_zcdp(values: np.ndarray, sensitivity: float, rho: float,
                         rng: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """γ·(round(values/γ) + N_Z(0, s²)), s² ≥ (Δ/γ + √d)²/(2ρ): at most ρ-zCDP (CKS Thm 14)."""
    _zcdp_sigma(sensitivity, rho)
    d = int(values.size)
    grid, inflated = rounded_l2_sensitivity(sensitivity, d)
    s2 = round_up_rational((Fraction(inflated) / Fraction(grid)) ** 2 / (2 * Fraction(rho)))
    noisy = add_ints(to_grid(values, grid), discrete_gaussian(rng, s2, d))
    info = {"grid": grid, "sensitivity": inflated, "scale": grid * math.sqrt(float(s2)),
            "note": f"exact discrete Gaussian on grid 2^{math.frexp(grid)[1] - 1}"}
    return from_grid(noisy, grid), info


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
    out, info = _exact_gaussian_zcdp(arr.ravel(), sensitivity, rho, rng)
    noisy = out.reshape(arr.shape)
    record = SpendRecord(
        component=component, mechanism="gaussian_zcdp", eps=0.0, delta=0.0,
        sensitivity=info["sensitivity"], sensitivity_norm="l2", noise="gaussian",
        scale=info["scale"], rho=rho, calibration="zcdp", draws=int(arr.size),
        note=join_notes(note, info["note"]), grid=info["grid"],
    )
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
    q = p * (p + 1) // 2
    out, info = _exact_gaussian_zcdp(mat2vec(matrix), sensitivity, rho, rng)
    record = SpendRecord(
        component=component, mechanism="gaussian_zcdp_symmetric", eps=0.0, delta=0.0,
        sensitivity=info["sensitivity"], sensitivity_norm="frobenius", noise="gaussian",
        scale=info["scale"], rho=rho, calibration="zcdp", draws=q,
        note=join_notes("diagonal sd = scale, off-diagonal sd = scale/sqrt(2)", info["note"]),
        grid=info["grid"],
    )
    return Release(vec2mat(out, p), record)
