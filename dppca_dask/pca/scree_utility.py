"""Expected noise of each scree method relative to what it estimates, and when it is unreliable.

Public quantities only (n, k, the method's per-component budget, the controls, the calibration):
what ``dppca-dask plan`` prints before any data is read, and the criterion behind the
``UtilityWarning`` lines (docs/design/scree.md, "Expected noise and reliability"). After a fit the
summary restates the noise from the *released* cut-offs and τ (post-processing of releases).

Per component ℓ with budget (ε_ℓ, δ_ℓ) and c(ε, δ) = σ/Δ of the calibration:

* **clipped**: sd σ = c(ε_ℓ, δ_ℓ)·C/(n − 1). Public exactly, in units of the public clip level C
  (σ/C); relative to the value λ it is (σ/C)·(C/λ), and λ is not public. With C chosen as the
  controls recommend (about 4 × the largest variance expected), PC1's relative sd is about 4σ/C:
  the figure compared with the threshold.
* **pmwm**: sd σ = c(ε_ℓ/2, δ_ℓ)·(n/(n − 1))(U − L)/n_m with the *released* cut-offs; U − L ≤
  b − a gives a public upper bound. Relative to λ it is public for Gaussian-shaped scores, where
  w/λ ~ χ²₁ and U − L ≈ λ·F⁻¹_χ²₁(1 − trim): r = c·(n/(n − 1))·F⁻¹_χ²₁(1 − trim)/n_m.
* **huber**: each of the T gradient steps adds sd σ_t = c(ε_gd/T, δ_gd/T)·2η₀τ/n with the
  *released* τ = √m₂·√(ε_gd·n/D); with η₀ = 1 a step re-centres on the clipped mean, so the final
  value carries about one step's noise. m₂ is the dyadic bin of the block medians of
  (w_a − w_b)²/2, whose population median is 0.2667·λ² for Gaussian scores, so √m₂/λ ∈
  (0.365, 0.516] and r = 2η₀·c·√(ε_gd/(n·D))·0.516 (upper end) — scale-free, the same for every
  component.

A method is flagged **unreliable** when this relative sd exceeds
:data:`~dppca_dask.results.scree_utility.UNRELIABLE_SD` = 0.3 (with Gaussian noise, P(|error| >
50 %) > 10 %), and Huber also when its m₂ histogram picks the right dyadic bin (or its neighbour)
with probability below :data:`~dppca_dask.results.scree_utility.RIGHT_BIN` = 0.9
(:func:`argmax_probability`): a wrong bin makes τ, and with it the noise, or the bias of T
clipped steps from μ₀, wrong by a power of √2 -- the dominant failure at the demo's settings
(predicted relative sd 0.65, right bin with probability 0.09; measured: errors above 50 % in
75 % of 20 seeds). The measurement grid behind the criterion is in docs/design/scree.md.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from dppca_dask._rformat import format_r_scalar
from dppca_dask.errors import BudgetError, UtilityWarning
from dppca_dask.pca.scree_controls import (
    ClippedControl,
    Control,
    HuberControl,
    PMWMControl,
)
from dppca_dask.pca.scree_methods import huber_defaults, spent_fractions
from dppca_dask.privacy.accounting import gaussian_sigma
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.results.scree_utility import RIGHT_BIN, UNRELIABLE_SD, released_noise_lines

_TRAPEZOID = getattr(np, "trapezoid", None) or np.trapz  # type: ignore[attr-defined]  # noqa: NPY201 (numpy < 2)
"""The trapezoid rule (``np.trapezoid`` from numpy 2.0, ``np.trapz`` before)."""

__all__ = ["GAUSSIAN_M2_MEDIAN", "PMWM_GRID_STEPS", "RIGHT_BIN", "UNRELIABLE_SD", "MethodNoise",
           "argmax_probability", "method_noise", "noise_lines", "released_noise_lines",
           "unreliable_messages", "warn_unreliable"]

GAUSSIAN_M2_MEDIAN = 0.2667
"""Median of (w_a − w_b)²/2 for w = λ·χ²₁ (Gaussian scores), in units of λ² (10^6-sample
Monte Carlo: 0.26665)."""

_PC1_PER_C = 4.0
"""The controls' guidance C ≈ 4 × the largest variance: PC1's value is about C/4."""


@dataclass(frozen=True)
class MethodNoise:
    """One scree method's expected noise, from public quantities.

    ``sd`` is the noise sd in the data's units where that is public (clipped), else None;
    ``relative_sd`` the sd relative to the value being estimated under the stated assumption;
    ``compared`` says exactly what is compared with what.
    """

    method: str
    sd: float | None
    relative_sd: float
    compared: str
    bin_probability: float = 1.0

    @property
    def unreliable(self) -> bool:
        return self.relative_sd > UNRELIABLE_SD or self.bin_probability < RIGHT_BIN


def argmax_probability(count: int, bins: int, scale: float) -> float:
    """The chance that a histogram with ``count`` items split evenly over two adjacent bins
    reports one of them after i.i.d. Laplace(``scale``) noise on all ``bins`` bins:
    P(max(count/2 + L₁, count/2 + L₂) > max(L₃, …, L_bins)). For Huber's m₂ step the block
    medians of Gaussian scores straddle a dyadic boundary in general; picking either neighbour
    changes τ by at most √2. Deterministic quadrature.

    Examples
    --------
    >>> round(argmax_probability(35, 26, 100.0), 2), round(argmax_probability(35, 26, 6.25), 2)
    (0.09, 0.63)
    >>> argmax_probability(111, 26, 1.5) > 0.999
    True
    """
    if bins <= 2:
        return 1.0

    def cdf(x: np.ndarray) -> np.ndarray:
        return np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0.0) / scale),
                        1.0 - 0.5 * np.exp(-np.maximum(x, 0.0) / scale))

    x = np.linspace(-40.0 * scale, 40.0 * scale + count, 200001)
    good = np.gradient(cdf(x - count / 2.0) ** 2, x)  # density of the better of the two bins
    return float(min(1.0, _TRAPEZOID(good * cdf(x) ** (bins - 2), x)))


def _g(value: float) -> str:
    """4 significant digits in R's format."""
    return format_r_scalar(float(f"{value:.4g}"))


