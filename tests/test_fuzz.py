"""Input robustness: every input either works correctly or fails with the package's own error.

Property-based over data values, dtypes, shapes, stores and configs (issue 9, item 5).
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dppca_dask import DPPCAError, dp_loading, privacy_control, spherical_kendall
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.results.frame import RESOLUTION_VARIABLES
from tests.helpers import write_store

PRIV = privacy_control(eps=1.0, delta=1e-5)
fuzz = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e300, 1e300),
    st.floats(-1e-300, 1e-300),
    st.sampled_from([0.0, 1.0, -1.0, 1e6]),
)


def _check_loading(x) -> None:
    try:
        fit = dp_loading(x, privacy=PRIV, rng=0)
    except DPPCAError:
        return
    v = fit.directions.values
    assert np.isfinite(v).all()
    np.testing.assert_allclose(v.T @ v, np.eye(v.shape[1]), atol=1e-8)


@fuzz
@given(arrays(np.float64, st.tuples(st.integers(0, 12), st.integers(0, 4)), elements=floats))
def test_fuzz__dp_loading_arbitrary_values(x):
    _check_loading(x)


@fuzz
@given(st.integers(2, 15), st.integers(1, 4), st.integers(0, 3), st.sampled_from([1.0, 1e200, 1e-4]))
def test_fuzz__structured_awkward_data(n, p, kind, scale):
    rng = np.random.default_rng(n * 10 + p)
    x = rng.normal(size=(n, p)) * scale
    if kind == 1:
        x[:, 0] = 3.0  # a constant column
    elif kind == 2:
        x[-1] = x[0]  # a duplicated row
    elif kind == 3:
        x += 1e8  # a large common offset
    _check_loading(x)
    try:
        k = spherical_kendall(x).values
    except DPPCAError:
        return
    assert np.trace(k) == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize(
    "bad",
    [
        None, 3.0, "not a path", [[1, 2], [3, 4]], {"a": [1, 2]}, np.zeros(5), np.zeros((2, 2, 2)),
        np.array([[1, "a"], [2, "b"]], dtype=object), np.array([[1 + 1j, 2], [3, 4]]),
        np.array([["1", "2"], ["3", "4"]]),
    ],
)
def test_fuzz__wrong_types_and_shapes(bad):
    with pytest.raises(DPPCAError):
        dp_loading(bad, privacy=PRIV)


@pytest.fixture
def store(tmp_path):
    x = np.random.default_rng(0).normal(size=(50, 3))
    path = tmp_path / "d.zarr"
    return write_store(path, x, chunk=10)


@pytest.mark.parametrize(
    "damage", ["truncate_chunks", "garbage_chunks", "delete_array_meta", "garbage_meta",
               "delete_group_meta", "delete_a_chunk"]
)
def test_fuzz__corrupt_zarr_store(store, damage):
    chunks = [f for f in (store / "X").rglob("*") if f.is_file() and f.name != "zarr.json"]
    if damage == "truncate_chunks":
        for f in chunks:
            f.write_bytes(f.read_bytes()[:7])
    elif damage == "garbage_chunks":
        for f in chunks:
            f.write_bytes(b"\xff" * 64)
    elif damage == "delete_array_meta":
        (store / "X" / "zarr.json").unlink()
    elif damage == "garbage_meta":
        (store / "X" / "zarr.json").write_text("{ not json")
    elif damage == "delete_group_meta":
        (store / "zarr.json").unlink()
    elif damage == "delete_a_chunk":
        chunks[0].unlink()
    try:
        fit = dp_loading(str(store), privacy=PRIV, rng=0)
    except DPPCAError as exc:
        assert "Traceback" not in str(exc)
        return
    # A missing chunk reads as the fill value (Zarr semantics): rows of zeros, then duplicates,
    # are rejected above; anything that succeeds must be a valid release.
    assert np.isfinite(fit.directions.values).all()


config_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-10, 10), st.text(max_size=5)),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(st.text(max_size=8), children, max_size=3)),
    max_leaves=10,
)


@fuzz
@given(st.dictionaries(
    st.sampled_from(["input", "task", "privacy", "loading", "cluster", "output", "rng",
                     "budget_ledger", "extra"]),
    config_values, max_size=8,
))
def test_fuzz__malformed_configs_are_config_errors(data):
    try:
        RunConfig.from_dict(data)
    except DPPCAError as exc:
        assert str(exc).startswith("Invalid config:")


@fuzz
@given(st.text(max_size=200))
def test_fuzz__config_files_of_any_text(tmp_path, text):
    from dppca_dask.pipeline.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text(text)
    try:
        load_config(path)
    except DPPCAError:
        pass


def test_fuzz__config_yaml_with_python_tags_is_rejected(tmp_path):
    from dppca_dask.pipeline.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text("input: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(DPPCAError, match="not valid YAML"):
        load_config(path)
    assert yaml.safe_load("a: 1") == {"a": 1}


WEIRD = [None, -1, 0, 0.5, 2, 1e9, np.nan, np.inf, "x", "", [1], [1, 2], (2, 1), (1, 1),
         {"a": 1}, True, [1, 2, 3], np.array([1, 2]), ("add", "sparse"), {"C_clip": 1.0}]


@fuzz
@given(
    st.sampled_from(["dp_scree", "dp_score", "dp_pca", "dp_covariance", "dp_loading"]),
    st.sampled_from(["k", "method", "control", "center", "mono", "V_dp", "axes", "bins",
                     "group", "frame", "scree_method", "scree_control", "score_method",
                     "rho", "bounds", "block_rows", "pairs", "pair_block", "calibration",
                     "sensitivity", "cpp_option", "non_private"]),
    st.sampled_from(WEIRD),
)
def test_fuzz__estimator_arguments(owner, name, value):
    """Any value for any argument: a correct fit or a DPPCAError (never NumPy/Dask errors)."""
    import inspect

    import dppca_dask

    fn = getattr(dppca_dask, owner)
    if name not in inspect.signature(fn).parameters:
        return
    x = np.random.default_rng(1).normal(size=(40, 3))
    kwargs: dict = {"rng": 0}
    if owner == "dp_covariance":
        kwargs.update(rho=0.5, bounds=3.0)
    else:
        kwargs["privacy"] = privacy_control(eps=2.0, delta=1e-5)
    if owner == "dp_scree":
        kwargs["control"] = {"C_clip": 5.0}
    if owner == "dp_pca":
        kwargs["scree_control"] = {"C_clip": 5.0}
    kwargs[name] = value
    try:
        fn(x, **kwargs)
    except DPPCAError:
        pass


# ---------------------------------------------------------------- issue 19: extreme inputs


def test_fuzz__covariance_bounds_near_float_max_is_one_clear_error():
    from dppca_dask import ParameterError, dp_covariance

    x = np.random.default_rng(0).normal(size=(50, 3))
    with pytest.raises(ParameterError, match=r"^The 'bounds' parameter of dp_covariance must be "
                                             r"at most 1e\+100 per variable .* Got 1e\+308"):
        dp_covariance(x, preset="seed", rho=0.5, bounds=1e308, rng=0)


def test_fuzz__covariance_single_row_warns_that_the_release_is_meaningless():
    from dppca_dask import PrivacyWarning, dp_covariance

    with pytest.warns(PrivacyWarning, match="single row"):
        fit = dp_covariance(np.ones((1, 3)), preset="seed", rho=0.5, bounds=3.0, rng=0)
    assert np.isfinite(fit.covariance.values).all()


def test_fuzz__scree_on_values_near_float_max_is_finite_or_a_clear_error():
    import warnings

    from dppca_dask import dp_scree

    x = np.random.default_rng(0).normal(size=(300, 3)) * 1e307
    try:
        with warnings.catch_warnings():  # the kernels' squared radii overflow to inf (clipped)
            warnings.simplefilter("ignore", RuntimeWarning)
            fit = dp_scree(x, privacy=PRIV, rng=0, control={"C_clip": 5.0})
    except DPPCAError:
        return
    for name, var in fit.dataset.data_vars.items():
        if var.dtype.kind == "f":
            assert np.isfinite(var.values).all(), name


def test_fuzz__pandas_nullable_int_with_na_is_one_clear_error():
    import pandas as pd

    df = pd.DataFrame({"a": pd.array([1, 2, None, 4] * 10, dtype="Int64"),
                       "b": np.arange(40.0), "c": np.arange(40.0) ** 2})
    with pytest.raises(DPPCAError, match=r"must contain only finite, non-missing values. Got 10 "
                                         r"non-finite value\(s\) \(first at row 2, column 'a'\)"):
        dp_loading(df, privacy=PRIV, rng=0)


def _fuzz_inputs():
    import pandas as pd

    rng = np.random.default_rng(19)
    base = rng.normal(size=(60, 3)) * [3.0, 2.0, 1.0]
    const = base.copy()
    const[:, 1] = 7.0
    dup = np.repeat(base[:6], 10, axis=0)
    nan = base.copy()
    nan[3, 2] = np.nan
    frame = pd.DataFrame({"a": pd.array([1, None] + [3] * 58, dtype="Int64"),
                          "b": base[:, 1], "c": base[:, 2]})
    return {"normal": base, "constant column": const, "all constant": np.full((60, 3), 2.0),
            "one row": base[:1], "duplicated rows": dup, "huge 1e300": base * 1e300,
            "tiny 1e-300": base * 1e-300, "nan": nan, "Int64 with NA": frame,
            "wide 3 x 400": rng.normal(size=(3, 400))}


def _fuzz_calls():
    from dppca_dask import dp_covariance, dp_pca, dp_score, dp_scree

    p2 = privacy_control(eps=2.0, delta=1e-5)
    return {
        "dp_loading": lambda x: dp_loading(x, privacy=p2, rng=0),
        "dp_scree": lambda x: dp_scree(x, privacy=p2, rng=0, control={"C_clip": 5.0}),
        "dp_score": lambda x: dp_score(x, privacy=p2, rng=0),
        "dp_pca": lambda x: dp_pca(x, privacy=p2, rng=0, k=2, scree_control={"C_clip": 5.0}),
        "dp_covariance": lambda x: dp_covariance(x, preset="seed", rho=0.5, bounds=3.0, rng=0),
    }


def _run_cases(names: tuple[str, ...] | None) -> tuple[dict[str, int], list[str]]:
    import warnings

    counts = {"clear error": 0, "finite release": 0}
    bad = []
    for data_name, x in _fuzz_inputs().items():
        if names is not None and data_name not in names:
            continue
        for fn_name, call in _fuzz_calls().items():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # PrivacyWarning (one row), overflow
                    fit = call(x)
            except DPPCAError as exc:
                assert "\n" not in str(exc).strip(), (fn_name, data_name, str(exc))
                counts["clear error"] += 1
                continue
            except Exception as exc:  # noqa: BLE001 -- the defect this test looks for
                bad.append(f"{fn_name}({data_name}): foreign {type(exc).__name__}: {exc}")
                continue
            parts = [fit] + [getattr(fit, n) for n in ("loading", "scree", "score")
                             if getattr(fit, n, None) is not None]
            # NaN "measurement": not measured; the frame's search cells are +-inf where a
            # search ran off its public grid and NaN without a grid (documented values).
            finite = all(np.isfinite(v.values).all() for part in parts
                         for k, v in getattr(part, "dataset", xr.Dataset()).data_vars.items()
                         if v.dtype.kind == "f" and k != "measurement"
                         and k not in RESOLUTION_VARIABLES)
            if finite:
                counts["finite release"] += 1
            else:
                bad.append(f"{fn_name}({data_name}): non-finite release")
    return counts, bad


@pytest.mark.parametrize("names", [pytest.param(None, marks=pytest.mark.slow, id="all"),
                                   pytest.param(("normal", "one row", "Int64 with NA"),
                                                id="fast-subset")])
def test_fuzz__generated_cases_every_estimator_counts(capsys, names):
    """Generated cases (awkward inputs x every estimator): each is a clear DPPCAError or a
    finite release; never a foreign exception or a non-finite release. Prints the counts."""
    counts, bad = _run_cases(names)
    with capsys.disabled():
        print(f"\nfuzz: {sum(counts.values()) + len(bad)} generated cases: {counts}, "
              f"defects {len(bad)}")
    assert not bad, "\n".join(bad)
