"""The summaries' noise lines of a scree release: each method's noise sd against its released
value, from the metadata (public quantities and the released cut-offs / τ) only -- post-processing.

The planning side (expected noise before any data is read, the criterion) is
:mod:`dppca_dask.pca.scree_utility`; docs/design/scree.md, "Expected noise and reliability".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dppca_dask._rformat import format_r_scalar
from dppca_dask.privacy.accounting import gaussian_sigma

__all__ = ["CLAMPED_SHARE", "INTERVAL_LEVEL", "RIGHT_BIN", "UNRELIABLE_SD", "cumulative_pve_lines",
           "interval_lines", "noise_sds", "ratio_interval", "recorded_sds", "sampling_lines",
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


CLAMPED_SHARE = 0.1
"""Share of a ratio family's α spent on bounding the draws released as 0 from below (a
clamped draw Y ≤ 0 is known only to be ≥ −z_c·σ on that event, since its statistic is ≥ 0)."""


def ratio_interval(low: np.ndarray, high: np.ndarray, sds: np.ndarray, inside: np.ndarray,
                   z: float) -> tuple[float, float]:
    """Fieller interval for π = Σ_{i∈S} t_i / Σ_i t_i from independent draws Y_i ~ N(t_i, σ_i²)
    known to lie in [``low``_i, ``high``_i] (equal ends: the released draw; a draw released as
    0: [−z_c·σ_i, 0]); ``inside``: the mask of S.

    For the true π the pivot S(π) = (1 − π)Σ_S Y_i − πΣ_{S^c} Y_i is N(0, σ_π²) with σ_π² =
    (1 − π)²Σ_S σ_i² + π²Σ_{S^c} σ_i² (its mean (1 − π)Σ_S t − πΣ_{S^c} t is 0), so the set
    {π ∈ [0, 1] : |S(π)| ≤ zσ_π for some Y in the box} holds the true π with probability
    ≥ 1 − 2Φ(−z) whenever the true Y is in the box. S ranges over [S_min(π), S_max(π)], both
    linear in π, so the set's bounds are among 0, 1 and the roots of S_min² = z²σ_π² and
    S_max² = z²σ_π²: it is found exactly. The hull is returned (all of [0, 1] when nothing is
    significant).

    >>> y = np.array([3.0, 1.0])
    >>> [round(v, 4) for v in ratio_interval(y, y, np.array([0.1, 0.1]),
    ...                                      np.array([True, False]), 2.0)]
    [0.7116, 0.7909]
    """
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    var = np.asarray(sds, dtype=np.float64) ** 2
    a, b = float(var[inside].sum()), float(var[~inside].sum())
    # S_min = (1 − π)·in_low − π·out_high ; S_max = (1 − π)·in_high − π·out_low
    in_low, in_high = float(low[inside].sum()), float(high[inside].sum())
    out_low, out_high = float(low[~inside].sum()), float(high[~inside].sum())
    z2 = z * z

    def sd(pi: float) -> float:
        return math.sqrt(max((1.0 - pi) ** 2 * a + pi ** 2 * b, 0.0))

    def accept(pi: float) -> bool:
        s_min = (1.0 - pi) * in_low - pi * out_high
        s_max = (1.0 - pi) * in_high - pi * out_low
        return s_min <= z * sd(pi) and s_max >= -z * sd(pi)

    points = {0.0, 1.0}
    for head, rest in ((in_low, out_high), (in_high, out_low)):
        total = head + rest  # S(π) = head − π·total
        coefficients = [total ** 2 - z2 * (a + b), -2.0 * (head * total - z2 * a),
                        head ** 2 - z2 * a]
        if coefficients[0] == 0.0 and coefficients[1] == 0.0:
            continue
        roots = np.roots(coefficients)
        points.update(float(r.real) for r in roots if abs(r.imag) < 1e-12 and 0 < r.real < 1)
    edges = sorted(points)
    accepted = [(lo, hi) for lo, hi in itertools.pairwise(edges)
                if accept(0.5 * (lo + hi))]
    accepted += [(pt, pt) for pt in edges if accept(pt)]
    if not accepted:  # the test rejects every ratio: an event of probability below alpha
        total = in_high + out_high
        estimate = float(np.clip(in_high / total, 0.0, 1.0)) if total > 0 else 0.5
        return estimate, estimate
    return min(lo for lo, _ in accepted), max(hi for _, hi in accepted)


RELEASE_STEP = {"clipped": "clipped mean", "pmwm": "winsorized mean"}
"""The label of each method's final Gaussian release (its spend record's note)."""


def recorded_sds(ledger: Sequence[Mapping[str, Any]], name: str, k: int) -> np.ndarray | None:
    """The noise sd of each component's final release of method ``name``, from its spend
    records' ``scale`` (None when the ledger does not state them all)."""
    step = RELEASE_STEP.get(name)
    if step is None:
        return None
    out = np.full(k, np.nan)
    for record in ledger:
        note = str(record.get("note", ""))
        for j in range(k):
            if note.startswith(f"{name} PC{j + 1}: {step}") and record.get("scale") is not None:
                out[j] = float(record["scale"])
    return None if np.isnan(out).any() else out


