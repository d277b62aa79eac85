"""The plan as data: every estimator's planned records equal the ledger its fit writes.

For every task x method x option combination (the configs' and the estimators' own tests'), the
planning function -- public quantities only -- must list the same mechanisms with the same
amounts (to 1e-12) as the fit's ledger, and the same total; dp_pca's passes equal
``metadata["passes"]``.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from dppca_dask import (
    clipped_control,
    dp_covariance,
    dp_loading,
    dp_pca,
    dp_score,
    dp_scree,
    huber_control,
    pace_ggm_control,
    pmwm_control,
    privacy_control,
)
from dppca_dask.covariance.estimator import plan_covariance
from dppca_dask.pca.loading import plan_loading
from dppca_dask.pca.pca import plan_pca
from dppca_dask.pca.score import plan_score
from dppca_dask.pca.scree import plan_scree
from dppca_dask.pca.scree_controls import resolve_controls
from dppca_dask.privacy.budget import resolve_budget
from dppca_dask.privacy.plan import records_match
from dppca_dask.privacy.zcdp import resolve_zcdp

RNG = np.random.default_rng(3)
X = RNG.standard_t(3, size=(240, 4)) * [3.0, 2.0, 1.0, 0.5]
GROUPS = np.array(["b", "a", "c"])[RNG.integers(0, 3, 240)]
CONTROLS = {"clipped": clipped_control(C_clip=30), "huber": huber_control(
    k_min_m2=-8, k_max_m2=8, m2_frac=0.3, T=3), "pmwm": pmwm_control(a=0.01, b=200,
                                                                       trim_const=2, eta=0.1)}
SCREE_SETS = [("clipped",), ("pmwm",), ("huber",), ("clipped", "pmwm", "huber")]
CENTERS = ["private", "empirical", 0.0]


def _check(plan, fit):
    assert records_match(plan, fit.ledger) == []
    stated = sorted(r.rho for r in plan.records if r.rho is not None and r.status == "spent"
                    and r.calibration != "zcdp")  # the public rho of the (eps, delta) Gaussians
    if stated:  # every one of them is the rho of a ledger record of the same release
        actual = [r.rho for r in fit.ledger if r.rho is not None]
        for rho in stated:
            assert any(abs(rho - a) <= 1e-12 * max(1.0, a) for a in actual), rho
    total = fit.metadata["ledger_total"]
    assert set(plan.total) == set(total)
    for key, value in plan.total.items():
        assert value == pytest.approx(total[key], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(("calibration", "pairs", "sensitivity"), [
    ("classical", "all", "seed"), ("analytic", "all", "tight"), ("classical", "blocks", "seed"),
    ("analytic", "blocks", "tight")])
def test_plan_loading__equals_the_ledger(calibration, pairs, sensitivity):
    pc = privacy_control(eps=0.8, delta=1e-5)
    fit = dp_loading(X, privacy=pc, rng=1, calibration=calibration, pairs=pairs, pair_block=50,
                     sensitivity=sensitivity)
    _check(plan_loading(240, 4, resolve_budget(pc, owner="dp_loading"), calibration=calibration,
                        pairs=pairs, pair_block=50, sensitivity=sensitivity), fit)


@pytest.mark.parametrize(("calibration", "sensitivity"), [("analytic", "tight"),
                                                           ("classical", "tight")])
def test_plan_pca__calibration_and_sensitivity_options(calibration, sensitivity):
    pc = privacy_control(eps=3.0, delta=1e-5)
    controls = {m: CONTROLS[m] for m in ("clipped", "pmwm")}
    fit = dp_pca(X, privacy=pc, k=3, scree_method=["clipped", "pmwm"], scree_control=controls,
                 calibration=calibration, sensitivity=sensitivity, rng=6)
    plan = plan_pca(240, 4, resolve_budget(pc, owner="dp_pca"), k=3,
                    scree_methods=("clipped", "pmwm"), controls=controls,
                    calibration=calibration, sensitivity=sensitivity)
    _check(plan, fit)


@pytest.mark.parametrize(("methods", "center", "supplied"),
                         list(itertools.product(SCREE_SETS, CENTERS, [False, True])))
def test_plan_scree__equals_the_ledger(methods, center, supplied):
    pc = privacy_control(eps=2.0, delta=1e-5)
    v = np.linalg.qr(RNG.normal(size=(4, 3)))[0] if supplied else None
    controls = resolve_controls(methods, {m: CONTROLS[m] for m in methods}, owner="dp_scree")
    fit = dp_scree(X, privacy=pc, method=list(methods), control=dict(controls), k=None,
                   V_dp=v, center=center, rng=2)
    budget = resolve_budget(pc, owner="dp_scree", prior=("loading",) if supplied else ())
    plan = plan_scree(240, 4, budget, methods=methods, controls=controls, center=center,
                      supplied=(v, "supplied matrix") if supplied else None)
    _check(plan, fit)


@pytest.mark.parametrize(("methods", "frame", "group"), list(itertools.product(
    [("add",), ("sparse",), ("add", "sparse")], ["durfee", "smooth"], [None, GROUPS])))
def test_plan_score__equals_the_ledger(methods, frame, group):
    pc = privacy_control(eps=3.0, delta=1e-5)
    fit = dp_score(X, privacy=pc, method=list(methods), frame=frame, group=group, rng=3)
    _check(plan_score(240, 4, resolve_budget(pc, owner="dp_score"), methods=methods,
                      frame=frame), fit)


@pytest.mark.parametrize(("scree", "score", "center", "supplied"), [
    (("clipped",), ("add",), "private", False),
    (("clipped", "huber"), ("add", "sparse"), "private", False),
    (("pmwm",), ("sparse",), "empirical", True),
    (("clipped", "pmwm", "huber"), ("add",), 0.0, False),
])
def test_plan_pca__equals_the_ledger_and_the_passes(scree, score, center, supplied):
    pc = privacy_control(eps=3.0, delta=1e-5)
    v = np.linalg.qr(RNG.normal(size=(4, 4)))[0] if supplied else None
    controls = {m: CONTROLS[m] for m in scree}
    fit = dp_pca(X, privacy=pc, k=2, scree_method=list(scree), scree_control=controls,
                 score_method=list(score), center=center, V_dp=v, rng=4)
    budget = resolve_budget(pc, owner="dp_pca", prior=("loading",) if supplied else ())
    plan = plan_pca(240, 4, budget, k=2, scree_methods=scree, controls=controls,
                    score_methods=score, center=center,
                    supplied=(v, "supplied matrix") if supplied else None)
    _check(plan, fit)
    assert plan.passes == fit.metadata["passes"]


@pytest.mark.parametrize(("method", "budget"), list(itertools.product(
    ["pace_ggm", "ssp", "diagonal", "auto"], [{"rho": 0.5}, {"eps": 1.0, "delta": 1e-5}])))
def test_plan_covariance__equals_the_ledger(method, budget):
    control = pace_ggm_control(mean="measure") if method == "pace_ggm" else None
    fit = dp_covariance(X, bounds=10.0, method=method, control=control, rng=5, **budget)
    plan = plan_covariance(4, resolve_zcdp(owner="dp_covariance", **budget), method=method,
                           control=control, bounds=10.0)
    _check(plan, fit)


def test_records_match__finds_a_wrong_amount_and_a_missing_record():
    pc = privacy_control(eps=0.8, delta=1e-5)
    fit = dp_loading(X, privacy=pc, rng=1, preset="seed")
    wrong = plan_loading(240, 4, resolve_budget(privacy_control(eps=0.9, delta=1e-5),
                                                owner="dp_loading"), preset="seed")
    assert records_match(wrong, fit.ledger)
    assert records_match(wrong, ())
    right = plan_loading(240, 4, resolve_budget(pc, owner="dp_loading"), preset="seed")
    assert records_match(right, fit.ledger) == []
    for field, value in (("sensitivity_norm", "l2"), ("noise", "laplace"),
                         ("calibration", "analytic"), ("draws", 3), ("rho", 1.0)):
        changed = replace(right, records=(replace(right.records[0], **{field: value}),))
        assert any(field in problem for problem in records_match(changed, fit.ledger)), field


def test_plan_records__built_by_the_mechanisms_record_builders():
    """Each planned record with a public sensitivity equals its spend record in every field
    but the note (the same builder made both)."""
    pc = privacy_control(eps=3.0, delta=1e-5)
    controls = {m: CONTROLS[m] for m in ("clipped", "huber")}
    fit = dp_pca(X, privacy=pc, k=2, scree_method=["clipped", "huber"], scree_control=controls,
                 score_method=["add", "sparse", "geometric"], frame="capped", rng=4)
    plan = plan_pca(240, 4, resolve_budget(pc, owner="dp_pca"), k=2,
                    scree_methods=("clipped", "huber"), controls=controls,
                    score_methods=("add", "sparse", "geometric"), frame="capped")
    public = [r for r in plan.records if r.sensitivity is not None and r.draws]
    assert {r.mechanism for r in public} >= {"gaussian_symmetric_matrix", "gaussian", "laplace",
                                             "durfee_above_threshold"}
    ledger = [replace(r, note="") for r in fit.ledger]
    for record in public:
        assert replace(record, note="") in ledger, record


@pytest.mark.parametrize("pairs", ["blocks", "auto"])
def test_plan__pairs_modes_through_scree_score_and_pca(pairs):
    pc = privacy_control(eps=3.0, delta=1e-5)
    controls = {"clipped": CONTROLS["clipped"]}
    budget = resolve_budget(pc, owner="dp_pca")
    fit = dp_pca(X, privacy=pc, k=2, scree_control=controls, pairs=pairs, pair_block=40, rng=7)
    plan = plan_pca(240, 4, budget, k=2, scree_methods=("clipped",), controls=controls,
                    pairs="blocks" if pairs == "blocks" else "all", pair_block=40)
    _check(plan, fit)
    assert fit.loading.metadata["pairs"] == ("blocks" if pairs == "blocks" else "all")
    fit = dp_score(X, privacy=pc, pairs=pairs, pair_block=40, rng=8)
    _check(plan_score(240, 4, resolve_budget(pc, owner="dp_score"),
                      pairs="blocks" if pairs == "blocks" else "all", pair_block=40), fit)
    fit = dp_scree(X, privacy=pc, control=CONTROLS["clipped"], pairs=pairs, pair_block=40, rng=9)
    _check(plan_scree(240, 4, resolve_budget(pc, owner="dp_scree"), methods=("clipped",),
                      controls={"clipped": CONTROLS["clipped"]},
                      pairs="blocks" if pairs == "blocks" else "all", pair_block=40), fit)
