"""The (ε, δ) lattice Gaussian mechanisms: scalars and vectors (:func:`gaussian_release`, dp_scree)
and symmetric matrices (:func:`gaussian_symmetric_matrix`, dp_loading), with the public
calibration plans print (:func:`gaussian_calibration`, :func:`gaussian_release_sigma`,
:func:`symmetric_noise_sigma`).

Each rounds the statistic to the public grid γ = 2^k, adds exact discrete Gaussian integers and
outputs γ·(integer); σ is calibrated to the grid-inflated sensitivity and certified by the
lattice certificate (docs/privacy.md "Floating-point safety").
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any

import numpy as np

from dppca_dask.errors import BudgetError
from dppca_dask.privacy.accounting import SpendRecord, gaussian_sigma, lattice_gaussian_sd
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.exact_noise import (
    add_ints,
    discrete_gaussian,
    from_grid,
    grid_variance,
    to_grid,
)
from dppca_dask.privacy.mechanisms.release import Release, join_notes
from dppca_dask.privacy.mechanisms.vech import mat2vec, vec2mat

__all__ = [
    "gaussian_calibration",
    "gaussian_record",
    "gaussian_release",
    "gaussian_release_sigma",
    "gaussian_symmetric_matrix",
    "gaussian_symmetric_matrix_record",
    "symmetric_noise_sigma",
]


def gaussian_calibration(sensitivity: float, dimension: int, budget: PrivacyBudget,
                         calibration: str) -> dict[str, Any]:
    """The public calibration of an exact (ε, δ) Gaussian release of ``dimension`` values: its
    grid γ, the grid-inflated sensitivity, the integer variance s² and the noise sd γ·s that the
    record states -- computed before any data (the record builders use it; the mechanisms draw
    with it). Cached: a plan and its fit ask for the same calibration."""
    return dict(_calibration(float(sensitivity), int(dimension), budget.eps, budget.delta,
                             calibration))


@functools.lru_cache(maxsize=4096)
def _calibration(sensitivity: float, dimension: int, eps: float, delta: float,
                 calibration: str) -> dict[str, Any]:
    grid, inflated, sd, cert = lattice_gaussian_sd(sensitivity, dimension, eps, delta,
                                                   calibration)
    s2 = grid_variance(sd, grid)
    try:
        scale = grid * math.sqrt(float(s2))
    except OverflowError:  # s² is an exact integer past the largest double (ε near 0)
        raise BudgetError(
            f"Could not calibrate a Gaussian release at eps={eps!r}, delta={delta!r}: its noise "
            f"variance exceeds the largest double ({sys.float_info.max:.3g}), so the release "
            f"would carry no information. Use a larger eps.") from None
    return {"grid": grid, "sensitivity": inflated, "s2": s2, "scale": scale,
            "rho": inflated ** 2 / (2.0 * scale ** 2), "certificate": cert,
            "note": (f"exact discrete Gaussian on grid 2^{math.frexp(grid)[1] - 1}; certified "
                     f"eps0 {cert.eps0:.6g}, lattice term a {cert.a:.3g}, tails {cert.tail:.3g}, "
                     f"delta bound {cert.delta_total:.6g}")}


def _public_fields(sensitivity: float | None, dimension: int, budget: PrivacyBudget,
                   calibration: str) -> dict[str, Any]:
    """The record fields the calibration fixes: all ``None`` when the sensitivity is not known
    before the data (calibrated to a released value: a plan states only ε, δ and draws)."""
    if sensitivity is None:
        return {"sensitivity": None, "scale": None, "rho": None, "grid": None, "note": ""}
    if sensitivity == 0:
        return {"sensitivity": 0.0, "scale": 0.0, "rho": 0.0, "grid": None,
                "note": "zero sensitivity: released unchanged"}
    cal = gaussian_calibration(sensitivity, dimension, budget, calibration)
    return {name: cal[name] for name in ("sensitivity", "scale", "rho", "grid", "note")}


def gaussian_record(*, component: str, budget: PrivacyBudget, calibration: str, draws: int,
                    sensitivity: float | None, label: str = "") -> SpendRecord:
    """The record of one :func:`gaussian_release` of ``draws`` values with L2 sensitivity
    ``sensitivity`` (``None``: calibrated to a released value, unknown to a plan). The one
    builder of this record: the plans and the mechanism call it."""
    fields = _public_fields(sensitivity, draws, budget, calibration)
    return SpendRecord(
        component=component, mechanism="gaussian", eps=budget.eps, delta=budget.delta,
        sensitivity=fields["sensitivity"], sensitivity_norm="l2", noise="gaussian",
        scale=fields["scale"], rho=fields["rho"], calibration=calibration, draws=draws,
        note=join_notes(label, fields["note"]), grid=fields["grid"])


def gaussian_symmetric_matrix_record(*, component: str, budget: PrivacyBudget,
                                     calibration: str, p: int, sensitivity: float,
                                     basis: str = "") -> SpendRecord:
    """The record of one :func:`gaussian_symmetric_matrix` of a p x p matrix (q = p(p+1)/2
    released values, Frobenius sensitivity ``sensitivity``). The one builder of this record."""
    q = p * (p + 1) // 2
    fields = _public_fields(sensitivity, q, budget, calibration)
    return SpendRecord(
        component=component, mechanism="gaussian_symmetric_matrix", eps=budget.eps,
        delta=budget.delta, sensitivity=fields["sensitivity"], sensitivity_norm="frobenius",
        noise="gaussian", scale=fields["scale"], rho=fields["rho"], calibration=calibration,
        draws=q, note=join_notes("diagonal sd = scale, off-diagonal sd = scale/sqrt(2)",
                                 fields["note"], basis),
        grid=fields["grid"])


def _exact_gaussian(values: np.ndarray, sensitivity: float, budget: PrivacyBudget,
                    calibration: str, rng: Any) -> np.ndarray:
    """γ·(round(values/γ) + N_Z(0, s²)): the (ε, δ) lattice Gaussian (docs/privacy.md)."""
    d = int(values.size)
    cal = gaussian_calibration(sensitivity, d, budget, calibration)
    noisy = add_ints(to_grid(values, cal["grid"]), discrete_gaussian(rng, cal["s2"], d))
    return from_grid(noisy, cal["grid"])


def symmetric_noise_sigma(
    sensitivity: float, budget: PrivacyBudget, calibration: str, dimension: int | None = None
) -> float:
    """σ of the diagonal noise of :func:`gaussian_symmetric_matrix` (off-diagonal: σ/√2).

    Without ``dimension``: the nominal σ for ``sensitivity`` (what plans print). With the number
    q = p(p+1)/2 of released values: the σ the exact mechanism calibrates (larger by the grid
    inflation, a relative ~1e-8, and by the analytic fallback where classical fails).
    """
    if dimension is None:
        return gaussian_sigma(sensitivity, budget.eps, budget.delta, calibration)
    return lattice_gaussian_sd(sensitivity, dimension, budget.eps, budget.delta, calibration)[2]


def gaussian_symmetric_matrix(
    matrix: np.ndarray,
    *,
    sensitivity: float,
    budget: PrivacyBudget,
    calibration: str,
    rng: Any,
    component: str,
    basis: str = "",
) -> Release:
    """Gaussian mechanism on a symmetric matrix with Frobenius sensitivity ``sensitivity``.

    ``basis``: how the caller derived ``sensitivity`` (public), recorded in the note.

    Releases the isometric vech (:func:`mat2vec`; q = p(p+1)/2 values, L2 sensitivity Δ) with
    the exact lattice Gaussian of :func:`gaussian_release` and lays it out with
    :func:`vec2mat` (post-processing): diagonal sd σ, off-diagonal sd σ/√2 (SPEC §4.3). The
    record is :func:`gaussian_symmetric_matrix_record`'s.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    p = matrix.shape[0]
    record = gaussian_symmetric_matrix_record(component=component, budget=budget,
                                              calibration=calibration, p=p,
                                              sensitivity=sensitivity, basis=basis)
    out = _exact_gaussian(mat2vec(matrix), sensitivity, budget, calibration, rng)
    return Release(vec2mat(out, p), record)


