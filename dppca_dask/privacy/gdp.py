"""Gaussian-DP composition of the lattice Gaussian releases, with a composed lattice certificate.

The continuous Gaussian mechanism with noise sd σ and L2 sensitivity Δ is μ-GDP with μ = Δ/σ, and
an adaptive composition of μ_i-GDP mechanisms is μ-GDP with μ² = Σμ_i² (Dong, Roth & Su 2022,
Cor. 3.3; with adaptively chosen μ_i, as a budget ledger chooses them, Smith & Thakurta 2022).
Its exact (ε, δ) curve is Balle & Wang's δ_G(ε; μ) (:func:`gdp_delta`). This is the exact
privacy curve of composed continuous Gaussians -- the figure a PLD accountant approximates --
and it is about 10 % below what zCDP with the CKS conversion gives for ten (1, 1e-5) releases.

Our Gaussians are lattice Gaussians (γ·(round(v/γ) + N_Z(0, s²)^d)), so the curve is certified the
way a single release is (docs/privacy.md, "(ε, δ) Gaussian"), with the bound composed:

    ε = ε0 + ε_rest + 2a + L,   δ = e^a·(δ_G(ε0; μ) + δ_rest + e^{ε0 + ε_rest}·T) + T,

with a = Σa_i, L = Σ ln S_i and T = ΣT_i the per-release lattice terms
(:func:`~dppca_dask.privacy.accounting.lattice_terms`) and (ε_rest, δ_rest) the basic sum of the
other records. Proof: dither every lattice output (add U ~ Unif[−½, ½)^d, a data-independent map
that rounding undoes). Conditional on the history, release i's dithered density over the
continuous N(c_i, s_i²I) one (c_i its integer centre) lies in [e^{−a_i − ln S_i}, e^{a_i}] on
B_i = {‖round(w_i) − c_i‖ ≤ R_i}; the other mechanisms' conditional densities are the same in
both worlds, so on B = ∩B_i the joint densities differ by at most e^{a} and e^{a + L} pointwise,
and P(Bᶜ) ≤ T under the lattice mechanism at x and under the hybrid (continuous Gaussians, other
mechanisms unchanged) at x′. The hybrid is G_μ ⊗ (⊗ f_{ε_j, δ_j})-DP (f-DP composition), hence
(ε0 + ε_rest, δ_G(ε0; μ) + δ_rest)-DP. Chain: P_x(A) ≤ e^{a}·P^hyb_x(A) + T ≤
e^{a}(e^{ε0+ε_rest}·P^hyb_{x′}(A) + δ_G + δ_rest) + T and P^hyb_{x′}(A) ≤ e^{a+L}·P_{x′}(A) + T.
The tails get T·e^{E} = δ·2^-30 for a bound E on ε0 + ε_rest that is checked afterwards.

Only lattice Gaussian records stating their number of draws join the group, with μ and a lower
bound on the sd in grid units taken from public planning fields alone (:func:`lattice_gaussian`); the grid-1 histograms do not (a is large at small s) and stay in
the rest, as does everything else. With a zCDP-only record outside the group this bound is not
used (that record has no (ε, δ) statement to add).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scipy import optimize

from dppca_dask.privacy.accounting import (
    CALIBRATIONS,
    GRID_BITS,
    TAIL_BITS,
    analytic_gaussian_sigma,
    gaussian_delta,
    gaussian_sigma,
    lattice_terms,
)

__all__ = ["LATTICE_GAUSSIANS", "LatticeGaussian", "composed_lattice_eps", "gdp_delta",
           "gdp_eps", "lattice_gaussian", "release_mu"]

LATTICE_GAUSSIANS = frozenset({"gaussian", "gaussian_symmetric_matrix", "gaussian_zcdp",
                               "gaussian_zcdp_symmetric"})
"""Mechanisms whose records describe one lattice Gaussian release on a fine public grid."""


@dataclass(frozen=True)
class LatticeGaussian:
    """One lattice Gaussian release in grid units: sd ``s``, sensitivity ``D``, ``dimension`` draws."""

    s: float
    D: float
    dimension: int

    @property
    def mu(self) -> float:
        """Its GDP parameter D/s."""
        return self.D / self.s


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) and value > 0


def release_mu(eps: float, delta: float, calibration: str | None) -> float:
    """An upper bound on Δ/σ of every lattice Gaussian calibrated to (ε, δ) with
    ``calibration``: the σ :func:`~dppca_dask.privacy.accounting.lattice_gaussian_sd` starts
    from (per unit of the inflated sensitivity; it only grows from there). It depends on
    (ε, δ, calibration) alone, so a plan and its release give the same μ."""
    shaded = delta * (1.0 - 2.0 ** -20)
    cal = calibration if calibration in CALIBRATIONS else "analytic"
    sigma = gaussian_sigma(1.0, eps, shaded, cal)
    if gaussian_delta(sigma, 1.0, eps) > shaded:
        sigma = analytic_gaussian_sigma(1.0, eps, shaded)
    return 1.0 / sigma * (1 + 1e-12)


def lattice_gaussian(get: Any) -> LatticeGaussian | None:
    """The release a record's getter describes, or None when it is not a lattice Gaussian with
    its number of draws stated.

    Only public planning fields are used (mechanism, ε, δ, calibration, ρ, draws), never the
    sensitivity or sd a data-calibrated release found, so a plan composes exactly as its
    release: μ is :func:`release_mu` (or √(2ρ) for a zCDP record, whose ρ is at least its
    noise's), and the sd in grid units is bounded below by s ≥ 2^30·√d/μ (the grid has
    γ√d ≤ 2^-30·Δ, :func:`~dppca_dask.privacy.accounting.public_grid`), which only makes the
    lattice terms larger.
    """
    if get("mechanism") not in LATTICE_GAUSSIANS or get("status") == "prior":
        return None
    draws = get("draws")
    if not isinstance(draws, int) or isinstance(draws, bool) or draws < 1:
        return None
    if get("calibration") == "zcdp" or get("mechanism") in ("gaussian_zcdp",
                                                              "gaussian_zcdp_symmetric"):
        rho = get("rho")
        if not _positive(rho):
            return None
        mu = math.sqrt(2.0 * rho) * (1 + 1e-12)
    else:
        eps, delta = get("eps"), get("delta")
        if not (_positive(eps) and _positive(delta) and delta < 1):
            return None
        mu = release_mu(float(eps), float(delta), get("calibration"))
    s = math.ldexp(math.sqrt(draws), GRID_BITS) / mu * (1.0 - 1e-12)
    return LatticeGaussian(s=s, D=s * mu, dimension=draws)


def gdp_delta(mu: float, eps: float) -> float:
    """δ_G(ε; μ): the exact (ε, δ) curve of μ-GDP (Balle & Wang 2018, Thm 8)."""
    return gaussian_delta(1.0, mu, eps)


def gdp_eps(mu: float, delta: float) -> float:
    """The smallest ε ≥ 0 with δ_G(ε; μ) ≤ ``delta`` (rounded up; ∞ when ``delta`` ≤ 0).

    Examples
    --------
    >>> e = gdp_eps(1.0, 1e-5)
    >>> gdp_delta(1.0, e) <= 1e-5 < gdp_delta(1.0, e * (1 - 1e-9))
    True
    """
    if not delta > 0.0:
        return math.inf
    if mu == 0.0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0

    def excess(eps: float) -> float:
        return math.log(max(gdp_delta(mu, eps), 1e-320)) - math.log(delta)

    hi = max(1.0, mu * mu)
    while excess(hi) > 0:
        hi *= 2.0
    eps = optimize.brentq(excess, 0.0, hi, xtol=1e-14, rtol=1e-14)
    while gdp_delta(mu, eps) > delta:
        eps = eps * (1 + 1e-12) + 1e-15
    return float(eps)


def composed_lattice_eps(group: Sequence[LatticeGaussian], rest_eps: float, rest_delta: float,
                         delta: float) -> float:
    """The ε the composed lattice certificate proves at total ``delta`` for the ``group`` beside
    other records whose basic sum is (``rest_eps``, ``rest_delta``); ∞ when none fits."""
    if not group:
        return math.inf
    mu = math.sqrt(math.fsum(g.mu ** 2 for g in group)) * (1 + 1e-12)
    guess = gdp_eps(mu, 0.5 * (delta - rest_delta)) + rest_eps
    if not math.isfinite(guess):
        return math.inf
    bound = guess + 1.0  # E: the tails are sized for ε0 + ε_rest ≤ E, checked below
    log_inv_tail = -math.log(math.ldexp(delta, -TAIL_BITS)) + bound + math.log(len(group))
    terms = [lattice_terms(g.s, g.dimension, log_inv_tail) for g in group]
    a = math.fsum(t[0] for t in terms)
    log_s = math.fsum(t[1] for t in terms)
    tail = len(group) * math.exp(-log_inv_tail)
    room = (delta - tail) * math.exp(-a) - rest_delta - math.exp(bound) * tail
    if not room > 0.0:
        return math.inf
    eps0 = gdp_eps(mu, room * (1.0 - 1e-9))
    if eps0 + rest_eps > bound:
        return math.inf
    return (eps0 + rest_eps + 2.0 * a + log_s) * (1 + 1e-12)
