"""Scree controls and dp_scree validation: every rule, one line naming the parameter (SPEC §14)."""

from __future__ import annotations

import numpy as np
import pytest

from dppca_dask import (
    BudgetError,
    InputError,
    ParameterError,
    clipped_control,
    dp_loading,
    dp_scree,
    huber_control,
    pmwm_control,
    privacy_control,
)
from dppca_dask.pca.scree_controls import (
    ClippedControl,
    HuberControl,
    PMWMControl,
    parse_methods,
    resolve_controls,
)

PMWM = {"a": 0, "b": 10, "trim_const": 10, "eta": 0.01}
HUBER = {"k_min_m2": -10, "k_max_m2": 10, "m2_frac": 0.25}


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_controls__defaults_and_round_trip():
    assert clipped_control(3) == ClippedControl(3.0)
    ctl = pmwm_control(**PMWM)
    assert (ctl.beta, ctl.split_mode) == (1.01, True)
    assert pmwm_control(**ctl.to_dict()) == ctl
    h = huber_control(**HUBER, T=50, M=20)
    assert (h.mu0, h.eta0, h.T, h.M) == (0.0, 1.0, 50, 20)
    assert huber_control(**h.to_dict()) == h
    assert huber_control(k_min_m2=-10.0, k_max_m2=10.0, m2_frac=0.5).k_min_m2 == -10


@pytest.mark.parametrize(
    ("factory", "kwargs", "name"),
    [
        (clipped_control, {"C_clip": 0}, "C_clip"),
        (clipped_control, {"C_clip": -1}, "C_clip"),
        (clipped_control, {"C_clip": np.inf}, "C_clip"),
        (clipped_control, {"C_clip": "3"}, "C_clip"),
        (clipped_control, {"C_clip": True}, "C_clip"),
        (pmwm_control, {**PMWM, "a": np.nan}, "a"),
        (pmwm_control, {**PMWM, "b": np.inf}, "b"),
        (pmwm_control, {**PMWM, "b": 0}, "b"),
        (pmwm_control, {**PMWM, "b": -5}, "b"),
        (pmwm_control, {**PMWM, "trim_const": 0}, "trim_const"),
        (pmwm_control, {**PMWM, "eta": -0.1}, "eta"),
        (pmwm_control, {**PMWM, "eta": 0.5}, "eta"),
        (pmwm_control, {**PMWM, "eta": 0.7}, "eta"),
        (pmwm_control, {**PMWM, "beta": 1.0}, "beta"),
        (pmwm_control, {**PMWM, "split_mode": 1}, "split_mode"),
        (huber_control, {**HUBER, "k_min_m2": 1.5}, "k_min_m2"),
        (huber_control, {**HUBER, "k_min_m2": -2000}, "k_min_m2"),
        (huber_control, {**HUBER, "k_max_m2": np.inf}, "k_max_m2"),
        (huber_control, {**HUBER, "k_max_m2": -10}, "k_max_m2"),
        (huber_control, {**HUBER, "m2_frac": 0}, "m2_frac"),
        (huber_control, {**HUBER, "m2_frac": 1}, "m2_frac"),
        (huber_control, {**HUBER, "mu0": np.inf}, "mu0"),
        (huber_control, {**HUBER, "eta0": 0}, "eta0"),
        (huber_control, {**HUBER, "T": 0}, "T"),
        (huber_control, {**HUBER, "T": 2.5}, "T"),
        (huber_control, {**HUBER, "M": -1}, "M"),
    ],
)
def test_controls__range_checks_name_the_parameter(factory, kwargs, name):
    with pytest.raises(ParameterError) as exc:
        factory(**kwargs)
    text = _one_line(exc)
    assert text.startswith(f"The {name!r} parameter of {factory.__name__} must be")
    assert text.endswith("instead.")


