"""Deployment settings (Dask config namespace ``dppca``): the ledger is the deployment's."""

from __future__ import annotations

import os
from pathlib import Path

import dask
import dask.config
import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from dppca_dask import ConfigError, InputError
from dppca_dask.cli import main
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.deployment import (
    apply_deployment,
    default_ledger_path,
    deployment_settings,
    ledger_location,
    parse_ledger_url,
)
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.pipeline.runner import execute
from tests.helpers import write_store


@pytest.fixture(autouse=True)
def _no_site_settings(monkeypatch, tmp_path):
    """Only this test's settings: no Dask YAML files of the machine, no DASK_DPPCA_*/DPPCA_*
    variable but the test ledger's url (tests/conftest.py), and run configs may not name a
    ledger unless a test allows it."""
    monkeypatch.setattr(dask.config, "paths", [str(tmp_path / "dask-config")])
    for name in list(os.environ):
        if name.startswith(("DASK_DPPCA", "DPPCA_")) and name != "DPPCA_LEDGER__URL":
            monkeypatch.delenv(name)


@pytest.fixture
def data(tmp_path):
    x = np.random.default_rng(4).normal(size=(60, 3))
    path = tmp_path / "d.zarr"
    return write_store(path, x)


def _config(tmp_path, data, ledger=None, name="out") -> RunConfig:
    return RunConfig.from_dict({
        "input": {"path": str(data)},
        "privacy": {"eps": 1.0, "delta": 1e-6},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(tmp_path / name)},
        "budget_ledger": ledger or {},
    })


def test_deployment__defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("DPPCA_LEDGER__URL")
    settings = deployment_settings()
    assert not settings.ledger_required and not settings.allow_run_config
    assert settings.ledger_url is None and settings.ledger_path == default_ledger_path()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_ledger_path() == tmp_path / "xdg" / "dppca_dask" / "ledger.sqlite"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert default_ledger_path() == Path.home() / ".local/share/dppca_dask/ledger.sqlite"
    cfg = _config(tmp_path, "x.zarr", {"enabled": False})
    assert apply_deployment(cfg) is cfg


def test_deployment__ledger_urls():
    assert parse_ledger_url("sqlite:///srv/l.sqlite", "k") == Path("/srv/l.sqlite")
    assert parse_ledger_url("sqlite:////srv/l.sqlite", "k") == Path("/srv/l.sqlite")
    assert parse_ledger_url("file:///srv/l.sqlite", "k") == Path("/srv/l.sqlite")
    assert parse_ledger_url("~/l.sqlite", "k") == Path.home() / "l.sqlite"
    assert parse_ledger_url("rel/l.sqlite", "k") == Path.cwd() / "rel" / "l.sqlite"
    for bad in ("sqlite://relative.db", "postgres://h/db", "", 3):
        with pytest.raises(ConfigError, match="'k' setting must be a path or a sqlite:///path"):
            parse_ledger_url(bad, "k")


def test_deployment__env_var_routes(tmp_path, monkeypatch, ledger_path):
    assert deployment_settings().ledger_path == ledger_path  # DPPCA_LEDGER__URL (conftest)
    monkeypatch.delenv("DPPCA_LEDGER__URL")
    monkeypatch.setenv("DASK_DPPCA__LEDGER__URL", f"sqlite:///{tmp_path}/dask-env.sqlite")
    assert deployment_settings().ledger_path == tmp_path / "dask-env.sqlite"
    monkeypatch.setenv("DPPCA_LEDGER__URL", str(tmp_path / "wins.sqlite"))
    assert deployment_settings().ledger_path == tmp_path / "wins.sqlite"
    with dask.config.set({"dppca.ledger.url": str(tmp_path / "runtime.sqlite")}):
        assert deployment_settings().ledger_path == tmp_path / "runtime.sqlite"
    monkeypatch.setenv("DPPCA_LEDGER__URL", "mysql://nope")
    with pytest.raises(ConfigError, match="dppca.ledger.url"):
        deployment_settings()


def test_deployment__yaml_file_route(tmp_path, monkeypatch):
    monkeypatch.delenv("DPPCA_LEDGER__URL")
    folder = tmp_path / "dask-config"
    folder.mkdir()
    ledger = tmp_path / "custodian" / "ledger.sqlite"
    (folder / "dppca.yaml").write_text(
        f"dppca:\n  ledger:\n    required: true\n    url: sqlite:///{ledger}\n"
        "    allow_run_config: false\n    require_cap: yes\n")
    settings = deployment_settings()
    assert settings.ledger_required and settings.ledger_path == ledger and settings.require_cap
    # A run cannot switch the strict settings off with dask.config or the environment either.
    monkeypatch.setenv("DPPCA_LEDGER__ALLOW_RUN_CONFIG", "true")
    with dask.config.set({"dppca.ledger.required": False, "dppca.ledger.require_cap": False}):
        settings = deployment_settings()
        assert settings.ledger_required and settings.require_cap
        assert not settings.allow_run_config


