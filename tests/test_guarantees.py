"""No silent weak privacy: settings outside their guarantee warn before any data is read."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from dppca_dask import (
    BudgetError,
    PrivacyWarning,
    clipped_control,
    dp_covariance,
    dp_loading,
    dp_pca,
    dp_score,
    dp_scree,
    privacy_control,
)
from dppca_dask.pca.loading import plan_loading
from dppca_dask.privacy.budget import resolve_budget
from dppca_dask.privacy.guarantees import classical_exact_eps, guarantee_warnings, warn_guarantees

X = np.random.default_rng(0).normal(size=(300, 4)) * [3.0, 2.0, 1.0, 0.5]


def _delta(eps: float, s: float) -> float:
    """Balle & Wang's exact delta(eps) of the Gaussian mechanism, sd s (sensitivity 1), by scipy."""
    return norm.cdf(0.5 / s - eps * s) - math.exp(eps) * norm.cdf(-0.5 / s - eps * s)


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-5), (3.0, 1e-6), (10.0, 1e-5)])
def test_classical_exact_eps__solves_the_exact_privacy_curve(eps, delta):
    exact = classical_exact_eps(eps, delta)
    s = math.sqrt(2 * math.log(1.25 / delta)) / eps  # the classical sd, sensitivity 1
    assert _delta(exact, s) == pytest.approx(delta, rel=1e-6)
    if eps == 10.0:  # the classical formula under-noises there (docs/guide/privacy-model.md: exact eps 10.4)
        assert exact > eps


def test_classical_at_eps_10__warns_with_the_exact_eps():
    with pytest.warns(PrivacyWarning, match=r"exact eps = 10\.39\d* at delta = 1e-05, not 10"):
        dp_loading(X, privacy=privacy_control(eps=10, delta=1e-5), rng=1, calibration="classical")


def test_analytic_or_a_passing_check__no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        dp_loading(X, privacy=privacy_control(eps=10, delta=1e-5), rng=1, calibration="analytic")
        dp_loading(X, privacy=privacy_control(eps=0.9, delta=1e-5), rng=1,
                   calibration="classical")
        dp_loading(X, privacy=privacy_control(eps=3, delta=1e-5), rng=1,  # exact eps 2.53
                   calibration="classical")


def test_delta_at_least_one_over_n__warns():
    with pytest.warns(PrivacyWarning, match=r"delta = 0\.5 >= 1/n = 0\.00333"):
        dp_loading(X, privacy=privacy_control(eps=0.5, delta=0.5), rng=1, calibration="analytic")


def test_every_estimator_warns_before_reading_data(tmp_path):
    missing = tmp_path / "nothing.zarr"  # warnings come from the plan; data errors come after
    pc = privacy_control(eps=40, delta=1e-5)  # loading gets >= 13: the classical check fails
    with pytest.warns(PrivacyWarning, match="calibration='classical'"):
        dp_scree(X, privacy=pc, control=clipped_control(C_clip=30), rng=1, preset="seed")
    with pytest.warns(PrivacyWarning, match="calibration='classical'"):
        dp_score(X, privacy=pc, rng=1, preset="seed")
    with pytest.warns(PrivacyWarning, match="calibration='classical'"):
        dp_pca(X, privacy=pc, scree_control=clipped_control(C_clip=30), rng=1, preset="seed")
    with pytest.warns(PrivacyWarning, match=r"delta = 0\.01 >= 1/n"):
        dp_covariance(X, preset="seed", eps=1.0, delta=0.01, bounds=10.0, rng=1)
    assert not missing.exists()


def test_strict__refuses_instead_of_warning():
    plan = plan_loading(300, 4, resolve_budget(privacy_control(eps=10, delta=1e-5),
                                              owner="dp_loading"), calibration="classical")
    assert len(guarantee_warnings(plan, 300)) == 1
    with pytest.raises(BudgetError, match=r"Refused \(strict\): calibration='classical'"):
        warn_guarantees(plan, 300, strict=True)


def test_cli__one_line_warning_and_strict_refusal(tmp_path):
    import yaml
    from click.testing import CliRunner

    from dppca_dask.cli import main
    from dppca_dask.io.datasets import write_demo_dataset

    store = write_demo_dataset(str(tmp_path / "gau.zarr"), n_per_group=40)
    cfg = {"input": {"path": store, "array": "X"}, "task": "loading",
           "privacy": {"eps": 10.0, "delta": 1e-5}, "loading": {"calibration": "classical"},
           "output": {"directory": str(tmp_path / "out"), "formats": ["zarr"]}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    planned = CliRunner().invoke(main, ["plan", str(path)])
    assert planned.exit_code == 0, planned.output
    lines = [line for line in planned.stderr.splitlines() if line.startswith("Warning:")]
    assert len(lines) == 1 and "exact eps = 10.39" in lines[0]
    refused = CliRunner().invoke(main, ["run", str(path), "--strict", "-q"])
    assert refused.exit_code == 1 and "Refused (budget_ledger.strict)" in refused.output
    assert not (tmp_path / "out").exists()
    cfg["budget_ledger"] = {"strict": True}
    path.write_text(yaml.safe_dump(cfg))
    assert CliRunner().invoke(main, ["plan", str(path)]).exit_code == 1
