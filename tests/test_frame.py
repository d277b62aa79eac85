"""The capped score frame (issue 18 item 2; docs/design/frame.md): plan = ledger, the bound
S ≤ R ≤ U·S by construction, and the [0.5, 3] target on the demo data (binomial tolerance)."""

from __future__ import annotations

import math
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from dppca_dask import clipped_control, dp_pca, dp_score, privacy_control
from dppca_dask.graph.rounds import run
from dppca_dask.io.datasets import make_gau
from dppca_dask.pca.frame import (
    CAPPED_SPAN,
    RADIUS_QUANTILE,
    capped_window,
    frame_stage,
)
from dppca_dask.pca.loading import kendall_sensitivity, spherical_kendall
from dppca_dask.pca.pca import plan_pca
from dppca_dask.pca.postprocess import ordered_eigh
from dppca_dask.pca.score import FRAME_SHARE, plan_score
from dppca_dask.privacy.budget import PrivacyBudget, resolve_budget
from dppca_dask.privacy.mechanisms import gaussian_symmetric_matrix
from dppca_dask.privacy.plan import records_match
from dppca_dask.privacy.quantiles import upper_grid

RNG = np.random.default_rng(11)
X = RNG.standard_t(3, size=(300, 4)) * [3.0, 2.0, 1.0, 0.5] + [40.0, -7.0, 0.0, 1.0]
GROUPS = np.array(["b", "a", "c"])[RNG.integers(0, 3, 300)]


def _frame(scores: np.ndarray, eps: float, seed: int, method: str = "capped"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # durfee's max_steps warning
        fr, records = run(frame_stage(method, da.from_array(scores, chunks=(97, 2)), np.eye(2),
                                      n=scores.shape[0], eps=eps,
                                      rng=np.random.default_rng(seed)))
    return fr, records


@pytest.mark.parametrize("group", [None, GROUPS])
@pytest.mark.parametrize("method", [("geometric",), ("add", "sparse")])
def test_plan_score__capped_frame_equals_the_ledger(method, group):
    pc = privacy_control(eps=6, delta=1e-4)
    fit = dp_score(X, privacy=pc, method=list(method), frame="capped", group=group, rng=3)
    plan = plan_score(300, 4, resolve_budget(pc, owner="dp_score"), methods=method,
                      frame="capped")
    assert records_match(plan, fit.ledger) == []
    assert fit.metadata["frame"] == "capped"
    assert sum(r.mechanism == "durfee_above_threshold" for r in fit.ledger) == 8
    assert {r.draws for r in fit.ledger if "capped" in r.note} == {211}  # public, not S's


def test_plan_pca__capped_frame_equals_the_ledger_and_passes():
    pc = privacy_control(eps=6, delta=1e-4)
    control = clipped_control(C_clip=30)
    fit = dp_pca(X, privacy=pc, k=3, scree_control=control, frame="capped", rng=5)
    plan = plan_pca(300, 4, resolve_budget(pc, owner="dp_pca"), k=3,
                    controls={"clipped": control}, frame="capped")
    assert records_match(plan, fit.ledger) == []
    assert plan.passes == fit.metadata["passes"] == 4


def test_capped_frame__draws_follow_the_seed_and_durfee_is_unchanged():
    scores = X[:, :2]
    a, _ = _frame(scores, 2.0, 1)
    b, _ = _frame(scores, 2.0, 1)
    assert a == b
    durfee, records = _frame(scores, 2.0, 1, "durfee")
    assert durfee.method == "durfee" and len(records) == 6 and durfee.scale is None


_SHAPES = st.sampled_from(["normal", "t1", "uniform", "lognormal", "tied"])


@settings(max_examples=40, deadline=None)
@given(shape=_SHAPES, n=st.integers(50, 600), scale=st.floats(1e-3, 1e4),
       shift=st.floats(-1e3, 1e3), log_eps=st.floats(-6, 2), seed=st.integers(0, 2**31))
def test_capped_frame__radius_within_scale_bounds_by_construction(shape, n, scale, shift,
                                                                  log_eps, seed):
    g = np.random.default_rng(seed)
    draw = {"normal": lambda: g.normal(size=(n, 2)), "t1": lambda: g.standard_cauchy((n, 2)),
            "uniform": lambda: g.uniform(-1, 1, (n, 2)),
            "lognormal": lambda: g.lognormal(0, 2, (n, 2)),
            "tied": lambda: g.integers(0, 3, (n, 2)).astype(float)}[shape]
    scores = draw() * scale + shift
    fr, _ = _frame(scores, math.exp(log_eps), seed)
    assert fr.scale is not None
    for a in range(2):
        s, r = fr.scale[a], fr.radius[a]
        assert s > 0 and s <= r <= CAPPED_SPAN * s  # whatever the data and the noise


def test_capped_window__is_public_length_and_inside_the_span():
    grid = upper_grid(1.01, 5000)
    for index in (0, 3, 250, 4900, 4999):
        w = capped_window(grid, float(grid[index]))
        assert len(w) == 210 and w[0] == index and np.all(np.diff(w) >= 0)
        assert grid[w[-1]] <= CAPPED_SPAN * grid[index] or w[-1] == index


# --- the target on the demo settings (benchmarks/frame.py runs 1000) ----------------

def _demo_scores(count: int) -> tuple[list[np.ndarray], int]:
    x = make_gau(1000, rng=0).drop(columns="group").to_numpy()
    n = x.shape[0]
    kendall = np.asarray(spherical_kendall(x))
    out = []
    for seed in range(count):
        rel = gaussian_symmetric_matrix(
            kendall, sensitivity=kendall_sensitivity(n, bound="tight"),
            budget=PrivacyBudget(1 / 3, 1e-5 / 3), calibration="analytic",
            rng=np.random.default_rng([7, seed]), component="loading")
        out.append(x @ ordered_eigh(rel.value)[1][:, :2])
    return out, n


def _allowed_failures(runs: int, p: float = 1e-3, alpha: float = 1e-6) -> int:
    """The largest failure count k with P(Binom(runs, p) ≥ k) > alpha: more than k failures
    rejects 'failure rate ≤ p' at level alpha."""
    k = 0
    while binom.sf(k, runs, p) > alpha:  # sf(k) = P(X > k)
        k += 1
    return k


@pytest.mark.slow
def test_capped_frame__demo_target_binomial():
    """Target: both axes within [0.5, 3] of the true 0.995 quantile in ≥ 99.9 % of runs. In 300
    runs (30 private directions x 10 frame seeds) more than k = 5 failing runs has probability
    below 1e-6 if the failure rate is 0.001 (binomial), so it refutes the target; a rate of 3 %
    (the durfee frame fails in about 1.5-2 % of the 1000-run benchmark's runs) fails the check
    with probability 0.88."""
    scores_list, _ = _demo_scores(30)
    eps = FRAME_SHARE / 3  # the demo's frame allocation: 35 % of the score third of eps = 1
    fails = runs = 0
    with dask.config.set(scheduler="synchronous"):
        for i, scores in enumerate(scores_list):
            true = np.quantile(np.abs(scores - np.median(scores, axis=0)), RADIUS_QUANTILE,
                               axis=0)
            for j in range(10):
                runs += 1
                ratio = np.array(_frame(scores, eps, 1000 * i + j)[0].radius) / true
                fails += bool(np.any((ratio < 0.5) | (ratio > 3.0)))
    k = _allowed_failures(runs)
    assert k == 5 and binom.sf(k, runs, 0.03) > 0.85
    assert fails <= k, (fails, runs)
