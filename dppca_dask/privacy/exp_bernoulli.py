"""Bernoulli(exp(−x)) and the exp(−1)-geometric, exactly, at a cost that does not depend on x.

The loops of Canonne, Kamath & Steinke (2020, Alg. 1 and the geometric step of Alg. 2) run once
per success, so their time tells the drawn value (Jin et al., IEEE S&P 2022). Here every draw
does the same vectorised work and the rare draws that need more finish on a slow exact path:

* :func:`geometric_exp1` -- V with P(V ≥ k) = e^{−k}: one 128-bit uniform U compared with the
  table ⌊e^{−k}·2^128⌋, k = 1 … :data:`GEOM_MAX` (V = #{k : U < e^{−k}}). Slow path when
  U < e^{−GEOM_MAX} (then V = GEOM_MAX + a fresh geometric: memoryless) or when U's 128 bits equal
  a table entry (U extended word by word against e^{−k} to more bits): probability
  < e^{−50} + 50·2^{−128} < 2^{−72} per draw.
* :func:`bernoulli_exp_unit` -- Bernoulli(exp(−f)) for 0 ≤ f = p/q ≤ 1 (von Neumann 1951): with
  U₁, U₂, … uniform, K = the length of the run f > U₁ > U₂ > …, P(K ≥ k) = f^k/k!, so
  P(K even) = e^{−f}. :data:`ROUNDS` = 22 uniforms (128 bits each) are always drawn and compared;
  slow path when the run uses all of them (probability ≤ 1/22! < 2^{−69}) or two compared
  128-bit prefixes tie (< 22·2^{−128}).
* :func:`bernoulli_exp` -- Bernoulli(exp(−x)) for any rational x ≥ 0 as [V ≥ ⌊x⌋] · Bernoulli(
  exp(−(x − ⌊x⌋))): one geometric and one unit draw, whatever x is.

The slow paths draw more words and loop, but only with the probabilities above, so the time
of every draw is independent of its value except with probability < 2^{−68} (per unit draw plus
geometric). Arithmetic is int64/uint64 when every operand fits (128-bit products from 32-bit
limbs, :func:`~dppca_dask.privacy.csprng.mul64`), else object arrays of Python ints, whose cost
grows with the operands' bit lengths (a few machine words here: what remains of the timing
dependence on the big-variance path).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from dppca_dask.privacy.csprng import mul64

__all__ = ["GEOM_MAX", "ROUNDS", "bernoulli_exp", "bernoulli_exp_unit", "geometric_exp1",
           "words"]

ROUNDS = 22
"""Uniforms per Bernoulli(exp(−f)) draw: P(run ≥ 22) ≤ 1/22! < 2^-69."""
GEOM_MAX = 50
"""Entries of the geometric's threshold table: P(V ≥ 50) = e^-50 < 2^-72."""

FITS = 1 << 62  # every int64 operand and intermediate stays below this
_WORD = 1 << 64
_U64 = np.uint64


def words(rng: Any, k: int) -> np.ndarray:
    """``k`` independent uniform 64-bit words (uint64), from ``rng.integers``."""
    return np.asarray(rng.integers(0, _WORD, size=int(k), dtype=np.uint64), dtype=np.uint64)


# --- e^{-k} to any precision, with rigorous bounds (for the table and the slow path) -------------


@lru_cache(maxsize=64)
def _exp_neg1(bits: int) -> tuple[Fraction, Fraction]:
    """L ≤ e^{-1} ≤ H with H − L < 2^-bits (alternating series Σ (−1)^n/n!)."""
    s, term, n = Fraction(0), Fraction(1), 0
    while True:
        s += term if n % 2 == 0 else -term
        n += 1
        term /= n
        if term < Fraction(1, 1 << bits):
            nxt = s + (term if n % 2 == 0 else -term)
            return (min(s, nxt), max(s, nxt))


def exp_neg_bounds(k: int, bits: int) -> tuple[int, int]:
    """Integers lo ≤ e^{−k}·2^bits ≤ hi, hi − lo ≤ 2 (k ≥ 1)."""
    low, high = _exp_neg1(bits + 2 * k + 16)
    lo = (low**k * (1 << bits)).__floor__()
    hi = (high**k * (1 << bits)).__ceil__()
    return lo, hi


