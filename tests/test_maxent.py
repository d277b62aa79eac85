"""The maximum-entropy reconstruction: closed forms, a generic solver, robustness, GGM zeros."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize

from dppca_dask.covariance.maxent import components, maxent
from dppca_dask.errors import ParameterError


def _random_pd(rng: np.random.Generator, d: int) -> np.ndarray:
    a = rng.normal(size=(d, d + 3))
    return a @ a.T / (d + 3) + 0.2 * np.eye(d)


def _pattern(d: int, edges: list[tuple[int, int]]) -> np.ndarray:
    lam = np.eye(d)
    for j, k in edges:
        lam[j, k] = lam[k, j] = 1.0
    return lam


def _embed(block: np.ndarray, idx: list[int], d: int) -> np.ndarray:
    out = np.zeros((d, d))
    out[np.ix_(idx, idx)] = block
    return out


def test_maxent__fully_observed_returns_the_matrix(global_seed):
    y = _random_pd(np.random.default_rng(global_seed), 6)
    sol = maxent(y, np.ones((6, 6)), gamma=1e-10)
    np.testing.assert_allclose(sol.covariance, y, atol=1e-8)
    np.testing.assert_allclose(sol.precision, np.linalg.inv(y), rtol=1e-6)
    assert sol.converged


def test_maxent__chordal_closed_form(global_seed):
    # Cliques {0,1,2} and {2,3,4} with separator {2}: K = [Y_C1^-1] + [Y_C2^-1] - [Y_S^-1]
    # (Dempster 1972; Lauritzen 1996, Prop. 5.9).
    d = 5
    y = _random_pd(np.random.default_rng(global_seed), d)
    c1, c2, sep = [0, 1, 2], [2, 3, 4], [2]
    lam = np.zeros((d, d))
    lam[np.ix_(c1, c1)] = 1.0
    lam[np.ix_(c2, c2)] = 1.0
    k = (_embed(np.linalg.inv(y[np.ix_(c1, c1)]), c1, d)
         + _embed(np.linalg.inv(y[np.ix_(c2, c2)]), c2, d)
         - _embed(np.linalg.inv(y[np.ix_(sep, sep)]), sep, d))
    sol = maxent(y, lam, gamma=1e-10)
    np.testing.assert_allclose(sol.covariance, np.linalg.inv(k), atol=1e-7)


def test_maxent__chain_completion():
    y = np.array([[2.0, 0.8, 0.0, 0.0], [0.8, 1.5, -0.6, 0.0],
                  [0.0, -0.6, 1.0, 0.3], [0.0, 0.0, 0.3, 0.5]])
    lam = _pattern(4, [(0, 1), (1, 2), (2, 3)])
    w = maxent(y, lam, gamma=1e-10).covariance
    assert w[0, 2] == pytest.approx(0.8 * -0.6 / 1.5, abs=1e-8)
    assert w[1, 3] == pytest.approx(-0.6 * 0.3 / 1.0, abs=1e-8)
    assert w[0, 3] == pytest.approx(0.8 * -0.6 * 0.3 / (1.5 * 1.0), abs=1e-8)


def _generic_completion(y: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """max log det over the unmeasured entries, measured ones fixed: BFGS from the true matrix."""
    free = [(j, k) for j in range(len(y)) for k in range(j + 1, len(y)) if lam[j, k] == 0]

    def build(v: np.ndarray) -> np.ndarray:
        w = y.copy()
        for (j, k), x in zip(free, v, strict=True):
            w[j, k] = w[k, j] = x
        return w

    def objective(v: np.ndarray) -> tuple[float, np.ndarray]:
        w = build(v)
        sign, logdet = np.linalg.slogdet(w)
        if sign <= 0:
            return 1e10, np.zeros_like(v)
        inv = np.linalg.inv(w)
        return -logdet, np.array([-2.0 * inv[j, k] for j, k in free])

    start = np.array([y[j, k] for j, k in free])
    res = optimize.minimize(objective, start, jac=True, method="BFGS",
                            options={"gtol": 1e-12, "maxiter": 10_000})
    return build(res.x)


@pytest.mark.parametrize("seed", range(4))
def test_maxent__matches_a_generic_solver_on_consistent_input(seed):
    rng = np.random.default_rng(seed)
    d = 5
    truth = _random_pd(rng, d)  # a PD completion exists: the measured entries are consistent
    pairs = [(j, k) for j in range(d) for k in range(j + 1, d)]
    chosen = [pairs[i] for i in rng.choice(len(pairs), size=5, replace=False)]
    lam = _pattern(d, chosen)
    weights = lam * rng.uniform(0.5, 2.0, size=(d, d))  # irrelevant when the input is consistent
    sol = maxent(np.where(lam > 0, truth, 0.0), np.maximum(weights, weights.T), gamma=1e-10)
    np.testing.assert_allclose(sol.covariance, _generic_completion(truth, lam), atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_maxent__matches_a_generic_solver_on_inconsistent_input(seed):
    # Barrier problem min Σ λ(W−y)² − γ log det W over all of W, by BFGS on a Cholesky factor.
    rng = np.random.default_rng(seed)
    d, gamma = 4, 0.05
    lam = _pattern(d, [(0, 1), (1, 2), (2, 3), (0, 3)]) * 2.0
    y = rng.normal(size=(d, d))
    y = (y + y.T) / 2.0
    np.fill_diagonal(y, rng.uniform(-0.2, 1.0, size=d))  # some negative variances
    tri = np.tril_indices(d)
    measured = np.triu(lam > 0)

    def objective(v: np.ndarray) -> float:
        factor = np.zeros((d, d))
        factor[tri] = v
        w = factor @ factor.T
        fit = np.sum((lam * (w - y) ** 2)[measured])
        return fit - gamma * 2.0 * np.sum(np.log(np.abs(np.diag(factor))))

    start = np.eye(d)[tri]
    res = optimize.minimize(objective, start, method="BFGS", options={"gtol": 1e-10})
    factor = np.zeros((d, d))
    factor[tri] = res.x
    sol = maxent(y, lam, gamma=gamma)
    np.testing.assert_allclose(sol.covariance, factor @ factor.T, atol=2e-5)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(1, 7), density=st.floats(0.0, 1.0),
       gamma=st.sampled_from([1e-8, 1e-6, 1e-3, 1.0]))
def test_maxent__always_finite_symmetric_positive_definite(seed, d, density, gamma):
    rng = np.random.default_rng(seed)
    y = rng.normal(scale=rng.choice([1e-3, 1.0, 1e3]), size=(d, d))
    y = (y + y.T) / 2.0  # arbitrary: negative variances, |y_jk| > sqrt(y_jj y_kk), ...
    lam = (rng.uniform(size=(d, d)) < density) * rng.uniform(0.1, 1e4, size=(d, d))
    lam = np.maximum(lam, lam.T)
    np.fill_diagonal(lam, rng.uniform(0.1, 1e4, size=d))
    w = maxent(y, lam, gamma=gamma).covariance
    assert np.isfinite(w).all()
    np.testing.assert_array_equal(w, w.T)
    assert np.linalg.eigvalsh(w).min() > 0
    np.linalg.cholesky(w)


@pytest.mark.parametrize("seed", range(5))
def test_maxent__precision_is_zero_at_unmeasured_entries(seed):
    rng = np.random.default_rng(seed)
    d = 8
    truth = _random_pd(rng, d)
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3), (5, 6), (6, 7)]  # two components + isolated 4
    lam = _pattern(d, edges) * 50.0
    y = truth + rng.normal(scale=0.3, size=(d, d))  # noisy, likely inconsistent
    y = (y + y.T) / 2.0
    sol = maxent(y, lam, gamma=1e-6)
    assert components(lam) == ((0, 1, 2, 3), (4,), (5, 6, 7))
    unmeasured = lam == 0
    # structurally zero in the solver's precision, and numerically in the inverse of the answer
    np.testing.assert_array_equal(sol.precision[unmeasured], 0.0)
    inverse = np.linalg.inv(sol.covariance)
    scale = np.sqrt(np.outer(np.diag(inverse), np.diag(inverse)))
    assert np.max(np.abs(inverse[unmeasured]) / scale[unmeasured]) < 1e-6
    # block diagonal across components
    assert np.all(sol.covariance[np.ix_([0, 1, 2, 3], [4, 5, 6, 7])] == 0.0)


def test_maxent__isolated_variable_keeps_its_diagonal():
    y = np.diag([2.0, 0.5, -1.0])
    lam = np.diag([4.0, 4.0, 4.0])
    w = maxent(y, lam, gamma=1e-8).covariance
    assert w[0, 0] == pytest.approx(2.0, rel=1e-8)
    assert w[1, 1] == pytest.approx(0.5, rel=1e-7)
    assert 0 < w[2, 2] < 1e-3  # a negative measured variance stays positive
    assert np.count_nonzero(w - np.diag(np.diag(w))) == 0


def test_maxent__incremental_update_equals_full_solve():
    rng = np.random.default_rng(7)
    d = 6
    y = _random_pd(rng, d)
    lam = _pattern(d, [(0, 1), (2, 3), (4, 5)]) * 10.0
    before = maxent(y, lam)
    lam[1, 2] = lam[2, 1] = 10.0  # merges two components
    y2 = y.copy()
    y2[:4, :4] += 0.05 * (lam[:4, :4] > 0)  # only the merged component's data change
    updated = maxent(y2, lam, only=(1, 2), previous=before)
    np.testing.assert_allclose(updated.covariance, maxent(y2, lam).covariance, atol=1e-8)


def test_maxent__pgd_baseline():
    y = _random_pd(np.random.default_rng(2), 4)
    sol = maxent(y, np.ones((4, 4)), method="pgd")
    np.testing.assert_allclose(sol.covariance, y, atol=1e-6)
    lam = _pattern(4, [(0, 1), (1, 2)])
    w = maxent(y, lam, method="pgd").covariance
    assert np.linalg.eigvalsh(w).min() > 0
    assert w[0, 3] == 0.0  # PGD leaves unmeasured entries at the start: no completion


@pytest.mark.parametrize(
    ("y", "lam", "match"),
    [
        (np.eye(2), np.eye(3), "square matrices of one shape"),
        (np.eye(2), np.array([[1.0, -1.0], [-1.0, 1.0]]), "non-negative"),
        (np.eye(2), np.array([[1.0, 1.0], [0.0, 1.0]]), "symmetric"),
        (np.eye(2), np.array([[1.0, 0.0], [0.0, 0.0]]), "positive on the diagonal"),
        (np.array([[np.nan, 0.0], [0.0, 1.0]]), np.eye(2), "finite at measured entries"),
    ],
)
def test_maxent__bad_input(y, lam, match):
    with pytest.raises(ParameterError, match=match):
        maxent(y, lam)


def test_maxent__bad_parameters():
    with pytest.raises(ParameterError, match="'gamma' parameter of maxent"):
        maxent(np.eye(2), np.eye(2), gamma=0.0)
    with pytest.raises(ParameterError, match="'method' parameter of maxent"):
        maxent(np.eye(2), np.eye(2), method="cvx")
    with pytest.raises(ParameterError, match="'only' parameter of maxent needs 'previous'"):
        maxent(np.eye(2), np.eye(2), only=(0,))
