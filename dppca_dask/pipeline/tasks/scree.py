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

from pathlib import Path
from typing import Any

import numpy as np

from dppca_dask._rformat import format_r_scalar
from dppca_dask.errors import InputError
from dppca_dask.io.data import DataSource, SourceInfo
from dppca_dask.pca.scree import (
    DEFAULT_MAX_K,
    center_rounds,
    check_scree_args,
    fit_scree,
    parse_center,
    plan_scree,
    resolve_k,
)
from dppca_dask.pca.scree_controls import parse_methods, resolve_controls
from dppca_dask.pca.scree_methods import CENTER_SHARE, huber_defaults
from dppca_dask.pca.scree_utility import noise_lines
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.tasks.wording import clipped_line, kendall_lines, loading_line, pairs_of
from dppca_dask.plots._style import save_figure
from dppca_dask.privacy.budget import BudgetPlan, resolve_budget
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState
from dppca_dask.results.base import LoadingResult, Result, load_result

__all__ = ["scree_fit", "scree_noise", "scree_outputs", "scree_plan", "scree_work"]

_OWNER = "dp_scree"


def _r(value: float) -> str:
    return format_r_scalar(value)


def _plan(cfg: RunConfig, plan: BudgetPlan) -> BudgetPlan:
    """The runner resolves without priors; supplied directions make loading a prior release."""
    if cfg.scree.directions is None:
        return plan
    return resolve_budget(cfg.privacy.to_control(), owner=_OWNER, prior=("loading",))


def _check(cfg: RunConfig, src: SourceInfo) -> tuple[tuple[str, ...], dict[str, Any], int]:
    """Every scree option against the input's public shape (no data values read)."""
    opts = cfg.scree
    methods = parse_methods(list(opts.method), _OWNER)
    controls = resolve_controls(methods, dict(opts.controls), owner=_OWNER)
    if opts.directions is not None and not Path(opts.directions).exists():
        raise InputError(f"The directions result {opts.directions!r} (scree.directions) was "
                         "not found.")
    check_scree_args(src.n, src.p, methods, parse_center(opts.center), _OWNER)
    k = resolve_k(opts.k, src.p, None, _OWNER) if opts.directions is None else \
        opts.k or min(src.p, DEFAULT_MAX_K)  # a saved loading result: checked when it is read
    return methods, controls, k


def scree_noise(cfg: RunConfig, src: SourceInfo, plan: BudgetPlan, release: Plan) -> list[str]:
    methods, controls, k = _check(cfg, src)
    opts = cfg.scree
    plan = _plan(cfg, plan)
    n = src.n
    lines = []
    loading = plan["loading"]
    if opts.directions is None:
        lines.append(loading_line(release, opts.calibration))
    else:
        lines.append(f"  loading: eps = {_r(loading.eps)} ; delta = {_r(loading.delta)} -> "
                     f"prior release {opts.directions} (recorded, not spent)")
    scree = plan.spend("scree")
    private = isinstance(opts.center, str) and opts.center == "private"
    share = CENTER_SHARE if private else 0.0
    lines.append(f"  scree: eps = {_r(scree.eps)} ; delta = {_r(scree.delta)} for each method "
                 f"({', '.join(methods)}), {k} components")
    if private:
        lines.append(f"    centre (private, shared): {_r(100 * share)}% of the scree budget -> "
                     "2 rounds of a Durfee radius search and a ball-clipped Gaussian mean")
    elif opts.center == "empirical":
        lines.append("    centre: empirical mean of the scores -- OUTSIDE the privacy guarantee")
    method = scree.scaled(1.0 - share)
    per = method.scaled(1.0 / k)
    z = f" ({opts.calibration})"
    for name in methods:
        ctl = controls[name]
        head = f"    {name}: per component eps = {_r(per.eps)} ; delta = {_r(per.delta)} -> "
        if name == "clipped":
            lines.append(clipped_line(release, opts.calibration))
        elif name == "pmwm":
            lines.append(head + f"2 Durfee quantiles of eps {_r(per.eps / 4)} each (pure DP), "
                         f"then gaussian with eps {_r(per.eps / 2)}, sensitivity "
                         "(n/(n-1))(U - L)/n_m of the released cut-offs" + z)
        else:
            steps, blocks = huber_defaults(n, ctl)
            eps_m2 = ctl.m2_frac * per.eps
            lines.append(head + f"m2 histogram ({ctl.k_max_m2 - ctl.k_min_m2 + 1} bins, "
                         f"{min(blocks, n // 2)} blocks) laplace scale {_r(2 / eps_m2)}, then "
                         f"{steps} gaussian steps of eps {_r((per.eps - eps_m2) / steps)}, "
                         "sensitivity 2 eta0 tau/n of the released tau" + z)
    return lines + noise_lines(methods, controls, n=n, k=k, budget=method,
                               calibration=opts.calibration)


