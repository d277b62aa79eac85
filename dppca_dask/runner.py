"""Config-driven runs: ``plan`` (metadata only) and ``execute`` (one release, written atomically).

Order of a run, each step refusing bad input before the next costs anything:

1. the config is validated (:mod:`dppca_dask.config`);
2. the output location is checked (no overwrite unless asked);
3. the budget is resolved and the noise planned from public quantities (n, p, ε, δ);
4. the input's metadata is read (shape, names; never values);
5. the cluster is opened, the data pass runs once, noise is drawn once on the driver;
6. every output is written into a temporary directory that is renamed into place at the end,
   so a failed run leaves nothing at the final path.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dppca_dask._rformat import format_r_scalar
from dppca_dask.budget import BudgetPlan, resolve_budget
from dppca_dask.cluster import connect, describe_cluster
from dppca_dask.config import RunConfig, dump_config
from dppca_dask.data import SourceInfo, as_data, describe_source
from dppca_dask.errors import OutputExistsError
from dppca_dask.kernels.graph import KendallLayout, kendall_layout
from dppca_dask.loading import _fit_loading, kendall_sensitivity
from dppca_dask.mechanisms import symmetric_noise_sigma
from dppca_dask.results import Result, write_atomically
from dppca_dask.rng import as_rng

__all__ = ["RunOutcome", "RunPlan", "execute", "plan_run"]

OWNERS = {"loading": "dp_loading"}


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.1f} MiB"


@dataclass(frozen=True)
class RunPlan:
    """What a run would do, derived from the config and the input's metadata only."""

    config: RunConfig
    source: SourceInfo
    budget: BudgetPlan
    noise: tuple[dict[str, Any], ...]
    layout: KendallLayout

    def render(self) -> str:
        cfg, src, layout = self.config, self.source, self.layout
        total = self.budget.total
        split = "implicit equal split" if self.budget.implicit_split else "as given"
        lines = [
            "Resolved config (an rng seed, if given, is never shown or recorded):",
            *("  " + line for line in dump_config(cfg).splitlines()[1:]),
            "",
            f"Privacy budget plan for {self.budget.owner} ({split}):",
            f"  total: eps = {format_r_scalar(total.eps)} ; delta = {format_r_scalar(total.delta)}",
        ]
        for entry in self.noise:
            lines.append(
                f"  {entry['component']}: eps = {format_r_scalar(entry['eps'])} ; delta = "
                f"{format_r_scalar(entry['delta'])} -> {entry['mechanism']}, "
                f"{entry['sensitivity_norm']} sensitivity {format_r_scalar(entry['sensitivity'])}, "
                f"noise sd {format_r_scalar(entry['scale'])} ({entry['calibration']})"
            )
        where = src.path or src.origin
        lines += [
            "",
            f"Data: {where}" + (f" [{src.array}]" if src.array else ""),
            f"  {src.n} observations x {src.p} variables, stored {src.dtype}, "
            f"{len(src.chunks[0])} row chunk(s); {_mib(src.nbytes)} as float64",
            "  variables: " + ", ".join(src.variables[:10])
            + (f", ... ({src.p} in all)" if src.p > 10 else ""),
            "",
            "Work (Kendall pass):",
            f"  {layout.n_pairs:,} pairs in {layout.n_tiles:,} tiles of row blocks "
            f"({layout.n_blocks} blocks of <= {max(layout.block_sizes)} rows)",
            f"  {len(layout.units):,} work units, {layout.n_tasks:,} tasks, "
            f"reduction fan-in {layout.split_every}",
            f"  memory: about {_mib(layout.worker_memory_estimate(cfg.loading.cpp_option))} per "
            "running work unit; the driver holds one p x p matrix",
            "",
            f"Cluster: {describe_cluster(cfg.cluster)}",
            f"Output: {cfg.output.directory} ({', '.join(cfg.output.formats)})",
        ]
        return "\n".join(lines)


@dataclass(frozen=True)
class RunOutcome:
    """A finished run: the result, the files written and timings (seconds)."""

    result: Result
    directory: str
    files: tuple[str, ...]
    timings: dict[str, float] = field(default_factory=dict)


def plan_run(config: RunConfig) -> RunPlan:
    """Resolve budget, noise and work for ``config`` without reading any data values."""
    owner = OWNERS[config.task]
    budget = resolve_budget(config.privacy.to_control(), owner=owner)
    source = describe_source(
        config.input.path, owner=owner, columns=config.input.columns, array=config.input.array,
        storage_options=config.input.storage_options or None,
    )
    opts = config.loading
    sensitivity = kendall_sensitivity(source.n)
    spend = budget.spend("loading")
    noise = (
        {
            "component": "loading",
            "mechanism": "gaussian_symmetric_matrix",
            "eps": spend.eps,
            "delta": spend.delta,
            "sensitivity": sensitivity,
            "sensitivity_norm": "Frobenius",
            "scale": symmetric_noise_sigma(sensitivity, spend, opts.calibration),
            "calibration": opts.calibration,
        },
    )
    layout = kendall_layout(source.n, source.p, block_rows=opts.block_rows)
    return RunPlan(config, source, budget, noise, layout)


def _check_output(config: RunConfig, overwrite: bool) -> Path:
    directory = Path(config.output.directory)
    if directory.exists() and not overwrite:
        raise OutputExistsError(
            f"Output directory {str(directory)!r} already exists; use --overwrite (or "
            "output.overwrite: true) to replace it."
        )
    return directory


def _write_outputs(tmp: str, config: RunConfig, result: Result, summary: str) -> None:
    os.makedirs(tmp)
    base = Path(tmp)
    name = config.task
    if "zarr" in config.output.formats:
        result.to_zarr(base / f"{name}.zarr")
    if "netcdf" in config.output.formats:
        result.to_netcdf(base / f"{name}.nc")
    (base / "config.yaml").write_text(dump_config(config))
    (base / "summary.txt").write_text(summary + "\n")


def execute(
    config: RunConfig, *, progress: bool = True, overwrite: bool | None = None
) -> RunOutcome:
    """Run ``config`` end to end and write its outputs; see the module docstring for the order."""
    overwrite = config.output.overwrite if overwrite is None else overwrite
    directory = _check_output(config, overwrite)
    plan = plan_run(config)
    state = as_rng(config.rng, owner="config")
    opts = config.loading
    timings: dict[str, float] = {}
    start = time.perf_counter()
    with connect(config.cluster, progress=progress):
        timings["cluster_start"] = time.perf_counter() - start
        source = as_data(
            config.input.path, owner=plan.budget.owner, columns=config.input.columns,
            array=config.input.array, storage_options=config.input.storage_options or None,
        )
        begin = time.perf_counter()
        result = _fit_loading(
            source, plan.budget, calibration=opts.calibration, cpp_option=opts.cpp_option,
            non_private=opts.non_private, rng_state=state, block_rows=opts.block_rows,
        )
        timings["fit"] = time.perf_counter() - begin
    summary = f"{result!r}\n\n{result.summary()!r}"  # type: ignore[attr-defined]
    write_atomically(
        directory, lambda tmp: _write_outputs(tmp, config, result, summary), overwrite=overwrite
    )
    files = tuple(sorted(str(directory / f) for f in os.listdir(directory)))
    return RunOutcome(result, str(directory), files, timings)
