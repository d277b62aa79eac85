"""Exact discrete noise samplers (integer arithmetic only; Canonne, Kamath & Steinke 2020).

Every sampler here is driven by uniformly random integers from ``rng.integers`` (the
:class:`~dppca_dask.privacy.rng.Rng` protocol) and uses only integer and rational arithmetic (Python
ints, :class:`fractions.Fraction`, NumPy int64/uint64 where every operand provably fits), so
the distribution of each output is *exactly* the stated one -- no floating-point number is
ever formed on the way to a sample:

* :func:`uniform_below` -- uniform on {0, …, m−1} for any Python int m (rejection from 64-bit
  words; NumPy's own bounded integers below 2^63);
* :func:`bernoulli` -- Bernoulli(p/q) by comparing a uniform word with ⌊p·2^64/q⌋ (ties, of
  probability 2^-64, resolved exactly word by word);
* :func:`bernoulli_exp` -- Bernoulli(exp(−p/q)) for rational p/q ≥ 0
  (:mod:`dppca_dask.privacy.exp_bernoulli`: a geometric and von Neumann's run, fixed cost);
* :func:`discrete_laplace` -- P(y) ∝ exp(−|y|/b) on Z for rational b (CKS 2020, Alg. 2);
* :func:`discrete_gaussian` -- P(y) ∝ exp(−y²/(2σ²)) on Z for rational σ² (CKS 2020, Alg. 3).

All samplers are vectorised across the draws of one call: arrays of int64 when every
numerator and denominator of the batch fits, else object arrays of Python ints (the same
operations, exact at any size). Timings: ``benchmarks/exact_noise.py``.

**Timing.** No loop runs once per success, so the time of a call does not tell its values
(docs/privacy.md, "Timing"): every candidate of the Laplace and Gaussian samplers costs the
same fixed vectorised work (:mod:`~dppca_dask.privacy.exp_bernoulli`), and the only loops are
rejection rounds (a fresh batch for the requests still open), whose number depends only on how
many candidates were rejected -- which in rejection sampling is independent of the accepted
values. Exceptions, each with probability < 2^-68 per candidate: the slow exact paths of
:mod:`~dppca_dask.privacy.exp_bernoulli`, and (uniform_below, bernoulli on Python ints) a
64-bit tie of a uniform word with p/q's expansion (2^-64 per comparison).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from dppca_dask.privacy.exp_bernoulli import (
    FITS,
    GEOM_MAX,
    bernoulli_exp,
    bernoulli_exp_unit,
    geometric_exp1,
    words,
)

__all__ = [
    "add_ints",
    "bernoulli",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_laplace",
    "from_grid",
    "grid_variance",
    "round_up_rational",
    "to_grid",
    "uniform_below",
]

_FITS = FITS  # every int64 operand and intermediate stays below this
_words = words


def _as_ints(values: Any) -> np.ndarray:
    """An int64 array when every value fits, else an object array of Python ints."""
    arr = np.asarray(values)
    if arr.dtype == object:
        if arr.size == 0 or max(abs(int(v)) for v in arr.ravel()) < _FITS:
            return arr.astype(np.int64)
        return arr
    return arr.astype(np.int64)


def _fits(*arrays: Any) -> bool:
    for a in arrays:
        a = np.asarray(a)
        if a.size == 0:
            continue
        if a.dtype == object:
            if max(abs(int(v)) for v in a.ravel()) >= _FITS:
                return False
        elif int(np.max(np.abs(a))) >= _FITS:
            return False
    return True


def uniform_below(rng: Any, m: int, size: int) -> np.ndarray:
    """``size`` exact uniform draws from {0, …, m−1} (int64, or Python ints when m > 2^62).

    Examples
    --------
    >>> v = uniform_below(np.random.default_rng(0), 10**30, 4)
    >>> bool(all(0 <= int(x) < 10**30 for x in v))
    True
    """
    m = int(m)
    if m < 1:
        raise ValueError(f"uniform_below needs m >= 1; got {m}.")
    if m <= _FITS:
        return np.asarray(rng.integers(0, m, size=size, dtype=np.int64), dtype=np.int64)
    nbits = (m - 1).bit_length()
    nwords = -(-nbits // 64)
    drop = 64 * nwords - nbits
    out = np.empty(size, dtype=object)
    todo = np.arange(size)
    while todo.size:  # rejection: the number of rounds is independent of the values kept
        cand = _words(rng, todo.size).astype(object)
        for _ in range(nwords - 1):
            cand = (cand << 64) | _words(rng, todo.size).astype(object)
        cand = cand >> drop
        ok = (cand < m).astype(bool)
        out[todo[ok]] = cand[ok]
        todo = todo[~ok]
    return out


def _bernoulli_tie(rng: Any, rem: int, q: int) -> bool:
    """Continue the comparison U < p/q after a tie on every word so far (remainder ``rem``)."""
    while rem:
        rem <<= 64
        w, rem = divmod(rem, q)
        u = int(_words(rng, 1)[0])
        if u != w:
            return u < w
    return False  # p/q's expansion ended: U ≥ p/q


def bernoulli(rng: Any, p: Any, q: Any) -> np.ndarray:
    """Exact Bernoulli(p/q) draws, elementwise over integer arrays ``p`` (≥ 0) and ``q`` (> 0).

    Examples
    --------
    >>> bernoulli(np.random.default_rng(0), np.array([0, 3]), np.array([5, 3])).tolist()
    [False, True]
    """
    p = np.asarray(p)
    q = np.broadcast_to(np.asarray(q), p.shape)
    n = p.size
    if n == 0:
        return np.zeros(0, dtype=bool)
    if _fits(q) and p.dtype != object and q.dtype != object:
        u = np.asarray(rng.integers(0, q.astype(np.int64), dtype=np.int64))
        return u < p
    pp = [int(v) for v in p.ravel()]
    qq = [int(v) for v in np.asarray(q).ravel()]
    out = np.empty(n, dtype=bool)
    w1 = np.zeros(n, dtype=np.uint64)
    sure = np.zeros(n, dtype=bool)
    for i in range(n):
        if pp[i] >= qq[i]:
            sure[i] = True
        else:
            w1[i] = (pp[i] << 64) // qq[i]
    u = _words(rng, n)
    out[:] = u < w1
    out[sure] = True
    for t in np.flatnonzero((u == w1) & ~sure):
        rem = (pp[t] << 64) - int(w1[t]) * qq[t]
        out[t] = _bernoulli_tie(rng, rem, qq[t])
    return out


def round_up_rational(x: Fraction, rel_bits: int = 24) -> Fraction:
    """The smallest multiple of 2^-k at or above ``x`` (k chosen so it is within 2^-rel_bits
    relative): keeps numerators/denominators small without ever rounding a scale down.

    Examples
    --------
    >>> round_up_rational(Fraction(1, 3), 8)
    Fraction(171, 512)
    """
    x = Fraction(x)
    if x <= 0:
        raise ValueError(f"round_up_rational needs x > 0; got {x}.")
    k = max(0, rel_bits - (x.numerator.bit_length() - x.denominator.bit_length()) + 1)
    den = 1 << k
    return Fraction(-((-x.numerator * den) // x.denominator), den)


def _laplace_candidates(rng: Any, t: int, s: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``m`` candidates of CKS Alg. 2 and whether each is accepted, at a fixed cost each:
    U uniform below t kept with probability exp(−U/t), V geometric, Y = ⌊(U + t·V)/s⌋, a random
    sign, and −0 rejected."""
    u = uniform_below(rng, t, m)
    keep = bernoulli_exp_unit(rng, u, t)
    v = geometric_exp1(rng, m)
    # int64 whenever the public t allows it; V > GEOM_MAX only on the geometric's slow path
    if u.dtype != object and t * (GEOM_MAX + 2) < _FITS and int(v.max()) <= GEOM_MAX:
        x = u + v * t
        y = x // s if s < _FITS else (x.astype(object) // s)
    else:
        y = (u.astype(object) + v.astype(object) * t) // s
    b = np.asarray(rng.integers(0, 2, size=m, dtype=np.int64)) == 1
    ok = keep & ~(b & (y == 0))
    return np.where(b, -y, y), ok


