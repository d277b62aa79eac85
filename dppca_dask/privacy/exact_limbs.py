"""Fixed-cost candidates of the exact discrete Laplace and Gaussian samplers, on 64-bit limbs.

:mod:`~dppca_dask.privacy.exact_noise` draws its noise in rounds of candidates; this module
decides a whole round in one compiled loop (numba, uint64 arithmetic with an LLVM 64 × 64 → 128
multiply) from words drawn up front, instead of NumPy arrays of Python ints. A candidate reads
4 words (3 when n = 1) and a sign bit (64 candidates share a word) and does the same arithmetic, whatever it
draws:

* ``R`` uniform below ``n`` (Lemire: R = ⌊w·n/2^64⌋; when the low product word is below 2^64 mod n
  the whole candidate is rejected, so a kept R is exactly uniform);
* ``V`` with P(V ≥ k) = ρ^k, ρ = e^{−λ}: #{k : U < ρ^k} for a 96-bit uniform U and the table
  T_k = ⌊ρ^k·2^96⌋, k = 1 … K, ρ^K < 2^-72 (U's leading zeros give the first 16 candidates of the
  count, 4 compare steps finish it);
* |Y| = R + n·V and the sign: a discrete Laplace candidate, each y ≠ 0 from one (R, V, sign);
* one acceptance: a 96-bit uniform against e^{−x}. Discrete Laplace, P(y) ∝ e^{−|y|/b}
  (:func:`laplace_params`): n = ⌈b/16⌉, λ = n/b, x = R/b -- CKS 2020 Alg. 2 with the uniform
  part n = b/16 instead of b, so R is kept with probability ≥ e^{−1/8} instead of 63 %; from
  b = 1024 on one shared table (λ = 1/16) and x = R/b + V·(n/b − 1/16). Discrete Gaussian,
  P(y) ∝ e^{−y²/(2σ²)} (:func:`gaussian_params`): the same Laplace candidate with a scale b ≈ σ,
  x = R/b + (|Y| − σ²/b)²/(2σ²) -- CKS Alg. 3 with Alg. 2's own acceptance folded in (the
  product of independent Bernoulli(e^{−x₁}) and Bernoulli(e^{−x₂}) is Bernoulli(e^{−x₁−x₂}));
  any b > 0 is exact, b ≈ σ keeps 74 % of the candidates (CKS's t = ⌊σ⌋ + 1: 48 %).

**Exactness** (docs/privacy.md, "Exact candidates on 64-bit limbs"). x is computed in fixed point
with 112 fractional bits from public reciprocals (error < 2^-100), e^{−x} with 127 fractional
bits as e^{−k}·e^{−j₁/256}·e^{−j₂/65536}·e^{−r}, r < 2^-16, from tables of rigorous bounds
(:func:`exp_neg_interval`); the computed value is within 2^33 units of 2^-127 of e^{−x}, and
the decision uses a margin of :data:`MARGIN` = 2^36 units: accepted when the uniform lies surely
below the value, rejected when surely at or above it. A candidate the 96 bits do not decide -- in
the margin's band, a tie with a table entry, or V = K -- is finished in Python on more bits of
the same uniforms (:func:`_slow`): probability < 2^-71 per candidate. No floating-point number
is formed; every accepted candidate follows the exact law.

**Timing.** The compiled loop has no value-dependent loop count or branch: the branches it takes
depend on the call's public parameters, values are selected with masks. The only value-dependent
work is the slow path (< 2^-71 per candidate). Table indices depend on the value; the tables
(9 KiB of e^{−x}, up to 13 KiB of ρ^k) stay in the L1 cache.
"""

from __future__ import annotations

import bisect
import math
import threading
import warnings
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from dppca_dask.privacy.csprng import CryptoRng

__all__ = ["MARGIN", "exp_neg_interval", "gaussian_params", "kernels_available",
           "laplace_params", "run_round"]

FX = 112
"""Fractional bits of the exponent x (16 integer bits)."""
EXP_BITS = 127
"""Fractional bits of e^{−x} (1 = 2^127)."""
MARGIN = 1 << 36
"""Bound on |computed − exact| of e^{−x}, in units of 2^-127 (the proof gives < 2^33)."""
K_MAX = 64
"""x ≥ K_MAX: e^{−x} < e^{−63}, the candidate is rejected unless the uniform is below that."""
TAYLOR = 5
"""e^{−r} = 1 − r·(1 − r·H(r)) with H(r) = Σ_{i=2}^{5} (−r)^{i−2}/i! (64-bit): r < 2^-16,
remainder r^6/6! < 2^-105."""
U_BITS = 96
"""Bits of the geometric's and the acceptance's uniforms (a tie or the margin's band: < 2^-85)."""
GEOM_TAIL_BITS = 72
"""The geometric's table ends at the first k with ρ^k < 2^-72."""
SIGMA2_MIN = Fraction(1, 1 << 32)
"""Below this variance (noise 0 but for e^{-2^31}) the NumPy path runs."""
LIMB_MAX = 1 << 62
"""n (the uniform's range), t and ⌊b⌋ stay below this."""

