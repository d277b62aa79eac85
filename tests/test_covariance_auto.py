"""dp_covariance(method="auto"): one SSP release plus shrinkage (post-processing of the release
and its public noise sd); docs/design/covariance_sensitivity.md, "method='auto'"."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dppca_dask import dp_covariance
from dppca_dask.covariance.estimator import plan_covariance, release_covariance
from dppca_dask.covariance.maxent import psd_project
from dppca_dask.covariance.shrinkage import (
    auto_estimate,
    efron_morris_diagonal,
    james_stein_offdiagonal,
    match_diagonal,
    spectral_rie,
    universal_threshold,
)
from dppca_dask.errors import ParameterError
from dppca_dask.pipeline.config import CovarianceConfig
from dppca_dask.privacy.plan import records_match
from dppca_dask.privacy.zcdp import resolve_zcdp
from tests.helpers import write_store


def _data(seed: int, n: int = 400, d: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d)) / math.sqrt(d)
    return rng.normal(size=(n, d)) @ (np.eye(d) + a)


@pytest.mark.parametrize("clip", ["box", "row"])
@pytest.mark.parametrize("budget", [{"rho": 0.3}, {"eps": 1.0, "delta": 1e-5}])
def test_dp_covariance__auto_plan_equals_the_ledger(clip, budget):
    x = _data(1)
    scale = {"bounds": 3.0} if clip == "box" else {"radius": 4.0}
    fit = dp_covariance(x, method="auto", clip=clip, rng=2, **budget, **scale)
    plan = plan_covariance(6, resolve_zcdp(owner="dp_covariance", **budget), method="auto",
                           clip=clip, **scale)
    assert records_match(plan, fit.ledger) == []
    (record,) = fit.ledger
    assert record.component == "ssp" and record.mechanism == "gaussian_zcdp_symmetric"
    assert fit.method == "auto"
    assert "SSP + shrinkage" in str(fit)


def test_dp_covariance__auto_is_post_processing_of_the_ssp_release(global_seed):
    # Same generator state -> the same released measurement as SSP; the estimate is
    # auto_estimate of that measurement and the public sd alone.
    x = _data(global_seed)
    ssp = dp_covariance(x, rho=0.05, method="ssp", clip="row", radius=4.0, rng=global_seed)
    auto = dp_covariance(x, rho=0.05, method="auto", clip="row", radius=4.0, rng=global_seed)
    np.testing.assert_array_equal(ssp.dataset["measurement"].values,
                                  auto.dataset["measurement"].values)
    assert list(ssp.ledger) == list(auto.ledger)
    (record,) = auto.ledger
    y = auto.dataset["measurement"].values / 16.0
    np.testing.assert_allclose(auto.covariance.values, 16.0 * auto_estimate(y, record.scale),
                               rtol=1e-12, atol=1e-15)
    assert not np.allclose(auto.covariance.values, ssp.covariance.values)


def test_dp_covariance__auto_huge_rho_gives_the_clipped_matrix():
    x = _data(3, n=200, d=3)
    norms = np.linalg.norm(x, axis=1)
    clipped = x * np.minimum(1.0, 2.5 / norms)[:, None]
    fit = dp_covariance(x, rho=1e12, method="auto", clip="row", radius=2.5, rng=3)
    np.testing.assert_allclose(fit.covariance.values, clipped.T @ clipped / 200, atol=1e-5)


def test_dp_covariance__auto_rejects_a_control():
    with pytest.raises(ParameterError, match="None for method 'auto'"):
        dp_covariance(_data(0), rho=1.0, bounds=3.0, method="auto", control={"psd": True})


def test_auto_estimate__psd_and_within_the_convex_bound(global_seed):
    rng = np.random.default_rng(global_seed)
    d, sigma = 12, 0.05
    x = rng.normal(size=(500, d)) @ rng.normal(size=(d, d)) / d
    truth = x.T @ x / 500
    truth /= 2.0 * np.abs(truth).max()  # variances at most 0.5: the cap stays idle
    for _ in range(20):
        noise = rng.normal(size=(d, d)) * sigma / math.sqrt(2)
        y = truth + (noise + noise.T) / math.sqrt(2)
        np.fill_diagonal(y, np.diag(truth) + rng.normal(size=d) * sigma)
        est = auto_estimate(y, sigma)
        assert np.allclose(est, est.T)
        assert np.linalg.eigvalsh(est).min() >= -1e-12
        assert np.all(np.diag(est) >= -1e-12) and np.all(np.diag(est) <= 1 + 1e-12)
        # w·S + (1 − w)·A obeys the triangle inequality (no variance above 1 here to cap)
        diag = efron_morris_diagonal(y, sigma)
        w = james_stein_offdiagonal(y, sigma / math.sqrt(2))
        a = np.zeros_like(y)
        upper = np.triu_indices(d, 1)
        a[upper] = universal_threshold(y[upper], sigma / math.sqrt(2))
        a = a + a.T
        np.fill_diagonal(a, diag)
        a = psd_project(a)
        assert np.diag(a).max() <= 1.0
        s = spectral_rie(y, sigma / math.sqrt(2))
        s = match_diagonal(s, np.maximum(diag, np.diag(s)))
        err = np.linalg.norm(est - truth)
        bound = w * np.linalg.norm(s - truth) + (1 - w) * np.linalg.norm(a - truth)
        assert err <= bound + 1e-12


def test_spectral_rie__never_lifts_an_eigenvalue_above_raw_ssp(global_seed):
    # The cap min(ξ, max(λ, 0)): in Y's eigenbasis every eigenvalue is at most the PSD
    # projection's, so a nearly singular direction is never inflated; and with no noise the
    # estimate is Y's PSD part.
    rng = np.random.default_rng(global_seed)
    d, tau = 10, 0.05
    base = rng.normal(size=(d, d))
    truth = base @ base.T / d
    truth[:, 1] = truth[:, 0]  # exactly singular: columns 0 and 1 equal
    truth[1, :] = truth[0, :]
    for _ in range(10):
        noise = rng.normal(size=(d, d)) * tau
        y = truth + (noise + noise.T) / math.sqrt(2)
        vals, vecs = np.linalg.eigh(y)
        est = spectral_rie(y, tau)
        inside = np.einsum("ji,jk,ki->i", vecs, est, vecs)
        assert np.all(inside <= np.maximum(vals, 0.0) + 1e-12)
        assert np.all(inside >= -1e-12)
        np.testing.assert_allclose(spectral_rie(y, 0.0), psd_project(y), atol=1e-12)


def test_universal_threshold__keeps_strong_entries_whole_and_few_noise_entries(global_seed):
    # Pure noise: the number of the m entries above τ·√(2 ln m) is Binomial(m, p) with
    # p = 2(1 − Φ(√(2 ln m))); over 400 draws its mean is within 5 standard errors of m·p.
    # A strong entry is kept exactly (not shrunk).
    rng = np.random.default_rng(global_seed)
    m, tau, draws = 1000, 0.3, 400
    p = math.erfc(math.sqrt(2.0 * math.log(m)) / math.sqrt(2.0))
    kept = [np.count_nonzero(universal_threshold(rng.normal(size=m) * tau, tau))
            for _ in range(draws)]
    se = math.sqrt(m * p * (1 - p) / draws)
    assert abs(np.mean(kept) - m * p) <= 5 * se
    x = rng.normal(size=m) * tau
    x[0] = 20 * tau
    assert universal_threshold(x, tau)[0] == x[0]


def test_match_diagonal__keeps_psd_and_sets_the_diagonal(global_seed):
    rng = np.random.default_rng(global_seed)
    a = rng.normal(size=(6, 4))
    s = a @ a.T
    target = rng.uniform(0.0, 1.0, size=6)
    out = match_diagonal(s, target)
    np.testing.assert_allclose(np.diag(out), target, rtol=1e-12)
    assert np.linalg.eigvalsh(out).min() >= -1e-12
    zero = s.copy()
    zero[2, :] = zero[:, 2] = 0.0
    assert match_diagonal(zero, target)[2, 2] == 0.0


def test_auto_estimate__beats_raw_ssp_in_the_noise_dominated_regime(global_seed):
    # Mean squared Frobenius error over 40 releases of a fixed matrix, noise sd comparable to
    # the entries: the shrinkage must cut the error of the clipped, PSD-projected raw release
    # (measured ratio about 0.2; the assertion leaves a factor 2.5 of slack).
    rng = np.random.default_rng(global_seed)
    d, sigma = 20, 0.05
    truth = np.full((d, d), 0.01) + np.eye(d) * 0.04
    raw, shrunk = [], []
    for _ in range(40):
        noise = rng.normal(size=(d, d)) * sigma / math.sqrt(2)
        y = truth + (noise + noise.T) / math.sqrt(2)
        np.fill_diagonal(y, np.diag(truth) + rng.normal(size=d) * sigma)
        clipped = y.copy()
        np.fill_diagonal(clipped, np.clip(np.diag(y), 0, 1))
        raw.append(np.linalg.norm(psd_project(clipped) - truth) ** 2)
        shrunk.append(np.linalg.norm(auto_estimate(y, sigma) - truth) ** 2)
    assert np.mean(shrunk) < 0.5 * np.mean(raw)


def test_shrinkage__weights_at_the_extremes():
    y = np.eye(5) * 0.5 + 0.1
    assert james_stein_offdiagonal(y, 0.0) == 1.0
    assert james_stein_offdiagonal(y, 1.0) == 0.0
    np.testing.assert_allclose(spectral_rie(y, 0.0), y, atol=1e-12)
    assert np.linalg.eigvalsh(spectral_rie(y, 10.0)).max() <= np.linalg.eigvalsh(y).max()
    np.testing.assert_allclose(efron_morris_diagonal(y, 10.0), np.full(5, 0.6))


def test_covariance_config__accepts_auto():
    cfg = CovarianceConfig(method="auto", bounds=3.0)
    assert cfg.method == "auto"
    with pytest.raises(ValueError, match="None for method 'auto'"):
        CovarianceConfig(method="auto", bounds=3.0, control={"psd": True})


def test_release_covariance__auto_info():
    sigma = np.eye(3) * 0.5
    est = release_covariance(sigma, n=100, bounds=np.full(3, 2.0), rho=1.0, method="auto",
                             control=None, rng=np.random.default_rng(0), clip="row")
    assert est.info["method"] == "auto" and est.info["psd"] is True
    assert est.measured.all()


def test_dp_covariance__auto_public_fields_do_not_depend_on_the_data():
    # Neighbouring datasets (one row replaced by an extreme one), same generator: every field
    # not marked private -- metadata, ledger, non-private variables -- is identical.
    x = _data(6, n=300, d=4)
    y = x.copy()
    y[17] = [40.0, -40.0, 40.0, -40.0]
    a = dp_covariance(x, rho=0.2, method="auto", clip="row", radius=4.0, rng=11)
    b = dp_covariance(y, rho=0.2, method="auto", clip="row", radius=4.0, rng=11)
    assert a.metadata == b.metadata
    assert list(a.ledger) == list(b.ledger)
    public = [name for name, var in a.dataset.data_vars.items() if var.attrs.get("private") == 0]
    assert "bound" in public
    for name in public:
        np.testing.assert_array_equal(a.dataset[name].values, b.dataset[name].values)
    assert not np.array_equal(a.covariance.values, b.covariance.values)


def test_cli_plan__covariance_auto_line(tmp_path):
    import yaml
    from click.testing import CliRunner

    from dppca_dask.cli import main

    path = tmp_path / "data.zarr"
    write_store(path, _data(9, n=100, d=3))
    cfg = {"input": {"path": str(path), "array": "X"}, "task": "covariance",
           "privacy": {"eps": 1.0, "delta": 1e-5},
           "covariance": {"method": "auto", "bounds": 3.0},
           "output": {"directory": str(tmp_path / "out")}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    result = CliRunner().invoke(main, ["plan", str(tmp_path / "run.yaml")])
    assert result.exit_code == 0, result.output
    assert "auto (ssp release): rho = " in result.output
    assert "then thresholding/spectral shrinkage and PSD projection" in result.output
    assert "ssp: gaussian_zcdp_symmetric" in result.output
