"""The ``score`` task of a run config: plan, fit and extra outputs (used by :mod:`dppca_dask.pipeline.tasks`).

``dppca-dask plan`` shows the loading noise, the frame searches, the histogram noise and the bins
from public quantities (n, p, ε, δ) and checks every score option before any data is read.
``dppca-dask run`` writes, besides the histogram dataset (``score.zarr``/``score.nc``):

* ``samples.parquet`` (or ``.csv``) -- synthetic score points drawn from the released histograms
  (post-processing), one row per point with columns target, method, pc_x, pc_y[, group];
  target "nonprivate" appears only when ``non_private: true`` and is NOT private;
* ``score.png`` (the configured panels), ``score_histogram.png`` and ``score_sample.png``, all
  showing the same samples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from dppca_dask._rformat import format_r_scalar
from dppca_dask.io.data import SourceInfo
from dppca_dask.pca.frame import CAPPED_SPAN
from dppca_dask.pca.frame_ranged import RADIUS_FACTOR
from dppca_dask.pca.histograms import (
    cell_limit,
    histogram_estimate,
)
from dppca_dask.pca.options import ScoreOptions, Setup
from dppca_dask.pca.score import frame_method, score_split
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.tasks.wording import kendall_lines, loading_line
from dppca_dask.privacy.budget import BudgetPlan
from dppca_dask.privacy.mechanisms import (
    stability_histogram_parameters,
)
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState
from dppca_dask.results.base import Result
from dppca_dask.results.sampling import SamplingControl, sampling_control

__all__ = ["histogram_line", "score_noise", "score_outputs", "score_setup", "score_source",
           "score_work"]

_OWNER = "dp_score"


def _r(value: float) -> str:
    return format_r_scalar(value)


def _sampling(cfg: RunConfig) -> SamplingControl:
    s = cfg.score.sampling
    scale: Any = s.bandwidth_scale  # a dict with Literal keys: a Mapping[str, float]
    return sampling_control(list(s.method), s.sample_size, scale)


def score_setup(cfg: RunConfig, src: SourceInfo, budget: BudgetPlan) -> Setup:
    """The score options of the config, parsed once and bound to the input's shape."""
    o = cfg.score
    _sampling(cfg)  # refused before any data is read, not after the release
    return ScoreOptions.parse(
        _OWNER, cpp_option=o.cpp_option, non_private=o.non_private, calibration=o.calibration,
        frame=o.frame, score_methods=list(o.method), axes=o.axes, bins=o.bins,
        sensitivity=o.sensitivity, pairs=o.pairs, pair_block=o.pair_block,
        block_rows=o.block_rows).bind(src.n, src.p)


def score_source(cfg: RunConfig) -> dict[str, Any]:
    return {"group": cfg.input.group} if cfg.input.group is not None else {}


def score_noise(cfg: RunConfig, setup: Setup, plan: BudgetPlan, release: Plan) -> list[str]:
    """The score part's noise in words (a pca config's score part too)."""
    opts = setup.options
    bins, methods = setup.m_bins, opts.score_methods
    assert bins is not None
    score = plan.spend("score")
    frame = frame_method(setup, plan)
    frame_budget, hist = score_split(score, frame)
    frame_eps, frame_delta = frame_budget.eps, frame_budget.delta
    rule = " (default rule)" if opts.bins is None else ""
    lines = [
        loading_line(release, opts.calibration),
        f"  score: eps = {_r(score.eps)} ; delta = {_r(score.delta)}",
        f"    frame ({frame}{' by auto' if opts.frame == 'auto' else ''}): eps = "
        f"{_r(frame_eps)} ; delta = {_r(frame_delta)} -> " + _frame_words(release, frame),
        f"    histogram: eps = {_r(hist.eps)} ; delta = {_r(hist.delta)} for each method "
        f"({', '.join(methods)}), {bins[0]} x {bins[1]} bins{rule}",
    ]
    if "add" in methods:
        add = release.first("score", "gaussian_histogram")
        assert add.sensitivity is not None
        assert add.scale is not None
        lines.append(f"      add: gaussian, L2 sensitivity {_r(add.sensitivity)}, noise sd "
                     f"{_r(add.scale)} counts ({opts.calibration})")
    if "sparse" in methods:
        scale, threshold = stability_histogram_parameters(setup.n, hist)
        per_group = "; per group with n_g" if cfg.input.group else ""
        lines.append(f"      sparse: laplace scale {_r(scale)}, threshold {_r(threshold)} "
                     f"(proportions, n = {setup.n}{per_group})")
    if "geometric" in methods:
        geo = release.first("score", "geometric_histogram")
        lines.append(f"      geometric: two-sided geometric (pure eps, delta unused), L1 "
                     f"sensitivity {_r(geo.sensitivity or 0.0)}, scale {_r(geo.scale or 0.0)} "
                     "counts")
    return lines