def scree_work(cfg: RunConfig, src: SourceInfo, release: Plan) -> list[str]:
    opts = cfg.scree
    lines = ["Work (scree):"]
    if opts.directions is None:
        lines += kendall_lines(opts, src)
    assert release.passes is not None
    scree_passes = release.passes - (opts.directions is None)
    centre = center_rounds(opts.center)
    lines.append(f"  then {scree_passes} passes of O(n p k) over {len(src.chunks[0])} row "
                 f"chunk(s): {centre} for the centre, {scree_passes - centre} for the methods "
                 "together")
    lines.append("  each returns per-component sums or count vectors; noise is drawn on the driver")
    return lines


def scree_plan(cfg: RunConfig, src: SourceInfo, budget: BudgetPlan) -> Plan:
    """The release's plan (:func:`~dppca_dask.pca.scree.plan_scree`) for this config."""
    methods, controls, _ = _check(cfg, src)
    opts = cfg.scree
    supplied = None if opts.directions is None else (np.zeros((src.p, src.p)),
                                                     "supplied dp_loading result")
    return plan_scree(src.n, src.p, _plan(cfg, budget), methods=methods, controls=controls,
                      k=opts.k, center=opts.center, supplied=supplied,
                      calibration=opts.calibration, sensitivity=opts.sensitivity,
                      pairs=pairs_of(opts, src), pair_block=opts.pair_block)


def scree_fit(cfg: RunConfig, source: DataSource, plan: BudgetPlan, state: RngState) -> Result:
    opts = cfg.scree
    methods = parse_methods(list(opts.method), _OWNER)
    v_dp = None
    if opts.directions is not None:
        v_dp = load_result(opts.directions)
        if not isinstance(v_dp, LoadingResult):
            raise InputError(f"scree.directions must name a dp_loading result; "
                             f"{opts.directions!r} holds a {v_dp.kind!r} result.")
    return fit_scree(
        source, _plan(cfg, plan), methods=methods,
        controls=resolve_controls(methods, dict(opts.controls), owner=_OWNER), k=opts.k,
        V_dp=v_dp, mono=opts.mono, cpp_option=opts.cpp_option, non_private=opts.non_private,
        calibration=opts.calibration, rng_state=state, center=parse_center(opts.center),
        block_rows=opts.block_rows, sensitivity=opts.sensitivity,
        pairs=pairs_of(opts, source), pair_block=opts.pair_block,
    )


def scree_outputs(cfg: RunConfig, result: Result, base: Path, state: RngState) -> None:
    """The PVE and scree figures, in each configured format (post-processing only)."""
    opts = cfg.scree
    for kind in dict.fromkeys(opts.plots):
        fig = result.plot(type=kind)
        for fmt in dict.fromkeys(opts.plot_formats):
            save_figure(fig, base / f"scree_{kind}.{fmt}", dpi=opts.dpi, format=fmt,
                        tight=False)