def test_controls__eta_at_least_half_is_rejected():
    with pytest.raises(ParameterError, match=r"'eta' parameter of pmwm_control must be a float "
                                             r"in the range \[0, 0\.5\)\. Got 0\.5 instead\."):
        pmwm_control(a=0, b=1, trim_const=1, eta=0.5)
    assert pmwm_control(a=0, b=1, trim_const=1, eta=0).eta == 0.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: clipped_control(), "Missing required control parameter(s): 'C_clip'. "
                                    "Provide control=clipped_control(C_clip=...)."),
        (lambda: pmwm_control(a=0, b=1), "Missing required control parameter(s): 'trim_const', "
                                         "'eta'. Provide control=pmwm_control(a=..., b=..., "
                                         "trim_const=..., eta=...)."),
        (lambda: huber_control(m2_frac=0.3), "Missing required control parameter(s): "
                                             "'k_min_m2', 'k_max_m2'."),
    ],
)
def test_controls__missing_required_parameters(call, message):
    with pytest.raises(ParameterError) as exc:
        call()
    assert _one_line(exc).startswith(message)


def test_resolve_controls__forms():
    assert resolve_controls(["clipped"], clipped_control(2)) == {"clipped": ClippedControl(2.0)}
    assert resolve_controls(["pmwm"], PMWM)["pmwm"] == pmwm_control(**PMWM)
    out = resolve_controls(["huber", "clipped"],
                           {"clipped": {"C_clip": 1}, "huber": huber_control(**HUBER),
                            "pmwm": PMWM})  # entries for other methods are ignored
    assert isinstance(out["huber"], HuberControl) and list(out) == ["huber", "clipped"]
    assert isinstance(resolve_controls(["pmwm"], {"pmwm": PMWM})["pmwm"], PMWMControl)


@pytest.mark.parametrize(
    ("methods", "control", "match"),
    [
        (["clipped"], None, r"Missing required control parameter\(s\): 'C_clip'"),
        (["pmwm"], None, r"'a', 'b', 'trim_const', 'eta'\. Provide control=pmwm_control"),
        (["huber"], {"huber": {"k_min_m2": 1}}, r"'k_max_m2', 'm2_frac'"),
        (["clipped", "pmwm"], clipped_control(3), r"With several methods \(clipped, pmwm\), the "
                                                  r"'control' parameter of dp_scree must be a "
                                                  r"dict keyed by method name"),
        (["clipped", "huber"], {"C_clip": 3}, r"With several methods"),
        (["clipped", "pmwm"], {"clipped": clipped_control(3)}, r"Missing required control "
                                                              r"parameter\(s\): 'a'"),
        (["clipped"], pmwm_control(**PMWM), r"must be made by clipped_control\(\)\. Got a "
                                            r"PMWMControl"),
        (["clipped"], {"C_clip": 3, "beta": 2}, r"'beta' is not a parameter of clipped_control"),
        (["clipped"], {"clipped": 3, "C_clip": 3}, r"mixes method names and control parameters"),
        (["clipped"], 3.0, r"The 'control' parameter of dp_scree must be a control made by "
                           r"clipped_control\(\)"),
    ],
)
def test_resolve_controls__errors(methods, control, match):
    with pytest.raises(ParameterError, match=match) as exc:
        resolve_controls(methods, control)
    _one_line(exc)


def test_parse_methods__rules():
    assert parse_methods("pmwm") == ("pmwm",)
    assert parse_methods(["clipped", "huber"]) == ("clipped", "huber")
    for bad in ("kendall", [], ["clipped", "median"], ["clipped", "clipped"], 3, None):
        with pytest.raises(ParameterError, match="The 'method' parameter of dp_scree must be"):
            parse_methods(bad)


# --- dp_scree arguments ---------------------------------------------------------------------------

