"""Noise mechanisms: the only module that draws privacy noise.

Each mechanism is a pure function of a small exact statistic (already computed by a data pass and
held on the driver), a budget and a generator. It returns the noisy value together with a frozen
:class:`~dppca_dask.accounting.SpendRecord`. No mechanism touches a Dask array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dppca_dask.accounting import SpendRecord, gaussian_sigma
from dppca_dask.budget import PrivacyBudget

__all__ = [
    "Release",
    "above_threshold",
    "exponential_mechanism",
    "gaussian_histogram",
    "gaussian_release",
    "gaussian_symmetric_matrix",
    "gaussian_zcdp",
    "gaussian_zcdp_symmetric",
    "histogram_noise_sigma",
    "laplace_release",
    "smooth_laplace",
    "stability_histogram",
    "stability_histogram_parameters",
    "symmetric_noise_sigma",
    "vec2mat",
]


@dataclass(frozen=True)
class Release:
    """A noisy value and the record of what producing it spent."""

    value: Any
    record: SpendRecord


def vec2mat(values: np.ndarray, p: int) -> np.ndarray:
    """Lay ``p(p+1)/2`` values out as a symmetric matrix (SPEC_dppca.md §4.3).

    The first ``p`` values form the diagonal; the rest fill the strict lower triangle in
    column-major order ((2,1), (3,1), …, (p,1), (3,2), …) divided by √2, mirrored to the upper
    triangle. With i.i.d. N(0, σ²) input, ‖E‖_F² ~ σ²χ²_q (the vech/√2 isometry).

    Examples
    --------
    >>> vec2mat(np.arange(1.0, 7.0), 3) * np.sqrt(2)  # doctest: +NORMALIZE_WHITESPACE
    array([[1.41421356, 4.        , 5.        ],
           [4.        , 2.82842712, 6.        ],
           [5.        , 6.        , 4.24264069]])
    """
    values = np.asarray(values, dtype=np.float64)
    q = p * (p + 1) // 2
    if values.shape != (q,):
        raise ValueError(f"vec2mat needs {q} values for p = {p}; got shape {values.shape}.")
    out = np.diag(values[:p])
    rows, cols = np.tril_indices(p, -1)
    order = np.lexsort((rows, cols))  # column-major: sort by column, then row
    rows, cols = rows[order], cols[order]
    off = values[p:] / math.sqrt(2.0)
    out[rows, cols] = off
    out[cols, rows] = off
    return out


def symmetric_noise_sigma(
    sensitivity: float, budget: PrivacyBudget, calibration: str
) -> float:
    """σ of the diagonal noise of :func:`gaussian_symmetric_matrix` (off-diagonal: σ/√2)."""
    return gaussian_sigma(sensitivity, budget.eps, budget.delta, calibration)


def gaussian_symmetric_matrix(
    matrix: np.ndarray,
    *,
    sensitivity: float,
    budget: PrivacyBudget,
    calibration: str,
    rng: Any,
    component: str,
) -> Release:
    """Gaussian mechanism on a symmetric matrix with Frobenius sensitivity ``sensitivity``.

    Draws q = p(p+1)/2 values N(0, σ²) in one call and adds ``vec2mat`` of them (SPEC §4.3).
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    p = matrix.shape[0]
    sigma = symmetric_noise_sigma(sensitivity, budget, calibration)
    q = p * (p + 1) // 2
    zeta = np.asarray(rng.normal(0.0, sigma, size=q), dtype=np.float64)
    noisy = matrix + vec2mat(zeta, p)
    record = SpendRecord(
        component=component,
        mechanism="gaussian_symmetric_matrix",
        eps=budget.eps,
        delta=budget.delta,
        sensitivity=sensitivity,
        sensitivity_norm="frobenius",
        noise="gaussian",
        scale=sigma,
        rho=sensitivity**2 / (2.0 * sigma**2),
        calibration=calibration,
        draws=q,
        note="diagonal sd = scale, off-diagonal sd = scale/sqrt(2)",
    )
    return Release(noisy, record)


