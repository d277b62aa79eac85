"""The ``pca`` task of a run config: plan, fit and outputs of ``dp_pca`` (see :mod:`dppca_dask.pipeline.tasks`).

``dppca-dask plan`` checks every option against the input's public shape (n, p) and shows the
three allocations, the noise of each mechanism computable from public quantities, and the
documented number of reads of the input. ``dppca-dask run`` writes, besides the one store
(``pca.zarr``/``pca.nc``: root + loading/scree/score groups):

* ``samples.parquet`` (or ``.csv``) -- the synthetic score points of the figures, drawn from the
  released histograms (target, method, pc_x, pc_y[, group]); a non-private target appears only
  with ``non_private: true`` and an explicit ``sampling.sample_size`` (it is NOT private);
* ``pca.png`` -- the combined figure of the run (PVE, loading vectors, score and biplot panels);
  ``pca_biplot.png`` (the configured score/biplot panels, same points), ``loading.png``
  (vectors, points, heatmap) and ``scree_pve.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from dppca_dask._rformat import format_r_scalar
from dppca_dask.io.data import SourceInfo
from dppca_dask.pca.options import PCAOptions, Setup
from dppca_dask.pca.scree import scree_split
from dppca_dask.pca.scree_methods import huber_defaults
from dppca_dask.pca.scree_utility import noise_lines
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.tasks.score import histogram_line, samples_table, score_noise
from dppca_dask.pipeline.tasks.wording import clipped_line, kendall_lines
from dppca_dask.privacy.budget import BudgetPlan
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState
from dppca_dask.results.base import Result
from dppca_dask.results.sampling import SamplingControl, sampling_control

__all__ = ["pca_noise", "pca_outputs", "pca_setup", "pca_source", "pca_work"]

_OWNER = "dp_pca"


def _r(value: float) -> str:
    return format_r_scalar(value)


def _sampling(cfg: RunConfig) -> SamplingControl:
    s = cfg.pca.sampling
    scale: Any = s.bandwidth_scale  # a dict with Literal keys: a Mapping[str, float]
    return sampling_control(list(s.method), s.sample_size, scale)


def pca_setup(cfg: RunConfig, src: SourceInfo, budget: BudgetPlan) -> Setup:
    """The pca options of the config, parsed once and bound to the input's shape."""
    o = cfg.pca
    _sampling(cfg)  # refused before any data is read, not after the release
    return PCAOptions.parse(
        _OWNER, scree_methods=list(o.scree_method), control=o.checked_controls(), k=o.k,
        mono=o.mono, center=o.center, score_methods=list(o.score_method), bins=o.bins,
        axes=o.axes, frame=o.frame, cpp_option=o.cpp_option, non_private=o.non_private,
        calibration=o.calibration, sensitivity=o.sensitivity, pairs=o.pairs,
        pair_block=o.pair_block, block_rows=o.block_rows).bind(src.n, src.p)


def pca_source(cfg: RunConfig) -> dict[str, Any]:
    return {"group": cfg.input.group} if cfg.input.group is not None else {}


def pca_noise(cfg: RunConfig, setup: Setup, plan: BudgetPlan, release: Plan) -> list[str]:
    opts = setup.options
    methods, controls, k, n = opts.scree_methods, opts.controls, setup.k, setup.n
    assert k is not None
    score_lines = score_noise(cfg, setup, plan, release)
    center_budget, method_budget = scree_split(plan.spend("scree"), setup)
    scree = plan.spend("scree")
    lines = [score_lines[0] + " (shared by scree and score)",
             f"  scree: eps = {_r(scree.eps)} ; delta = {_r(scree.delta)} for each method "
             f"({', '.join(methods)}), {k} components"]
    if center_budget is not None:
        share = center_budget.eps / scree.eps
        lines.append(f"    centre (private, shared): {_r(100 * share)}% of the scree budget")
    elif isinstance(opts.center, str) and opts.center == "empirical":
        lines.append("    centre: empirical mean of the scores -- OUTSIDE the privacy guarantee")
    per = method_budget.scaled(1.0 / k)
    for name in methods:
        ctl = controls[name]
        head = f"    {name}: per component eps = {_r(per.eps)} ; delta = {_r(per.delta)}"
        if name == "clipped":
            lines.append(clipped_line(release, opts.calibration))
        elif name == "pmwm":
            lines.append(f"{head} -> 2 Durfee cut-offs, then a gaussian winsorized mean")
        else:
            steps, _ = huber_defaults(n, ctl)
            lines.append(f"{head} -> m2 histogram, then {steps} gaussian gradient steps")
    lines += noise_lines(methods, dict(controls), n=n, k=k, budget=method_budget,
                         calibration=opts.calibration)
    return lines + score_lines[1:]


def pca_work(cfg: RunConfig, src: SourceInfo, setup: Setup, release: Plan) -> list[str]:
    reads = release.passes
    assert reads is not None
    assert setup.m_bins is not None
    return [
        "Work (pca):",
        *kendall_lines(setup, src, " (once; the directions are shared)"),
        f"  then {reads - 1} passes of O(n p k) over {len(src.chunks[0])} row chunk(s): the scree "
        "and score stages share each pass",
        f"  the input is read {reads} times in all",
        histogram_line(setup.m_bins, src.n, len(setup.options.score_methods),
                       bool(cfg.input.group)),
    ]


def _long_samples(samples: dict[str, pd.DataFrame], method: str, observed: bool
                  ) -> pd.DataFrame:
    return samples_table([frame.assign(target=target, method=method)
                          for target, frame in samples.items()
                          if not (target == "nonprivate" and observed)])


def pca_outputs(cfg: RunConfig, result: Result, base: Path, state: RngState) -> None:
    """Samples and figures, all drawn from the release (post-processing; no budget)."""
    from dppca_dask.plots.pca import plot_pca, save_run_figures

    opts = cfg.pca
    sampling = _sampling(cfg)
    control = {"show_group_legend": opts.show_group_legend}
    panels = plot_pca(result, panels=tuple(opts.panels), sampling=sampling,
                      group_weights=opts.group_weights, control=control, rng=state.generator)
    observed = sampling.sample_size is None
    table = _long_samples(panels.samples, sampling.method[0], observed)
    if opts.samples_format == "parquet":
        table.to_parquet(base / "samples.parquet", index=False)
    else:
        table.to_csv(base / "samples.csv", index=False)
    if opts.plots:
        save_run_figures(result, panels, base, dpi=opts.dpi)
