"""Shared fixtures: a swept global seed (sklearn style) and small data sets."""

from __future__ import annotations

import os

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
