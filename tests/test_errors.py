"""Errors carry fields (issue 29 item 3): owner, parameter, rule, value, hint and a structured
fix, worded per surface from the fields -- the Python API (``str``), the command line and the app
(:mod:`dppca_dask.pipeline.wording`) -- with no message text parsed."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from dppca_dask import dp_loading, dp_scree, privacy_control
from dppca_dask.errors import BudgetError, DPPCAError, Fix, InputError, ParameterError
from dppca_dask.pipeline.wording import CliWording, cli_message

X = np.random.default_rng(0).normal(size=(40, 3))
PC = privacy_control(eps=1.0, delta=1e-5)


def test_errors__a_bad_parameter_carries_its_fields():
    with pytest.raises(ParameterError) as caught:
        dp_loading(X, privacy=PC, calibration="exact")
    error = caught.value
    assert (error.owner, error.parameter, error.value) == ("dp_loading", "calibration", "exact")
    assert error.rule == "must be a str among {'classical', 'analytic'}"
    assert str(error) == ("The 'calibration' parameter of dp_loading must be a str among "
                          "{'classical', 'analytic'}. Got 'exact' instead.")
    assert CliWording("loading").say(error) == (
        "The 'loading.calibration' config key must be a str among {'classical', 'analytic'}. "
        "Got 'exact' instead.")


def test_errors__budget_and_input_errors_carry_fields_too():
    with pytest.raises(BudgetError) as budget:
        dp_loading(X, privacy=privacy_control(eps=-1.0, delta=1e-5))
    assert budget.value.parameter == "eps" and budget.value.value == -1.0
    assert cli_message(budget.value, "loading").startswith("The 'privacy.eps' config key must")
    with pytest.raises(InputError) as data:
        dp_loading(X[:, 0], privacy=PC)
    assert (data.value.owner, data.value.parameter) == ("dp_loading", "X")
    assert data.value.rule == "must be 2-D (samples × variables)"


def test_errors__a_fix_is_worded_per_surface():
    with pytest.raises(ParameterError) as caught:
        dp_scree(X, privacy=PC, method="pmwm")
    error = caught.value
    assert error.fix == Fix((("control", "pmwm", "a"), ("control", "pmwm", "b"),
                             ("control", "pmwm", "trim_const"), ("control", "pmwm", "eta")))
    assert str(error).endswith("Provide control=pmwm_control(a=..., b=..., trim_const=..., "
                               "eta=...).")
    cli = CliWording("scree").say(error)
    assert cli.endswith("Set them in the config: scree.controls.pmwm.a, scree.controls.pmwm.b, "
                        "scree.controls.pmwm.trim_const, scree.controls.pmwm.eta (or --set "
                        "scree.controls.pmwm.a=...).")
    assert "control=" not in cli


def test_errors__a_plain_message_has_no_fields_and_is_worded_as_it_is():
    error = DPPCAError("Something public went wrong.")
    assert error.parameter is None and error.fix is None
    assert CliWording("pca").say(error) == str(error) == "Something public went wrong."


@pytest.mark.parametrize("error", [
    ParameterError(owner="dp_pca", parameter="k", rule="must be an int", value=0.5,
                   hint="See dp_scree."),
    InputError("Output 'o' already exists.", fix=Fix((("overwrite",),), "True", "to replace it")),
    DPPCAError("plain"),
])
def test_errors__fields_survive_pickling_across_workers(error):
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert again.fields() == error.fields()


# -- foreign errors (issue 32 item 2): config files and matrix sizes get the package's errors --

@pytest.mark.parametrize(("content", "expected"), [
    (b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nests its values deeper than the parser"),
    (b"input:\n  path: caf\xe9.zarr\n", r"not UTF-8 text: byte 0xe9 at line 2, column 12"),
    ("task: nope\n".encode("utf-16"), "'task'"),  # UTF-16 with its BOM is read: a config error
])
def test_load_config__encodings_and_nesting_are_config_errors(tmp_path, content, expected):
    from dppca_dask.errors import ConfigError
    from dppca_dask.pipeline.config import load_config

    path = tmp_path / "run.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=expected):
        load_config(path)
    with pytest.raises(ConfigError, match="is a directory; give the path of a YAML file"):
        load_config(tmp_path)


def test_dp_covariance__a_matrix_past_memory_is_refused_before_any_work():
    from dppca_dask import dp_covariance

    with pytest.raises(InputError, match=r"needs about 4\.47e\+04 GiB of memory for the "
                                         r"1000000 x 1000000 matrix"):
        dp_covariance(np.zeros((3, 10 ** 6)), rho=1.0, bounds=1.0, preset="seed")


def test_dp_loading__an_eps_whose_noise_overflows_is_a_budget_error():
    x = np.random.default_rng(0).normal(size=(50, 3))
    with pytest.raises(BudgetError, match=r"eps=1e-300, delta=1e-05: its noise variance exceeds "
                                          r"the largest double"):
        dp_loading(x, privacy=privacy_control(eps=1e-300, delta=1e-5), rng=1)


def test_dp_loading__a_zero_row_zarr_with_zero_chunks_is_an_input_error(tmp_path):
    import zarr

    zarr.create_array(str(tmp_path / "empty.zarr"), shape=(0, 3), chunks=(0, 3), dtype="f8")
    with pytest.raises(InputError, match="must have at least two rows. Got 0 instead"):
        dp_loading(str(tmp_path / "empty.zarr"), privacy=privacy_control(eps=1, delta=1e-5),
                   rng=1)
