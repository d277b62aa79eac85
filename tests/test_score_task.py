"""The ``score`` task of a run config: plan, run outputs (dataset, samples, PNGs), bad options."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from dppca_dask import ConfigError, ScoreResult, load_result
from dppca_dask.cli import main
from dppca_dask.errors import ParameterError
from dppca_dask.io.datasets import write_demo_dataset
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.runner import plan_run

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return Path(write_demo_dataset(tmp_path_factory.mktemp("data") / "gau.zarr",
                                   n_per_group=60))


def _settings(tmp_path: Path, data: Path, **score) -> dict:
    return {
        "input": {"path": str(data), "array": "X", "group": "group"},
        "task": "score",
        "privacy": {"eps": 8.0, "delta": 1e-5},
        "score": {"method": ["add", "sparse"], "bins": [6, 5], "dpi": 30, **score},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(tmp_path / "out"), "formats": ["zarr"]},
        "budget_ledger": {"enabled": False},
        "rng": 3,
    }


def test_score_task__run_writes_dataset_samples_and_pngs(tmp_path, demo):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(_settings(tmp_path, demo, samples_format="csv")))
    result = CliRunner().invoke(main, ["run", str(path), "--quiet"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "config.yaml", "report.html", "samples.csv", "score.png", "score.zarr",
        "score_histogram.png", "score_sample.png", "summary.txt"]
    fit = load_result(out / "score.zarr")
    assert isinstance(fit, ScoreResult) and fit.groups == [f"group{i}" for i in range(1, 6)]
    samples = pd.read_csv(out / "samples.csv")
    assert list(samples.columns) == ["target", "method", "pc_x", "pc_y", "group"]
    assert set(samples["target"]) == {"add", "sparse"}  # no non-private target without references
    assert (samples.groupby("target").size() == 300).all()
    for name in ("score.png", "score_histogram.png", "score_sample.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    assert "Differentially Private PC Scores" in (out / "summary.txt").read_text()
    assert "rng: 3" not in (out / "config.yaml").read_text()


def test_score_task__plan_shows_the_budget_split(tmp_path, demo):
    cfg = RunConfig.from_dict(_settings(tmp_path, demo, frame="durfee"))  # CLI default: capped
    text = plan_run(cfg).render()
    assert "Privacy budget plan for dp_score (implicit equal split):" in text
    assert "frame (durfee): eps = 1.4 ; delta = 0 -> 4 Durfee searches of eps 0.35 each" in text
    assert "histogram: eps = 2.6 ; delta = 5e-06 for each method (add, sparse), 6 x 5 bins" in text
    assert "add: gaussian, L2 sensitivity 1.414214" in text
    assert "sparse: laplace scale" in text


@pytest.mark.parametrize(
    ("score", "error", "match"),
    [
        ({"axes": [1, 1]}, ParameterError, "two different components"),
        ({"axes": [1, 21]}, ParameterError, r"not exceeding the number of directions \(20\)"),
        ({"sampling": {"method": ["center"], "bandwidth_scale": {"uniform": 0.2}}},
         ParameterError, "covering every requested method"),
    ],
)
def test_score_task__bad_options_fail_at_plan_time(tmp_path, demo, score, error, match):
    cfg = RunConfig.from_dict(_settings(tmp_path, demo, **score))
    with pytest.raises(error, match=match):
        plan_run(cfg)


@pytest.mark.parametrize(
    "score",
    [{"method": ["gauss"]}, {"bins": [0, 3]}, {"axes": [1]}, {"frame": "box"},
     {"samples_format": "xlsx"}, {"sampling": {"sample_size": 0}}, {"unknown": 1},
     {"group_weights": "equal"}],
)
def test_score_task__config_validation(tmp_path, demo, score):
    with pytest.raises(ConfigError, match="config key 'score"):
        RunConfig.from_dict(_settings(tmp_path, demo, **score))


def test_score_task__example_config_is_valid():
    data = yaml.safe_load((REPO / "configs" / "score.yaml").read_text())
    cfg = RunConfig.from_dict(data)
    assert cfg.task == "score" and cfg.input.group == "group"
    assert np.isclose(cfg.privacy.eps, 2.0)
