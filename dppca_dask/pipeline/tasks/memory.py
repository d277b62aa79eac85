"""The memory plan of a run config (:class:`~dppca_dask.graph.memory.MemoryPlan`), from the
input's metadata only: shown by ``plan``, checked by ``run`` against the workers' limit."""

from __future__ import annotations

from typing import Any

from dppca_dask.graph.kendall_layout import kendall_layout
from dppca_dask.graph.memory import MATRIX_COPIES, MemoryPlan, row_task_bytes
from dppca_dask.io.data import SourceInfo
from dppca_dask.pipeline.config import RunConfig

__all__ = ["memory_plan"]


def memory_plan(cfg: RunConfig, src: SourceInfo, setup: Any) -> MemoryPlan:
    """Peak bytes of the largest worker task and of the largest driver-side gather (``setup``:
    the task's bound options; its resolved Kendall mode when it has a loading stage)."""
    n, p = src.n, src.p
    rows = max(src.chunks[0]) if src.chunks[0] else n
    task, what = row_task_bytes(rows, p), f"a row-block task over {rows:,} rows x {p} columns"
    opts: Any = getattr(cfg, cfg.task, None)
    mode = getattr(setup, "pairs", None)
    if mode is not None and n >= 2:
        layout = kendall_layout(n, p, block_rows=opts.block_rows, pairs=mode,
                                pair_block=opts.pair_block)
        unit = layout.worker_memory_estimate(getattr(opts, "cpp_option", True))
        if unit > task:
            task = unit
            what = (f"a Kendall work unit: two blocks of {max(layout.block_sizes):,} rows x {p} "
                    "columns and the kernel's buffers")
    driver, driver_what = MATRIX_COPIES * 8 * p * p, f"{MATRIX_COPIES} p x p matrices"
    per_row = (getattr(opts, "frame", None) == "smooth"
               or (cfg.task in ("score", "pca") and getattr(opts, "non_private", False)))
    if per_row:
        scores = 2 * 8 * n
        driver += scores
        why = "smooth frame" if getattr(opts, "frame", None) == "smooth" else "non-private reference"
        driver_what += f" and the {n:,} x 2 scores ({why})"
    return MemoryPlan(task, what, driver, driver_what)
