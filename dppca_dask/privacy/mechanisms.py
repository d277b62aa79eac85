"""Noise mechanisms: the only module that draws privacy noise.

Each mechanism is a pure function of a small exact statistic (already computed by a data pass and
held on the driver), a budget and a generator. It returns the noisy value together with a frozen
:class:`~dppca_dask.privacy.accounting.SpendRecord`. No mechanism touches a Dask array.

Floating-point safety (docs/privacy.md): every Gaussian and Laplace mechanism rounds the statistic
to a public grid γ = 2^k (:func:`~dppca_dask.privacy.accounting.public_grid`; γ = 1 for counts), adds
*integer* noise from the exact samplers of :mod:`dppca_dask.privacy.exact_noise` and outputs γ·(integer).
The output is a deterministic function of the noisy integer (post-processing), so no bit of it
depends on the statistic beyond that integer. The rounding is accounted for by calibrating to the
inflated sensitivity Δ + γ√d (L2) or Δ + γ·d (L1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dppca_dask.privacy.accounting import (
    SpendRecord,
    gaussian_sigma,
    histogram_gaussian_variance,
    lattice_gaussian_sd,
    public_grid,
    rounded_l2_sensitivity,
)
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

__all__ = [
    "Release",
    "above_threshold",
    "exponential_mechanism",
    "gaussian_calibration",
    "geometric_histogram",
    "geometric_histogram_scale",
    "gaussian_histogram",
    "gaussian_release",
    "gaussian_release_sigma",
    "gaussian_symmetric_matrix",
    "gaussian_zcdp",
    "gaussian_zcdp_symmetric",
    "histogram_noise_sigma",
    "laplace_release",
    "mat2vec",
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


def _strict_lower(p: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the strict lower triangle in column-major order ((2,1), (3,1), …)."""
    rows, cols = np.tril_indices(p, -1)
    order = np.lexsort((rows, cols))  # sort by column, then row
    return rows[order], cols[order]


def vec2mat(values: np.ndarray, p: int) -> np.ndarray:
    """Lay ``p(p+1)/2`` values out as a symmetric matrix (docs/spec/SPEC_dppca.md §4.3).

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
    rows, cols = _strict_lower(p)
    off = values[p:] / math.sqrt(2.0)
    out[rows, cols] = off
    out[cols, rows] = off
    return out


def mat2vec(matrix: np.ndarray) -> np.ndarray:
    """The isometric vech of a symmetric matrix, the inverse of :func:`vec2mat`: the diagonal,
    then √2 × the strict lower triangle in column-major order (‖vech‖₂ = ‖matrix‖_F).

    Examples
    --------
    >>> m = vec2mat(np.arange(1.0, 7.0), 3)
    >>> bool(np.allclose(mat2vec(m), np.arange(1.0, 7.0)))
    True
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    rows, cols = _strict_lower(matrix.shape[0])
    return np.concatenate([np.diag(matrix), math.sqrt(2.0) * matrix[rows, cols]])


def gaussian_calibration(sensitivity: float, dimension: int, budget: PrivacyBudget,
                         calibration: str) -> dict[str, Any]:
    """The public calibration of an exact (ε, δ) Gaussian release of ``dimension`` values: its
    grid γ, the grid-inflated sensitivity, the integer variance s² and the noise sd γ·s that the
    record states -- computed before any data (plans use it; :func:`_exact_gaussian` draws with
    it)."""
    grid, inflated, sd, cert = lattice_gaussian_sd(sensitivity, dimension, budget.eps,
                                                   budget.delta, calibration)
    s2 = grid_variance(sd, grid)
    return {"grid": grid, "sensitivity": inflated, "s2": s2,
            "scale": grid * math.sqrt(float(s2)), "certificate": cert}


