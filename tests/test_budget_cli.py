"""`dppca-dask budget ...` and runs that end early (issue 13): real SQLite, real processes.

Runs are `dppca-dask run` subprocesses on tiny datasets; where a test must stop a run at a known
point it starts the same command line through a small script that makes the fit (or the
output writer) wait, then sends SIGTERM or SIGKILL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from dppca_dask.cli import main
from dppca_dask.io.datasets import write_demo_dataset
from dppca_dask.io.identity import resolve_dataset
from dppca_dask.pipeline.ledger import Ledger
from tests.helpers import write_store

PAUSE = textwrap.dedent("""
    import dataclasses, sys, time
    from pathlib import Path
    from dppca_dask.pipeline import runner
    from dppca_dask.pipeline.tasks import TASKS

    where, marker, config = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    if where == "fit":  # before any noise is drawn
        def fit(config, source, budget, state):
            marker.write_text("fit")
            time.sleep(300)
        TASKS["loading"] = dataclasses.replace(TASKS["loading"], fit=fit)
    else:  # the noise is drawn; the outputs are in the temporary directory
        write = runner._write_outputs
        def slow(tmp, *args, **kwargs):
            write(tmp, *args, **kwargs)
            marker.write_text(tmp)
            time.sleep(300)
        runner._write_outputs = slow
    from dppca_dask.cli import main
    main(["run", config, "-q"])
""")


@pytest.fixture
def tiny(tmp_path) -> Path:
    store = tmp_path / "tiny.zarr"
    write_demo_dataset(store, n_per_group=8)
    return store


def _config(tmp_path: Path, data: Path, name: str, eps: float = 1.0) -> Path:
    cfg = {"input": {"path": str(data), "array": "X"}, "privacy": {"eps": eps, "delta": 1e-6},
           "cluster": {"kind": "local", "n_workers": 1, "processes": False},
           "output": {"directory": str(tmp_path / name), "formats": ["zarr"]}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _cap_admitting(tmp_path: Path, data: Path, k: int, eps: float = 1.0) -> str:
    """A cap eps (at delta 1e-5) that admits exactly k releases of _config(eps=eps): halfway
    between the tight cumulative figures of k and k + 1 of them (their planned records)."""
    from dppca_dask.pipeline.config import load_config
    from dppca_dask.pipeline.runner import plan_run
    from dppca_dask.privacy.composition import compose

    records = plan_run(load_config(_config(tmp_path, data, "probe", eps=eps))).release.records
    low, high = (compose(list(records) * m).tight_eps(1e-5) for m in (k, k + 1))
    return repr((low + high) / 2)


_SPAWNED: list[subprocess.Popen] = []
"""Every process this module's tests start (each in its own session, with its cluster)."""


@pytest.fixture(autouse=True)
def _reap():
    """Whatever a test does or fails at, the processes it started are gone when it ends: each
    session is SIGKILLed (a failed wait once left 8 runs and their clusters alive for minutes)."""
    start = len(_SPAWNED)
    yield
    for proc in _SPAWNED[start:]:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=60)
    del _SPAWNED[start:]


def _spawn(argv: list[str], **kwargs) -> subprocess.Popen:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True, **kwargs)
    _SPAWNED.append(proc)
    return proc


def _cli(*args: str, **kwargs) -> subprocess.Popen:
    return _spawn([sys.executable, "-m", "dppca_dask.cli", *args], **kwargs)


def _paused(tmp_path: Path, where: str, config: Path) -> tuple[subprocess.Popen, Path]:
    script, marker = tmp_path / "pause.py", tmp_path / f"{where}.marker"
    script.write_text(PAUSE)
    proc = _spawn([sys.executable, str(script), where, str(marker), str(config)])
    deadline = time.monotonic() + 120
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the run never reached {where!r}: {proc.communicate()[0]}")
        time.sleep(0.05)
    return proc, marker


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*") if ".tmp-" in p.name or ".old-" in p.name]