def _table() -> tuple[np.ndarray, np.ndarray]:
    """⌊e^{−k}·2^128⌋ for k = 1 … GEOM_MAX as (high words, low words)."""
    hi_w, lo_w = [], []
    for k in range(1, GEOM_MAX + 1):
        lo, hi = exp_neg_bounds(k, 128 + 64)
        t, t_hi = lo >> 64, hi >> 64
        if t != t_hi:  # e^{-k}·2^128 within 2^-64 of an integer: never for these k
            raise AssertionError(f"e^-{k} table entry undetermined")
        hi_w.append(t >> 64)
        lo_w.append(t & (_WORD - 1))
    return np.array(hi_w, dtype=np.uint64)[:, None], np.array(lo_w, dtype=np.uint64)[:, None]


_T_HI, _T_LO = _table()


# --- lazy exact comparisons (slow path only) -----------------------------------------------------


class _Lazy:
    """A uniform U in [0, 1) known by its first ``bits`` bits ``w``; more drawn on demand."""

    __slots__ = ("bits", "rng", "w")

    def __init__(self, rng: Any, w: int = 0, bits: int = 0) -> None:
        self.rng, self.w, self.bits = rng, w, bits

    def extend(self) -> None:
        self.w = (self.w << 64) | int(words(self.rng, 1)[0])
        self.bits += 64

    def below_rational(self, p: int, q: int) -> bool:
        """U < p/q, exactly."""
        while True:
            if (self.w + 1) * q <= p << self.bits:
                return True
            if self.w * q >= p << self.bits:
                return False
            self.extend()

    def below_exp(self, k: int) -> bool:
        """U < e^{−k}, exactly."""
        while True:
            lo, hi = exp_neg_bounds(k, self.bits)
            if self.w + 1 <= lo:
                return True
            if self.w >= hi:
                return False
            self.extend()

    def below(self, other: _Lazy) -> bool:
        """U < other, exactly."""
        while True:
            while self.bits < other.bits:
                self.extend()
            while other.bits < self.bits:
                other.extend()
            if self.w != other.w:
                return self.w < other.w
            self.extend()
            other.extend()


def _geometric_slow(rng: Any) -> int:
    """V by CKS's loop: successes of Bernoulli(exp(−1)) before the first failure."""
    v = 0
    while bernoulli_exp_unit(rng, np.ones(1, dtype=np.int64), np.ones(1, dtype=np.int64))[0]:
        v += 1
    return v


def _von_neumann_slow(rng: Any, p: int, q: int, prefix: list[_Lazy]) -> bool:
    """The run f > U₁ > U₂ > … from the already drawn uniforms ``prefix``, drawing more as needed."""
    k, prev = 0, None
    while True:
        u = prefix[k] if k < len(prefix) else _Lazy(rng)
        less = u.below_rational(p, q) if prev is None else u.below(prev)
        if not less:
            return k % 2 == 0
        prev = u
        k += 1


# --- the fixed-cost draws ------------------------------------------------------------------------


def _less128(a1: np.ndarray, a0: np.ndarray, b1: Any, b0: Any) -> tuple[np.ndarray, np.ndarray]:
    """(a < b, a == b) for 128-bit numbers given as (high, low) uint64 words."""
    return (a1 < b1) | ((a1 == b1) & (a0 < b0)), (a1 == b1) & (a0 == b0)


def geometric_exp1(rng: Any, n: int) -> np.ndarray:
    """``n`` draws of V, P(V ≥ k) = e^{−k} (int64), two words and GEOM_MAX comparisons each.

    Examples
    --------
    >>> v = geometric_exp1(np.random.default_rng(0), 5)
    >>> v.dtype == np.int64 and bool((v >= 0).all())
    True
    """
    w = words(rng, 2 * n).reshape(2, n)
    lt, eq = _less128(w[0], w[1], _T_HI, _T_LO)
    v = lt.sum(axis=0).astype(np.int64)  # the thresholds decrease: lt is a prefix of trues
    for i in np.flatnonzero((v == GEOM_MAX) | eq.any(axis=0)):
        tie = np.flatnonzero(eq[:, i])
        if tie.size:  # U's 128 bits equal ⌊e^{-k}·2^128⌋: decide U < e^{-k} on more bits
            k = int(tie[0]) + 1
            u = _Lazy(rng, (int(w[0, i]) << 64) | int(w[1, i]), 128)
            v[i] = k if u.below_exp(k) else k - 1
        if v[i] == GEOM_MAX:  # U < e^{-GEOM_MAX}: the rest is a fresh geometric
            v[i] = GEOM_MAX + _geometric_slow(rng)
    return v


