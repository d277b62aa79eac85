"""The private scree mechanisms as stages of the pass protocol (:mod:`dppca_dask.graph.rounds`).

Each procedure is a stage that reads like the spec (docs/spec/SPEC_dppca.md §5.2–5.4): when it
needs a statistic of the data it asks for a :class:`~dppca_dask.graph.scree_passes.Request`
(:func:`ask`), receives the exact aggregate, draws its noise through
:mod:`dppca_dask.privacy.mechanisms` on the driver and finally returns the raw private scree
values of its components with a dict of the other values it released (cut-offs, m₂, τ: private
releases, safe to report). ``dp_scree`` runs the procedures side by side
(:func:`~dppca_dask.graph.rounds.gather`): every request that is ready is evaluated in one data
pass, so the k components and all requested methods share each read of X (the Huber gradient
steps, which depend on the previous noisy μ, cost one small pass per step for all of them
together). ``lockstep=False`` chains them instead (:func:`~dppca_dask.graph.rounds.chain`): one
procedure per component reproduces the R package's order of random draws (component by
component) at the cost of more passes.

The private centre (:func:`private_center`) is this package's design, see
``docs/design/scree.md``: the scores are centred on a private estimate of their mean vector,
found by two rounds of a ball-clipped Gaussian mean whose radius is a Durfee quantile of the
distances to the current centre.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dppca_dask.graph.rounds import Stage
from dppca_dask.graph.scree_passes import Request, pair_block_bounds
from dppca_dask.pca.scree_controls import ClippedControl, Control, HuberControl, PMWMControl
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import (
    gaussian_record,
    gaussian_release,
    laplace_record,
    laplace_release,
)
from dppca_dask.privacy.quantiles import (
    DEFAULT_MAX_STEPS,
    signed_quantile_from_counts,
    signed_quantile_records,
    upper_from_counts,
    upper_grid,
    upper_records,
)

__all__ = [
    "CENTER_NOISE_WARN",
    "CENTER_ROUNDS",
    "CENTER_SHARE",
    "RADIUS_SHARE",
    "Context",
    "center_records",
    "clipped_scree",
    "method_records",
    "ask",
    "empirical_center",
    "huber_defaults",
    "spent_fractions",
    "huber_scree",
    "pmwm_scree",
    "private_center",
    "radius_quantile",
]

CENTER_SHARE = 0.2
"""Share of the scree allocation (ε and δ) spent on the private centre, once for all methods."""
CENTER_ROUNDS = (0.4, 0.6)
"""Shares of the centre budget of the two localisation rounds (coarse, then fine)."""
RADIUS_SHARE = 0.25
"""Share of each round's ε spent on the radius search (pure ε-DP); the rest is Gaussian."""
RADIUS_BETA = 1.1
"""Grid base of the radius search: 10% steps (a clipping radius needs no finer resolution) keep
the search short, so few noisy comparisons can stop it early."""
RADIUS_STEPS = 1000
CENTER_NOISE_WARN = 0.1
"""``dp_scree`` warns (UtilityWarning) when the private centre's noise variance, subtracted from
every value, exceeds this share of the largest released value: the values then carry the
centre's noise. The radius grid β^i − 1 is fixed in the scores' units (first point 0.1) and
round 1 starts at 0, so scores with a spread far below 0.1 or far from 0 relative to their
spread get such a centre; a two-sided grid would let the search stop early below the data
(about 10 % of runs at the demo's round-1 ε, n·ε_R = 33), so the grid stays
(docs/performance.md §4d, the grid audit)."""

Procedure = Stage[Any]


@dataclass
class Context:
    """What every procedure of one fit shares: public sizes, the generator and the ledger."""

    n: int
    k: int
    calibration: str
    rng: Any
    center: np.ndarray | None = None
    ledger: list[SpendRecord] = field(default_factory=list)

    def keep(self, release: Any) -> Any:
        """Record a release's spend and return its value."""
        self.ledger.append(release.record)
        return release.value


def ask(request: Request) -> Procedure:
    """One request as a stage round: ``value = yield from ask(Request(...))``."""
    (value,) = yield (request,)
    return value


# --- centring ----------------------------------------------------------------------------------


