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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ASPECT_FACTOR", "HATCH", "MECHANISM_NAMES", "MIN_PANEL", "NOT_IDENTIFIABLE",
           "PAD_INCHES", "TITLE_Y", "Raster", "angle_text", "caption_line", "compose_png",
           "direction_flags", "direction_label", "direction_note", "figure", "finish", "footer",
           "frame_panel", "group_colors", "hatch_cells", "hcl_color", "hcl_palette",
           "keep_inside", "lay_out", "mechanism_title", "rasterize", "save_figure",
           "style_panel", "titles_outside", "wrap_title", "write_png"]

ASPECT_FACTOR = 3.0
"""Score and biplot panels keep a 1:1 aspect only while the frame's radii differ by at most this
factor; a wider (or taller) frame gets panels of a bounded shape and independent axis scales, so
that a frame 10x wider than tall is not drawn as a strip (issue 17)."""

MIN_PANEL = 2.6
"""The smallest side, in inches, of a score, biplot or histogram panel."""

TITLE_Y = 1.0
"""Panel titles sit at the top of their panel (plus matplotlib's title pad): given explicitly,
so that no draw searches for top tick labels to clear (no panel has any), which took a tenth
of each draw."""

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


MECHANISM_NAMES = {"nonprivate": "non-private histogram", "add": "Gaussian histogram",
                   "sparse": "sparse (stability) histogram",
                   "geometric": "two-sided geometric histogram"}
"""Histogram mechanisms spelled out for titles (the non-private one is marked "not private")."""


def mechanism_title(target: str) -> str:
    """The histogram's name with a capital first letter ("Gaussian histogram", ...)."""
    name = MECHANISM_NAMES[target]
    name = name[0].upper() + name[1:]
    return f"{name} (not private)" if target == "nonprivate" else name


