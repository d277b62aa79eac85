"""Shared fixtures: a swept global seed (sklearn style), small data sets, a private ledger."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

_SEEDS = os.environ.get("DPPCA_TEST_SEEDS", "0")


def _seed_values() -> list[int]:
    if _SEEDS == "all":
        return list(range(100))
    if "-" in _SEEDS:
        lo, hi = _SEEDS.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(_SEEDS)]


@pytest.fixture(params=_seed_values())
def global_seed(request) -> int:
    """One seed by default; DPPCA_TEST_SEEDS=all (or 0-9) sweeps seeds, as sklearn does."""
    return request.param


@pytest.fixture
def gaussian_data(global_seed) -> np.ndarray:
    rng = np.random.default_rng(global_seed)
    return rng.normal(size=(120, 4)) @ np.diag([3.0, 2.0, 1.0, 0.5])


_LEDGER_ENV = ("DPPCA_LEDGER__URL", "DPPCA_LEDGER__ALLOW_RUN_CONFIG")


@pytest.fixture(scope="session", autouse=True)
def _session_ledger(tmp_path_factory) -> Iterator[Path]:
    """No test touches the real per-user ledger: the deployment's ledger (``dppca.ledger.url``)
    is a temporary file, through the environment so that ``dppca-dask`` subprocesses and
    module-scoped fixtures see it too; run configs may name their own ledger
    (``dppca.ledger.allow_run_config``), as older tests do. No Dask config file of the machine
    and no ``DASK_DPPCA__*`` variable applies."""
    path = tmp_path_factory.mktemp("ledger") / "session-ledger.sqlite"
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith(("DASK_DPPCA__", "DPPCA_")):
                mp.delenv(name)
        mp.setenv("DPPCA_LEDGER__URL", str(path))
        mp.setenv("DPPCA_LEDGER__ALLOW_RUN_CONFIG", "true")
        mp.setenv("XDG_DATA_HOME", str(path.parent / "xdg-data"))
        # nor the machine's custodian file (tests/test_custodian.py sets its own)
        from dppca_dask.pipeline import deployment

        mp.setattr(deployment, "SYSTEM_FILE", path.parent / "no-custodian-file.yaml")
        yield path


@pytest.fixture(autouse=True)
def ledger_path(tmp_path_factory, monkeypatch) -> Path:
    """This test's own deployment ledger (a fresh SQLite file, not created until used)."""
    path = tmp_path_factory.mktemp("ledger") / "ledger.sqlite"
    monkeypatch.setenv("DPPCA_LEDGER__URL", str(path))
    return path
