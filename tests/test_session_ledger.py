"""Accounting visible by default (issue 34 item 5): a Python-API release outside ``ledger=`` and
``accounting()`` is recorded in the in-memory session ledger, says so in its metadata, card and
summary, and the process is told once that nothing persistent was recorded."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

from dppca_dask import (
    BudgetError,
    LoadingResult,
    SessionLedgerWarning,
    accounting,
    clipped_control,
    dp_covariance,
    dp_loading,
    dp_scree,
    privacy_control,
    session_ledger,
)
from dppca_dask.pipeline.budget_cap import Basic, cumulative
from dppca_dask.privacy import session
from dppca_dask.results.recorded import NOT_STATED, PERSIST_ADVICE

X = np.random.default_rng(0).normal(size=(200, 4)) * [3.0, 2.0, 1.0, 0.5]
PC = privacy_control(eps=0.5, delta=1e-6)


@pytest.fixture
def fresh_session(monkeypatch):
    """An empty session ledger whose one-time notice has not been shown yet."""
    acct = session.SessionAccountant()
    monkeypatch.setattr(session, "_SESSION", acct)
    monkeypatch.setattr(session, "_NOTIFIED", False)
    return acct


def _notices(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, SessionLedgerWarning)]


def test_session_ledger__a_fit_outside_accounting_is_recorded_and_says_so(fresh_session):
    fit = dp_loading(X, privacy=PC)
    (release,) = session_ledger().releases
    assert (release.number, release.owner, release.input, release.status) == (
        1, "dp_loading", "in-memory ndarray", "released")
    assert release.records == tuple(r.as_dict() for r in fit.ledger)
    assert fit.metadata["recorded_in"] == {"kind": "session", "persistent": False,
                                           "where": session.SESSION_WHERE}
    card = fit._repr_html_()
    assert "<th" in card and ">Recorded in</th>" in card
    assert "not persistent" in card and "accounting(dataset=...)" in card
    last = repr(fit.summary()).splitlines()[-1]
    assert last == f"Recorded in: {session.SESSION_WHERE}; {PERSIST_ADVICE}"


def test_session_ledger__records_and_totals_are_the_results_own(fresh_session):
    fits = [dp_loading(X, privacy=PC),
            dp_scree(X, privacy=privacy_control(eps=0.8, delta=1e-6), k=2,
                     control=clipped_control(C_clip=30)),
            dp_covariance(X, rho=0.2, bounds=10.0)]
    ledger = session_ledger()
    assert [r.owner for r in ledger.releases] == ["dp_loading", "dp_scree", "dp_covariance"]
    own = [r.as_dict() for fit in fits for r in fit.ledger]
    assert ledger.records == own
    spend = ledger.spent()
    eps = math.fsum(f.metadata["ledger_total"].get("eps", 0.0) for f in fits[:2])
    assert spend.basic_eps == pytest.approx(eps, rel=1e-12)
    # composed as the persistent ledger composes a dataset (budget_cap.cumulative)
    basic = Basic(spend.basic_eps, spend.basic_delta)
    assert spend == cumulative(own, basic)
    assert ledger.spent(1e-5) == cumulative(own, basic, 1e-5)
    assert spend.rho > fits[2].metadata["ledger_total"]["rho"] > 0
    for fit in fits:  # every summary ends with the one "Recorded in" line
        assert repr(fit.summary()).splitlines()[-1].startswith("Recorded in: this Python session")
    text = repr(ledger)
    assert "3 release(s)" in text and "dp_covariance" in text and spend.describe() in text
    assert json.loads(json.dumps(ledger.as_dict()))["releases"][2]["rho"] == pytest.approx(0.2)


def test_session_ledger__failure_before_noise_is_refunded_after_noise_kept(fresh_session,
                                                                         monkeypatch):
    from dppca_dask.pca import loading

    def boom(*args, **kwargs):  # the data pass fails: no noise drawn
        raise RuntimeError("pass failed")

    monkeypatch.setattr(loading, "fit_loading", boom)
    with pytest.raises(RuntimeError):
        dp_loading(X, privacy=PC)
    monkeypatch.undo()
    monkeypatch.setattr(session, "_SESSION", fresh_session)
    (release,) = session_ledger().releases
    assert release.status == "cancelled" and not release.counted
    assert session_ledger().spent() is None and session_ledger().records == []


def test_session_ledger__a_seed_is_never_recorded(fresh_session):
    dp_loading(X, privacy=PC, rng=918273645)
    (release,) = session_ledger().releases
    assert release.seeded
    assert "918273645" not in repr(session_ledger()) + json.dumps(session_ledger().as_dict())
    assert "NOT PRIVATE (seeded)" in repr(session_ledger())


def test_session_ledger__the_notice_is_issued_once_per_process(fresh_session):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dp_loading(X, privacy=PC)
        dp_loading(X, privacy=PC)
    (notice,) = _notices(caught)
    assert notice.startswith("dp_loading: this release was recorded only in this Python "
                             "session's in-memory ledger")
    assert "accounting(dataset=...)" in notice and "once per process" in notice
    assert caught[0].filename == __file__  # points at the caller
    assert len(session_ledger().releases) == 2


_FRESH = """
import warnings
import numpy as np
from dppca_dask import dp_loading, privacy_control, session_ledger
X = np.random.default_rng(0).normal(size=(100, 3))
pc = privacy_control(eps=1, delta=1e-5)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    dp_loading(X, privacy=pc)
    dp_loading(X, privacy=pc)
    dp_loading(X, privacy=pc)
