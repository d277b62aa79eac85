"""Exact discrete noise samplers (integer arithmetic only; Canonne, Kamath & Steinke 2020).

Every sampler here is driven by uniformly random integers from ``rng.integers`` (the
:class:`~dppca_dask.privacy.rng.Rng` protocol; full-range 64-bit words are taken from the same
generator's cheaper equivalent where it has one) and uses only integer and rational arithmetic,
so the distribution of each output is *exactly* the stated one -- no floating-point number is
ever formed on the way to a sample:

* :func:`uniform_below` -- uniform on {0, …, m−1} for any Python int m (rejection from 64-bit
  words; NumPy's own bounded integers below 2^63);
* :func:`bernoulli` -- Bernoulli(p/q) by comparing a uniform word with ⌊p·2^64/q⌋ (ties, of
  probability 2^-64, resolved exactly word by word);
* :func:`bernoulli_exp` -- Bernoulli(exp(−p/q)) for rational p/q ≥ 0
  (:mod:`dppca_dask.privacy.exp_bernoulli`: a geometric and von Neumann's run, fixed cost);
* :func:`discrete_laplace` -- P(y) ∝ exp(−|y|/b) on Z for rational b (CKS 2020, Alg. 2);
* :func:`discrete_gaussian` -- P(y) ∝ exp(−y²/(2σ²)) on Z for rational σ² (CKS 2020, Alg. 3).

The Laplace and Gaussian samplers decide their candidates in a compiled loop on 64-bit limbs
(:mod:`~dppca_dask.privacy.exact_limbs`: 4 words and one fixed-point e^{−x} per candidate, exact
by a proved error margin and a slow exact path) for b < 2^66 and 2^-32 ≤ σ² < 2^132; without
numba, or beyond those scales, they run the NumPy path (:func:`_laplace_numpy`,
:func:`_gaussian_numpy`: NumPy arrays of int64, or of Python ints when an operand exceeds int64,
and :mod:`~dppca_dask.privacy.exp_bernoulli`'s fixed-cost Bernoulli draws). Both return int64
arrays, or object arrays of Python ints when the values may exceed int64 (the compiled path
decides that from the scale alone). Timings: ``benchmarks/exact_noise.py``.

**Timing.** No loop runs once per success, so the time of a call does not tell its values
(docs/privacy.md, "Timing"): every candidate costs the same fixed work, and the only loops are
rejection rounds (a fresh batch for the requests still open), whose number depends only on how
many candidates were rejected -- which in rejection sampling is independent of the accepted
values. Exceptions: the slow exact paths (compiled path: < 2^-71 per candidate; NumPy path:
< 2^-68, :mod:`~dppca_dask.privacy.exp_bernoulli`), and (uniform_below, bernoulli on Python
ints) a 64-bit tie of a uniform word with p/q's expansion (2^-64 per comparison).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dppca_dask.privacy import exact_limbs
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


ROUND_MAX = 1 << 15
"""Candidates per round at most: a round's words (1 MiB) and outputs stay in cache."""


def _limb_rounds(rng: Any, prm: exact_limbs.Params, size: int) -> np.ndarray:
    """``size`` accepted values from rounds of compiled candidates: a round of
    m = min(⌈(n + 4√n)/a⌉ + 4, 2^15) candidates for the n values still open, a the public
    acceptance probability; the rounds' number and sizes depend only on how many candidates
    were rejected."""
    if size == 0:
        return np.zeros(0, dtype=object if prm.wide else np.int64)
    parts: list[np.ndarray] = []
    need = size
    while True:
        m = min(math.ceil((need + 4 * math.sqrt(need)) / prm.accept) + 4, ROUND_MAX)
        got = exact_limbs.run_round(rng, prm, m)[:need]
        if not parts and got.size == need:  # the common case: one round
            return got
        parts.append(got)
        need -= got.size
        if not need:
            break
    if any(p.dtype == object for p in parts):
        return np.concatenate([p.astype(object) for p in parts])
    return np.concatenate(parts)


def discrete_laplace(rng: Any, scale: Fraction | int, size: int) -> np.ndarray:
    """``size`` exact draws with P(y) ∝ exp(−|y|/scale) on Z (CKS 2020, Alg. 2).

    ``scale`` = t/s (a Fraction). Returns an int64 array, or Python ints when large. Compiled
    candidates (:func:`~dppca_dask.privacy.exact_limbs.laplace_params`) when numba is there and
    scale < 2^66, else :func:`_laplace_numpy`.

    Examples
    --------
    >>> y = discrete_laplace(np.random.default_rng(0), Fraction(3, 2), 5)
    >>> y.dtype == np.int64 and len(y) == 5
    True
    """
    scale = Fraction(scale)
    if scale <= 0:
        raise ValueError(f"discrete_laplace needs a positive scale; got {scale}.")
    prm = exact_limbs.laplace_params(scale) if exact_limbs.kernels_available() else None
    if prm is not None:
        return _limb_rounds(rng, prm, int(size))
    return _laplace_numpy(rng, scale, size)


def _laplace_numpy(rng: Any, scale: Fraction, size: int) -> np.ndarray:
    """CKS Alg. 2 on NumPy arrays: each round draws 2n + 8 candidates for the n values still
    open (fixed cost each: :func:`_laplace_candidates`) and keeps the first accepted ones; the
    rounds' number and sizes depend only on how many were rejected."""
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

    Compiled candidates (:func:`~dppca_dask.privacy.exact_limbs.gaussian_params`: a discrete
    Laplace proposal of scale ≈ σ and one acceptance e^{−x} per candidate) when numba is there
    and 2^-32 ≤ σ² < 2^132, else :func:`_gaussian_numpy`.

    Examples
    --------
    >>> y = discrete_gaussian(np.random.default_rng(0), Fraction(9), 1000)
    >>> 7.0 < float(np.var(y.astype(float))) < 11.0
    True
    """
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError(f"discrete_gaussian needs a positive variance; got {sigma2}.")
    prm = exact_limbs.gaussian_params(sigma2) if exact_limbs.kernels_available() else None
    if prm is not None:
        return _limb_rounds(rng, prm, int(size))
    return _gaussian_numpy(rng, sigma2, size)


def _gaussian_numpy(rng: Any, sigma2: Fraction, size: int) -> np.ndarray:
    """CKS Alg. 3 on NumPy arrays: proposal Y ~ discrete Laplace(t) (:func:`_laplace_numpy`),
    t = ⌊σ⌋ + 1, accepted with probability exp(−(|Y| − σ²/t)²/(2σ²)) =
    exp(−(|Y|·t·b − a)²/(2·a·b·t²)) for σ² = a/b, one fixed-cost :func:`bernoulli_exp` whatever Y
    is; n + n/2 + 8 proposals per round for n open values (acceptance ≥ ~0.6)."""
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
        y = _laplace_numpy(rng, Fraction(t), batch)
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
