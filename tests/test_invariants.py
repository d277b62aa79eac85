"""Frozen controls, budgets and records validate themselves: building one by hand is as safe as
the factory (issue: one house plan, item 5)."""

from __future__ import annotations

import math

import pytest

from dppca_dask import BudgetError, ParameterError, privacy_control
from dppca_dask.pca.scree_controls import (
    ClippedControl,
    HuberControl,
    PMWMControl,
    clipped_control,
    huber_control,
    pmwm_control,
)
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import PrivacyBudget, PrivacyControl


@pytest.mark.parametrize("value", [-5, 0, math.inf, math.nan, "3", True])
def test_clipped_control__by_hand_refuses_what_the_factory_refuses(value):
    with pytest.raises(ParameterError, match="'C_clip' parameter of clipped_control") as by_hand:
        ClippedControl(C_clip=value)
    with pytest.raises(ParameterError) as factory:
        clipped_control(C_clip=value)
    assert str(by_hand.value) == str(factory.value)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"a": 0, "b": 0, "trim_const": 10, "eta": 0.01}, "b"),
    ({"a": math.inf, "b": 1, "trim_const": 10, "eta": 0.01}, "a"),
    ({"a": 0, "b": 1, "trim_const": -1, "eta": 0.01}, "trim_const"),
    ({"a": 0, "b": 1, "trim_const": 10, "eta": 0.5}, "eta"),
    ({"a": 0, "b": 1, "trim_const": 10, "eta": 0.01, "beta": 1.0}, "beta"),
])
def test_pmwm_control__by_hand_validates(kwargs, name):
    with pytest.raises(ParameterError, match=f"'{name}' parameter of pmwm_control"):
        PMWMControl(**kwargs)
    with pytest.raises(ParameterError, match=f"'{name}' parameter of pmwm_control"):
        pmwm_control(**kwargs)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"k_min_m2": 5, "k_max_m2": 5, "m2_frac": 0.25}, "k_max_m2"),
    ({"k_min_m2": -2000, "k_max_m2": 5, "m2_frac": 0.25}, "k_min_m2"),
    ({"k_min_m2": 0, "k_max_m2": 5, "m2_frac": 1.0}, "m2_frac"),
    ({"k_min_m2": 0, "k_max_m2": 5, "m2_frac": 0.5, "eta0": -1}, "eta0"),
    ({"k_min_m2": 0, "k_max_m2": 5, "m2_frac": 0.5, "T": 0}, "T"),
])
def test_huber_control__by_hand_validates(kwargs, name):
    with pytest.raises(ParameterError, match=f"'{name}' parameter of huber_control"):
        HuberControl(**kwargs)
    with pytest.raises(ParameterError, match=f"'{name}' parameter of huber_control"):
        huber_control(**kwargs)


def test_controls__valid_by_hand_equal_the_factory():
    assert ClippedControl(3) == clipped_control(C_clip=3)
    assert PMWMControl(0, 20, 10, 0.01) == pmwm_control(a=0, b=20, trim_const=10, eta=0.01)
    assert HuberControl(-10, 10, 0.25) == huber_control(k_min_m2=-10, k_max_m2=10, m2_frac=0.25)


def test_privacy_control__total_must_agree_with_its_parts():
    loading = PrivacyBudget(1.0, 1e-5)
    with pytest.raises(BudgetError, match="total equal to the sum of its components"):
        PrivacyControl("absolute", PrivacyBudget(1.0, 1e-5),
                       (("loading", loading), ("scree", PrivacyBudget(99.0, 0.0))))
    with pytest.raises(BudgetError, match="share of the total"):
        PrivacyControl("total", PrivacyBudget(1.0, 1e-5),
                       tuple((c, PrivacyBudget(100.0, 1e-6)) for c in ("loading", "scree", "score")),
                       implicit_split=True)
    with pytest.raises(BudgetError, match="loading required"):
        PrivacyControl("absolute", loading, (("scree", loading),))
    with pytest.raises(BudgetError, match="mode"):
        PrivacyControl("other", loading, (("loading", loading),))  # type: ignore[arg-type]


def test_privacy_control__factory_results_pass_their_own_check():
    for pc in (privacy_control(eps=1, delta=1e-5),
               privacy_control(eps=3, delta=1e-4, split={"loading": 0.2, "scree": 0.3,
                                                          "score": 0.5}),
               privacy_control(loading=(1, 1e-5), scree=(0.1, 1e-7), score=(2, 3e-6))):
        rebuilt = PrivacyControl(pc.mode, pc.total_budget, pc.component_budgets,
                                 pc.implicit_split, pc.split)
        assert rebuilt == pc