names = [w.category.__name__ for w in caught]
print(names.count("SessionLedgerWarning"), len(session_ledger().releases))
"""


def test_session_ledger__a_fresh_process_is_told_once():
    proc = subprocess.run([sys.executable, "-c", _FRESH], check=False, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "3"]


def test_accounting__the_card_and_summary_name_the_ledger(fresh_session, tmp_path):
    path = tmp_path / "analysis-ledger.sqlite"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with accounting(f"sqlite:///{path}", dataset="survey-card"):
            fit = dp_loading(X, privacy=PC)
    assert _notices(caught) == [] and session_ledger().releases == ()
    recorded = fit.metadata["recorded_in"]
    assert recorded["kind"] == "ledger" and recorded["persistent"] is True
    assert recorded["ledger"] == str(path)
    from dppca_dask.io.identity import DatasetIdentity

    dataset = DatasetIdentity(location="python:survey-card").dataset_id
    assert recorded["dataset"] == dataset
    assert recorded["where"] == f"the budget ledger {path} (dataset {dataset})"
    assert str(path) in fit._repr_html_() and "not persistent" not in fit._repr_html_()
    assert repr(fit.summary()).splitlines()[-1] == f"Recorded in: {recorded['where']}"


def test_session_ledger__a_required_ledger_still_refuses(fresh_session, monkeypatch):
    monkeypatch.setenv("DPPCA_LEDGER__REQUIRED", "true")
    with pytest.raises(BudgetError, match="requires every release to be recorded"):
        dp_loading(X, privacy=PC)
    assert session_ledger().releases == ()


def test_recorded_in__a_result_without_it_says_not_stated(fresh_session):
    """Results of `dppca-dask run` (and of earlier versions) carry no recorded_in."""
    fit = dp_loading(X, privacy=PC)
    meta = fit.metadata
    del meta["recorded_in"]
    ds = fit.dataset.copy()
    ds.attrs["dppca_metadata"] = json.dumps(meta)
    bare = LoadingResult(ds)
    assert NOT_STATED in bare._repr_html_().replace("&#x27;", "'").replace("&quot;", '"')
    assert "Recorded in" not in repr(bare.summary())


def test_sklearn__a_fit_outside_accounting_lands_in_the_session(fresh_session):
    pytest.importorskip("sklearn")
    from dppca_dask.sklearn import DPPCA

    est = DPPCA(n_components=2, eps=0.8, delta=1e-6, scree_control=clipped_control(C_clip=30))
    est.fit(X)
    (release,) = session_ledger().releases
    assert release.owner == "dp_scree" and release.status == "released"
    assert release.records == tuple(r.as_dict() for r in est.result_.ledger)
    assert est.result_.metadata["recorded_in"]["kind"] == "session"


def test_session_ledger__dp_pca_and_its_parts_say_where(fresh_session):
    from dppca_dask import dp_pca

    fit = dp_pca(X, privacy=privacy_control(eps=0.9, delta=1e-6), k=2,
                 scree_control=clipped_control(C_clip=30))
    (release,) = session_ledger().releases
    assert release.owner == "dp_pca"
    assert release.records == tuple(r.as_dict() for r in fit.ledger)
    for part in (fit, fit.loading, fit.scree, fit.score):
        assert part.metadata["recorded_in"]["kind"] == "session"
        assert repr(part.summary()).splitlines()[-1].startswith("Recorded in: this Python")
    assert ">Recorded in</th>" in fit._repr_html_()
