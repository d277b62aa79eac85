"""Render the figures and reports of issue 17 item 7 (``python -m tests.visual.render OUT``).

Cases, each into ``OUT/<case>/``:

* ``demo`` -- ``dppca-dask demo`` (the CLI's main job): its run directory;
* ``breast_cancer``, ``digits``, ``wine`` -- scikit-learn's bundled datasets (breast_cancer at
  its raw scales), each written to Zarr and run through the CLI's runner (task ``pca``, groups =
  the target) into ``OUT/<case>/run/``, and through the Python API (``fit.plot()`` and friends)
  into ``OUT/<case>/python/``;
* ``blown_up`` -- the wine fit with its private frame blown up 20x on purpose (the histogram
  re-binned onto the wider grid: what a badly estimated frame releases), plotted and reported;
* ``covariance`` -- ``dp_covariance`` of wine: ``CovarianceResult.plot()`` and its report.

Every report is screenshot with headless Chromium when ``chromium`` is on the PATH
(``<report>.screenshot.png`` beside it). Nothing here spends a real ledger's budget: the runs
use the ledger the environment names (the tests point it at a temporary file).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

EPS, DELTA = 2.0, 1e-5
BLOW_UP = 20.0
CLIP = {"breast_cancer": 2e7, "digits": 4000.0, "wine": 4e6}
"""Public clip levels of the squared centred scores (from the datasets' documented ranges)."""


@dataclass(frozen=True)
class Rendered:
    """What a case wrote: figure PNGs (path -> the matplotlib Figure when drawn here) and
    reports (with their screenshots, when Chromium ran)."""

    figures: dict[str, Any]
    reports: list[Path]
    screenshots: list[Path]


def sklearn_frame(name: str) -> pd.DataFrame:
    from sklearn import datasets

    data = getattr(datasets, f"load_{name}")()
    frame = pd.DataFrame(np.asarray(data.data, dtype=np.float64),
                         columns=[str(c) for c in data.feature_names])
    frame["group"] = [str(data.target_names[t]) for t in data.target]
    return frame


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(report: Path) -> Path | None:
    """A full-page-ish PNG of ``report`` taken by headless Chromium (None without it)."""
    exe = chromium()
    if exe is None:
        return None
    out = report.with_suffix(".screenshot.png")
    subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={out}", "--window-size=1400,3000",
                    report.resolve().as_uri()], check=True, capture_output=True, timeout=120)
    return out


def _run_config(name: str, store: Path, out: Path) -> dict[str, Any]:
    return {
        "input": {"path": str(store), "array": "X", "group": "group"},
        "task": "pca",
        "privacy": {"eps": EPS, "delta": DELTA},
        "pca": {"k": 5, "scree_control": {"clipped": {"C_clip": CLIP[name]}},
                "calibration": "analytic", "sensitivity": "tight"},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(out), "formats": ["zarr"], "overwrite": True},
        "rng": 7,
    }