def test_deployment__required_ledger_cannot_be_disabled(tmp_path, data, ledger_path,
                                                        monkeypatch):
    cfg = _config(tmp_path, data, {"enabled": False})
    with (dask.config.set({"dppca.ledger.required": True}),
          pytest.raises(ConfigError, match="'budget_ledger.enabled'.*requires")):
        execute(cfg, progress=False)
    assert not (tmp_path / "out").exists() and not ledger_path.exists()
    monkeypatch.setenv("DASK_DPPCA__LEDGER__REQUIRED", "true")
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
    result = CliRunner().invoke(main, ["run", str(tmp_path / "run.yaml"), "-q"])
    assert result.exit_code == 1 and "requires the persistent budget ledger" in result.output
    monkeypatch.setenv("DASK_DPPCA__LEDGER__REQUIRED", "maybe")
    with pytest.raises(ConfigError, match="dppca.ledger.required"):
        deployment_settings()


def test_deployment__required_ledger_refuses_seeded_runs(tmp_path, data, ledger_path):
    """A seeded release is reproducible from its seed: a deployment that requires the ledger
    refuses it before any work, unless the custodian allows such test releases."""
    cfg = RunConfig.from_dict({**_config(tmp_path, data).to_dict(), "rng": 42})
    with (dask.config.set({"dppca.ledger.required": True}),
          pytest.raises(ConfigError, match="'rng' config key.*NOT PRIVATE.*Got 42")):
        execute(cfg, progress=False)
    assert not (tmp_path / "out").exists() and not ledger_path.exists()
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({**cfg.to_dict(), "rng": 42}))
    with dask.config.set({"dppca.ledger.required": True}):
        result = CliRunner().invoke(main, ["plan", str(tmp_path / "run.yaml")])
    assert result.exit_code == 1 and "allow_seeded" in result.output
    with dask.config.set({"dppca.ledger.required": True, "dppca.ledger.allow_seeded": True}):
        outcome = execute(cfg, progress=False)
    # allowed, but marked everywhere: attributes, summary, report banner, ledger events
    assert outcome.result.dataset.attrs["dppca_guarantee"].startswith("NOT PRIVATE")
    out = Path(outcome.directory)
    assert (out / "summary.txt").read_text().startswith("NOT PRIVATE: the noise generator")
    assert "NOT PRIVATE: not a private release as a whole" in (out / "report.html").read_text()
    notes = [e["note"] for e in Ledger(ledger_path).events() if e["kind"] in ("reserve",
                                                                              "release")]
    assert len(notes) == 2 and all(n.startswith("NOT PRIVATE: noise generator seeded")
                                   for n in notes)
    unseeded = execute(_config(tmp_path, data, name="out2"), progress=False)
    assert not (Path(unseeded.directory) / "summary.txt").read_text().startswith("NOT PRIVATE")


def test_deployment__another_output_folder_is_the_same_ledger(tmp_path, data, ledger_path):
    for name in ("a", "elsewhere/b"):
        execute(_config(tmp_path, data, name=name), progress=False)
    ledger = Ledger(ledger_path)
    assert [r.status for r in ledger.reservations()] == ["released", "released"]
    assert len(ledger.datasets()) == 1
    assert not list(tmp_path.rglob("*.jsonl"))


def test_deployment__a_run_config_cannot_name_another_ledger(tmp_path, data, ledger_path):
    other = tmp_path / "mine.sqlite"
    for key in ("path", "url"):
        cfg = _config(tmp_path, data, {key: str(other)})
        with pytest.raises(ConfigError, match=rf"'budget_ledger.{key}' config key must be left "
                                              r"out: the budget ledger is the deployment's"):
            execute(cfg, progress=False)
        (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
        shown = CliRunner().invoke(main, ["plan", str(tmp_path / "run.yaml")])
        assert shown.exit_code == 1 and "dppca.ledger.allow_run_config" in shown.output
    assert not other.exists() and not (tmp_path / "out").exists()
    # Naming the deployment's own ledger is fine; with the deployment's leave, another one too.
    execute(_config(tmp_path, data, {"url": f"sqlite:///{ledger_path}"}), progress=False)
    with dask.config.set({"dppca.ledger.allow_run_config": True}):
        assert ledger_location(_config(tmp_path, data, {"path": str(other)})) == other
        execute(_config(tmp_path, data, {"path": str(other)}, name="again"), progress=False)
    assert len(Ledger(other).reservations()) == 1 and len(Ledger(ledger_path).reservations()) == 1


def test_deployment__old_jsonl_ledger_is_not_written(tmp_path, data, monkeypatch):
    old = tmp_path / "budget-ledger.jsonl"
    old.write_text('{"kind": "reserve", "release_id": "r", "dataset": "d", "eps": 1, '
                   '"delta": 0}\n')
    before = old.read_bytes()
    monkeypatch.setenv("DPPCA_LEDGER__URL", str(old))  # a deployment still naming its old file
    with pytest.raises(InputError, match="JSON-lines ledger written by an earlier version"):
        execute(_config(tmp_path, data), progress=False)
    assert old.read_bytes() == before and not (tmp_path / "out").exists()
