"""Python-API releases in the persistent budget ledger (issue 13 item 8)."""

from __future__ import annotations

import numpy as np
import pytest

from dppca_dask import (
    BudgetError,
    accounting,
    clipped_control,
    dp_covariance,
    dp_loading,
    dp_pca,
    ledger_accountant,
    privacy_control,
)
from dppca_dask.io.datasets import write_demo_dataset
from dppca_dask.io.identity import DatasetIdentity
from dppca_dask.pipeline.budget_cap import Cap
from dppca_dask.pipeline.deployment import deployment_settings
from dppca_dask.pipeline.ledger import Ledger

X = np.random.default_rng(0).normal(size=(200, 4)) * [3.0, 2.0, 1.0, 0.5]
PC = privacy_control(eps=0.5, delta=1e-6)


def _ledger() -> Ledger:
    return Ledger(deployment_settings().ledger_path)


def _named(name: str) -> str:
    return DatasetIdentity(location=f"python:{name}").dataset_id


def test_accounting__records_each_release_under_the_named_dataset():
    with accounting(dataset="survey-a"):
        dp_loading(X, privacy=PC, rng=1)
        dp_pca(X, privacy=privacy_control(eps=0.9, delta=1e-6), k=2,
               scree_control=clipped_control(C_clip=30), rng=2)
    rows = _ledger().reservations(_named("survey-a"))
    assert [r.status for r in rows] == ["released", "released"]
    assert sum(r.eps for r in rows) == pytest.approx(0.5 + 0.9, rel=1e-12)


def test_accounting__the_custodian_cap_refuses_before_any_data_is_read():
    ledger = _ledger()
    ledger.set_cap(DatasetIdentity(location="python:survey-b"), Cap(1.0, 1e-5, None))
    acct = ledger_accountant(dataset="survey-b")
    dp_loading(X, privacy=PC, rng=1, ledger=acct)
    with pytest.raises(BudgetError, match="past the custodian's cap"):
        dp_loading(X, privacy=privacy_control(eps=2.0, delta=1e-6), rng=1, ledger=acct,
                   calibration="analytic")
    assert [r.status for r in _ledger().reservations(_named("survey-b"))] == ["released"]


def test_accounting__a_path_input_uses_the_store_id_and_in_memory_needs_a_name(tmp_path):
    store = write_demo_dataset(str(tmp_path / "gau.zarr"), n_per_group=40)
    with accounting():
        dp_loading(store, privacy=PC, rng=1)
        with pytest.raises(BudgetError, match=r"in-memory X has no dataset id"):
            dp_loading(X, privacy=PC, rng=1)
    from dppca_dask.io.identity import resolve_dataset

    ident = resolve_dataset(store)
    assert [r.status for r in _ledger().reservations(ident.dataset_id)] == ["released"]


def test_accounting__failure_before_noise_refunds_after_noise_keeps(monkeypatch):
    from dppca_dask.pca import loading

    def boom(*args, **kwargs):  # the data pass fails: no noise drawn
        raise RuntimeError("pass failed")

    with accounting(dataset="survey-c"):
        with monkeypatch.context() as patch:
            patch.setattr(loading, "fit_loading", boom)
            with pytest.raises(RuntimeError):
                dp_loading(X, privacy=PC, rng=1)
            with pytest.raises(RuntimeError):  # the default CSPRNG: its byte count tells
                dp_loading(X, privacy=PC)
        dp_covariance(X, preset="seed", rho=0.1, bounds=10.0, rng=1)
    statuses = [r.status for r in _ledger().reservations(_named("survey-c"))]
    assert statuses == ["cancelled", "cancelled", "released"]


def test_budget_show__accepts_every_name_budget_list_prints():
    """`budget list` prints a notebook ledger's dataset as `<id>  python:NAME`: `budget show`
    (and `budget cap`) take either."""
    from click.testing import CliRunner

    from dppca_dask.cli import main

    with accounting(dataset="survey-list"):
        dp_loading(X, privacy=PC)
    listed = CliRunner().invoke(main, ["budget", "list"])
    assert listed.exit_code == 0, listed.output
    line = next(t for t in listed.output.splitlines() if t.endswith("python:survey-list"))
    dataset_id, location = line.split()
    for name in (dataset_id, location):
        shown = CliRunner().invoke(main, ["budget", "show", name])
        assert shown.exit_code == 0, shown.output
        assert f"Dataset {dataset_id}" in shown.output and "released" in shown.output
    capped = CliRunner().invoke(main, ["budget", "cap", location, "--eps", "3", "--delta",
                                       "1e-5"])
    assert capped.exit_code == 0 and f"Dataset {dataset_id}" in capped.output, capped.output
