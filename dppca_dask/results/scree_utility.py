"""The summaries' noise lines of a scree release: each method's noise sd against its released
value, from the metadata (public quantities and the released cut-offs / τ) only -- post-processing.

The planning side (expected noise before any data is read, the criterion) is
:mod:`dppca_dask.pca.scree_utility`; docs/design/scree.md, "Expected noise and reliability".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dppca_dask._rformat import format_r_scalar
from dppca_dask.privacy.accounting import gaussian_sigma

__all__ = ["RIGHT_BIN", "UNRELIABLE_SD", "released_noise_lines"]

UNRELIABLE_SD = 0.3
"""Relative noise sd above which a scree value is flagged: P(|N(0, r²)| > 0.5) > 10 %."""

RIGHT_BIN = 0.9
"""Huber is also flagged (in plans) when its m₂ histogram reports the right dyadic bin with
probability below this: a wrong bin scales τ, and the noise, by a power of √2."""


def _sds(name: str, control: Mapping[str, Any], release: Mapping[str, Any], *, n: int,
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
        sds = _sds(name, scree["controls"][name], scree["releases"].get(name, {}), n=n, k=k,
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
