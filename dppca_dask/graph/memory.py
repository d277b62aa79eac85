"""Memory of a run's tasks, planned from public shapes before any data is read.

A worker task of the package holds one of two things at its peak:

* a Kendall work unit (:meth:`~dppca_dask.graph.compute.KendallLayout.worker_memory_estimate`:
  two row blocks, the kernel's panel and temporaries, its p×p partial sums);
* a row-block task of the O(n·p) passes (scores, clipped sums, counts, moments, the covariance's
  XᵀX): its input chunk as float64, :data:`ROW_TASK_COPIES` copies of it (the stored chunk, the
  float64 conversion, the kernel's temporaries) plus the p×p partial sum.

The driver gathers only fixed-size aggregates (a p×p matrix, histograms, k-vectors); the
exceptions, which gather one value per row, are named in :class:`MemoryPlan`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ROW_TASK_COPIES", "MemoryPlan", "row_task_bytes"]

ROW_TASK_COPIES = 4
"""Copies of a row chunk a row-block task holds at once (stored, float64, two temporaries)."""


def row_task_bytes(rows: int, p: int) -> int:
    """Peak bytes of a row-block task over ``rows`` rows and ``p`` columns.

    Examples
    --------
    >>> row_task_bytes(4096, 20) // 2**10
    2566
    """
    return ROW_TASK_COPIES * 8 * rows * p + 2 * 8 * p * p


@dataclass(frozen=True)
class MemoryPlan:
    """The largest worker task and the largest driver-side gather of a run, in bytes."""

    task: int
    task_what: str
    driver: int
    driver_what: str

    def lines(self) -> list[str]:
        return [
            "Memory (planned from the shape; run refuses a cluster whose workers cannot hold "
            "one task):",
            f"  peak per task: about {_mib(self.task)} ({self.task_what})",
            f"  largest driver-side gather: about {_mib(self.driver)} ({self.driver_what})",
        ]


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.1f} MiB"
