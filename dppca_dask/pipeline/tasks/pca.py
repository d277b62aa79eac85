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
from dppca_dask._validation import parse_axes
from dppca_dask.errors import InputError
from dppca_dask.io.data import DataSource, SourceInfo
from dppca_dask.pca.histograms import parse_bins, parse_methods
from dppca_dask.pca.pca import fit_pca, plan_pca
from dppca_dask.pca.scree import check_scree_args, parse_center, resolve_k
from dppca_dask.pca.scree_controls import parse_methods as parse_scree_methods
from dppca_dask.pca.scree_controls import resolve_controls
from dppca_dask.pca.scree_methods import CENTER_SHARE, huber_defaults
from dppca_dask.pca.scree_utility import noise_lines
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.tasks.score import histogram_line, samples_table, score_noise
from dppca_dask.pipeline.tasks.wording import clipped_line, kendall_lines, pairs_of
from dppca_dask.plots._style import save_figure
from dppca_dask.privacy.budget import BudgetPlan
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState
from dppca_dask.results.base import Result
from dppca_dask.results.sampling import SamplingControl, sampling_control

__all__ = ["pca_fit", "pca_noise", "pca_outputs", "pca_source", "pca_plan", "pca_work"]

_OWNER = "dp_pca"


def _r(value: float) -> str:
    return format_r_scalar(value)


def _sampling(cfg: RunConfig) -> SamplingControl:
    s = cfg.pca.sampling
    scale: Any = s.bandwidth_scale  # a dict with Literal keys: a Mapping[str, float]
    return sampling_control(list(s.method), s.sample_size, scale)


def _check(cfg: RunConfig, src: SourceInfo) -> tuple[tuple[str, ...], dict[str, Any], int]:
    """Every pca option against the input's public shape (no data values read)."""
    opts = cfg.pca
    if src.p < 2:
        raise InputError(f"The 'X' parameter of {_OWNER} must have at least two columns. "
                         f"Got {src.p} instead.")
    methods = parse_scree_methods(list(opts.scree_method), _OWNER)
    controls = resolve_controls(methods, dict(opts.scree_control), owner=_OWNER)
    check_scree_args(src.n, src.p, methods, parse_center(opts.center), _OWNER)
    k = resolve_k(opts.k, src.p, None, _OWNER)
    parse_axes(opts.axes, _OWNER, src.p)
    parse_bins(opts.bins, src.n, _OWNER)
    parse_methods(list(opts.score_method), _OWNER)
    _sampling(cfg)
    return methods, controls, k


def _as_score(cfg: RunConfig) -> RunConfig:
    """The score options of a pca config as a score-task config (for its noise lines)."""
    o = cfg.pca
    score = cfg.score.model_copy(update={
        "axes": o.axes, "bins": o.bins, "method": o.score_method, "frame": o.frame,
        "calibration": o.calibration, "sensitivity": o.sensitivity, "block_rows": o.block_rows,
        "sampling": o.sampling})
    return cfg.model_copy(update={"score": score})


def pca_source(cfg: RunConfig) -> dict[str, Any]:
    return {"group": cfg.input.group} if cfg.input.group is not None else {}


def pca_noise(cfg: RunConfig, src: SourceInfo, plan: BudgetPlan, release: Plan) -> list[str]:
    methods, controls, k = _check(cfg, src)
    opts = cfg.pca
    n = src.n
    score_lines = score_noise(_as_score(cfg), src, plan, release)
    scree = plan.spend("scree")
    private = isinstance(opts.center, str) and opts.center == "private"
    share = CENTER_SHARE if private else 0.0
    lines = [score_lines[0] + " (shared by scree and score)",
             f"  scree: eps = {_r(scree.eps)} ; delta = {_r(scree.delta)} for each method "
             f"({', '.join(methods)}), {k} components"]
    if private:
        lines.append(f"    centre (private, shared): {_r(100 * share)}% of the scree budget")
    elif opts.center == "empirical":
        lines.append("    centre: empirical mean of the scores -- OUTSIDE the privacy guarantee")
    per = scree.scaled((1.0 - share) / k)
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
    lines += noise_lines(methods, controls, n=n, k=k, budget=scree.scaled(1.0 - share),
                         calibration=opts.calibration)
    return lines + score_lines[1:]


