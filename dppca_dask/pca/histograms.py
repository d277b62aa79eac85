"""The grid, the bin-count pass and the private histograms of ``dp_score`` (docs/spec/SPEC_dppca.md §6.5–6.7).

* bins: ``(m_x, m_y)`` given, or the historical rule m = round((n/ln n)^{1/3}) on both axes from
  the public n ("J"; "W" is round(n^{1/4})); at most :func:`cell_limit` (n) cells -- 64 per
  observation, at least 65,536, at most 4,194,304 -- so that the driver's copies and the plots
  stay bounded (:func:`histogram_estimate` gives the memory and drawing time ``plan`` shows);
* breaks: ``linspace`` over the released frame; a value's bin is clamp(#{breaks < v}, 1, m), so
  points outside the frame fall into the edge bins;
* one Dask pass returns the (per-group) cell counts; all noise is drawn afterwards on the driver:
  "add" (:func:`~dppca_dask.privacy.mechanisms.gaussian_histogram`), "sparse"
  (:func:`~dppca_dask.privacy.mechanisms.stability_histogram`) and "geometric"
  (:func:`~dppca_dask.privacy.mechanisms.geometric_histogram`: pure ε, exact two-sided geometric
  noise, projected onto non-negative counts summing to the public n_g; δ unused), each with the full histogram allocation, group by group in level order, in the
  order add, sparse, geometric. Groups are disjoint, so the per-group releases compose in parallel:
  one ledger record per method covers all groups.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import dask.array as da
import numpy as np

from dppca_dask._validation import bad_param, count_check
from dppca_dask.errors import BudgetError, InputError
from dppca_dask.graph.groups import grouped_block_sum
from dppca_dask.graph.passes import row_block_sum
from dppca_dask.kernels.scores import bin_counts
from dppca_dask.pca.frame import Frame
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import (
    gaussian_histogram,
    geometric_histogram,
    stability_histogram,
)

__all__ = [
    "BIN_RULES",
    "HISTOGRAM_METHODS",
    "HistogramRelease",
    "bin_count_pass",
    "cell_limit",
    "default_bins",
    "frame_breaks",
    "histogram_estimate",
    "parse_bins",
    "parse_methods",
    "release_histograms",
]

HISTOGRAM_METHODS = ("add", "sparse", "geometric")
BIN_RULES = ("J", "W")
BINS_RULE = "a pair (m_x, m_y) of positive ints, one positive int, or None (the default rule)"


def default_bins(n: int, rule: str = "J") -> int:
    """The historical number-of-bins rule (SPEC §6.5) for public n ≥ 2.

    "J": round((n / ln n)^{1/3}); "W": round(n^{1/4}); round half to even; at least 1.

    Examples
    --------
    >>> [default_bins(n) for n in (100, 300, 1000, 5000, 32561)]
    [3, 4, 5, 8, 15]
    >>> [default_bins(n, "W") for n in (100, 300, 1000, 5000, 32561)]
    [3, 4, 6, 8, 13]
    """
    if rule == "J":
        value = (n / math.log(n)) ** (1.0 / 3.0)
    elif rule == "W":
        value = n ** 0.25
    else:
        raise bad_param("rule", "default_bins", "a str among {'J', 'W'}", rule)
    return max(1, round(value))


MAX_BINS = 4096
"""Largest number of bins per axis (16.7 M cells in all): guards memory, far past any plot."""

CELLS_PER_OBSERVATION = 64
"""A grid may have at most this many cells per observation (n is public) ..."""
MIN_CELL_LIMIT = 65_536
"""... but always at least this many (256 x 256) ..."""
MAX_CELLS = 4_194_304
"""... and never more than this many (2048 x 2048), whatever n: the driver holds several
float64 copies of the grid per group and method (:data:`BYTES_PER_CELL`) and the plots draw it."""
BYTES_PER_CELL = 96
"""Driver memory per cell, per group and per histogram (counts, noisy counts, probabilities,
sampling weights and the drawn image), measured on the stage and its figures."""
PLOT_SECONDS_PER_MCELL = 0.5
"""Drawing time of the histogram panels per million cells and panel (one image per panel),
measured at 150 dpi (two 2048 x 2048 panels: 3.2 s); a panel of :data:`MAX_CELLS` cells draws
in about 2 s, so the plots of the largest allowed grid stay within seconds per panel."""


def cell_limit(n: int) -> int:
    """The most cells a score grid may have for public n (see :data:`CELLS_PER_OBSERVATION`).

    Examples
    --------
    >>> cell_limit(5000), cell_limit(100), cell_limit(10**6)
    (320000, 65536, 4194304)
    """
    return min(max(CELLS_PER_OBSERVATION * int(n), MIN_CELL_LIMIT), MAX_CELLS)


def histogram_estimate(bins: tuple[int, int], *, groups: int = 1, methods: int = 1
                       ) -> tuple[float, float]:
    """(driver bytes, plotting seconds) of the histogram and plot stages for ``bins``.

    Examples
    --------
    >>> mem, secs = histogram_estimate((100, 100), groups=2, methods=1)
    >>> int(mem), round(secs, 3)
    (3360000, 1.015)
    """
    cells = bins[0] * bins[1]
    panels = max(groups, 1) * max(methods, 1)
    memory = float(cells * BYTES_PER_CELL * (max(groups, 1) + 1) * max(methods, 1) + cells * 48)
    return memory, 1.0 + PLOT_SECONDS_PER_MCELL * cells / 1e6 * (panels + 1)


def parse_bins(bins: Any, n: int, owner: str) -> tuple[int, int]:
    """``(m_x, m_y)`` from ``bins``: None → the "J" rule on both axes; an int → both axes.

    A grid of more than :func:`cell_limit` (n) cells is refused with the memory and drawing-time
    estimate (``dppca-dask plan`` calls this with the input's public n). ``n <= 2`` checks the
    form only (the estimators call it so before n is known, then again with n)."""
    count_check("parse_bins", owner, "bins")
    if bins is None:
        m = default_bins(n)
        return m, m
    if isinstance(bins, str | bool | np.bool_):
        raise bad_param("bins", owner, BINS_RULE, bins)
    values = [bins] if np.ndim(bins) == 0 else list(np.asarray(bins, dtype=object).ravel())
    if np.ndim(bins) > 1 or len(values) not in (1, 2):
        raise bad_param("bins", owner, BINS_RULE, bins)
    parsed = []
    for v in values:
        ok = isinstance(v, int | np.integer | float | np.floating) and not isinstance(
            v, bool | np.bool_)
        if not ok or not math.isfinite(float(v)) or not float(v).is_integer() or v < 1:
            raise bad_param("bins", owner, BINS_RULE, bins)
        if v > MAX_BINS:
            raise bad_param("bins", owner, f"{BINS_RULE} (at most {MAX_BINS} per axis)", bins)
        parsed.append(int(v))
    out = (parsed[0], parsed[0]) if len(parsed) == 1 else (parsed[0], parsed[1])
    if n > 2:  # n <= 2: the form only (the options object's check before n is known)
        check_cells(out, n, owner, bins)
    return out


def check_cells(out: tuple[int, int], n: int, owner: str, bins: Any = None) -> None:
    """A parsed grid ``out`` against :func:`cell_limit` (n) (``bins``: as the user gave it)."""
    count_check("check_cells", owner, "bins")
    bins = out if bins is None else bins
    cells, limit = out[0] * out[1], cell_limit(n)
    if cells > limit:
        memory, seconds = histogram_estimate(out)
        raise bad_param("bins", owner, f"a grid of at most {limit:,} cells for n = {n:,} "
                        f"({CELLS_PER_OBSERVATION} per observation, at least {MIN_CELL_LIMIT:,}, "
                        f"at most {MAX_CELLS:,}); {out[0]} x {out[1]} = {cells:,} cells would "
                        f"hold about {memory / 2**20:,.0f} MiB on the driver per histogram and "
                        f"take about {seconds:,.0f} s to draw", bins)


def frame_breaks(frame: Frame, bins: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``linspace`` breaks over the frame: m_x + 1 on x, m_y + 1 on y."""
    return (np.linspace(*frame.xlim, bins[0] + 1), np.linspace(*frame.ylim, bins[1] + 1))


def bin_count_pass(
    x: da.Array,
    directions: np.ndarray,
    x_breaks: np.ndarray,
    y_breaks: np.ndarray,
    codes: np.ndarray | None = None,
    n_groups: int = 0,
) -> Any:
    """Lazy cell counts, shape (max(n_groups, 1), m_y, m_x) (a Dask delayed; compute it once).

    With groups, the 0-based codes travel as an extra last column chunked like the rows of ``x``.
    """
    if codes is None or n_groups == 0:
        return row_block_sum(x, bin_counts, directions, x_breaks, y_breaks, 0,
                             name="score-bin-counts")
    labels = da.from_array(np.asarray(codes, dtype=np.float64)[:, None],
                           chunks=(x.chunks[0], (1,)))
    augmented = da.concatenate([x, labels], axis=1)
    return row_block_sum(augmented, bin_counts, directions, x_breaks, y_breaks, n_groups,
                         name="score-bin-counts")


def _coded_bin_counts(block: np.ndarray, codes: np.ndarray, n_groups: int,
                      directions: np.ndarray, x_breaks: np.ndarray,
                      y_breaks: np.ndarray) -> np.ndarray:
    coded = np.column_stack([np.asarray(block, dtype=np.float64), codes.astype(np.float64)])
    return bin_counts(coded, directions, x_breaks, y_breaks, n_groups)


def grouped_bin_count_pass(x: da.Array, labels: da.Array, directions: np.ndarray,
                           x_breaks: np.ndarray, y_breaks: np.ndarray, owner: str) -> Any:
    """Lazy ``{level: cell counts (m_y, m_x)}`` for lazy group labels: each row-block task reads
    its own labels (:func:`~dppca_dask.graph.groups.grouped_block_sum`), nothing of length n is
    gathered; the levels and the group sizes come out of the same pass."""
    return grouped_block_sum(x, labels, _coded_bin_counts, directions, x_breaks, y_breaks,
                             owner=owner, name="score-bin-counts")


@dataclass(frozen=True)
class HistogramRelease:
    """Released probabilities (method, group, m_y, m_x), released totals and records."""

    methods: tuple[str, ...]
    probability: np.ndarray
    total: np.ndarray  # (method, group): Σĉ (add; geometric: the public n_g) or n_g·Σq (sparse)
    records: tuple[SpendRecord, ...]


def _parallel(records: Sequence[SpendRecord], groups: int) -> SpendRecord:
    """One record for a method run on ``groups`` disjoint groups (parallel composition)."""
    first = records[0]
    if groups <= 1:
        return first
    return replace(
        first, draws=sum(r.draws for r in records),
        note=f"{first.note}; {groups} disjoint groups, parallel composition "
             "(each group gets the full allocation)",
    )


def release_histograms(
    counts: np.ndarray,
    sizes: np.ndarray,
    *,
    methods: Sequence[str],
    budget: PrivacyBudget,
    calibration: str,
    rng: Any,
    levels: Sequence[str] | None = None,
) -> HistogramRelease:
    """Run "add", "sparse" and/or "geometric" on each group's counts (G, m_y, m_x) in level
    order (SPEC §6.6–6.7; geometric: docs/design/histogram_mechanisms.md).

    ``sizes`` are the group sizes n_g (the sparse scale and threshold use them). Raises
    :class:`BudgetError` when an add or geometric histogram is all zero after noise and
    clipping; an all-zero sparse histogram is released as zeros (sampling it warns). The
    geometric histogram spends ``budget.eps`` only (pure ε-DP); its noisy counts are projected
    onto non-negative counts summing to the public n_g (post-processing).
    """
    counts = np.asarray(counts)
    groups = counts.shape[0]
    methods = tuple(m for m in HISTOGRAM_METHODS if m in methods)
    prob = np.zeros((len(methods), *counts.shape), dtype=np.float64)
    total = np.zeros((len(methods), groups), dtype=np.float64)
    per_method: dict[str, list[SpendRecord]] = {m: [] for m in methods}
    for g in range(groups):
        n_g = int(sizes[g])
        prefix = f"Group {levels[g]!r}: " if levels is not None else ""
        if n_g < 1:
            raise InputError(f"{prefix}Each histogram must contain at least one observation.")
        for i, method in enumerate(methods):
            if method in ("add", "geometric"):
                if method == "add":
                    rel = gaussian_histogram(counts[g], budget=budget, calibration=calibration,
                                             rng=rng, component="score", label="add histogram")
                else:
                    rel = geometric_histogram(counts[g], eps=budget.eps, rng=rng,
                                              component="score", label="geometric histogram",
                                              total=n_g)
                mass = float(rel.value.sum())
                if not mass > 0:
                    noise = "Gaussian" if method == "add" else "geometric"
                    raise BudgetError(
                        f"{prefix}all privatized bin counts are zero after {noise} noise and "
                        "clipping. Try a larger `eps` or fewer bins.")
                total[i, g] = mass
                prob[i, g] = rel.value / mass
            else:
                rel = stability_histogram(counts[g], n=n_g, budget=budget, rng=rng,
                                          component="score", label="sparse histogram")
                mass = float(rel.value.sum())
                total[i, g] = mass * n_g
                prob[i, g] = rel.value / mass if mass > 0 else 0.0
            per_method[method].append(rel.record)
    records = tuple(_parallel(per_method[m], groups) for m in methods)
    return HistogramRelease(methods, prob, total, records)


def parse_methods(method: Any, owner: str) -> tuple[str, ...]:
    """Histogram methods, a str or a sequence drawn from {"add", "sparse", "geometric"}
    (canonical order)."""
    count_check("parse_score_methods", owner, "method")
    rule = "a str or a non-empty sequence of str among {'add', 'sparse', 'geometric'}"
    items = [method] if isinstance(method, str) else method
    if not isinstance(items, Sequence | np.ndarray) or isinstance(items, bytes) or len(items) == 0:
        raise bad_param("method", owner, rule, method)
    for m in items:
        if not isinstance(m, str) or m not in HISTOGRAM_METHODS:
            raise bad_param("method", owner, rule, method)
    if len(set(items)) != len(items):
        raise bad_param("method", owner, "a sequence of distinct method names (each at most once)",
                        method)
    return tuple(m for m in HISTOGRAM_METHODS if m in items)