def gaussian_release_sigma(
    sensitivity: float, budget: PrivacyBudget, calibration: str, dimension: int = 1
) -> float:
    """σ that :func:`gaussian_release` uses for ``dimension`` values with L2 sensitivity Δ (the
    grid-inflated, certified σ; what plans print)."""
    if sensitivity == 0:
        return 0.0
    return lattice_gaussian_sd(sensitivity, dimension, budget.eps, budget.delta, calibration)[2]


def gaussian_release(
    value: Any,
    *,
    sensitivity: float,
    budget: PrivacyBudget,
    calibration: str,
    rng: Any,
    component: str,
    label: str = "",
) -> Release:
    """Gaussian mechanism on a scalar or a vector with L2 sensitivity ``sensitivity``.

    The value (d entries) is rounded to the public grid γ (γ√d ≤ 2^-30·Δ), i.i.d. discrete
    Gaussian noise is added and γ·(integer) is returned. σ is the ``"classical"`` or
    ``"analytic"`` σ for the inflated sensitivity Δ + γ√d, raised where needed until the
    lattice certificate (docs/privacy.md) proves (ε, δ). A zero sensitivity releases the value
    unchanged (no draw).

    Examples
    --------
    >>> rel = gaussian_release(1.0, sensitivity=3 / 99, budget=PrivacyBudget(1.0, 5e-4),
    ...                        calibration="classical", rng=np.random.default_rng(0),
    ...                        component="scree")
    >>> round(rel.record.scale, 7), rel.record.grid == 2.0 ** -36
    (0.1198717, True)
    """
    arr = np.asarray(value, dtype=np.float64)
    record = gaussian_record(component=component, budget=budget, calibration=calibration,
                             draws=int(arr.size), sensitivity=sensitivity, label=label)
    noisy: Any
    if sensitivity == 0:  # the public number of draws is recorded (none were needed)
        noisy = float(arr) if arr.ndim == 0 else arr.copy()
    else:
        out = _exact_gaussian(arr.ravel(), sensitivity, budget, calibration, rng)
        noisy = float(out[0]) if arr.ndim == 0 else out.reshape(arr.shape)
    return Release(noisy, record)
