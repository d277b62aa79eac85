"""The tasks a run config can name, and how the runner plans and fits each of them.

Each :class:`TaskSpec` says which fitting function's budget rules apply (``owner``), how to
describe the noise and the work from public quantities only (for ``dppca-dask plan``), and how to
fit on a validated data source. The runner is generic over this table; adding a task means adding
a config section (:mod:`dppca_dask.pipeline.config`) and one entry here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dppca_dask._rformat import format_r_scalar
from dppca_dask.graph.compute import kendall_layout
from dppca_dask.io.data import DataSource, SourceInfo
from dppca_dask.pca.loading import _fit_loading, kendall_sensitivity
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.tasks.covariance import covariance_fit, covariance_noise, covariance_work
from dppca_dask.pipeline.tasks.pca import (
    pca_fit,
    pca_noise,
    pca_outputs,
    pca_source,
    pca_spend,
    pca_work,
)
from dppca_dask.pipeline.tasks.score import (
    score_fit,
    score_noise,
    score_outputs,
    score_source,
    score_spend,
    score_work,
)
from dppca_dask.pipeline.tasks.scree import (
    scree_fit,
    scree_noise,
    scree_outputs,
    scree_spend,
    scree_work,
)
from dppca_dask.privacy.budget import BudgetPlan, PrivacyBudget
from dppca_dask.privacy.mechanisms import symmetric_noise_sigma
from dppca_dask.results.base import Result
from dppca_dask.rng import RngState

__all__ = ["TASKS", "TaskSpec", "mib", "spent_allocations"]


def mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.1f} MiB"


@dataclass(frozen=True)
class TaskSpec:
    """How the runner handles one task."""

    owner: str
    noise_plan: Callable[[RunConfig, SourceInfo, BudgetPlan], list[str]]
    work_plan: Callable[[RunConfig, SourceInfo], list[str]]
    fit: Callable[[RunConfig, DataSource, BudgetPlan, RngState], Result]
    source_options: Callable[[RunConfig], dict[str, Any]] = lambda cfg: {}
    planned_spend: Callable[[RunConfig, BudgetPlan], PrivacyBudget] = (
        lambda cfg, plan: spent_allocations(plan)
    )
    """What the release will cost under basic composition (for the persistent ledger's cap
    check); override when one allocation is spent several times (e.g. several methods)."""
    write_outputs: Callable[[RunConfig, Result, Path, RngState], None] | None = None
    """Task-specific extra outputs written into the run directory after the release (samples,
    figures): post-processing of the result only; gets the run's generator after the fit."""


def spent_allocations(plan: BudgetPlan) -> PrivacyBudget:
    """Sum of the allocations this fit spends (prior releases excluded)."""
    spent = [b for name, b in plan.allocations if name not in plan.prior]
    return PrivacyBudget(math.fsum(b.eps for b in spent), math.fsum(b.delta for b in spent))


def _loading_noise(cfg: RunConfig, src: SourceInfo, budget: BudgetPlan) -> list[str]:
    spend = budget.spend("loading")
    opts = cfg.loading
    sensitivity = kendall_sensitivity(src.n, pairs=opts.pairs, pair_block=opts.pair_block,
                                      bound=opts.sensitivity)
    sigma = symmetric_noise_sigma(sensitivity, spend, cfg.loading.calibration,
                                  dimension=src.p * (src.p + 1) // 2)
    return [
        f"  loading: eps = {format_r_scalar(spend.eps)} ; delta = {format_r_scalar(spend.delta)}"
        f" -> gaussian_symmetric_matrix, Frobenius sensitivity {format_r_scalar(sensitivity)}, "
        f"noise sd {format_r_scalar(sigma)} ({cfg.loading.calibration})"
    ]


def _loading_work(cfg: RunConfig, src: SourceInfo) -> list[str]:
    opts = cfg.loading
    layout = kendall_layout(src.n, src.p, block_rows=opts.block_rows, pairs=opts.pairs,
                            pair_block=opts.pair_block)
    mode = ("all pairs" if opts.pairs == "all" else
            f"pairs within {layout.n_blocks} groups of <= {opts.pair_block} consecutive rows")
    return [
        f"Work (Kendall pass, {mode}):",
        f"  {layout.n_pairs:,} pairs in {layout.n_tiles:,} tiles of row blocks "
        f"({layout.n_blocks} blocks of <= {max(layout.block_sizes)} rows)",
        f"  {len(layout.units):,} work units, {layout.n_tasks:,} tasks, "
        f"reduction fan-in {layout.split_every}",
        f"  memory: about {mib(layout.worker_memory_estimate(cfg.loading.cpp_option))} per "
        "running work unit; the driver holds one p x p matrix",
    ]


def _loading_fit(
    cfg: RunConfig, source: DataSource, budget: BudgetPlan, state: RngState
) -> Result:
    opts = cfg.loading
    return _fit_loading(
        source, budget, calibration=opts.calibration, cpp_option=opts.cpp_option,
        non_private=opts.non_private, rng_state=state, block_rows=opts.block_rows,
        pairs=opts.pairs, pair_block=opts.pair_block, sensitivity=opts.sensitivity,
    )


def _loading_outputs(cfg: RunConfig, result: Result, base: Path, state: RngState) -> None:
    """``loading.png``: vectors, points and heatmap of the released directions."""
    result.plot().save(str(base / "loading.png"))  # type: ignore[attr-defined]


TASKS: dict[str, TaskSpec] = {
    "loading": TaskSpec("dp_loading", _loading_noise, _loading_work, _loading_fit,
                        write_outputs=_loading_outputs),
    "scree": TaskSpec("dp_scree", scree_noise, scree_work, scree_fit, planned_spend=scree_spend,
                      write_outputs=scree_outputs),
    "score": TaskSpec("dp_score", score_noise, score_work, score_fit, source_options=score_source,
                      planned_spend=score_spend, write_outputs=score_outputs),
    "pca": TaskSpec("dp_pca", pca_noise, pca_work, pca_fit, source_options=pca_source,
                    planned_spend=pca_spend, write_outputs=pca_outputs),
    "covariance": TaskSpec("dp_covariance", covariance_noise, covariance_work, covariance_fit),
}