def discrete_laplace(rng: Any, scale: Fraction | int, size: int) -> np.ndarray:
    """``size`` exact draws with P(y) ∝ exp(−|y|/scale) on Z (CKS 2020, Alg. 2).

    ``scale`` = t/s (a Fraction). Returns an int64 array, or Python ints when large. Each round
    draws 2n + 8 candidates for the n values still open (fixed cost each) and keeps the first
    accepted ones; the rounds' number and sizes depend only on how many were rejected.

    Examples
    --------
    >>> y = discrete_laplace(np.random.default_rng(0), Fraction(3, 2), 5)
    >>> y.dtype == np.int64 and len(y) == 5
    True
    """
    scale = Fraction(scale)
    if scale <= 0:
        raise ValueError(f"discrete_laplace needs a positive scale; got {scale}.")
    t, s = scale.numerator, scale.denominator
    out = np.zeros(size, dtype=object)
    todo = np.arange(size)
    while todo.size:
        n = todo.size
        y, ok = _laplace_candidates(rng, t, s, 2 * n + 8)
        acc = y[ok][:n]
        out[todo[: acc.size]] = acc
        todo = todo[acc.size:]
    return _as_ints(out)


def discrete_gaussian(rng: Any, sigma2: Fraction | int, size: int) -> np.ndarray:
    """``size`` exact draws with P(y) ∝ exp(−y²/(2σ²)) on Z (CKS 2020, Alg. 3).

    Proposal Y ~ discrete Laplace(t), t = ⌊σ⌋ + 1, accepted with probability
    exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−(|Y|·t·b − a)²/(2·a·b·t²)) for σ² = a/b; the acceptance is
    one fixed-cost :func:`bernoulli_exp` whatever Y is. Rounds as in :func:`discrete_laplace`
    (n + n/2 + 8 proposals for n open values: acceptance ≥ ~0.6).

    Examples
    --------
    >>> y = discrete_gaussian(np.random.default_rng(0), Fraction(9), 1000)
    >>> 7.0 < float(np.var(y.astype(float))) < 11.0
    True
    """
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError(f"discrete_gaussian needs a positive variance; got {sigma2}.")
    a, b = sigma2.numerator, sigma2.denominator
    t = _isqrt_floor(sigma2) + 1
    den = 2 * a * b * t * t
    bound = t * (GEOM_MAX + 1)  # |Y| ≤ this except on the geometric's slow path
    small = den < _FITS and (bound * b * t + a) ** 2 < _FITS  # public: int64 arithmetic
    out = np.zeros(size, dtype=object)
    todo = np.arange(size)
    while todo.size:
        n = todo.size
        batch = n + n // 2 + 8
        y = discrete_laplace(rng, t, batch)
        absy = np.abs(y)
        if small and absy.dtype != object and int(absy.max()) <= bound:
            ok = bernoulli_exp(rng, (absy * (b * t) - a) ** 2, den)
        else:
            ao = absy.astype(object)
            ok = bernoulli_exp(rng, (ao * (b * t) - a) ** 2, np.full(batch, den, dtype=object))
        acc = y[ok][:n]
        out[todo[: acc.size]] = acc
        todo = todo[acc.size:]
    return _as_ints(out)


