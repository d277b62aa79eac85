"""privacy_control() and budget resolution (seeds/privacy_control.txt, SPEC_dppca.md §2, §14)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dppca_dask import BudgetError, privacy_control
from dppca_dask.privacy.budget import FIT_COMPONENTS, PrivacyControl, resolve_budget


# --- the seed's examples, to full precision ------------------------------------------------
def test_privacy_control__seed_implicit_thirds():
    pc = privacy_control(eps=6, delta=1e-4)
    assert pc.total == {"eps": 6.0, "delta": 1e-4}
    assert list(pc.budgets) == ["loading", "scree", "score"]
    for b in pc.budgets.values():
        assert b == {"eps": 2.0, "delta": 1e-4 / 3}
    assert pc.implicit_split is True
    assert repr(pc) == "\n".join(
        [
            "$total",
            "  eps delta ",
            "6e+00 1e-04 ",
            "",
            "$budgets",
            "$budgets$loading",
            "         eps        delta ",
            "2.000000e+00 3.333333e-05 ",
            "",
            "$budgets$scree",
            "         eps        delta ",
            "2.000000e+00 3.333333e-05 ",
            "",
            "$budgets$score",
            "         eps        delta ",
            "2.000000e+00 3.333333e-05 ",
            "",
            "",
            'attr(,"class")',
            '[1] "dppca_privacy_control"',
            'attr(,"implicit_split")',
            "[1] TRUE",
        ]
    )


def test_privacy_control__seed_absolute_loading():
    pc = privacy_control(loading={"eps": 6, "delta": 1e-4})
    assert pc.total == {"eps": 6.0, "delta": 1e-4}
    assert pc.budgets == {"loading": {"eps": 6.0, "delta": 1e-4}}
    assert pc.implicit_split is False
    assert "implicit_split" not in repr(pc)
    assert "$budgets$loading\n  eps delta \n6e+00 1e-04 " in repr(pc)


def test_privacy_control__seed_split_loading_scree():
    pc = privacy_control(eps=6, delta=1e-4, split={"loading": 0.5, "scree": 0.5})
    assert pc.budgets == {"loading": {"eps": 3.0, "delta": 5e-5},
                          "scree": {"eps": 3.0, "delta": 5e-5}}
    assert "$budgets$scree\n  eps delta \n3e+00 5e-05 " in repr(pc)


def test_privacy_control__seed_split_loading_score():
    pc = privacy_control(eps=6, delta=1e-4, split={"loading": 0.4, "score": 0.6})
    assert pc.budgets["loading"] == {"eps": 6 * 0.4, "delta": 1e-4 * 0.4}
    assert pc.budgets["score"] == {"eps": 6 * 0.6, "delta": 1e-4 * 0.6}
    assert math.isclose(pc.budgets["loading"]["eps"], 2.4)
    assert math.isclose(pc.budgets["score"]["delta"], 6e-5)
    assert "$budgets$loading\n    eps   delta \n2.40000 0.00004 " in repr(pc)
    assert "$budgets$score\n    eps   delta \n3.60000 0.00006 " in repr(pc)


def test_privacy_control__seed_absolute_two_components():
    pc = privacy_control(loading=(2, 2e-5), scree={"eps": 4, "delta": 8e-5})
    assert pc.total == {"eps": 6.0, "delta": 2e-5 + 8e-5}
    assert math.isclose(pc.total["delta"], 1e-4)
    assert pc.budgets == {"loading": {"eps": 2.0, "delta": 2e-5},
                          "scree": {"eps": 4.0, "delta": 8e-5}}
    assert repr(pc).startswith("$total\n  eps delta \n6e+00 1e-04 \n")


def test_privacy_control__budgets_in_canonical_order():
    pc = privacy_control(score=(1, 1e-5), loading=(1, 1e-5), scree=(1, 1e-5))
    assert list(pc.budgets) == ["loading", "scree", "score"]
    pc = privacy_control(eps=1, delta=1e-5, split={"score": 0.5, "loading": 0.5})
    assert list(pc.budgets) == ["loading", "score"]


def test_privacy_control__immutable():
    pc = privacy_control(eps=1, delta=1e-5)
    with pytest.raises(AttributeError):
        pc.mode = "absolute"  # type: ignore[misc]
    pc.total["eps"] = 99.0  # a copy: the object does not change
    assert pc.total["eps"] == 1.0


# --- validation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"eps": -1, "delta": 1e-5}, r"'eps' parameter of privacy_control .* range \(0, inf\)\. Got -1"),
        ({"eps": 0, "delta": 1e-5}, "'eps' parameter"),
        ({"eps": math.inf, "delta": 1e-5}, "'eps' parameter"),
        ({"eps": math.nan, "delta": 1e-5}, "'eps' parameter"),
        ({"eps": "1", "delta": 1e-5}, "'eps' parameter"),
        ({"eps": True, "delta": 1e-5}, "'eps' parameter"),
        ({"eps": 1, "delta": 0}, r"'delta' parameter .* range \(0, 1\)"),
        ({"eps": 1, "delta": 1}, "'delta' parameter"),
        ({"eps": 1}, "'delta' is missing"),
        ({"delta": 1e-5}, "'eps' is missing"),
        ({}, "needs total eps and delta, or absolute"),
        ({"eps": 1, "delta": 1e-5, "split": [0.5, 0.5]}, "'split' parameter"),
        ({"eps": 1, "delta": 1e-5, "split": {}}, "'split' parameter"),
        ({"eps": 1, "delta": 1e-5, "split": {"loading": 0.5, "plot": 0.5}}, "unknown component"),
        ({"eps": 1, "delta": 1e-5, "split": {"scree": 0.5, "score": 0.5}}, "loading is required"),
        ({"eps": 1, "delta": 1e-5, "split": {"loading": 1.5, "scree": -0.5}}, r"split\['scree'\]"),
        ({"eps": 1, "delta": 1e-5, "split": {"loading": 0.5, "scree": 0.4}}, "sum to 0.9"),
        ({"eps": 1, "delta": 1e-5, "split": {"loading": 0.0, "scree": 1.0}}, r"split\['loading'\]"),
        ({"eps": 1, "delta": 1e-5, "loading": (1, 1e-5)}, "not both"),
        ({"split": {"loading": 1.0}, "loading": (1, 1e-5)}, "does not take a split"),
        ({"scree": (1, 1e-5)}, "needs an absolute 'loading' budget"),
        ({"loading": (1, 1e-5, 3)}, "'loading' parameter"),
        ({"loading": {"eps": 1}}, "'loading' parameter"),
        ({"loading": {"eps": 1, "delta": 1e-5, "rho": 1}}, "'loading' parameter"),
        ({"loading": "1,1e-5"}, "'loading' parameter"),
        ({"loading": (-1, 1e-5)}, r"'loading\.eps' parameter"),
        ({"loading": (1, 0)}, r"'loading\.delta' parameter"),
        ({"loading": (1, 0.6), "scree": (1, 0.5)}, "deltas of privacy_control must sum to less than 1"),
    ],
)
def test_privacy_control__invalid(kwargs, match):
    with pytest.raises(BudgetError, match=match):
        privacy_control(**kwargs)


def test_privacy_control__split_tolerance():
    privacy_control(eps=1, delta=1e-5, split={"loading": 1 / 3, "scree": 1 / 3, "score": 1 / 3})
    with pytest.raises(BudgetError, match="sum to"):
        privacy_control(eps=1, delta=1e-5, split={"loading": 0.5, "scree": 0.5 + 1e-6})


# --- resolution by the fitting functions ---------------------------------------------------
@pytest.mark.parametrize(
    ("owner", "share"),
    [("dp_loading", 1.0), ("dp_scree", 0.5), ("dp_score", 0.5), ("dp_pca", 1 / 3)],
)
def test_resolve_budget__implicit_equal_shares(owner, share):
    plan = resolve_budget(privacy_control(eps=6, delta=1e-4), owner=owner)
    assert plan.components == FIT_COMPONENTS[owner]
    for name in plan.components:
        assert plan[name].eps == 6 * share
        assert plan[name].delta == 1e-4 * share
    assert math.isclose(sum(plan[c].eps for c in plan.components), 6.0)


def test_resolve_budget__explicit_split_used_exactly():
    pc = privacy_control(eps=6, delta=1e-4, split={"loading": 0.4, "score": 0.6})
    plan = resolve_budget(pc, owner="dp_score")
    assert plan["loading"].eps == 6 * 0.4
    assert plan["score"].delta == 1e-4 * 0.6


@pytest.mark.parametrize(
    ("pc", "owner"),
    [
        (privacy_control(eps=1, delta=1e-5, split={"loading": 0.5, "scree": 0.5}), "dp_loading"),
        (privacy_control(eps=1, delta=1e-5, split={"loading": 1.0}), "dp_scree"),
        (privacy_control(eps=1, delta=1e-5, split={"loading": 0.5, "scree": 0.5}), "dp_score"),
        (privacy_control(loading=(1, 1e-5), score=(1, 1e-5)), "dp_loading"),
        (privacy_control(loading=(1, 1e-5), scree=(1, 1e-5)), "dp_pca"),
    ],
)
def test_resolve_budget__mismatch_is_error(pc, owner):
    with pytest.raises(BudgetError, match=f"{owner} needs privacy budgets for exactly"):
        resolve_budget(pc, owner=owner)


@pytest.mark.parametrize("bad", [None, 1.0, {"eps": 1, "delta": 1e-5}, (1, 1e-5)])
def test_resolve_budget__not_a_control(bad):
    with pytest.raises(BudgetError, match="'privacy' parameter of dp_loading must be a PrivacyControl"):
        resolve_budget(bad, owner="dp_loading")


def test_resolve_budget__prior_is_recorded_not_spent():
    plan = resolve_budget(privacy_control(eps=2, delta=1e-4), owner="dp_scree", prior=["loading"])
    assert plan["loading"].eps == 1.0
    assert plan.spend("scree").eps == 1.0
    with pytest.raises(BudgetError, match="prior release"):
        plan.spend("loading")
    assert plan.as_dict()["allocations"]["loading"]["status"] == "prior"


# --- properties -------------------------------------------------------------------------------
proportions = st.lists(st.floats(0.01, 1.0), min_size=1, max_size=3)


@given(eps=st.floats(1e-3, 1e3), delta=st.floats(1e-12, 0.5), props=proportions)
def test_privacy_control__split_sums_to_total(eps, delta, props):
    names = ["loading", "scree", "score"][: len(props)]
    total = math.fsum(props)
    split = {k: v / total for k, v in zip(names, props, strict=False)}
    if abs(math.fsum(split.values()) - 1) > 1e-8:
        return
    pc = privacy_control(eps=eps, delta=delta, split=split)
    assert math.isclose(math.fsum(b["eps"] for b in pc.budgets.values()), eps, rel_tol=1e-9)
    assert math.isclose(math.fsum(b["delta"] for b in pc.budgets.values()), delta, rel_tol=1e-9)
    assert PrivacyControl.from_dict(pc.to_dict()) == pc


@given(eps=st.floats(1e-3, 1e3), delta=st.floats(1e-12, 0.99))
def test_privacy_control__round_trip_implicit(eps, delta):
    pc = privacy_control(eps=eps, delta=delta)
    assert PrivacyControl.from_dict(pc.to_dict()) == pc
