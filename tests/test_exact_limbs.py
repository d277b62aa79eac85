"""The compiled candidates of the exact samplers (dppca_dask.privacy.exact_limbs).

Every fast decision of the kernel is checked against the exact one computed with Python ints,
on random and on adversarial words (uniforms placed within a few units of the threshold); the
slow exact path is checked alone; the distributions are checked at scales the kernel treats
differently (small σ, the shared geometric table, |Y| beyond int64).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import numba
import numpy as np
import pytest
from scipy import stats

from dppca_dask.privacy import exact_limbs as el
from dppca_dask.privacy import exact_noise
from dppca_dask.privacy import exp_bernoulli as eb
from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.csprng import CryptoRng
from dppca_dask.privacy.draws import DrawTracker
from dppca_dask.privacy.exact_noise import discrete_gaussian, discrete_laplace
from dppca_dask.privacy.mechanisms import gaussian_release

ALPHA = 1e-6
M64 = (1 << 64) - 1

GAUSS = [Fraction(1, 3), Fraction(1), Fraction(31) + Fraction(1, 7), Fraction(5000),
         Fraction(2**82 + 3), Fraction(2**120), Fraction(2**124)]
LAPLACE = [Fraction(1, 10), Fraction(3, 2), Fraction(77, 3), Fraction(2051, 2),
           Fraction(2**40), Fraction(2**61 + 1)]


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    assert el.kernels_available()


def _dgauss_pvalue(y: np.ndarray, s2: float) -> float:
    """Chi-square of integer draws against N_Z(0, s2): one cell per value with expected count
    ≥ 5, the tails in the two end cells."""
    ks = np.arange(-int(12 * math.sqrt(s2)) - 3, int(12 * math.sqrt(s2)) + 4)
    w = np.exp(-ks.astype(float) ** 2 / (2 * s2))
    w /= w.sum()
    inner = ks[w * y.size >= 5]
    lo, hi = int(inner.min()), int(inner.max())
    probs = np.array([w[ks <= lo].sum(), *w[(ks > lo) & (ks < hi)], w[ks >= hi].sum()])
    observed = np.bincount(np.clip(np.asarray(y, dtype=np.int64), lo, hi) - lo,
                           minlength=hi - lo + 1)
    return float(stats.chisquare(observed, probs / probs.sum() * y.size).pvalue)


def _exp_bounds_reference(x: Fraction, bits: int) -> tuple[int, int]:
    """e^{-x}·2^bits bracketed from Fractions alone (the table's e^{-k} bounds of exp_bernoulli
    and an alternating series), independent of exact_limbs."""
    k = x.numerator // x.denominator
    f = x - k
    s, term, n, sums = Fraction(0), Fraction(1), 0, []
    while term > Fraction(1, 1 << (bits + 8)) or n < 3:
        s += term if n % 2 == 0 else -term
        sums.append(s)
        n += 1
        term = term * f / n
    lo_f, hi_f = min(sums[-2:]), max(sums[-2:])
    lo_k, hi_k = eb.exp_neg_bounds(k, bits + 8) if k else (1 << (bits + 8), 1 << (bits + 8))
    scale = Fraction(1 << bits, 1 << (2 * (bits + 8)))
    return math.floor(lo_f * lo_k * (1 << (bits + 8)) * scale), math.ceil(
        hi_f * hi_k * (1 << (bits + 8)) * scale)


@pytest.mark.parametrize("x", [Fraction(0), Fraction(1, 7), Fraction(1), Fraction(5, 3),
                               Fraction(2**70 + 1, 2**65), Fraction(63, 1),
                               Fraction(3 * 2**90 + 1, 2**91)])
def test_exp_neg_interval__brackets_and_is_tight(x):
    for bits in (64, 128, 200):
        lo, hi = el.exp_neg_interval(x.numerator, x.denominator, bits)
        rlo, rhi = _exp_bounds_reference(x, bits)
        assert lo <= rhi and rlo <= hi and hi - lo <= 2
        assert max(lo, rlo) <= min(hi, rhi)


def test_tables__bounds_as_documented():
    et = el.exp_table()
    value = [(int(et[0, i]) << 64) | int(et[1, i]) for i in range(et.shape[1])]
    for off, q, count in ((el.E_INT, 1, el.K_MAX), (el.E_J1, 256, 256), (el.E_J2, 65536, 256)):
        for j in range(0, count, 7):
            lo, hi = _exp_bounds_reference(Fraction(j, q), 140)
            assert value[off + j] << 13 <= hi and (100 * value[off + j] + 101) << 13 >= 100 * lo
    assert value[el.E_TINY] << 13 >= _exp_bounds_reference(Fraction(el.K_MAX - 1), 140)[1] - 2**13
    for lam in (Fraction(1, 16), Fraction(63, 1000), Fraction(2, 3), Fraction(100)):
        geo, size = el._table(lam)
        t = [(int(geo[0, k]) << 32) | int(geo[1, k]) for k in range(size)]
        assert all(a > b for a, b in itertools.pairwise(t))
        assert t[-1] < 1 << 24 and (size == 1 or t[-2] >= 1 << 24)  # ρ^K < 2^-72 ≤ ρ^(K-1)
        for k in sorted({1, 2, size // 2, size} & set(range(1, size + 1))):
            lo, hi = _exp_bounds_reference(k * lam, 160)
            assert t[k - 1] == lo >> 64 == hi >> 64  # the exact floor at 96 bits
        for z in range(97):
            assert int(geo[2, z]) == sum(1 for v in t if v >= 1 << (96 - z))
            low = 1 << (95 - z) if z < 96 else 0
            window = [v for v in t if low < v < 1 << (96 - z)]
            assert len(window) <= 13


@numba.njit
def _exp_many(xh, xl, et, oh, ol):  # pragma: no cover - compiled
    for i in range(xh.size):
        _, a, b = el._exp_q127(xh[i], xl[i], et)
        oh[i] = a
        ol[i] = b


def test_exp_q127__within_the_proved_error():
    rng = np.random.default_rng(5)
    xs = [int(v) for v in rng.integers(0, 2**62, 2000)]
    xs = [((v << 56) | int(rng.integers(0, 2**56))) % (64 << 112) for v in xs]
    xs += [0, 1, (1 << 96) - 1, (1 << 112) - 1, (64 << 112) - 1, ((1 << 16) - 1) << 96]
    xs += [int(v) for v in rng.integers(0, 2**60, 200)]  # x < 2^-52
    xh = np.array([v >> 64 for v in xs], dtype=np.uint64)
    xl = np.array([v & M64 for v in xs], dtype=np.uint64)
    oh, ol = np.empty_like(xh), np.empty_like(xl)
    _exp_many(xh, xl, el.exp_table(), oh, ol)
    worst = 0
    for i, x in enumerate(xs):
        lo, hi = el.exp_neg_interval(x, 1 << el.FX, el.EXP_BITS)
        a = (int(oh[i]) << 64) | int(ol[i])
        worst = max(worst, a - lo, hi - a)
    assert worst < 2**33 < el.MARGIN  # docs/privacy.md: |error| < 2^33 (observed ~2^31)


# --- every fast decision equals the exact one ----------------------------------------------------


def _exact(prm, words, m, i):
    """(status, value) from the candidate's known bits alone: 2 where they do not decide it."""
    wu = int(words[el._r_offset(m) + i]) if prm.n > 1 else 0
    r, low = (wu * prm.n) >> 64, (wu * prm.n) & M64
    if low < ((1 << 64) - prm.n) % prm.n:
        return 0, None
    w_geo = (int(words[i]) << 32) | (int(words[2 * m + i]) >> 32)
    w_acc = (int(words[m + i]) << 32) | (int(words[2 * m + i]) & 0xFFFFFFFF)
    geo, size = prm.geo, int(prm.consts[16])
    t = [(int(geo[0, k]) << 32) | int(geo[1, k]) for k in range(size)]
    if w_geo in t:
        return 2, None
    v = sum(1 for x in t if w_geo < x)
    if v == size:
        return 2, None
    mag = r + prm.n * v
    sign = (int(words[3 * m + (i >> 6)]) >> (i & 63)) & 1
    if sign and mag == 0:
        return 0, None
    x = Fraction(r) / prm.b
    x += (mag / prm.b - prm.c2) ** 2 * prm.k2 if prm.gauss else v * prm.gam
    lo, hi = el.exp_neg_interval(x.numerator, x.denominator, 200)
    if (w_acc + 1) << 104 <= lo:
        return 1, -mag if sign else mag
    if w_acc << 104 >= hi:
        return 0, None
    return 2, None