def wrap_title(text: str, width_in: float, size: float) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at font ``size`` (bold)."""
    import textwrap

    chars = max(8, int(width_in * 72.0 / (0.62 * size)))
    return "\n".join(textwrap.wrap(text, chars, break_long_words=False, break_on_hyphens=False)) or text


NOT_IDENTIFIABLE = "#8C8C8C"
"""Axis labels and heatmap columns of directions that are not identifiable at the release's
budget are drawn in this grey (and the heatmap's columns hatched)."""
HATCH = "////"
"""The hatch of what is indistinguishable from noise: histogram cells and covariance entries
whose interval reaches 0, heatmap columns of directions that are not identifiable."""


def direction_flags(part: Any) -> dict[str, tuple[float, bool]]:
    """Per component of a loading release (or dp_pca's loading part): (angle bound in degrees,
    identifiable), from its ``angle_upper`` and ``direction_identifiable`` variables; empty for
    a release without them (a store written before the intervals, a supplied matrix)."""
    import numpy as np

    ds = getattr(part, "dataset", None)
    if ds is None or "angle_upper" not in ds or "direction_identifiable" not in ds:
        return {}
    comps = [str(c) for c in ds["component"].values]
    angle = np.asarray(ds["angle_upper"].values, dtype=np.float64)
    ident = np.asarray(ds["direction_identifiable"].values).astype(bool)
    return {c: (float(a), bool(i)) for c, a, i in zip(comps, angle, ident, strict=True)}


def angle_text(angle: float) -> str:
    """The angle bound as a figure shows it: "≤ 35°", or "no bound" at 90°."""
    return "no angle bound" if angle >= 90.0 else f"≤ {angle:.2g}°"


def direction_label(component: str, flags: Mapping[str, tuple[float, bool]], *,
                    long: bool = True) -> tuple[str, str | None]:
    """(axis label, colour or None) of ``component``: its angle bound (``long``) and, when it is
    not identifiable, that it is not, in :data:`NOT_IDENTIFIABLE` grey."""
    if component not in flags:
        return component, None
    angle, ident = flags[component]
    if ident:
        return (f"{component} (angle {angle_text(angle)})" if long else component), None
    text = (f"{component}: not identifiable ({angle_text(angle)})" if long
            else f"{component} (not identifiable)")
    return text, NOT_IDENTIFIABLE


def direction_note(flags: Mapping[str, tuple[float, bool]], components: Sequence[str], *,
                   hatched: bool = False) -> str | None:
    """The caption line naming the shown components that are not identifiable (None if none)."""
    shown = set(components)
    grey = [c for c in flags if c in shown and not flags[c][1]]  # in the components' order
    if not grey:
        return None
    names = ", ".join(grey[:6]) + (f" and {len(grey) - 6} more" if len(grey) > 6 else "")
    how = "grey, hatched" if hatched else "grey"
    return (f"{how}: {names} not identifiable at this budget (95% bound on the angle to the "
            "noise-free direction ≥ 45°): indistinguishable from noise; bounds cover the "
            "mechanism's noise, not sampling")


def hatch_cells(ax: Any, mask: Any, x_edges: Any, y_edges: Any, *, color: str = "#3A3A3A",
                zorder: float = 2.5) -> Any:
    """Hatch the cells ``mask[i, j]`` (row i between ``y_edges[i]`` and ``y_edges[i + 1]``,
    column j between ``x_edges[j]`` and ``x_edges[j + 1]``, data coordinates) as one patch (one
    path whatever the number of cells); returns it, or None when no cell is masked."""
    import numpy as np
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path as MplPath

    rows, cols = np.nonzero(np.asarray(mask, dtype=bool))
    if rows.size == 0:
        return None
    x0, x1 = np.asarray(x_edges)[cols], np.asarray(x_edges)[cols + 1]
    y0, y1 = np.asarray(y_edges)[rows], np.asarray(y_edges)[rows + 1]
    polys = np.stack([np.stack([x0, y0], 1), np.stack([x1, y0], 1), np.stack([x1, y1], 1),
                      np.stack([x0, y1], 1)], axis=1)
    path = MplPath.make_compound_path_from_polys(polys)
    patch = PathPatch(path, facecolor="none", edgecolor=color, linewidth=0.0, hatch=HATCH,
                      zorder=zorder)
    ax.add_patch(patch)
    return patch


def frame_panel(xlim: Sequence[float], ylim: Sequence[float], size: float
                ) -> tuple[float, float, bool]:
    """(width, height, equal aspect) in inches of a panel showing the frame ``xlim`` x ``ylim``.

    Radii within :data:`ASPECT_FACTOR` of each other: the frame's own shape at 1:1 aspect, the
    longer side ``size``. Otherwise the shape is bounded at 1.6:1 (or 1:1.6) and the axes scale
    independently. No side is below :data:`MIN_PANEL`.

    Examples
    --------
    >>> frame_panel((-1, 1), (-1, 1), 3.4)
    (3.4, 3.4, True)
    >>> frame_panel((-2162, 3.3), (-66, 112), 3.4)
    (4.16, 2.6, False)
    """
    wx, wy = float(xlim[1] - xlim[0]), float(ylim[1] - ylim[0])
    ratio = wy / wx if wx > 0 else 1.0  # height / width
    equal = 1.0 / ASPECT_FACTOR <= ratio <= ASPECT_FACTOR
    if not equal:
        ratio = 1.0 / 1.6 if ratio < 1 else 1.6
    size = max(size, MIN_PANEL)
    w, h = (size, size * ratio) if ratio <= 1 else (size / ratio, size)
    if min(w, h) < MIN_PANEL:
        grow = MIN_PANEL / min(w, h)
        w, h = w * grow, h * grow
    return round(w, 2), round(h, 2), equal


def caption_line(meta: Mapping[str, Any], *, k: int | None = None) -> str:
    """The figure's caption line: n, the release's (ε, δ) (ρ for zCDP) and k when given.

    Examples
    --------
    >>> caption_line({"n": 5000, "privacy": {"total": {"eps": 1.0, "delta": 1e-05}}}, k=10)
    'n = 5,000 · ε = 1 · δ = 1e-05 · k = 10 released components'
    """
    from dppca_dask._rformat import format_r_scalar

    privacy = meta.get("privacy", {})
    total = privacy.get("total", privacy)
    parts = [f"n = {int(meta['n']):,}"]
    if total.get("eps") is not None:
        parts.append(f"ε = {format_r_scalar(float(total['eps']))}")
    if total.get("delta") is not None:
        parts.append(f"δ = {format_r_scalar(float(total['delta']))}")
    if total.get("rho") is not None:
        parts.append(f"ρ = {format_r_scalar(float(total['rho']))} (zCDP)")
    if k is not None:
        parts.append(f"k = {k} released components")
    return " · ".join(parts)


def footer(fig: Any, caption: str, note: str | None = None) -> Any:
    """The footer under every panel (in the layout, so it never covers an axis label): the
    caption line(s), then the non-private note when the figure shows a non-private element;
    lines wider than the figure are wrapped."""
    import textwrap

    chars = max(40, int(fig.get_figwidth() * 72.0 / (0.55 * 9)))
    lines = [wrapped for line in (caption if note is None else f"{caption}\n{note}").split("\n")
             for wrapped in (textwrap.wrap(line, chars) or [line])]
    return fig.supxlabel("\n".join(lines), fontsize=9,
                         color="dimgray" if note is None else "#B22222")


def keep_inside(fig: Any, texts: Sequence[Any]) -> None:
    """Move each text (in data coordinates of its axes) so that its box lies inside its axes
    (or, for figure texts, inside the figure); call after the layout is drawn."""
    renderer = fig._get_renderer()
    for t in texts:
        holder = t.axes.get_window_extent(renderer) if t.axes is not None else fig.bbox
        box = t.get_window_extent(renderer)
        patch = t.get_bbox_patch()
        if patch is not None:
            box = patch.get_window_extent(renderer)
        dx = max(0.0, holder.x0 + 2 - box.x0) - max(0.0, box.x1 - (holder.x1 - 2))
        dy = max(0.0, holder.y0 + 2 - box.y0) - max(0.0, box.y1 - (holder.y1 - 2))
        if dx or dy:
            trans = t.get_transform()
            x, y = trans.transform(t.get_position())
            t.set_position(trans.inverted().transform((x + dx, y + dy)))


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
    equal: bool = True,
) -> None:
    """The minimal theme with a black border, zero expansion and pretty ticks; 1:1 aspect when
    ``equal`` (see :func:`frame_panel`)."""
    from matplotlib.ticker import MaxNLocator

    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal" if equal else "auto", adjustable="box")
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
    ax.set_title(title, fontsize=title_size, fontweight="bold", loc="center", y=TITLE_Y)
    ax.set_facecolor("white")