def empirical_center(ctx: Context) -> Procedure:
    """ȳ = mean of the scores (R-compatible; NOT covered by the privacy guarantee)."""
    sums = yield from ask(Request("sum"))
    return np.asarray(sums, dtype=np.float64) / ctx.n


def radius_quantile(n: int, eps: float) -> float:
    """The quantile level of the radius search: 1 − min(0.25, 16/(nε)).

    The Durfee threshold noise is Exp(scale 2/ε). Aiming 8 noise scales below n makes a search
    that runs past the data rare (probability e⁻⁸; past its last grid point, e⁻¹⁵), while the
    radius still covers every row as ε → ∞ (then the centre tends to the exact mean).
    """
    return 1.0 - min(0.25, 16.0 / (n * eps))


# --- the budget splits: each written once, used by the procedures and by their plans -----------


def center_budgets(budget: PrivacyBudget) -> list[tuple[float, PrivacyBudget]]:
    """Each centre round's (radius search ε, ball-clipped mean budget) of the centre's
    ``budget``: each round gets its share (:data:`CENTER_ROUNDS`) of it, :data:`RADIUS_SHARE`
    of that ε to the search (pure DP) and the rest, with the round's δ, to the mean."""
    return [(RADIUS_SHARE * share * budget.eps,
             PrivacyBudget((1.0 - RADIUS_SHARE) * share * budget.eps, share * budget.delta))
            for share in CENTER_ROUNDS]


def pmwm_budgets(per: PrivacyBudget) -> tuple[float, PrivacyBudget]:
    """One component's PMWM split of ``per``: each of the two cut-offs (signed Durfee
    quantiles, pure DP) gets ε/4, the winsorized mean (ε/2, δ)."""
    return per.eps / 4.0, PrivacyBudget(per.eps / 2.0, per.delta)


def huber_budgets(per: PrivacyBudget, control: HuberControl,
                  steps: int) -> tuple[float, PrivacyBudget, PrivacyBudget]:
    """One component's Huber split of ``per``: the m₂ histogram's ε (``m2_frac`` of it, pure
    DP), the gradient descent's budget (the rest of ε and its share of δ) and each of its
    ``steps`` steps' budget."""
    gd = PrivacyBudget((1.0 - control.m2_frac) * per.eps,
                       spent_fractions(control)[1] * per.delta)
    return control.m2_frac * per.eps, gd, gd.scaled(1.0 / steps)


def private_center(ctx: Context, budget: PrivacyBudget) -> Procedure:
    """Private mean vector of the k scores (this package's design; docs/design/scree.md).

    Two rounds from m = 0. Each round: one pass gives, on a public geometric grid of radii, the
    counts #{‖y_i − m‖ < R} and the sums of the ball-clipped vectors; a Durfee upper-quantile
    search (pure ε-DP) picks the radius R; the mean of the clipped vectors (L2 sensitivity 2R/n)
    is released with the Gaussian mechanism and m moves to it. The two rounds' estimates are
    combined by inverse noise variance. Returns the centre and its released details: ``sd``, the
    σ of its per-coordinate noise, and the two radii.
    """
    n, k = ctx.n, ctx.k
    grid = upper_grid(RADIUS_BETA, RADIUS_STEPS)
    m = np.zeros(k)
    estimates, weights, radii = [], [], []
    for j, (eps_radius, gauss) in enumerate(center_budgets(budget), start=1):
        hist, inside, scaled = yield from ask(Request("radius", (m.copy(), grid)))
        counts = np.cumsum(hist)[: grid.size]
        found = upper_from_counts(counts, grid, n=n, q=radius_quantile(n, eps_radius),
                                  eps=eps_radius, rng=ctx.rng, component="scree",
                                  label=f"centre round {j}: radius (Durfee upper quantile)")
        ctx.ledger.extend(found.records)
        index = int(np.searchsorted(grid, found.value))
        radius = float(grid[index])
        radii.append(radius)
        inner = np.cumsum(inside, axis=0)[index]
        outer = scaled.sum(axis=0) - np.cumsum(scaled, axis=0)[index]
        mean = (inner + radius * outer) / n
        release = gaussian_release(mean, sensitivity=2.0 * radius / n, budget=gauss,
                                   calibration=ctx.calibration, rng=ctx.rng, component="scree",
                                   label=f"centre round {j}: ball-clipped mean")
        m = m + ctx.keep(release)
        estimates.append(m)
        sd = release.record.scale
        assert sd is not None  # a Gaussian release always records its noise sd
        weights.append(1.0 / sd**2 if sd > 0 else np.inf)
    # Both rounds estimate the same mean with independent noise: combine them by inverse variance
    # (post-processing). The result's per-coordinate noise variance is 1/Σ(1/σ_j²).
    if np.isinf(weights).any():
        return estimates[int(np.argmax(weights))], {"sd": 0.0, "radius": radii}
    total = float(np.sum(weights))
    center = sum(w * e for w, e in zip(weights, estimates, strict=True)) / total
    return center, {"sd": float(np.sqrt(1.0 / total)), "radius": radii}