def _kernel(prm, words, m):
    status, kept = np.empty(m, dtype=np.uint8), np.empty(m, dtype=np.int64)
    kept_hi = np.empty(m, dtype=np.int64)
    counts = el._candidates(words, m, prm.consts, prm.geo, el.exp_table(), status, kept, kept_hi)
    n = counts & 0xFFFFFFFF
    values = iter(el._widen(kept[:n], kept_hi[:n]).tolist())
    value = [next(values) if status[i] & 3 == 1 else None for i in range(m)]
    return status, value


def _adversarial(prm, words, m, rng):
    """Put every acceptance uniform within ±3 units (of 2^-96) of its exact threshold, and some
    geometric uniforms on a table entry (a tie) or next to one."""
    geo, size = prm.geo, int(prm.consts[16])
    for i in range(m):
        if i % 5 == 0:
            k = int(rng.integers(0, size))
            t = ((int(geo[0, k]) << 32) | int(geo[1, k])) + int(rng.integers(-1, 2))
            t %= 1 << 96
            words[i] = t >> 32
            words[2 * m + i] = (int(words[2 * m + i]) & 0xFFFFFFFF) | ((t & 0xFFFFFFFF) << 32)
        wu = int(words[el._r_offset(m) + i]) if prm.n > 1 else 0
        r = (wu * prm.n) >> 64
        w_geo = (int(words[i]) << 32) | (int(words[2 * m + i]) >> 32)
        t = [(int(geo[0, k]) << 32) | int(geo[1, k]) for k in range(size)]
        v = sum(1 for x in t if w_geo < x)
        mag = r + prm.n * v
        x = Fraction(r) / prm.b
        x += (mag / prm.b - prm.c2) ** 2 * prm.k2 if prm.gauss else v * prm.gam
        lo, _ = el.exp_neg_interval(x.numerator, x.denominator, 96)
        a = max(0, min(lo + int(rng.integers(-3, 4)), (1 << 96) - 1))
        words[m + i] = a >> 32
        words[2 * m + i] = (int(words[2 * m + i]) & ~0xFFFFFFFF & M64) | (a & 0xFFFFFFFF)
    return words