def test_budget_show__unknown_dataset_or_ledger_is_an_error(tmp_path, tiny, ledger_path):
    runner = CliRunner()
    result = runner.invoke(main, ["budget", "show", str(tiny)])
    assert result.exit_code == 1 and "does not exist" in result.output
    assert not ledger_path.exists()  # reading never creates a ledger
    result = runner.invoke(main, ["budget", str(tiny), "--ledger", str(tmp_path / "typo.sqlite")])
    assert result.exit_code == 1 and "typo.sqlite' does not exist" in result.output
    assert runner.invoke(main, ["budget", "cap", str(tiny), "--eps", "2", "--delta",
                                "1e-5"]).exit_code == 0
    result = runner.invoke(main, ["budget", str(tmp_path / "tiny-typo.zarr")])
    assert result.exit_code == 1 and "has no entry in the budget ledger" in result.output
    shown = runner.invoke(main, ["budget", str(tiny)])  # the alias of `budget show`
    assert shown.exit_code == 0 and "cap: eps = 2, delta = 1e-05" in shown.output
    assert "no reservations yet" in shown.output
    for bad in (["--eps", "2"], [], ["--remove", "--rho", "1"], ["--eps", "1", "--delta", "2"]):
        result = runner.invoke(main, ["budget", "cap", str(tiny), *bad])
        assert result.exit_code == 1 and result.output.startswith("Error: The '"), result.output
    result = runner.invoke(main, ["budget", "cap", str(tmp_path / "nope.zarr"), "--rho", "1"])
    assert result.exit_code == 1 and "'DATASET' argument must be an existing" in result.output


def test_budget__cap_show_json_list_and_copies(tmp_path, tiny, ledger_path):
    runner = CliRunner()
    cap = _cap_admitting(tmp_path, tiny, 1)  # one release of eps = 1 (tight composition)
    assert runner.invoke(main, ["budget", "cap", str(tiny), "--eps", cap, "--delta",
                                "1e-5"]).exit_code == 0
    assert runner.invoke(main, ["run", str(_config(tmp_path, tiny, "a")), "-q"]).exit_code == 0
    copy = tmp_path / "copy.zarr"
    shutil.copytree(tiny, copy)  # cp -r keeps the dataset id, hence the budget
    refused = runner.invoke(main, ["run", str(_config(tmp_path, copy, "b")), "-q"])
    assert refused.exit_code == 1 and "past the custodian's cap" in refused.output
    assert not (tmp_path / "b").exists()
    report = json.loads(runner.invoke(main, ["budget", "show", str(copy), "--json"]).stdout)
    (entry,) = report
    assert entry["dataset"] == resolve_dataset(tiny).dataset_id
    assert entry["cap"] == {"eps": float(cap), "delta": 1e-5, "rho": None}
    (r,) = entry["reservations"]
    assert r["status"] == "released" and r["counted"] and r["pid"] > 0 and r["host"]
    assert r["planned"][0]["mechanism"] == "gaussian_symmetric_matrix"
    assert set(entry["spent"]) == {"basic", "tight", "rho"}
    assert entry["spent"]["basic"] == {"eps": 1.0, "delta": 1e-6}
    listed = runner.invoke(main, ["budget", "list"])
    assert listed.exit_code == 0 and entry["dataset"] in listed.output


def test_budget_adopt__a_store_without_id_keeps_its_history(tmp_path, ledger_path):
    store = tmp_path / "plain.zarr"
    x = np.random.default_rng(1).normal(size=(60, 3))
    write_store(store, x)
    runner = CliRunner()
    assert runner.invoke(main, ["run", str(_config(tmp_path, store, "a")), "-q"]).exit_code == 0
    derived = resolve_dataset(store).dataset_id
    assert derived.startswith("derived-")
    adopted = runner.invoke(main, ["budget", "adopt", str(store)])
    assert adopted.exit_code == 0, adopted.output
    new = resolve_dataset(store)
    assert new.id_source == "attribute" and f"id {new.dataset_id} written" in adopted.output
    ledger = Ledger(ledger_path)
    assert ledger.dataset(derived) is None
    assert [r.status for r in ledger.reservations(new.dataset_id)] == ["released"]
    again = runner.invoke(main, ["budget", "adopt", str(store)])
    assert again.exit_code == 1 and "already has a dataset id" in again.output
    shutil.copytree(store, tmp_path / "copy.zarr")
    assert "released; " in runner.invoke(main, ["budget", str(tmp_path / "copy.zarr")]).output