def _isqrt_floor(x: Fraction) -> int:
    """⌊√x⌋ for a rational x ≥ 0, exactly."""
    from math import isqrt

    r = isqrt(x.numerator // x.denominator)
    while Fraction((r + 1) ** 2) <= x:
        r += 1
    while Fraction(r * r) > x:
        r -= 1
    return r


# --- the public grid: exact rounding to integers and back (no randomness) -----------------------


def to_grid(values: Any, grid: float) -> np.ndarray:
    """round(values/γ) as integers (int64, or Python ints when large); γ a power of two, so
    values/γ is exact and ``np.rint`` is the only rounding."""
    arr = np.asarray(values, dtype=np.float64).ravel()
    if not np.isfinite(arr).all():
        raise ValueError("A noisy release needs finite values.")
    k = np.rint(arr / grid)
    if k.size == 0 or float(np.max(np.abs(k))) < 2.0 ** 62:
        return k.astype(np.int64)
    return np.array([int(v) for v in k], dtype=object)


def add_ints(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact a + b for integer arrays (object arithmetic when int64 could overflow)."""
    if a.dtype == object or b.dtype == object or (a.size and (
            int(np.max(np.abs(a))) >= _FITS or int(np.max(np.abs(b))) >= _FITS)):
        return a.astype(object) + b.astype(object)
    return a + b


def from_grid(k: np.ndarray, grid: float) -> np.ndarray:
    """γ·k as float64: a deterministic function of the integers (post-processing)."""
    if k.dtype == object:
        return np.array([float(v) for v in k], dtype=np.float64) * grid
    return k.astype(np.float64) * grid


def grid_variance(sd: float, grid: float) -> Fraction:
    """A rational variance at or above (sd/γ)² for :func:`discrete_gaussian`."""
    return round_up_rational((Fraction(sd) / Fraction(grid)) ** 2)