def _int_or_object(*arrays: np.ndarray) -> list[np.ndarray]:
    small = all(a.dtype != object for a in arrays) and all(
        a.size == 0 or int(np.max(np.abs(a))) < FITS for a in arrays)
    return [a.astype(np.int64) if small else a.astype(object) for a in arrays]


def _first_compare(u1: np.ndarray, u0: np.ndarray, p: np.ndarray,
                   q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(U < p/q decided, undecided) for U = (u1·2^64 + u0 + [0, 1))/2^128."""
    if p.dtype != object:  # q < 2^62: W·q = a1·2^128 + (a0 + b1)·2^64 + b0 from 128-bit products
        qq, pp = q.astype(np.uint64), p.astype(np.uint64)
        a1, a0 = mul64(u1, qq)
        b1, b0 = mul64(u0, qq)
        mid = a0 + b1
        top = a1 + (mid < a0)
        false = top >= pp  # W·q ≥ p·2^128
        lo2 = b0 + qq  # (W + 1)·q = W·q + q
        c1 = lo2 < b0
        mid2 = mid + c1
        top2 = top + (c1 & (mid == _U64(_WORD - 1)))  # the carry out of mid + c1
        true = (top2 < pp) | ((top2 == pp) & (mid2 == 0) & (lo2 == 0))
        return true, ~true & ~false
    w = (u1.astype(object) << 64) | u0.astype(object)
    wq = w * q
    scaled = p << 128
    true = (wq + q) <= scaled
    false = wq >= scaled
    return true.astype(bool), ~(true.astype(bool) | false.astype(bool))


def bernoulli_exp_unit(rng: Any, p: Any, q: Any) -> np.ndarray:
    """Bernoulli(exp(−p/q)) for integer arrays 0 ≤ p ≤ q, q > 0, at a fixed cost per draw.

    Examples
    --------
    >>> bernoulli_exp_unit(np.random.default_rng(0), np.zeros(3, dtype=np.int64), 5).tolist()
    [True, True, True]
    """
    p = np.atleast_1d(np.asarray(p))
    q = np.broadcast_to(np.asarray(q), p.shape)
    p, q = _int_or_object(p.ravel(), q.ravel())
    n = p.size
    w = words(rng, 2 * ROUNDS * n).reshape(ROUNDS, 2, n)
    first, tie0 = _first_compare(w[0, 0], w[0, 1], p, q)
    less, ties = _less128(w[1:, 0], w[1:, 1], w[:-1, 0], w[:-1, 1])
    decided = np.concatenate([first[None], less], axis=0)
    tied = np.concatenate([tie0[None], ties], axis=0)
    lead = np.cumprod(decided, axis=0, dtype=np.int64)  # 1 while the run goes on
    run = lead.sum(axis=0)
    before = np.concatenate([np.ones((1, n), dtype=np.int64), lead[:-1]], axis=0)
    slow = (run == ROUNDS) | (tied & (before == 1)).any(axis=0)
    out = (run % 2) == 0
    for i in np.flatnonzero(slow):
        prefix = [_Lazy(rng, (int(w[j, 0, i]) << 64) | int(w[j, 1, i]), 128)
                  for j in range(ROUNDS)]
        out[i] = _von_neumann_slow(rng, int(p[i]), int(q[i]), prefix)
    return out


def bernoulli_exp(rng: Any, p: Any, q: Any) -> np.ndarray:
    """Exact Bernoulli(exp(−p/q)) draws for integer arrays p ≥ 0, q > 0, at a fixed cost per draw:
    [V ≥ ⌊p/q⌋] · Bernoulli(exp(−frac)) with V from :func:`geometric_exp1`.

    Examples
    --------
    >>> b = bernoulli_exp(np.random.default_rng(1), np.zeros(3, dtype=np.int64), 1)
    >>> b.tolist()
    [True, True, True]
    """
    p = np.atleast_1d(np.asarray(p)).ravel()
    q = np.broadcast_to(np.asarray(q), p.shape).ravel()
    p, q = _int_or_object(p, q)
    whole = p // q
    frac = p - whole * q
    if whole.dtype == object:
        whole = np.minimum(whole, FITS).astype(np.int64)
    v = geometric_exp1(rng, p.size)
    return (v >= whole) & bernoulli_exp_unit(rng, frac, q)
