"""Noise calibration and the privacy ledger.

Gaussian mechanism calibrations for an L2 (or Frobenius) sensitivity ``Δ``:

* ``"classical"`` -- σ = Δ·sqrt(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm A.1). Its guarantee is
  proven only for 0 < ε < 1; for larger ε it is the seed package's formula, kept for fidelity.
* ``"analytic"`` -- the smallest σ whose exact privacy curve satisfies (ε, δ) (Balle & Wang 2018,
  "Improving the Gaussian mechanism for differential privacy", Thm 8 / Alg. 1), valid for every ε:
  δ(σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ).

Every noisy release produces one immutable :class:`SpendRecord`; results carry the tuple of their
records (the ledger). A record states the component, mechanism, sensitivity, noise scale, the
(ε, δ) it was calibrated to and, for Gaussian noise, the zCDP cost ρ = Δ²/(2σ²).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from scipy import optimize, special

from dppca_dask.errors import BudgetError

__all__ = [
    "CALIBRATIONS",
    "GRID_BITS",
    "LatticeCertificate",
    "SpendRecord",
    "TAIL_BITS",
    "analytic_gaussian_sigma",
    "classical_gaussian_sigma",
    "gaussian_delta",
    "gaussian_sigma",
    "histogram_gaussian_delta",
    "histogram_gaussian_variance",
    "lattice_gaussian_certificate",
    "lattice_gaussian_sd",
    "lattice_terms",
    "ledger_from_dicts",
    "ledger_to_dicts",
    "ledger_totals",
    "public_grid",
    "rounded_l2_sensitivity",
]

Calibration = Literal["classical", "analytic"]
CALIBRATIONS: tuple[str, ...] = ("classical", "analytic")


def classical_gaussian_sigma(sensitivity: float, eps: float, delta: float) -> float:
    """σ = Δ·sqrt(2 ln(1.25/δ))/ε.

    Examples
    --------
    >>> classical_gaussian_sigma(4 / 50, 0.5, 1e-3)
    0.6042367252254475
    """
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / eps


def gaussian_delta(sigma: float, sensitivity: float, eps: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with noise σ and L2 sensitivity Δ (Balle & Wang)."""
    a = sensitivity / (2.0 * sigma)
    b = eps * sigma / sensitivity
    first = special.log_ndtr(a - b)
    second = eps + special.log_ndtr(-a - b)
    if second >= first:
        return 0.0
    return float(math.exp(first) * -math.expm1(second - first))


@functools.lru_cache(maxsize=1024)
def analytic_gaussian_sigma(sensitivity: float, eps: float, delta: float) -> float:
    """The smallest σ with :func:`gaussian_delta` ≤ δ (Balle & Wang 2018), for every ε > 0.

    Examples
    --------
    >>> s = analytic_gaussian_sigma(1.0, 1.0, 1e-5)
    >>> abs(gaussian_delta(s, 1.0, 1.0) - 1e-5) < 1e-12
    True
    """
    # δ(σ) is decreasing in σ; solve on log σ in units of Δ (the curve depends on σ/Δ only).
    def excess(log_s: float) -> float:
        return math.log(max(gaussian_delta(math.exp(log_s), 1.0, eps), 1e-300)) - math.log(delta)

    lo, hi = -10.0, 10.0
    while excess(lo) < 0:
        lo -= 10.0
    while excess(hi) > 0:
        hi += 10.0
    log_s = optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-15, maxiter=500)
    sigma = math.exp(log_s) * sensitivity
    # Step up to the first σ that satisfies the bound (root finding may land a hair below).
    while gaussian_delta(sigma, sensitivity, eps) > delta:
        sigma = math.nextafter(sigma, math.inf) * (1 + 1e-15)
    return sigma


def gaussian_sigma(sensitivity: float, eps: float, delta: float, calibration: str) -> float:
    """σ of a Gaussian mechanism under the named calibration."""
    if delta <= 0:
        raise BudgetError(f"The Gaussian mechanism needs delta > 0. Got {delta!r}.")
    if calibration == "classical":
        return classical_gaussian_sigma(sensitivity, eps, delta)
    if calibration == "analytic":
        return analytic_gaussian_sigma(sensitivity, eps, delta)
    raise BudgetError(f"Unknown calibration {calibration!r}; use one of {CALIBRATIONS}.")