_NO_DATES = {"svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None},
             "eps": {"CreationDate": None}, "ps": {"CreationDate": None}}


PAD_INCHES = 0.1
"""White space kept around a figure's content when it is saved."""


def lay_out(fig: Any) -> Any:
    """Run the figure's (constrained) layout once and set every panel's final box (its aspect
    applied), without drawing; returns the renderer, so that labels can be measured and placed
    in display space before the one draw that renders the figure (:func:`rasterize`)."""
    renderer = fig._get_renderer()
    engine = fig.get_layout_engine()
    if engine is None:
        fig.draw_without_rendering()
        return renderer
    for _ in range(2):
        engine.execute(fig)
        for ax in fig.axes:  # what Axes.draw does first
            locator = ax.get_axes_locator()
            ax.apply_aspect(locator(ax, renderer) if locator else None)
        if not titles_outside(fig, renderer):
            break
    return renderer


def titles_outside(fig: Any, renderer: Any) -> bool:
    """Whether a panel title reaches past the figure's edges. The constrained layout measures
    each title on the panel's box before the layout: a panel of fixed aspect whose box the
    layout changes (its height, as the aspect keeps it) gets its title moved after the fact,
    and a two-line title can end above the figure, where no crop brings it back. A second
    pass, measured on the first one's boxes, settles it (only figures that need it pay)."""
    top, right = fig.bbox.y1 + 0.5, fig.bbox.x1 + 0.5
    for ax in fig.axes:
        if ax.title.get_text():
            box = ax.title.get_window_extent(renderer)
            if box.y1 > top or box.x0 < -0.5 or box.x1 > right:
                return True
    return False


