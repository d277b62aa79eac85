"""The CLI task ``scree``: config section, plan (no data read), run with its release and plots."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pytest
import xarray as xr
import yaml
from click.testing import CliRunner

from dppca_dask import ConfigError, load_result
from dppca_dask.cli import main
from dppca_dask.pipeline.config import load_config
from tests.helpers import write_store

matplotlib.use("Agg")


@pytest.fixture
def dataset(tmp_path) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(8)
    x = rng.normal(size=(400, 5)) * [4.0, 2.0, 1.0, 1.0, 0.5] + 1e3
    path = tmp_path / "data.zarr"
    write_store(path, x, names=list("abcde"), chunk=70)
    return path, x


def _config(tmp_path: Path, data: Path, **scree) -> Path:
    cfg = {
        "input": {"path": str(data), "array": "X"},
        "task": "scree",
        "privacy": {"eps": 1e20, "delta": 1e-5},
        "scree": {"k": 3, "method": ["clipped", "pmwm"], "non_private": True,
                  "controls": {"clipped": {"C_clip": 1e4},
                               "pmwm": {"a": 0, "b": 1e4, "trim_const": 1e-9, "eta": 0,
                                        "split_mode": False}},
                  "plot_formats": ["png", "svg"], **scree},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(tmp_path / "out"), "formats": ["zarr", "netcdf"]},
        "rng": 5,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_cli_scree__run_writes_release_and_plots(tmp_path, dataset):
    data, x = dataset
    runner = CliRunner()
    result = runner.invoke(main, ["run", str(_config(tmp_path, data)), "--quiet"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} >= {
        "config.yaml", "scree.nc", "scree.zarr", "summary.txt", "scree_pve.png",
        "scree_pve.svg", "scree_scree.png", "scree_scree.svg"}
    fit = load_result(out / "scree.zarr")
    assert fit.methods == ("clipped", "pmwm") and fit.k == 3
    assert list(fit.directions["variable"].values) == list("abcde")
    # ε = 1e20 with a data offset of 1000: the private centre and both methods recover the
    # exact variance along the released directions.
    np.testing.assert_allclose(fit.scree_raw.values,
                               np.tile(fit.nonprivate["direction_variance"].values, (2, 1)),
                               rtol=1e-6)
    assert "Differentially Private Scree Values" in (out / "summary.txt").read_text()
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["rng"] is None and saved["scree"]["controls"]["clipped"] == {"C_clip": 1e4}


def test_cli_scree__plan_reads_no_data_and_shows_noise(tmp_path, dataset):
    data, _ = dataset
    result = CliRunner().invoke(main, ["plan", str(_config(tmp_path, data, non_private=False))])
    assert result.exit_code == 0, result.output
    assert "clipped: per component eps = 1.333333e+19 ; delta = 1.333333e-06" in result.output
    assert "centre (private, shared): 20% of the scree budget" in result.output
    assert "Work (scree):" in result.output


@pytest.mark.parametrize(
    ("scree", "match"),
    [
        ({"controls": {"clipped": {"C_clip": -2}}}, r"config key 'scree.controls.clipped.C_clip' must be a float"),
        ({"controls": {"pmwm": {"eta": 0.5}}}, r"config key 'scree.controls.pmwm.eta' must be a float"),
        ({"method": ["robust"]}, r"scree.method"),
        ({"k": 0}, r"scree.k"),
    ],
)
def test_cli_scree__bad_controls_are_config_errors(tmp_path, dataset, scree, match):
    with pytest.raises(ConfigError, match=match):
        load_config(_config(tmp_path, dataset[0], **scree))


def test_cli_scree__missing_control_and_k_are_one_line_errors(tmp_path, dataset):
    data, _ = dataset
    runner = CliRunner()
    path = _config(tmp_path, data, method=["huber"], controls={})
    result = runner.invoke(main, ["plan", str(path)])
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: Missing required control parameter(s): 'k_min_m2', 'k_max_m2', 'm2_frac'. "
        "Set them in the config: scree.controls.huber.k_min_m2, scree.controls.huber.k_max_m2, "
        "scree.controls.huber.m2_frac (or --set scree.controls.huber.k_min_m2=...).")
    result = runner.invoke(main, ["plan", str(_config(tmp_path, data, k=6))])
    assert result.exit_code == 1
    assert "The 'scree.k' config key must be an int in the range [1, 5]" in result.output


def test_cli_scree__directions_from_a_saved_loading_release(tmp_path, dataset):
    from dppca_dask import dp_loading, privacy_control

    data, x = dataset
    saved = dp_loading(xr.DataArray(x, dims=("sample", "variable"),
                                    coords={"variable": list("abcde")}),
                       privacy=privacy_control(eps=1, delta=1e-5), rng=3)
    path = saved.to_zarr(tmp_path / "loading.zarr")
    cfg = _config(tmp_path, data, directions=str(path), center=[1000.0] * 5)
    plan = CliRunner().invoke(main, ["plan", str(cfg)])
    assert plan.exit_code == 0, plan.output
    assert "prior release" in plan.output and "Kendall pass" not in plan.output
    result = CliRunner().invoke(main, ["run", str(cfg), "-q"])
    assert result.exit_code == 0, result.output
    fit = load_result(tmp_path / "out" / "scree.zarr")
    np.testing.assert_array_equal(fit.directions.values, saved.directions.values[:, :3])
    assert fit.ledger[0].status == "prior" and fit.metadata["scree"]["center"] == "constants"