@pytest.mark.parametrize("kind", ["gauss", "laplace"])
def test_kernel__every_decision_is_the_exact_one(kind):
    rng = np.random.default_rng(31)
    scales = GAUSS if kind == "gauss" else LAPLACE
    m = 300
    for scale in scales:
        prm = el.gaussian_params(scale) if kind == "gauss" else el.laplace_params(scale)
        assert prm is not None
        for adversarial in (False, True):
            words = rng.integers(0, 2**64, size=el._r_offset(m) + m, dtype=np.uint64)
            if adversarial:
                words = _adversarial(prm, words, m, rng)
            status, value = _kernel(prm, words, m)
            undecided = 0
            for i in range(m):
                ref, ref_value = _exact(prm, words, m, i)
                if status[i] == 2:
                    undecided += 1
                    continue
                assert status[i] == ref, (scale, adversarial, i)
                if ref == 1:
                    assert value[i] == ref_value
            # random words: the margin's band and the ties are 2^-85 events
            assert undecided == 0 if not adversarial else undecided > 0


def test_slow_path__alone_gives_the_law():
    # every candidate decided by the exact Python path (the kernel's words, none of its answers)
    rng = np.random.default_rng(41)
    for kind, scale in (("gauss", Fraction(7, 3)), ("laplace", Fraction(2051, 2))):
        prm = el.gaussian_params(scale) if kind == "gauss" else el.laplace_params(scale)
        values = []
        while len(values) < 6000:
            m = 512
            words = el._words(rng, el._r_offset(m) + m)
            for i in range(m):
                wu = int(words[el._r_offset(m) + i]) if prm.n > 1 else 0
                if (wu * prm.n) & M64 < ((1 << 64) - prm.n) % prm.n:
                    continue  # Lemire's rejection (the kernel's, not the slow path's)
                ok, value = el._slow(rng, prm, words, m, i)
                if ok:
                    values.append(value)
        y = np.array(values)
        if kind == "gauss":
            assert _dgauss_pvalue(y, 7 / 3) > ALPHA
        else:  # |Y| in 12 bins of equal probability under the exact law
            q = math.exp(-1 / 1025.5)
            edges = [0] + [math.ceil(-1025.5 * math.log(1 - j / 12)) for j in range(1, 12)]
            cdf = [0.0] + [1 - q ** e * 2 / (1 + q) for e in edges[1:]] + [1.0]
            observed = np.histogram(np.abs(y), bins=[*edges, 2**62])[0]
            expected = np.diff(cdf) * y.size
            assert stats.chisquare(observed, expected).pvalue > ALPHA


