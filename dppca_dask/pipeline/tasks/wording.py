"""Plan lines shared by the tasks: the numbers come from the release's planned records."""

from __future__ import annotations

from typing import Any

from dppca_dask._rformat import format_r_scalar
from dppca_dask.graph.kendall_layout import kendall_layout
from dppca_dask.io.data import SourceInfo
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.plan import Plan

__all__ = ["clipped_line", "kendall_lines", "loading_line", "release_steps"]


def loading_line(release: Plan, calibration: str, suffix: str = "") -> str:
    """The loading release in words, its numbers from the planned record."""
    r = release.first("loading", "gaussian_symmetric_matrix")
    assert r.sensitivity is not None  # public: the plan states them
    assert r.scale is not None
    return (f"  loading: eps = {format_r_scalar(r.eps)} ; delta = {format_r_scalar(r.delta)}"
            f" -> gaussian_symmetric_matrix, Frobenius sensitivity "
            f"{format_r_scalar(r.sensitivity)}, noise sd {format_r_scalar(r.scale)} "
            f"({calibration}){suffix}")


def release_steps(release: Plan, prefix: str, component: str = "scree") -> list[SpendRecord]:
    """The planned records of ``component`` whose note starts with ``prefix`` (the record
    builders' labels, e.g. ``"huber PC1: gradient step "``), in plan order."""
    return [r for r in release.records if r.component == component and r.note.startswith(prefix)]


def clipped_line(release: Plan, calibration: str) -> str:
    """The clipped method's per-component Gaussian, its numbers from the planned record."""
    r = next(r for r in release.records if r.component == "scree" and r.mechanism == "gaussian"
             and r.sensitivity is not None)  # the clipped means: the only public-scale ones
    assert r.sensitivity is not None
    assert r.scale is not None
    return (f"    clipped: per component eps = {format_r_scalar(r.eps)} ; delta = "
            f"{format_r_scalar(r.delta)} -> gaussian, sensitivity "
            f"{format_r_scalar(r.sensitivity)}, noise sd {format_r_scalar(r.scale)} "
            f"({calibration})")


def kendall_lines(setup: Any, src: SourceInfo, suffix: str = "") -> list[str]:
    """The Kendall pass of a task's loading stage (bound options: a
    :class:`~dppca_dask.pca.options.Setup`): the pairs mode (and why), its size."""
    opts, mode, why = setup.options, setup.pairs, setup.pairs_why
    layout = kendall_layout(src.n, src.p, block_rows=opts.block_rows, pairs=mode,
                            pair_block=opts.pair_block)
    what = ("all pairs" if mode == "all" else
            f"pairs within {layout.n_blocks} groups of <= {opts.pair_block} consecutive rows")
    return [f"  Kendall pass ({what}; {why}): {layout.n_pairs:,} pairs in "
            f"{layout.n_tiles:,} tiles, {layout.n_tasks:,} tasks{suffix}"]
