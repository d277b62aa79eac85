"""Privacy-loss-distribution (PLD) composition of a fixed set of spend records.

Each record is mapped to a *dominating pair* (P, Q) for its mechanism as implemented -- a pair
with H_α(M(x) ‖ M(x′)) ≤ H_α(P ‖ Q) for all α ≥ 0 and all neighbours, both directions -- and the
pairs are composed with Google's dp-accounting (``dp_accounting.pld``, pessimistic estimates
only, connect-the-dots where it offers it; Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022).
The composed curve is a valid (ε, δ) bound for the records' mechanisms run one after another
on adaptively chosen *inputs*, the list of mechanisms (their parameters) being fixed in advance
(Zhu, Dong & Wang 2022, Thm 10).

**It is not a privacy filter.** When which release comes next is chosen after seeing earlier
outputs -- as a persistent ledger is used across runs -- stopping when the path-wise composed
PLD crosses a cap is not valid in general (Regehr, Hu, Leeman, Manurangsi, Tholoniat & Lécuyer
2026, arXiv:2602.15815; Honkela, Koskela, Tran & Räisä 2026, arXiv:2602.06756: only families that
are well ordered under composition, such as Gaussian DP, admit such filters). So
:meth:`~dppca_dask.privacy.composition.Composition.tight_eps`, the ledger's cap figure, does not
use it; :meth:`~dppca_dask.privacy.composition.Composition.pld_eps` states it.

The mappings (record -> hybrid mechanism -> dominating pair), each sound for the mechanism as
``privacy/mechanisms/`` implements it:

* **lattice Gaussians** (``gaussian``, ``gaussian_symmetric_matrix``, ``gaussian_zcdp``,
  ``gaussian_zcdp_symmetric`` with ``draws`` stated; :func:`~dppca_dask.privacy.gdp.
  lattice_gaussian`): the hybrid is the continuous N(c, s²I) around the integer centre, whose
  shift has L2 norm ≤ D, so (rotation invariance) the 1-D Gaussian with sd 1/μ and sensitivity 1
  dominates it, μ = D/s the record's public μ (an upper bound). The discrete Gaussian is *not*
  dominated by it: the lattice certificate bridges them (dithered density ratios in
  [e^{−a−ln S}, e^{a}] off tails of mass ≤ T, :func:`~dppca_dask.privacy.accounting.
  lattice_terms`), as in :mod:`~dppca_dask.privacy.gdp`;
* **scalar Laplace** (``laplace`` with ``draws == 1``): integer centre shift k ≤ Δ/γ + 1 and
  discrete-Laplace scale b ≥ (Δ/γ + 1)/ε ≥ 2^30/ε, so the continuous Laplace hybrid (scale b,
  shift k) is dominated by the Laplace PLD with parameter 1/ε, sensitivity 1. The discrete
  Laplace is not dominated by it (it puts 1/(1+e^{−1/b}) > ½ on the top loss); dithered, its
  density over the continuous one lies in [e^{−y−y²/3}, e^{y}] everywhere, y = 1/(2b) ≤ ε·2^-31;
* **geometric histogram** (``geometric_histogram``): one replaced row shifts two cells by ±1;
  a discrete Laplace shifted by 1 is exactly randomized response with ε₁ = 1/b ≤ ε/2, so
  RR(ε/2) ⊗ RR(ε/2) dominates (no bridge needed);
* **Gaussian histogram** (``gaussian_histogram``): two cells shift by ±1 under N_Z(0, s²) noise
  with s the stated sd: two discrete Gaussian PLDs (sensitivity 1). dp-accounting truncates the
  noise to [−t, t]; t is chosen so the cut mass is η ≤ 2^-200 (sub-Gaussian tail, CKS 2020), a
  bridge with a = 0, ln(1/(1 − η)) and a tail η;
* **exponential mechanism** (zCDP record, ρ = ε²/8): ε-DP, so RR(ε) with ε = √(8ρ);
* **AboveThreshold stated in zCDP** (``durfee_above_threshold`` with ρ = ε²/2, the covariance
  radius's searches): ε-DP, so RR(ε) with ε = √(2ρ);
* **every other record with an (ε, δ) statement** (AboveThreshold, multivariate Laplace,
  ``stability_histogram``, ``smooth_sensitivity_laplace``, records without their public fields):
  the generic pair of (ε, δ)-DP (``from_privacy_parameters``: δ at +∞, RR(ε) on the rest;
  Kairouz, Oh & Viswanath 2015), valid for every (ε, δ)-DP mechanism;
* a zCDP-only record that is none of the above has no PLD here: the figure is ∞.

With the bridges summed (a_up = Σa + Σy, a_down = Σ(a + ln S) + Σ(y + y²/3) + Σ ln(1/(1−η)),
T = ΣT + Ση), the hybrid's (ε_h, δ_h) gives ε = ε_h + a_up + a_down at
δ = e^{a_up}(δ_h + e^{ε_h}T) + T (proof: :mod:`~dppca_dask.privacy.gdp`, with the hybrid's curve
the PLD instead of G_μ ⊗ basic).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dppca_dask.privacy.accounting import TAIL_BITS, lattice_terms
from dppca_dask.privacy.gdp import LatticeGaussian, lattice_gaussian

__all__ = ["DISCRETISATION", "FINE_DISCRETISATION", "NO_TERMS", "PLDTerms", "pld_eps", "pld_terms"]

DISCRETISATION = 1e-3
"""The PLDs' value discretisation interval when every pair is a connect-the-dots one (Gaussian,
Laplace): within 1e-5 of dp-accounting's default (1e-4) on the ledgers of
tests/test_composition.py and ~10x faster (docs/privacy.md)."""

FINE_DISCRETISATION = 1e-4
"""The interval when a pair is rounded up atom by atom (randomized response, the generic (ε, δ)
pair): each such pair costs up to one interval, so these ledgers use dp-accounting's default."""

