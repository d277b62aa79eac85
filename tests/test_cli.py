"""The config file and the dppca-dask command line (run, plan, inspect, convert, demo)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from dppca_dask import ConfigError, load_result, spherical_kendall
from dppca_dask.cli import main
from dppca_dask.pca.postprocess import ordered_eigh
from dppca_dask.pipeline.config import RunConfig, load_config
from tests.helpers import figures_not_rendered, write_store


@pytest.fixture
def dataset(tmp_path) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(8)
    x = rng.normal(size=(300, 5)) * [4.0, 2.0, 1.0, 1.0, 0.5] + 1e3
    path = tmp_path / "data.zarr"
    write_store(path, x, names=list("abcde"), chunk=70)
    return path, x


@pytest.fixture
def undrawn():
    """Figures built but not drawn, for tests that never look at them (the first run test and
    the demo draw theirs)."""
    with figures_not_rendered():
        yield


def _config(tmp_path: Path, data: Path, **overrides) -> Path:
    cfg = {
        "input": {"path": str(data), "array": "X"},
        "task": "loading",
        "privacy": {"eps": 1e24, "delta": 1e-5},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(tmp_path / "out"), "formats": ["zarr", "netcdf"]},
        "rng": 5,
    }
    for key, value in overrides.items():
        cfg[key] = value
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_cli_run__writes_outputs_that_load_back(tmp_path, dataset):
    data, x = dataset
    runner = CliRunner()
    result = runner.invoke(main, ["run", str(_config(tmp_path, data)), "--quiet"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "config.yaml", "loading.nc", "loading.png", "loading.zarr", "report.html", "summary.txt"
    ]
    from_zarr = load_result(out / "loading.zarr")
    from_nc = load_result(out / "loading.nc")
    np.testing.assert_array_equal(from_zarr.directions.values, from_nc.directions.values)
    assert list(from_zarr.directions["variable"].values) == list("abcde")
    # eps = 1e24: the private directions are the exact Kendall eigenvectors.
    _, expected = ordered_eigh(spherical_kendall(x).values)
    signs = np.sign(np.einsum("ij,ij->j", from_zarr.directions.values, expected))
    np.testing.assert_allclose(from_zarr.directions.values * signs, expected, atol=1e-9)
    # The resolved config is written without the seed, and can be replayed.
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["rng"] is None
    assert "rng: 5" not in (out / "config.yaml").read_text()
    RunConfig.from_dict(saved)
    assert from_zarr.metadata["rng"]["seeded"] is True
    assert "Differentially Private PC Directions" in (out / "summary.txt").read_text()


@pytest.mark.usefixtures("undrawn")
def test_cli_run__refuses_existing_output_then_overwrites(tmp_path, dataset):
    data, _ = dataset
    cfg = _config(tmp_path, data)
    (tmp_path / "out").mkdir()
    runner = CliRunner()
    result = runner.invoke(main, ["run", str(cfg), "-q"])
    assert result.exit_code == 1
    assert "already exists" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(main, ["run", str(cfg), "-q", "--overwrite"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "loading.zarr").exists()


def test_cli_plan__touches_no_data_values(tmp_path, dataset):
    data, _ = dataset
    # Corrupt every chunk of the data array: any read of values would fail.
    chunk_files = [p for p in (data / "X").rglob("*") if p.is_file() and p.name != "zarr.json"]
    assert chunk_files
    for p in chunk_files:
        p.write_bytes(b"\x00garbage")
    runner = CliRunner()
    result = runner.invoke(main, ["plan", str(_config(tmp_path, data))])
    assert result.exit_code == 0, result.output
    assert "300 observations x 5 variables" in result.output
    assert "44,850 pairs" in result.output
    assert "noise sd" in result.output
    assert "rng: null" in result.output
    assert not (tmp_path / "out").exists()
    result = runner.invoke(main, ["run", str(_config(tmp_path, data)), "-q"])
    assert result.exit_code != 0
    assert not (tmp_path / "out").exists()  # a failed run leaves no output behind


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"inptu": {"path": "x"}}, "'inptu' is not a known setting"),
        ({"task": "sandwich"}, "'task'"),
        ({"privacy": {"eps": -1, "delta": 1e-5}}, "'privacy.eps' must be a float in the range"),
        ({"privacy": {"eps": 1}}, "'privacy'.*'delta' is missing"),
        ({"loading": {"calibration": "tight"}}, "'loading.calibration'"),
        ({"loading": {"cpp_options": True}}, "'loading.cpp_options' is not a known setting"),
        ({"loading": {"pairs": "some"}}, "'loading.pairs'"),
        ({"loading": {"pair_block": 1}}, "'loading.pair_block'"),
        ({"cluster": {"kind": "local", "n_workers": 0}}, "'cluster.local.n_workers' must be greater"),
        ({"cluster": {"kind": "moon"}}, "'cluster'"),
        ({"output": {"formats": ["csv"]}}, "'output.directory' is required"),
        ({"rng": "abc"}, "'rng'"),
    ],
)
def test_cli__bad_config_names_the_key(tmp_path, dataset, change, key):
    data, _ = dataset
    cfg = _config(tmp_path, data, **change)
    with pytest.raises(ConfigError, match=key):
        load_config(cfg)
    result = CliRunner().invoke(main, ["plan", str(cfg)])
    assert result.exit_code == 1
    assert result.output.startswith("Error: Invalid config:")
    assert len(result.output.strip().splitlines()) == 1


def test_cli_plan__a_bad_input_key_is_named_in_the_input_section(tmp_path, dataset):
    cfg = _config(tmp_path, dataset[0])
    result = CliRunner().invoke(main, ["plan", str(cfg), "--set", "input.array=Y"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: The 'input.array' config key must name a variable")
    assert "loading.array" not in result.output


def test_cli__config_file_problems(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["run", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 1 and "Config file not found" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("input: [unclosed")
    result = runner.invoke(main, ["plan", str(bad)])
    assert result.exit_code == 1 and "not valid YAML" in result.output
    bad.write_text("- a list")
    result = runner.invoke(main, ["plan", str(bad)])
    assert result.exit_code == 1 and "mapping" in result.output


@pytest.mark.parametrize(("text", "key", "line"), [
    ("privacy:\n  eps: 1\n  eps: 100\n", "eps", 3),
    ("task: loading\ntask: pca\n", "task", 2),
    ("input: {path: a, path: b}\n", "path", 1),
    ("loading:\n  pairs: all\noutput: {directory: o}\nloading: {}\n", "loading", 4),
])
def test_cli__duplicate_config_key_is_an_error(tmp_path, text, key, line):
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"Duplicate key {key!r} at line {line} "):
        load_config(path)
    result = CliRunner().invoke(main, ["plan", str(path)])
    assert result.exit_code == 1 and f"Duplicate key {key!r} at line {line}" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_cli__yaml_merge_keys_are_not_duplicates(tmp_path, dataset):
    data, _ = dataset
    path = tmp_path / "merge.yaml"
    path.write_text(f"base: &b {{eps: 1, delta: 1.0e-6}}\n"
                    f"input: {{path: {data}}}\nprivacy: {{<<: *b, eps: 2}}\n"
                    f"output: {{directory: {tmp_path / 'o'}}}\n")
    with pytest.raises(ConfigError, match="'base' is not a known setting"):
        load_config(path)  # the merge itself is accepted; only the unknown key is refused


def test_cli__missing_input_is_one_clear_line(tmp_path):
    cfg = _config(tmp_path, tmp_path / "missing.zarr")
    result = CliRunner().invoke(main, ["run", str(cfg), "-q"])
    assert result.exit_code == 1
    assert "not found" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.usefixtures("undrawn")
def test_cli_inspect__prints_summary(tmp_path, dataset):
    data, _ = dataset
    runner = CliRunner()
    assert runner.invoke(main, ["run", str(_config(tmp_path, data)), "-q"]).exit_code == 0
    for target in (tmp_path / "out", tmp_path / "out" / "loading.nc"):
        result = runner.invoke(main, ["inspect", str(target)])
        assert result.exit_code == 0, result.output
        assert "DP PC Directions Summary" in result.output
        assert "Data: 300 observations x 5 variables" in result.output


def test_cli_convert__csv_to_zarr(tmp_path):
    csv = tmp_path / "d.csv"
    rng = np.random.default_rng(0)
    rows = ["u,v,w"] + [",".join(f"{v:.17g}" for v in r) for r in rng.normal(size=(40, 3))]
    csv.write_text("\n".join(rows) + "\n")
    result = CliRunner().invoke(main, ["convert", str(csv), str(tmp_path / "d.zarr")])
    assert result.exit_code == 0, result.output
    k = spherical_kendall(str(tmp_path / "d.zarr"))
    assert list(k["variable"].values) == ["u", "v", "w"]
    result = CliRunner().invoke(main, ["convert", str(csv), str(tmp_path / "d.zarr")])
    assert result.exit_code == 1 and "exists" in result.output


@pytest.mark.slow
def test_cli_demo__runs_on_the_embedded_cluster(tmp_path):
    result = CliRunner().invoke(main, ["demo", "--directory", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    assert "Data: 5000 observations x 20 variables" in result.output
    runs = sorted((tmp_path / "demo").glob("run-*"))
    assert len(runs) == 1
    fit = load_result(runs[0] / "pca.zarr")  # the demo runs dp_pca end to end
    assert fit.directions.shape == (20, 20) and fit.score.groups is not None
    assert fit.metadata["rng"]["seeded"] is False
    # the CLI's geometric score histograms are pure eps: the score third's delta is not spent
    assert fit.metadata["ledger_total"] == pytest.approx({"eps": 1.0, "delta": 2e-5 / 3})
    for name in ("pca.png", "loading.png", "scree_pve.png", "samples.parquet", "report.html"):
        assert (runs[0] / name).exists()
    assert "report.html" in result.output
    # not a terminal: one line per data pass, as `run` logs, and no progress-bar frames
    assert "\r" not in result.output and "Pass 1: " in result.output


@pytest.mark.usefixtures("undrawn")
def test_cli_plan_and_run__pairs_blocks_from_config(tmp_path, dataset):
    data, x = dataset
    cfg = _config(tmp_path, data, loading={"pairs": "blocks", "pair_block": 64,
                                           "sensitivity": "seed"})
    result = CliRunner().invoke(main, ["plan", str(cfg)])
    assert result.exit_code == 0, result.output
    assert "pairs within 5 groups of <= 64 consecutive rows" in result.output
    assert "sensitivity 0.01333" in result.output  # groups of 60: 2*59/(5*1770) = 4/300
    result = CliRunner().invoke(main, ["run", str(cfg), "-q"])
    assert result.exit_code == 0, result.output
    fit = load_result(tmp_path / "out" / "loading.zarr")
    assert fit.metadata["pairs"] == "blocks" and fit.ledger[0].sensitivity == pytest.approx(4 / 300, rel=1e-8)
    _, expected = ordered_eigh(spherical_kendall(x, pairs="blocks", pair_block=64).values)
    signs = np.sign(np.einsum("ij,ij->j", fit.directions.values, expected))
    np.testing.assert_allclose(fit.directions.values * signs, expected, atol=1e-9)


def test_cli_plan__a_config_without_the_keys_gets_the_recommended_noise(tmp_path, dataset):
    data, _ = dataset
    planned = CliRunner().invoke(main, ["plan", str(_config(tmp_path, data))])
    assert planned.exit_code == 0, planned.output
    assert "calibration: analytic" in planned.output and "sensitivity: tight" in planned.output
    assert "(analytic)" in planned.output


@pytest.mark.usefixtures("undrawn")
@pytest.mark.parametrize("calibration", ["classical", "analytic"])
def test_cli_plan__prints_the_noise_sd_the_release_uses(tmp_path, dataset, calibration):
    # At eps = 10 the classical formula under-noises; the exact mechanism then uses a larger,
    # certified sd, and the plan must print that one, not the formula's.
    from dppca_dask._rformat import format_r_scalar

    data, _ = dataset
    cfg = _config(tmp_path, data, privacy={"eps": 10.0, "delta": 1e-5},
                  loading={"calibration": calibration})
    planned = CliRunner().invoke(main, ["plan", str(cfg)])
    assert planned.exit_code == 0, planned.output
    assert CliRunner().invoke(main, ["run", str(cfg), "-q"]).exit_code == 0
    scale = load_result(tmp_path / "out" / "loading.zarr").ledger[0].scale
    assert f"noise sd {format_r_scalar(scale)} ({calibration})" in planned.output
