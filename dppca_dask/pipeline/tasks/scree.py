"""The ``scree`` task of a run config: plan, fit and plots (used by :mod:`dppca_dask.pipeline.tasks`).

``dppca-dask plan`` checks every scree option against the input's public shape, and shows the
loading noise, the centre's share and each method's per-component budget and noise from public
quantities (n, p, ε, δ, the controls); noise that depends on released intermediate values (the
PMWM cut-offs, the Huber τ) is described by its formula. ``dppca-dask run`` writes, besides
``scree.zarr``/``scree.nc``, the figures ``scree_pve.png``/``.svg`` and
``scree_scree.png``/``.svg`` (:mod:`dppca_dask.plots.scree`; with ``non_private: true`` they
show the non-private reference and are NOT private releases).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from dppca_dask._rformat import format_r_scalar
from dppca_dask.errors import InputError
from dppca_dask.io.data import DataSource, SourceInfo
from dppca_dask.pca.directions import parse_v_dp
from dppca_dask.pca.options import ScreeOptions, Setup
from dppca_dask.pca.scree import center_rounds, fit_scree, scree_plan_of, scree_split
from dppca_dask.pca.scree_methods import huber_defaults
from dppca_dask.pca.scree_utility import noise_lines
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.tasks.wording import (
    clipped_line,
    kendall_lines,
    loading_line,
    release_steps,
)
from dppca_dask.plots._style import save_figure
from dppca_dask.privacy.budget import BudgetPlan
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState
from dppca_dask.results.base import LoadingResult, Result, load_result

__all__ = ["scree_fit", "scree_noise", "scree_outputs", "scree_plan", "scree_setup", "scree_work"]

_OWNER = "dp_scree"


def _r(value: float) -> str:
    return format_r_scalar(value)


def _with_prior(setup: Setup, plan: BudgetPlan) -> BudgetPlan:
    """The runner resolves without priors; supplied directions make loading a prior release."""
    if setup.supplied is None:
        return plan
    return replace(plan, prior=plan.prior | {"loading"})


def _directions(cfg: RunConfig, src: SourceInfo) -> tuple[Any, str] | None:
    """The saved dp_loading result ``scree.directions`` (an earlier release: its directions,
    read once when the options are bound), or ``None``."""
    path = cfg.scree.directions
    if path is None:
        return None
    if not Path(path).exists():
        raise InputError(f"The directions result {path!r} (scree.directions) was not found.")
    result = load_result(path)
    if not isinstance(result, LoadingResult):
        raise InputError(f"scree.directions must name a dp_loading result; "
                         f"{path!r} holds a {result.kind!r} result.")
    return parse_v_dp(result, cast(DataSource, src), _OWNER)  # uses n, p, variables only


def scree_setup(cfg: RunConfig, src: SourceInfo, budget: BudgetPlan) -> Setup:
    """The scree options of the config, parsed once and bound to the input's shape (and to
    the supplied directions, when ``scree.directions`` names them)."""
    o = cfg.scree
    return ScreeOptions.parse(
        _OWNER, scree_methods=list(o.method), control=o.checked_controls(), k=o.k, mono=o.mono,
        center=o.center, cpp_option=o.cpp_option, non_private=o.non_private,
        calibration=o.calibration, sensitivity=o.sensitivity, pairs=o.pairs,
        pair_block=o.pair_block, block_rows=o.block_rows,
    ).bind(src.n, src.p, _directions(cfg, src))


def scree_noise(cfg: RunConfig, setup: Setup, plan: BudgetPlan, release: Plan) -> list[str]:
    opts = setup.options
    methods, controls, k, n = opts.scree_methods, opts.controls, setup.k, setup.n
    assert k is not None
    plan = _with_prior(setup, plan)
    lines = []
    loading = plan["loading"]
    if cfg.scree.directions is None:
        lines.append(loading_line(release, opts.calibration))
    else:
        lines.append(f"  loading: eps = {_r(loading.eps)} ; delta = {_r(loading.delta)} -> "
                     f"prior release {cfg.scree.directions} (recorded, not spent)")
    scree = plan.spend("scree")
    center_budget, method = scree_split(scree, setup)
    lines.append(f"  scree: eps = {_r(scree.eps)} ; delta = {_r(scree.delta)} for each method "
                 f"({', '.join(methods)}), {k} components")
    if center_budget is not None:
        share = center_budget.eps / scree.eps
        lines.append(f"    centre (private, shared): {_r(100 * share)}% of the scree budget -> "
                     "2 rounds of a Durfee radius search and a ball-clipped Gaussian mean")
    elif isinstance(opts.center, str) and opts.center == "empirical":
        lines.append("    centre: empirical mean of the scores -- OUTSIDE the privacy guarantee")
    per = method.scaled(1.0 / k)
    z = f" ({opts.calibration})"
    for name in methods:
        ctl = controls[name]
        head = f"    {name}: per component eps = {_r(per.eps)} ; delta = {_r(per.delta)} -> "
        if name == "clipped":
            lines.append(clipped_line(release, opts.calibration))
        elif name == "pmwm":
            cut = release_steps(release, "pmwm PC1: lower cut-off")
            mean = release_steps(release, "pmwm PC1: winsorized mean")[0]
            lines.append(head + f"2 Durfee quantiles of eps {_r(math.fsum(r.eps for r in cut))} "
                         f"each (pure DP), then gaussian with eps {_r(mean.eps)}, sensitivity "
                         "(n/(n-1))(U - L)/n_m of the released cut-offs" + z)
        else:
            _, blocks = huber_defaults(n, ctl)
            m2 = release_steps(release, "huber PC1: m2 histogram")[0]
            steps = release_steps(release, "huber PC1: gradient step ")
            assert m2.scale is not None  # pure DP with a public sensitivity: the plan states it
            lines.append(head + f"m2 histogram ({m2.draws} bins, {min(blocks, n // 2)} blocks) "
                         f"laplace scale {_r(m2.scale)}, then {len(steps)} gaussian steps of "
                         f"eps {_r(steps[0].eps)}, sensitivity 2 eta0 tau/n of the released tau"
                         + z)
    return lines + noise_lines(methods, dict(controls), n=n, k=k, budget=method,
                               calibration=opts.calibration)


def scree_work(cfg: RunConfig, src: SourceInfo, setup: Setup, release: Plan) -> list[str]:
    lines = ["Work (scree):"]
    if setup.supplied is None:
        lines += kendall_lines(setup, src)
    assert release.passes is not None
    scree_passes = release.passes - (setup.supplied is None)
    centre = center_rounds(setup.options.center)
    lines.append(f"  then {scree_passes} passes of O(n p k) over {len(src.chunks[0])} row "
                 f"chunk(s): {centre} for the centre, {scree_passes - centre} for the methods "
                 "together")
    lines.append("  each returns per-component sums or count vectors; noise is drawn on the driver")
    return lines


def scree_plan(setup: Setup, budget: BudgetPlan) -> Plan:
    """The release's plan (:func:`~dppca_dask.pca.scree.scree_plan_of`) for this config."""
    return scree_plan_of(setup, _with_prior(setup, budget))


def scree_fit(source: DataSource, plan: BudgetPlan, setup: Setup, state: RngState) -> Result:
    """The fit on the bound options; with supplied directions, loading is a prior release."""
    return fit_scree(source, _with_prior(setup, plan), setup, state)


def scree_outputs(cfg: RunConfig, result: Result, base: Path, state: RngState) -> None:
    """The PVE and scree figures, in each configured format (post-processing only)."""
    opts = cfg.scree
    for kind in dict.fromkeys(opts.plots):
        fig = result.plot(type=kind)
        for fmt in dict.fromkeys(opts.plot_formats):
            save_figure(fig, base / f"scree_{kind}.{fmt}", dpi=opts.dpi, format=fmt,
                        tight=False)
