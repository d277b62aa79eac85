"""The persistent per-dataset budget ledger through runs: cap before data, refunds, failures.

The ledger's own API (SQLite, concurrency, the tight cap check) is in tests/test_ledger_db.py;
the ``budget`` commands and killed runs in tests/test_budget_cli.py.
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from dppca_dask.cli import main
from dppca_dask.io.identity import resolve_dataset
from dppca_dask.pipeline.ledger import Ledger
from tests.helpers import write_store


def _account(data) -> str:
    return resolve_dataset(str(data), "X").dataset_id


@pytest.fixture
def run_config(tmp_path):
    x = np.random.default_rng(2).normal(size=(120, 3))
    data = tmp_path / "d.zarr"
    write_store(data, x)

    def write(directory: str, cap=None, seed=None) -> str:
        cfg = {
            "input": {"path": str(data), "array": "X"},
            "privacy": {"eps": 1.0, "delta": 1e-6},
            # the seed's calibration: the tight figures below are those of its sigma
            "loading": {"calibration": "classical", "sensitivity": "seed"},
            "cluster": {"kind": "local", "n_workers": 1, "processes": False},
            "output": {"directory": str(tmp_path / directory)},
            "budget_ledger": {"cap": cap} if cap else {},
        }
        if seed is not None:
            cfg["rng"] = seed
        path = tmp_path / f"{directory}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return str(path)

    return write, data


@pytest.mark.parametrize("whose", ["custodian", "run"])
def test_run__ledger_records_and_caps_before_reading_data(tmp_path, run_config, ledger_path,
                                                          whose):
    write, data = run_config
    runner = CliRunner()
    cap = {"eps": 1.2, "delta": 1e-5}  # admits two (1, 1e-6) releases (tight 1.09), not 3 (1.36)
    if whose == "custodian":
        assert runner.invoke(main, ["budget", "cap", str(data), "--eps", "1.2", "--delta",
                                    "1e-5"]).exit_code == 0
    run_cap = cap if whose == "run" else None
    assert runner.invoke(main, ["run", write("a", run_cap, seed=424242), "-q"]).exit_code == 0
    assert runner.invoke(main, ["run", write("b", run_cap), "-q"]).exit_code == 0
    # The third release would pass the cap: refused before any data is read.
    for f in (data / "X").rglob("*"):
        if f.is_file() and f.name != "zarr.json":
            f.write_bytes(b"garbage")
    result = runner.invoke(main, ["run", write("c", run_cap), "-q"])
    assert result.exit_code == 1
    assert "past the" in result.output and "No data was read" in result.output
    assert not (tmp_path / "c").exists()
    assert b"424242" not in ledger_path.read_bytes()
    assert "424242" not in "\n".join(sqlite3.connect(ledger_path).iterdump())
    shown = runner.invoke(main, ["budget", str(data)])
    assert shown.exit_code == 0, shown.output
    assert sum(" released; " in line for line in shown.output.splitlines()) == 2
    assert "basic composition eps = 2, delta = 2e-06; tight eps = " in shown.output


def test_run__failed_run_refunds_its_reservation(tmp_path, run_config, ledger_path):
    write, data = run_config
    for f in (data / "X").rglob("*"):
        if f.is_file() and f.name != "zarr.json":
            f.write_bytes(b"garbage")
    result = CliRunner().invoke(main, ["run", write("a"), "-q"])
    assert result.exit_code != 0
    ledger = Ledger(ledger_path)
    assert [e["kind"] for e in ledger.events()] == ["reserve", "cancel"]
    assert ledger.spent(_account(data)) is None


def _loading_config(tmp_path, data, name="out"):
    from dppca_dask.pipeline.config import RunConfig

    return RunConfig.from_dict({
        "input": {"path": str(data), "array": "X"},
        "privacy": {"eps": 1.0, "delta": 1e-6},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(tmp_path / name)},
    })


def test_run__failure_while_writing_after_the_fit_stays_spent(tmp_path, run_config, monkeypatch,
                                                               ledger_path):
    from dppca_dask.pipeline import runner
    _, data = run_config

    def broken_writer(tmp, *args, **kwargs):
        raise OSError("disk full while writing 0.123456")  # a message that could carry data

    monkeypatch.setattr(runner, "_write_outputs", broken_writer)
    with pytest.raises(OSError, match="disk full"):
        runner.execute(_loading_config(tmp_path, data), progress=False)
    ledger = Ledger(ledger_path)
    events = ledger.events()
    assert [(e["kind"], e["status"]) for e in events] == [("reserve", "reserved"),
                                                          ("release", "failed")]
    (reservation,) = ledger.reservations()
    assert reservation.note == "failed after noise was drawn: OSError"
    assert reservation.records  # the release's (public) ledger records
    assert "0.123456" not in "\n".join(sqlite3.connect(ledger_path).iterdump())
    spend = ledger.spent(_account(data))
    assert (spend.basic_eps, spend.basic_delta) == (1.0, 1e-6)
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".out.tmp-*"))
    shown = CliRunner().invoke(main, ["budget", str(data)])
    assert "failed (spent: failed after noise was drawn: OSError)" in shown.output
    assert "basic composition eps = 1, delta = 1e-06" in shown.output


def test_run__failure_in_the_fit_after_a_draw_stays_spent(tmp_path, run_config, monkeypatch,
                                                           ledger_path):
    import dataclasses

    from dppca_dask.pipeline import runner
    from dppca_dask.pipeline.tasks import TASKS

    _, data = run_config
    seen = {}

    def fit(config, source, budget, state):
        from dppca_dask.privacy.rng import as_rng

        seen["generator"] = state.generator
        assert as_rng(state.generator).generator is state.generator  # still an Rng
        state.generator.integers(0, 10)  # any draw counts, not only normal/laplace
        raise ValueError("data-dependent failure")

    monkeypatch.setitem(TASKS, "loading", dataclasses.replace(TASKS["loading"], fit=fit))
    with pytest.raises(ValueError, match="data-dependent"):
        runner.execute(_loading_config(tmp_path, data), progress=False)
    assert seen["generator"].drawn
    ledger = Ledger(ledger_path)
    assert [e["kind"] for e in ledger.events()] == ["reserve", "release"]
    (reservation,) = ledger.reservations()
    assert reservation.status == "failed" and reservation.records is None  # planned ones count
    assert reservation.note == "failed after noise was drawn: ValueError"
    assert ledger.spent(_account(data)).basic_eps == 1.0


def test_run__failure_before_any_draw_is_refunded(tmp_path, run_config, monkeypatch, ledger_path):
    import dataclasses

    from dppca_dask.pipeline import runner
    from dppca_dask.pipeline.tasks import TASKS

    _, data = run_config

    def fit(config, source, budget, state):
        from dppca_dask.privacy.rng import Rng

        assert isinstance(state.generator, Rng)  # checks are not draws
        raise ValueError("failed before noise")

    monkeypatch.setitem(TASKS, "loading", dataclasses.replace(TASKS["loading"], fit=fit))
    with pytest.raises(ValueError, match="before noise"):
        runner.execute(_loading_config(tmp_path, data), progress=False)
    ledger = Ledger(ledger_path)
    assert [e["kind"] for e in ledger.events()] == ["reserve", "cancel"]
    assert ledger.spent(_account(data)) is None


def test_draw_tracker__transparent_and_notes_any_draw():
    from dppca_dask.privacy.draws import DrawTracker
    from dppca_dask.privacy.rng import Rng, as_rng
    from dppca_dask.testing import RRNG

    for make in (lambda: np.random.default_rng(3), lambda: RRNG(3)):
        reference, tracked = make(), DrawTracker(make())
        assert isinstance(tracked, Rng) and isinstance(tracked, type(reference))
        assert as_rng(tracked).generator is tracked and not tracked.drawn
        assert tracked.normal(size=3).tolist() == reference.normal(size=3).tolist()
        assert tracked.drawn
    for use in (lambda g: g.bit_generator, lambda g: g.random(), lambda g: g.spawn(1),
                lambda g: g.laplace(), lambda g: g.exponential(), lambda g: g.uniform()):
        tracked = DrawTracker(np.random.default_rng(0))
        use(tracked)
        assert tracked.drawn