@dataclass(frozen=True)
class SpendRecord:
    """What one mechanism call spent (or, with ``status="prior"``, what an earlier release spent)."""

    component: str
    mechanism: str
    eps: float
    delta: float
    sensitivity: float | None = None
    sensitivity_norm: str | None = None
    noise: str | None = None
    scale: float | None = None
    rho: float | None = None
    calibration: str | None = None
    draws: int = 0
    status: Literal["spent", "prior"] = "spent"
    note: str = ""
    grid: float | None = None

    # Field meanings: ``sensitivity`` is the sensitivity the noise was calibrated for (after the
    # grid-rounding inflation, docs/privacy.md), ``scale`` the noise sd (Gaussian) or Laplace
    # scale actually used, ``grid`` the public grid γ = 2^k the release lies on (1 for counts),
    # ``draws`` the number of noise draws -- always a public number (for data-dependent
    # mechanisms its public upper bound). No field may depend on the data.

    def __post_init__(self) -> None:
        """A record never states an impossible spend, however it was built."""
        def check(name: str, ok: bool, rule: str) -> None:
            if not ok:
                raise BudgetError(f"The {name!r} field of SpendRecord must be {rule}. "
                                  f"Got {getattr(self, name)!r} instead.")

        def finite_nonneg(v: Any) -> bool:
            return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) \
                and v >= 0

        check("eps", finite_nonneg(self.eps), "a finite float >= 0")
        check("delta", finite_nonneg(self.delta) and self.delta < 1, "a float in [0, 1)")
        for name in ("sensitivity", "scale", "rho", "grid"):
            value = getattr(self, name)
            check(name, value is None or finite_nonneg(value), "None or a finite float >= 0")
        check("draws", isinstance(self.draws, int) and not isinstance(self.draws, bool)
              and self.draws >= 0, "an int >= 0")
        check("status", self.status in ("spent", "prior"), "'spent' or 'prior'")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def ledger_to_dicts(ledger: Iterable[SpendRecord]) -> list[dict[str, Any]]:
    return [r.as_dict() for r in ledger]


def ledger_from_dicts(items: Iterable[dict[str, Any]]) -> tuple[SpendRecord, ...]:
    return tuple(SpendRecord(**item) for item in items)


def ledger_totals(ledger: Iterable[SpendRecord]) -> dict[str, float]:
    """Basic-composition totals of the records spent by this release (prior releases excluded)."""
    spent = [r for r in ledger if r.status == "spent"]
    return {"eps": math.fsum(r.eps for r in spent), "delta": math.fsum(r.delta for r in spent)}


# --- calibration of the exact (grid) mechanisms (docs/privacy.md, "Floating-point safety") ------

GRID_BITS = 30
"""The public grid γ = 2^k is the largest power of two with γ·√d ≤ 2^-30·Δ (L2) or
γ·d ≤ 2^-30·Δ (L1): rounding costs a relative 2^-30 ≈ 1e-9 of sensitivity."""

TAIL_BITS = 30  # each tail event of the lattice certificate is given at most δ·2^-30


def public_grid(sensitivity: float, dimension: int, norm: str) -> float:
    """γ = 2^k, the largest power of two with γ·√d (``"l2"``) or γ·d (``"l1"``) ≤ 2^-30·Δ.

    A function of public quantities only (sensitivity, dimension).

    Examples
    --------
    >>> public_grid(1.0, 1, "l2") == 2.0 ** -30, public_grid(1.0, 4, "l1") == 2.0 ** -32
    (True, True)
    """
    if not (sensitivity > 0 and math.isfinite(sensitivity)) or dimension < 1:
        raise ValueError(f"A grid needs a positive finite sensitivity and dimension >= 1; got "
                         f"{sensitivity!r}, {dimension!r}.")
    spread = math.sqrt(dimension) if norm == "l2" else float(dimension)
    bound = math.ldexp(sensitivity, -GRID_BITS) / spread
    k = math.frexp(bound)[1] - 1  # 2^k <= bound < 2^(k+1)
    while math.ldexp(1.0, k) > bound:
        k -= 1
    while math.ldexp(1.0, k + 1) <= bound:
        k += 1
    return math.ldexp(1.0, k)