def run_case(name: str, base: Path) -> Rendered:
    """One scikit-learn dataset through the CLI's runner and through the Python API."""
    from dppca_dask import clipped_control, dp_pca, privacy_control
    from dppca_dask.io.convert import write_frames
    from dppca_dask.pipeline.config import RunConfig
    from dppca_dask.pipeline.runner import execute
    from dppca_dask.report.html import write_report

    base.mkdir(parents=True, exist_ok=True)
    frame = sklearn_frame(name)
    store = base / f"{name}.zarr"
    if not store.exists():
        write_frames([frame], store, rows=len(frame), group_column="group", source=name,
                     duplicates="drop")
    outcome = execute(RunConfig.from_dict(_run_config(name, store, base / "run")),
                      progress=False)
    run = Path(outcome.directory)
    figures: dict[str, Any] = {str(p): None for p in sorted(run.glob("*.png"))}
    reports = [run / "report.html"]

    py = base / "python"
    py.mkdir(exist_ok=True)
    x = frame.drop(columns="group").drop_duplicates()
    groups = frame.loc[x.index, "group"].to_numpy()
    fit = dp_pca(x, privacy=privacy_control(eps=EPS, delta=DELTA), k=5, group=groups,
                 scree_control=clipped_control(C_clip=CLIP[name]), calibration="analytic",
                 sensitivity="tight", rng=11)
    drawn = {"pca_biplot.png": fit.plot(rng=3), "pca_all.png": fit.plot("all", rng=3),
             "loading.png": fit.loading.plot(), "scree_pve.png": fit.scree.plot("pve")}
    for file, item in drawn.items():
        fig = getattr(item, "figure", item)
        fig.savefig(py / file, dpi=150, bbox_inches="tight", pad_inches=0.1)
        figures[str(py / file)] = fig
    reports.append(Path(write_report(py / "report.html", fit, rng=5)))
    return Rendered(figures, reports, [s for r in reports if (s := screenshot(r))])


class _Proxy:
    """A result whose listed attributes are replaced (the rest delegate to ``target``)."""

    def __init__(self, target: Any, **overrides: Any) -> None:
        self._target = target
        self._overrides = overrides

    def __getattr__(self, name: str) -> Any:
        overrides = object.__getattribute__(self, "_overrides")
        if name in overrides:
            return overrides[name]
        return getattr(object.__getattribute__(self, "_target"), name)

    def __repr__(self) -> str:
        return repr(self._target)


def blow_up_frame(score: Any, factor: float = BLOW_UP) -> Any:
    """The ScoreResult ``score`` with its frame radius multiplied by ``factor``: the released
    probabilities re-binned onto the same number of bins over the wider frame (cell mass moved
    to the wider cell holding the old cell's centre), as if the frame search had come out
    ``factor`` times too wide."""
    ds = score.dataset.copy()
    radius = ds["frame_radius"].values * factor
    center = ds["frame_center"].values
    inflate = score.metadata["inflate"]
    xb_old, yb_old = score.x_breaks, score.y_breaks
    half = (1.0 + inflate) * radius
    xb = np.linspace(center[0] - half[0], center[0] + half[0], xb_old.size)
    yb = np.linspace(center[1] - half[1], center[1] + half[1], yb_old.size)
    cx = np.clip(np.searchsorted(xb, (xb_old[:-1] + xb_old[1:]) / 2) - 1, 0, xb.size - 2)
    cy = np.clip(np.searchsorted(yb, (yb_old[:-1] + yb_old[1:]) / 2) - 1, 0, yb.size - 2)

    def rebin(values: np.ndarray) -> np.ndarray:
        out = np.zeros_like(values)
        for j in range(values.shape[-2]):
            for i in range(values.shape[-1]):
                out[..., cy[j], cx[i]] += values[..., j, i]
        return out

    for var in list(ds.data_vars):
        da = ds[var]
        if da.dims[-2:] == ("y_bin", "x_bin"):
            ds[var] = (da.dims, rebin(da.values), da.attrs)
    half_new = (1.0 + inflate) * radius
    ds["frame_radius"] = (ds["frame_radius"].dims, radius, ds["frame_radius"].attrs)
    ds["frame_lower"] = (("axis",), center - half_new, ds["frame_lower"].attrs)
    ds["frame_upper"] = (("axis",), center + half_new, ds["frame_upper"].attrs)
    ds["x_breaks"] = (ds["x_breaks"].dims, xb, ds["x_breaks"].attrs)
    ds["y_breaks"] = (ds["y_breaks"].dims, yb, ds["y_breaks"].attrs)
    ds = ds.assign_coords(x_lower=("x_bin", xb[:-1]), x_upper=("x_bin", xb[1:]),
                          y_lower=("y_bin", yb[:-1]), y_upper=("y_bin", yb[1:]))
    return type(score)(ds)