def finish(fig: Any, renderer: Any = None) -> None:
    """The last step of every plot function: mark the figure as one of this package's, so that
    :func:`save_figure` writes it as a PNG in one draw. ``renderer``: the figure was laid out
    by :func:`lay_out` (labels were placed on that layout), and the PNG keeps that layout as long
    as the figure is not changed; otherwise the layout runs in the PNG's own draw."""
    fig._dppca_finished = True
    fig._dppca_laid_out = renderer is not None
    fig.stale = False


@dataclass(frozen=True)
class Raster:
    """One rendering of a figure: its RGB ``pixels`` (rows top to bottom) at ``dpi`` and the
    pixel boxes (row0, row1, col0, col1) of the axes asked for (their tight boxes: ticks,
    labels and title)."""

    pixels: Any
    dpi: int
    boxes: dict[str, tuple[int, int, int, int]]

    def content(self) -> Any:
        """The pixels cropped to the content: every pixel that is not the white background."""
        import numpy as np

        ink = (self.pixels != 255).any(axis=2)
        rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
        if not rows.size:
            return self.pixels
        return self.pixels[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]

    def crop(self, name: str) -> Any:
        r0, r1, c0, c1 = self.boxes[name]
        return self.pixels[r0:r1, c0:c1]


def rasterize(figure: Any, dpi: int, axes: Mapping[str, Any] | None = None) -> Raster:
    """Draw ``figure`` once at ``dpi`` into an RGB buffer (see :func:`save_figure`); ``axes``
    (name -> Axes of the figure): the boxes to remember, for :func:`compose_png`.

    A figure laid out by :func:`lay_out` and unchanged since keeps that layout (its labels were
    placed on it); any other runs its layout in this draw."""
    import numpy as np
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    engine = figure.get_layout_engine()
    frozen = getattr(figure, "_dppca_laid_out", False) and not figure.stale
    old_dpi = figure.dpi
    canvas = FigureCanvasAgg(figure)
    boxes: dict[str, tuple[int, int, int, int]] = {}
    try:
        figure.dpi = dpi
        if frozen:  # no layout engine: the draw keeps the layout the labels were placed on
            with rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
                figure.set_layout_engine(None)
        canvas.draw()
        if not frozen and engine is not None and titles_outside(figure, canvas.get_renderer()):
            canvas.draw()  # the layout's second pass (see titles_outside)
        pixels = np.asarray(canvas.buffer_rgba())[..., :3].copy()
        height = pixels.shape[0]
        renderer = canvas.get_renderer()
        for name, ax in (axes or {}).items():
            box = ax.get_tightbbox(renderer).padded(2.0)  # the spines' width included
            boxes[name] = (max(0, int(np.floor(height - box.y1))),
                           min(height, int(np.ceil(height - box.y0))),
                           max(0, int(np.floor(box.x0))),
                           min(pixels.shape[1], int(np.ceil(box.x1))))
    finally:
        if frozen:
            figure.set_layout_engine(engine)
        figure.dpi = old_dpi
    figure.stale = False  # the layout stands (or was redone in this draw)
    return Raster(pixels, dpi, boxes)