def rounded_l2_sensitivity(sensitivity: float, dimension: int) -> tuple[float, float]:
    """(γ, Δ + γ√d): the public grid of a d-value L2 release and the sensitivity its noise is
    calibrated for once the statistic is rounded to that grid (each coordinate moves ≤ γ/2).

    Examples
    --------
    >>> grid, inflated = rounded_l2_sensitivity(1.0, 4)
    >>> grid == 2.0 ** -31, inflated > 1.0 + grid * 2
    (True, True)
    """
    grid = public_grid(sensitivity, dimension, "l2")
    return grid, math.nextafter(sensitivity + grid * math.sqrt(dimension), math.inf)


def _chi2_radius(dimension: int, log_inv_tail: float) -> float:
    """x with exp(−(d/2)(x − ln(1+x))) = tail: the Chernoff bound for a sum of d squares whose
    moment generating function is dominated by that of χ²_d."""
    def excess(x: float) -> float:
        return 0.5 * dimension * (x - math.log1p(x)) - log_inv_tail

    hi = 1.0
    while excess(hi) < 0:
        hi *= 2.0
    x = optimize.brentq(excess, 0.0, hi, xtol=1e-15, rtol=1e-15)
    return x * (1 + 1e-12) + 1e-300


@functools.lru_cache(maxsize=4096)
def lattice_terms(s: float, dimension: int, log_inv_tail: float) -> tuple[float, float]:
    """(a, ln S) of the lattice certificate for N_Z(0, s²)^d with tails ≤ exp(−log_inv_tail).

    On {‖r‖ ≤ R}, R = s·√(d(1+x)) + √d/2 (x from the χ² Chernoff bound at that tail), the
    dithered lattice density over the continuous N(0, s²I) one lies in [e^{−a−ln S}, e^{a}] with
    a = (R√d + d/4)/(2s²) and ln S ≤ d·ln(1 + 2e^{−2π²s²}/(1 − e^{−2π²s²})) (docs/privacy.md).
    Both are rounded up.
    """
    d = dimension
    x = _chi2_radius(d, log_inv_tail)
    radius = s * math.sqrt(d * (1.0 + x)) + 0.5 * math.sqrt(d)
    a = (radius * math.sqrt(d) + 0.25 * d) / (2.0 * s * s) * (1 + 1e-9)
    c = 2.0 * math.pi ** 2 * s * s
    z = math.exp(-c) if c < 745 else 0.0
    log_s = d * math.log1p(2.0 * z / -math.expm1(-c)) * (1 + 1e-9) if z > 0 else 0.0
    return a, log_s


@dataclass(frozen=True)
class LatticeCertificate:
    """The terms of the (ε, δ) bound for adding i.i.d. N_Z(0, s²) to a vector in Z^d whose
    neighbours differ by at most D in L2 (docs/privacy.md): ε = ε0 + 2a + ln S,
    δ = e^a·(δ_G(ε0) + e^{ε0}·T) + T."""

    eps0: float
    delta_gauss: float
    a: float
    log_s: float
    tail: float
    delta_total: float
    ok: bool


def lattice_gaussian_certificate(s: float, grid_sensitivity: float, dimension: int,
                                 eps: float, delta: float) -> LatticeCertificate:
    """Certify (ε, δ) for the multivariate discrete Gaussian with sd ``s`` (grid units)."""
    d = dimension
    log_inv_tail = -math.log(math.ldexp(delta, -TAIL_BITS)) + eps  # e^ε·T ≤ δ·2^-30
    tail = math.exp(-log_inv_tail)
    a, log_s = lattice_terms(s, d, log_inv_tail)
    eps0 = eps - 2.0 * a - log_s
    if eps0 <= 0:
        return LatticeCertificate(eps0, 1.0, a, log_s, tail, math.inf, False)
    dg = gaussian_delta(s, grid_sensitivity, eps0)
    log_gauss = a + math.log(dg) if dg > 0 else -math.inf
    log_tail_term = a + eps0 - log_inv_tail  # = ln(δ·2^-30) − a − ln S: never overflows
    total = (math.exp(min(log_gauss, 709.0)) + math.exp(min(log_tail_term, 709.0)) + tail) * (
        1 + 1e-9)
    return LatticeCertificate(eps0, dg, a, log_s, tail, total, total <= delta)


