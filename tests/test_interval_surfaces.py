"""Where users look, besides the figures: ``inspect --json`` lists the intervals, the
scikit-learn estimators expose them, dp_scree's own result carries its directions' bounds."""

from __future__ import annotations

import json
import warnings

import numpy as np
from click.testing import CliRunner

from dppca_dask import clipped_control, dp_pca, dp_scree, load_result, privacy_control
from dppca_dask.cli import main

X = np.random.default_rng(21).normal(size=(800, 4)) * [3.0, 2.0, 1.0, 0.5]


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def test_dp_scree__carries_the_angle_bounds_of_its_own_directions(tmp_path):
    fit = _quiet(dp_scree, X, privacy=privacy_control(eps=4.0, delta=1e-5), k=3,
                 control=clipped_control(C_clip=36.0), rng=2)
    ds = fit.dataset
    angle = ds["angle_upper"].values
    assert angle.shape == (3,) and np.all((angle >= 0) & (angle <= 90))
    assert np.array_equal(ds["direction_identifiable"].values, (angle < 45).astype(np.int8))
    assert np.all(angle <= ds["angle_upper_guaranteed"].values)
    assert "95% bounds on the angle to the noise-free direction" in repr(fit.summary())
    fit.to_zarr(tmp_path / "scree.zarr")
    assert repr(load_result(tmp_path / "scree.zarr").summary()) == repr(fit.summary())
    supplied = _quiet(dp_scree, X, privacy=privacy_control(eps=4.0, delta=1e-5), k=2,
                      control=clipped_control(C_clip=36.0), V_dp=np.eye(4)[:, :2], rng=2)
    assert "angle_upper" not in supplied.dataset  # a supplied matrix has no release to bound


def test_sklearn__estimators_expose_the_intervals():
    from dppca_dask.sklearn import DPPCA, DPCovariance

    est = _quiet(DPPCA(2, eps=4.0, delta=1e-5, scree_control=clipped_control(C_clip=36.0),
                       random_state=1).fit, X)
    ds = est.result_.dataset
    assert est.components_angle_bound_.shape == (2,)
    assert np.array_equal(est.components_angle_bound_, ds["angle_upper"].values)
    assert est.components_identifiable_.dtype == bool
    ratio = est.explained_variance_ratio_interval_
    assert ratio.shape == (2, 2)
    assert np.all((ratio[0] >= 0) & (ratio[0] <= ratio[1]) & (ratio[1] <= 1))
    np.testing.assert_allclose(est.explained_variance_sampling_sd_,
                               est.explained_variance_ * np.sqrt(2 / (800 - 1)))
    cov = _quiet(DPCovariance(rho=1.0, random_state=1).fit, X)
    lower, upper = cov.covariance_interval_
    assert lower.shape == (4, 4) and np.all(lower <= upper)
    np.testing.assert_array_equal(lower, cov.result_.dataset["covariance_lower"].values)
    eig = cov.covariance_eigenvalue_interval_
    assert eig.shape == (2, 4) and np.all(eig[0] <= eig[1])
    assert cov.covariance_sampling_sd_.shape == (4, 4)


def test_inspect_json__lists_the_intervals(tmp_path, monkeypatch):
    fit = _quiet(dp_pca, X, privacy=privacy_control(eps=4.0, delta=1e-5), k=2, bins=5,
                 scree_control=clipped_control(C_clip=36.0), rng=3)
    fit.to_zarr(tmp_path / "pca.zarr")
    out = CliRunner().invoke(main, ["inspect", str(tmp_path / "pca.zarr"), "--json"])
    assert out.exit_code == 0, out.output
    intervals = json.loads(out.output)["intervals"]
    scree = intervals["scree/scree_lower"]
    assert scree["dims"] == ["mechanism", "component"] and scree["level"] == 0.95
    assert scree["coords"]["component"] == ["PC1", "PC2"]
    np.testing.assert_allclose(scree["values"], fit.scree.dataset["scree_lower"].values)
    for key in ("scree/cumulative_pve_upper", "scree/scree_sampling_sd", "loading/angle_upper",
                "loading/angle_upper_guaranteed", "loading/direction_identifiable",
                "score/count_lower", "score/probability_upper", "score/frame_resolution"):
        assert key in intervals, key
    assert intervals["scree/scree_sampling_sd"]["assumption"] == "Gaussian scores"
    assert "loading/directions" not in intervals  # the releases themselves stay in variables
    monkeypatch.setattr("dppca_dask.cli.INTERVAL_VALUES_MAX", 10)
    out = CliRunner().invoke(main, ["inspect", str(tmp_path / "pca.zarr"), "--json"])
    big = json.loads(out.output)["intervals"]["score/count_upper"]
    assert big["values"] is None and big["range"][0] <= big["range"][1]