def write_png(pixels: Any, target: Any, dpi: int) -> None:
    """RGB ``pixels`` with :data:`PAD_INCHES` of white around them, as a PNG with matplotlib's
    "Software" text and nothing else (no date)."""
    import matplotlib
    import numpy as np
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    pad = round(PAD_INCHES * dpi)
    out = np.pad(pixels, ((pad, pad), (pad, pad), (0, 0)), constant_values=255)
    info = PngInfo()
    info.add_text("Software", f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/")
    Image.fromarray(np.ascontiguousarray(out), mode="RGB").save(target, format="png", pnginfo=info,
                                                               dpi=(dpi, dpi))


def compose_png(rows: Sequence[Sequence[Any]], target: Any, dpi: int, gap_inches: float = 0.25
                ) -> None:
    """Pixel blocks (RGB arrays) side by side in rows, each row centred, rows one under the
    other, written by :func:`write_png`: a combined figure from panels already rendered."""
    import numpy as np

    gap = round(gap_inches * dpi)
    lines = []
    for row in rows:
        height = max(block.shape[0] for block in row)
        parts = []
        for i, block in enumerate(row):
            top = (height - block.shape[0]) // 2
            parts.append(np.pad(block, ((top, height - block.shape[0] - top), (0, 0), (0, 0)),
                                constant_values=255))
            if i < len(row) - 1:
                parts.append(np.full((height, gap, 3), 255, dtype=np.uint8))
        lines.append(np.concatenate(parts, axis=1))
    width = max(line.shape[1] for line in lines)
    stacked = []
    for i, line in enumerate(lines):
        left = (width - line.shape[1]) // 2
        stacked.append(np.pad(line, ((0, 0), (left, width - line.shape[1] - left), (0, 0)),
                              constant_values=255))
        if i < len(lines) - 1:
            stacked.append(np.full((gap, width, 3), 255, dtype=np.uint8))
    write_png(np.concatenate(stacked, axis=0), target, dpi)


def save_figure(figure: Any, target: Any, *, dpi: int, format: str | None = None,
                tight: bool = True) -> None:
    """``figure.savefig`` with nothing in the file but the figure: no creation date (SVG, PDF,
    PostScript write the time of writing, which depends on how long the run took) and SVG ids
    from a fixed salt, so the same figure gives the same bytes.

    A PNG of a figure drawn by this package's plot functions (:func:`finish`) is rendered
    once (:func:`rasterize`) and cropped to its content: what ``bbox_inches="tight"`` gives for
    these figures (constrained layout keeps every artist of the layout inside the figure, and
    tip labels stay inside their panels), in one draw instead of three (layout, tight box,
    rendering)."""
    from matplotlib import rc_context

    fmt = (format or Path(str(target)).suffix.lstrip(".") or "png").lower()
    if fmt == "png" and tight and getattr(figure, "_dppca_finished", False):
        write_png(rasterize(figure, dpi).content(), target, dpi)
        return
    options: dict[str, Any] = {"dpi": dpi, "format": fmt}
    if tight:
        options.update(bbox_inches="tight", pad_inches=PAD_INCHES)
    if fmt in _NO_DATES:
        options["metadata"] = _NO_DATES[fmt]
    with rc_context({"svg.hashsalt": "dppca_dask"}):
        figure.savefig(target, **options)


class SavedFigure:
    """Mixin of the plot results: ``save(path)`` and the notebook PNG representation.

    Subclasses are frozen dataclasses with a ``figure`` field (a matplotlib Figure).
    """

    figure: Any

    def save(self, path: str, *, dpi: int = 150) -> str:
        """Write the figure (format from the extension, e.g. ``.png``)."""
        save_figure(self.figure, path, dpi=dpi)
        return str(path)

    def _repr_png_(self) -> bytes:  # pragma: no cover - notebooks
        import io

        buf = io.BytesIO()
        save_figure(self.figure, buf, dpi=100, format="png")
        return buf.getvalue()
