"""Intervals of the score histograms' cells, from the release (``probability``,
``released_total``), the public group sizes and the mechanisms' public noise laws only --
post-processing, no budget (issue 33; docs/intervals.md).

The noise-free statistic of a cell is its count c_k on the released grid (the released frame
and directions fixed) and its probability c_k/n_g (n_g public: the total, or the group size).
Each mechanism's noisy integer count Y_k = c_k + Z_k has a known law: "add" a discrete Gaussian
(the record's σ), "sparse" and "geometric" a discrete Laplace of scale b (P(z) ∝ e^{−|z|/b}).
With t the exact integer quantile of |Z| at α/K (Bonferroni over the K cells of one
histogram), every |Z_k| ≤ t at once with probability ≥ 1 − α, and on that event:

* add (released ĉ_k = max(Y_k, 0)): ĉ_k > 0 gives c_k ∈ [ĉ_k − t, ĉ_k + t]; ĉ_k = 0 (Y_k ≤ 0)
  gives c_k ≤ t;
* sparse (released c̃_k = Y_k where c_k > 0 and Y_k ≥ T, else 0): a released cell gives
  [c̃_k − t, c̃_k + t], a cell released as 0 gives c_k ≤ T − 1 + t;
* geometric (ĉ = max(Y − τ, 0), the projection onto counts summing to n_g, one τ for all
  cells): with S the m cells released > 0 and r = K − m the others, Σ_S (c_k + Z_k − τ) = n_g
  = Σ c_k gives mτ = Σ_S Z_k − Σ_{S^c} c_k, and c_k ≤ τ − Z_k off S. Hence Kτ ≥ Σ_k Z_k and
  mτ ≤ Σ_k Z_k + Σ_{S^c} max(−Z_k, 0): on the event {every |Z_k| ≤ t, |Σ_k Z_k| ≤ u,
  W = Σ_k max(−Z_k, 0) ≤ w} (α split 0.9 / 0.05 / 0.05; u and w by Chernoff bounds on sums of
  K independent draws of known law), τ ∈ [−u/K, min(t, (u + min(w, r·t))/m)] (τ is monotone
  in Y, moves with a common shift and is 0 at Y = c, so |τ| ≤ t too), and ĉ_k > 0 gives c_k ∈
  [ĉ_k + τ_lo − t, ĉ_k + τ_hi + t], ĉ_k = 0 gives c_k ≤ τ_hi + t. When few cells are
  released as 0 this is about ±t, not the ±2t of |τ| ≤ t alone.

The counts are recovered from the release: ĉ_k = probability × released_total (add, sparse:
the released mass, integers) or × n_g (geometric: ĉ is not an integer, as τ is not). Every
interval is intersected with [0, n_g] and rounded inwards to integers (the counts are
integers); the probability interval is the count interval over n_g. They cover the noise, not
the sampling variability nor the frame's or directions' own noise.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dppca_dask._rformat import format_r_scalar
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import stability_histogram_parameters

__all__ = ["GEOMETRIC_SPLIT", "LEVEL", "count_intervals", "discrete_gaussian_quantile",
           "discrete_laplace_quantile", "geometric_sum_bounds", "histogram_interval_lines",
           "histogram_noise_half_width", "noise_quantile"]

LEVEL = 0.95
"""Level of the cell intervals, simultaneous over the cells of one histogram."""

MECHANISMS = {"add": "gaussian_histogram", "sparse": "stability_histogram",
              "geometric": "geometric_histogram"}


def discrete_gaussian_quantile(sigma: float, alpha: float) -> int:
    """The least integer t with P(|Y| > t) ≤ ``alpha`` for Y ~ N_Z(0, σ²) (pmf ∝ e^{−y²/2σ²}).

    >>> discrete_gaussian_quantile(10.0, 0.05), discrete_gaussian_quantile(1e6, 0.05)
    (20, 1959964)
    """
    if sigma > 1e5:  # the lattice is negligible: the continuous quantile, rounded up
        from scipy.stats import norm
        return math.ceil(float(norm.isf(alpha / 2.0)) * sigma)
    top = math.ceil(sigma * 40.0) + 2
    y = np.arange(top + 1, dtype=np.float64)
    w = np.exp(-y ** 2 / (2.0 * sigma ** 2))
    mass = w[0] + 2.0 * w[1:].sum()
    tail = 2.0 * (w.sum() - np.cumsum(w)) / mass  # P(|Y| > t) for t = 0..top
    return int(np.flatnonzero(tail <= alpha)[0])


def discrete_laplace_quantile(scale: float, alpha: float) -> int:
    """The least integer t with P(|Z| > t) = 2q^{t+1}/(1 + q) ≤ ``alpha``, q = e^{−1/b}.

    >>> discrete_laplace_quantile(2.0, 0.05)
    6
    """
    q = math.exp(-1.0 / scale)
    if 2.0 * q / (1.0 + q) <= alpha:  # includes q = 0 (a vanishing scale at huge eps)
        return 0
    t = max(0, math.ceil(math.log(alpha * (1.0 + q) / 2.0) / math.log(q) - 1.0 - 1e-9))
    while 2.0 * q ** (t + 1) / (1.0 + q) > alpha:
        t += 1
    while t > 0 and 2.0 * q ** t / (1.0 + q) <= alpha:
        t -= 1
    return t


GEOMETRIC_SPLIT = (0.9, 0.05, 0.05)
"""The geometric histogram's α: the cells' |Z_k| ≤ t, the sum |Σ Z_k| ≤ u, W ≤ w."""


def noise_quantile(method: str, record: Mapping[str, Any], cells: int, level: float = LEVEL
                   ) -> int:
    """t: every |Z_k| of one histogram's K = ``cells`` draws is at most t at once with
    probability ≥ ``level`` (the geometric's share of α: :data:`GEOMETRIC_SPLIT`)."""
    alpha = (1.0 - level) / cells
    if method == "add":
        return discrete_gaussian_quantile(float(record["scale"]), alpha)
    if method == "geometric":
        alpha *= GEOMETRIC_SPLIT[0]
    return discrete_laplace_quantile(float(record["scale"]), alpha)


def _chernoff(log_mgf: Any, cells: int, alpha: float, s_max: float, start: float) -> float:
    """The least x with inf_s exp(cells·log_mgf(s) − s·x) ≤ alpha (bisection over x; the
    infimum over s in (0, s_max) by a bounded scalar search): P(sum ≥ x) ≤ alpha."""
    from scipy.optimize import minimize_scalar

    def bound(x: float) -> float:
        res = minimize_scalar(lambda s: cells * log_mgf(s) - s * x,
                              bounds=(1e-12, s_max * (1 - 1e-9)), method="bounded",
                              options={"xatol": 1e-10 * s_max})
        return float(res.fun)

    target = math.log(alpha)
    lo, hi = start, max(start, 1.0) * 2.0
    while bound(hi) > target:
        lo, hi = hi, hi * 2.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if bound(mid) <= target else (mid, hi)
    return hi


@functools.lru_cache(maxsize=64)
def geometric_sum_bounds(scale: float, cells: int, level: float = LEVEL
                         ) -> tuple[float, float]:
    """``(u, w)`` for K = ``cells`` discrete Laplace draws of scale b: |Σ Z_k| ≤ u with
    probability ≥ 1 − α·0.05 and Σ max(−Z_k, 0) ≤ w with probability ≥ 1 − α·0.05 (Chernoff,
    with the exact moment generating functions; α = 1 − ``level``).

    >>> u, w = geometric_sum_bounds(4.0, 100)
    >>> round(u), round(w), geometric_sum_bounds(1e-4, 100)
    (210, 337, (0.0, 0.0))
    """
    q = math.exp(-1.0 / scale)
    if q < 1e-300:  # a vanishing scale (huge eps): the noise is 0 but with probability < 1e-300
        return 0.0, 0.0
    alpha = 1.0 - level
    s_max = 1.0 / scale  # both MGFs are finite for s < 1/b

    def sum_mgf(s: float) -> float:
        return (2.0 * math.log1p(-q) - math.log1p(-q * math.exp(s))
                - math.log1p(-q * math.exp(-s)))

    def tail_mgf(s: float) -> float:
        e = q * math.exp(s)
        return math.log(1.0 / (1.0 + q) + (1.0 - q) / (1.0 + q) * e / (1.0 - e))

    u = _chernoff(sum_mgf, cells, GEOMETRIC_SPLIT[1] * alpha / 2.0, s_max, 0.0)
    mean_tail = cells * q / (1.0 - q * q)  # E max(−Z, 0) = q/((1 − q)(1 + q))
    w = _chernoff(tail_mgf, cells, GEOMETRIC_SPLIT[2] * alpha, s_max, mean_tail)
    return u, w


def histogram_noise_half_width(method: str, record: Mapping[str, Any], cells: int,
                               level: float = LEVEL) -> float:
    """Half-width in counts of a released cell's interval when every cell is released above 0
    (geometric: t + (u + τ's side)/2, about t; else t): what ``plan`` shows before any data is
    read."""
    t = noise_quantile(method, record, cells, level)
    if method != "geometric":
        return float(t)
    u, _ = geometric_sum_bounds(float(record["scale"]), cells, level)
    tau_lo, tau_hi = -u / cells, min(float(t), u / cells)
    return float(t) + 0.5 * (tau_hi - tau_lo)


def count_intervals(method: str, probability: np.ndarray, total: float, n_g: int,
                    record: Mapping[str, Any], level: float = LEVEL
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper ends of the cell counts' intervals for one histogram (see the module)."""
    prob = np.asarray(probability, dtype=np.float64)
    cells = int(prob.size)
    t = noise_quantile(method, record, cells, level)
    if method == "geometric":
        released = prob * n_g
        positive = released > 1e-9
        m = int(np.count_nonzero(positive))
        u, w = geometric_sum_bounds(float(record["scale"]), cells, level)
        tau_lo = max(-float(t), -u / cells)
        tau_hi = min(float(t), (u + min(w, (cells - m) * float(t))) / max(m, 1))
        lo, hi, empty = released + tau_lo - t, released + tau_hi + t, tau_hi + t
    else:
        released = np.rint(prob * float(total))
        positive = released > 0
        if method == "add":
            lo, hi, empty = released - t, released + t, float(t)
        else:
            budget = PrivacyBudget(float(record["eps"]), float(record["delta"]))
            threshold = round(stability_histogram_parameters(n_g, budget)[1] * n_g)
            lo, hi, empty = np.maximum(released - t, 1.0), released + t, float(threshold - 1 + t)
    lower = np.where(positive, lo, 0.0)
    upper = np.where(positive, hi, empty)
    lower = np.ceil(np.clip(lower, 0.0, n_g) - 1e-6)  # integer counts: round inwards
    upper = np.floor(np.clip(upper, 0.0, n_g) + 1e-6)
    return lower, upper


def histogram_interval_variables(methods: Sequence[str], prob: np.ndarray, total: np.ndarray,
                                 sizes: np.ndarray, ledger: Sequence[Mapping[str, Any]],
                                 dims: tuple[str, ...], level: float = LEVEL) -> dict[str, Any]:
    """``count_lower``/``count_upper`` and ``probability_lower``/``probability_upper`` with the
    dims of ``probability`` (``prob`` is (method, group, m_y, m_x); ``dims`` drop the group
    dimension of an ungrouped fit)."""
    records = {r.get("mechanism"): r for r in ledger}
    lower, upper = np.full(prob.shape, np.nan), np.full(prob.shape, np.nan)
    for i, method in enumerate(methods):
        record = records.get(MECHANISMS[method])
        if record is None or record.get("scale") is None:
            continue
        for g in range(prob.shape[1]):
            lower[i, g], upper[i, g] = count_intervals(method, prob[i, g], float(total[i, g]),
                                                       int(sizes[g]), record, level)
    grouped = "group" in dims
    n_g = np.asarray(sizes, dtype=np.float64)[None, :, None, None]
    out: dict[str, Any] = {}
    what = (f"{100 * level:g}% interval (simultaneous over the cells of each histogram) of the "
            "noise-free cell {stat} on the released grid: it covers the noise, not the sampling "
            "variability")
    for name, values, stat in (("count_lower", lower, "count"), ("count_upper", upper, "count"),
                               ("probability_lower", lower / n_g, "probability"),
                               ("probability_upper", upper / n_g, "probability")):
        side = "lower" if name.endswith("lower") else "upper"
        out[name] = (dims, values if grouped else values[:, 0],
                     {"private": 1, "interval_level": level,
                      "description": f"{side} end of the " + what.format(stat=stat)})
    return out


def histogram_interval_lines(methods: Sequence[str], lower: np.ndarray, upper: np.ndarray,
                             sizes: Sequence[int], levels: Sequence[str | None],
                             level: float = LEVEL) -> list[str]:
    """The summary's lines: per histogram the probability half-width of a released cell and
    the cells distinguishable from empty (interval above 0)."""
    def num(v: float) -> str:
        return format_r_scalar(float(f"{v:.3g}"))

    lines = [f"{100 * level:g}% intervals of the noise-free cell probabilities (simultaneous "
             "over the cells; they cover the noise, not the sampling variability; "
             ".probability_lower/.probability_upper):"]
    for i, method in enumerate(methods):
        for g, name in enumerate(levels):
            lo, hi = lower[i, g], upper[i, g]
            if np.isnan(lo).all():
                continue
            where = f", group {name}" if name is not None else ""
            width = float(np.max(hi - lo)) / 2.0 / float(sizes[g])
            above = int(np.count_nonzero(lo > 0))
            lines.append(f"  {method}{where}: half-width up to {num(width)}; {above} of {lo.size} "
                         f"cells distinguishable from empty, {lo.size - above} indistinguishable "
                         "from noise (interval reaches 0)")
    return lines