# --- the laws at the scales the kernel treats differently ----------------------------------------


def _binned_pvalue(y: np.ndarray, cdf, edges: list[float]) -> float:
    observed = np.histogram(y, bins=[-np.inf, *edges, np.inf])[0]
    probs = np.diff([0.0, *[cdf(e) for e in edges], 1.0])
    return float(stats.chisquare(observed, probs * y.size).pvalue)


@pytest.mark.parametrize("s2", [Fraction(1, 3), Fraction(5000), Fraction(2**100 + 7),
                                Fraction(2**124)])
def test_discrete_gaussian__law_at_every_scale(s2):
    n = 40000
    y = discrete_gaussian(np.random.default_rng(61), s2, n)
    if s2 < 10**4:
        assert _dgauss_pvalue(y, float(s2)) > ALPHA
    else:  # σ ≥ 2^50: the discrete law is the normal one at any resolution seen here
        z = np.array([float(v) for v in y]) / math.sqrt(float(s2))
        edges = list(np.linspace(-3, 3, 25))
        assert _binned_pvalue(z, stats.norm.cdf, edges) > ALPHA


@pytest.mark.parametrize("b", [Fraction(1, 3), Fraction(2051, 2), Fraction(2**61 + 1)])
def test_discrete_laplace__law_at_every_scale(b):
    n = 40000
    y = discrete_laplace(np.random.default_rng(62), b, n)
    q = math.exp(-1 / float(b))
    if b < 10**6:  # P(Y ≥ k) = q^k/(1 + q) for k ≥ 1
        edges = sorted({int(v) for v in np.quantile(np.array(y, dtype=float),
                                                     np.linspace(0.03, 0.97, 20))})

        def cdf(e: float) -> float:  # P(Y ≤ ⌊e⌋)
            k = math.floor(e)
            return q ** (-k) / (1 + q) if k < 0 else 1 - q ** (k + 1) / (1 + q)

        assert _binned_pvalue(np.array(y, dtype=float), cdf, [e + 0.5 for e in edges]) > ALPHA
    else:  # |Y|/b ~ Exp(1) up to 2^-61; beyond int64 for 2 % of the values
        z = np.array([float(v) for v in y]) / float(b)
        assert y.dtype == object and max(abs(int(v)) for v in y) > 2**63
        edges = list(np.linspace(-4, 4, 25))
        assert _binned_pvalue(z, stats.laplace.cdf, edges) > ALPHA


def test_samplers__csprng_seeded_and_fallback_agree_on_the_law(monkeypatch):
    for rng in (CryptoRng(), np.random.default_rng(3)):
        y = discrete_gaussian(rng, Fraction(9), 30000)
        assert abs(float(np.var(y)) / 9 - 1) < 0.05
    a = discrete_gaussian(np.random.default_rng(4), Fraction(2**82), 500)
    b = discrete_gaussian(np.random.default_rng(4), Fraction(2**82), 500)
    assert (a == b).all()  # a seeded generator reproduces its draws
    monkeypatch.setitem(el._STATE, "ready", False)  # the NumPy path (no numba)
    y = discrete_laplace(np.random.default_rng(5), Fraction(3, 2), 30000)
    q = math.exp(-2 / 3)
    assert abs(float(np.var(y)) / (2 * q / (1 - q) ** 2) - 1) < 0.07
    y = discrete_gaussian(np.random.default_rng(5), Fraction(9), 30000)
    assert abs(float(np.var(y)) / 9 - 1) < 0.05