X = np.random.default_rng(0).normal(size=(40, 5))
PRIV = privacy_control(eps=2, delta=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"k": 0}, ParameterError, r"'k' parameter of dp_scree must be an int in the range "
                                   r"\[1, 5\]\. Got 0 instead\."),
        ({"k": 6}, ParameterError, r"in the range \[1, 5\]\. Got 6 instead"),
        ({"k": 2.5}, ParameterError, r"'k' parameter"),
        ({"k": 4, "V_dp": np.eye(5)[:, :3]}, ParameterError, r"\[1, 3\]\. Got 4"),
        ({"method": "robust"}, ParameterError, r"'method' parameter of dp_scree"),
        ({"mono": "yes"}, ParameterError, r"'mono' parameter of dp_scree must be a bool"),
        ({"calibration": "exact"}, ParameterError, r"'calibration' parameter"),
        ({"center": "median"}, ParameterError, r"'center' parameter of dp_scree"),
        ({"center": [1.0, 2.0]}, ParameterError, r"'center' parameter of dp_scree must be a "
                                                 r"number or 5 constants"),
        ({"center": [np.nan] * 5}, ParameterError, r"'center' parameter"),
        ({"center": True}, ParameterError, r"'center' parameter of dp_scree must be 'private'"),
        ({"V_dp": np.ones((4, 2))}, ParameterError, r"'V_dp' parameter of dp_scree must be a "
                                                    r"dp_loading result or a 5 x k matrix"),
        ({"V_dp": np.full((5, 2), np.nan)}, ParameterError,
         r"finite values\)\. Got 'an array of shape \(5, 2\) with non-finite values'"),
        ({"privacy": privacy_control(eps=1, delta=1e-5, split={"loading": 0.5, "score": 0.5})},
         BudgetError, r"must match the required components"),
        ({"privacy": {"eps": 1}}, BudgetError, r"'privacy' parameter of dp_scree"),
    ],
)
def test_dp_scree__argument_errors(kwargs, error, match):
    args = {"privacy": PRIV, "control": clipped_control(3), **kwargs}
    with pytest.raises(error, match=match) as exc:
        dp_scree(X, **args)
    _one_line(exc)


def test_dp_scree__huber_needs_four_rows():
    with pytest.raises(ParameterError, match=r"Method 'huber' of dp_scree needs at least 4 "
                                             r"observations.*Got n = 3 instead\.") as exc:
        dp_scree(X[:3], privacy=PRIV, k=1, method="huber", control=HUBER, V_dp=np.eye(5))
    _one_line(exc)
    fit = dp_scree(X[:4], privacy=PRIV, k=1, method="huber", control=HUBER, V_dp=np.eye(5),
                   center=0.0, rng=1)
    assert fit.scree.shape == (1, 1)


def test_dp_scree__v_dp_variables_must_match():
    loading = dp_loading(X, privacy=privacy_control(eps=1, delta=1e-5), rng=1)
    frame = __import__("pandas").DataFrame(X, columns=list("abcde"))
    with pytest.raises(InputError, match=r"'V_dp' parameter of dp_scree must be directions for "
                                         r"the variables of X"):
        dp_scree(frame, privacy=PRIV, control=clipped_control(3), V_dp=loading)


def test_dp_scree__refuses_before_reading_data(tmp_path):
    """Budget and control errors come before any data pass (a path that does not exist is not
    even opened)."""
    with pytest.raises(ParameterError, match="Missing required control"):
        dp_scree(tmp_path / "missing.zarr", privacy=PRIV, method="pmwm")
    with pytest.raises(BudgetError):
        dp_scree(tmp_path / "missing.zarr", privacy=privacy_control(loading=(1, 1e-5)),
                 control=clipped_control(1))


@pytest.mark.parametrize(("fn", "method"), [("scree", ["clipped", "clipped"]),
                                            ("score", ["add", "add"]),
                                            ("score", ("sparse", "add", "sparse"))])
def test_methods__a_name_given_twice_is_an_error(fn, method):
    """Issue 19: duplicate method names were accepted (one release described twice)."""
    from dppca_dask.errors import ParameterError
    from dppca_dask.pca.histograms import parse_methods as score_methods
    from dppca_dask.pca.scree_controls import parse_methods as scree_methods

    parse = scree_methods if fn == "scree" else score_methods
    with pytest.raises(ParameterError, match="distinct method names"):
        parse(method, "dp_" + fn)


def test_clipped_control__a_clip_level_that_overflows_the_noise_is_refused():
    """Issue 19: C_clip = 1e200 ended in a raw OverflowError from the mechanism."""
    from dppca_dask.pca.scree_controls import MAX_CLIP, clipped_control

    assert clipped_control(C_clip=MAX_CLIP).C_clip == MAX_CLIP
    for bad in (1e200, 1e308, float("inf")):
        with pytest.raises(ParameterError, match=r"'C_clip' parameter of clipped_control must be "
                                                 r"a float in the range \(0, 1e\+100\]"):
            clipped_control(C_clip=bad)