def _frame_words(release: Plan, frame: str) -> str:
    """The frame's searches in words, read off the release's planned records."""
    if frame == "smooth":
        return "3 smooth-sensitivity quantiles"
    if frame == "ranged":
        radius = next(r.eps for r in release.records if r.component == "score"
                      and r.mechanism == "durfee_above_threshold")
        shares = [r.eps for r in release.records if r.component == "score"
                  and r.mechanism == "exponential_mechanism"]
        tail = [r.eps for r in release.records if r.component == "score"
                and r.mechanism == "laplace" and r.note.startswith("frame tail")]
        words = (f"per axis (pure DP): the centre's interval and its refinement by the "
                 f"exponential mechanism at eps {_r(shares[0])} and {_r(shares[2])}, the 0.9 "
                 f"quantile Q of |s - c| by a Durfee search at eps {_r(radius)}; radius "
                 f"{RADIUS_FACTOR:g} x Q")
        if tail:
            words += (f", or another factor where Laplace counts of |s - c| >= Q, 2Q, 4Q "
                      f"(eps {', '.join(_r(e) for e in tail[:3])}) show a lighter or heavier "
                      "tail")
        return words
    searches = [r for r in release.records
                if r.component == "score" and r.mechanism == "durfee_above_threshold"]

    def role(name: str) -> float:
        return next(r.eps for r in searches if r.note.startswith(f"frame {name}"))

    if frame == "durfee":
        return f"4 Durfee searches of eps {_r(role('radius'))} each (pure DP)"
    return (f"{len(searches)} Durfee searches (pure DP), per axis: the centre's two sides at "
            f"eps {_r(role('centre'))} each, the scale S at eps {_r(role('scale'))}, the radius "
            f"in [S, {CAPPED_SPAN:g}*S] at eps {_r(role('radius'))}")


def score_work(cfg: RunConfig, src: SourceInfo, setup: Setup, release: Plan) -> list[str]:
    assert release.passes is not None
    assert setup.m_bins is not None
    ranged = any(r.mechanism == "exponential_mechanism" and r.note.startswith("frame")
                 for r in release.records)  # the frame the plan resolved
    frame = ("frame locate, refine and radius counts" if ranged
             else "the observed scores (smooth frame)" if setup.options.frame == "smooth"
             else "frame centre counts, frame radius counts")
    return [
        "Work (score):",
        *kendall_lines(setup, src),
        f"  then {release.passes - 1} passes of O(n p) over {len(src.chunks[0])} row chunk(s): "
        f"{frame}, cell counts" + (" per group" if cfg.input.group else ""),
        "  the driver holds count vectors over "
        + ("81922 grid points" if ranged else "5000 grid points")
        + " and the cell counts",
        histogram_line(setup.m_bins, src.n, len(setup.options.score_methods),
                       bool(cfg.input.group)),
    ]


def histogram_line(grid: tuple[int, int], n: int, methods: int, grouped: bool) -> str:
    """The driver's histogram and plot stages in words: memory and drawing time for the bins
    ``grid`` (checked against :func:`~dppca_dask.pca.histograms.cell_limit` when the options
    were bound)."""
    memory, seconds = histogram_estimate(grid, methods=methods)
    per = " per group" if grouped else ""
    return (f"  histogram and plots (driver): {grid[0]} x {grid[1]} = {grid[0] * grid[1]:,} cells "
            f"(limit {cell_limit(n):,} for n = {n:,}); about {memory / 2**20:,.1f} MiB{per} and "
            f"about {seconds:,.1f} s to draw{per}")


def _long_samples(samples: dict[str, dict[str, pd.DataFrame]]) -> pd.DataFrame:
    return samples_table([frame.assign(target=target, method=method)
                          for target, methods in samples.items()
                          for method, frame in methods.items()])


def samples_table(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """One long table (target, method, pc_x, pc_y[, group]) of synthetic sample frames."""
    if not parts:
        return pd.DataFrame(columns=["target", "method", "pc_x", "pc_y"])
    out = pd.concat(parts, ignore_index=True)
    cols = ["target", "method", "pc_x", "pc_y"] + (["group"] if "group" in out else [])
    out = out[cols]
    if "group" in out:
        out["group"] = out["group"].astype(str)
    return out


def score_outputs(cfg: RunConfig, result: Result, base: Path, state: RngState) -> None:
    """Samples (Parquet or CSV) and PNGs; drawn from the released histograms only."""
    from dppca_dask.plots.score import plot_score

    opts = cfg.score
    sampling = _sampling(cfg)
    samples = result.sample(sampling, group_weights=opts.group_weights,  # type: ignore[attr-defined]
                            rng=state.generator)
    table = _long_samples(samples)
    if opts.samples_format == "parquet":
        table.to_parquet(base / "samples.parquet", index=False)
    else:
        table.to_csv(base / "samples.csv", index=False)
    if not opts.plots:
        return
    control = {"show_group_legend": opts.show_group_legend}
    layouts = {"score.png": tuple(opts.private_plot)}
    if set(opts.private_plot) == {"histogram", "sample"}:
        layouts |= {"score_histogram.png": ("histogram",), "score_sample.png": ("sample",)}
    for name, panels in layouts.items():
        out = plot_score(result, private_plot=panels, sampling=sampling, control=control,
                         group_weights=opts.group_weights, samples=samples)
        out.save(str(base / name), dpi=opts.dpi)