def test_budget__old_jsonl_ledger_is_read_and_imported_never_changed(tmp_path, tiny, ledger_path):
    key = resolve_dataset(tiny).key
    old = tmp_path / "dppca-budget-ledger.jsonl"
    old.write_text(json.dumps({"kind": "reserve", "release_id": "r1", "dataset": key, "eps": 1.0,
                               "delta": 1e-6, "time": "2025-01-01T00:00:00+00:00",
                               "task": "loading", "output": "/o"}) + "\n"
                   + json.dumps({"kind": "release", "release_id": "r1", "dataset": key,
                                 "eps": 1.0, "delta": 1e-6, "records": []}) + "\n")
    before = old.read_bytes()
    runner = CliRunner()
    shown = runner.invoke(main, ["budget", "show", str(tiny), "--ledger", str(old)])
    assert shown.exit_code == 0, shown.output
    assert "read as is" in shown.output and "r1" in shown.output and " released; " in shown.output
    assert not ledger_path.exists()
    imported = runner.invoke(main, ["budget", "import", str(old)])
    assert imported.exit_code == 0 and "Imported 1 reservation(s)" in imported.output
    assert "Imported 0" in runner.invoke(main, ["budget", "import", str(old)]).output
    assert old.read_bytes() == before
    assert "basic composition eps = 1, delta = 1e-06" in runner.invoke(
        main, ["budget", str(tiny)]).output


@pytest.mark.slow
def test_run__eight_concurrent_runs_against_a_cap_admitting_three(tmp_path, tiny, ledger_path):
    # Identical releases: the cap sits between the tight figures of three and four of them, so
    # it admits exactly three whatever the order in which the runs reserve and finish.
    runner = CliRunner()
    cap = _cap_admitting(tmp_path, tiny, 3, eps=30.0)
    assert runner.invoke(main, ["budget", "cap", str(tiny), "--eps", cap, "--delta",
                                "1e-5"]).exit_code == 0
    procs = [_cli("run", str(_config(tmp_path, tiny, f"out{i}", eps=30.0)), "-q")
             for i in range(8)]
    results = [(p.wait(timeout=300), p.communicate()[0]) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 0, 0, 1, 1, 1, 1, 1], results
    refusals = [out for code, out in results if code == 1]
    assert all("past the custodian's cap" in out and "No data was read" in out
               for out in refusals), refusals
    written = sorted(p.name for p in tmp_path.glob("out*") if p.is_dir())
    assert len(written) == 3 and not _leftovers(tmp_path)
    ledger = Ledger(ledger_path)
    reservations = ledger.reservations(resolve_dataset(tiny).dataset_id)
    assert [r.status for r in reservations] == ["released"] * 3
    assert sorted(Path(r.output).name for r in reservations) == written


def test_run__sigterm_before_the_noise_refunds_and_leaves_nothing(tmp_path, tiny, ledger_path):
    proc, _ = _paused(tmp_path, "fit", _config(tmp_path, tiny, "out"))
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 143, out
    assert "Terminated (SIGTERM)" in out
    (r,) = Ledger(ledger_path).reservations()
    assert r.status == "cancelled" and r.pid == proc.pid
    assert not (tmp_path / "out").exists() and not _leftovers(tmp_path)


def test_run__ctrl_c_before_the_noise_refunds(tmp_path, tiny, ledger_path):
    proc, _ = _paused(tmp_path, "fit", _config(tmp_path, tiny, "out"))
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130 and "Interrupted." in out, out
    (r,) = Ledger(ledger_path).reservations()
    assert r.status == "cancelled" and not (tmp_path / "out").exists()