TRUNCATION_BITS = 200
"""The Gaussian histograms' noise is cut by dp-accounting at a mass of at most 2^-200 a cell."""

Spec = tuple[Any, ...]
"""One record's dominating pair: ("gauss", 1/μ), ("laplace", ε), ("rr", ε, δ) or
("dgauss", sd)."""


@dataclass(frozen=True)
class PLDTerms:
    """Every record's dominating pair and the bridges back to the mechanisms as implemented."""

    specs: tuple[tuple[Spec, int], ...] = ()
    """The pairs with their multiplicities, sorted (the cache key of the composed PLD)."""
    lattice: tuple[LatticeGaussian, ...] = ()
    laplace_y: tuple[float, ...] = ()
    """y = 1/(2b) ≤ ε·2^-31 of each scalar Laplace release."""
    truncated_cells: int = 0
    """How many cells of Gaussian histograms the truncated discrete Gaussian stands for."""
    unsupported: int = 0
    """Records with no PLD here (then the figure is ∞)."""


NO_TERMS = PLDTerms()
"""The terms of no record."""


def _pos(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) and value > 0


def _record_pairs(get: Any) -> tuple[list[Spec], LatticeGaussian | None, float | None, int]:
    """(pairs, lattice release, Laplace y, truncated cells) of one spent record; no pairs and
    nothing else: unsupported."""
    mechanism, eps, delta = get("mechanism"), get("eps"), get("delta")
    release = lattice_gaussian(get)
    if release is not None:
        return [("gauss", 1.0 / release.mu)], release, None, 0
    if mechanism == "laplace" and get("draws") == 1 and delta == 0 and _pos(eps):
        return [("laplace", float(eps))], None, float(eps) * 2.0 ** -31, 0
    if mechanism == "geometric_histogram" and delta == 0 and _pos(eps):
        half = float(eps) / 2.0  # exact in binary; 1/b <= ε/2 exactly (b >= 2/ε, a rational)
        return [("rr", half, 0.0), ("rr", half, 0.0)], None, None, 0
    if mechanism == "gaussian_histogram" and _pos(get("scale")):
        sd = float(get("scale")) * (1 - 1e-12)
        return [("dgauss", sd), ("dgauss", sd)], None, None, 2
    if mechanism == "exponential_mechanism" and _pos(get("rho")):
        return [("rr", math.sqrt(8.0 * float(get("rho"))) * (1 + 1e-12), 0.0)], None, None, 0
    if mechanism == "durfee_above_threshold" and _pos(get("rho")):  # its zCDP form: ρ = ε²/2
        return [("rr", math.sqrt(2.0 * float(get("rho"))) * (1 + 1e-12), 0.0)], None, None, 0
    zcdp_only = get("calibration") == "zcdp" or eps == math.inf or (
        get("rho") is not None and eps == 0 and delta == 0)
    if zcdp_only:
        return [], None, None, 0
    return [("rr", float(eps), float(delta))], None, None, 0


def pld_terms(getters: Iterable[Any]) -> PLDTerms:
    """The :class:`PLDTerms` of spent records given by their field getters (prior records left
    out by the caller)."""
    counts: Counter[Spec] = Counter()
    lattice: list[LatticeGaussian] = []
    ys: list[float] = []
    cells = unsupported = 0
    for get in getters:
        pairs, release, y, truncated = _record_pairs(get)
        if not pairs:
            unsupported += 1
        counts.update(pairs)
        if release is not None:
            lattice.append(release)
        if y is not None:
            ys.append(y)
        cells += truncated
    return PLDTerms(tuple(sorted(counts.items())), tuple(lattice), tuple(ys), cells, unsupported)


def _interval(specs: tuple[tuple[Spec, int], ...]) -> float:
    coarse = all(spec[0] in ("gauss", "laplace") for spec, _ in specs)
    return DISCRETISATION if coarse else FINE_DISCRETISATION