def above_threshold(
    counts: np.ndarray,
    *,
    threshold: float,
    eps: float,
    rng: Any,
    component: str,
    label: str = "",
) -> Release:
    """Durfee's monotone AboveThreshold on a non-decreasing count vector (pure ε-DP).

    T̃ = threshold + Exp(rate ε/2); step i = 0, 1, … stops at the first i with
    counts[i] + Exp(rate ε/2) ≥ T̃ (Durfee 2023, "Unbounded differentially private quantile and
    maximum estimation", Alg. 2; SPEC_dppca.md §5.5b). Counts have sensitivity 1 under
    replace-one adjacency and are monotone in i, so each step's comparison needs no further budget.
    Draw order: one exponential for the threshold, then one per step tried.

    Returns a :class:`Release` whose value is ``(index, capped)``: the stopping index (0-based),
    and whether the search ran off the end of the grid (then ``index`` is the last one).
    """
    scale = 2.0 / eps
    noisy_threshold = threshold + float(rng.exponential(scale))
    index, capped, draws = len(counts) - 1, True, 1
    for i, count in enumerate(counts):
        draws += 1
        if float(count) + float(rng.exponential(scale)) >= noisy_threshold:
            index, capped = i, False
            break
    record = SpendRecord(
        component=component,
        mechanism="durfee_above_threshold",
        eps=eps,
        delta=0.0,
        sensitivity=1.0,
        sensitivity_norm="count",
        noise="exponential",
        scale=scale,
        draws=draws,
        note=label,
    )
    return Release((index, capped), record)


# --- ρ-zCDP mechanisms (SPEC_covariance.md §2; accounting in dppca_dask.zcdp) -------------------
# Records of zCDP-accounted mechanisms carry their cost in ``rho`` with calibration "zcdp"; their
# ``eps``/``delta`` fields are 0 because they were not calibrated to an (ε, δ) pair -- the release
# reports ε for a chosen δ from the total ρ (dppca_dask.zcdp.zcdp_eps).


def _zcdp_sigma(sensitivity: float, rho: float) -> float:
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ValueError(f"A Gaussian mechanism needs a positive finite sensitivity. "
                         f"Got {sensitivity!r}.")
    if not (rho > 0 and math.isfinite(rho)):
        raise ValueError(f"A zCDP Gaussian mechanism needs a positive finite rho. Got {rho!r}.")
    return sensitivity / math.sqrt(2.0 * rho)


