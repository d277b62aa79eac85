"""The command line in scripts (issue 16 item 4): exit codes, JSON output, --set and environment
overrides, closed pipes, progress in logs, -q, config-key wording of errors, other tasks'
sections, plan's task-only view and group check; consolidated result stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from click.testing import CliRunner

from dppca_dask.cli import main
from tests.helpers import write_store

CLI = [sys.executable, "-m", "dppca_dask.cli"]


@pytest.fixture
def data(tmp_path) -> Path:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(120, 4)) * [3.0, 2.0, 1.0, 0.5]
    path = tmp_path / "data.zarr"
    return write_store(path, x, names=list("abcd"), labels={"grp": np.array(["a", "b", "c"] * 40)})


def _config(tmp_path: Path, data: Path, **changes) -> Path:
    cfg = {"input": {"path": str(data), "array": "X"}, "task": "loading",
           "privacy": {"eps": 1.0, "delta": 1e-5},
           "cluster": {"kind": "local", "n_workers": 1, "processes": False},
           "output": {"directory": str(tmp_path / "out")}, "rng": 1}
    cfg.update(changes)
    path = tmp_path / f"run{len(list(tmp_path.glob('run*.yaml')))}.yaml"  # one file per call
    path.write_text(yaml.safe_dump(cfg))
    return path


def _plan_json(args, env=None):
    result = CliRunner().invoke(main, ["plan", *args, "--json"], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# -- exit codes ---------------------------------------------------------------------------


def test_cli__help_documents_exit_codes():
    out = CliRunner().invoke(main, ["--help"]).output
    for line in ("1  user or data error", "2  usage error", "3  internal error",
                 "DPPCA_RUN__", "--set"):
        assert line in out, line


def test_cli__exit_codes_tell_usage_from_user_from_internal(tmp_path, data, monkeypatch):
    runner = CliRunner()
    cfg = _config(tmp_path, data)
    assert runner.invoke(main, ["plan", str(cfg), "--no-such-option"]).exit_code == 2
    assert runner.invoke(main, ["plan"]).exit_code == 2  # missing argument
    bad = runner.invoke(main, ["plan", str(_config(tmp_path, data, task="sandwich"))])
    assert bad.exit_code == 1 and bad.output.startswith("Error: Invalid config:")

    def crash(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("dppca_dask.pipeline.runner.plan_run", crash)
    internal = runner.invoke(main, ["plan", str(cfg)])
    assert internal.exit_code == 3
    assert "internal error RuntimeError: boom" in internal.output
    assert "--traceback" in internal.output


# -- overrides ----------------------------------------------------------------------------


def test_cli_plan__set_overrides_the_file(tmp_path, data):
    cfg = str(_config(tmp_path, data))
    assert _plan_json([cfg])["total"]["eps"] == pytest.approx(1.0)
    planned = _plan_json([cfg, "--set", "privacy.eps=0.25", "--set", "task=scree",
                          "--set", "scree.controls={clipped: {C_clip: 5}}"])
    assert planned["task"] == "scree" and planned["total"]["eps"] == pytest.approx(0.25)


def test_cli_plan__environment_overrides_below_set(tmp_path, data):
    cfg = str(_config(tmp_path, data))
    env = {"DPPCA_RUN__PRIVACY__EPS": "0.5"}
    assert _plan_json([cfg], env)["total"]["eps"] == pytest.approx(0.5)
    assert _plan_json([cfg, "--set", "privacy.eps=0.125"], env)["total"]["eps"] \
        == pytest.approx(0.125)
    # the deployment's DPPCA_LEDGER__* variables are not run-config keys
    assert _plan_json([cfg], {"DPPCA_LEDGER__REQUIRED": "false"})["total"]["eps"] \
        == pytest.approx(1.0)


def test_cli_plan__environment_keys_match_case_insensitively(tmp_path, data):
    cfg = str(_config(tmp_path, data, task="scree"))
    env = {"DPPCA_RUN__SCREE__CONTROLS__CLIPPED__C_CLIP": "-3"}
    bad = CliRunner().invoke(main, ["plan", cfg], env=env)
    assert bad.exit_code == 1
    assert "'scree.controls.clipped.C_clip' must be a float in the range (0, 1e+100]" in bad.output
    assert "set by DPPCA_RUN__SCREE__CONTROLS__CLIPPED__C_CLIP" in bad.output


@pytest.mark.parametrize(("setting", "message"), [
    ("privacy.eps=-1", "config key 'privacy.eps' must be a float in the range (0, inf). Got -1.0"
                       " instead (set by --set privacy.eps=-1)"),
    ("loading.block_rows=-3", "config key 'loading.block_rows' must be greater than 0"),
    ("loading.colour=red", "config key 'loading.colour' is not a known setting"),
    ("eps", "--set 'eps': give key.path=value"),
    ("privacy.eps.x=1", "'privacy.eps' is a value, not a section"),
    ("privacy.eps=[1", "the value is not valid YAML"),
])
def test_cli_plan__bad_set_names_the_key(tmp_path, data, setting, message):
    result = CliRunner().invoke(main, ["plan", str(_config(tmp_path, data)), "--set", setting])
    assert result.exit_code == 1
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_cli_plan__negative_bound_names_no_pydantic_type(tmp_path, data):
    cfg = _config(tmp_path, data, task="covariance", covariance={"bounds": [1.0, -2.0, 1.0, 1.0]})
    result = CliRunner().invoke(main, ["plan", str(cfg)])
    assert result.exit_code == 1
    assert "config key 'covariance.bounds.1' must be greater than 0" in result.output
    for internal in ("constrained-float", "list[", "dict[", "Input should"):
        assert internal not in result.output


# -- sections, plan view, group -----------------------------------------------------------


def test_cli_plan__other_tasks_sections_are_refused(tmp_path, data):
    cfg = _config(tmp_path, data, task="loading", scree={"k": 2}, score={"bins": 5})
    result = CliRunner().invoke(main, ["plan", str(cfg)])
    assert result.exit_code == 1
    assert "Config sections 'scree', 'score' do not apply to task 'loading'" in result.output
    # a section at its defaults (as a written config.yaml holds) is harmless
    fine = _config(tmp_path, data, task="loading", scree={"k": None}, pca={})
    assert CliRunner().invoke(main, ["plan", str(fine)]).exit_code == 0


def test_cli_plan__shows_only_the_task_and_checks_the_group(tmp_path, data):
    cfg = _config(tmp_path, data, task="score", input={"path": str(data), "array": "X",
                                                      "group": "grp"})
    out = CliRunner().invoke(main, ["plan", str(cfg)])
    assert out.exit_code == 0, out.output
    assert "\n  score:\n" in out.output
    for other in ("loading", "scree", "pca", "covariance"):
        assert f"\n  {other}:\n" not in out.output, other
    missing = _config(tmp_path, data, task="score", input={"path": str(data), "array": "X",
                                                          "group": "species"})
    bad = CliRunner().invoke(main, ["plan", str(missing)])
    assert bad.exit_code == 1
    assert "The group variable 'species' was not found" in bad.output and "'grp'" in bad.output


# -- error wording ------------------------------------------------------------------------


def test_cli__errors_use_option_and_config_key_wording(tmp_path, data):
    runner = CliRunner()
    cfg = _config(tmp_path, data, task="scree")
    missing = runner.invoke(main, ["plan", str(cfg)])
    assert missing.exit_code == 1
    assert "scree.controls.clipped.C_clip" in missing.output
    assert "control=" not in missing.output and "clipped_control(" not in missing.output
    (tmp_path / "x.txt").write_text("a,b\n1,2\n")
    fmt = runner.invoke(main, ["convert", str(tmp_path / "x.txt"), str(tmp_path / "x.zarr")])
    assert fmt.exit_code == 1 and "--format option" in fmt.output and "'fmt'" not in fmt.output
    csv = tmp_path / "x.csv"
    csv.write_text("a,b\n1,2\n3,5\n")
    assert runner.invoke(main, ["convert", str(csv), str(tmp_path / "y.zarr")]).exit_code == 0
    again = runner.invoke(main, ["convert", str(csv), str(tmp_path / "y.zarr")])
    assert again.exit_code == 1 and "Use --overwrite to replace it" in again.output
    assert "overwrite=True" not in again.output


# -- JSON, pipes, progress, -q ------------------------------------------------------------


def test_cli_versions__json():
    result = CliRunner().invoke(main, ["versions", "--json"])
    assert result.exit_code == 0
    found = json.loads(result.stdout)
    assert found["dppca_dask"] and found["numpy"] == np.__version__ and "python" in found


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONWARNINGS": "default"}


def test_cli_run__logs_one_line_per_pass_and_quiet_keeps_wrote(tmp_path, data):
    cfg = _config(tmp_path, data)
    proc = subprocess.run([*CLI, "run", str(cfg)], capture_output=True, text=True, check=False,
                          env=_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Pass 1: Kendall pair sums" in proc.stderr
    assert "Completed" not in proc.stderr + proc.stdout  # no progress bar in a log
    assert "Wrote " in proc.stdout
    quiet = subprocess.run([*CLI, "run", str(cfg), "-q", "--overwrite"], capture_output=True,
                           text=True, check=False, env=_env(), timeout=600)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.startswith("Wrote ") and len(quiet.stdout.strip().splitlines()) == 1
    assert "Pass 1" not in quiet.stderr

    # inspect --json parses; inspect | head -1 ends quietly
    inspected = subprocess.run([*CLI, "inspect", str(tmp_path / "out"), "--json"],
                               capture_output=True, text=True, check=False, timeout=300)
    assert inspected.returncode == 0, inspected.stderr
    info = json.loads(inspected.stdout)
    assert info["kind"] == "loading" and info["variables"]["directions"]["private"] is True
    assert info["metadata"]["ledger"]
    command = " ".join([*(f"'{c}'" for c in CLI), "inspect", f"'{tmp_path / 'out'}'"])
    piped = subprocess.run(["bash", "-c", f"set -o pipefail; {command} | head -1"],
                           capture_output=True, text=True, check=False, timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert len(piped.stdout.splitlines()) == 1
    assert "BrokenPipe" not in piped.stderr and "Error" not in piped.stderr, piped.stderr

    # the result store has consolidated metadata: xr.open_zarr does not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xr.open_zarr(tmp_path / "out" / "loading.zarr").close()


def test_cli_inspect__closed_pipe_is_quiet(tmp_path, data, monkeypatch):
    # the handler itself: a BrokenPipeError while printing exits 0 without a message
    def closed(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("dppca_dask.pipeline.runner.plan_run", closed)
    result = CliRunner().invoke(main, ["plan", str(_config(tmp_path, data))])
    assert result.exit_code == 0 and result.output == ""


def test_written_config__holds_only_its_task_section_and_replays():
    """A written config.yaml (or the demo's) must replay after other tasks' defaults change:
    it holds no other task's section (those are refused when they differ from the defaults)."""
    from dppca_dask.pipeline.config import RunConfig, check_task_sections, dump_config

    cfg = RunConfig.from_dict({"input": {"path": "x.zarr"}, "task": "pca",
                               "privacy": {"eps": 1.0, "delta": 1e-5},
                               "output": {"directory": "out"}, "rng": 5})
    data = cfg.to_dict()
    assert "pca" in data and not {"loading", "scree", "score", "covariance"} & set(data)
    assert data["rng"] is None
    data["score"] = {"frame": "durfee" if cfg.pca.frame != "durfee" else "smooth"}
    with pytest.raises(Exception, match="does not apply to task 'pca'"):
        check_task_sections(data)
    import yaml

    written = yaml.safe_load(dump_config(cfg))
    assert "score" not in written and written["rng"] is None and written["task"] == "pca"


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["run", "--help"],
                                  ["budget", "show", "--help"], ["plan"], ["no-such-command"]])
