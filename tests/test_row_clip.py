"""dp_covariance(clip="row"): rows scaled to L2 norm <= R (Analyze-Gauss), sensitivities
√2·R²/n (Frobenius), √2·R²/n (diagonal vector), R²/n (one off-diagonal entry), 2R/n (means) in
raw units (docs/design/covariance_sensitivity.md, "Row clipping"); checked by brute force on
neighbouring datasets, attained, Dask vs NumPy under awkward chunkings, noise sd by χ²."""

from __future__ import annotations

import math

import dask.array as da
import numpy as np
import pytest
from scipy import stats

from dppca_dask import dp_covariance, pace_ggm_control
from dppca_dask.covariance.estimator import (
    clipped_second_moment,
    covariance_sensitivities,
    plan_covariance,
    release_covariance,
)
from dppca_dask.covariance.pace_ggm import measurement_sensitivities
from dppca_dask.errors import ParameterError
from dppca_dask.kernels.gram import ROW_SHRINK, row_clipped_gram
from dppca_dask.privacy.mechanisms import mat2vec
from dppca_dask.privacy.plan import records_match
from dppca_dask.privacy.zcdp import resolve_zcdp

ALPHA = 1e-6


def _reference(x: np.ndarray, radius: float) -> np.ndarray:
    """Plain per-row loop: each row scaled to norm <= R."""
    rows = []
    for row in x:
        norm = math.sqrt(float(row @ row))
        rows.append(row * (radius * ROW_SHRINK / norm) if norm > radius else row)
    return np.array(rows)