def scree_intervals(metadata: Mapping[str, Any], raw: Sequence[Sequence[float]] | np.ndarray,
                    level: float = INTERVAL_LEVEL) -> tuple[np.ndarray, ...]:
    """Intervals (methods x components) for each method's noise-free statistics: the scree
    values, the PVE and the cumulative PVE over the k components; ``(scree_lower,
    scree_upper, pve_lower, pve_upper, cumulative_pve_lower, cumulative_pve_upper)``, NaN for a
    method without one (huber). Each family is simultaneous over its components at ``level``.

    Post-processing of the release: ``raw`` (the released values before the monotone step,
    ``max(Y, 0)`` of a Gaussian draw ``Y`` about the statistic ``t``) and the noise sd of each
    draw: its spend record's ``scale`` (:func:`recorded_sds`), else the formula from public
    quantities and the released cut-offs (:func:`noise_sds`).

    **Scree.** With ``z`` the two-sided Bonferroni quantile over the k draws, every ``t_j`` lies
    in ``[max(raw_j − zσ_j, 0), raw_j + zσ_j]`` at once with probability ``level`` (``t_j ≥ 0``;
    a draw clamped at 0 had ``Y ≤ 0``, so ``t_j ≤ zσ_j`` on the same event).

    **PVE** ``t_j / Σ_i t_i`` and **cumulative PVE** ``Σ_{i≤j} t_i / Σ_i t_i``: the Fieller
    interval of each ratio (:func:`ratio_interval`), Bonferroni over the k PVE values and,
    separately, over the k − 1 cumulative values that are not 1, each family with
    (1 − :data:`CLAMPED_SHARE`) of α; the rest bounds every draw below by t_i − z_c·σ_i, so a
    draw released as 0 had Y_i ∈ [−z_c·σ_i, 0]. (A box from the scree
    intervals, ``[l_j / (l_j + Σ_{i≠j} u_i), u_j / (u_j + Σ_{i≠j} l_i)]``, is valid too but up to
    2.4 x wider: it lets every other value sit at its worst end at once.)

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
    alpha = 1.0 - level
    z = float(norm.isf(alpha / (2.0 * k)))
    # the ratio families: (1 - CLAMPED_SHARE) of alpha for their pivots, the rest bounds the
    # clamped draws from below (one-sided, each of the k draws)
    z_clamp = float(norm.isf(CLAMPED_SHARE * alpha / k))
    z_pve = float(norm.isf((1.0 - CLAMPED_SHARE) * alpha / (2.0 * k)))
    z_cum = float(norm.isf((1.0 - CLAMPED_SHARE) * alpha / (2.0 * max(k - 1, 1))))
    shape = (len(scree["methods"]), k)
    out = [np.full(shape, np.nan) for _ in range(6)]
    lower, upper, pve_lower, pve_upper, cum_lower, cum_upper = out
    for i, name in enumerate(scree["methods"]):
        if name not in EXACT_NOISE:
            continue
        sds = recorded_sds(metadata.get("ledger", ()), name, k)
        if sds is None:  # the formula (equal to 1e-7 relative: the certified σ is raised a hair)
            sds = np.asarray(noise_sds(name, scree["controls"][name],
                                       scree["releases"].get(name, {}), n=n, k=k,
                                       eps=float(per["eps"]), delta=float(per["delta"]),
                                       calibration=calibration), dtype=np.float64)
        lower[i] = np.maximum(values[i] - z * sds, 0.0)
        upper[i] = values[i] + z * sds
        low = np.where(values[i] <= 0.0, -z_clamp * sds, values[i])  # clamped: Y in [-z_c sd, 0]
        for j in range(k):
            pve_lower[i, j], pve_upper[i, j] = ratio_interval(low, values[i], sds,
                                                              np.arange(k) == j, z_pve)
            if j == k - 1:
                cum_lower[i, j] = cum_upper[i, j] = 1.0
            else:
                cum_lower[i, j], cum_upper[i, j] = ratio_interval(
                    low, values[i], sds, np.arange(k) <= j, z_cum)
    return lower, upper, pve_lower, pve_upper, cum_lower, cum_upper


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


def cumulative_pve_lines(methods: Sequence[str], released: np.ndarray, lower: np.ndarray,
                         upper: np.ndarray, level: float = INTERVAL_LEVEL) -> list[str]:
    """The summary's cumulative-PVE lines: per method and component the released cumulative
    PVE and the interval of its noise-free value."""
    def num(v: float) -> str:
        return format_r_scalar(float(f"{v:.3g}"))

    lines = [f"{100 * level:g}% intervals of the noise-free cumulative PVE (simultaneous over "
             "the components):"]
    for i, name in enumerate(methods):
        if np.isnan(lower[i]).all():
            continue
        cells = [f"PC1-{j + 1} {num(released[i, j])} [{num(lower[i, j])}, {num(upper[i, j])}]"
                 for j in range(lower.shape[1] - 1)]
        if cells:
            lines.append(f"  {name}: " + ", ".join(cells))
    return lines if len(lines) > 1 else []


def sampling_lines(methods: Sequence[str], sds: np.ndarray, released: np.ndarray) -> list[str]:
    """The summary's sampling-variability line per method: a different question from the
    noise intervals, with its assumption."""
    def num(v: float) -> str:
        return format_r_scalar(float(f"{v:.3g}"))

    lines = ["Sampling sd of each scree value if the scores were Gaussian (sqrt(2/(m - 1)) x "
             "the value, m the rows averaged; post-processing; NOT in the intervals above, "
             "which cover the noise only; larger for heavy tails):"]
    for i, name in enumerate(methods):
        lines.append(f"  {name}: " + ", ".join(f"PC{j + 1} {num(sds[i, j])}"
                                              for j in range(sds.shape[1])))
    return lines
