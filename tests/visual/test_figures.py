"""Rendered figures and reports of the demo, scikit-learn's bundled datasets and a blown-up
frame (issue 17 item 7): mechanical checks on every figure drawn, every report's figures
once, the run-time table, and a headless-Chromium screenshot of each report.

Artefacts (PNGs, reports, screenshots) go to ``$DPPCA_ARTEFACTS`` or ``tmp/artefacts/visual``
under the repository, so they can be looked at after the run (``python -m tests.visual.render
OUT`` renders the same without the checks).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.visual.render import chromium, render_all

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("visual")]  # -n: one render of the figures

ROOT = Path(__file__).resolve().parents[2]
MIN_PANEL_IN = 2.0


@pytest.fixture(scope="session")  # once per xdist worker: the module's tests share a group
def rendered():
    out = Path(os.environ.get("DPPCA_ARTEFACTS", ROOT / "tmp" / "artefacts" / "visual"))
    out.mkdir(parents=True, exist_ok=True)
    return render_all(out)


def _texts(fig: Any) -> list[Any]:
    """The texts a draw shows: tick labels only of the ticks inside the view."""
    from matplotlib.text import Text

    ticks, drawn = set(), []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                ticks.update({id(tick.label1), id(tick.label2)})
            for tick in axis._update_ticks():
                drawn += [lab for lab in (tick.label1, tick.label2) if lab.get_visible()]
    others = [t for t in fig.findobj(Text) if id(t) not in ticks]
    return [t for t in others + drawn if t.get_visible() and t.get_text().strip()
            and (t.get_alpha() is None or t.get_alpha() > 0)]


def figure_problems(fig: Any) -> list[str]:
    """Text outside the canvas, overlapping text boxes, panels under MIN_PANEL_IN inches."""
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    canvas = fig.bbox
    problems = []
    boxes = []
    for t in _texts(fig):
        box = t.get_window_extent(renderer)
        if box.width == 0 or box.height == 0:
            continue
        name = t.get_text().replace("\n", " ")[:40]
        if box.x0 < canvas.x0 - 1 or box.y0 < canvas.y0 - 1 or box.x1 > canvas.x1 + 1 \
                or box.y1 > canvas.y1 + 1:
            problems.append(f"text outside the canvas: {name!r}")
        boxes.append((name, box.shrunk(0.98, 0.9)))  # touching edges are not an overlap
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            if ba.overlaps(bb):
                problems.append(f"overlapping texts: {a!r} and {b!r}")
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>" or hasattr(ax, "_colorbar") \
                or not (ax.has_data() or ax.images):
            continue
        box = ax.get_window_extent(renderer)
        if min(box.width, box.height) / fig.dpi < MIN_PANEL_IN:
            problems.append(f"panel {ax.get_title()!r} is {box.width / fig.dpi:.1f} x "
                            f"{box.height / fig.dpi:.1f} in")
    return problems


def test_figure_problems__finds_overlaps_and_escapes():
    # the checker must be able to fail: two texts on top of each other, one off the canvas
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 4))
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    ax.text(0.5, 0.5, "first label")
    ax.text(0.5, 0.5, "second label")
    ax.text(1.5, 0.5, "far right", transform=ax.transAxes)
    found = figure_problems(fig)
    assert any("overlapping" in p for p in found)
    assert any("outside the canvas" in p and "far right" in p for p in found)


def test_rendered__figures_have_no_overlaps_escapes_or_strips(rendered):
    problems = []
    for case, out in rendered.items():
        for path, fig in out.figures.items():
            assert Path(path).stat().st_size > 5000, path
            if fig is not None:
                problems += [f"{case} {Path(path).name}: {p}" for p in figure_problems(fig)]
    assert not problems, "\n".join(problems)


_IMG = re.compile(r'<img src="data:image/png;base64,([^"]+)"')


def test_rendered__every_report_shows_each_figure_once(rendered):
    from dppca_dask.report.html import figure_files

    for case, out in rendered.items():
        for report in out.reports:
            page = report.read_text(encoding="utf-8")
            images = [hashlib.sha256(base64.b64decode(m)).hexdigest()
                      for m in _IMG.findall(page)]
            assert images, f"{case}: {report} has no figure"
            assert len(images) == len(set(images)), f"{case}: {report} repeats a figure"
            assert "No figures." not in page
            if report.parent.name in ("run",) or case == "demo":
                files = [(c, f) for c, f in figure_files(report.parent)
                         if not f.name.endswith(".screenshot.png")]  # this test's artefacts
                assert len(images) == len(files), (case, [c for c, _ in files])
                assert {f.name for _, f in files} >= {"pca_biplot.png", "loading.png",
                                                      "scree_pve.png"}


def test_rendered__reports_show_no_run_time(rendered):
    """Run times depend on the data: the operator's terminal shows them, no report does."""
    for case, out in rendered.items():
        for report in out.reports:
            page = report.read_text(encoding="utf-8")
            assert "Run times" not in page and "Wall time" not in page, (case, report)
            assert 'id="timings"' not in page and "Data pass 1" not in page, (case, report)


def test_rendered__covariance_report_shows_the_matrix_and_rho(rendered):
    page = rendered["covariance"].reports[0].read_text(encoding="utf-8")
    assert "Private covariance" in page and "Implied correlation" not in page.split("<h2>")[0]
    assert "<th>rho</th>" in page and "<th>eps (from rho)</th>" in page
    assert "several" not in page and "each requested method" not in page


def test_rendered__reports_screenshot_with_chromium(rendered):
    if chromium() is None:
        pytest.skip("chromium is not installed (Debian package 'chromium'): no screenshots")
    for case, out in rendered.items():
        assert len(out.screenshots) == len(out.reports), case
        for shot in out.screenshots:
            assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 20000, shot
