"""The ``pca`` task: plan (refusals before data), run outputs, inspect, the example config."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from dppca_dask import ConfigError, PCAResult, ScoreResult, load_result
from dppca_dask.cli import main
from dppca_dask.io.datasets import write_demo_dataset
from dppca_dask.pipeline.config import RunConfig, load_config
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.pipeline.runner import plan_run
from tests.helpers import figures_not_rendered

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return Path(write_demo_dataset(tmp_path_factory.mktemp("data") / "gau.zarr",
                                   n_per_group=60))


def _settings(tmp_path: Path, data: Path, privacy=None, **pca) -> dict:
    return {
        "input": {"path": str(data), "array": "X", "group": "group"},
        "task": "pca",
        "privacy": privacy or {"eps": 9.0, "delta": 1e-5},
        "pca": {"k": 4, "scree_control": {"clipped": {"C_clip": 150}}, "bins": 5, "dpi": 30,
                **pca},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(tmp_path / "out"), "formats": ["zarr", "netcdf"]},
        "rng": 3,
    }


def _write(tmp_path: Path, settings: dict) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


@pytest.mark.slow  # draws every pca figure, and the report's, for real: 4-6 s
def test_pca_task__run_writes_one_store_figures_samples_report(tmp_path, demo, ledger_path):
    cfg = _write(tmp_path, _settings(tmp_path, demo, samples_format="csv"))
    result = CliRunner().invoke(main, ["run", str(cfg)])
    assert result.exit_code == 0, result.output
    assert "DP PCA Summary" in result.output and "report.html" in result.output
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "config.yaml", "loading.png", "pca.nc", "pca.png", "pca.zarr", "pca_biplot.png",
        "report.html", "samples.csv", "scree_pve.png", "summary.txt"]
    fit = load_result(out / "pca.zarr")
    assert isinstance(fit, PCAResult) and fit.metadata["passes"] == 4
    assert fit.score.groups == [f"group{i}" for i in range(1, 6)]
    assert repr(load_result(out / "pca.nc")) == repr(fit)
    samples = pd.read_csv(out / "samples.csv")
    assert list(samples.columns) == ["target", "method", "pc_x", "pc_y", "group"]
    assert set(samples["target"]) == {"geometric"} and len(samples) == 300  # the CLI default
    page = (out / "report.html").read_text()
    assert page.count('<img src="data:image/png;base64,') == 3  # pca, loading, scree_pve
    assert "Scree values and PVE" in page and "Score frame and histograms" in page
    assert "4 data passes" in page and "rng: null" in page
    # one read of the input serves both stages
    assert "scree centre: radius counts and clipped sums, score frame: centre counts" in page
    # The persistent ledger reserved exactly what the release spent (one method each).
    (reservation,) = Ledger(ledger_path).reservations()  # the deployment's (tests/conftest.py)
    assert reservation.status == "released" and reservation.task == "pca"
    assert len(reservation.records) == len(fit.ledger)
    assert reservation.eps == pytest.approx(fit.metadata["ledger_total"]["eps"])
    assert reservation.delta == pytest.approx(fit.metadata["ledger_total"]["delta"])
    # inspect: the run directory, the store, and one part of the store.
    for target, head in ((out, "Differentially Private PCA"),
                         (out / "pca.zarr", "Differentially Private PCA"),
                         (out / "pca.zarr" / "score", "Differentially Private PC Scores")):
        shown = CliRunner().invoke(main, ["inspect", str(target)])
        assert shown.exit_code == 0, shown.output
        assert shown.output.startswith(head)
    assert isinstance(load_result(out / "pca.zarr" / "score"), ScoreResult)


def test_pca_task__reference_sampled_at_an_explicit_size(tmp_path, demo):
    settings = _settings(tmp_path, demo, non_private=True, plots=False,
                         sampling={"method": ["center"], "sample_size": 50})
    with figures_not_rendered():  # the report's figures are still built, not drawn
        outcome = CliRunner().invoke(main, ["run", str(_write(tmp_path, settings)), "-q"])
    assert outcome.exit_code == 0, outcome.output
    samples = pd.read_parquet(tmp_path / "out" / "samples.parquet")
    assert samples.groupby("target").size().to_dict() == {"geometric": 50, "nonprivate": 50}
    assert set(samples["method"]) == {"center"}
    assert not list((tmp_path / "out").glob("*.png"))


@pytest.mark.parametrize(("privacy", "pca", "match"), [
    ({"eps": 1.0, "delta": 1e-5, "split": {"loading": 0.5, "scree": 0.5}}, {},
     "must match the required components"),
    (None, {"scree_control": {}}, "C_clip"),
    (None, {"k": 21}, "'pca.k' config key"),
    (None, {"axes": [1, 21]}, "'pca.axes' config key"),
])
def test_pca_task__plan_and_run_refuse_before_reading_data(tmp_path, demo, privacy, pca, match):
    cfg = _write(tmp_path, _settings(tmp_path, demo, privacy, **pca))
    for command in ("plan", "run"):
        result = CliRunner().invoke(main, [command, str(cfg), "-q"] if command == "run"
                                    else [command, str(cfg)])
        assert result.exit_code == 1 and match in result.output
    assert not (tmp_path / "out").exists()


def test_pca_task__config_needs_exactly_one_sampling_method(tmp_path, demo):
    settings = _settings(tmp_path, demo, sampling={"method": ["center", "uniform"]})
    with pytest.raises(ConfigError, match="exactly one sampling method"):
        RunConfig.from_dict(settings)


def test_pca_task__example_config_plans(monkeypatch, tmp_path, demo):
    cfg = load_config(REPO / "configs" / "pca.yaml")
    assert cfg.task == "pca" and cfg.rng is None
    cfg = cfg.model_copy(update={"input": cfg.input.model_copy(update={"path": str(demo)})})
    text = plan_run(cfg).render()
    assert "Privacy budget plan for dp_pca (implicit equal split)" in text
    assert "the input is read 4 times in all" in text
    assert "clipped: per component eps = 0.02666667" in text
