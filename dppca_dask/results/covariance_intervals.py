"""Intervals of a covariance release's entries and eigenvalues, from the release (its
``measurement`` and ``precision_weight`` variables) and public quantities only --
post-processing, no budget (issue 33; docs/intervals.md).

The noise-free statistic is the release with its noise set to 0: Σ = XᵀX/n of the data clipped
to the bounds (box: |x_j| ≤ B_j; row: ‖x‖ ≤ R, the released radius when it is private), on the
mechanisms' public grid. Each measured entry's ``measurement`` is a Gaussian draw about Σ_jk
with precision λ_jk (sd 1/√λ_jk; ssp/auto/diagonal: one draw, independent across the
d(d+1)/2 entries; pace_ggm: the precision-weighted mean of its adaptively chosen rounds, whose
law is Gaussian only approximately).

**Entries.** Bonferroni over the m measured entries (the upper triangle): ``measurement ± z/√λ``
with ``z = Φ⁻¹(1 − α/(2m))``, intersected with the public range of Σ (box: diagonal
[0, B_j²], off the diagonal [−B_jB_k, B_jB_k]; row: [0, R²] and [−R²/2, R²/2]); an unmeasured
entry gets the public range (it holds with probability 1).

**Eigenvalues** (every entry measured: ssp, auto). The noise matrix E has entry sds s_jk; with
s = max(max_{j<k} s_jk, max_j s_jj/√2), Sudakov–Fernique (the increments of v ↦ vᵀEv grow
with every s_jk) gives E λ_max(E) ≤ 2s√p, the homogeneous GOE's, and λ_max(E), −λ_min(E) are
√2·s-Lipschitz in the standard normals, so ``‖E‖₂ ≤ b = √2·s(√(2p) + √(2 ln(2/α')))`` with
probability ≥ 1 − α'. For a fixed unit v, vᵀEv is Gaussian with variance Σ_j v_j⁴s_jj² +
4Σ_{j<k} v_j²v_k²s_jk² ≤ 2s², and with v_j the noise-free eigenvector, θ_j the angle between
it and the measurement matrix's and w ⊥ v_j, ``λ̂_j − λ_j = v_jᵀEv_j + tan θ_j·v_jᵀEw``
(the eigen-equation projected on v_j). On the event {‖E‖₂ ≤ b at α' = α/2, every
|v_jᵀEv_j| ≤ z√2·s with z at α/(4p)}: ``|λ̂_j − λ_j| ≤ min(b, z√2·s + b·tan θ_j)``, θ_j the
Davis–Kahan bound sin θ_j ≤ b/(ĝ_j − b) from the released eigengap ĝ_j (Weyl's b where
ĝ_j ≤ 2b): about z√2·s for a separated eigenvalue, b in the noise; clamped to [0, the public
bound on the trace].
"""

from __future__ import annotations

import math

import numpy as np

from dppca_dask.results.direction_intervals import angle_bounds

__all__ = ["LEVEL", "covariance_intervals", "public_range", "sampling_sd"]

LEVEL = 0.95
"""Level of the entry intervals (simultaneous over the entries) and of the eigenvalue
intervals (simultaneous over the eigenvalues)."""


def public_range(bounds: np.ndarray, clip: str) -> tuple[np.ndarray, np.ndarray, float]:
    """The range of Σ = XᵀX/n for clipped data: entrywise lower and upper ends and the bound
    on its trace (box: Σ B_j²; row: R²)."""
    b = np.asarray(bounds, dtype=np.float64)
    if clip == "row":
        r2 = float(b[0]) ** 2
        hi = np.full((b.size, b.size), r2 / 2.0)
        np.fill_diagonal(hi, r2)
        trace = r2
    else:
        hi = np.outer(b, b)
        trace = float(np.sum(b ** 2))
    lo = -hi.copy()
    np.fill_diagonal(lo, 0.0)
    return lo, hi, trace


def covariance_intervals(measurement: np.ndarray, weights: np.ndarray, bounds: np.ndarray,
                         clip: str, level: float = LEVEL) -> dict[str, np.ndarray | float]:
    """``lower``/``upper`` (d x d) of the entries and, when every entry was measured,
    ``eigenvalue``/``eigenvalue_lower``/``eigenvalue_upper`` (decreasing; NaN otherwise) and
    the noise-norm bound ``b``.

    >>> out = covariance_intervals(np.array([[1.0, 0.1], [0.1, 0.5]]), np.full((2, 2), 1e4),
    ...                            np.array([2.0, 2.0]), "box")
    >>> [round(float(v), 3) for v in (out["lower"][0, 0], out["upper"][0, 1])]
    [0.976, 0.124]
    """
    from scipy.stats import norm

    weights = np.asarray(weights, dtype=np.float64)
    measured = weights > 0
    d = weights.shape[0]
    lo, hi, trace = public_range(bounds, clip)
    m = int(np.count_nonzero(np.triu(measured)))
    lower, upper = lo.copy(), hi.copy()
    if m:
        z = float(norm.isf((1.0 - level) / (2.0 * m)))
        with np.errstate(divide="ignore", invalid="ignore"):
            sd = np.where(measured, 1.0 / np.sqrt(np.where(measured, weights, 1.0)), np.inf)
            y = np.where(measured, measurement, 0.0)
            lower = np.where(measured, np.maximum(y - z * sd, lo), lo)
            upper = np.where(measured, np.minimum(y + z * sd, hi), hi)
    out: dict[str, np.ndarray | float] = {"lower": lower, "upper": upper}
    nan = np.full(d, np.nan)
    if not measured.all():
        out.update(eigenvalue=nan, eigenvalue_lower=nan, eigenvalue_upper=nan, b=math.nan)
        return out
    sds = 1.0 / np.sqrt(weights)
    off = sds[~np.eye(d, dtype=bool)]
    s = max(float(off.max()) if off.size else 0.0, float(np.diag(sds).max()) / math.sqrt(2.0))
    alpha = 1.0 - level
    b = math.sqrt(2.0) * s * (math.sqrt(2.0 * d) + math.sqrt(2.0 * math.log(4.0 / alpha)))
    sym = (np.asarray(measurement, dtype=np.float64) + np.asarray(measurement).T) / 2.0
    ev = np.linalg.eigvalsh(sym)[::-1]
    angle, _ = angle_bounds(ev, b)
    z = float(norm.isf(alpha / (4.0 * d)))
    with np.errstate(invalid="ignore"):
        tangent = np.where(angle < 90.0, np.tan(np.radians(angle)), np.inf)
    half = np.minimum(b, z * math.sqrt(2.0) * s + b * tangent)
    out.update(eigenvalue=ev, eigenvalue_lower=np.clip(ev - half, 0.0, trace),
               eigenvalue_upper=np.clip(ev + half, 0.0, trace), b=b)
    return out


def sampling_sd(covariance: np.ndarray, n: int) -> np.ndarray:
    """Sampling sd of each entry of XᵀX/n if the rows were Gaussian with mean 0 and second
    moment ``covariance`` (the release): ``√((Σ_jk² + Σ_jj·Σ_kk)/n)`` -- post-processing of the
    release; the noise intervals do not cover it.

    >>> sampling_sd(np.array([[1.0, 0.5], [0.5, 1.0]]), 100).round(4).tolist()
    [[0.1414, 0.1118], [0.1118, 0.1414]]
    """
    c = np.asarray(covariance, dtype=np.float64)
    diag = np.clip(np.diag(c), 0.0, None)
    return np.sqrt((c ** 2 + np.outer(diag, diag)) / float(n))
