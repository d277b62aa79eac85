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
√2·s-Lipschitz in the standard normals, so ``‖E‖₂ ≤ b = √2·s(√(2p) + √(2 ln(2/α)))`` with
probability ≥ 1 − α and, by Weyl, every eigenvalue of Σ lies within b of the measurement
matrix's (clamped to [0, the public bound on the trace]).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["LEVEL", "covariance_intervals", "public_range"]

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
    b = math.sqrt(2.0) * s * (math.sqrt(2.0 * d)
                              + math.sqrt(2.0 * math.log(2.0 / (1.0 - level))))
    sym = (np.asarray(measurement, dtype=np.float64) + np.asarray(measurement).T) / 2.0
    ev = np.linalg.eigvalsh(sym)[::-1]
    out.update(eigenvalue=ev, eigenvalue_lower=np.clip(ev - b, 0.0, trace),
               eigenvalue_upper=np.clip(ev + b, 0.0, trace), b=b)
    return out