def test_run__sigterm_while_writing_keeps_the_spend_and_removes_the_temporary(tmp_path, tiny,
                                                                               ledger_path):
    proc, marker = _paused(tmp_path, "write", _config(tmp_path, tiny, "out"))
    tmp = Path(marker.read_text())
    assert tmp.name.startswith(".out.tmp-") and (tmp / "loading.zarr").exists()  # the outputs
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 143, out
    (r,) = Ledger(ledger_path).reservations()
    assert r.status == "failed" and r.note == "failed after noise was drawn: Terminated"
    assert r.records  # the release's records: the noise was drawn
    assert not (tmp_path / "out").exists() and not tmp.exists() and not _leftovers(tmp_path)


def test_run__sigterm_at_any_point_leaves_a_consistent_ledger(tmp_path, tiny, ledger_path):
    """An unpatched `dppca-dask run`, terminated as soon as its reservation is visible."""
    proc = _cli("run", str(_config(tmp_path, tiny, "out")), "-q")
    deadline = time.monotonic() + 120
    while not (ledger_path.exists() and Ledger(ledger_path).reservations()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=120)[0]
    (r,) = Ledger(ledger_path).reservations()
    assert proc.returncode in (0, 143), out
    assert r.status in ("cancelled", "failed", "released")
    assert (tmp_path / "out").exists() == (r.status == "released")
    assert not _leftovers(tmp_path)


def test_run__sigkill_leaves_a_visible_reservation_that_release_clears(tmp_path, tiny,
                                                                       ledger_path):
    runner = CliRunner()
    assert runner.invoke(main, ["budget", "cap", str(tiny), "--eps", _cap_admitting(
        tmp_path, tiny, 1), "--delta", "1e-5"]).exit_code == 0  # admits one release of eps = 1
    proc, _ = _paused(tmp_path, "fit", _config(tmp_path, tiny, "killed"))
    proc.kill()
    proc.communicate(timeout=60)
    (r,) = Ledger(ledger_path).reservations()
    assert r.status == "reserved"
    shown = runner.invoke(main, ["budget", "show", str(tiny)])
    assert (f"reserved, run not finished (pid {proc.pid}, host {os.uname().nodename}, "
            f"started {r.started}; the process is gone)") in shown.output
    assert "basic composition eps = 1, delta = 1e-06" in shown.output  # it counts
    refused = runner.invoke(main, ["run", str(_config(tmp_path, tiny, "next")), "-q"])
    assert refused.exit_code == 1 and "past the custodian's cap" in refused.output
    released = runner.invoke(main, ["budget", "release", r.id])
    assert released.exit_code == 0 and "released (refunded)" in released.output
    assert Ledger(ledger_path).reservation(r.id).status == "freed"
    again = runner.invoke(main, ["budget", "release", r.id])
    assert again.exit_code == 1 and "is freed, not reserved" in again.output
    assert runner.invoke(main, ["run", str(_config(tmp_path, tiny, "next")), "-q"]).exit_code == 0
    assert "freed by the custodian (refunded)" in runner.invoke(
        main, ["budget", str(tiny)]).output


def test_plan__refuses_what_the_cap_refuses_and_records_nothing(tmp_path, tiny, ledger_path):
    runner = CliRunner()
    config = str(_config(tmp_path, tiny, "out", eps=30.0))
    first = runner.invoke(main, ["plan", config])
    assert first.exit_code == 0, first.output  # no cap: planned
    cap = _cap_admitting(tmp_path, tiny, 0, eps=30.0)  # below one release
    assert runner.invoke(main, ["budget", "cap", str(tiny), "--eps", cap, "--delta",
                                "1e-5"]).exit_code == 0
    before = Ledger(ledger_path).reservations()
    planned = runner.invoke(main, ["plan", config])
    ran = runner.invoke(main, ["run", config, "-q"])
    assert planned.exit_code == ran.exit_code == 1, (planned.output, ran.output)
    for out in (planned.output, ran.output):
        assert "past the custodian's cap" in out and "No data was read" in out, out
    assert Ledger(ledger_path).reservations() == before
    assert not (tmp_path / "out").exists()
