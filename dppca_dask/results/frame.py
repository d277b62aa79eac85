"""The released score frame: :class:`Frame`, per-axis centre and radius, and its inflation.

:mod:`dppca_dask.pca.frame` releases it (docs/design/frame.md); a score result rebuilds it from its
stored metadata (:attr:`dppca_dask.results.score.ScoreResult.frame`) and the plots draw within it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dppca_dask._rformat import format_r_scalar

__all__ = ["INFLATE", "RESOLUTION_VARIABLES", "Cell", "Frame", "frame_resolution",
           "frame_resolution_lines", "frame_resolution_variables", "stored_cells"]

INFLATE = 0.20
"""The frame's limits are centre ± (1 + INFLATE)·radius per axis."""


Cell = tuple[float, float]
"""A search cell ``(lower, upper)``; an end the search did not bound is infinite."""


@dataclass(frozen=True)
class Frame:
    """A released frame: per-axis centre and radius; limits are centre ± (1 + inflate)·radius.

    ``scale``: the capped frame's private S per axis (its radius lies in [S, U·S]); kept on the
    driver for checks, not written to results.

    ``center_cell``/``radius_cell``: per axis, the cell of the search's public grid that the
    released centre (radius) stands for -- the interval in which the searched statistic (the
    median of the scores; the radius the exact quantile would give) lies when the search stops
    where its noise-free version would: the frame's *search resolution* (docs/intervals.md).
    Functions of the released indices and the public grids; ``None`` for the smooth frame
    (no grid) and for frames rebuilt from stores written before they existed.
    """

    method: str
    center: tuple[float, float]
    radius: tuple[float, float]
    inflate: float = INFLATE
    scale: tuple[float, float] | None = None
    center_cell: tuple[Cell, Cell] | None = None
    radius_cell: tuple[Cell, Cell] | None = None

    def limits(self, axis: int) -> tuple[float, float]:
        half = (1.0 + self.inflate) * self.radius[axis]
        return (self.center[axis] - half, self.center[axis] + half)

    @property
    def xlim(self) -> tuple[float, float]:
        return self.limits(0)

    @property
    def ylim(self) -> tuple[float, float]:
        return self.limits(1)


def frame_resolution(frame: Frame, axis: int) -> float:
    """How far each limit of ``axis`` can be from the limit of a noise-free search on the same
    grids: the farther end of the centre's cell from the centre plus (1 + inflate) times the
    radius cell's width (``inf`` where a search ran off its grid, NaN without cells).

    >>> f = Frame("ranged", (0.0, 0.0), (2.0, 2.0), center_cell=((-0.1, 0.1), (-0.1, 0.1)),
    ...           radius_cell=((1.9, 2.0), (1.9, 2.0)))
    >>> round(frame_resolution(f, 0), 6)
    0.22
    """
    if frame.center_cell is None or frame.radius_cell is None:
        return math.nan
    lo, hi = frame.center_cell[axis]
    r_lo, r_hi = frame.radius_cell[axis]
    centre = max(frame.center[axis] - lo, hi - frame.center[axis])
    return float(centre + (1.0 + frame.inflate) * (r_hi - r_lo))


RESOLUTION_VARIABLES = ("frame_center_cell_lower", "frame_center_cell_upper",
                        "frame_radius_cell_lower", "frame_radius_cell_upper", "frame_resolution")
"""The score result's variables (axis) of the frame's search resolution."""

_CELL = ("{side} end of the cell of the public search grid that the released frame {what} "
         "stands for: the searched {stat} lies in the cell when the search stops where its "
         "noise-free version would (search resolution, not a noise interval; +-inf: the search "
         "ran off its grid; NaN: no grid, smooth frame)")


def frame_resolution_variables(frame: Frame) -> dict[str, Any]:
    """The score result's resolution variables (axis) of ``frame`` (NaN without cells):
    ``frame_center_cell_lower/upper``, ``frame_radius_cell_lower/upper`` and
    ``frame_resolution`` (:func:`frame_resolution`). Released values: ``private = 1``."""
    nan = (math.nan, math.nan)
    centre = frame.center_cell or (nan, nan)
    radius = frame.radius_cell or (nan, nan)
    stats = {"centre": ("centre", "median of the scores"),
             "radius": ("radius", "quantile times the radius factor (the radius a noise-free "
                                  "search would release)")}
    out: dict[str, Any] = {}
    for key, cells in (("center", centre), ("radius", radius)):
        what, stat = stats["centre" if key == "center" else "radius"]
        for i, side in enumerate(("lower", "upper")):
            out[f"frame_{key}_cell_{side}"] = (
                ("axis",), np.array([cells[0][i], cells[1][i]], dtype=np.float64),
                {"private": 1, "description": _CELL.format(side=side, what=what, stat=stat)})
    out["frame_resolution"] = (
        ("axis",), np.array([frame_resolution(frame, 0), frame_resolution(frame, 1)]),
        {"private": 1, "description": "search resolution of the frame limits: each limit is "
         "within this of the limit a noise-free search on the same grids gives (the centre "
         "cell's far end plus (1 + inflate) times the radius cell's width); it does not cover "
         "the searches' noise nor the sampling variability"})
    return out


def stored_cells(data: Any) -> tuple[tuple[Cell, Cell] | None, tuple[Cell, Cell] | None]:
    """``(center_cell, radius_cell)`` from a score dataset's resolution variables (``None``
    for a store written before they existed, or a smooth frame's NaN)."""
    out: list[tuple[Cell, Cell] | None] = []
    for key in ("center", "radius"):
        lo_name, hi_name = f"frame_{key}_cell_lower", f"frame_{key}_cell_upper"
        if lo_name not in data:
            out.append(None)
            continue
        lo, hi = np.asarray(data[lo_name]), np.asarray(data[hi_name])
        if np.isnan(lo).any() or np.isnan(hi).any():
            out.append(None)
            continue
        out.append(((float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1]))))
    return out[0], out[1]


def frame_resolution_lines(frame: Frame, labels: Sequence[str]) -> list[str]:
    """The summary's lines on the frame's search resolution (none without cells)."""
    if frame.center_cell is None or frame.radius_cell is None:
        if frame.method == "smooth":
            return ["Frame resolution: no search grid (smooth-sensitivity frame, continuous "
                    "noise)"]
        return []

    def num(v: float) -> str:
        return format_r_scalar(float(f"{v:.4g}")) if math.isfinite(v) else \
            ("Inf" if v > 0 else "-Inf")

    lines = ["Frame search resolution (the public grid cells the released centre and radius "
             "stand for; not a noise interval):"]
    for a, label in enumerate(labels[:2]):
        (c_lo, c_hi), (r_lo, r_hi) = frame.center_cell[a], frame.radius_cell[a]
        lines.append(f"  {label}: centre cell [{num(c_lo)}, {num(c_hi)}] (width "
                     f"{num(c_hi - c_lo)}), radius cell [{num(r_lo)}, {num(r_hi)}]; limits "
                     f"resolved to +- {num(frame_resolution(frame, a))}")
    return lines
