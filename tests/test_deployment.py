"""Deployment settings (Dask config namespace ``dppca``) that a run config cannot override."""

from __future__ import annotations

import dask
import dask.config
import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner

from dppca_dask import ConfigError
from dppca_dask.cli import main
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.deployment import apply_deployment, deployment_settings
from dppca_dask.pipeline.ledger import BudgetLedger
from dppca_dask.pipeline.runner import execute


@pytest.fixture(autouse=True)
def _no_site_settings(monkeypatch, tmp_path):
    """Only this test's settings: no Dask YAML files of the machine, no DASK_DPPCA_* variables."""
    monkeypatch.setattr(dask.config, "paths", [str(tmp_path / "dask-config")])
    for name in list(__import__("os").environ):
        if name.startswith("DASK_DPPCA"):
            monkeypatch.delenv(name)


@pytest.fixture
def data(tmp_path):
    x = np.random.default_rng(4).normal(size=(60, 3))
    path = tmp_path / "d.zarr"
    xr.Dataset({"X": (("sample", "variable"), x)}).to_zarr(path, consolidated=False)
    return path


def _config(tmp_path, data, ledger=None, name="out") -> RunConfig:
    return RunConfig.from_dict({
        "input": {"path": str(data)},
        "privacy": {"eps": 1.0, "delta": 1e-6},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(tmp_path / name)},
        "budget_ledger": ledger or {},
    })


def test_deployment__defaults(tmp_path):
    settings = deployment_settings()
    assert not settings.ledger_required and settings.ledger_path is None
    cfg = _config(tmp_path, "x.zarr", {"enabled": False})
    assert apply_deployment(cfg) is cfg


def test_deployment__required_ledger_cannot_be_disabled(tmp_path, data):
    cfg = _config(tmp_path, data, {"enabled": False})
    with (dask.config.set({"dppca.ledger.required": True}),
          pytest.raises(ConfigError, match="'budget_ledger.enabled'.*requires")):
        execute(cfg, progress=False)
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "dppca-budget-ledger.jsonl").exists()


def test_deployment__env_var_route(tmp_path, data, monkeypatch):
    monkeypatch.setenv("DASK_DPPCA__LEDGER__REQUIRED", "true")
    assert deployment_settings().ledger_required
    cfg = _config(tmp_path, data, {"enabled": False})
    (tmp_path / "run.yaml").write_text(__import__("yaml").safe_dump(cfg.to_dict()))
    result = CliRunner().invoke(main, ["run", str(tmp_path / "run.yaml"), "-q"])
    assert result.exit_code == 1 and "requires the persistent budget ledger" in result.output
    monkeypatch.setenv("DASK_DPPCA__LEDGER__REQUIRED", "maybe")
    with pytest.raises(ConfigError, match="dppca.ledger.required"):
        deployment_settings()


def test_deployment__yaml_file_route(tmp_path, data):
    folder = tmp_path / "dask-config"
    folder.mkdir()
    ledger = tmp_path / "custodian" / "ledger.jsonl"
    (folder / "dppca.yaml").write_text(
        f"dppca:\n  ledger:\n    required: true\n    path: {ledger}\n")
    settings = deployment_settings()
    assert settings.ledger_required and settings.ledger_path == str(ledger)
    # A run config cannot switch required off with dask.config either.
    with dask.config.set({"dppca.ledger.required": False}):
        assert deployment_settings().ledger_required


def test_deployment__ledger_path_is_used_and_cannot_be_changed(tmp_path, data, monkeypatch):
    custodian = tmp_path / "custodian" / "ledger.jsonl"
    monkeypatch.setenv("DASK_DPPCA__LEDGER__PATH", str(custodian))
    other = tmp_path / "mine.jsonl"
    with pytest.raises(ConfigError, match="'budget_ledger.path'.*deployment's ledger"):
        execute(_config(tmp_path, data, {"path": str(other)}), progress=False)
    assert not other.exists() and not (tmp_path / "out").exists()
    # No path in the run config (or the same one): the deployment's ledger is used.
    execute(_config(tmp_path, data, {"cap": {"eps": 1.5, "delta": 1e-5}}), progress=False)
    assert [e.kind for e in BudgetLedger(custodian).history()] == ["reserve", "release"]
    assert not (tmp_path / "dppca-budget-ledger.jsonl").exists()
    with pytest.raises(Exception, match="past the cap"):
        execute(_config(tmp_path, data, {"path": str(custodian), "cap": {"eps": 1.5,
                                                                          "delta": 1e-5}},
                        name="again"), progress=False)
    # dppca-dask budget reads the deployment's ledger by default.
    shown = CliRunner().invoke(main, ["budget", str(data)])
    assert shown.exit_code == 0 and " released " in shown.output
