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
* geometric (ĉ = max(Y − τ, 0), the projection onto counts summing to n_g): τ is monotone in Y
  and moves with a common shift, and τ(c) = 0 (c already sums to n_g), so |τ| ≤ t and
  ĉ_k > 0 gives c_k ∈ [ĉ_k − 2t, ĉ_k + 2t], ĉ_k = 0 gives c_k ≤ 2t.

The counts are recovered from the release: ĉ_k = probability × released_total (add, sparse:
the released mass) or × n_g (geometric), rounded to the integer they are. Every interval is
intersected with [0, n_g]; the probability interval is the count interval over n_g. They cover
the noise, not the sampling variability nor the frame's or directions' own noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dppca_dask._rformat import format_r_scalar
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import stability_histogram_parameters

__all__ = ["LEVEL", "count_intervals", "discrete_gaussian_quantile",
           "discrete_laplace_quantile", "histogram_interval_lines", "histogram_noise_half_width"]

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


def _quantile(method: str, record: Mapping[str, Any], cells: int, level: float) -> int:
    alpha = (1.0 - level) / cells
    if method == "add":
        return discrete_gaussian_quantile(float(record["scale"]), alpha)
    return discrete_laplace_quantile(float(record["scale"]), alpha)


def histogram_noise_half_width(method: str, record: Mapping[str, Any], cells: int,
                               level: float = LEVEL) -> int:
    """Half-width in counts of a released cell's interval (geometric: 2t, else t): what
    ``plan`` shows before any data is read."""
    t = _quantile(method, record, cells, level)
    return 2 * t if method == "geometric" else t


def count_intervals(method: str, probability: np.ndarray, total: float, n_g: int,
                    record: Mapping[str, Any], level: float = LEVEL
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper ends of the cell counts' intervals for one histogram (see the module)."""
    prob = np.asarray(probability, dtype=np.float64)
    cells = int(prob.size)
    t = _quantile(method, record, cells, level)
    released = np.rint(prob * (n_g if method == "geometric" else float(total)))
    if method == "geometric":
        lo, hi, empty = released - 2 * t, released + 2 * t, 2.0 * t
    elif method == "add":
        lo, hi, empty = released - t, released + t, float(t)
    else:
        budget = PrivacyBudget(float(record["eps"]), float(record["delta"]))
        threshold = round(stability_histogram_parameters(n_g, budget)[1] * n_g)
        lo, hi, empty = np.maximum(released - t, 1.0), released + t, float(threshold - 1 + t)
    lower = np.where(released > 0, lo, 0.0)
    upper = np.where(released > 0, hi, empty)
    return np.clip(lower, 0.0, n_g), np.clip(upper, 0.0, n_g)


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