_WORD = 1 << 64
_M64 = _WORD - 1


# --- rigorous bounds on e^{-p/q} (public tables and the slow path) ------------------------------


def _exp_series(z: int, g: int) -> tuple[int, int]:
    """Integers lo ≤ e^{−z/2^g}·2^g ≤ hi for 0 ≤ z ≤ 2^g (alternating series, directed rounding)."""
    one = 1 << g
    lo_t = hi_t = one  # bounds on the term z^n/n!·2^g
    s_lo = s_hi = one
    n = 0
    while True:
        n += 1
        hi_t = -((-hi_t * z) // (n << g))  # ceil
        lo_t = (lo_t * z) // (n << g)  # floor
        if n % 2:
            s_lo -= hi_t
            s_hi -= lo_t
        else:
            s_lo += lo_t
            s_hi += hi_t
        if n >= 2 and hi_t <= 1:  # the terms decrease from n = 1 on (z ≤ 1): tail ≤ 1
            return max(s_lo - 1, 0), s_hi + 1


@lru_cache(maxsize=32)
def _exp_neg1(g: int) -> tuple[int, int]:
    return _exp_series(1 << g, g)


def _exp_neg_int(k: int, g: int) -> tuple[int, int]:
    """lo ≤ e^{−k}·2^g ≤ hi (k ≥ 0), by binary powering of e^{−1}'s bounds."""
    lo, hi = 1 << g, 1 << g
    base_lo, base_hi = _exp_neg1(g)
    while k:
        if k & 1:
            lo, hi = (lo * base_lo) >> g, -((-hi * base_hi) >> g)
        base_lo, base_hi = (base_lo * base_lo) >> g, -((-base_hi * base_hi) >> g)
        k >>= 1
    return lo, hi


def exp_neg_interval(p: int, q: int, bits: int) -> tuple[int, int]:
    """Integers lo ≤ e^{−p/q}·2^bits ≤ hi for integers p ≥ 0, q > 0, with hi − lo ≤ 2.

    Examples
    --------
    >>> lo, hi = exp_neg_interval(1, 2, 60)
    >>> lo <= round(math.exp(-0.5) * 2**60) <= hi, hi - lo <= 2
    (True, True)
    """
    if p < 0 or q <= 0:
        raise ValueError(f"exp_neg_interval needs p >= 0 and q > 0; got {p}/{q}.")
    if p == 0:
        return 1 << bits, 1 << bits
    k, r = divmod(p, q)
    g = bits + 64 + 2 * k.bit_length()
    z_lo = (r << g) // q
    z_hi = -((-r << g) // q)
    f_lo, _ = _exp_series(z_hi, g)  # e^{-z} decreases in z
    _, f_hi = _exp_series(z_lo, g)
    k_lo, k_hi = _exp_neg_int(k, g)
    shift = 2 * g - bits
    return (k_lo * f_lo) >> shift, -((-k_hi * f_hi) >> shift)


def _floor_exp_neg(p: int, q: int, bits: int) -> int:
    """⌊e^{−p/q}·2^bits⌋ exactly (p > 0: e^{−p/q} is irrational)."""
    extra = 32
    while True:
        lo, hi = exp_neg_interval(p, q, bits + extra)
        if lo >> extra == hi >> extra:
            return lo >> extra
        extra += 64


def _split(values: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """128-bit integers as (high words, low words)."""
    return (np.array([v >> 64 for v in values], dtype=np.uint64),
            np.array([v & _M64 for v in values], dtype=np.uint64))


E_INT, E_J1, E_J2, E_TINY = 0, K_MAX, K_MAX + 256, K_MAX + 512
"""Offsets in :func:`exp_table`: e^{−k} (k < 64), e^{−j/256}, e^{−j/65536} (j < 256), a bound
on e^{−63}."""


@lru_cache(maxsize=1)
def exp_table() -> np.ndarray:
    """The kernel's e^{−x} tables at 127 bits as one (2, 577) uint64 array (high, low words):
    e^{−k}, e^{−j/256}, e^{−j/65536} as lower bounds within 1.01·2^-127 (from
    :func:`exp_neg_interval` at 135 bits) and an upper bound of e^{−63}."""
    def low(p: int, q: int) -> int:
        return exp_neg_interval(p, q, EXP_BITS + 8)[0] >> 8

    values = ([low(k, 1) for k in range(K_MAX)] + [low(j, 256) for j in range(256)]
              + [low(j, 65536) for j in range(256)]
              + [exp_neg_interval(K_MAX - 1, 1, EXP_BITS)[1]])
    return np.stack(_split(values))


# --- the slow exact path (Python ints; probability < 2^-71 per candidate) ------------------------


class _Uniform:
    """A uniform in [0, 1) known by its first ``bits`` bits ``w``; more words drawn on demand."""

    __slots__ = ("bits", "rng", "w")

    def __init__(self, rng: Any, w: int, bits: int) -> None:
        self.rng, self.w, self.bits = rng, w, bits

    def below_exp(self, p: int, q: int) -> bool:
        """U < e^{−p/q}, exactly."""
        while True:
            lo, hi = exp_neg_interval(p, q, self.bits)
            if self.w + 1 <= lo:
                return True
            if self.w >= hi:
                return False
            self.w = (self.w << 64) | int(_words(self.rng, 1)[0])
            self.bits += 64


def _words(rng: Any, k: int) -> np.ndarray:
    """``k`` uniform 64-bit words: ``rng.integers(0, 2^64, dtype=uint64)``, or the same words
    faster: the CSPRNG's ``words``, a NumPy Generator's raw output for a small ``k`` (NumPy's
    full-range uint64 draw is the bit generator's raw word; ``integers`` spends ~5 µs on its
    arguments)."""
    if isinstance(rng, CryptoRng):
        return rng.words(k)
    if isinstance(rng, np.random.Generator) and k <= _RAW_MAX:
        return np.asarray(rng.bit_generator.random_raw(k), dtype=np.uint64)
    return np.asarray(rng.integers(0, _WORD, size=int(k), dtype=np.uint64), dtype=np.uint64)


_RAW_MAX = 4096


# --- the public parameters of one call -----------------------------------------------------------

SPLIT = 16
"""n = ⌈b/16⌉: R's acceptance e^{−R/b} stays above e^{−1/8} (CKS's n = b keeps only 63 %)."""
SHARED_FROM = 1024
"""Scales from here on share one geometric table, ρ = e^{−1/16} (no per-scale table)."""
V_BITS = 10
"""V < 2^10 on the fast path (K ≤ 800 entries): V·γ is computed with 10 guard bits."""


@dataclass(frozen=True)
class Params:
    """Everything a round needs, from the public scale only (see the module docstring)."""

    n: int  # R uniform below n; |Y| = R + n·V
    lam: Fraction  # ρ = e^{−λ}: P(V ≥ k) = ρ^k
    b: Fraction  # the exponent's R/b
    gam: Fraction  # the exponent's V·γ (Laplace) or |Y|/b = R/b + V·γ (Gaussian, γ = λ)
    gauss: bool
    c2: Fraction  # the Gaussian's x = R/b + (|Y|/b − c2)²·k2, c2 = σ²/b², k2 = b²/(2σ²)
    k2: Fraction
    accept: float  # a candidate's acceptance probability (sizes the rounds, nothing else)
    wide: bool  # |Y| may exceed int64 on the fast path: object output
    geo: np.ndarray  # the geometric's table (:func:`_table`)
    consts: np.ndarray  # the kernel's constants (:func:`_consts`)


def _consts(n: int, b: Fraction, gam: Fraction, gauss: bool, c2: Fraction,
            k2: Fraction, size: int) -> np.ndarray:
    """The kernel's constants: [n, 2^64 mod n (Lemire's threshold), e, inv, g, c2, k2, gauss,
    MARGIN + 2^31, MARGIN, K], the 128-bit ones as two words (high first). R/b = ⌊R·inv/2^e⌋ in
    Q112 (e the bit length of n, inv = ⌊2^(112+e)/b⌋ < 2^111 as b > 8n for n ≥ 2; 0 when n = 1,
    R = 0); V·γ = ⌊V·g/2^10⌋ (g = ⌊γ·2^122⌋, V < 2^10; 0 when K = 1: V = 0 on the fast path);
    ⌊c2·2^112⌋, ⌊k2·2^112⌋."""
    e = n.bit_length()
    inv = 0 if n == 1 else (b.denominator << (FX + e)) // b.numerator
    gq = 0 if size == 1 else math.floor(gam * (1 << (FX + V_BITS)))  # K = 1: V = 0 (fast path)
    wide = [inv, gq, math.floor(c2 * (1 << FX)), math.floor(k2 * (1 << FX))]
    if any(v >> 128 for v in wide):
        raise AssertionError("a kernel constant exceeds 128 bits")
    return np.array([n, (_WORD - n) % n, e, *[x for v in wide for x in (v >> 64, v & _M64)],
                     int(gauss), (MARGIN + (1 << 31)) >> 64, (MARGIN + (1 << 31)) & _M64,
                     MARGIN >> 64, MARGIN & _M64, size], dtype=np.uint64)


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


@lru_cache(maxsize=64)
def _table(lam: Fraction) -> tuple[np.ndarray, int]:
    """The geometric's table for ρ = e^{−λ}, λ ≥ 1/16, as a (3, L) uint64 array and K: T_k =
    ⌊ρ^k·2^96⌋ for k = 1 … K (K the first k with ρ^k < 2^-72; powers of ρ's bounds at 256 bits,
    an entry they do not settle computed on its own) as high 64 and low 32 bits, 16 entries 0
    after them; row 2: base[z] = #{k : T_k ≥ 2^(96−z)}, z = 0 … 96.

    A 96-bit W with z leading zeros lies in [2^(95−z), 2^(96−z)), so #{k : T_k > W} is base[z]
    plus the count among the T_k in (2^(95−z), 2^(96−z)): at most ln 2/λ + 1 ≤ 13 entries."""
    if lam < Fraction(1, SPLIT):
        raise ValueError(f"the geometric's table needs λ ≥ 1/{SPLIT}; got {lam}.")
    g = 256
    p, q = lam.numerator, lam.denominator
    lo1, hi1 = exp_neg_interval(p, q, g)
    lo, hi = lo1, hi1
    out = []
    k = 1
    while True:
        a, c = lo >> (g - U_BITS), hi >> (g - U_BITS)
        out.append(a if a == c else _floor_exp_neg(k * p, q, U_BITS))
        if out[-1] >> (U_BITS - GEOM_TAIL_BITS) == 0:
            break
        lo, hi = (lo * lo1) >> g, -((-hi * hi1) >> g)
        k += 1
    size = max(len(out) + 16, U_BITS + 1)
    geo = np.zeros((3, size), dtype=np.uint64)
    geo[0, :len(out)] = [v >> 32 for v in out]
    geo[1, :len(out)] = [v & 0xFFFFFFFF for v in out]
    geo[2, :U_BITS + 1] = [sum(1 for v in out if v >= 1 << (U_BITS - z)) for z in range(U_BITS + 1)]
    return geo, len(out)


@lru_cache(maxsize=64)
def _table_ints(lam: Fraction) -> tuple[int, ...]:
    geo, size = _table(lam)
    return tuple((int(geo[0, k]) << 32) | int(geo[1, k]) for k in range(size))


def _finish(n: int, lam: Fraction, b: Fraction, gam: Fraction, gauss: bool, c2: Fraction,
            k2: Fraction, accept: float) -> Params:
    geo, size = _table(lam)
    wide = n * (size + 1) >= 1 << 63
    return Params(n, lam, b, gam, gauss, c2, k2, accept, wide, geo,
                  _consts(n, b, gam, gauss, c2, k2, size))


def laplace_params(scale: Fraction) -> Params | None:
    """The round parameters of the discrete Laplace, P(y) ∝ e^{−|y|/b} (None: out of range);
    :func:`_laplace_params`, cached by the scale's numerator and denominator."""
    b = Fraction(scale)
    return _laplace_params(b.numerator, b.denominator)


def gaussian_params(sigma2: Fraction) -> Params | None:
    """The round parameters of N_Z(0, σ²) (None: out of range); :func:`_gaussian_params`,
    cached by σ²'s numerator and denominator (a Fraction's hash is recomputed at every call)."""
    s2 = Fraction(sigma2)
    return _gaussian_params(s2.numerator, s2.denominator)


@lru_cache(maxsize=256)
def _laplace_params(num: int, den: int) -> Params | None:
    """The discrete Laplace's round parameters for b = num/den.

    n = ⌈b/16⌉, R < n kept with probability e^{−R/b}; below b = 1024, V has ratio
    ρ = e^{−n/b} (γ = 0); from there on ρ = e^{−1/16} and the exponent adds V·(n/b − 1/16) ≥ 0
    (then P(R, V, kept) ∝ e^{−V/16}·e^{−R/b − V(n/b − 1/16)} = e^{−(R + nV)/b} as well).
    """
    b = Fraction(num, den)
    n = max(1, _ceil(b / SPLIT))
    if n >= LIMB_MAX:
        return None
    lam = Fraction(1, SPLIT) if b >= SHARED_FROM else Fraction(n) / b
    gam = Fraction(n) / b - lam
    bf = float(b)
    keep = 1.0 if n == 1 else -math.expm1(-n / bf) / (n * -math.expm1(-1 / bf))
    rho = math.exp(-float(lam))
    keep *= (1 - rho) / (1 - rho * math.exp(-float(gam)))  # E e^{-V·γ}
    zero = -math.expm1(-1 / bf)  # P(|Y| = 0) of the target
    return _finish(n, lam, b, gam, False, Fraction(0), Fraction(0), keep * (1 - zero / 2))


@lru_cache(maxsize=256)
def _gaussian_params(num: int, den: int) -> Params | None:
    """N_Z(0, σ²)'s round parameters for σ² = num/den.

    CKS 2020, Alg. 3 with a proposal scale b ≈ σ (any b > 0 is exact): σ ≥ 64, b = 16·n with
    n = round(σ/16) (the shared table, λ = 1/16); else b = ⌊σ·2^32⌋/2^32, n = ⌈b/16⌉, λ = n/b.
    """
    s2 = Fraction(num, den)
    if s2 < SIGMA2_MIN:
        return None
    if s2 >= 64 * 64:
        n = (math.isqrt(s2.numerator // s2.denominator) + SPLIT // 2) // SPLIT
        if n >= LIMB_MAX:
            return None
        b = Fraction(SPLIT * n)
        lam = Fraction(1, SPLIT)
    else:
        b = Fraction(math.isqrt((s2.numerator << 64) // s2.denominator), 1 << 32)
        n = max(1, _ceil(b / SPLIT))
        lam = Fraction(n) / b
    c2 = s2 / (b * b)
    k2 = 1 / (2 * c2)
    sf, bf = float(s2), float(b)
    theta = (sum(math.exp(-y * y / (2 * sf)) for y in range(-80, 81)) if sf < 64
             else math.sqrt(2 * math.pi * sf))
    accept = -math.expm1(-float(lam)) / (2 * n) * math.exp(-sf / (2 * bf * bf)) * theta
    return _finish(n, lam, b, lam, True, c2, k2, accept)


# --- the compiled kernel -------------------------------------------------------------------------

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_S1 = np.uint64(1)
_S10 = np.uint64(10)
_S6 = np.uint64(6)
_S15 = np.uint64(15)
_U96 = np.uint64(96)
_S31 = np.uint64(31)
_S54 = np.uint64(54)
_S16 = np.uint64(16)
_S32 = np.uint64(32)
_S40 = np.uint64(40)
_S48 = np.uint64(48)
_S49 = np.uint64(49)
_S63 = np.uint64(63)
_S64 = np.uint64(64)
_LOW32 = np.uint64(0xFFFFFFFF)
_LOW8 = np.uint64(0xFF)
_KMAX = np.uint64(K_MAX)
_EJ1 = np.uint64(E_J1)
_EJ2 = np.uint64(E_J2)
_STEPS = (np.uint64(8), np.uint64(4), np.uint64(2), np.uint64(1))
_TOP = np.uint64(1 << 63)
_H2 = np.uint64(1 << 63)
_H3 = np.uint64((1 << 64) // 6)
_H4 = np.uint64((1 << 64) // 24)
_H5 = np.uint64((1 << 64) // 120)
_KLAST = np.uint64(K_MAX - 1)


def _umulh(a, b):  # pragma: no cover - replaced by an LLVM intrinsic (one `mul`) when compiled
    return np.uint64((int(a) * int(b)) >> 64)


def _clz(a):  # pragma: no cover - replaced by an LLVM intrinsic (ctlz) when compiled
    return np.uint64(64 - int(a).bit_length())


def _mul256(ah, al, bh, bl):  # pragma: no cover - compiled
    """The 256-bit product of two 128-bit numbers as limbs (l3, l2, l1)  (l0 unused)."""
    p0h = _umulh(al, bl)
    p1h = _umulh(al, bh)
    p1l = al * bh
    p2h = _umulh(ah, bl)
    p2l = ah * bl
    p3h = _umulh(ah, bh)
    p3l = ah * bh
    s = p0h + p1l
    c1 = np.uint64(s < p0h)
    l1 = s + p2l
    c1 += np.uint64(l1 < s)
    s2 = p1h + p2h
    c2 = np.uint64(s2 < p1h)
    s3 = s2 + p3l
    c2 += np.uint64(s3 < s2)
    l2 = s3 + c1
    c2 += np.uint64(l2 < s3)
    return p3h + c2, l2, l1


def _mul_q112(ah, al, bh, bl):  # pragma: no cover - compiled
    """⌊a·b/2^112⌋ (the result must fit 128 bits)."""
    l3, l2, l1 = _mul256(ah, al, bh, bl)
    return (l2 >> _S48) | (l3 << _S16), (l1 >> _S48) | (l2 << _S16)


def _mul_q127(ah, al, bh, bl):  # pragma: no cover - compiled
    """⌊a·b/2^127⌋ (the result must fit 128 bits)."""
    l3, l2, l1 = _mul256(ah, al, bh, bl)
    return (l2 >> _S63) | (l3 << _S1), (l1 >> _S63) | (l2 << _S1)


def _exp_q127(xh, xl, et):  # pragma: no cover - compiled
    """(k, e^{−x}·2^127) for x = X/2^112, X = (xh, xl), k = ⌊x⌋: within 2^33 units when k < 64
    (from k ≥ 64 on, the value for min(k, 63)).

    x = k + j₁/256 + j₂/65536 + r (its bits), r < 2^-16; e^{−r} = 1 − r·(1 − r·H(r)), H by
    Horner in 64 bits (error < 3·2^-64, times r² in the result: < 2^-94.4).
    """
    k = xh >> _S48
    kc = min(k, _KLAST)
    j1 = ((xh >> _S40) & _LOW8) + _EJ1
    j2 = ((xh >> _S32) & _LOW8) + _EJ2
    rh = ((xh & _LOW32) << _S15) | (xl >> _S49)  # r = X mod 2^96, in Q127 (< 2^111)
    rl = xl << _S15
    r64 = (rh << _S1) | (rl >> _S63)  # ⌊r·2^64⌋ < 2^48
    h = _H5
    h = _H4 - _umulh(r64, h)
    h = _H3 - _umulh(r64, h)
    h = _H2 - _umulh(r64, h)  # H(r)·2^64
    tl = rh * h  # r·H in Q127: rh·h + ⌊rl·h/2^64⌋
    th = _umulh(rh, h)
    c = _umulh(rl, h)
    tl2 = tl + c
    th = th + np.uint64(tl2 < tl)
    sl = _U0 - tl2  # 1 − r·H = 2^127 − t
    sh = _TOP - th - np.uint64(tl2 != _U0)
    qh, ql = _mul_q127(rh, rl, sh, sl)
    pl = _U0 - ql  # e^{−r} ≈ 2^127 − r·(1 − r·H)
    ph = _TOP - qh - np.uint64(ql != _U0)
    ah, al = _mul_q127(et[0, kc], et[1, kc], et[0, j1], et[1, j1])
    ah, al = _mul_q127(ah, al, et[0, j2], et[1, j2])
    ah, al = _mul_q127(ah, al, ph, pl)
    return k, ah, al


def _mul_64x128(a, bh, bl, s_lo, s_hi):  # pragma: no cover - compiled
    """⌊a·b/2^s⌋ for a < 2^64, b < 2^128, 0 < s < 64 (s_hi = 64 − s), as 128 bits."""
    l0 = a * bl
    p0h = _umulh(a, bl)
    l1 = p0h + a * bh
    l2 = _umulh(a, bh) + np.uint64(l1 < p0h)
    return (l1 >> s_lo) | (l2 << s_hi), (l0 >> s_lo) | (l1 << s_hi)


def _candidates(w, m, c, geo, et, status, kept, kept_hi):  # pragma: no cover - compiled
    """Decide ``m`` candidates from the words ``w`` (layout in :func:`run_round`); ``c`` the
    constants of :func:`_consts`, ``geo`` the geometric's table, ``et`` :func:`exp_table`.

    status: 0 rejected, 1 accepted, 2 undecided (finished exactly in Python). The accepted
    candidates, in order: Y = kept_hi·2^64 + kept (signed 64-bit each; kept = Y when
    |Y| < 2^63; every candidate writes there, the position advances when it is accepted).
    Returns accepted + 2^32·undecided.
    """
    count = 0
    undecided = 0
    n = c[0]
    thr = c[1]
    s_lo = c[2]
    s_hi = _S64 - s_lo
    invh = c[3]
    invl = c[4]
    gamh = c[5]
    gaml = c[6]
    c2h = c[7]
    c2l = c[8]
    k2h = c[9]
    k2l = c[10]
    gauss = c[11] != _U0
    mach = c[12]  # margin + 2^31 (the uniform's unknown bits)
    macl = c[13]
    mreh = c[14]  # margin
    mrel = c[15]
    tinyh = et[0, E_TINY]
    tinyl = et[1, E_TINY]
    ntab = c[16]
    has_r = n != _U1
    roff = 3 * m + (m + 63) // 64
    for i in range(m):
        wu = w[roff + i] if has_r else _U0  # public: n = 1 draws no R (R = 0)
        r = _umulh(wu, n)
        lemire = np.uint64((wu * n) >= thr)
        # V = #{k : W < T_k} (T decreasing), W = the 96-bit (vh, vl): base[z] for W's z leading
        # zeros, then a branch-free binary search of 4 steps over the next 16 entries
        vh = w[i]
        vl = w[2 * m + i] >> _S32
        zh = _clz(vh)
        z = min(zh + (zh >> _S6) * _clz(vl << _S32), _U96)
        v = geo[2, z]  # unsigned indices: no wraparound code
        for step in _STEPS:
            j = v + step - _U1
            th = geo[0, j]
            v += step * np.uint64((vh < th) | ((vh == th) & (vl < geo[1, j])))
        tie = np.uint64((v < ntab) & (vh == geo[0, v]) & (vl == geo[1, v]))
        geo_slow = tie | np.uint64(v == ntab)
        fh, fl = _mul_64x128(r, invh, invl, s_lo, s_hi)  # R/b in Q112
        ph, pl = _mul_64x128(v, gamh, gaml, _S10, _S54)  # V·γ in Q112
        if gauss:  # public: the same branch for every candidate of the call
            ul = fl + pl  # |Y|/b
            uh = fh + ph + np.uint64(ul < fl)
            neg = np.uint64((uh < c2h) | ((uh == c2h) & (ul < c2l)))
            mask = _U0 - neg
            d1l = ul - c2l
            d1h = uh - c2h - np.uint64(ul < c2l)
            d2l = c2l - ul
            d2h = c2h - uh - np.uint64(c2l < ul)
            dl = (d2l & mask) | (d1l & ~mask)
            dh = (d2h & mask) | (d1h & ~mask)
            sh, sl = _mul_q112(dh, dl, dh, dl)  # w² < 2^12
            gh, gl = _mul_q112(sh, sl, k2h, k2l)  # w²·b²/(2σ²) < 2^12
        else:
            gh = ph
            gl = pl
        xl = fl + gl
        xh = fh + gh + np.uint64(xl < fl)
        k, ah, al = _exp_q127(xh, xl, et)
        big_x = np.uint64(k >= _KMAX)
        # the uniform's 127 leading bits u: U ∈ [u, u + 1)·2^-127
        # the acceptance's 96-bit uniform W as u = W·2^31: U ∈ [u, u + 2^31)·2^-127
        wah = w[m + i]
        wal = w[2 * m + i] & _LOW32
        uh = wah >> _S1
        ul = (wah << _S63) | (wal << _S31)
        # accept: u + 2^31 + margin ≤ A
        bl = ul + macl
        bh = uh + mach + np.uint64(bl < ul)
        acc = np.uint64((bh < ah) | ((bh == ah) & (bl <= al)))
        # reject: u ≥ A + margin (x < 64), u ≥ a bound on e^{-63} (x ≥ 64)
        cl2 = al + mrel
        chh = ah + mreh + np.uint64(cl2 < al)
        rej_small = np.uint64((uh > chh) | ((uh == chh) & (ul >= cl2)))
        rej_big = np.uint64((uh > tinyh) | ((uh == tinyh) & (ul >= tinyl)))
        acc = acc & (_U1 - big_x)
        rej = (rej_big & big_x) | (rej_small & (_U1 - big_x))
        # |Y| = R + n·V (128 bits), the sign bit, −0 rejected
        yl = n * v
        yh = _umulh(n, v)
        yl2 = yl + r
        yh = yh + np.uint64(yl2 < yl)
        sign = (w[3 * m + (i >> 6)] >> np.uint64(i & 63)) & _U1
        negzero = sign & np.uint64((yh == _U0) & (yl2 == _U0))
        yi = np.int64(yl2)
        si = np.int64(sign)
        decided = acc | rej
        st = (acc & decided) | (np.uint64(2) * (_U1 - decided))  # 1, 0 or 2
        st = (np.uint64(2) * geo_slow) | (st * (_U1 - geo_slow))
        st = st * (_U1 - (negzero & (_U1 - geo_slow)))
        st = st * lemire
        status[i] = np.uint8(st)
        low = (yi ^ -si) + si  # Y = ±|Y| = hi·2^64 + low, both signed 64-bit
        kept[count] = low
        hi = (np.int64(yh) ^ -si) + si - (si & np.int64(yl2 != _U0))
        kept_hi[count] = hi + np.int64(np.uint64(low) >> _S63)
        count += np.int64(st == _U1)
        undecided += np.int64(st >> _U1)
    return count + (undecided << 32)


_JIT: dict[str, Any] = {"cache": True, "nogil": True, "boundscheck": False}
_COMPILED = ("_mul256", "_mul_q112", "_mul_q127", "_exp_q127", "_mul_64x128",
             "_candidates")  # callees first
_STATE: dict[str, bool] = {}
_LOCK = threading.Lock()
NO_NUMBA_MESSAGE = ("numba is not installed: the exact samplers use their NumPy/Python-int "
                    "path (same distributions, much slower); `pip install numba` for the "
                    "compiled one")


def _intrinsics() -> tuple[Any, Any]:
    """(umulh, clz): the high word of a 64 × 64-bit product and the leading zeros of a word."""
    from llvmlite import ir  # type: ignore[import-untyped]
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def umulh(typingctx: Any, a: Any, b: Any) -> Any:  # pragma: no cover - compiled
        if a != types.uint64 or b != types.uint64:
            return None
        sig = types.uint64(types.uint64, types.uint64)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            wide = ir.IntType(128)
            prod = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
            return builder.trunc(builder.lshr(prod, ir.Constant(wide, 64)), ir.IntType(64))

        return sig, codegen

    @intrinsic
    def clz(typingctx: Any, a: Any) -> Any:  # pragma: no cover - compiled
        if a != types.uint64:
            return None

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))  # 64 for 0

        return types.uint64(types.uint64), codegen

    return umulh, clz


def kernels_available() -> bool:
    """Whether the compiled kernel can run (imports numba and wraps the loops on first call)."""
    ready = _STATE.get("ready")
    if ready is not None:
        return ready
    with _LOCK:
        if "ready" not in _STATE:
            try:
                import numba
            except ImportError:
                _STATE["ready"] = False
                warnings.warn(NO_NUMBA_MESSAGE, RuntimeWarning, stacklevel=3)
            else:
                names = globals()
                names["_umulh"], names["_clz"] = _intrinsics()
                for name in _COMPILED:  # callees inlined in numba's IR: no calls, no refcounts
                    opts: dict[str, Any] = dict(_JIT, inline="never" if name == "_candidates"
                                                else "always")
                    names[name] = numba.njit(**opts)(names[name])
                _STATE["ready"] = True
    return _STATE["ready"]


# --- one round -----------------------------------------------------------------------------------


def _slow(rng: Any, prm: Params, w: np.ndarray, m: int, i: int) -> tuple[bool, int]:
    """The exact decision of candidate ``i`` (its words in ``w``) and its value."""
    r = (int(w[_r_offset(m) + i]) * prm.n) >> 64 if prm.n > 1 else 0  # Lemire: kernel's test
    w_geo = (int(w[i]) << 32) | (int(w[2 * m + i]) >> 32)
    table = _table_ints(prm.lam)
    v = bisect.bisect_left([-t for t in table], -w_geo)  # #{k : W < T_k}, T decreasing
    if v == len(table) or table[v] == w_geo:  # U < ρ^k for k ≤ v; k = v + 1 on more bits
        geo = _Uniform(rng, w_geo, U_BITS)
        p, q = prm.lam.numerator, prm.lam.denominator
        while geo.below_exp((v + 1) * p, q):  # V = #{k ≥ 1 : U < ρ^k}
            v += 1
    mag = r + prm.n * v
    sign = (int(w[3 * m + (i >> 6)]) >> (i & 63)) & 1
    if sign and mag == 0:
        return False, 0
    x = Fraction(r) / prm.b
    x += (mag / prm.b - prm.c2) ** 2 * prm.k2 if prm.gauss else v * prm.gam
    acc = _Uniform(rng, (int(w[m + i]) << 32) | (int(w[2 * m + i]) & 0xFFFFFFFF), U_BITS)
    return acc.below_exp(x.numerator, x.denominator), -mag if sign else mag




def run_round(rng: Any, prm: Params, m: int) -> np.ndarray:
    """The accepted values of ``m`` fresh candidates, in candidate order (int64, or an object
    array of Python ints when ``prm.wide`` or a slow path produced a value beyond int64).

    Words: the geometric's uniform's high 64 bits (m), the acceptance's (m), their last 32 bits
    (m: the geometric's in the high half), the signs (64 a word), then R's (m; none when n = 1).
    """
    words = _words(rng, _r_offset(m) + (m if prm.n > 1 else 0))
    status = np.empty(m, dtype=np.uint8)
    kept = np.empty(m, dtype=np.int64)
    kept_hi = np.empty(m, dtype=np.int64)
    counts = _candidates(words, m, prm.consts, prm.geo, exp_table(), status, kept, kept_hi)
    accepted, undecided = counts & 0xFFFFFFFF, counts >> 32
    values: np.ndarray = kept[:accepted]
    if prm.wide:
        values = _widen(values, kept_hi[:accepted])
    if not undecided:  # the slow exact path: probability < 2^-71 per candidate
        return values
    extra = {}
    for i in np.flatnonzero(status == 2).tolist():
        ok, value = _slow(rng, prm, words, m, i)
        if ok:
            extra[i] = value
    if not extra:
        return values
    where = np.concatenate([np.flatnonzero(status == 1), list(extra)])
    merged = np.concatenate([values.astype(object), list(extra.values())])[np.argsort(where)]
    if not prm.wide and all(-(1 << 63) < v < 1 << 63 for v in extra.values()):
        return merged.astype(np.int64)
    return merged


def _r_offset(m: int) -> int:
    return 3 * m + (m + 63) // 64


def _widen(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Python ints high·2^64 + low from signed 64-bit halves: the same object operations for
    every value (their cost varies only with the ints' sizes)."""
    return low.astype(object) + high.astype(object) * _WORD