@pytest.mark.parametrize(("field", "value"), [
    ("eps", -1.0), ("eps", math.inf), ("delta", 1.0), ("delta", -1e-9), ("rho", -0.5),
    ("scale", math.nan), ("draws", -1), ("status", "refunded"), ("sensitivity", -2.0),
])
def test_spend_record__refuses_impossible_spends(field, value):
    with pytest.raises(BudgetError, match=f"'{field}' field of SpendRecord"):
        SpendRecord(**{"component": "loading", "mechanism": "gaussian", "eps": 1.0,
                       "delta": 1e-5, field: value})


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"diag_fraction": -1.0}, "diag_fraction"),
    ({"anneal_factor": -2.0}, "anneal_factor"),
    ({"rounds_per_variable": 0}, "rounds_per_variable"),
    ({"solver": "magic"}, "solver"),
    ({"mean": "measure", "diag_fraction": 0.6, "mean_fraction": 0.5}, "mean_fraction"),
])
def test_pace_ggm_control__by_hand_validates(kwargs, name):
    from dppca_dask.covariance.pace_ggm import PaceGGMControl, pace_ggm_control

    with pytest.raises(ParameterError, match=f"'{name}' parameter of pace_ggm_control") as hand:
        PaceGGMControl(**kwargs)
    with pytest.raises(ParameterError) as factory:
        pace_ggm_control(**kwargs)
    assert str(hand.value) == str(factory.value)
    assert PaceGGMControl() == pace_ggm_control()


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"method": ("uniform",), "sample_size": None, "bandwidth_scale": (("uniform", -1.0),)},
     "bandwidth_scale\\['uniform'\\]"),
    ({"method": ("gauss",), "sample_size": None, "bandwidth_scale": (("gauss", 0.2),)},
     "method"),
    ({"method": ("uniform",), "sample_size": 0, "bandwidth_scale": (("uniform", 0.2),)},
     "sample_size"),
    ({"method": ("center", "uniform"), "sample_size": None,
      "bandwidth_scale": (("uniform", 0.2),)}, "bandwidth_scale"),
])
def test_sampling_control__by_hand_validates(kwargs, name):
    from dppca_dask import sampling_control
    from dppca_dask.results.sampling import SamplingControl

    with pytest.raises(ParameterError, match=f"{name}.? parameter of SamplingControl"):
        SamplingControl(**kwargs)
    assert SamplingControl(("uniform",), None, (("uniform", 0.25),)) == sampling_control()


@pytest.mark.parametrize(("cls", "kwargs", "name"), [
    ("ScorePlotControl", {"scatter_alpha": 2.0}, "scatter_alpha"),
    ("ScorePlotControl", {"panel_size": -1.0}, "panel_size"),
    ("ScorePlotControl", {"hist_alpha_range": (0.8, 0.2)}, "hist_alpha_range"),
    ("ScreePlotControl", {"width": -3.0}, "width"),
])
def test_plot_controls__by_hand_validate(cls, kwargs, name):
    from dppca_dask.plots.score import ScorePlotControl
    from dppca_dask.plots.scree import ScreePlotControl

    kind = {"ScorePlotControl": ScorePlotControl, "ScreePlotControl": ScreePlotControl}[cls]
    with pytest.raises(ParameterError, match=f"'{name}' parameter of {cls}"):
        kind(**kwargs)
    kind()  # the defaults are valid


def test_budget_plan__by_hand_cannot_allocate_more_than_its_total():
    from dppca_dask.privacy.budget import BudgetPlan

    total = PrivacyBudget(1.0, 1e-5)
    with pytest.raises(BudgetError, match="more than its total"):
        BudgetPlan("dp_scree", (("loading", PrivacyBudget(1.0, 5e-6)),
                                ("scree", PrivacyBudget(1.0, 5e-6))), total, False)
    with pytest.raises(BudgetError, match="distinct component names"):
        BudgetPlan("dp_scree", (("scree", total), ("scree", total)), PrivacyBudget(2, 2e-5),
                   False)
    BudgetPlan("dp_scree", (("loading", PrivacyBudget(0.5, 5e-6)),
                            ("scree", PrivacyBudget(0.5, 5e-6))), total, True)


@pytest.mark.parametrize(("rho", "allocations"), [(-1.0, ()), (0.5, (("a", 0.4), ("b", 0.2))),
                                                  (0.5, (("a", -0.1),))])
def test_zcdp_plan__by_hand_validates(rho, allocations):
    from dppca_dask.privacy.zcdp import ZCDPPlan

    with pytest.raises(BudgetError, match="ZCDPPlan"):
        ZCDPPlan("dp_covariance", rho, allocations=allocations)