@functools.lru_cache(maxsize=1024)
def lattice_gaussian_sd(sensitivity: float, dimension: int, eps: float, delta: float,
                        calibration: str) -> tuple[float, float, float, LatticeCertificate]:
    """(γ, inflated sensitivity Δ + γ√d, σ, certificate) of an exact Gaussian release.

    σ starts at the calibration's σ for the inflated sensitivity at a δ shaded by 2^-20; where
    that σ does not meet (ε, δ) exactly (``"classical"`` for large ε) the analytic σ is used; σ
    then grows until the lattice certificate holds. σ is returned as a float; the sampler uses
    a rational variance at or above (σ/γ)².
    """
    grid, inflated = rounded_l2_sensitivity(sensitivity, dimension)
    shaded = delta * (1.0 - 2.0 ** -20)
    sigma = gaussian_sigma(inflated, eps, shaded, calibration)
    if gaussian_delta(sigma, inflated, eps) > shaded:
        sigma = analytic_gaussian_sigma(inflated, eps, shaded)
    step = 1e-9
    for _ in range(200):
        cert = lattice_gaussian_certificate(sigma / grid, inflated / grid, dimension, eps, delta)
        if cert.ok:
            return grid, inflated, sigma, cert
        sigma *= 1.0 + step
        step *= 2.0
    raise BudgetError(f"Could not certify an exact Gaussian release at eps={eps!r}, "
                      f"delta={delta!r} in dimension {dimension}.")


def _log_theta(s2: float, scale: float, alternating: bool = False) -> float:
    """ln Σ_j exp(−(j − shift)²/(scale·s2)) by Poisson summation (shift ½ when alternating)."""
    if s2 < 4.0:  # direct sum (Poisson's dual sum converges slowly here)
        shift = 0.5 if alternating else 0.0
        j = np.arange(-int(40 * math.sqrt(s2)) - 3, int(40 * math.sqrt(s2)) + 4) - shift
        expo = -(j * j) / (scale * s2)
        top = float(np.max(expo))
        return top + math.log(float(np.sum(np.exp(expo - top))))
    c = math.pi ** 2 * scale * s2
    total, k = 1.0, 1
    while True:
        term = 2.0 * math.exp(-c * k * k) if c * k * k < 745 else 0.0
        if term < 1e-18:
            break
        total += -term if (alternating and k % 2) else term
        k += 1
    return 0.5 * math.log(math.pi * scale * s2) + math.log(total)


def histogram_gaussian_delta(s2: float, eps: float) -> float:
    """Exact δ(ε) of adding i.i.d. N_Z(0, s2) to integer counts under replace-one adjacency.

    One replaced row moves one count from cell A to cell B; the other cells cancel, and the
    privacy loss is (Y_A − Y_B + 1)/s2, so δ = Σ_k r(k)·(1 − e^{ε − (k+1)/s2})₊ with r the pmf of
    K = Y_A − Y_B: r(k) = e^{−k²/(4 s2)}·E_{k mod 2}/Z², Z = Σ_j e^{−j²/(2 s2)},
    E_0 = Σ_j e^{−j²/s2}, E_1 = Σ_j e^{−(j−½)²/s2} (Poisson summation for the three sums).
    """
    log_z = _log_theta(s2, 2.0)
    log_e = (_log_theta(s2, 1.0), _log_theta(s2, 1.0, alternating=True))
    k0 = math.floor(eps * s2 - 1.0) + 1
    width = math.ceil(60.0 * math.sqrt(2.0 * s2)) + 50
    k = np.arange(k0, k0 + width, dtype=np.float64)
    log_r = -k * k / (4.0 * s2) + np.where(k % 2 == 0, log_e[0], log_e[1]) - 2.0 * log_z
    gain = -np.expm1(eps - (k + 1.0) / s2)
    return float(np.sum(np.exp(log_r) * np.clip(gain, 0.0, None)))


@functools.lru_cache(maxsize=256)
def histogram_gaussian_variance(eps: float, delta: float, calibration: str) -> float:
    """The variance s2 of the exact Gaussian histogram: the calibration's σ² for sensitivity √2
    when it meets (ε, δ) exactly on the integers (``"classical"``), else (and always for
    ``"analytic"``) the smallest s2 (to 1e-9 relative) whose exact δ is at most δ."""
    target = delta * (1.0 - 1e-9)
    start = gaussian_sigma(math.sqrt(2.0), eps, delta, calibration) ** 2
    if calibration == "classical" and histogram_gaussian_delta(start, eps) <= target:
        return start
    lo, hi = start * 0.25, start
    while histogram_gaussian_delta(hi, eps) > target:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-10 * hi:
        mid = 0.5 * (lo + hi)
        if histogram_gaussian_delta(mid, eps) <= target:
            hi = mid
        else:
            lo = mid
    return hi