def _exact_gaussian(values: np.ndarray, sensitivity: float, budget: PrivacyBudget,
                    calibration: str, rng: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """γ·(round(values/γ) + N_Z(0, s²)): the (ε, δ) lattice Gaussian (docs/privacy.md)."""
    d = int(values.size)
    cal = gaussian_calibration(sensitivity, d, budget, calibration)
    grid, inflated, s2, cert = cal["grid"], cal["sensitivity"], cal["s2"], cal["certificate"]
    noisy = add_ints(to_grid(values, grid), discrete_gaussian(rng, s2, d))
    actual = cal["scale"]
    info = {"grid": grid, "sensitivity": inflated, "scale": actual,
            "rho": inflated ** 2 / (2.0 * actual ** 2),
            "note": (f"exact discrete Gaussian on grid 2^{math.frexp(grid)[1] - 1}; certified "
                     f"eps0 {cert.eps0:.6g}, lattice term a {cert.a:.3g}, tails {cert.tail:.3g}, "
                     f"delta bound {cert.delta_total:.6g}")}
    return from_grid(noisy, grid), info


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


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


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
    :func:`vec2mat` (post-processing): diagonal sd σ, off-diagonal sd σ/√2 (SPEC §4.3).
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    p = matrix.shape[0]
    q = p * (p + 1) // 2
    out, info = _exact_gaussian(mat2vec(matrix), sensitivity, budget, calibration, rng)
    record = SpendRecord(
        component=component,
        mechanism="gaussian_symmetric_matrix",
        eps=budget.eps,
        delta=budget.delta,
        sensitivity=info["sensitivity"],
        sensitivity_norm="frobenius",
        noise="gaussian",
        scale=info["scale"],
        rho=info["rho"],
        calibration=calibration,
        draws=q,
        note=_join("diagonal sd = scale, off-diagonal sd = scale/sqrt(2)", info["note"], basis),
        grid=info["grid"],
    )
    return Release(vec2mat(out, p), record)


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
    maximum estimation", Alg. 2; docs/spec/SPEC_dppca.md §5.5b). Counts have sensitivity 1 under
    replace-one adjacency and are monotone in i, so each step's comparison needs no further budget.
    Draw order: one exponential for the threshold, then one per step tried (the record states
    the public upper bound, one more than the grid length).

    Returns a :class:`Release` whose value is ``(index, capped)``: the stopping index (0-based),
    and whether the search ran off the end of the grid (then ``index`` is the last one).
    """
    scale = 2.0 / eps
    noisy_threshold = threshold + float(rng.exponential(scale))
    index, capped = len(counts) - 1, True
    for i, count in enumerate(counts):
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
        draws=len(counts) + 1,  # the public upper bound: the steps tried follow the released index
        note=label,
    )
    return Release((index, capped), record)


# --- ρ-zCDP mechanisms (docs/spec/SPEC_covariance.md §2; accounting in dppca_dask.privacy.zcdp) -------------------
# Records of zCDP-accounted mechanisms carry their cost in ``rho`` with calibration "zcdp"; their
# ``eps``/``delta`` fields are 0 because they were not calibrated to an (ε, δ) pair -- the release
# reports ε for a chosen δ from the total ρ (dppca_dask.privacy.zcdp.zcdp_eps).


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
        note=_join(note, info["note"]), grid=info["grid"],
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
        note=_join("diagonal sd = scale, off-diagonal sd = scale/sqrt(2)", info["note"]),
        grid=info["grid"],
    )
    return Release(vec2mat(out, p), record)


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
    s2 = grid_variance(math.sqrt(histogram_gaussian_variance(budget.eps, budget.delta,
                                                             calibration)), 1.0)
    noisy = add_ints(to_grid(arr, 1.0), discrete_gaussian(rng, s2, int(arr.size)))
    out = np.maximum(from_grid(noisy, 1.0), 0.0).reshape(arr.shape)
    sigma = math.sqrt(float(s2))
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
        draws=int(arr.size),
        note=_join(label, "exact discrete Gaussian on integer counts"),
        grid=1.0,
    )
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
    ints = to_grid(arr, 1.0)
    threshold = _stability_threshold(budget.eps, budget.delta)
    scale = _stability_scale(budget.eps)
    noisy = add_ints(ints, discrete_laplace(rng, scale, int(arr.size)))
    keep = (ints > 0) & (noisy >= threshold)
    out = np.where(keep, from_grid(noisy, 1.0), 0.0) / n
    record = SpendRecord(
        component=component,
        mechanism="stability_histogram",
        eps=budget.eps,
        delta=budget.delta,
        sensitivity=2.0,
        sensitivity_norm="l1",
        noise="laplace",
        scale=float(scale),
        draws=int(arr.size),
        note=_join(label, f"counts; threshold {threshold} counts; exact discrete Laplace, one "
                          "draw per cell"),
        grid=1.0,
    )
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
        post = "negative counts clipped to 0 (post-processing)"
    else:
        out = _project_to_total(values, int(total)).reshape(arr.shape)
        post = "projected onto counts >= 0 summing to the public total (post-processing)"
    record = SpendRecord(
        component=component,
        mechanism="geometric_histogram",
        eps=eps,
        delta=0.0,
        sensitivity=2.0,
        sensitivity_norm="l1",
        noise="geometric",
        scale=float(scale),
        draws=int(arr.size),
        note=_join(label, "counts; exact two-sided geometric (discrete Laplace) noise, one "
                          f"draw per cell; {post}"),
        grid=1.0,
    )
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


SMOOTH_GRID = 2.0 ** -40
"""Default public grid of :func:`smooth_laplace` (its scale is data-dependent, so the grid
cannot be derived from it)."""


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
    record = SpendRecord(
        component=component,
        mechanism="smooth_sensitivity_laplace",
        eps=budget.eps,
        delta=budget.delta,
        sensitivity=None,
        sensitivity_norm="smooth",
        noise="laplace",
        scale=None,
        draws=1,
        note=_join(label, "sensitivity and scale are data-dependent (smooth sensitivity) and "
                          "not recorded; exact discrete Laplace"),
        grid=grid,
    )
    return Release(float(from_grid(noisy, grid)[0]), record)


# --- scalar and vector Gaussian / Laplace releases (dp_scree; docs/spec/SPEC_dppca.md §5) -------------------


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
    if sensitivity == 0:
        noisy: Any = float(arr) if arr.ndim == 0 else arr.copy()
        info: dict[str, Any] = {"sensitivity": 0.0, "scale": 0.0, "rho": 0.0, "grid": None,
                                "note": "zero sensitivity: released unchanged"}
        draws = int(arr.size)  # the public number of draws (none were needed this time)
    else:
        out, info = _exact_gaussian(arr.ravel(), sensitivity, budget, calibration, rng)
        noisy = float(out[0]) if arr.ndim == 0 else out.reshape(arr.shape)
        draws = int(arr.size)
    record = SpendRecord(
        component=component,
        mechanism="gaussian",
        eps=budget.eps,
        delta=budget.delta,
        sensitivity=info["sensitivity"],
        sensitivity_norm="l2",
        noise="gaussian",
        scale=info["scale"],
        rho=info["rho"],
        calibration=calibration,
        draws=draws,
        note=_join(label, info["note"]),
        grid=info["grid"],
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
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ValueError(f"The Laplace mechanism needs a positive finite sensitivity. "
                         f"Got {sensitivity!r}.")
    d = max(int(arr.size), 1)
    grid = public_grid(sensitivity, d, "l1")
    grid_sens = Fraction(sensitivity) / Fraction(grid) + d
    scale = round_up_rational(grid_sens / Fraction(eps))
    noisy = add_ints(to_grid(arr, grid), discrete_laplace(rng, scale, int(arr.size)))
    record = SpendRecord(
        component=component,
        mechanism="laplace",
        eps=eps,
        delta=0.0,
        sensitivity=float(grid_sens * Fraction(grid)),
        sensitivity_norm="l1",
        noise="laplace",
        scale=float(scale * Fraction(grid)),
        draws=int(arr.size),
        note=_join(label, f"exact discrete Laplace on grid 2^{math.frexp(grid)[1] - 1}"),
        grid=grid,
    )
    return Release(from_grid(noisy, grid).reshape(arr.shape), record)
