"""Test utilities: an emulator of R's default random number generator (docs/spec/SPEC_dppca.md App. A).

``RRNG(seed)`` reproduces ``set.seed(seed)`` followed by ``rnorm``/``rexp``/``runif`` draws of R
(Mersenne-Twister, Inversion normals, Ahrens-Dieter exponentials) and VGAM's ``rlaplace``, plus
``integers`` (exactly uniform integers from the 32-bit stream, for the exact samplers). It
satisfies the :class:`~dppca_dask.privacy.rng.Rng` protocol, so tests inject it as ``rng=`` to check the
package against numbers printed by the R package. Only tests import this module.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import ndtri

__all__ = ["RRNG"]

_Q = (
    0.6931471805599453, 0.9333736875190459, 0.9888777961838675, 0.9984959252914960040,
    0.9998292811061389, 0.9999833164100727, 0.9999985508926781, 0.9999998906925558,
    0.9999999924734159, 0.9999999995283275, 0.9999999999728814, 0.9999999999985598,
    0.9999999999999289, 0.9999999999999968, 0.9999999999999999, 1.0,
)


class RRNG:
    """R's ``set.seed(seed)`` stream.

    Examples
    --------
    >>> [round(float(v), 8) for v in RRNG(123).normal(size=3)]
    [-0.56047565, -0.23017749, 1.55870831]
    """

    def __init__(self, seed: int) -> None:
        s = seed & 0xFFFFFFFF
        for _ in range(50):
            s = (69069 * s + 1) & 0xFFFFFFFF
        state = []
        for _ in range(625):
            s = (69069 * s + 1) & 0xFFFFFFFF
            state.append(s)
        self._mt = state[1:]
        self._mti = 624

    def _u32(self) -> int:
        n, m, mt = 624, 397, self._mt
        if self._mti >= n:
            for kk in range(n):
                y = (mt[kk] & 0x80000000) | (mt[(kk + 1) % n] & 0x7FFFFFFF)
                mt[kk] = mt[(kk + m) % n] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            self._mti = 0
        y = mt[self._mti]
        self._mti += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        return y & 0xFFFFFFFF

    def unif(self) -> float:
        v = self._u32() * 2.3283064365386963e-10
        if v <= 0.0:
            return 0.5 * 2.328306437080797e-10
        if 1.0 - v <= 0.0:
            return 1.0 - 0.5 * 2.328306437080797e-10
        return v

    def norm(self) -> float:
        u = self.unif()
        u = int(134217728 * u) + self.unif()
        return float(ndtri(u / 134217728))

    def exp(self) -> float:
        a, u = 0.0, self.unif()
        while u <= 0.0 or u >= 1.0:
            u = self.unif()
        while True:
            u += u
            if u > 1.0:
                break
            a += _Q[0]
        u -= 1.0
        if u <= _Q[0]:
            return a + u
        i, umin = 0, self.unif()
        while True:
            ustar = self.unif()
            umin = min(umin, ustar)
            i += 1
            if u <= _Q[i]:
                break
        return a + umin * _Q[0]

    # --- the Rng protocol -------------------------------------------------------------------
    @staticmethod
    def _count(size: Any) -> int:
        return 1 if size is None else int(np.prod(size))

    def _shape(self, values: list[float], size: Any) -> Any:
        return values[0] if size is None else np.asarray(values).reshape(size)

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Any:
        k = self._count(size)
        vals = [loc] * k if scale == 0 else [loc + scale * self.norm() for _ in range(k)]
        return self._shape(vals, size)

    def exponential(self, scale: float = 1.0, size: Any = None) -> Any:
        return self._shape([self.exp() * scale for _ in range(self._count(size))], size)

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None) -> Any:
        return self._shape(
            [low + (high - low) * self.unif() for _ in range(self._count(size))], size
        )

    def laplace(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Any:
        """VGAM ``rlaplace``: one uniform per draw."""
        vals = []
        for _ in range(self._count(size)):
            u = self.unif()
            tail = math.log(u) if u < 0.5 else math.log1p(-u)
            vals.append(loc - math.copysign(1.0, u - 0.5) * scale * (math.log(2.0) + tail))
        return self._shape(vals, size)

    def _below(self, m: int) -> int:
        """Exactly uniform on {0, …, m−1}: whole 32-bit words, top bits kept, rejection."""
        if m <= 1:
            return 0
        nbits = (m - 1).bit_length()
        nwords = -(-nbits // 32)
        drop = 32 * nwords - nbits
        while True:
            v = 0
            for _ in range(nwords):
                v = (v << 32) | self._u32()
            v >>= drop
            if v < m:
                return v

    def integers(self, low: Any, high: Any = None, size: Any = None, dtype: Any = np.int64,
                 endpoint: bool = False) -> Any:
        """``numpy.random.Generator.integers`` from the 32-bit Mersenne-Twister stream (exact)."""
        if high is None:
            low, high = 0, low
        lo = np.asarray(low, dtype=object)
        hi = np.asarray(high, dtype=object)
        shape = np.broadcast_shapes(lo.shape, hi.shape) if size is None else (
            (size,) if np.ndim(size) == 0 else tuple(size))
        lo = np.broadcast_to(lo, shape).ravel()
        hi = np.broadcast_to(hi, shape).ravel()
        extra = 1 if endpoint else 0
        vals = [int(a) + self._below(int(b) - int(a) + extra) for a, b in zip(lo, hi, strict=True)]
        out = np.asarray(vals, dtype=object).astype(dtype).reshape(shape)
        return out[()] if out.ndim == 0 and size is None else out

    def r_matrix(self, n: int, p: int) -> np.ndarray:
        """``matrix(rnorm(n * p), n, p)`` (column-major fill)."""
        return np.asarray(self.normal(size=n * p)).reshape(p, n).T
