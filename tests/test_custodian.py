"""Custodian authority on one machine (issue 28 item 7).

The custodian's file (``/etc/dppca_dask/deployment.yaml``, here a temporary one) is the whole
deployment: the analyst's environment variables and Dask config cannot move the ledger or turn
``required`` off; caps live in a caps database only the custodian can write; ``budget
cap/release/import`` refuse a user who cannot write the custodian's files (checked with a real
unprivileged user when the tests run as root); the Python API and the scikit-learn estimators
honour ``required``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import dask
import numpy as np
import pytest
from click.testing import CliRunner

import dppca_dask
from dppca_dask import BudgetError, accounting, dp_loading, privacy_control
from dppca_dask.cli import main
from dppca_dask.io.identity import DatasetIdentity
from dppca_dask.pipeline import deployment
from dppca_dask.pipeline.budget_cap import Cap
from dppca_dask.pipeline.deployment import deployment_settings, open_deployment_ledger

X = np.random.default_rng(1).normal(size=(200, 3))
PC = privacy_control(eps=0.5, delta=1e-6)


@pytest.fixture
def custodian(monkeypatch):
    """A custodian's deployment in a world-readable folder (an unprivileged user must be able
    to read it): the file, the ledger, the caps database."""
    root = Path(tempfile.mkdtemp(prefix="dppca-custodian-"))
    root.chmod(0o755)
    system = root / "deployment.yaml"
    runs = root / "runs"  # the ledger's folder: every analyst writes there
    runs.mkdir(mode=0o777)
    runs.chmod(0o777)
    ledger, caps = runs / "ledger.sqlite", root / "caps.sqlite"
    system.write_text(f"dppca:\n  ledger:\n    url: sqlite:///{ledger}\n    required: true\n"
                      f"    caps_url: {caps}\n")
    system.chmod(0o644)
    monkeypatch.setattr(deployment, "SYSTEM_FILE", system)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_custodian__the_file_is_the_whole_deployment(custodian, monkeypatch, tmp_path):
    monkeypatch.setenv("DPPCA_LEDGER__URL", str(tmp_path / "fresh.sqlite"))
    monkeypatch.setenv("DASK_DPPCA__LEDGER__REQUIRED", "false")
    with dask.config.set({"dppca.ledger.url": str(tmp_path / "other.sqlite"),
                          "dppca.ledger.required": False, "dppca.ledger.allow_seeded": True}):
        settings = deployment_settings()
    assert settings.ledger_path == custodian / "runs" / "ledger.sqlite"
    assert settings.ledger_required and not settings.allow_seeded
    assert settings.caps_path == custodian / "caps.sqlite"
    assert settings.system_file == str(custodian / "deployment.yaml")


def test_custodian__caps_come_from_the_caps_database_only(custodian):
    identity = DatasetIdentity(location="python:survey")
    ledger = open_deployment_ledger(deployment_settings().ledger_path)
    ledger.set_cap(identity, Cap(1.0, 1e-5, None))
    assert (custodian / "caps.sqlite").exists()
    # an analyst who can write the ledger raises "its" cap there: ignored
    with sqlite3.connect(custodian / "runs" / "ledger.sqlite") as con:
        con.execute("UPDATE datasets SET cap_eps = 1000, cap_delta = 0.5")
    assert ledger.dataset(identity.dataset_id).cap.eps == 1.0
    with accounting(dataset="survey"):
        dp_loading(X, privacy=PC)
        with pytest.raises(BudgetError, match="past the custodian's cap"):
            dp_loading(X, privacy=privacy_control(eps=3.0, delta=1e-6))


def test_custodian__python_api_and_sklearn_honour_required(custodian):
    from dppca_dask.sklearn import DPCovariance

    with pytest.raises(BudgetError, match="requires every release to be recorded"):
        dp_loading(X, privacy=PC)
    with pytest.raises(BudgetError, match="requires every release to be recorded"):
        DPCovariance(preset="seed", rho=0.1, bounds=5.0).fit(X)
    with accounting(dataset="survey-b"):
        dp_loading(X, privacy=PC)  # recorded: admitted
        with pytest.raises(BudgetError, match="'rng' parameter of dp_loading.*NOT PRIVATE"):
            dp_loading(X, privacy=PC, rng=3)
    assert [r.status for r in open_deployment_ledger(deployment_settings().ledger_path)
            .reservations()] == ["released"]


def _readable_package(root: Path) -> Path:
    """A world-readable copy of this checkout's ``dppca_dask`` under ``root`` (made once)."""
    site = root / "site"
    if not site.exists():
        shutil.copytree(Path(dppca_dask.__file__).parent, site / "dppca_dask",
                        ignore=shutil.ignore_patterns("__pycache__"))
        for path in [site, *site.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    return site


_CODE = ("import sys, pathlib; import dppca_dask.pipeline.deployment as d; "
         "d.SYSTEM_FILE = pathlib.Path(sys.argv.pop(1)); "
         "from dppca_dask.cli import main; main(sys.argv[1:], prog_name='dppca-dask')")


def _env(system: Path, path: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPPCA_", "DASK_DPPCA"))}
    env["HOME"] = str(system.parent)
    # the parent's whole import path (CI's packages may sit in a user site or on PYTHONPATH,
    # which the child's HOME and environment would not find)
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def _unprivileged_user(system: Path) -> tuple[list[str], list[str]]:
    """A command prefix running as uid 65534 that can import this interpreter's packages, and
    the import path it uses.

    The user must not be able to write the custodian's files, but it must read the interpreter
    and its packages, which may lie under /root (CI's do). First choice: the user keeps only
    ``CAP_DAC_READ_SEARCH`` (read any file, write none; ``os.access`` checks the real uid with
    no capabilities, as the refusal does). Else: a world-readable copy of the package."""
    base = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    path = [p for p in sys.path if p and Path(p).exists()]
    tries = [lambda: ([*base, "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"],
                      path),
             lambda: (base, [str(_readable_package(system.parent)), *path])]
    probe = "import dppca_dask.cli, sys; print(dppca_dask.__file__)"
    failures = []
    for attempt in tries:
        user, where = attempt()
        done = subprocess.run([*user, sys.executable, "-c", probe], capture_output=True,
                              text=True, env=_env(system, where), timeout=120,
                              cwd=system.parent, check=False)
        if done.returncode == 0:
            return user, where
        failures.append(f"{' '.join(user)}: {done.stderr.strip()[-400:]}")
    pytest.fail("no unprivileged user here can import dppca_dask:\n" + "\n".join(failures))


def _run_cli_as(user: tuple[list[str], list[str]], args: list[str],
                system: Path) -> subprocess.CompletedProcess:
    prefix, path = user
    return subprocess.run([*prefix, sys.executable, "-c", _CODE, str(system), *args],
                          capture_output=True, text=True, env=_env(system, path), timeout=120,
                          cwd=system.parent, check=False)


def test_custodian__budget_commands_refuse_a_user_without_authority(custodian):
    system = custodian / "deployment.yaml"
    # the custodian (who can write the files) sets a cap with the tool
    with accounting(dataset="survey-c"):
        dp_loading(X, privacy=PC)
    done = CliRunner().invoke(main, ["budget", "cap", "python:survey-c", "--eps", "2",
                                     "--delta", "1e-5"])
    assert done.exit_code == 0, done.output
    ledger = open_deployment_ledger(deployment_settings().ledger_path)
    (custodian / "old.jsonl").write_text("")
    for path in custodian.iterdir():
        path.chmod(0o644 if path.is_file() else 0o777)
    for path in (custodian / "runs").iterdir():
        path.chmod(0o666)
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: no unprivileged user to test with")
        user = _unprivileged_user(system)
    else:  # this user cannot write files it made read-only
        user = ([], [p for p in sys.path if p])
        system.chmod(0o444)
        (custodian / "caps.sqlite").chmod(0o444)
    for args in (["budget", "cap", "python:survey-c", "--eps", "50", "--delta", "1e-5"],
                 ["budget", "cap", "python:survey-c", "--remove"],
                 ["budget", "release", "0" * 32],
                 ["budget", "import", str(custodian / "old.jsonl")]):
        done = _run_cli_as(user, args, system)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert "is the data custodian's" in done.stderr + done.stdout, done.stderr
    assert ledger.dataset(DatasetIdentity(location="python:survey-c").dataset_id).cap.eps == 2.0
    # reading is everyone's
    shown = _run_cli_as(user, ["budget", "show", "python:survey-c"], system)
    assert shown.returncode == 0 and "cap: eps = 2" in shown.stdout, shown.stderr