# --- the three mechanisms ----------------------------------------------------------------------


def _factor(n: int) -> float:
    return n / (n - 1.0)


def clipped_scree(
    ctx: Context, control: ClippedControl, budget: PrivacyBudget, comps: Sequence[int]
) -> Procedure:
    """Method "clipped" (SPEC §5.2): Gaussian mechanism on the mean of min(w, C), Δ = C/(n−1)."""
    n, clip = ctx.n, control.C_clip
    per = budget.scaled(1.0 / ctx.k)
    sums = yield from ask(Request("clipped", (ctx.center, clip)))
    out = []
    for comp in comps:
        base = _factor(n) * (sums[comp] / n)
        value = ctx.keep(gaussian_release(
            base, sensitivity=clip / (n - 1.0), budget=per, calibration=ctx.calibration,
            rng=ctx.rng, component="scree", label=f"clipped PC{comp + 1}: clipped mean"))
        out.append(max(value, 0.0))
    return np.array(out), {}


def pmwm_scree(
    ctx: Context, control: PMWMControl, budget: PrivacyBudget, comps: Sequence[int]
) -> Procedure:
    """Method "pmwm" (SPEC §5.4 with the Durfee quantile of §5.5b, feature version).

    Cut-offs L, U: two-sided Durfee quantiles at p and 1 − p (ε_ℓ/4 each) of w over the quantile
    set (L taken one grid candidate lower, see :func:`_candidate_below`), clamped to [a, b]
    (fallback [a, b] if not finite or U < L); the winsorized mean over the mean set is released
    with (ε_ℓ/2, δ_ℓ) and Δ = (n/(n−1))(U − L)/n_m.
    """
    n, k = ctx.n, ctx.k
    half = n // 2
    q_rows, m_rows = ((0, half), (half, n)) if control.split_mode else ((0, n), (0, n))
    n_q, n_m = q_rows[1] - q_rows[0], m_rows[1] - m_rows[0]
    trim = min(max(control.trim_const / n_q, control.eta), 0.49)
    grid = upper_grid(control.beta, DEFAULT_MAX_STEPS)
    cut_eps, mean_budget = pmwm_budgets(budget.scaled(1.0 / k))
    pos, neg = yield from ask(Request("signed", (ctx.center, grid, control.beta, *q_rows)))
    lower = np.full(k, control.a)
    upper = np.full(k, control.b)
    for comp in comps:
        cuts = []
        for q, side in ((trim, "lower"), (1.0 - trim, "upper")):
            found = signed_quantile_from_counts(
                pos[comp], neg[comp], grid, n=n_q, q=q, eps=cut_eps, beta=control.beta,
                rng=ctx.rng, component="scree", label=f"pmwm PC{comp + 1}: {side} cut-off")
            ctx.ledger.extend(found.records)
            value = found.value if side == "upper" else _candidate_below(found.value,
                                                                         control.beta)
            cuts.append(min(max(value, control.a), control.b))
        lo, hi = cuts
        if math.isfinite(lo) and math.isfinite(hi) and hi >= lo:
            lower[comp], upper[comp] = lo, hi
    sums = yield from ask(Request("winsor", (ctx.center, lower, upper, *m_rows)))
    out = []
    for comp in comps:
        base = _factor(n) * (sums[comp] / n_m)
        value = ctx.keep(gaussian_release(
            base, sensitivity=_factor(n) * (upper[comp] - lower[comp]) / n_m,
            budget=mean_budget, calibration=ctx.calibration, rng=ctx.rng, component="scree",
            label=f"pmwm PC{comp + 1}: winsorized mean"))
        out.append(max(value, 0.0))
    return np.array(out), {"lower": lower[list(comps)].tolist(),
                           "upper": upper[list(comps)].tolist(), "trim": trim}


