"""The tasks a run config can name, and how the runner plans and fits each of them.

Each :class:`TaskSpec` says which fitting function's budget rules apply (``owner``), how to
describe the noise and the work from public quantities only (for ``dppca-dask plan``), and how to
fit on a validated data source. The runner is generic over this table; adding a task means adding
a config section (:mod:`dppca_dask.pipeline.config`) and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dppca_dask.graph.kendall_layout import kendall_layout
from dppca_dask.io.data import DataSource, SourceInfo
from dppca_dask.pca.loading import fit_loading, loading_plan_of
from dppca_dask.pca.options import LoadingOptions, Setup
from dppca_dask.pca.pca import fit_pca, pca_plan_of
from dppca_dask.pca.score import fit_score, score_plan_of
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.tasks.covariance import (
    covariance_fit,
    covariance_noise,
    covariance_outputs,
    covariance_plan,
    covariance_setup,
    covariance_work,
)
from dppca_dask.pipeline.tasks.pca import pca_noise, pca_outputs, pca_setup, pca_source, pca_work
from dppca_dask.pipeline.tasks.score import (
    score_noise,
    score_outputs,
    score_setup,
    score_source,
    score_work,
)
from dppca_dask.pipeline.tasks.scree import (
    scree_fit,
    scree_noise,
    scree_outputs,
    scree_plan,
    scree_setup,
    scree_work,
)
from dppca_dask.pipeline.tasks.wording import loading_line
from dppca_dask.privacy.budget import BudgetPlan
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState
from dppca_dask.results.base import Result

__all__ = ["TASKS", "TaskSpec", "mib"]


def mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.1f} MiB"


@dataclass(frozen=True)
class TaskSpec:
    """How the runner handles one task.

    ``setup`` parses the config's options ONCE into the estimator's frozen options object and
    binds it to the input's public shape (:class:`~dppca_dask.pca.options.Setup`); every other
    entry reads that object and checks nothing again.
    """

    owner: str
    setup: Callable[[RunConfig, SourceInfo, BudgetPlan], Any]
    noise_plan: Callable[[RunConfig, Any, BudgetPlan, Plan], list[str]]
    """How the noise is set, in words, with the numbers of the release's planned records."""
    work_plan: Callable[[RunConfig, SourceInfo, Any, Plan], list[str]]
    """The work in words; the number of passes is the plan's."""
    fit: Callable[[DataSource, BudgetPlan, Any, RngState], Result]
    """``fit(source, budget, setup, rng_state)``: the estimator's fit on the bound options."""
    plan: Callable[[Any, BudgetPlan], Plan]
    """The release's plan as data (:class:`~dppca_dask.privacy.plan.Plan`): the estimator's
    planning function on the bound options; the persistent ledger reserves its total."""
    source_options: Callable[[RunConfig], dict[str, Any]] = lambda cfg: {}
    write_outputs: Callable[[RunConfig, Result, Path, RngState], None] | None = None
    """Task-specific extra outputs written into the run directory after the release (samples,
    figures): post-processing of the result only; gets the run's generator after the fit."""


def _loading_setup(cfg: RunConfig, src: SourceInfo, budget: BudgetPlan) -> Setup:
    o = cfg.loading
    return LoadingOptions.parse(
        "dp_loading", cpp_option=o.cpp_option, non_private=o.non_private,
        calibration=o.calibration, sensitivity=o.sensitivity, pairs=o.pairs,
        pair_block=o.pair_block, block_rows=o.block_rows).bind(src.n, src.p)


def _loading_noise(cfg: RunConfig, setup: Setup, budget: BudgetPlan,
                   release: Plan) -> list[str]:
    return [loading_line(release, setup.options.calibration)]


def _loading_work(cfg: RunConfig, src: SourceInfo, setup: Setup, release: Plan) -> list[str]:
    options = setup.options
    layout = kendall_layout(src.n, src.p, block_rows=options.block_rows, pairs=setup.pairs,
                            pair_block=options.pair_block)
    what = ("all pairs" if setup.pairs == "all" else
            f"pairs within {layout.n_blocks} groups of <= {options.pair_block} consecutive rows")
    return [
        f"Work (Kendall pass, {what}; {setup.pairs_why}):",
        f"  {layout.n_pairs:,} pairs in {layout.n_tiles:,} tiles of row blocks "
        f"({layout.n_blocks} blocks of <= {max(layout.block_sizes)} rows)",
        f"  {len(layout.units):,} work units, {layout.n_tasks:,} tasks, "
        f"reduction fan-in {layout.split_every}",
        f"  memory: about {mib(layout.worker_memory_estimate(options.cpp_option))} per "
        "running work unit; the driver holds one p x p matrix",
    ]


def _loading_outputs(cfg: RunConfig, result: Result, base: Path, state: RngState) -> None:
    """``loading.png``: vectors, points and heatmap of the released directions."""
    result.plot().save(str(base / "loading.png"))


TASKS: dict[str, TaskSpec] = {
    "loading": TaskSpec("dp_loading", _loading_setup, _loading_noise, _loading_work, fit_loading,
                        loading_plan_of, write_outputs=_loading_outputs),
    "scree": TaskSpec("dp_scree", scree_setup, scree_noise, scree_work, scree_fit,
                      scree_plan, write_outputs=scree_outputs),
    "score": TaskSpec("dp_score", score_setup, score_noise, score_work, fit_score,
                      score_plan_of, source_options=score_source, write_outputs=score_outputs),
    "pca": TaskSpec("dp_pca", pca_setup, pca_noise, pca_work, fit_pca, pca_plan_of,
                    source_options=pca_source, write_outputs=pca_outputs),
    "covariance": TaskSpec("dp_covariance", covariance_setup, covariance_noise,
                           covariance_work, covariance_fit, covariance_plan,
                           write_outputs=covariance_outputs),
}
