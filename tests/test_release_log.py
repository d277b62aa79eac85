"""The ledger's tamper-evident release log (issue 35 item 3) and the per-analyst caps (item 2):
real SQLite files edited with sqlite3 as someone with write access would, then `budget verify`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from dppca_dask import BudgetError
from dppca_dask.cli import main
from dppca_dask.io.identity import DatasetIdentity
from dppca_dask.pipeline.budget_cap import Cap
from dppca_dask.pipeline.ledger import EVERY_ANALYST, Ledger
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.composition import compose

DATA = DatasetIdentity("/data/d.zarr", "X", dataset_id="0b9a4a1c-0000-4000-8000-00000000000a",
                       id_source="attribute")


def _gauss(eps: float = 1.0) -> dict:
    return SpendRecord("loading", "gaussian", eps, 1e-6, rho=0.02 * eps * eps).as_dict()


def _history(path: Path) -> Ledger:
    """A ledger holding a cap, a release, a refund, a failure, an analyst's cap and a refusal."""
    ledger = Ledger(path)
    ledger.set_cap(DATA, Cap(3.5, 1e-5))
    a = ledger.reserve(DATA, [_gauss()], PrivacyBudget(1.0, 1e-6), task="loading")
    ledger.confirm(a, [_gauss()])
    b = ledger.reserve(DATA, [_gauss()], PrivacyBudget(1.0, 1e-6), analyst="alice")
    ledger.cancel(b)
    c = ledger.reserve(DATA, [_gauss()], PrivacyBudget(1.0, 1e-6), analyst="alice")
    ledger.fail_after_draw(c, error="OSError", records=[_gauss()])
    ledger.set_cap(DATA, Cap(1.5, 1e-5), analyst="bob")
    with pytest.raises(BudgetError, match="past the analyst's cap"):
        ledger.reserve(DATA, [_gauss(2.0)], PrivacyBudget(2.0, 1e-6), analyst="bob")
    return ledger


def _sql(path: Path, statements: str) -> None:
    con = sqlite3.connect(path)
    con.executescript(statements)
    con.commit()
    con.close()


def test_release_log__every_entry_is_chained_and_verifies(tmp_path):
    ledger = _history(tmp_path / "l.sqlite")
    kinds = [e["kind"] for e in ledger.events()]
    assert kinds == ["cap", "reserve", "release", "reserve", "cancel", "reserve", "release",
                     "cap", "refuse"]
    refusal = ledger.events()[-1]
    assert refusal["analyst"] == "bob" and refusal["note"] == "past the analyst's cap"
    assert refusal["time"] is not None and refusal["reservation"] is None
    report = ledger.verify()
    assert report.ok and report.entries == 9, report.problems
    assert all(e["prev"] == p["hash"] for p, e in zip(ledger.events(), ledger.events()[1:],
                                                       strict=False))
    assert ledger.verify(head=ledger.events()[3]["hash"]).ok


@pytest.mark.parametrize(("edit", "found"), [
    ("UPDATE events SET note = 'nothing to see' WHERE seq = 3", "entry #3 (release) was edited"),
    ("DELETE FROM events WHERE seq = 4", "entries #4 to #4 are missing"),
    ("UPDATE events SET seq = -1 WHERE seq = 4; UPDATE events SET seq = 4 WHERE seq = 5; "
     "UPDATE events SET seq = 5 WHERE seq = -1", "does not follow the entry before it"),
    ("DELETE FROM events WHERE seq >= 8", "the last 2 entries were deleted"),
    ("UPDATE reservations SET eps = 0.001 WHERE status = 'released'",
     "its eps differs from its reserve entry"),
    ("UPDATE reservations SET status = 'cancelled' WHERE status = 'failed'",
     "its status is 'cancelled', its last entry (#7) says 'failed'"),
    ("UPDATE reservations SET analyst = 'bob' WHERE analyst = 'alice'",
     "its analyst differs"),
    ("UPDATE reservations SET records = '[]' WHERE status = 'released'",
     "its released records differ"),
    ("DELETE FROM reservations WHERE status = 'failed'", "was deleted"),
    ("UPDATE datasets SET cap_eps = 100", "the cap of dataset"),
    ("UPDATE analyst_caps SET cap_eps = 100", "for analyst 'bob' was edited"),
    ("UPDATE events SET dataset = 'elsewhere' WHERE seq = 2", "was moved to another dataset"),
])
def test_release_log__an_edit_is_detected_and_named(tmp_path, edit, found):
    path = tmp_path / "l.sqlite"
    _history(path)
    _sql(path, edit)
    report = Ledger(path).verify()
    assert not report.ok and any(found in p for p in report.problems), report.problems


