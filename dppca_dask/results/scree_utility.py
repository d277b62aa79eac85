"""The summaries' noise lines of a scree release: each method's noise sd against its released
value, from the metadata (public quantities and the released cut-offs / τ) only -- post-processing.

The planning side (expected noise before any data is read, the criterion) is
:mod:`dppca_dask.pca.scree_utility`; docs/design/scree.md, "Expected noise and reliability".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dppca_dask._rformat import format_r_scalar
from dppca_dask.privacy.accounting import gaussian_sigma

__all__ = ["INTERVAL_LEVEL", "RIGHT_BIN", "UNRELIABLE_SD", "interval_lines", "noise_sds",
           "scree_intervals"]

UNRELIABLE_SD = 0.3
"""Relative noise sd above which a scree value is flagged: P(|N(0, r²)| > 0.5) > 10 %."""

RIGHT_BIN = 0.9
"""Huber is also flagged (in plans) when its m₂ histogram reports the right dyadic bin with
probability below this: a wrong bin scales τ, and the noise, by a power of √2."""


def noise_sds(name: str, control: Mapping[str, Any], release: Mapping[str, Any], *, n: int,
         k: int, eps: float, delta: float, calibration: str) -> list[float]:
    factor = n / (n - 1.0)
    if name == "clipped":
        return [gaussian_sigma(1.0, eps, delta, calibration) * float(control["C_clip"])
                / (n - 1.0)] * k
    if name == "pmwm":
        n_m = n - n // 2 if control["split_mode"] else n
        c = gaussian_sigma(1.0, eps / 2.0, delta, calibration)
        return [c * factor * (float(u) - float(lo)) / n_m
                for lo, u in zip(release["lower"], release["upper"], strict=True)]
    steps = int(release["T"])
    frac = float(control["m2_frac"])
    c = gaussian_sigma(1.0, (1.0 - frac) * eps / steps, (1.0 - frac) * delta / steps,
                       calibration)
    return [c * 2.0 * float(control["eta0"]) * float(t) / n for t in release["tau"]]


def released_noise_lines(metadata: Mapping[str, Any], raw: Sequence[Sequence[float]]
                         ) -> list[str]:
    """Each method's noise sd per component and its ratio to the released (unclipped) value
    ``raw`` (methods × components), with a ``UtilityWarning`` line for the components above
    :data:`UNRELIABLE_SD` (or released ≤ 0). Clipped: c(ε_ℓ, δ_ℓ)·C/(n − 1); pmwm:
    c(ε_ℓ/2, δ_ℓ)·(n/(n − 1))(U − L)/n_m with the released cut-offs; huber: one gradient step's
    c(ε_gd/T, δ_gd/T)·2η₀τ/n with the released τ (c = σ/Δ of the calibration)."""
    scree = metadata["scree"]
    n, k = int(metadata["n"]), int(scree["k"])
    calibration = str(metadata.get("calibration", "classical"))
    per = scree["allocations"]["per_component"]
    eps, delta = float(per["eps"]), float(per["delta"])
    lines = ["Noise sd of each released value (from public quantities and the released "
             "cut-offs / tau; % of the value):"]
    for i, name in enumerate(scree["methods"]):
        sds = noise_sds(name, scree["controls"][name], scree["releases"].get(name, {}), n=n, k=k,
                   eps=eps, delta=delta, calibration=calibration)
        values = [float(v) for v in list(raw[i])[:k]]
        cells = []
        flagged = []
        for j, (sd, value) in enumerate(zip(sds, values, strict=False)):
            cell = f"PC{j + 1} {format_r_scalar(float(f'{sd:.3g}'))}"
            if value > 0:
                cell += f" ({format_r_scalar(float(f'{100 * sd / value:.3g}'))}%)"
            cells.append(cell)
            if value <= 0 or sd / value > UNRELIABLE_SD:
                flagged.append(f"PC{j + 1}")
        lines.append(f"  {name}: " + ", ".join(cells))
        if flagged:
            lines.append(f"  UtilityWarning: {name} noise sd above "
                         f"{format_r_scalar(100 * UNRELIABLE_SD)}% of the value (or a value "
                         f"<= 0) for {', '.join(flagged)}: treat those values as unreliable")
    return lines


INTERVAL_LEVEL = 0.95
"""Level of the scree and PVE intervals, simultaneous over the k components of one method."""

EXACT_NOISE = ("clipped", "pmwm")
"""Methods whose released value is one Gaussian draw about its noise-free statistic (huber's is
T noisy gradient steps: no interval is claimed for it)."""


def scree_intervals(metadata: Mapping[str, Any], raw: Sequence[Sequence[float]] | np.ndarray,
                    level: float = INTERVAL_LEVEL) -> tuple[np.ndarray, ...]:
    """Intervals (methods x components) for each method's noise-free statistics: the scree
    values, then the PVE over the k components; ``(scree_lower, scree_upper, pve_lower,
    pve_upper)``, NaN for a method without one (huber).

    Post-processing of the release: ``raw`` (the released values before the monotone step,
    ``max(Y, 0)`` of a Gaussian draw ``Y`` about the statistic ``t``) and the noise sd of each
    draw from public quantities and the released cut-offs (:func:`noise_sds`). With ``z`` the
    two-sided Bonferroni quantile over the k draws, every ``t_j`` lies in ``[max(raw_j − zσ_j,
    0), raw_j + zσ_j]`` at once with probability ``level`` (``t_j ≥ 0``; a draw clamped at 0 had
    ``Y ≤ 0``, so ``t_j ≤ zσ_j`` on the same event). On that event the PVE
    ``t_j / Σ_i t_i`` lies in ``[l_j / (l_j + Σ_{i≠j} u_i), u_j / (u_j + Σ_{i≠j} l_i)]``.
    The statistic ``t_j`` is the release with its noise set to 0: ``max(s_j − corr, 0)``, with
    ``s_j`` the method's value on the released directions about the released centre (and, for
    pmwm, between the released cut-offs) and ``corr = n/(n − 1)·sd_c²`` the centre-noise
    correction the release subtracts (0 for a public centre): the intervals cover the method's
    noise given the centre, not the centre's own noise (about √2·sd_c² more on a variance; the
    metadata's ``center_release.sd``) nor the sampling variability of the data.
    """
    from scipy.stats import norm

    scree = metadata["scree"]
    n, k = int(metadata["n"]), int(scree["k"])
    calibration = str(metadata.get("calibration", "classical"))
    per = scree["allocations"]["per_component"]
    values = np.atleast_2d(np.asarray(raw, dtype=np.float64))[:, :k]
    z = float(norm.isf((1.0 - level) / (2.0 * k)))
    shape = (len(scree["methods"]), k)
    lower, upper = np.full(shape, np.nan), np.full(shape, np.nan)
    for i, name in enumerate(scree["methods"]):
        if name not in EXACT_NOISE:
            continue
        sds = np.asarray(noise_sds(name, scree["controls"][name], scree["releases"].get(name, {}),
                                   n=n, k=k, eps=float(per["eps"]), delta=float(per["delta"]),
                                   calibration=calibration), dtype=np.float64)
        lower[i] = np.maximum(values[i] - z * sds, 0.0)
        upper[i] = values[i] + z * sds
    with np.errstate(invalid="ignore", divide="ignore"):
        total_l, total_u = lower.sum(axis=1, keepdims=True), upper.sum(axis=1, keepdims=True)
        pve_lower = lower / (lower + total_u - upper)
        pve_upper = upper / (upper + total_l - lower)
    pve_lower = np.where(np.isnan(lower), np.nan, np.nan_to_num(pve_lower, nan=0.0))
    pve_upper = np.where(np.isnan(upper), np.nan, np.nan_to_num(pve_upper, nan=1.0))
    return lower, upper, np.clip(pve_lower, 0.0, 1.0), np.clip(pve_upper, 0.0, 1.0)


def interval_lines(methods: Sequence[str], released: np.ndarray, lower: np.ndarray,
                   upper: np.ndarray, level: float = INTERVAL_LEVEL) -> list[str]:
    """The summary's interval lines: per method and component the released value and the
    interval of its noise-free statistic, and the components whose interval reaches 0."""
    def num(v: float) -> str:
        return format_r_scalar(float(f"{v:.3g}"))

    lines = [f"{100 * level:g}% intervals of the noise-free scree values (simultaneous over "
             "the components; they cover the noise, not the sampling variability):"]
    for i, name in enumerate(methods):
        if np.isnan(lower[i]).all():
            lines.append(f"  {name}: no interval (its value is the end of T noisy gradient "
                         "steps, whose noise law has no closed form)")
            continue
        cells = [f"PC{j + 1} {num(released[i, j])} [{num(lower[i, j])}, {num(upper[i, j])}]"
                 for j in range(lower.shape[1])]
        lines.append(f"  {name}: " + ", ".join(cells))
        zero = [f"PC{j + 1}" for j in range(lower.shape[1]) if lower[i, j] <= 0.0]
        if zero:
            lines.append(f"  {name}: indistinguishable from noise (interval reaches 0): "
                         + ", ".join(zero))
    return lines