def pca_work(cfg: RunConfig, src: SourceInfo, release: Plan) -> list[str]:
    opts = cfg.pca
    reads = release.passes
    assert reads is not None
    return [
        "Work (pca):",
        *kendall_lines(opts, src, " (once; the directions are shared)"),
        f"  then {reads - 1} passes of O(n p k) over {len(src.chunks[0])} row chunk(s): the scree "
        "and score stages share each pass",
        f"  the input is read {reads} times in all",
        histogram_line(opts.bins, src.n, len(opts.score_method), bool(cfg.input.group)),
    ]


def pca_plan(cfg: RunConfig, src: SourceInfo, budget: BudgetPlan) -> Plan:
    """The release's plan (:func:`~dppca_dask.pca.pca.plan_pca`) for this config."""
    opts = cfg.pca
    methods = parse_scree_methods(list(opts.scree_method), _OWNER)
    return plan_pca(src.n, src.p, budget, k=opts.k, scree_methods=methods,
                    controls=resolve_controls(methods, dict(opts.scree_control), owner=_OWNER),
                    score_methods=parse_methods(list(opts.score_method), _OWNER),
                    center=opts.center, frame=opts.frame, calibration=opts.calibration,
                    sensitivity=opts.sensitivity, pairs=pairs_of(opts, src),
                    pair_block=opts.pair_block)


def pca_fit(cfg: RunConfig, source: DataSource, plan: BudgetPlan, state: RngState) -> Result:
    opts = cfg.pca
    methods = parse_scree_methods(list(opts.scree_method), _OWNER)
    return fit_pca(
        source, plan, k=opts.k, scree_methods=methods,
        controls=resolve_controls(methods, dict(opts.scree_control), owner=_OWNER),
        bins=opts.bins, hist_methods=parse_methods(list(opts.score_method), _OWNER),
        axes=parse_axes(opts.axes, _OWNER), V_dp=None, mono=opts.mono,
        cpp_option=opts.cpp_option, non_private=opts.non_private,
        calibration=opts.calibration, rng_state=state, center=parse_center(opts.center),
        frame=opts.frame, block_rows=opts.block_rows, sensitivity=opts.sensitivity,
        pairs=pairs_of(opts, source), pair_block=opts.pair_block)


def _long_samples(samples: dict[str, pd.DataFrame], method: str, observed: bool
                  ) -> pd.DataFrame:
    return samples_table([frame.assign(target=target, method=method)
                          for target, frame in samples.items()
                          if not (target == "nonprivate" and observed)])


def pca_outputs(cfg: RunConfig, result: Result, base: Path, state: RngState) -> None:
    """Samples and figures, all drawn from the release (post-processing; no budget)."""
    from dppca_dask.plots.pca import plot_pca

    opts = cfg.pca
    sampling = _sampling(cfg)
    control = {"show_group_legend": opts.show_group_legend}
    combined = plot_pca(result, panels="all", sampling=sampling, group_weights=opts.group_weights,
                        control=control, rng=state.generator)
    observed = sampling.sample_size is None
    table = _long_samples(combined.samples, sampling.method[0], observed)
    if opts.samples_format == "parquet":
        table.to_parquet(base / "samples.parquet", index=False)
    else:
        table.to_csv(base / "samples.csv", index=False)
    if not opts.plots:
        return
    combined.save(str(base / "pca.png"), dpi=opts.dpi)
    panels = plot_pca(result, panels=tuple(opts.panels), sampling=sampling, control=control,
                      samples=combined.samples)
    panels.save(str(base / "pca_biplot.png"), dpi=opts.dpi)
    result.loading.plot().save(str(base / "loading.png"), dpi=opts.dpi)  # type: ignore[attr-defined]
    fig = result.scree.plot(type="pve")  # type: ignore[attr-defined]
    save_figure(fig, base / "scree_pve.png", dpi=opts.dpi)
