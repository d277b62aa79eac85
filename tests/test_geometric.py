"""The geometric score histogram (dp_score method "geometric"): exact two-sided geometric noise
on the integer cell counts, pure ε with scale b = 2/ε (docs/design/histogram_mechanisms.md).

Statistical checks use tolerances derived from the distribution (α = 1e-6)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dppca_dask import clipped_control, dp_pca, dp_score, privacy_control
from dppca_dask.pca.histograms import parse_methods, release_histograms
from dppca_dask.pca.pca import plan_pca
from dppca_dask.pca.score import plan_score
from dppca_dask.pipeline.config import PCAConfig, ScoreConfig
from dppca_dask.privacy.audit import AUDITS, run_audit
from dppca_dask.privacy.budget import PrivacyBudget, resolve_budget
from dppca_dask.privacy.composition import compose, record_rho
from dppca_dask.privacy.mechanisms import geometric_histogram, geometric_histogram_scale
from dppca_dask.privacy.mechanisms.histograms import _project_to_total
from dppca_dask.privacy.plan import records_match

ALPHA = 1e-6


def _pmf(z: np.ndarray, b: float) -> np.ndarray:
    """P(Z = z) of the two-sided geometric distribution with q = e^{-1/b}."""
    q = math.exp(-1.0 / b)
    return (1 - q) / (1 + q) * q ** np.abs(z)


class _IntegersOnly:
    """A generator proxy that allows only ``integers`` (the exact samplers' one source)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self.calls = 0

    def integers(self, *args, **kwargs):
        self.calls += 1
        return self._rng.integers(*args, **kwargs)

    def __getattr__(self, name):
        raise AssertionError(f"geometric_histogram used rng.{name}")


def test_geometric_histogram_scale__exact_upward_rounding():
    assert geometric_histogram_scale(0.5) == Fraction(4)
    for eps in (0.013, 0.3, 0.65, 1.0, 3.7, 10.0):
        b = geometric_histogram_scale(eps)
        assert isinstance(b, Fraction)
        assert b >= Fraction(2) / Fraction(eps)  # never rounded down: pure eps exactly
        assert float(b) == pytest.approx(2 / eps, rel=2 ** -23)
    with pytest.raises(ValueError, match="positive finite epsilon"):
        geometric_histogram_scale(0.0)


def test_geometric_histogram__record_is_public_and_pure_eps():
    a = geometric_histogram(np.array([[3, 0], [7, 1]]), eps=0.65, rng=np.random.default_rng(0),
                            component="score", label="geometric histogram").record
    b = geometric_histogram(np.array([[0, 0], [0, 11]]), eps=0.65,
                            rng=np.random.default_rng(1), component="score",
                            label="geometric histogram").record
    assert a == b  # no field depends on the counts or the noise
    assert (a.mechanism, a.eps, a.delta, a.sensitivity, a.sensitivity_norm, a.grid, a.draws) == (
        "geometric_histogram", 0.65, 0.0, 2.0, "l1", 1.0, 4)
    assert a.scale == float(geometric_histogram_scale(0.65))
    assert a.rho is None and record_rho(a) == pytest.approx(0.65 ** 2 / 2)  # pure eps
    assert compose([a]).basic_eps == 0.65


def test_geometric_histogram__only_integer_draws_and_integer_output():
    rng = _IntegersOnly(np.random.default_rng(2))
    counts = np.array([0, 0, 1, 5, 40, 0])
    out = geometric_histogram(counts, eps=0.5, rng=rng, component="score").value
    assert rng.calls > 0
    assert out.shape == counts.shape and (out >= 0).all() and (out == np.rint(out)).all()


def test_geometric_histogram__noise_pmf_chi2(global_seed):
    # Counts far from 0, so the clip never binds: Z = output - counts is the raw noise.
    eps, cells = 0.4, 60000
    b = float(geometric_histogram_scale(eps))
    counts = np.full(cells, 1000)
    z = geometric_histogram(counts, eps=eps, rng=np.random.default_rng(global_seed),
                            component="score").value.astype(np.int64) - 1000
    edges = np.arange(-25, 26)  # cells {z <= -25}, -24, ..., 24, {z >= 25}
    observed = np.array([np.sum(z <= -25), *[np.sum(z == k) for k in edges[1:-1]],
                         np.sum(z >= 25)])
    inner = _pmf(edges[1:-1], b)
    tail = (1.0 - inner.sum()) / 2.0
    expected = cells * np.array([tail, *inner, tail])
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert chi2 < stats.chi2.ppf(1 - ALPHA, len(expected) - 1)
    # Variance 2q/(1-q)^2: the sample variance's sd is sqrt((mu4 - var^2)/n); a z-bound at alpha.
    q = math.exp(-1.0 / b)
    var = 2 * q / (1 - q) ** 2
    mu4 = float(np.sum(_pmf(np.arange(-2000, 2001), b) * np.arange(-2000, 2001) ** 4.0))
    bound = stats.norm.ppf(1 - ALPHA / 2) * math.sqrt((mu4 - var ** 2) / cells)
    assert abs(float(np.mean(z.astype(float) ** 2)) - var) < bound


def test_geometric_histogram__large_eps_is_exact():
    counts = np.array([[4, 0, 9], [1, 2, 3]])
    out = geometric_histogram(counts, eps=1e6, rng=np.random.default_rng(3), component="score")
    np.testing.assert_array_equal(out.value, counts)


def _projection_by_bisection(v: np.ndarray, total: int) -> np.ndarray:
    """Plain reference: the τ with Σ max(v − τ, 0) = total, found by bisection."""
    lo, hi = float(v.min()) - total - 1.0, float(v.max())
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.maximum(v - mid, 0).sum() > total else (lo, mid)
    return np.maximum(v - 0.5 * (lo + hi), 0.0)


@pytest.mark.parametrize("case", range(40))
def test_project_to_total__is_the_euclidean_projection(case):
    rng = np.random.default_rng([11, case])
    v = rng.integers(-30, 60, size=int(rng.integers(1, 200))).astype(np.float64)
    total = int(rng.integers(1, 2000))
    x = _project_to_total(v, total)
    assert (x >= 0).all() and x.sum() == pytest.approx(total, rel=1e-12)
    np.testing.assert_allclose(x, _projection_by_bisection(v, total), atol=1e-8)
    # KKT: on the support v − x is one constant τ, and off it v ≤ τ
    tau = (v - x)[x > 0]
    assert np.ptp(tau) < 1e-9 and (v[x == 0] <= tau[0] + 1e-9).all()


def test_geometric_histogram__total_projects_the_noisy_counts():
    counts = np.array([[40, 0, 0], [3, 0, 57]])
    clip = geometric_histogram(counts, eps=0.2, rng=np.random.default_rng(9), component="score")
    proj = geometric_histogram(counts, eps=0.2, rng=np.random.default_rng(9), component="score",
                               total=100)
    assert proj.value.shape == counts.shape and proj.value.sum() == pytest.approx(100)
    assert (proj.value >= 0).all() and proj.record.draws == clip.record.draws == 6
    assert "public total" in proj.record.note and "clipped" in clip.record.note
    # the same noise: the projection is clip-then-shift of the same integers
    raw_order = np.argsort(-clip.value.ravel(), kind="stable")
    assert (np.diff(proj.value.ravel()[raw_order]) <= 1e-12).all()
    with pytest.raises(ValueError, match="total must be a non-negative int"):
        geometric_histogram(counts, eps=1.0, rng=np.random.default_rng(0), component="s",
                            total=-1)


def test_release_histograms__geometric_after_add_and_sparse():
    counts = np.array([[[30, 5], [0, 65]]])
    budget = PrivacyBudget(2.0, 1e-5)
    rel = release_histograms(counts, np.array([100]), methods=["geometric", "add", "sparse"],
                             budget=budget, calibration="analytic",
                             rng=np.random.default_rng(4))
    assert rel.methods == ("add", "sparse", "geometric")
    assert [r.mechanism for r in rel.records] == [
        "gaussian_histogram", "stability_histogram", "geometric_histogram"]
    assert rel.records[2].eps == 2.0 and rel.records[2].delta == 0.0
    assert rel.probability[2].sum() == pytest.approx(1.0)
    assert parse_methods(("geometric", "add"), "dp_score") == ("add", "geometric")
    with pytest.raises(ValueError, match="'geometric'"):
        parse_methods("laplace", "dp_score")


def test_dp_score__geometric_records_match_plan():
    X = np.random.default_rng(5).normal(size=(400, 3)) * [3.0, 1.0, 0.5]
    privacy = privacy_control(eps=4, delta=1e-4)
    groups = np.array(["a", "b"])[np.arange(400) % 2]
    for method, group in ((("geometric",), None), (("add", "geometric"), groups)):
        fit = dp_score(X, privacy=privacy, calibration="analytic", bins=(6, 5), rng=1,
                       method=method, group=group)
        plan = plan_score(400, 3, resolve_budget(privacy, owner="dp_score"), methods=method,
                          calibration="analytic")
        assert records_match(plan, fit.ledger) == []
        geo = [r for r in fit.ledger if r.mechanism == "geometric_histogram"]
        assert len(geo) == 1 and geo[0].delta == 0.0
        assert geo[0].draws == 30 * (1 if group is None else 2)
        prob = fit.probability.values[list(fit.methods).index("geometric")]
        assert prob.sum() == pytest.approx(1.0 if group is None else 2.0)
        released = fit.dataset["released_total"].values[list(fit.methods).index("geometric")]
        np.testing.assert_allclose(released, 400 if group is None else [200, 200])
        # the summary does not claim a delta the geometric histogram never spends
        said = ("delta unused (geometric is pure eps)" if group is None
                else "delta = 5e-05 each method (geometric: pure eps, no delta)")
        assert said in repr(fit.summary())


def test_dp_pca__geometric_records_match_plan():
    X = np.random.default_rng(6).normal(size=(300, 4)) * [3.0, 2.0, 1.0, 0.5]
    privacy = privacy_control(eps=6, delta=1e-4)
    controls = {"clipped": clipped_control(C_clip=30)}
    fit = dp_pca(X, privacy=privacy, score_method="geometric", calibration="analytic",
                 bins=5, rng=2, scree_control=controls)
    plan = plan_pca(300, 4, resolve_budget(privacy, owner="dp_pca"), controls=controls,
                    score_methods=("geometric",), calibration="analytic")
    assert records_match(plan, fit.ledger) == []
    assert any(r.mechanism == "geometric_histogram" for r in fit.ledger)
    assert "each method ; delta unused (geometric is pure eps))" in repr(fit.summary())


def test_config__geometric_is_a_score_method():
    assert ScoreConfig(method=["geometric"]).method == ["geometric"]
    assert PCAConfig(score_method=["add", "geometric"]).score_method == ["add", "geometric"]


def test_run_audit__geometric_within_claim_and_under_noised_copy_caught():
    claim = AUDITS["geometric_histogram"].claimed_eps
    assert run_audit("geometric_histogram", rng=np.random.default_rng(21)).epsilon_lower <= claim
    weak = run_audit("geometric_histogram", noise_factor=0.7, rng=np.random.default_rng(22))
    assert weak.epsilon_lower > claim
