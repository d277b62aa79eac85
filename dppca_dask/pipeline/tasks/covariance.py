"""The ``covariance`` task of a run config: plan and fit (used by :mod:`dppca_dask.pipeline.tasks`).

The config's ``privacy`` gives total ``eps``/``delta``; the release is ρ-zCDP with the largest ρ
whose conversion meets them (:func:`~dppca_dask.privacy.zcdp.zcdp_rho`), so the persistent budget ledger
records the (ε, δ) asked for. The section's keys resolve as ``dp_covariance``'s arguments do
(``preset``; default: ``method: auto, clip: row, radius: private``); ``covariance.bounds`` are
public bounds (``clip: box``). ``plan`` shows the
ρ allocation and the noise of the first measurements from public quantities (n, d, ε, δ, the
control); the noise of later PACE-GGM rounds depends on released annealing decisions and is
described by its rule. ``run`` writes ``covariance.png`` beside the store (and report.html
shows it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dppca_dask._rformat import format_r_scalar
from dppca_dask.covariance.estimator import (
    covariance_sensitivities,
    fit_covariance,
    parse_clip,
    parse_control,
    plan_covariance,
    rho_allocations,
)
from dppca_dask.covariance.pace_ggm import PaceGGMControl
from dppca_dask.covariance.radius import PRIVATE, radius_rule
from dppca_dask.errors import ConfigError
from dppca_dask.io.data import DataSource, SourceInfo
from dppca_dask.pipeline.config import CovarianceConfig, RunConfig
from dppca_dask.privacy.budget import BudgetPlan
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState
from dppca_dask.privacy.zcdp import ZCDPPlan, resolve_zcdp
from dppca_dask.results.base import Result

__all__ = ["CovarianceSetup", "covariance_fit", "covariance_noise", "covariance_outputs",
           "covariance_plan", "covariance_setup", "covariance_work"]

_OWNER = "dp_covariance"


def _r(value: float) -> str:
    return format_r_scalar(value)


def _options(cfg: RunConfig) -> CovarianceConfig:
    if cfg.covariance is None:
        raise ConfigError("Invalid config: config key 'covariance' is required for task "
                          "'covariance' (covariance: {} is the recommended configuration: "
                          "method auto, rows clipped at a private radius).")
    return cfg.covariance


@dataclass(frozen=True)
class CovarianceSetup:
    """The covariance options of a config, parsed once and bound to the input and budget: the
    clipping and its per-variable public scale (None: the private radius), the method's
    control, the zCDP plan."""

    method: str
    clip: str
    bounds: np.ndarray | None
    control: Any
    zcdp: ZCDPPlan
    report_clipping: bool
    n: int
    p: int


def covariance_setup(cfg: RunConfig, src: SourceInfo, budget: BudgetPlan) -> CovarianceSetup:
    opts = _options(cfg)
    method, clip, radius = opts.resolved()
    clip, bounds = parse_clip(clip, opts.bounds, radius, src.variables, _OWNER)
    spend = budget.spend("covariance")
    return CovarianceSetup(method, clip, bounds, parse_control(method, opts.control),
                           resolve_zcdp(eps=spend.eps, delta=spend.delta, owner=_OWNER),
                           opts.report_clipping, src.n, src.p)


def covariance_noise(cfg: RunConfig, setup: CovarianceSetup, budget: BudgetPlan,
                     release: Plan) -> list[str]:
    opts, clip, bounds, control, plan = setup, setup.clip, setup.bounds, setup.control, setup.zcdp
    d, n = setup.p, setup.n
    private = bounds is None
    sens = covariance_sensitivities(1.0 if bounds is None else bounds, n, clip)
    parts = dict(rho_allocations(opts.method, plan.rho, control, d, private))
    lines = [
        f"  covariance: eps = {_r(plan.eps or 0.0)} ; delta = {_r(plan.delta or 0.0)} -> "
        f"rho = {_r(plan.rho)} (zCDP, the largest rho whose CKS 2020 conversion is within eps)",
        f"  method {opts.method}; noise sd below is in units of B_j*B_k (normalised data)"
        if clip == "box" else
        f"  method {opts.method}, rows clipped to L2 norm {_r(float(bounds[0]))} (Analyze-Gauss); "
        "noise sd below is in units of R^2 (normalised data x/R)" if bounds is not None else
        f"  method {opts.method}, rows clipped to L2 norm R, a private radius (Analyze-Gauss); "
        "noise sd below is in units of R^2 (normalised data x/R)",
    ]
    if private:
        rule = radius_rule(n, d, plan.rho)
        robust_rec, gap_rec, tail_rec = release.records[:3]
        lines.append(
            f"    radius: rho = {_r(parts['radius'])}; AboveThreshold searches up the row-norm "
            f"grid 2^(i/32): the robust {_r(rule.q_robust)} quantile (rho = "
            f"{_r(robust_rec.rho or 0.0)}), a gap test at the {_r(rule.q_gap)} quantile within "
            f"2^2 above it (rho = {_r(gap_rec.rho or 0.0)}) and the tail {_r(rule.q)} quantile "
            f"from it up (rho = {_r(tail_rec.rho or 0.0)}; the radius unless the gap test runs "
            f"off its window); the method gets rho = {_r(plan.rho - parts['radius'])}")
        plan = resolve_zcdp(rho=plan.rho - parts["radius"], owner=_OWNER)
    if opts.method == "ssp":
        sd = sens.frobenius / math.sqrt(2.0 * plan.rho)
        lines.append(f"    ssp: rho = {_r(plan.rho)}, Frobenius sensitivity "
                     f"{_r(sens.frobenius)} -> diagonal sd {_r(sd)}, off-diagonal sd "
                     f"{_r(sd / math.sqrt(2.0))}" + (", then PSD projection"
                                                     if control["psd"] else ""))
    elif opts.method == "auto":
        sd = sens.frobenius / math.sqrt(2.0 * plan.rho)
        lines.append(f"    auto (ssp release): rho = {_r(plan.rho)}, Frobenius sensitivity "
                     f"{_r(sens.frobenius)} -> diagonal sd {_r(sd)}, off-diagonal sd "
                     f"{_r(sd / math.sqrt(2.0))}, then thresholding/spectral shrinkage and "
                     "PSD projection (post-processing)")
    elif opts.method == "diagonal":
        lines.append(f"    diagonal: rho = {_r(plan.rho)}, L2 sensitivity {_r(sens.diagonal)} -> "
                     f"sd {_r(sens.diagonal / math.sqrt(2.0 * plan.rho))}; off-diagonal = 0")
    else:
        assert isinstance(control, PaceGGMControl)
        diag_rho = parts["diagonal"]
        lines.append(f"    diagonal: rho = {_r(diag_rho)}, L2 sensitivity {_r(sens.diagonal)} "
                     f"-> sd {_r(sens.diagonal / math.sqrt(2.0 * diag_rho))}")
        if "mean" in parts:
            mean_sens = sens.mean
            lines.append(f"    mean: rho = {_r(parts['mean'])}, L2 sensitivity {_r(mean_sens)} "
                         f"-> sd {_r(mean_sens / math.sqrt(2.0 * parts['mean']))}")
        if "rounds" in parts:
            rounds = control.rounds_per_variable * d
            per_round = parts["rounds"] / rounds
            alpha = control.measure_fraction
            entry = sens.offdiagonal
            lines.append(
                f"    rounds: rho = {_r(parts['rounds'])}; first round rho = {_r(per_round)} "
                f"(T = {rounds}): selection eps = {_r(math.sqrt(8 * (1 - alpha) * per_round))}, "
                f"entry sd {_r(entry / math.sqrt(2 * alpha * per_round))}; sd halves (eps "
                "doubles) when a measured estimate moves less than the expected noise; the last "
                "round spends what is left")
    return lines


def covariance_work(cfg: RunConfig, src: SourceInfo, setup: CovarianceSetup,
                    release: Plan) -> list[str]:
    d = src.p
    lines = [
        "Work (row-norm count pass, then second-moment pass):" if setup.bounds is None else
        "Work (second-moment pass):",
        f"  one tree reduction over {len(src.chunks[0])} row chunk(s): per block the clipped "
        f"{d} x {d} cross-product (about {8 * d * d / 2**20:,.1f} MiB per partial)",
        "  the driver holds one d x d matrix; it is never written",
    ]
    if setup.method == "pace_ggm":
        control = setup.control
        lines.append(f"  PACE-GGM: at most {control.rounds_per_variable * d} rounds, each a "
                     "maximum-entropy solve on the changed component")
    return lines


def covariance_plan(setup: CovarianceSetup, budget: BudgetPlan) -> Plan:
    """The release's plan (:func:`~dppca_dask.covariance.estimator.plan_covariance`)."""
    return plan_covariance(setup.p, setup.zcdp, method=setup.method, control=setup.control,
                           clip=setup.clip,
                           radius=PRIVATE if setup.bounds is None else float(setup.bounds[0]))


def covariance_fit(source: DataSource, budget: BudgetPlan, setup: CovarianceSetup,
                   state: RngState) -> Result:
    return fit_covariance(
        source, setup.zcdp, bounds=setup.bounds, clip=setup.clip, method=setup.method,
        control=setup.control, rng_state=state, report_clipping=setup.report_clipping,
    )


def covariance_outputs(cfg: RunConfig, result: Result, base: Path, state: RngState) -> None:
    """``covariance.png``: the released matrix, its correlation and the measured entries
    (post-processing; :meth:`~dppca_dask.results.covariance.CovarianceResult.plot`)."""
    result.plot().save(str(base / "covariance.png"))