def gaussian_zcdp(
    value: Any,
    *,
    sensitivity: float,
    rho: float,
    rng: Any,
    component: str,
    note: str = "",
) -> Release:
    """Gaussian mechanism in ρ-zCDP: ``value`` + N(0, σ²) per entry, σ = Δ/√(2ρ).

    ``sensitivity`` is the L2 sensitivity Δ of the whole of ``value`` (a scalar or an array);
    the cost is ρ = Δ²/(2σ²) (Bun & Steinke 2016, Prop. 1.6). Draws ``value.size`` normals in one
    call. A scalar ``value`` gives a float.

    Examples
    --------
    >>> rel = gaussian_zcdp(0.5, sensitivity=0.1, rho=0.5, rng=np.random.default_rng(0),
    ...                     component="measure")
    >>> round(rel.record.scale, 6), rel.record.rho
    (0.1, 0.5)
    """
    sigma = _zcdp_sigma(sensitivity, rho)
    arr = np.asarray(value, dtype=np.float64)
    noise = np.asarray(rng.normal(0.0, sigma, size=arr.size), dtype=np.float64)
    noisy = arr + noise.reshape(arr.shape)
    record = SpendRecord(
        component=component, mechanism="gaussian_zcdp", eps=0.0, delta=0.0,
        sensitivity=sensitivity, sensitivity_norm="l2", noise="gaussian", scale=sigma, rho=rho,
        calibration="zcdp", draws=int(arr.size), note=note,
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

    σ = Δ/√(2ρ); q = p(p+1)/2 normals N(0, σ²) are laid out by :func:`vec2mat` (diagonal sd σ,
    off-diagonal sd σ/√2: the vech/√2 isometry makes this the Gaussian mechanism in the Frobenius
    geometry), so the cost is ρ = Δ²/(2σ²).
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    p = matrix.shape[0]
    sigma = _zcdp_sigma(sensitivity, rho)
    q = p * (p + 1) // 2
    zeta = np.asarray(rng.normal(0.0, sigma, size=q), dtype=np.float64)
    record = SpendRecord(
        component=component, mechanism="gaussian_zcdp_symmetric", eps=0.0, delta=0.0,
        sensitivity=sensitivity, sensitivity_norm="frobenius", noise="gaussian", scale=sigma,
        rho=rho, calibration="zcdp", draws=q,
        note="diagonal sd = scale, off-diagonal sd = scale/sqrt(2)",
    )
    return Release(matrix + vec2mat(zeta, p), record)


def exponential_mechanism(
    scores: np.ndarray,
    *,
    epsilon: float,
    sensitivity: float,
    rng: Any,
    component: str,
    note: str = "",
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
    record = SpendRecord(
        component=component, mechanism="exponential_mechanism", eps=0.0, delta=0.0,
        sensitivity=sensitivity, sensitivity_norm="score", noise="gumbel",
        scale=2.0 * sensitivity / epsilon, rho=epsilon * epsilon / 8.0, calibration="zcdp",
        draws=int(scores.size), note=(f"epsilon = {epsilon!r} (pure DP). " + note).strip(),
    )
    return Release(index, record)


def histogram_noise_sigma(budget: PrivacyBudget, calibration: str) -> float:
    """σ of :func:`gaussian_histogram`: L2 sensitivity √2 of a count vector (replace-one)."""
    return gaussian_sigma(math.sqrt(2.0), budget.eps, budget.delta, calibration)


def gaussian_histogram(
    counts: np.ndarray,
    *,
    budget: PrivacyBudget,
    calibration: str,
    rng: Any,
    component: str,
    label: str = "",
) -> Release:
    """Additive Gaussian histogram (dp_score "add"; SPEC_dppca.md §6.6, Algorithm 4).

    ĉ_k = max(c_k + N(0, σ²), 0) with σ = √2·sqrt(2 ln(1.25/δ))/ε (classical calibration): one
    replaced observation moves two cells by one each, so the L2 sensitivity is √2. Draws one
    normal per cell in cell order (``counts`` flattened in C order: x fastest for (m_y, m_x)).
    The value has the shape of ``counts``; normalising it is post-processing.
    """
    counts = np.asarray(counts, dtype=np.float64)
    sigma = histogram_noise_sigma(budget, calibration)
    noise = np.asarray(rng.normal(0.0, sigma, size=counts.size), dtype=np.float64)
    noisy = np.maximum(counts + noise.reshape(counts.shape), 0.0)
    record = SpendRecord(
        component=component,
        mechanism="gaussian_histogram",
        eps=budget.eps,
        delta=budget.delta,
        sensitivity=math.sqrt(2.0),
        sensitivity_norm="l2",
        noise="gaussian",
        scale=sigma,
        rho=1.0 / sigma**2,
        calibration=calibration,
        draws=int(counts.size),
        note=label,
    )
    return Release(noisy, record)


def stability_histogram_parameters(n: int, budget: PrivacyBudget) -> tuple[float, float]:
    """Laplace scale b = 2/(εn) and threshold t = 2 ln(2/δ)/(εn) + 1/n on proportions.

    Examples
    --------
    >>> [round(v, 7) for v in stability_histogram_parameters(300, PrivacyBudget(1.0, 5e-4))]
    [0.0066667, 0.058627]
    """
    scale = 2.0 / (budget.eps * n)
    threshold = 2.0 * math.log(2.0 / budget.delta) / (budget.eps * n) + 1.0 / n
    return scale, threshold


def stability_histogram(
    proportions: np.ndarray,
    *,
    n: int,
    budget: PrivacyBudget,
    rng: Any,
    component: str,
    label: str = "",
) -> Release:
    """Stability-based sparse histogram (dp_score "sparse"; Karwa & Vadhan; SPEC §6.6, Alg. 5).

    On proportions p̂_k = c_k/n: empty cells stay 0 **without a draw**; every other cell, in cell
    order, gets q_k = max(p̂_k + Laplace(b), 0), set to 0 when below the threshold t
    (:func:`stability_histogram_parameters`). Only cells non-empty in the data can be released,
    which is why δ is needed. The value is unnormalised (it may be all zero).
    """
    props = np.asarray(proportions, dtype=np.float64)
    scale, threshold = stability_histogram_parameters(n, budget)
    flat = props.ravel()
    out = np.zeros_like(flat)
    nonempty = np.flatnonzero(flat > 0)
    if nonempty.size:
        noise = np.asarray(rng.laplace(0.0, scale, size=nonempty.size), dtype=np.float64)
        q = np.maximum(flat[nonempty] + noise.reshape(-1), 0.0)
        out[nonempty] = np.where(q < threshold, 0.0, q)
    record = SpendRecord(
        component=component,
        mechanism="stability_histogram",
        eps=budget.eps,
        delta=budget.delta,
        sensitivity=2.0 / n,
        sensitivity_norm="l1",
        noise="laplace",
        scale=scale,
        draws=int(nonempty.size),
        note=f"{label}; threshold {threshold!r}".lstrip("; "),
    )
    return Release(out.reshape(props.shape), record)


def smooth_laplace(
    value: float,
    *,
    smooth_sensitivity: float,
    budget: PrivacyBudget,
    rng: Any,
    component: str,
    label: str = "",
) -> Release:
    """Smooth-sensitivity Laplace release of a statistic (Nissim, Raskhodnikova & Smith 2007).

    value + Laplace(2·SS/ε), where SS is the β-smooth sensitivity with β = ε/(2 ln(1/δ))
    (computed exactly on the driver; SPEC_dppca.md §6.4(i)). One Laplace draw.
    """
    scale = 2.0 * smooth_sensitivity / budget.eps
    noise = float(np.asarray(rng.laplace(0.0, scale, size=1)).reshape(-1)[0]) if scale > 0 else 0.0
    record = SpendRecord(
        component=component,
        mechanism="smooth_sensitivity_laplace",
        eps=budget.eps,
        delta=budget.delta,
        sensitivity=smooth_sensitivity,
        sensitivity_norm="smooth",
        noise="laplace",
        scale=scale,
        draws=1 if scale > 0 else 0,
        note=label,
    )
    return Release(float(value) + noise, record)


# --- scalar and vector Gaussian / Laplace releases (dp_scree; SPEC_dppca.md §5) -------------------


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

    σ = Δ·sqrt(2 ln(1.25/δ))/ε (``"classical"``) or the analytic σ (``"analytic"``). A scalar
    draws one normal (R's ``rnorm(1, 0, sd)``); a vector draws ``len(value)`` normals in one
    call. A zero sensitivity releases the value unchanged (σ = 0; R draws nothing then either).

    Examples
    --------
    >>> rel = gaussian_release(1.0, sensitivity=3 / 99, budget=PrivacyBudget(1.0, 5e-4),
    ...                        calibration="classical", rng=np.random.default_rng(0),
    ...                        component="scree")
    >>> round(rel.record.scale, 10)
    0.1198717252
    """
    sigma = (0.0 if sensitivity == 0
             else gaussian_sigma(sensitivity, budget.eps, budget.delta, calibration))
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        noisy: Any = float(arr) + float(rng.normal(0.0, sigma))
        draws = 1
    else:
        noise = np.asarray(rng.normal(0.0, sigma, size=arr.size), dtype=np.float64)
        noisy = arr + noise.reshape(arr.shape)
        draws = int(arr.size)
    record = SpendRecord(
        component=component,
        mechanism="gaussian",
        eps=budget.eps,
        delta=budget.delta,
        sensitivity=sensitivity,
        sensitivity_norm="l2",
        noise="gaussian",
        scale=sigma,
        rho=sensitivity**2 / (2.0 * sigma**2) if sigma > 0 else 0.0,
        calibration=calibration,
        draws=draws,
        note=label,
    )
    return Release(noisy, record)


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

    Adds Laplace(scale Δ/ε) to each entry, one draw per entry in order (VGAM's ``rlaplace``).

    Examples
    --------
    >>> rel = laplace_release(np.zeros(3), sensitivity=2.0, eps=0.5,
    ...                       rng=np.random.default_rng(0), component="scree")
    >>> rel.record.scale, rel.record.draws
    (4.0, 3)
    """
    arr = np.asarray(values, dtype=np.float64)
    scale = sensitivity / eps
    noise = np.asarray(rng.laplace(0.0, scale, size=arr.size), dtype=np.float64)
    record = SpendRecord(
        component=component,
        mechanism="laplace",
        eps=eps,
        delta=0.0,
        sensitivity=sensitivity,
        sensitivity_norm="l1",
        noise="laplace",
        scale=scale,
        draws=int(arr.size),
        note=label,
    )
    return Release(arr + noise.reshape(arr.shape), record)
