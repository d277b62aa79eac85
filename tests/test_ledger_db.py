"""The SQLite budget ledger (issue 13): reservations, the tight cap check, concurrency, files."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import sqlite3

import pytest

from dppca_dask import BudgetError, InputError, PrivacyWarning
from dppca_dask.io.identity import DatasetIdentity
from dppca_dask.pipeline.budget_cap import Basic, Cap, cumulative, fits
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.pipeline.ledger_legacy import import_jsonl
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.composition import compose

DATA = DatasetIdentity("/data/d.zarr", "X", dataset_id="0b9a4a1c-0000-4000-8000-000000000001",
                       id_source="attribute")
OTHER = DatasetIdentity("/data/e.zarr", "X", dataset_id="0b9a4a1c-0000-4000-8000-000000000002",
                        id_source="attribute")


def _gauss(eps: float = 1.0, delta: float = 1e-6, rho: float | None = 0.02) -> dict:
    return SpendRecord("loading", "gaussian", eps, delta, rho=rho).as_dict()


def _laplace(eps: float) -> dict:
    return SpendRecord("score", "laplace", eps, 0.0).as_dict()


def _zcdp(rho: float) -> dict:
    return SpendRecord("cov", "gaussian_zcdp", 0.0, 0.0, rho=rho, calibration="zcdp").as_dict()


def test_ledger__reserve_confirm_cancel_fail(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    assert ledger.spent(DATA.dataset_id) is None
    a = ledger.reserve(DATA, [_gauss()], PrivacyBudget(1.0, 1e-6), task="loading", output="/o/a")
    assert ledger.reservation(a).status == "reserved" and ledger.reservation(a).pid == os.getpid()
    ledger.confirm(a, [_gauss()])
    b = ledger.reserve(DATA, [_gauss(0.5)], PrivacyBudget(0.5, 1e-6))
    assert ledger.spent(DATA.dataset_id).basic_eps == 1.5
    ledger.cancel(b)
    c = ledger.reserve(DATA, [_gauss(0.25)], PrivacyBudget(0.25, 1e-6))
    ledger.fail_after_draw(c, error="OSError")
    spend = ledger.spent(DATA.dataset_id)
    assert (spend.basic_eps, spend.basic_delta) == (1.25, 2e-6)
    statuses = [(r.id, r.status) for r in ledger.reservations(DATA.dataset_id)]
    assert statuses == [(a, "released"), (b, "cancelled"), (c, "failed")]
    assert ledger.reservation(c).note == "failed after noise was drawn: OSError"
    kinds = [e["kind"] for e in ledger.events(DATA.dataset_id)]
    assert kinds == ["reserve", "release", "reserve", "cancel", "reserve", "release"]
    # Only the reservations (before any data) carry a time; a run's end would time the data.
    assert all((e["time"] is None) == (e["kind"] != "reserve") for e in ledger.events())
    assert ledger.reservations(OTHER.dataset_id) == []


def test_ledger__cancel_after_custodian_free_stays_freed(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    a = ledger.reserve(DATA, [_gauss()], PrivacyBudget(1.0, 1e-6))
    ledger.free(a, force=True)  # our own pid is alive: force
    ledger.cancel(a)
    assert ledger.reservation(a).status == "freed"
    b = ledger.reserve(DATA, [_gauss()], PrivacyBudget(1.0, 1e-6))
    with pytest.raises(BudgetError, match="still running"):
        ledger.free(b)
    ledger.free(b, spent=True, force=True)
    assert ledger.reservation(b).status == "closed" and ledger.spent(DATA.dataset_id).basic_eps == 1
    with pytest.raises(BudgetError, match="is closed, not reserved"):
        ledger.free(b, force=True)
    with pytest.raises(InputError, match="No reservation 'nope'"):
        ledger.free("nope")


def test_cap__checked_on_the_tight_figure(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_cap(DATA, Cap(2.0, 1e-5))
    # 3 Gaussian releases of (1, 1e-6) with rho 0.02: basic eps 3 > 2, tight about 1.4 at 1e-5.
    for _ in range(3):
        rid = ledger.reserve(DATA, [_gauss()], PrivacyBudget(1.0, 1e-6))
        ledger.confirm(rid, [_gauss()])
    spend = ledger.spent(DATA.dataset_id)
    assert spend.basic_eps == 3.0 and spend.delta == 1e-5
    assert spend.tight_eps == compose([_gauss()] * 3).tight_eps(1e-5) < 2.0
    with pytest.raises(BudgetError, match="past the custodian's cap eps = 2, delta = 1e-05"):
        ledger.reserve(DATA, [_gauss(eps=1.0, rho=None)], PrivacyBudget(1.0, 1e-6))
    assert len(ledger.reservations(DATA.dataset_id)) == 3  # the refusal recorded nothing


def test_cap__exactly_at_the_cap_and_basic_fallback():
    records = [_laplace(0.5), _laplace(1.0)]
    ok, spend = fits(records, PrivacyBudget(1.5, 0.0), Cap(1.5, 0.0))
    assert ok and spend.tight_eps == 1.5  # delta = 0: the basic sum is the figure
    assert not fits(records, PrivacyBudget(1.5, 0.0), Cap(1.4, 0.0))[0]
    # The delta part must fit too: records without rho whose deltas exceed D.
    other = [SpendRecord("s", "stability_histogram", 0.1, 6e-6).as_dict()] * 2
    ok, spend = fits(other, PrivacyBudget(0.2, 1.2e-5), Cap(10.0, 1e-5))
    assert not ok and math.isinf(spend.tight_eps)


def test_cap__zcdp_only_records_count(tmp_path):
    """Covariance releases state only rho (eps = delta = 0): they are not free under a cap."""
    records = [_zcdp(0.5)] * 4
    spend = cumulative(records, Basic(0.0, 0.0), 1e-6)
    assert spend.tight_eps > 1.0 and spend.rho == 2.0
    assert not fits(records, Basic(0.0, 0.0), Cap(1.0, 1e-6))[0]
    assert fits(records, Basic(0.0, 0.0), Cap(rho=2.0))[0]
    assert not fits(records, Basic(0.0, 0.0), Cap(rho=1.9))[0]
    # A rho cap admits only records that have a rho.
    assert not fits([*records, SpendRecord("s", "stability_histogram", 0.1, 1e-7).as_dict()],
                    PrivacyBudget(0.1, 1e-7), Cap(rho=10.0))[0]


def test_cap__a_run_may_only_lower_it(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_cap(DATA, Cap(1.5, 1e-5))
    with pytest.raises(BudgetError, match="past the lowered cap eps = 0.5"):
        ledger.reserve(DATA, [_laplace(1.0)], PrivacyBudget(1.0, 0.0), run_cap=Cap(0.5, 1e-5))
    with pytest.warns(PrivacyWarning, match=r"looser than the custodian's .* eps = 10"):
        ledger.reserve(DATA, [_laplace(1.0)], PrivacyBudget(1.0, 0.0), run_cap=Cap(10.0, 1e-5))
    with pytest.warns(PrivacyWarning), pytest.raises(BudgetError, match="custodian's cap"):
        ledger.reserve(DATA, [_laplace(1.0)], PrivacyBudget(1.0, 0.0), run_cap=Cap(10.0, 1e-5))
    # No custodian cap: the run's own cap applies.
    with pytest.raises(BudgetError, match="past the lowered cap"):
        ledger.reserve(OTHER, [_laplace(2.0)], PrivacyBudget(2.0, 0.0), run_cap=Cap(1.0, 0.0))
    assert Cap(1.0, 1e-5).lowered_by(Cap(rho=0.1)) == (Cap(1.0, 1e-5, 0.1), [])
    with pytest.raises(BudgetError, match="'eps' and 'delta' parameters .* together"):
        Cap(1.0)
    with pytest.raises(BudgetError, match="'delta' parameter of the budget cap must be a float"):
        Cap(1.0, 1.5)


def test_cap__required_by_the_deployment(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    with pytest.raises(BudgetError, match="no cap, and this deployment requires one"):
        ledger.reserve(DATA, [_laplace(1.0)], PrivacyBudget(1.0, 0.0), require_cap=True)
    ledger.set_cap(DATA, Cap(2.0, 0.0))
    ledger.reserve(DATA, [_laplace(1.0)], PrivacyBudget(1.0, 0.0), require_cap=True)
    ledger.set_cap(DATA, None)
    assert ledger.dataset(DATA.dataset_id).cap is None
    assert [e["note"] for e in ledger.events() if e["kind"] == "cap"] == [
        "eps = 2, delta = 0", "removed"]


def _contend(path: str, barrier, queue) -> None:
    ledger = Ledger(path)
    barrier.wait()
    try:
        rid = ledger.reserve(DATA, [_laplace(1.0)], PrivacyBudget(1.0, 0.0), task="loading")
        queue.put(("ok", rid))
    except BudgetError as exc:
        queue.put(("refused", str(exc)))


def test_ledger__eight_concurrent_processes_against_a_cap_admitting_three(tmp_path):
    path = str(tmp_path / "fresh" / "l.sqlite")  # created by the contenders themselves
    ctx = mp.get_context("fork")  # the children only use sqlite3
    barrier, queue = ctx.Barrier(8), ctx.Queue()
    Ledger(path).set_cap(DATA, Cap(3.0, 0.0))
    procs = [ctx.Process(target=_contend, args=(path, barrier, queue)) for _ in range(8)]
    for p in procs:
        p.start()
    outcomes = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted(kind for kind, _ in outcomes) == ["ok"] * 3 + ["refused"] * 5, outcomes
    assert all("past the custodian's cap" in text for kind, text in outcomes if kind == "refused")
    ledger = Ledger(path)
    assert len(ledger.reservations(DATA.dataset_id)) == 3
    assert ledger.spent(DATA.dataset_id).basic_eps == 3.0
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_ledger__files(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        Ledger(tmp_path / "missing.sqlite", create=False)
    assert not (tmp_path / "missing.sqlite").exists()
    old = tmp_path / "old.jsonl"
    old.write_text('{"kind": "reserve"}\n')
    with pytest.raises(InputError, match="JSON-lines ledger .* budget import"):
        Ledger(old)
    assert old.read_text() == '{"kind": "reserve"}\n'
    (tmp_path / "junk").write_text("hello")
    with pytest.raises(InputError, match="not a SQLite database"):
        Ledger(tmp_path / "junk")
    fresh = tmp_path / "fresh.sqlite"  # e.g. being created by another process
    sqlite3.connect(fresh).execute("PRAGMA journal_mode = wal").connection.close()
    assert Ledger(fresh, create=False).datasets() == []
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(InputError, match="without the ledger's tables"):
        Ledger(other, create=False).datasets()


def test_ledger__records_no_seed_and_no_message(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    rid = ledger.reserve(DATA, [_gauss()], PrivacyBudget(1.0, 1e-6), seeded=True)
    ledger.fail_after_draw(rid, error="ValueError", records=[_gauss()], seeded=True)
    dump = "\n".join(sqlite3.connect(tmp_path / "l.sqlite").iterdump())
    assert "ValueError" in dump and "seed" not in dump.replace("seeded", "")
    assert ledger.reservation(rid).seeded


def test_import__old_jsonl_ledger_is_copied_and_left_alone(tmp_path):
    key = "/gone/d.zarr::X"
    lines = [
        {"kind": "reserve", "release_id": "r1", "dataset": key, "eps": 1.0, "delta": 1e-6,
         "time": "2025-01-01T00:00:00+00:00", "task": "loading", "output": "/o/1"},
        {"kind": "release", "release_id": "r1", "dataset": key, "eps": 1.0, "delta": 1e-6,
         "records": [_gauss()], "status": ""},
        {"kind": "reserve", "release_id": "r2", "dataset": key + "::columns=a,b", "eps": 0.5,
         "delta": 0.0},
        {"kind": "cancel", "release_id": "r2", "dataset": key, "eps": 0.5, "delta": 0.0},
        {"kind": "reserve", "release_id": "r3", "dataset": key, "eps": 0.25, "delta": 0.0},
    ]
    old = tmp_path / "dppca-budget-ledger.jsonl"
    old.write_text("".join(json.dumps(e) + "\n" for e in lines))
    before = old.read_bytes()
    ledger = Ledger(tmp_path / "l.sqlite")
    copied = import_jsonl(ledger, old)
    assert [c[0] for c in copied] == ["r1", "r2", "r3"] and len({c[2] for c in copied}) == 1
    assert import_jsonl(ledger, old) == []  # twice: nothing more
    assert old.read_bytes() == before
    dataset = copied[0][2]
    assert [(r.id, r.status) for r in ledger.reservations(dataset)] == [
        ("r1", "released"), ("r2", "cancelled"), ("r3", "reserved")]
    spend = ledger.spent(dataset)
    assert (spend.basic_eps, spend.basic_delta) == (1.25, 1e-6)
    old.write_text("{broken\n")
    with pytest.raises(InputError, match="line 1 is corrupt"):
        import_jsonl(ledger, old)


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"eps": float("nan")}, r"^The 'eps' parameter of the budget cap must be a finite float >= 0\. Got nan"),
    ({"eps": 1.0, "delta": float("nan")}, r"^The 'delta' parameter .* must be a float in \[0, 1\)\. Got nan"),
    ({"rho": -1.0}, r"^The 'rho' parameter .* must be a finite float >= 0\. Got -1\.0"),
    ({"eps": 1.0}, r"^The 'eps' and 'delta' parameters of the budget cap must be given together"),
    ({}, r"^The budget cap must give eps and delta, or rho"),
])
def test_cap__a_bad_value_is_named_for_its_own_rule_first(kwargs, expected):
    with pytest.raises(BudgetError, match=expected):
        Cap(**kwargs)