def test_rounds__sizes_depend_only_on_rejections(monkeypatch):
    sizes = []
    real = el.run_round

    def spy(rng, prm, m):
        sizes.append(m)
        return real(rng, prm, m)

    monkeypatch.setattr(exact_noise.exact_limbs, "run_round", spy)
    discrete_gaussian(np.random.default_rng(6), Fraction(2**82), 20100)
    prm = el.gaussian_params(Fraction(2**82))
    assert sizes[0] == min(math.ceil((20100 + 4 * math.sqrt(20100)) / prm.accept) + 4,
                           exact_noise.ROUND_MAX)


def test_single_release__cheap():
    # a single-value release is microseconds, not the 0.5 ms of the NumPy path (timing in
    # docs/performance.md; here only that it is far below that)
    import time

    budget = PrivacyBudget(1.0, 1e-6)
    for _ in range(3):
        gaussian_release(0.0, sensitivity=1.0, budget=budget, calibration="analytic",
                         rng=np.random.default_rng(0), component="t")
    t = time.perf_counter()
    for _ in range(200):
        discrete_gaussian(np.random.default_rng(0), Fraction(2**82), 1)
    assert (time.perf_counter() - t) / 200 < 2e-4


def test_params__out_of_range_falls_back():
    assert el.gaussian_params(Fraction(1, 2**40)) is None
    assert el.laplace_params(Fraction(2**70)) is None
    y = discrete_laplace(np.random.default_rng(7), Fraction(2**70), 3)
    assert y.dtype == object and len(y) == 3


@pytest.mark.parametrize(("kind", "scale"), [("gauss", Fraction(7, 3)),
                                             ("laplace", Fraction(2051, 2)),
                                             ("laplace", Fraction(2**61 + 1))])
def test_rounds__many_undecided_still_give_the_law(kind, scale):
    # a margin of 2^124 leaves ~1/4 of the candidates to the exact path: run_round merges them
    prm = el.gaussian_params(scale) if kind == "gauss" else el.laplace_params(scale)
    consts = prm.consts.copy()
    consts[12:16] = [1 << 60, 1 << 31, 1 << 60, 0]  # 2^124 (+ 2^31)
    forced = dataclasses.replace(prm, consts=consts)
    y = exact_noise._limb_rounds(np.random.default_rng(71), forced, 20000)
    assert y.dtype == (object if prm.wide else np.int64) and y.size == 20000
    if kind == "gauss":
        assert _dgauss_pvalue(y, 7 / 3) > ALPHA
    else:
        z = np.array([float(v) for v in y]) / float(scale)
        assert _binned_pvalue(z, stats.laplace.cdf, list(np.linspace(-4, 4, 17))) > ALPHA


def test_words__through_the_draw_tracker_and_the_same_stream():
    # the CSPRNG's words and a Generator's raw words are taken through the release's tracker
    # (it must see the draw), and a tracked Generator gives the untracked one's values
    for g in (np.random.default_rng(1), CryptoRng()):
        tracked = DrawTracker(g)
        discrete_gaussian(tracked, Fraction(2**82), 3)
        assert tracked.drawn
    a = discrete_gaussian(DrawTracker(np.random.default_rng(1)), Fraction(2**82), 50)
    b = discrete_gaussian(np.random.default_rng(1), Fraction(2**82), 50)
    assert (a == b).all()
    # raw words (small rounds) and integers(0, 2^64) (large ones) are one stream
    raw = el._words(np.random.default_rng(2), 10)
    full = el._words(np.random.default_rng(2), el._RAW_MAX + 1)[:10]
    assert (raw == full).all()
