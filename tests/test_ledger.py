"""The persistent per-dataset budget ledger: cap enforcement before data, atomic appends."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest
import xarray as xr
import yaml
from click.testing import CliRunner

from dppca_dask import BudgetError, InputError
from dppca_dask.cli import main
from dppca_dask.pipeline.ledger import BudgetLedger, dataset_key
from dppca_dask.privacy.budget import PrivacyBudget


def test_ledger__reserve_confirm_cancel(tmp_path):
    ledger = BudgetLedger(tmp_path / "l.jsonl")
    key = dataset_key(str(tmp_path / "d.zarr"), "X")
    assert ledger.spent(key) is None
    a = ledger.reserve(key, PrivacyBudget(1.0, 1e-6), task="loading")
    ledger.confirm(a, key, PrivacyBudget(1.0, 1e-6), records=[{"component": "loading"}])
    b = ledger.reserve(key, PrivacyBudget(0.5, 1e-6))
    assert ledger.spent(key) == PrivacyBudget(1.5, 2e-6)
    ledger.cancel(b, key, PrivacyBudget(0.5, 1e-6))
    assert ledger.spent(key) == PrivacyBudget(1.0, 1e-6)
    kinds = [e.kind for e in ledger.history(key)]
    assert kinds == ["reserve", "release", "reserve", "cancel"]
    assert "released" in ledger.render(key)
    assert "cancelled" in ledger.render(key)


def test_ledger__cap_refuses(tmp_path):
    ledger = BudgetLedger(tmp_path / "l.jsonl")
    cap = PrivacyBudget(2.0, 1e-5)
    ledger.reserve("d", PrivacyBudget(1.5, 1e-6), cap=cap)
    with pytest.raises(BudgetError, match="past the cap"):
        ledger.reserve("d", PrivacyBudget(1.0, 1e-6), cap=cap)
    ledger.reserve("other", PrivacyBudget(1.0, 1e-6), cap=cap)  # per dataset
    ledger.reserve("d", PrivacyBudget(0.5, 1e-6), cap=cap)  # exactly at the cap is allowed


def test_ledger__append_only_lines(tmp_path):
    path = tmp_path / "l.jsonl"
    ledger = BudgetLedger(path)
    ledger.reserve("d", PrivacyBudget(1.0, 1e-6))
    first = path.read_text()
    ledger.reserve("d", PrivacyBudget(1.0, 1e-6))
    assert path.read_text().startswith(first)


def test_ledger__corrupt_line_is_an_error(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text("{not json\n")
    with pytest.raises(InputError, match="line 1 is corrupt"):
        BudgetLedger(path).spent("d")


def _reserve_many(path: str, n: int, out) -> None:
    ledger = BudgetLedger(path)
    ok = 0
    for _ in range(n):
        try:
            ledger.reserve("d", PrivacyBudget(1.0, 0.0), cap=PrivacyBudget(10.0, 1e-9))
            ok += 1
        except BudgetError:
            pass
    out.put(ok)


def test_ledger__concurrent_reservations_never_exceed_cap(tmp_path):
    path = str(tmp_path / "l.jsonl")
    queue = mp.get_context("fork").Queue()
    procs = [mp.get_context("fork").Process(target=_reserve_many, args=(path, 8, queue))
             for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert sum(queue.get(timeout=5) for _ in procs) == 10
    assert BudgetLedger(path).spent("d").eps == 10.0


@pytest.fixture
def run_config(tmp_path):
    x = np.random.default_rng(2).normal(size=(120, 3))
    data = tmp_path / "d.zarr"
    xr.Dataset({"X": (("sample", "variable"), x)}).to_zarr(data, consolidated=False)

    def write(directory: str, cap=None, seed=None) -> str:
        cfg = {
            "input": {"path": str(data), "array": "X"},
            "privacy": {"eps": 1.0, "delta": 1e-6},
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


def test_run__ledger_records_and_caps_before_reading_data(tmp_path, run_config):
    write, data = run_config
    runner = CliRunner()
    cap = {"eps": 2.5, "delta": 1e-5}
    assert runner.invoke(main, ["run", write("a", cap, seed=424242), "-q"]).exit_code == 0
    assert runner.invoke(main, ["run", write("b", cap), "-q"]).exit_code == 0
    # Third release would reach eps = 3 > 2.5: refused before any data is read.
    for f in (data / "X").rglob("*"):
        if f.is_file() and f.name != "zarr.json":
            f.write_bytes(b"garbage")
    result = runner.invoke(main, ["run", write("c", cap), "-q"])
    assert result.exit_code == 1
    assert "past the cap" in result.output and "No data was read" in result.output
    assert not (tmp_path / "c").exists()
    ledger_file = tmp_path / "dppca-budget-ledger.jsonl"
    assert "424242" not in ledger_file.read_text()
    shown = runner.invoke(main, ["budget", str(data), "--ledger", str(ledger_file)])
    assert shown.exit_code == 0
    assert sum(" released " in line for line in shown.output.splitlines()) == 2
    assert "eps = 2, delta = 2e-06" in shown.output


def test_run__failed_run_refunds_its_reservation(tmp_path, run_config):
    write, data = run_config
    for f in (data / "X").rglob("*"):
        if f.is_file() and f.name != "zarr.json":
            f.write_bytes(b"garbage")
    result = CliRunner().invoke(main, ["run", write("a"), "-q"])
    assert result.exit_code != 0
    ledger = BudgetLedger(tmp_path / "dppca-budget-ledger.jsonl")
    assert [e.kind for e in ledger.history()] == ["reserve", "cancel"]
    assert ledger.spent(dataset_key(str(data), "X")) is None


def _loading_config(tmp_path, data, name="out"):
    from dppca_dask.pipeline.config import RunConfig

    return RunConfig.from_dict({
        "input": {"path": str(data), "array": "X"},
        "privacy": {"eps": 1.0, "delta": 1e-6},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(tmp_path / name)},
    })


def test_run__failure_while_writing_after_the_fit_stays_spent(tmp_path, run_config, monkeypatch):
    from dppca_dask.pipeline import runner
    _, data = run_config

    def broken_writer(tmp, *args, **kwargs):
        raise OSError("disk full while writing 0.123456")  # a message that could carry data

    monkeypatch.setattr(runner, "_write_outputs", broken_writer)
    with pytest.raises(OSError, match="disk full"):
        runner.execute(_loading_config(tmp_path, data), progress=False)
    ledger_file = tmp_path / "dppca-budget-ledger.jsonl"
    ledger = BudgetLedger(ledger_file)
    events = ledger.history()
    assert [(e.kind, e.status) for e in events] == [("reserve", ""), ("release", "failed")]
    assert events[-1].note == "failed after noise was drawn: OSError"
    assert events[-1].records  # the release's (public) ledger records
    assert "0.123456" not in ledger_file.read_text()
    assert ledger.spent(dataset_key(str(data), "X")) == PrivacyBudget(1.0, 1e-6)
    assert not (tmp_path / "out").exists()
    shown = CliRunner().invoke(main, ["budget", str(data), "--ledger", str(ledger_file)])
    assert " failed " in shown.output and "failed after noise was drawn: OSError" in shown.output
    assert "eps = 1, delta = 1e-06" in shown.output


def test_run__failure_in_the_fit_after_a_draw_stays_spent(tmp_path, run_config, monkeypatch):
    import dataclasses

    from dppca_dask.pipeline import runner
    from dppca_dask.pipeline.tasks import TASKS

    _, data = run_config
    seen = {}

    def fit(config, source, budget, state):
        from dppca_dask.rng import as_rng

        seen["generator"] = state.generator
        assert as_rng(state.generator).generator is state.generator  # still an Rng
        state.generator.integers(0, 10)  # any draw counts, not only normal/laplace
        raise ValueError("data-dependent failure")

    monkeypatch.setitem(TASKS, "loading", dataclasses.replace(TASKS["loading"], fit=fit))
    with pytest.raises(ValueError, match="data-dependent"):
        runner.execute(_loading_config(tmp_path, data), progress=False)
    assert seen["generator"].drawn
    ledger = BudgetLedger(tmp_path / "dppca-budget-ledger.jsonl")
    assert [e.kind for e in ledger.history()] == ["reserve", "release"]
    assert ledger.history()[-1].note == "failed after noise was drawn: ValueError"
    assert ledger.spent(dataset_key(str(data), "X")).eps == 1.0


def test_run__failure_before_any_draw_is_refunded(tmp_path, run_config, monkeypatch):
    import dataclasses

    from dppca_dask.pipeline import runner
    from dppca_dask.pipeline.tasks import TASKS

    _, data = run_config

    def fit(config, source, budget, state):
        assert isinstance(state.generator, np.random.Generator)  # checks are not draws
        raise ValueError("failed before noise")

    monkeypatch.setitem(TASKS, "loading", dataclasses.replace(TASKS["loading"], fit=fit))
    with pytest.raises(ValueError, match="before noise"):
        runner.execute(_loading_config(tmp_path, data), progress=False)
    ledger = BudgetLedger(tmp_path / "dppca-budget-ledger.jsonl")
    assert [e.kind for e in ledger.history()] == ["reserve", "cancel"]
    assert ledger.spent(dataset_key(str(data), "X")) is None


def test_draw_tracker__transparent_and_notes_any_draw():
    from dppca_dask.pipeline.runner import DrawTracker
    from dppca_dask.rng import Rng, as_rng
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
