"""Tip labels of the loading and biplot panels, placed without overlaps (issue 34 item 7).

A label names one tip (or several tips close together) and is created next to it, on the side
the arrow points to; it carries ``_dppca_tip`` (the tip, data coordinates) and ``_dppca_count``
(how many variables it names). :func:`place_labels` runs once the figure is laid out (the labels
are kept out of the layout) and places each label of a panel in turn, longest arrow first, at the
first free spot among candidates around its tip -- nearest first, then turning away from the
arrow's direction, then further out -- in display space. A spot is free when the label's box lies
inside the panel (and off its legend) and overlaps no label placed before it. A label placed away
from its usual spot gets a thin leader line to its tip; a label with no free spot is hidden, and
the number of variables left unlabelled is returned so that the caption can say so. Greedy and
deterministic: the same figure gives the same placement.

matplotlib is imported by the callers; this module only uses the artists it is given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["ANGLES", "RADII", "place_labels"]

ANGLES = (0, 25, -25, 50, -50, 75, -75, 100, -100, 130, -130, 180)
"""Directions tried around a tip, in degrees from the arrow's own direction."""
RADII = (1.0, 1.8, 2.8, 4.0, 5.5, 7.5, 10.0, 13.0)
"""Distances tried from the tip, in multiples of the label's usual offset."""
_MARGIN = 2.0  # pixels kept free inside the panel and between labels
_LEADER = "#9A9A9A"


def _size(text: Any, renderer: Any) -> tuple[float, float, float, float]:
    """(width, height) of the label's box with its background patch and margins, and the
    patch's margins (mx, my) around the text itself."""
    box = text.get_window_extent(renderer)
    patch = text.get_bbox_patch()
    mx = my = 0.0
    if patch is not None:
        text.update_bbox_position_size(renderer)
        outer = patch.get_window_extent(renderer)
        mx, my = max(0.0, (outer.width - box.width) / 2), max(0.0, (outer.height - box.height) / 2)
    return box.width + 2 * mx, box.height + 2 * my, mx, my


def _alignment(dx: float, dy: float) -> tuple[str, str]:
    ha = "left" if dx > 0.35 else ("right" if dx < -0.35 else "center")
    va = "bottom" if dy > 0.35 else ("top" if dy < -0.35 else "center")
    return ha, va


def _box(ax_: float, ay: float, w: float, h: float, mx: float, my: float, ha: str, va: str
         ) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of a label anchored at (ax_, ay) with that alignment."""
    x0 = {"left": ax_ - mx, "right": ax_ - w + mx, "center": ax_ - w / 2}[ha]
    y0 = {"bottom": ay - my, "top": ay - h + my, "center": ay - h / 2}[va]
    return x0, y0, x0 + w, y0 + h


def _overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]
              ) -> bool:
    return a[0] < b[2] + _MARGIN and b[0] < a[2] + _MARGIN and a[1] < b[3] + _MARGIN \
        and b[1] < a[3] + _MARGIN


def _inside(box: tuple[float, float, float, float], frame: Any) -> bool:
    return (box[0] >= frame.x0 + _MARGIN and box[2] <= frame.x1 - _MARGIN
            and box[1] >= frame.y0 + _MARGIN and box[3] <= frame.y1 - _MARGIN)


def _leader(text: Any, tip: tuple[float, float]) -> None:
    x, y = text.get_position()
    (line,) = text.axes.plot([tip[0], x], [tip[1], y], color=_LEADER, linewidth=0.5, zorder=1)
    line.set_in_layout(False)


def _covers(box: tuple[float, float, float, float], points: Any) -> bool:
    """Whether the box (with its margin) covers any of the display points (an n x 2 array)."""
    if points is None or len(points) == 0:
        return False
    x, y = points[:, 0], points[:, 1]
    return bool(((x > box[0] - _MARGIN) & (x < box[2] + _MARGIN) & (y > box[1] - _MARGIN)
                 & (y < box[3] + _MARGIN)).any())


def _search(tip: tuple[float, float], u: tuple[float, float], base: float,
            size: tuple[float, float, float, float], frame: Any,
            placed: list[tuple[float, float, float, float]], points: Any
            ) -> tuple[tuple[float, float], str, str, tuple[float, float, float, float], bool] | None:
    w, h, mx, my = size
    for r in RADII:
        for angle in ANGLES:
            c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
            vx, vy = c * u[0] - s * u[1], s * u[0] + c * u[1]
            ha, va = _alignment(vx, vy)
            anchor = (tip[0] + r * base * vx, tip[1] + r * base * vy)
            box = _box(*anchor, w, h, mx, my, ha, va)
            if _inside(box, frame) and not any(_overlaps(box, b) for b in placed) \
                    and not _covers(box, points):
                return anchor, ha, va, box, r > 1.0 or angle != 0
    return None


def place_labels(renderer: Any, texts: Sequence[Any]) -> int:
    """Place the labels ``texts`` of one panel (in order of preference) without overlaps; returns
    how many variables the labels that found no free spot would have named (they are hidden).

    A spot that covers none of the panel's tips (``ax._dppca_tips``, data coordinates) is
    preferred; a label finds one that does only when there is no other. Call after the figure's
    layout (``plots._style.lay_out``); positions are set in the labels' own (data) coordinates.
    """
    import numpy as np

    if not texts:
        return 0
    ax = texts[0].axes
    frame = ax.get_window_extent(renderer)
    placed: list[tuple[float, float, float, float]] = []
    legend = ax.get_legend()
    if legend is not None and legend.get_visible():
        lb = legend.get_window_extent(renderer)
        placed.append((lb.x0, lb.y0, lb.x1, lb.y1))
    trans = ax.transData
    tips = getattr(ax, "_dppca_tips", None)
    points = None if tips is None else trans.transform(np.asarray(tips, dtype=np.float64))
    dropped = 0
    for text in texts:
        tip = getattr(text, "_dppca_tip", None)
        if tip is None:
            continue
        tx, ty = trans.transform(tip)
        px, py = text.get_transform().transform(text.get_position())
        dx, dy = px - tx, py - ty
        length = math.hypot(dx, dy)
        base = max(length, 6.0)
        u = (dx / length, dy / length) if length > 1e-9 else (1.0, 0.0)
        size = _size(text, renderer)
        spot = (_search((tx, ty), u, base, size, frame, placed, points)
                or _search((tx, ty), u, base, size, frame, placed, None))
        if spot is None:
            text.set_visible(False)
            dropped += int(getattr(text, "_dppca_count", 1))
            continue
        anchor, ha, va, box, moved = spot
        text.set_position(text.get_transform().inverted().transform(anchor))
        text.set_horizontalalignment(ha)
        text.set_verticalalignment(va)
        placed.append(box)
        if moved:
            _leader(text, tip)
    return dropped