def _c(eps: float, delta: float, calibration: str) -> float:
    return gaussian_sigma(1.0, eps, delta, calibration)


def method_noise(name: str, control: Control, *, n: int, k: int, budget: PrivacyBudget,
                 calibration: str) -> MethodNoise:
    """The expected noise of method ``name`` with its whole allocation ``budget`` (the scree
    budget after the centre's share) over ``k`` components.

    Examples
    --------
    >>> from dppca_dask.pca.scree_controls import huber_control
    >>> noise = method_noise("huber", huber_control(k_min_m2=-10, k_max_m2=15, m2_frac=0.25),
    ...                      n=5000, k=5, budget=PrivacyBudget(0.4, 4e-6), calibration="analytic")
    >>> round(noise.relative_sd, 2), noise.unreliable
    (0.65, True)
    """
    per = budget.scaled(1.0 / k)
    factor = n / (n - 1.0)
    if isinstance(control, ClippedControl):
        sd = _c(per.eps, per.delta, calibration) * control.C_clip / (n - 1.0)
        return MethodNoise(name, sd, _PC1_PER_C * sd / control.C_clip,
                           f"sd {_g(sd)} = {_g(100 * sd / control.C_clip)}"
                           f"% of C_clip = {_g(control.C_clip)} (public); relative "
                           "to a component's variance lambda it is sd/lambda (lambda not public): "
                           f"{_g(100 * _PC1_PER_C * sd / control.C_clip)}% at "
                           "lambda = C_clip/4 (the controls' guidance for PC1)")
    if isinstance(control, PMWMControl):
        n_m = n - n // 2 if control.split_mode else n
        n_q = n // 2 if control.split_mode else n
        trim = min(max(control.trim_const / n_q, control.eta), 0.49)
        c = _c(per.eps / 2.0, per.delta, calibration)
        bound = c * factor * (control.b - control.a) / n_m
        rel = c * factor * float(chi2.ppf(1.0 - trim, 1)) / n_m
        return MethodNoise(name, None, rel,
                           f"sd {_g(c * factor / n_m)} x (U - L) of the released "
                           f"cut-offs, at most {_g(bound)} (U - L <= b - a); "
                           f"relative to the value {_g(100 * rel)}% for Gaussian "
                           f"scores (U - L = {_g(float(chi2.ppf(1.0 - trim, 1)))} "
                           "lambda); not public for other shapes")
    assert isinstance(control, HuberControl)
    steps, _ = huber_defaults(n, control)
    eps_gd = (1.0 - control.m2_frac) * per.eps
    delta_gd = spent_fractions(control)[1] * per.delta
    c = _c(eps_gd / steps, delta_gd / steps, calibration)
    ln = math.log(n)
    denom = math.sqrt((1.0 + ln) * ln) if ln > 0 else 1.0
    per_tau = c * 2.0 * control.eta0 / n
    rel = per_tau * math.sqrt(eps_gd * n / denom) * math.sqrt(GAUSSIAN_M2_MEDIAN)
    _, blocks = huber_defaults(n, control)
    blocks = min(blocks, n // 2)
    bins = control.k_max_m2 - control.k_min_m2 + 1
    scale = 2.0 / (control.m2_frac * per.eps)
    right = argmax_probability(blocks, bins, scale)
    return MethodNoise(name, None, rel,
                       f"sd {_g(per_tau)} x tau per gradient step (tau released); "
                       f"relative to the value {_g(100 * rel)}% for Gaussian "
                       "scores (tau = sqrt(m2 eps_gd n / D), sqrt(m2) <= 0.516 lambda) when the "
                       f"m2 histogram (Laplace scale {_g(scale)} on {bins} bins, "
                       f"{blocks} block medians) picks the right bin (or its neighbour), which it does with "
                       f"probability <= {_g(round(right, 3))}; a wrong bin scales "
                       "tau and the noise by a power of sqrt(2); not public for other shapes",
                       right)


def _noises(methods: Sequence[str], controls: Mapping[str, Control], *, n: int, k: int,
            budget: PrivacyBudget, calibration: str) -> list[MethodNoise]:
    out = []
    for m in methods:
        try:
            out.append(method_noise(m, controls[m], n=n, k=k, budget=budget,
                                    calibration=calibration))
        except BudgetError:  # no delta for a Gaussian: the plan refuses it elsewhere
            continue
    return out


PMWM_GRID_STEPS = 10
"""pmwm's cut-off grid ±(β^j − 1) is fixed in units of w = (y − c)² (steps of β − 1 near 0, the
R package's); the plan and the fit warn when [a, b] spans fewer than this many of its steps."""


def unreliable_messages(methods: Sequence[str], controls: Mapping[str, Control], *, n: int,
                        k: int, budget: PrivacyBudget, calibration: str) -> list[str]:
    """One line per method whose expected relative noise sd exceeds :data:`UNRELIABLE_SD`, and
    one for a pmwm range [a, b] below the resolution of its cut-off grid
    (:data:`PMWM_GRID_STEPS`)."""
    out = []
    pmwm = controls.get("pmwm") if "pmwm" in methods else None
    if isinstance(pmwm, PMWMControl) and pmwm.b - pmwm.a < PMWM_GRID_STEPS * (pmwm.beta - 1.0):
        out.append(f"scree method 'pmwm': its cut-off searches run on the grid +-(beta^j - 1), "
                   f"steps of beta - 1 = {_g(pmwm.beta - 1.0)} near 0 in units of w = "
                   f"(y - c)^2, and [a, b] spans fewer than {PMWM_GRID_STEPS} of them, so the "
                   "cut-offs are about a and b themselves; rescale X by a public factor so "
                   "that w is of order 1 or more")
    for noise in _noises(methods, controls, n=n, k=k, budget=budget, calibration=calibration):
        if not noise.unreliable:
            continue
        why = []
        if noise.relative_sd > UNRELIABLE_SD:
            why.append(f"expected noise sd {_g(100 * noise.relative_sd)}% of the "
                       f"value (> {_g(100 * UNRELIABLE_SD)}%)")
        if noise.bin_probability < RIGHT_BIN:
            why.append(f"the m2 histogram picks the right scale with probability <= "
                       f"{_g(round(noise.bin_probability, 3))}")
        out.append(f"scree method {noise.method!r} is unreliable here: " + " and ".join(why)
                   + "; expect errors above 50% in more than 1 run in 10 -- raise eps, lower "
                   "k or use another method")
    return out


def warn_unreliable(methods: Sequence[str], controls: Mapping[str, Control], *, n: int,
                    k: int, budget: PrivacyBudget, calibration: str, stacklevel: int = 3) -> None:
    """Emit :func:`unreliable_messages` as :class:`~dppca_dask.errors.UtilityWarning` (one line
    each), from public quantities only: before any data is read."""
    for message in unreliable_messages(methods, controls, n=n, k=k, budget=budget,
                                       calibration=calibration):
        warnings.warn(message, UtilityWarning, stacklevel=stacklevel)


def noise_lines(methods: Sequence[str], controls: Mapping[str, Control], *, n: int, k: int,
                budget: PrivacyBudget, calibration: str, indent: str = "    ") -> list[str]:
    """The plan's lines: each method's expected noise relative to its estimand, then the
    ``UtilityWarning`` lines."""
    lines = [f"{indent}expected noise ({noise.method}): {noise.compared}"
             for noise in _noises(methods, controls, n=n, k=k, budget=budget,
                                  calibration=calibration)]
    lines += [f"{indent}UtilityWarning: {m}" for m in unreliable_messages(
        methods, controls, n=n, k=k, budget=budget, calibration=calibration)]
    return lines