def test_cli__help_version_and_usage_errors_import_no_scientific_stack(argv):
    # Shell completion and --help run the program on every TAB: they must not pay for dask,
    # xarray, scipy or numpy (2 s before the package's names became lazy; 0.15 s after).
    import subprocess
    import sys

    script = ("import sys\nfrom dppca_dask.cli import main\n"
              f"sys.argv = ['dppca-dask', *{argv!r}]\n"
              "try:\n    main()\nexcept SystemExit:\n    pass\n"
              "print(sorted(m for m in ('dask', 'distributed', 'xarray', 'scipy', 'numpy', "
              "'zarr', 'matplotlib') if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr[-2000:]


def test_package__public_names_load_on_first_use():
    import subprocess
    import sys

    script = ("import sys, dppca_dask\nassert 'dask' not in sys.modules\n"
              "from dppca_dask import dp_pca, load_result\n"
              "import dppca_dask.results.plotters as p\n"
              "print(dp_pca.__module__, 'pca' in p.registered_kinds(), "
              "set(dppca_dask.__all__) <= set(dir(dppca_dask)))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.stdout.split() == ["dppca_dask.pca.pca", "True", "True"], done.stderr[-2000:]


# -- --json on every command that produces a result ------------------------------------------


def test_cli_run__json_result_and_plan_json_error(tmp_path, data):
    cfg = _config(tmp_path, data)
    result = CliRunner().invoke(main, ["run", str(cfg), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out) == {"directory", "files", "kind", "spent", "passes", "timings", "summary"}
    assert out["kind"] == "loading" and "loading.zarr" in out["files"]
    assert out["spent"]["eps"] == pytest.approx(1.0)
    assert out["passes"] and out["summary"].startswith("DP PC Directions")
    assert "\r" not in result.output
    # an error under --json: the Error line on stderr and the error as JSON on stdout
    result = CliRunner().invoke(main, ["plan", str(cfg), "--json", "--set", "privacy.eps=-1"])
    assert result.exit_code == 1
    err = json.loads(result.stdout)["error"]
    assert err["exit_code"] == 1 and err["type"].endswith("Error") and "eps" in err["message"]
    assert set(err) == {"type", "message", "exit_code", "parameter", "rule", "value", "hint"}
    assert result.stderr.startswith("Error: ")


def test_cli_convert_and_budget_list__json(tmp_path):
    src = tmp_path / "rows.csv"
    src.write_text("a,b\n1,2\n3,4\n1,2\n5,6\n")
    ledger = tmp_path / "ledger.sqlite"
    result = CliRunner().invoke(main, ["convert", str(src), str(tmp_path / "rows.zarr"),
                                       "--check-duplicates", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["target"].endswith("rows.zarr") and out["dropped"] is False
    assert out["duplicates"] == [{"count": 1, "examples": [{"row": 2, "repeats": 0}]}]
    result = CliRunner().invoke(main, ["budget", "cap", str(tmp_path / "rows.zarr"), "--eps",
                                       "2", "--delta", "1e-5", "--ledger", str(ledger)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["budget", "list", "--ledger", str(ledger), "--json"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)
    shown = json.loads(CliRunner().invoke(main, ["budget", "show", str(tmp_path / "rows.zarr"),
                                                 "--ledger", str(ledger), "--json"]).stdout)
    assert [entry] == shown
