"""Shared plot styling (docs/spec/SPEC_dppca.md §9.1): the R package's minimal theme, palettes, ticks.

* minimal theme, base font 12, black panel border of width 0.5, no grid, titles centred, bold;
* ticks like R ``pretty(lim, 5)`` (``MaxNLocator(nbins=5, steps=[1, 2, 5, 10])``);
* group colours: HCL "Dark 3" qualitative (L = 60, C = 80, hues 360·i/G), the colorspace package's
  palette, computed here with R's ``hcl()`` conversion (polar LUV → sRGB, D65).

matplotlib is imported inside the functions that need it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["figure", "group_colors", "hcl_color", "hcl_palette", "style_panel"]

_WHITE_U, _WHITE_V = 0.1978398, 0.4683363


def hcl_color(hue: float, chroma: float = 80.0, luminance: float = 60.0) -> str:
    """R's ``hcl(h, c, l)`` as a hex string (out-of-gamut channels clipped).

    Examples
    --------
    >>> hcl_color(0), hcl_color(180)
    ('#E16A86', '#00AD9A')
    """
    h = math.radians(hue)
    u, v = chroma * math.cos(h), chroma * math.sin(h)
    y = 100.0 * ((luminance + 16.0) / 116.0) ** 3 if luminance > 8 else 100.0 * luminance / 903.3
    uu = u / (13.0 * luminance) + _WHITE_U
    vv = v / (13.0 * luminance) + _WHITE_V
    x = 9.0 * y * uu / (4.0 * vv)
    z = -x / 3.0 - 5.0 * y + 3.0 * y / vv
    x, y, z = x / 100.0, y / 100.0, z / 100.0
    rgb = (3.240479 * x - 1.537150 * y - 0.498535 * z,
           -0.969256 * x + 1.875992 * y + 0.041556 * z,
           0.055648 * x - 0.204043 * y + 1.057311 * z)

    def gamma(t: float) -> float:
        t = 1.055 * t ** (1 / 2.4) - 0.055 if t > 0.0031308 else 12.92 * t
        return min(max(t, 0.0), 1.0)

    return "#" + "".join(f"{round(255 * gamma(t)):02X}" for t in rgb)


def hcl_palette(n: int) -> list[str]:
    """``n`` colours of the HCL "Dark 3" qualitative palette.

    Examples
    --------
    >>> hcl_palette(5)
    ['#E16A86', '#AA9000', '#00AA5A', '#00A6CA', '#B675E0']
    """
    return [hcl_color(360.0 * i / n) for i in range(n)]


def group_colors(levels: Sequence[str], user: Mapping[str, str] | None = None) -> dict[str, str]:
    """Colour per group: the user's, then (if every label is a colour name) the labels, else HCL.

    Groups missing from ``user`` are filled from the palette (by their position among all groups).
    """
    palette = hcl_palette(len(levels))
    if user:
        return {g: str(user.get(g, palette[i])) for i, g in enumerate(levels)}
    if all(_is_color_name(g) for g in levels):
        return {g: g for g in levels}
    return dict(zip(levels, palette, strict=True))


def _is_color_name(label: str) -> bool:
    """A colour name or hex code, as R's colour names go (not matplotlib's "C1" or "0.5")."""
    from matplotlib.colors import CSS4_COLORS

    return label.lower() in CSS4_COLORS or re.fullmatch(r"#[0-9a-fA-F]{6}([0-9a-fA-F]{2})?",
                                                        label) is not None


def figure(width: float, height: float) -> Any:
    """A pyplot-free figure with constrained layout."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def style_panel(
    ax: Any,
    *,
    xlim: tuple[float, float],
    ylim: tuple[float, float],
    title: str,
    xlabel: str,
    ylabel: str,
    base_size: float = 12.0,
    title_size: float = 14.0,
) -> None:
    """The minimal theme with a black border, 1:1 aspect, zero expansion and pretty ticks."""
    from matplotlib.ticker import MaxNLocator

    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal", adjustable="box")
    ax.margins(0)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 5, 10]))
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 5, 10]))
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(True)
        spine.set_color("black")
        spine.set_linewidth(0.5)
    ax.tick_params(labelsize=base_size * 0.8, colors="#4D4D4D", length=2.75, width=0.5)
    ax.set_xlabel(xlabel, fontsize=base_size)
    ax.set_ylabel(ylabel, fontsize=base_size)
    ax.set_title(title, fontsize=title_size, fontweight="bold", loc="center")
    ax.set_facecolor("white")


class SavedFigure:
    """Mixin of the plot results: ``save(path)`` and the notebook PNG representation.

    Subclasses are frozen dataclasses with a ``figure`` field (a matplotlib Figure).
    """

    figure: Any

    def save(self, path: str, *, dpi: int = 150) -> str:
        """Write the figure (format from the extension, e.g. ``.png``)."""
        self.figure.savefig(path, dpi=dpi, bbox_inches="tight", pad_inches=0.1)
        return str(path)

    def _repr_png_(self) -> bytes:  # pragma: no cover - notebooks
        import io

        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=100, bbox_inches="tight", pad_inches=0.1)
        return buf.getvalue()
