"""The HTML report: valid, self-contained (no network), every figure, the ledger and its total."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from dppca_dask import dp_loading, dp_score, privacy_control
from dppca_dask.graph.passlog import record_passes
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.runner import execute
from dppca_dask.report.html import figure_files, render_report, write_report

matplotlib.use("Agg")

PC = privacy_control(eps=4, delta=1e-4)
VOID = {"meta", "img", "br", "hr", "link", "input", "col", "source", "wbr"}


class Checker(HTMLParser):
    """Tag balance, ids, and every attribute that could point at a resource."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.ids: set[str] = set()
        self.srcs: list[str] = []
        self.hrefs: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if "src" in attrs:
            self.srcs.append(attrs["src"])
        if "href" in attrs:
            self.hrefs.append(attrs["href"])
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> (open: {self.stack[-3:]})")
            return
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def check_html(page: str) -> Checker:
    assert page.startswith("<!DOCTYPE html>")
    checker = Checker()
    checker.feed(page)
    checker.close()
    assert checker.errors == [] and checker.stack == []
    # Self-contained: no scripts, stylesheets, frames or remote references of any kind.
    assert not {"script", "link", "iframe", "object", "embed"} & set(checker.tags)
    assert all(s.startswith("data:image/png;base64,") for s in checker.srcs)
    for src in checker.srcs:
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert all(h.startswith("#") and h[1:] in checker.ids for h in checker.hrefs)
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
    assert not re.search(r"(https?:|ftp:)?//[a-z0-9]", text, re.IGNORECASE)
    assert "url(" not in page and "@import" not in page
    return checker


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(3).normal(size=(400, 4)) * [3.0, 2.0, 1.0, 0.5]


def _ledger_total_row(page: str) -> str:
    (foot,) = re.findall(r"<h3>Ledger</h3><table>.*?<tfoot>(.*?)</tfoot>", page, re.DOTALL)
    return foot


def test_render_report__loading_defaults(data):
    fit = dp_loading(data, privacy=PC)  # unseeded: a seeded release is NOT PRIVATE
    page = render_report(fit)
    checker = check_html(page)
    assert len(checker.srcs) == 1  # the loading plot, drawn from the result
    text = " ".join(checker.text)
    for title in ("Dataset", "Figures", "PC directions", "Privacy budget and ledger",
                  "Printed result and summary"):
        assert title in text
    assert "Total spent (basic composition)" in _ledger_total_row(page)
    assert "gaussian_symmetric_matrix" in page
    assert "The ledger total equals the allocation spent by this release." in page
    assert "no non-private reference was stored" in page and "NOT PRIVATE" not in page


def test_render_report__grouped_score_with_reference(data):
    groups = np.repeat(["a", "b"], 200)
    fit = dp_score(data, privacy=PC, group=groups, non_private=True, bins=(5, 5), rng=1)
    page = render_report(fit, rng=2)
    checker = check_html(page)
    assert len(checker.srcs) == 1
    assert "NOT PRIVATE: not a private release as a whole" in page
    assert "non-private reference" not in page or "Outside the guarantee" in page
    assert "seeded by the caller" in page  # rng=1
    assert "Private frame (capped" in page and "Groups (sizes treated as public)" in page
    foot = _ledger_total_row(page)
    total = fit.metadata["ledger_total"]
    assert f">{total['eps']:g}<" in foot.replace(" ", "")
    # Every mechanism call (loading, the frame searches, the histogram) is one ledger row.
    (body,) = re.findall(r"<h3>Ledger</h3><table>.*?<tbody>(.*?)</tbody>", page, re.DOTALL)
    assert body.count("<tr>") == len(fit.ledger)


def test_write_report__given_figures_config_and_passes(data, tmp_path):
    import dask.array as da

    fig_a = dp_loading(data, privacy=PC, rng=1).plot(type="heatmap")
    fig_a.save(str(tmp_path / "loading.png"), dpi=30)
    (tmp_path / "extra_view.png").write_bytes((tmp_path / "loading.png").read_bytes())
    files = figure_files(tmp_path)
    assert [c for c, _ in files][1] == "Extra view"
    with record_passes() as passes:
        fit = dp_loading(da.from_array(data, chunks=100), privacy=PC, rng=1)
    cfg = RunConfig.from_dict({"input": {"path": "x.zarr"}, "privacy": {"eps": 4, "delta": 1e-4},
                               "output": {"directory": "out"}, "rng": 98765431})
    path = write_report(tmp_path / "r.html", fit, figures=files, config=cfg, passes=passes)
    page = Path(path).read_text()
    checker = check_html(page)
    assert len(checker.srcs) == 2
    assert "Figure 1. Private PC directions" in page and "Figure 2. Extra view" in page
    assert "Resolved config" in page and "rng: null" in page and "98765431" not in page
    assert "1 data pass:" in page and "Kendall pair sums" in page and "Input read" not in page
    # Run times depend on the data: never in the released report.
    assert "Seconds" not in page and "seconds" not in page.lower().replace("seconds)", "")


def _dataset(tmp_path: Path) -> Path:
    from dppca_dask.io.datasets import write_demo_dataset

    return Path(write_demo_dataset(tmp_path / "gau.zarr", n_per_group=60))


@pytest.mark.parametrize(("task", "passes", "pngs"), [
    ("loading", 1, ["loading.png"]),
    ("score", 4, ["score.png", "score_histogram.png", "score_sample.png"]),
])
def test_execute__writes_report_for_every_task(tmp_path, task, passes, pngs):
    data = _dataset(tmp_path)
    cfg = RunConfig.from_dict({
        "input": {"path": str(data), "array": "X", "group": "group" if task == "score" else None},
        "task": task, "privacy": {"eps": 4, "delta": 1e-4},
        "score": {"dpi": 40, "bins": 4}, "cluster": {"kind": "local", "n_workers": 1,
                                                     "processes": False},
        "output": {"directory": str(tmp_path / "out")}, "rng": 987654,
    })
    outcome = execute(cfg, progress=False)
    assert len(outcome.passes) == passes
    out = tmp_path / "out"
    for name in pngs:
        assert (out / name).exists()
    page = (out / "report.html").read_text()
    checker = check_html(page)
    assert len(checker.srcs) == 1  # the task's figures, less those a larger one already shows
    assert "Observations (n)</td><td>300<" in page and "Variables (p)</td><td>20<" in page
    assert f"{passes} data pass" in page and "Input read" in page
    assert "987654" not in page and "rng: null" in page
    assert ("private_plot:" in page) == (task == "score")  # only this task's option section
    assert "Total spent (basic composition)" in _ledger_total_row(page)


def test_render_report__figures_show_at_their_stated_resolution(data):
    """Every figure's text at one size: an image is as wide as its pixels at its dpi (CSS's
    96 px per inch), capped by the page."""
    import io

    from matplotlib.figure import Figure

    def png(width_in, dpi):
        buf = io.BytesIO()
        Figure(figsize=(width_in, 2)).savefig(buf, format="png", dpi=dpi)
        return buf.getvalue()

    fit = dp_loading(data, privacy=PC, calibration="analytic", rng=1)
    page = render_report(fit, figures=[("a", png(5, 150)), ("b", png(5, 60))])
    assert page.count('style="width:480px"') == 2  # 5 inches, whatever the pixel count
    check_html(page)
