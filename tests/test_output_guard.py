"""An output directory never replaces, sits inside or wraps the input or the ledger (issue 21)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from dppca_dask import ConfigError, OutputExistsError, ParameterError
from dppca_dask.cli import main
from dppca_dask.io.convert import convert
from dppca_dask.io.datasets import write_demo_dataset


def _digest(*roots) -> str:
    h = hashlib.sha256()
    for root in roots:
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for f in files:
            h.update(str(f).encode() + f.read_bytes())
    return h.hexdigest()


@pytest.fixture
def setup(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    store = data / "gau.zarr"
    write_demo_dataset(store, n_per_group=10)
    ledgers = tmp_path / "ledgers"
    ledgers.mkdir()
    ledger = ledgers / "ledger.jsonl"
    ledger.write_text("")
    (tmp_path / "datalink").symlink_to(data)

    def config(output: str, name: str = "run") -> str:
        cfg = {
            "input": {"path": str(store)},
            "privacy": {"eps": 1.0, "delta": 1e-6},
            "cluster": {"kind": "local", "n_workers": 1, "processes": False},
            "output": {"directory": output},
            "budget_ledger": {"path": str(ledger)},
        }
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return str(path)

    return tmp_path, store, ledger, config


@pytest.mark.parametrize("overwrite", [False, True])
def test_run__output_around_input_or_ledger_is_refused(setup, overwrite):
    tmp_path, store, ledger, config = setup
    outputs = {
        "the input store": [str(store), str(store) + "/", str(store / "X"),
                            str(store / "new" / "deeper"), str(store.parent),
                            str(tmp_path / "datalink" / "gau.zarr"), str(tmp_path / "datalink"),
                            str(tmp_path)],
        "the budget ledger file": [str(ledger.parent), str(ledger)],
    }
    before = _digest(store, ledger)
    runner = CliRunner()
    for label, paths in outputs.items():
        for out in paths:
            args = ["run", config(out), "-q"] + (["--overwrite"] if overwrite else [])
            result = runner.invoke(main, args)
            assert result.exit_code == 1, (out, result.output)
            message = result.output.strip()
            assert "\n" not in message
            assert "'output.directory'" in message and label in message, message
            assert repr(out) in message or "resolved" in message
    assert _digest(store, ledger) == before
    assert ledger.read_text() == ""  # refused before the ledger was touched


def test_run__sibling_output_is_fine_and_overwrite_still_works(setup):
    tmp_path, store, ledger, config = setup
    runner = CliRunner()
    out = tmp_path / "data" / "out"
    assert runner.invoke(main, ["run", config(str(out)), "-q"]).exit_code == 0
    assert runner.invoke(main, ["run", config(str(out)), "-q", "--overwrite"]).exit_code == 0
    assert store.exists() and (out / "loading.zarr").exists()


def test_execute__refusal_is_a_config_error(setup):
    from dppca_dask.pipeline.config import load_config
    from dppca_dask.pipeline.runner import execute

    tmp_path, store, _, config = setup
    with pytest.raises(ConfigError, match="must not be equal to, inside or a folder containing"):
        execute(load_config(config(str(store))), progress=False, overwrite=True)


def test_demo__directory_inside_a_store_or_a_file_is_refused(setup):
    tmp_path, store, ledger, _ = setup
    before = _digest(store)
    runner = CliRunner()
    for directory in (store, store / "X", store / "newdir"):
        result = runner.invoke(main, ["demo", "--directory", str(directory), "-q"])
        assert result.exit_code == 1 and "'--directory' parameter of demo" in result.output
    result = runner.invoke(main, ["demo", "--directory", str(ledger), "-q"])
    assert result.exit_code == 1 and "an existing file" in result.output
    assert _digest(store) == before
    assert not (store / "newdir").exists()


def test_convert__output_around_input_is_refused(tmp_path):
    csv = tmp_path / "x.csv"
    csv.write_text("a,b\n1,2\n3,5\n4,4\n")
    original = csv.read_bytes()
    with pytest.raises(ParameterError, match="'out_path' parameter of convert"):
        convert(csv, csv, overwrite=True)
    with pytest.raises(ParameterError, match="a folder containing it"):
        convert(csv, tmp_path, overwrite=True)
    (tmp_path / "link.csv").symlink_to(csv)
    with pytest.raises(ParameterError, match="equal to it"):
        convert(tmp_path / "link.csv", csv, overwrite=True)
    # A Zarr store that holds the input file would be replaced, deleting the input.
    store = tmp_path / "s.zarr"
    convert(csv, store)
    inner = store / "x.csv"
    inner.write_bytes(original)
    with pytest.raises(ParameterError, match="a folder containing it"):
        convert(inner, store, overwrite=True)
    assert inner.read_bytes() == original and csv.read_bytes() == original
    result = CliRunner().invoke(main, ["convert", str(csv), str(csv), "--overwrite"])
    assert result.exit_code == 1 and "TARGET argument of convert" in result.output
    assert csv.read_bytes() == original


def test_convert__overwrite_replaces_only_a_zarr_store(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(6.0).reshape(3, 2))
    other = tmp_path / "notes.txt"
    other.write_text("keep me")
    with pytest.raises(OutputExistsError, match="not a Zarr store"):
        convert(tmp_path / "x.npy", other, overwrite=True)
    assert other.read_text() == "keep me"
    out = convert(tmp_path / "x.npy", tmp_path / "x.zarr")
    assert convert(tmp_path / "x.npy", out, overwrite=True) == out


def test_plan__refuses_the_output_that_run_would_refuse(setup):
    tmp_path, store, ledger, config = setup
    before = _digest(store, ledger)
    result = CliRunner().invoke(main, ["plan", config(str(store.parent))])
    assert result.exit_code != 0
    assert "output.directory" in result.output and len(result.output.strip().splitlines()) == 1
    assert _digest(store, ledger) == before


def test_run__output_around_the_deployment_ledger_is_refused(setup, ledger_path, monkeypatch):
    """The deployment's ledger (dppca.ledger.url) is protected like one a run config names."""
    tmp_path, store, _, _ = setup
    ledger_path.parent.mkdir(parents=True, exist_ok=True)
    cfg = {"input": {"path": str(store)}, "privacy": {"eps": 1.0, "delta": 1e-6},
           "cluster": {"kind": "local", "n_workers": 1, "processes": False},
           "output": {"directory": str(ledger_path.parent)}}
    path = tmp_path / "deployed.yaml"
    path.write_text(yaml.safe_dump(cfg))
    result = CliRunner().invoke(main, ["run", str(path), "-q", "--overwrite"])
    assert result.exit_code == 1 and "the budget ledger file" in result.output
    assert not ledger_path.exists()
