"""Exactness of the integer samplers (dppca_dask.privacy.exact_noise): pmf comparisons at alpha ~ 1e-6."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dppca_dask.privacy import exp_bernoulli as eb
from dppca_dask.privacy.exact_noise import (
    bernoulli,
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    round_up_rational,
    uniform_below,
)
from dppca_dask.testing import RRNG

ALPHA = 1e-6


def _chi2_pvalue(samples: np.ndarray, pmf: dict[int, float]) -> float:
    """Chi-square goodness of fit; cells with expected count < 5 pooled into one tail cell."""
    n = samples.size
    values, counts = np.unique(samples.astype(np.int64), return_counts=True)
    observed = dict(zip(values.tolist(), counts.tolist(), strict=True))
    obs, exp, rest_obs, rest_exp = [], [], 0, 0.0
    for k, p in pmf.items():
        if n * p >= 5:
            obs.append(observed.get(k, 0))
            exp.append(n * p)
        else:
            rest_obs += observed.get(k, 0)
            rest_exp += n * p
    rest_obs += sum(c for k, c in observed.items() if k not in pmf)
    rest_exp += n * (1.0 - sum(pmf.values()))
    obs.append(rest_obs)
    exp.append(max(rest_exp, 1e-12))
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp, strict=True))
    return float(stats.chi2.sf(stat, len(obs) - 1))


def _dgauss_pmf(s2: float) -> dict[int, float]:
    ks = np.arange(-int(40 * math.sqrt(s2)) - 5, int(40 * math.sqrt(s2)) + 6)
    w = np.exp(-ks.astype(float) ** 2 / (2 * s2))
    return dict(zip(ks.tolist(), (w / w.sum()).tolist(), strict=True))


def _dlap_pmf(b: float) -> dict[int, float]:
    ks = np.arange(-int(60 * b) - 5, int(60 * b) + 6)
    w = np.exp(-np.abs(ks) / b)
    return dict(zip(ks.tolist(), (w / w.sum()).tolist(), strict=True))


def test_uniform_below__small_and_huge_m_uniform():
    rng = np.random.default_rng(1)
    x = uniform_below(rng, 7, 70000)
    assert _chi2_pvalue(x, dict.fromkeys(range(7), 1 / 7)) > ALPHA
    m = 3 * 2**70 + 1  # needs two words and rejection
    big = uniform_below(rng, m, 20000)
    assert all(0 <= int(v) < m for v in big)
    thirds = np.array([int(v) * 3 // m for v in big])
    assert _chi2_pvalue(thirds, {0: 1 / 3, 1: 1 / 3, 2: 1 / 3}) > ALPHA


def test_bernoulli__exact_rational_probability_and_big_denominators():
    rng = np.random.default_rng(2)
    n = 200000
    for p, q in [(1, 3), (2**80, 3 * 2**80 + 7)]:
        hits = bernoulli(rng, np.full(n, p, dtype=object if q > 2**62 else np.int64),
                         np.full(n, q, dtype=object if q > 2**62 else np.int64))
        assert stats.binomtest(int(hits.sum()), n, p / q).pvalue > ALPHA
    assert bernoulli(rng, np.array([0]), np.array([1])).tolist() == [False]


@pytest.mark.parametrize(("p", "q"), [(0, 1), (1, 2), (1, 1), (7, 3), (5, 1)])
def test_bernoulli_exp__probability(p, q):
    n = 100000
    hits = bernoulli_exp(np.random.default_rng(3 + p), np.full(n, p), q)
    assert stats.binomtest(int(hits.sum()), n, math.exp(-p / q)).pvalue > ALPHA


def test_bernoulli_exp__big_rationals():
    n = 50000
    p, q = 3 * 2**90 + 1, 2**91  # x ≈ 1.5 with 90-bit numbers
    hits = bernoulli_exp(np.random.default_rng(9), np.full(n, p, dtype=object),
                         np.full(n, q, dtype=object))
    assert stats.binomtest(int(hits.sum()), n, math.exp(-p / q)).pvalue > ALPHA


@pytest.mark.parametrize("s2", [Fraction(1, 4), Fraction(2), Fraction(31, 1) + Fraction(1, 7),
                                Fraction(400)])
def test_discrete_gaussian__pmf_chi_square(s2):
    y = discrete_gaussian(np.random.default_rng(11), s2, 60000)
    assert _chi2_pvalue(y, _dgauss_pmf(float(s2))) > ALPHA


def test_discrete_gaussian__symmetric_and_variance_large_sigma():
    s2 = Fraction(2**80 + 3)  # s ≈ 2^40: Python-int arithmetic in the acceptance step
    n = 40000
    y = discrete_gaussian(np.random.default_rng(12), s2, n).astype(np.float64)
    z = y / math.sqrt(float(s2))
    # mean ~ N(0, 1/n); variance of z² ≈ 2 (discrete ≈ continuous at this scale)
    assert abs(z.mean()) < 5.3 * math.sqrt(1 / n)
    assert abs((z**2).mean() - 1.0) < 5.3 * math.sqrt(2 / n)
    assert stats.binomtest(int((y > 0).sum()), int((y != 0).sum()), 0.5).pvalue > ALPHA


@pytest.mark.parametrize("b", [Fraction(1, 2), Fraction(2), Fraction(7, 3)])
def test_discrete_laplace__pmf_chi_square(b):
    y = discrete_laplace(np.random.default_rng(13), b, 60000)
    assert _chi2_pvalue(y, _dlap_pmf(float(b))) > ALPHA


def test_samplers__run_on_the_r_emulator():
    y = discrete_gaussian(RRNG(5), Fraction(9), 3000)
    assert _chi2_pvalue(y, _dgauss_pmf(9.0)) > ALPHA


def test_round_up_rational__never_rounds_down():
    for x in (Fraction(1, 3), Fraction(10**30, 7), Fraction(3, 10**20)):
        r = round_up_rational(x)
        assert r >= x and (r - x) / x < 2.0**-23


@pytest.mark.slow
def test_single_draws__same_distribution():
    # one value per call: one round of 9-10 candidates, first accepted kept
    rng = np.random.default_rng(17)
    y = np.array([int(discrete_gaussian(rng, Fraction(5, 2), 1)[0]) for _ in range(8000)])
    assert _chi2_pvalue(y, _dgauss_pmf(2.5)) > ALPHA
    z = np.array([int(discrete_laplace(rng, Fraction(3, 2), 1)[0]) for _ in range(8000)])
    assert _chi2_pvalue(z, _dlap_pmf(1.5)) > ALPHA


# --- the fixed-cost draws (dppca_dask.privacy.exp_bernoulli) and their slow exact paths --------


def test_geometric_exp1__pmf_chi_square():
    v = eb.geometric_exp1(np.random.default_rng(21), 100000)
    pmf = {k: (1 - math.exp(-1)) * math.exp(-k) for k in range(60)}
    assert _chi2_pvalue(v, pmf) > ALPHA


def test_geometric_exp1__table_is_floor_of_exp():
    for k in (1, 7, eb.GEOM_MAX):
        t = (int(eb._T_HI[k - 1, 0]) << 64) | int(eb._T_LO[k - 1, 0])
        assert t <= math.exp(-k) * 2.0**128 * (1 + 1e-12) and t >= math.exp(-k) * 2.0**128 * (
            1 - 1e-12)
        lo, hi = eb.exp_neg_bounds(k, 400)
        assert t == lo >> 272 == hi >> 272


@pytest.mark.slow
def test_slow_paths__exact_when_forced(monkeypatch):
    # two rounds and a two-entry table: the slow paths run for a large share of the draws
    monkeypatch.setattr(eb, "ROUNDS", 2)
    monkeypatch.setattr(eb, "GEOM_MAX", 2)
    monkeypatch.setattr(eb, "_T_HI", eb._T_HI[:2])
    monkeypatch.setattr(eb, "_T_LO", eb._T_LO[:2])
    rng = np.random.default_rng(22)
    n = 60000
    v = eb.geometric_exp1(rng, n)
    assert (v > 2).mean() > 0.03
    assert _chi2_pvalue(v, {k: (1 - math.exp(-1)) * math.exp(-k) for k in range(40)}) > ALPHA
    for p, q in [(1, 1), (9, 10), (2**70 - 1, 2**70)]:
        dt = object if q > 2**62 else np.int64
        hits = eb.bernoulli_exp_unit(rng, np.full(n, p, dtype=dt), np.full(n, q, dtype=dt))
        assert stats.binomtest(int(hits.sum()), n, math.exp(-p / q)).pvalue > ALPHA
    y = discrete_gaussian(rng, Fraction(7, 3), 30000)
    assert _chi2_pvalue(y, _dgauss_pmf(7 / 3)) > ALPHA


def test_lazy_comparisons__ties_resolved_exactly():
    rng = np.random.default_rng(23)
    n = 20000
    p, q = 5, 7
    w = (p << 128) // q  # U's 128 bits equal p/q's: P(U < p/q | w) = frac(p·2^128/q) = 2/7
    frac = ((p << 128) % q) / q
    hits = sum(eb._Lazy(rng, w, 128).below_rational(p, q) for _ in range(n))
    assert stats.binomtest(hits, n, frac).pvalue > ALPHA
    k = 3
    lo, _ = eb.exp_neg_bounds(k, 128 + 64)
    t = lo >> 64  # U's 128 bits equal ⌊e^-3·2^128⌋
    frac_e = (lo & ((1 << 64) - 1)) / 2.0**64
    hits = sum(eb._Lazy(rng, t, 128).below_exp(k) for _ in range(n))
    assert stats.binomtest(hits, n, frac_e).pvalue > ALPHA
    hits = sum(eb._Lazy(rng, 12345, 128).below(eb._Lazy(rng, 12345, 128)) for _ in range(n))
    assert stats.binomtest(hits, n, 0.5).pvalue > ALPHA


def test_first_compare__int64_limbs_agree_with_python_ints():
    rng = np.random.default_rng(24)
    m = 20000
    q = rng.integers(1, 2**62, size=m, dtype=np.int64)
    q[:5] = [1, 2, 2**62 - 1, 3, 2**61]
    p = (rng.random(m) * q).astype(np.int64)
    p[:5] = [1, 1, 2**62 - 1, 0, 2**60]
    u = rng.integers(0, 2**64, size=(2, m), dtype=np.uint64)
    u[:, 0] = 2**64 - 1
    u[0, 1], u[1, 1] = 2**63, 0  # exactly 1/2 = p/q: U ≥ 1/2, decided False
    true, tie = eb._first_compare(u[0], u[1], p, q)
    otrue, otie = eb._first_compare(u[0], u[1], p.astype(object), q.astype(object))
    assert (true == otrue).all() and (tie == otie).all()
    assert not true[1] and not tie[1]