def _moments(x: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    gram, sums, _ = row_clipped_gram(x, radius)
    return gram / x.shape[0], sums / x.shape[0]


def test_row_clipped_gram__rows_within_radius(global_seed):
    rng = np.random.default_rng(global_seed)
    x = rng.standard_t(2, size=(500, 6)) * 5
    clipped = _reference(x, 2.0)
    assert np.all(np.linalg.norm(clipped, axis=1) <= 2.0)
    gram, sums, count = row_clipped_gram(x, 2.0, count_clipped=True)
    np.testing.assert_allclose(gram, clipped.T @ clipped, rtol=1e-12)
    np.testing.assert_allclose(sums, clipped.sum(axis=0), rtol=1e-12, atol=1e-12)
    over = np.linalg.norm(x, axis=1) > 2.0
    assert count.tolist() == np.count_nonzero(x[over] != 0, axis=0).tolist()


@pytest.mark.parametrize("d", [1, 2, 3, 6])
def test_row_clip__sensitivities_bound_every_neighbour(d, global_seed):
    rng = np.random.default_rng([global_seed, d])
    n, radius = 12, 1.7
    sens = covariance_sensitivities(radius, n, clip="row")
    frob = radius**2 * math.sqrt(2.0) / n
    assert sens.frobenius_raw == pytest.approx(frob, rel=1e-15)
    worst = {"frob": 0.0, "vech": 0.0, "diag": 0.0, "entry": 0.0, "mean": 0.0}
    for trial in range(400):
        scale = [0.3, 1.0, 50.0][trial % 3]  # inside, around and far outside the ball
        x = rng.normal(size=(n, d)) * scale
        y = x.copy()
        i = rng.integers(n)
        y[i] = rng.normal(size=d) * rng.choice([0.1, 1.0, 100.0])
        sx, mx = _moments(x, radius)
        sy, my = _moments(y, radius)
        diff = sy - sx
        worst["frob"] = max(worst["frob"], float(np.linalg.norm(diff)))
        worst["vech"] = max(worst["vech"], float(np.linalg.norm(mat2vec(diff))))
        worst["diag"] = max(worst["diag"], float(np.linalg.norm(np.diag(diff))))
        if d > 1:
            worst["entry"] = max(worst["entry"], float(np.abs(diff[~np.eye(d, dtype=bool)]).max()))
        worst["mean"] = max(worst["mean"], float(np.linalg.norm(my - mx)))
    tol = 1 + 1e-12
    assert worst["frob"] <= frob * tol
    assert worst["vech"] <= frob * tol  # the released vech* has the same L2 norm (isometry)
    assert worst["diag"] <= sens.diagonal * radius**2 * tol
    assert worst["entry"] <= sens.offdiagonal * radius**2 * tol
    assert worst["mean"] <= sens.mean * radius * tol
    pace = measurement_sensitivities(n, d, "row")
    assert (pace["diagonal"], pace["entry"], pace["mean"]) == (
        sens.diagonal, sens.offdiagonal, sens.mean)


def test_row_clip__sensitivities_are_attained():
    n, d, radius = 10, 4, 2.0
    base = np.zeros((n, d))

    def change(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x, y = base.copy(), base.copy()
        x[0], y[0] = a, b
        (sx, mx), (sy, my) = _moments(x, radius), _moments(y, radius)
        return sy - sx, my - mx

    sens = covariance_sensitivities(radius, n, clip="row")
    e = np.eye(d) * radius
    diff, _ = change(e[0], e[1])  # orthogonal rows on the sphere: Frobenius and diagonal
    assert np.linalg.norm(diff) == pytest.approx(sens.frobenius_raw, rel=1e-14)
    assert np.linalg.norm(np.diag(diff)) == pytest.approx(sens.diagonal * radius**2, rel=1e-14)
    diff, _ = change((e[0] + e[1]) / math.sqrt(2), (e[0] - e[1]) / math.sqrt(2))
    assert abs(diff[0, 1]) == pytest.approx(sens.offdiagonal * radius**2, rel=1e-14)
    _, mdiff = change(e[2], -e[2])
    assert np.linalg.norm(mdiff) == pytest.approx(sens.mean * radius, rel=1e-14)
    # Far outside the ball the clipped rows sit at R·(1 − 2^-40): the bound is approached.
    diff, _ = change(e[0] * 1e6, e[1] * 1e6)
    assert np.linalg.norm(diff) == pytest.approx(sens.frobenius_raw, rel=1e-11)
    assert np.linalg.norm(diff) <= sens.frobenius_raw


@pytest.mark.parametrize("chunks", [(7, 4), (1, 4), (60, 4), (13, 2), (4, 1)])
def test_clipped_second_moment__row_dask_equals_numpy(chunks):
    x = np.random.default_rng(4).standard_t(3, size=(60, 4)) * 2.0
    ref = _reference(x, 3.0)
    got = clipped_second_moment(da.from_array(x, chunks=chunks), clip="row", radius=3.0)
    np.testing.assert_allclose(got.values, ref.T @ ref / 60, rtol=1e-13)
    assert got.attrs["private"] == 0


def test_ssp_row__noise_sd_chi2(global_seed):
    # The released vech* (before PSD projection) minus the exact one: q i.i.d. draws of sd
    # `scale` per release (in normalised units x/R); Σ z²/scale² ~ χ²(q · reps).
    n, d, radius, rho, reps = 400, 5, 2.0, 0.5, 300
    x = np.random.default_rng(global_seed).normal(size=(n, d))
    sigma, _ = _moments(x, radius)
    rng = np.random.default_rng(global_seed + 1)
    bounds = np.full(d, radius)
    total, draws = 0.0, 0
    for _ in range(reps):
        est = release_covariance(sigma, n=n, bounds=bounds, rho=rho, method="ssp",
                                 control={"psd": True}, rng=rng, clip="row")
        (record,) = est.ledger
        assert record.sensitivity == pytest.approx(math.sqrt(2) / n, rel=1e-8)
        assert record.scale == pytest.approx(math.sqrt(2) / n / math.sqrt(2 * rho), rel=1e-6)
        z = mat2vec((est.measurements - sigma) / radius**2)
        total += float(np.sum((z / record.scale) ** 2))
        draws += z.size
    assert stats.chi2.ppf(ALPHA / 2, draws) < total < stats.chi2.ppf(1 - ALPHA / 2, draws)
    # the released matrix is PSD (post-processing)
    assert np.linalg.eigvalsh(est.covariance).min() >= -1e-12


def test_ssp_row__less_noise_than_box_on_standardised_data():
    n, d = 1000, 16
    box = covariance_sensitivities(np.full(d, 3.0), n).frobenius_raw
    row = covariance_sensitivities(1.5 * math.sqrt(d), n, clip="row").frobenius_raw
    assert box / row == pytest.approx(4.0)


@pytest.mark.parametrize("method", ["ssp", "diagonal", "pace_ggm"])
def test_dp_covariance__row_records_and_plan(method):
    x = np.random.default_rng(7).normal(size=(300, 4))
    control = pace_ggm_control(mean="measure") if method == "pace_ggm" else None
    fit = dp_covariance(x, rho=0.5, method=method, clip="row", radius=3.0, rng=2,
                        control=control)
    plan = plan_covariance(4, resolve_zcdp(rho=0.5, owner="dp_covariance"), method=method,
                           control=control, clip="row", radius=3.0)
    assert records_match(plan, fit.ledger) == []
    want = {"ssp": math.sqrt(2) / 300, "diagonal": math.sqrt(2) / 300, "select": 1 / 300,
            "measure": 1 / 300, "mean": 2 / 300}
    for record in fit.ledger:
        assert record.sensitivity == pytest.approx(want[record.component], rel=1e-8)
    assert fit.metadata["clip"] == "row" and fit.metadata["radius"] == 3.0
    assert np.all(fit.dataset["bound"].values == 3.0)


def test_dp_covariance__row_huge_rho_gives_the_clipped_matrix():
    x = np.random.default_rng(8).normal(size=(200, 3)) * 2
    ref = _reference(x, 2.5)
    fit = dp_covariance(x, rho=1e12, method="ssp", clip="row", radius=2.5, rng=3)
    np.testing.assert_allclose(fit.covariance.values, ref.T @ ref / 200, atol=1e-5)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"clip": "row", "radius": "median"}, "'radius' parameter of dp_covariance.*'private'"),
    ({"clip": "row", "radius": -1.0}, "'radius' parameter"),
    ({"clip": "row", "radius": math.inf}, "'radius' parameter"),
    ({"clip": "row", "radius": True}, "'radius' parameter"),
    ({"clip": "row", "radius": 1.0, "bounds": 1.0}, "'bounds' parameter.*clip='row'"),
    ({"clip": "box", "radius": 1.0, "bounds": 1.0}, "'radius' parameter.*clip='box'"),
    ({"clip": "ball", "bounds": 1.0}, "'clip' parameter"),
])
def test_dp_covariance__row_clip_errors(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        dp_covariance(np.zeros((5, 3)), rho=1.0, **kwargs)