def blown_up_case(base: Path) -> Rendered:
    """The wine fit with a 20x frame, through ``plot_pca`` and the report."""
    from dppca_dask import clipped_control, dp_pca, privacy_control
    from dppca_dask.plots.pca import plot_pca
    from dppca_dask.report.html import write_report

    base.mkdir(parents=True, exist_ok=True)
    frame = sklearn_frame("wine")
    x, groups = frame.drop(columns="group"), frame["group"].to_numpy()
    fit = dp_pca(x, privacy=privacy_control(eps=EPS, delta=DELTA), k=5, group=groups,
                 scree_control=clipped_control(C_clip=CLIP["wine"]), calibration="analytic",
                 sensitivity="tight", rng=11)
    blown = _Proxy(fit, score=blow_up_frame(fit.score))
    figures: dict[str, Any] = {}
    for file, panels in (("pca_biplot.png", ("score", "biplot")), ("pca_all.png", "all")):
        fig = plot_pca(blown, panels=panels, rng=3).figure
        fig.savefig(base / file, dpi=150, bbox_inches="tight", pad_inches=0.1)
        figures[str(base / file)] = fig
    score_fig = blow_up_frame(fit.score).plot(rng=3).figure
    score_fig.savefig(base / "score.png", dpi=150, bbox_inches="tight", pad_inches=0.1)
    figures[str(base / "score.png")] = score_fig
    report = Path(write_report(base / "report.html", blown,
                               figures=[("Blown-up frame: scores and biplot",
                                         figures[str(base / "pca_biplot.png")])]))
    return Rendered(figures, [report], [s for s in [screenshot(report)] if s])


def covariance_case(base: Path) -> Rendered:
    from dppca_dask import dp_covariance
    from dppca_dask.report.html import write_report

    base.mkdir(parents=True, exist_ok=True)
    frame = sklearn_frame("wine").drop(columns="group")
    bounds = np.ceil(frame.abs().max().to_numpy() * 1.1)  # public: the documented ranges
    fit = dp_covariance(frame, preset="seed", eps=2.0, delta=1e-5, bounds=bounds, rng=4)
    fig = fit.plot().figure
    fig.savefig(base / "covariance.png", dpi=150, bbox_inches="tight", pad_inches=0.1)
    report = Path(write_report(base / "report.html", fit))
    return Rendered({str(base / "covariance.png"): fig}, [report],
                    [s for s in [screenshot(report)] if s])


def demo_case(base: Path) -> Rendered:
    """``dppca-dask demo`` through the CLI (in-process, click's runner)."""
    from click.testing import CliRunner

    from dppca_dask.cli import main

    result = CliRunner().invoke(main, ["demo", "--directory", str(base), "-q"])
    if result.exit_code != 0:
        raise RuntimeError(f"dppca-dask demo failed: {result.output}")
    run = max(p for p in base.iterdir() if p.is_dir() and (p / "report.html").exists())
    report = run / "report.html"
    return Rendered({str(p): None for p in sorted(run.glob("*.png"))}, [report],
                    [s for s in [screenshot(report)] if s])


CASES = {"demo": demo_case, "breast_cancer": lambda b: run_case("breast_cancer", b),
         "digits": lambda b: run_case("digits", b), "wine": lambda b: run_case("wine", b),
         "blown_up": blown_up_case, "covariance": covariance_case}


def render_all(out: Path, cases: list[str] | None = None) -> dict[str, Rendered]:
    import matplotlib

    matplotlib.use("Agg")
    return {name: CASES[name](out / name) for name in (cases or list(CASES))}


if __name__ == "__main__":  # pragma: no cover - the make-figures script
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "tmp/artefacts/figures")
    done = render_all(target, sys.argv[2:] or None)
    for case, rendered in done.items():
        print(case, *rendered.figures, *rendered.reports, *rendered.screenshots, sep="\n  ")
