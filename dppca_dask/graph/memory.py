"""Memory of a run's tasks, planned from public shapes before any data is read.

A worker task of the package holds one of two things at its peak:

* a Kendall work unit (:meth:`~dppca_dask.graph.kendall_layout.KendallLayout.worker_memory_estimate`:
  two row blocks, the kernel's panel and temporaries, its p×p partial sums);
* a row-block task of the O(n·p) passes (scores, clipped sums, counts, moments, the covariance's
  XᵀX): its input chunk as float64, :data:`ROW_TASK_COPIES` copies of it (the stored chunk, the
  float64 conversion, the kernel's temporaries) plus the p×p partial sum.

The driver gathers only fixed-size aggregates (a p×p matrix, histograms, k-vectors); the
exceptions, which gather one value per row, are named in :class:`MemoryPlan`. The p×p matrices
themselves are checked against the machine's available memory by :func:`check_matrix_memory`.
"""

from __future__ import annotations

from dataclasses import dataclass

from dppca_dask.errors import InputError

__all__ = ["MATRIX_COPIES", "ROW_TASK_COPIES", "MemoryPlan", "check_matrix_memory", "row_task_bytes"]

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


MATRIX_COPIES = 6
"""p×p float64 matrices a loading release holds at its peak: the Kendall sum (on the worker that
reduces it and on the driver), its noisy copy, the eigendecomposition's input, workspace and
eigenvectors."""


def check_matrix_memory(p: int, owner: str, *, available: int | None = None) -> None:
    """Refuse, before any data is read, a p×p release that cannot fit this machine's memory.

    ``available`` defaults to the memory the operating system reports as available now. The
    estimate is :data:`MATRIX_COPIES` p×p float64 matrices (a function of p only).
    """
    need = MATRIX_COPIES * 8 * p * p
    if available is None:
        import psutil  # type: ignore[import-untyped]  # a dependency of distributed

        available = int(psutil.virtual_memory().available)
    if need > available:
        raise InputError(
            f"{owner} needs about {need / 2 ** 30:.3g} GiB of memory for the {p} x {p} matrix of "
            f"{p} columns ({MATRIX_COPIES} float64 copies: the sum, its noise and its "
            f"post-processing), but {available / 2 ** 30:.3g} GiB are available. Use fewer "
            f"columns (memory grows with p squared).")
