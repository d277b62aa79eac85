"""Histogram mechanisms on integer cell counts (dp_score; docs/spec/SPEC_dppca.md §6.6,
docs/design/histogram_mechanisms.md): the additive Gaussian (:func:`gaussian_histogram`, "add"),
the stability-based sparse histogram (:func:`stability_histogram`, "sparse") and the two-sided
geometric (:func:`geometric_histogram`, "geometric"), with their public parameters. Counts need
no grid (γ = 1): exact integer noise is added to the integer counts, one draw per cell in cell
order; clipping, thresholding and projecting are post-processing."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dppca_dask.privacy.accounting import SpendRecord, histogram_gaussian_variance
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.exact_noise import (
    add_ints,
    discrete_gaussian,
    discrete_laplace,
    from_grid,
    grid_variance,
    round_up_rational,
    to_grid,
)
from dppca_dask.privacy.mechanisms.release import Release, join_notes

__all__ = [
    "gaussian_histogram",
    "gaussian_histogram_record",
    "geometric_histogram",
    "geometric_histogram_record",
    "geometric_histogram_scale",
    "histogram_noise_sigma",
    "stability_histogram",
    "stability_histogram_record",
    "stability_histogram_parameters",
]


def histogram_noise_sigma(budget: PrivacyBudget, calibration: str) -> float:
    """σ of :func:`gaussian_histogram`: the discrete Gaussian's σ for a count vector under
    replace-one adjacency (L2 sensitivity √2; the exact integer privacy curve,
    :func:`~dppca_dask.privacy.accounting.histogram_gaussian_variance`)."""
    return math.sqrt(float(grid_variance(
        math.sqrt(histogram_gaussian_variance(budget.eps, budget.delta, calibration)), 1.0)))


def _as_counts(counts: Any, owner: str) -> np.ndarray:
    arr = np.asarray(counts, dtype=np.float64)
    if not (np.isfinite(arr).all() and (arr >= 0).all() and (arr == np.rint(arr)).all()):
        raise ValueError(f"{owner} needs non-negative integer counts.")
    return arr


def _histogram_variance(budget: PrivacyBudget, calibration: str) -> Fraction:
    return grid_variance(math.sqrt(histogram_gaussian_variance(budget.eps, budget.delta,
                                                               calibration)), 1.0)


def gaussian_histogram_record(*, component: str, budget: PrivacyBudget, calibration: str,
                              cells: int | None, label: str = "") -> SpendRecord:
    """The record of one :func:`gaussian_histogram` of ``cells`` counts (L2 sensitivity √2,
    the integer σ of :func:`histogram_noise_sigma`; ``cells`` ``None``: not stated). The one
    builder of this record: the plans and the mechanism call it."""
    sigma = math.sqrt(float(_histogram_variance(budget, calibration)))
    return SpendRecord(
        component=component, mechanism="gaussian_histogram", eps=budget.eps,
        delta=budget.delta, sensitivity=math.sqrt(2.0), sensitivity_norm="l2", noise="gaussian",
        scale=sigma, rho=1.0 / sigma**2, calibration=calibration, draws=cells or 0,
        note=join_notes(label, "exact discrete Gaussian on integer counts"), grid=1.0)


def gaussian_histogram(
    counts: np.ndarray,
    *,
    budget: PrivacyBudget,
    calibration: str,
    rng: Any,
    component: str,
    label: str = "",
) -> Release:
    """Additive Gaussian histogram (dp_score "add"; docs/spec/SPEC_dppca.md §6.6, Algorithm 4).

    ĉ_k = max(c_k + Y_k, 0) with Y_k i.i.d. discrete Gaussian N_Z(0, σ²) on the integer counts
    (grid 1, no rounding): one replaced observation moves two cells by one each, and σ is
    calibrated on the exact privacy curve of that pair (:func:`histogram_noise_sigma`). Draws one
    value per cell in cell order (``counts`` flattened in C order). The value has the shape of
    ``counts``; normalising it is post-processing.
    """
    arr = _as_counts(counts, "gaussian_histogram")
    record = gaussian_histogram_record(component=component, budget=budget,
                                       calibration=calibration, cells=int(arr.size), label=label)
    s2 = _histogram_variance(budget, calibration)
    noisy = add_ints(to_grid(arr, 1.0), discrete_gaussian(rng, s2, int(arr.size)))
    out = np.maximum(from_grid(noisy, 1.0), 0.0).reshape(arr.shape)
    return Release(out, record)


def _stability_scale(eps: float) -> Fraction:
    return round_up_rational(Fraction(2) / Fraction(eps))


def _stability_threshold(eps: float, delta: float) -> int:
    """The smallest integer T with P(Z ≥ T − 1) ≤ δ/2 for Z discrete Laplace(b = 2/ε):
    P(Z ≥ k) = q^k/(1 + q), q = e^{−1/b} (k ≥ 1)."""
    b = float(_stability_scale(eps))
    q = math.exp(-1.0 / b)
    k = max(1, math.ceil(b * (math.log(2.0 / delta) - math.log1p(q)) * (1 + 1e-12) + 1e-9))
    while k * (-1.0 / b) - math.log1p(q) > math.log(delta / 2.0):
        k += 1
    return k + 1


def stability_histogram_parameters(n: int, budget: PrivacyBudget) -> tuple[float, float]:
    """Laplace scale b/n and release threshold T/n of :func:`stability_histogram` in proportions.

    b ≥ 2/ε is the discrete Laplace scale on counts; T the integer count threshold with
    P(1 + Z ≥ T) ≤ δ/2.

    Examples
    --------
    >>> [round(v, 7) for v in stability_histogram_parameters(300, PrivacyBudget(1.0, 5e-4))]
    [0.0066667, 0.0566667]
    """
    scale = float(_stability_scale(budget.eps)) / n
    return scale, _stability_threshold(budget.eps, budget.delta) / n


def stability_histogram_record(*, component: str, budget: PrivacyBudget, cells: int | None,
                               label: str = "") -> SpendRecord:
    """The record of one :func:`stability_histogram` of ``cells`` counts (L1 sensitivity 2,
    discrete Laplace scale b ≥ 2/ε, integer threshold T). The one builder of this record."""
    return SpendRecord(
        component=component, mechanism="stability_histogram", eps=budget.eps,
        delta=budget.delta, sensitivity=2.0, sensitivity_norm="l1", noise="laplace",
        scale=float(_stability_scale(budget.eps)), draws=cells or 0,
        note=join_notes(label, f"counts; threshold {_stability_threshold(budget.eps, budget.delta)}"
                        " counts; exact discrete Laplace, one draw per cell"),
        grid=1.0)


def stability_histogram(
    counts: np.ndarray,
    *,
    n: int,
    budget: PrivacyBudget,
    rng: Any,
    component: str,
    label: str = "",
) -> Release:
    """Stability-based sparse histogram on integer counts (dp_score "sparse"; Karwa & Vadhan;
    SPEC §6.6, Alg. 5), with exact discrete Laplace noise.

    Every cell (a public number of draws, in cell order) gets c̃_k = c_k + Z_k, Z_k i.i.d.
    discrete Laplace with scale b ≥ 2/ε (replace-one moves two counts by one: L1 sensitivity 2);
    a cell is released iff c_k > 0 and c̃_k ≥ T, where T is the integer threshold with
    P(1 + Z ≥ T) ≤ δ/2 (:func:`stability_histogram_parameters`), so a cell present in only one
    of two neighbours (count 1) appears with probability at most δ/2. The value is the released
    counts divided by n (unnormalised proportions, post-processing; it may be all zero).
    """
    arr = _as_counts(counts, "stability_histogram")
    record = stability_histogram_record(component=component, budget=budget,
                                        cells=int(arr.size), label=label)
    ints = to_grid(arr, 1.0)
    threshold = _stability_threshold(budget.eps, budget.delta)
    noisy = add_ints(ints, discrete_laplace(rng, _stability_scale(budget.eps), int(arr.size)))
    keep = (ints > 0) & (noisy >= threshold)
    out = np.where(keep, from_grid(noisy, 1.0), 0.0) / n
    return Release(out.reshape(arr.shape), record)


def geometric_histogram_scale(eps: float) -> Fraction:
    """Scale b of :func:`geometric_histogram`: 2/ε rounded *up* to a dyadic rational (within
    2^-24 relative), so b ≥ 2/ε exactly; a function of ε only (plans state it).

    Examples
    --------
    >>> geometric_histogram_scale(0.5), float(geometric_histogram_scale(0.3)) >= 2 / 0.3
    (Fraction(4, 1), True)
    """
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"The geometric histogram needs a positive finite epsilon. Got {eps!r}.")
    return round_up_rational(Fraction(2) / Fraction(eps))


def geometric_histogram_record(*, component: str, eps: float, cells: int | None,
                               label: str = "", projected: bool = True) -> SpendRecord:
    """The record of one :func:`geometric_histogram` of ``cells`` counts (pure ε, L1
    sensitivity 2, scale :func:`geometric_histogram_scale`; ``projected``: onto a public total).
    The one builder of this record: the plans and the mechanism call it."""
    post = ("projected onto counts >= 0 summing to the public total (post-processing)"
            if projected else "negative counts clipped to 0 (post-processing)")
    return SpendRecord(
        component=component, mechanism="geometric_histogram", eps=eps, delta=0.0,
        sensitivity=2.0, sensitivity_norm="l1", noise="geometric",
        scale=float(geometric_histogram_scale(eps)), draws=cells or 0,
        note=join_notes(label, "counts; exact two-sided geometric (discrete Laplace) noise, one "
                        f"draw per cell; {post}"),
        grid=1.0)


def geometric_histogram(
    counts: np.ndarray,
    *,
    eps: float,
    rng: Any,
    component: str,
    label: str = "",
    total: int | None = None,
) -> Release:
    """Two-sided geometric histogram (dp_score "geometric"; Ghosh, Roughgarden & Sundararajan
    2012): pure ε-DP, exact integer noise on the integer cell counts.

    Y_k = c_k + Z_k with Z_k i.i.d. discrete Laplace on Z, P(z) ∝ exp(−|z|/b) (the
    two-sided geometric distribution with q = e^{−1/b}), b = :func:`geometric_histogram_scale`
    ≥ 2/ε: one replaced observation moves one count down and one up (L1 sensitivity 2), and
    the pmf ratio under an integer shift v is at most exp(‖v‖₁/b) ≤ e^ε (proof:
    docs/design/histogram_mechanisms.md). Sampled exactly (:func:`~dppca_dask.privacy.
    exact_noise.discrete_laplace`, CKS 2020 Alg. 2: uniform integers from ``rng.integers`` and
    integer arithmetic only); no float is formed before the noisy integers exist. One draw per
    cell in cell order (``counts`` flattened in C order). Post-processing: without ``total``,
    ĉ_k = max(Y_k, 0); with a public ``total`` (dp_score passes the public n), ĉ is the
    Euclidean projection of Y onto {ĉ ≥ 0, Σĉ = total} (``_project_to_total``: ĉ_k =
    max(Y_k − τ, 0), one τ for all cells), which removes most of the mass that the clip leaves
    in empty cells (TV 0.1–0.4× lower at ε ≤ 0.5, docs/design/histogram_mechanisms.md). The
    value has the shape of ``counts``.

    Examples
    --------
    >>> rel = geometric_histogram(np.array([[5, 0], [2, 9]]), eps=1.0,
    ...                           rng=np.random.default_rng(0), component="score")
    >>> rel.value.shape, rel.record.scale, rel.record.delta, rel.record.draws
    ((2, 2), 2.0, 0.0, 4)
    >>> bool((rel.value >= 0).all() and (rel.value == np.rint(rel.value)).all())
    True
    """
    arr = _as_counts(counts, "geometric_histogram")
    scale = geometric_histogram_scale(eps)
    if total is not None and not (isinstance(total, int | np.integer) and total >= 0):
        raise ValueError(f"geometric_histogram: total must be a non-negative int (the public "
                         f"number of observations). Got {total!r}.")
    noisy = add_ints(to_grid(arr, 1.0), discrete_laplace(rng, scale, int(arr.size)))
    values = from_grid(noisy, 1.0)
    if total is None:
        out = np.maximum(values, 0.0).reshape(arr.shape)
    else:
        out = _project_to_total(values, int(total)).reshape(arr.shape)
    record = geometric_histogram_record(component=component, eps=eps, cells=int(arr.size),
                                        label=label, projected=total is not None)
    return Release(out, record)


def _project_to_total(values: np.ndarray, total: int) -> np.ndarray:
    """Euclidean projection of ``values`` onto {x ≥ 0, Σx = total} (post-processing of a noisy
    count vector; Duchi et al. 2008's sort-based rule): x_k = max(v_k − τ, 0) with the one τ
    that makes the sum ``total``. Flattened float64; ``total`` 0 gives zeros.

    Examples
    --------
    >>> _project_to_total(np.array([5.0, -2.0, 1.0, 0.0]), 4).tolist()
    [4.0, 0.0, 0.0, 0.0]
    >>> _project_to_total(np.array([3.0, 3.0, -1.0]), 8).tolist()
    [4.0, 4.0, 0.0]
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    if total <= 0 or v.size == 0:
        return np.zeros_like(v)
    desc = np.sort(v)[::-1]
    taus = (np.cumsum(desc) - float(total)) / np.arange(1, v.size + 1)
    keep = int(np.flatnonzero(desc - taus > 0)[-1])  # the largest j with v_(j) > τ_j
    return np.maximum(v - taus[keep], 0.0)
