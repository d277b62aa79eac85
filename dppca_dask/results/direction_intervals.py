"""Angle bounds of the private PC directions (dp_loading), from the release and public
quantities only -- post-processing, no budget (issue 33; docs/intervals.md).

The loading release is ``M̂ = K + E``: ``K`` the spherical Kendall matrix rounded to the
public grid (the release with its noise set to 0) and ``E`` the symmetric lattice Gaussian of
:func:`~dppca_dask.privacy.mechanisms.gaussian_symmetric_matrix`, diagonal sd σ (the record's
``scale``) and off-diagonal sd σ/√2: ``E = (σ/√2)·W`` with ``W`` a GOE matrix (off-diagonal
N(0, 1), diagonal N(0, 2)); its integer steps are ~2^-30·σ, so its law is the Gaussian's.

**Spectral norm.** ``E[λ_max(W)] ≤ 2√p`` (Slepian–Gordon; Davidson & Szarek 2001, Thm 2.11)
and ``λ_max(E)``, ``−λ_min(E)`` are σ-Lipschitz in the q = p(p+1)/2 standard normals (the vech
is an isometry), so by Gaussian concentration ``P(‖E‖₂ > σ(√(2p) + t)) ≤ 2·exp(−t²/2)``:
``b = σ(√(2p) + √(2 ln(2/α)))`` bounds ‖E‖₂ with probability ≥ 1 − α.

**Guaranteed angles** (``angle_upper_guaranteed``). On that one event, for every component j
at once, the residual form of Davis–Kahan -- ``v̂_j`` is an eigenvector of ``M̂``, so ``‖K v̂_j
− λ̂_j v̂_j‖ = ‖E v̂_j‖ ≤ b`` and ``sin ∠(v̂_j, v_j) ≤ b / min_{i≠j} |λ̂_j − λ_i|`` -- with
``|λ̂_j − λ_i| ≥ ĝ_j − b`` (Weyl), ``ĝ_j = min_{i≠j} |λ̂_j − λ̂_i|`` the released eigengap:

    sin ∠(v̂_j, v_j) ≤ b / (ĝ_j − b)   when ĝ_j > 2b, else no bound (90°),

``v_j`` the noise-free direction (the eigenvector of ``K`` of the same rank; when ĝ_j > 2b its
eigenvalue is simple). It holds for every K, and it is a worst case over E: several times the
angles' actual quantiles.

**Angles** (``angle_upper``, what the summary and the flag use). A parametric bootstrap from the
public noise law given the released eigenvalues
(:func:`~dppca_dask.results.noise_bootstrap.angle_bootstrap`): Bonferroni over the components,
an approximation whose coverage benchmarks/intervals.py measures on held-out designs; above
:data:`~dppca_dask.results.noise_bootstrap.MAX_DIMENSION` variables it is the guaranteed bound.
A direction is *identifiable* when its bound is below 45°: then ``v̂_j`` is closer to ``±v_j``
than to any direction orthogonal to it.

**Eigenvalues.** With the noise-free eigenvector ``v_j`` fixed, ``v_j'Ev_j ~ N(0, σ²)`` exactly,
and ``λ̂_j − λ_j = v_j'Ev_j + tan θ_j·v_j'E w`` (θ_j the angle above, w a unit vector ⊥ v_j;
project ``(K + E)v̂_j = λ̂_j v̂_j`` on ``v_j``), so on the event {‖E‖₂ ≤ b at α/2, every
|v_j'Ev_j| ≤ zσ with z at α/(4p)}: ``|λ̂_j − λ_j| ≤ min(b, zσ + b·tan θ_j)`` with θ_j the
Davis–Kahan bound at that b -- Weyl's b for eigenvalues in the noise, about zσ for separated
ones. Simultaneous over the components at ``level``.

Everything covers the noise, not the sampling variability of the data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dppca_dask._rformat import format_r_scalar
from dppca_dask.results.noise_bootstrap import (
    IDENTIFIABLE_DEGREES,
    MAX_DIMENSION,
    angle_bootstrap,
)

__all__ = ["IDENTIFIABLE_DEGREES", "angle_bounds", "direction_interval_lines",
           "direction_interval_variables", "eigenvalue_half_widths", "loading_noise_sd",
           "noise_norm_bound"]

LEVEL = 0.95
"""Level of the angle bounds (one event for all the components)."""


def noise_norm_bound(sd: float, p: int, level: float = LEVEL) -> float:
    """``b``: ‖E‖₂ ≤ b with probability ≥ ``level`` for the loading noise of diagonal sd ``sd``.

    >>> round(noise_norm_bound(1.0, 8), 4)
    6.7162
    """
    return float(sd) * (math.sqrt(2.0 * p) + math.sqrt(2.0 * math.log(2.0 / (1.0 - level))))


def loading_noise_sd(ledger: Sequence[Mapping[str, Any]]) -> float | None:
    """The diagonal noise sd of the loading release, from its spend record (None if absent)."""
    for record in ledger:
        if (record.get("component") == "loading"
                and record.get("mechanism") == "gaussian_symmetric_matrix"):
            scale = record.get("scale")
            return None if scale is None else float(scale)
    return None


def angle_bounds(eigenvalues: Sequence[float] | np.ndarray, bound: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per component (in the order given, decreasing): the angle bound in degrees (90 where
    none holds) and the released eigengap ĝ_j.

    >>> angle, gap = angle_bounds([3.0, 1.0, 0.9], 0.1)
    >>> [round(float(a), 2) for a in angle], [round(float(g), 2) for g in gap]
    ([3.02, 90.0, 90.0], [2.0, 0.1, 0.1])
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    p = lam.size
    if p == 1:
        return np.zeros(1), np.full(1, np.inf)
    diff = np.abs(lam[:, None] - lam[None, :])
    np.fill_diagonal(diff, np.inf)
    gap = diff.min(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        sine = np.where(gap > 2.0 * bound, bound / (gap - bound), 1.0)
    angle = np.degrees(np.arcsin(np.clip(sine, 0.0, 1.0)))
    return angle, gap


def eigenvalue_half_widths(eigenvalues: Sequence[float] | np.ndarray, sd: float, p: int,
                           level: float = LEVEL) -> np.ndarray:
    """Half-widths of the simultaneous eigenvalue intervals (module docstring, "Eigenvalues").

    >>> [round(float(h), 4) for h in eigenvalue_half_widths([0.6, 0.3, 0.1], 0.001, 3)]
    [0.0027, 0.0028, 0.0028]
    """
    from scipy.stats import norm

    lam = np.asarray(eigenvalues, dtype=np.float64)
    alpha = 1.0 - level
    b = noise_norm_bound(sd, p, 1.0 - alpha / 2.0)
    z = float(norm.isf(alpha / (4.0 * max(p, 1))))
    angle, _ = angle_bounds(lam, b)
    with np.errstate(invalid="ignore"):
        tangent = np.where(angle < 90.0, np.tan(np.radians(angle)), np.inf)
    return np.minimum(b, z * float(sd) + b * tangent)


def direction_interval_variables(eigenvalues: np.ndarray, sd: float, p: int,
                                 level: float = LEVEL) -> dict[str, Any]:
    """The loading result's variables (component): the released eigenvalues of the noisy
    Kendall matrix with their intervals, the angle bounds (bootstrap and guaranteed) and the
    identifiable flag."""
    eigenvalues = np.asarray(eigenvalues, dtype=np.float64)
    b = noise_norm_bound(sd, p, level)
    guaranteed, _ = angle_bounds(eigenvalues, b)
    if p <= MAX_DIMENSION:
        angle = angle_bootstrap(eigenvalues, sd, level=level)
        method = "parametric bootstrap from the noise law given the released eigenvalues"
    else:
        angle, method = guaranteed, "Davis-Kahan (p above the bootstrap's limit)"
    half = eigenvalue_half_widths(eigenvalues, sd, p, level)
    common = {"interval_level": level}
    what = (f"{100 * level:g}% simultaneous interval of the noise-free Kendall eigenvalue "
            "(first-order term plus Davis-Kahan, or Weyl, from the noise law): it covers the "
            "noise, not the sampling variability")
    return {
        "kendall_eigenvalue": (("component",), eigenvalues,
                               {"private": 1, "description": "eigenvalue of the released "
                                "noisy Kendall matrix (post-processing)"}),
        "kendall_eigenvalue_lower": (("component",), eigenvalues - half,
                                     {"private": 1, **common, "description": "lower end of the "
                                      + what}),
        "kendall_eigenvalue_upper": (("component",), eigenvalues + half,
                                     {"private": 1, **common, "description": "upper end of the "
                                      + what}),
        "angle_upper": (("component",), angle,
                        {"private": 1, **common, "units": "degree", "method": method,
                         "description": f"{100 * level:g}% bound (simultaneous over the "
                         "components) on the angle between the private direction and the "
                         f"noise-free one ({method}; approximate, coverage measured in "
                         "benchmarks/intervals.py); 90: no bound at this budget"}),
        "angle_upper_guaranteed": (("component",), guaranteed,
                                   {"private": 1, **common, "units": "degree",
                                    "noise_norm_bound": b,
                                    "description": f"{100 * level:g}% guaranteed bound "
                                    "(simultaneous over the components, for every noise-free "
                                    "matrix) on the angle to the noise-free direction: "
                                    "Davis-Kahan with the released eigengaps, a worst case "
                                    "several times wider than angle_upper; 90: no bound"}),
        "direction_identifiable": (("component",), (angle < IDENTIFIABLE_DEGREES).astype(np.int8),
                                   {"private": 1, "flag_values": [0, 1],
                                    "flag_meanings": "not_identifiable identifiable",
                                    "description": "1 when the angle bound (angle_upper) is "
                                    f"below {IDENTIFIABLE_DEGREES:g} degrees: the direction is "
                                    "identifiable from the noise at this budget"}),
    }


def direction_interval_lines(angle: np.ndarray, identifiable: np.ndarray, *, limit: int = 10,
                             level: float = LEVEL, guaranteed: np.ndarray | None = None
                             ) -> list[str]:
    """The summary's lines: one per component (at most ``limit``), angle bound, the guaranteed
    bound where stored, and the flag."""
    def deg(v: float) -> str:
        return format_r_scalar(float(f"{v:.3g}"))

    lines = [f"{100 * level:g}% bounds on the angle to the noise-free direction (simultaneous "
             "over the components; they cover the noise, not the sampling variability"
             + ("; guaranteed: the worst-case Davis-Kahan bound" if guaranteed is not None
                else "") + "):"]
    shown = min(limit, angle.size)
    for j in range(shown):
        if identifiable[j]:
            text = f"<= {deg(angle[j])} degrees"
        elif angle[j] < 90.0:
            text = f"<= {deg(angle[j])} degrees: not identifiable (indistinguishable from noise)"
        else:
            text = "no bound: not identifiable (indistinguishable from noise)"
        if guaranteed is not None and identifiable[j]:
            text += (f" (guaranteed <= {deg(guaranteed[j])})" if guaranteed[j] < 90.0
                     else " (no guaranteed bound)")
        lines.append(f"  PC{j + 1}: {text}")
    if angle.size > shown:
        rest = int(np.sum(identifiable[shown:]))
        lines.append(f"  ... {angle.size - shown} more components, {rest} of them identifiable")
    return lines