def test_release_log__a_rewritten_log_fails_the_noted_head(tmp_path):
    path = tmp_path / "l.sqlite"
    head = _history(path).verify().head
    path.unlink()
    fresh = Ledger(path)
    fresh.set_cap(DATA, Cap(100.0, 1e-5))  # a consistent new history
    assert fresh.verify().ok
    assert "is not in the log" in fresh.verify(head=head).problems[0]


def test_release_log__adopt_keeps_the_log_valid(tmp_path):
    path = tmp_path / "l.sqlite"
    ledger = Ledger(path)
    derived = DatasetIdentity("/data/old.zarr", "X", dataset_id="derived-abc", id_source="derived")
    ledger.set_cap(derived, Cap(5.0, 1e-5), analyst="alice")
    rid = ledger.reserve(derived, [_gauss()], PrivacyBudget(1.0, 1e-6), analyst="alice")
    ledger.confirm(rid, [_gauss()])
    with ledger.connection() as con:
        ledger.adopt(con, derived, "new-uuid")
    assert ledger.verify().ok, ledger.verify().problems
    assert ledger.analyst_cap("new-uuid", "alice") == Cap(5.0, 1e-5)
    assert ledger.spent_by("new-uuid", "alice").basic_eps == 1.0


def test_release_log__a_version_1_ledger_is_upgraded_and_chained(tmp_path):
    path = tmp_path / "v1.sqlite"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema', '1');
        CREATE TABLE datasets (id TEXT PRIMARY KEY, location TEXT NOT NULL,
            id_source TEXT NOT NULL, created TEXT NOT NULL, cap_eps REAL, cap_delta REAL,
            cap_rho REAL, cap_set TEXT);
        CREATE TABLE reservations (id TEXT PRIMARY KEY, dataset TEXT NOT NULL, status TEXT NOT NULL,
            task TEXT NOT NULL DEFAULT '', output TEXT NOT NULL DEFAULT '', eps REAL NOT NULL,
            delta REAL NOT NULL, rho REAL, planned TEXT NOT NULL, records TEXT,
            seeded INTEGER NOT NULL DEFAULT 0, note TEXT NOT NULL DEFAULT '', pid INTEGER,
            host TEXT, started TEXT);
        CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
            dataset TEXT NOT NULL, reservation TEXT, status TEXT NOT NULL DEFAULT '',
            note TEXT NOT NULL DEFAULT '', time TEXT);
        INSERT INTO datasets VALUES ('d', '/d.zarr::X', 'attribute', '2025', 2.0, 1e-5, NULL, '2025');
        INSERT INTO reservations (id, dataset, status, eps, delta, planned)
            VALUES ('r1', 'd', 'released', 1.0, 1e-6, '[]');
        INSERT INTO events (kind, dataset, note, time) VALUES ('cap', 'd', 'eps = 2', '2025');
        INSERT INTO events (kind, dataset, reservation, status) VALUES ('reserve', 'd', 'r1', 'reserved');
        INSERT INTO events (kind, dataset, reservation, status) VALUES ('release', 'd', 'r1', 'released');
    """)
    con.close()
    old = Ledger(path, create=False)
    assert [r.analyst for r in old.reservations()] == [None]  # read without upgrading
    assert not old.verify().ok
    ledger = Ledger(path)
    identity = DatasetIdentity("/d.zarr", "X", dataset_id="d", id_source="attribute")
    rid = ledger.reserve(identity, [_gauss()], PrivacyBudget(1.0, 1e-6), analyst="alice")
    ledger.cancel(rid)
    report = ledger.verify()
    assert report.ok and report.entries == 5, report.problems
    _sql(path, "UPDATE events SET note = 'x' WHERE seq = 1")
    assert "entry #1 (cap) was edited" in Ledger(path).verify().problems[0]


def test_analyst_caps__each_analyst_and_the_dataset_are_capped(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    one = compose([_gauss()]).tight_eps(1e-5)
    two = compose([_gauss()] * 2).tight_eps(1e-5)
    three = compose([_gauss()] * 3).tight_eps(1e-5)
    ledger.set_cap(DATA, Cap((three + compose([_gauss()] * 4).tight_eps(1e-5)) / 2, 1e-5))
    ledger.set_cap(DATA, Cap((one + two) / 2, 1e-5), analyst=EVERY_ANALYST)  # one each
    ledger.set_cap(DATA, Cap((two + three) / 2, 1e-5), analyst="alice")  # alice: two
    admitted = []
    for who in ("alice", "alice", "alice", "bob", "bob", "carol", "dave"):
        try:
            ledger.reserve(DATA, [_gauss()], PrivacyBudget(1.0, 1e-6), analyst=who)
            admitted.append(who)
        except BudgetError as exc:
            assert "No data was read" in str(exc)
    # alice two (her own cap), bob one: the dataset's three; then nobody
    assert admitted == ["alice", "alice", "bob"], admitted
    notes = [(e["analyst"], e["note"]) for e in ledger.events() if e["kind"] == "refuse"]
    assert notes == [("alice", "past the analyst's cap"), ("bob", "past the dataset's cap"),
                     ("carol", "past the dataset's cap"), ("dave", "past the dataset's cap")]
    assert ledger.spent_by(DATA.dataset_id, "alice").basic_eps == 2.0
    assert ledger.spent_by(DATA.dataset_id, "carol") is None
    assert ledger.analyst_caps(DATA.dataset_id).keys() == {EVERY_ANALYST, "alice"}
    ledger.set_cap(DATA, Cap(100.0, 1e-5))
    ledger.reserve(DATA, [_gauss()], PrivacyBudget(1.0, 1e-6), analyst="carol")
    with pytest.raises(BudgetError, match="analyst 'bob' has already spent"):
        ledger.check(DATA, [_gauss()], PrivacyBudget(1.0, 1e-6), analyst="bob")


def test_budget_verify__cli(tmp_path, ledger_path):
    _history(ledger_path)
    runner = CliRunner()
    ok = runner.invoke(main, ["budget", "verify"])
    assert ok.exit_code == 0 and "is intact: 9 entries, head " in ok.output, ok.output
    head = ok.output.split("head ")[1].strip().rstrip(".")
    assert runner.invoke(main, ["budget", "verify", "--head", head]).exit_code == 0
    shown = runner.invoke(main, ["budget", "show", DATA.dataset_id])
    assert "cap of analyst 'bob': eps = 1.5" in shown.output and "(analyst alice)" in shown.output
    _sql(ledger_path, "UPDATE reservations SET eps = 0.001 WHERE status = 'released'")
    broken = runner.invoke(main, ["budget", "verify"])
    assert broken.exit_code == 1
    assert broken.stderr.startswith("Error: The release log of the ledger ")
    assert "its eps differs from its reserve entry" in broken.stderr
    as_json = json.loads(runner.invoke(main, ["budget", "verify", "--json"]).stdout)
    assert as_json["ok"] is False and as_json["logs"][0]["entries"] == 9
    capped = runner.invoke(main, ["budget", "cap", DATA.dataset_id, "--analyst", "carol",
                                  "--eps", "1", "--delta", "1e-5"])
    assert capped.exit_code == 0 and "analyst carol's cap eps = 1" in capped.output, \
        capped.output