def _candidate_below(value: float, beta: float) -> float:
    """The grid candidate just below ``value`` on the signed grid {±(β^j − 1)} (SPEC §5.5b).

    The Durfee search answers the first candidate with at least q·n values below it, i.e. it
    rounds up. For the lower cut-off PMWM takes the candidate before it (at most q·n values
    below), so that as ε → ∞ with q·n < 1 no value is winsorized from below -- otherwise every
    w < β − 1 would be raised to β − 1, a bias of order 0.5(β − 1)·P(w < β − 1) that never
    vanishes. The change is post-processing of the released index: it costs no budget.

    Examples
    --------
    >>> [round(_candidate_below(v, 1.01), 6) for v in (0.0201, 0.01, 0.0, -0.01)]
    [0.01, 0.0, -0.01, -0.0201]
    """
    if value > 0:
        j = round(math.log1p(value) / math.log(beta))
        return math.pow(beta, j - 1) - 1.0 if j > 1 else 0.0
    j = round(math.log1p(-value) / math.log(beta))
    return -(math.pow(beta, j + 1) - 1.0)


def spent_fractions(control: Control) -> tuple[float, float]:
    """The fractions (of ε, of δ) of a method's allocation that its mechanisms spend.

    Huber's m₂ histogram is pure ε-DP, so the m₂ share of δ stays unspent; the other methods
    spend their whole allocation. Plans and the persistent ledger use this, as the mechanism does.
    """
    if isinstance(control, HuberControl):
        return 1.0, 1.0 - control.m2_frac
    return 1.0, 1.0


def huber_defaults(n: int, control: HuberControl) -> tuple[int, int]:
    """(T, M): T = max(1, ⌈ln n⌉) and M = max(1, ⌊√n/2⌋) unless the control sets them."""
    steps = control.T if control.T is not None else max(1, math.ceil(math.log(n)))
    blocks = control.M if control.M is not None else max(1, math.floor(math.sqrt(n) / 2.0))
    return steps, blocks


def huber_tau(m2: float, eps_gd: float, n: int) -> float:
    """τ = √m₂ · √(ε_gd n / D), D = √((1 + ln n) ln n) (1 if not > 0); τ = 1 if not > 0."""
    ln = math.log(n)
    denom = math.sqrt((1.0 + ln) * ln) if ln > 0 else float("nan")
    if not (math.isfinite(denom) and denom > 0):
        denom = 1.0
    tau = math.sqrt(max(m2, 0.0)) * math.sqrt(eps_gd * n / denom)
    return tau if math.isfinite(tau) and tau > 0 else 1.0