def _one(spec: Spec, interval: float) -> Any:
    # imported here: dp-accounting takes ~1 s to import, and only this function needs it
    from dp_accounting.pld import common  # type: ignore[import-untyped]
    from dp_accounting.pld import privacy_loss_distribution as pld

    kind = spec[0]
    if kind == "gauss":
        return pld.from_gaussian_mechanism(standard_deviation=spec[1], sensitivity=1.0,
                                           value_discretization_interval=interval)
    if kind == "laplace":
        return pld.from_laplace_mechanism(parameter=1.0 / spec[1], sensitivity=1.0,
                                          value_discretization_interval=interval)
    if kind == "dgauss":
        bound = math.ceil(spec[1] * math.sqrt(2.0 * (TRUNCATION_BITS + 1) * math.log(2.0))) + 1
        return pld.from_discrete_gaussian_mechanism(spec[1], sensitivity=1,
                                                    truncation_bound=bound,
                                                    value_discretization_interval=interval,
                                                    use_connect_dots=True)
    eps, delta = spec[1], spec[2]
    return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, delta),
                                       value_discretization_interval=interval)


@functools.lru_cache(maxsize=256)
def _composed(specs: tuple[tuple[Spec, int], ...]) -> Any:
    """The composed PLD of a multiset of pairs (cached: a ledger recomposes the same ones)."""
    out, interval = None, _interval(specs)
    for spec, count in specs:
        one = _one(spec, interval)
        part = one if count == 1 else one.self_compose(count)
        out = part if out is None else out.compose(part)
    return out


MAX_SUPPORT = 4_000_000
"""The most discretisation steps the composed losses may span (else the figure is ∞: a ledger
that far past any sensible cap is left to the other bounds)."""


def _width(spec: Spec) -> float:
    """A bound on the span of one pair's privacy losses (in ε units) that dp-accounting keeps."""
    if spec[0] == "gauss":
        mu = 1.0 / spec[1]
        return mu * mu + 25.0 * mu
    if spec[0] == "dgauss":
        return 50.0 / spec[1] + 1.0 / spec[1] ** 2
    return 2.0 * spec[1] if spec[1] <= 500.0 else math.inf  # dp-accounting forms e^ε


def _hybrid_eps(specs: tuple[tuple[Spec, int], ...], delta: float) -> float:
    if not delta > 0.0:
        return math.inf
    if not specs:
        return 0.0
    if math.fsum(_width(spec) * count for spec, count in specs) > MAX_SUPPORT * _interval(specs):
        return math.inf
    eps = float(_composed(specs).get_epsilon_for_delta(delta))
    return eps if math.isfinite(eps) else math.inf


def pld_eps(terms: PLDTerms, delta: float) -> float:
    """The ε the composed PLD (with the bridges of the module docstring) proves at total
    ``delta``; ∞ when none fits or a record has no PLD here.

    Examples
    --------
    >>> pld_eps(pld_terms([{"mechanism": "laplace", "eps": 1.0, "delta": 0.0, "draws": 1}.get]),
    ...         0.0) > 1.0 - 1e-3
    True
    """
    delta = float(delta)
    if terms.unsupported or not delta >= 0.0:
        return math.inf
    pure = _pure_eps(terms)  # valid at every δ: each record is exactly ε-DP
    if delta == 0.0:
        return pure
    n = len(terms.lattice)
    eta = math.ldexp(1.0, -TRUNCATION_BITS) * terms.truncated_cells
    a_up = math.fsum(terms.laplace_y)
    a_down = math.fsum(y + y * y / 3.0 for y in terms.laplace_y) - terms.truncated_cells * \
        math.log1p(-math.ldexp(1.0, -TRUNCATION_BITS))
    tail, bound = eta, math.inf
    if n or eta:
        bound = _hybrid_eps(terms.specs, 0.5 * delta) + 1.0  # E: tails sized for ε_h ≤ E
        if not bound < 700.0:
            return math.inf
    if n:
        log_inv_tail = -math.log(math.ldexp(delta, -TAIL_BITS)) + bound + math.log(n)
        lattice = [lattice_terms(g.s, g.dimension, log_inv_tail) for g in terms.lattice]
        a = math.fsum(t[0] for t in lattice)
        a_up += a
        a_down += a + math.fsum(t[1] for t in lattice)
        tail += n * math.exp(-log_inv_tail)
    room = (delta - tail) * math.exp(-a_up) - (math.exp(bound) * tail if tail else 0.0)
    if not room > 0.0:
        return pure
    eps_h = _hybrid_eps(terms.specs, room * (1.0 - 1e-9))
    if eps_h > bound:
        return pure
    return min(pure, (eps_h + a_up + a_down) * (1 + 1e-12))


def _pure_eps(terms: PLDTerms) -> float:
    """At δ = 0: the basic sum of the pure ε pairs (each record is exactly ε-DP, no bridge
    needed), ∞ with any other pair."""
    total = []
    for spec, count in terms.specs:
        if spec[0] in ("gauss", "dgauss") or (spec[0] == "rr" and spec[2] > 0):
            return math.inf
        total.append(spec[1] * count)
    return math.fsum(total)