def huber_scree(
    ctx: Context, control: HuberControl, budget: PrivacyBudget, comps: Sequence[int]
) -> Procedure:
    """Method "huber" (SPEC §5.3): private m₂ histogram, τ rule, T noisy gradient steps.

    The m₂ histogram adds Laplace(2/ε_m2,ℓ) per bin: one replaced row moves one block median from
    one bin to another, an L1 change of 2 under replace-one adjacency (the spec's 1/ε would be
    2ε-DP). Each step releases μ + η₀·mean(clip(w − μ, −τ, τ)) with Δ = 2η₀τ/n and
    (ε_gd,ℓ/T, δ_gd,ℓ/T); the m₂ share of δ is unused (the histogram is pure ε-DP), as in R.
    """
    n, k = ctx.n, ctx.k
    steps, blocks = huber_defaults(n, control)
    eps_m2, gd, step = huber_budgets(budget.scaled(1.0 / k), control, steps)
    counts = yield from ask(Request("m2", (ctx.center, control.k_min_m2, control.k_max_m2,
                                           pair_block_bounds(n, blocks))))
    tau = np.ones(k)
    mu = np.full(k, control.mu0)
    m2s = []
    for comp in comps:
        noisy = np.maximum(ctx.keep(laplace_release(
            counts[comp], sensitivity=2.0, eps=eps_m2, rng=ctx.rng, component="scree",
            label=f"huber PC{comp + 1}: m2 histogram")), 0.0)
        m2 = math.ldexp(1.0, control.k_min_m2 + int(np.argmax(noisy)))
        m2s.append(m2)
        tau[comp] = huber_tau(m2, gd.eps, n)
    for t in range(steps):
        sums = yield from ask(Request("huber", (ctx.center, mu.copy(), tau.copy())))
        for comp in comps:
            moved = mu[comp] + control.eta0 * (sums[comp] / n)
            mu[comp] = ctx.keep(gaussian_release(
                moved, sensitivity=2.0 * control.eta0 * tau[comp] / n, budget=step,
                calibration=ctx.calibration, rng=ctx.rng, component="scree",
                label=f"huber PC{comp + 1}: gradient step {t + 1}"))
    values = np.array([_factor(n) * max(mu[comp], 0.0) for comp in comps])
    return values, {"m2": m2s, "tau": tau[list(comps)].tolist(), "T": steps, "M": blocks}


PROCEDURES: dict[str, Callable[..., Procedure]] = {
    "clipped": clipped_scree, "pmwm": pmwm_scree, "huber": huber_scree}


# --- the plan: the records each procedure writes, from public quantities ------------------------


def center_records(budget: PrivacyBudget, calibration: str = "classical", *,
                   k: int) -> list[SpendRecord]:
    """The private centre's planned records (``budget``: the centre's share of the scree; the
    centre has one coordinate per component, ``k``)."""
    out: list[SpendRecord] = []
    for j, (eps_radius, gauss) in enumerate(center_budgets(budget), start=1):
        out += upper_records(eps_radius, component="scree", steps=RADIUS_STEPS,
                             label=f"centre round {j}: radius (Durfee upper quantile)")
        out.append(gaussian_record(component="scree", budget=gauss, calibration=calibration,
                                   draws=k, sensitivity=None,
                                   label=f"centre round {j}: ball-clipped mean"))
    return out


def method_records(method: str, n: int, k: int, control: Control, budget: PrivacyBudget,
                   calibration: str = "classical") -> list[SpendRecord]:
    """One method's planned records for k components (``budget``: the method's allocation),
    in the order the procedure writes them; built by the mechanisms' record builders with the
    splits the procedures use."""
    per = budget.scaled(1.0 / k)
    comps = range(1, k + 1)
    if isinstance(control, ClippedControl):
        return [gaussian_record(component="scree", budget=per, calibration=calibration, draws=1,
                                sensitivity=control.C_clip / (n - 1.0),
                                label=f"clipped PC{c}: clipped mean") for c in comps]
    if isinstance(control, PMWMControl):
        cut_eps, mean_budget = pmwm_budgets(per)
        return [*(r for c in comps for side in ("lower", "upper")
                  for r in signed_quantile_records(cut_eps, component="scree",
                                                   steps=DEFAULT_MAX_STEPS,
                                                   label=f"pmwm PC{c}: {side} cut-off")),
                *(gaussian_record(component="scree", budget=mean_budget, calibration=calibration,
                                  draws=1, sensitivity=None, label=f"pmwm PC{c}: winsorized mean")
                  for c in comps)]
    assert isinstance(control, HuberControl), method
    steps, _ = huber_defaults(n, control)
    eps_m2, _, step = huber_budgets(per, control, steps)
    bins = control.k_max_m2 - control.k_min_m2 + 1
    return ([laplace_record(component="scree", eps=eps_m2, draws=bins, sensitivity=2.0,
                            label=f"huber PC{c}: m2 histogram") for c in comps]
            + [gaussian_record(component="scree", budget=step, calibration=calibration, draws=1,
                               sensitivity=None, label=f"huber PC{c}: gradient step {t}")
               for t in range(1, steps + 1) for c in comps])
