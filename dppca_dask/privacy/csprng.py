"""The default noise generator: the operating system's CSPRNG, read in buffered blocks.

:class:`CryptoRng` implements the :class:`~dppca_dask.privacy.rng.Rng` protocol on bytes from
:func:`os.urandom` (``getrandom(2)`` on Linux: the kernel's ChaCha20 CSPRNG), so a release made
with ``rng=None`` draws every bit of its noise from a cryptographically secure generator, as
OpenDP's and Google's DP libraries do -- not from a statistical PRNG such as PCG64, whose state
could in principle be recovered from its outputs.

* ``integers`` is exact: ranges up to 2^64, Lemire's multiply-shift with rejection, so every value
  is exactly equally likely; the number of rejections is independent of the values returned.
* the continuous draws (``random``, ``uniform``, ``exponential``, ``normal``, ``laplace``) use
  53-bit uniforms; the mechanisms use only ``exponential`` (AboveThreshold, the exponential
  mechanism) and ``integers`` (the exact samplers of :mod:`dppca_dask.privacy.exact_noise`).

Bytes are read in blocks that double from 4 KiB to 256 KiB (one system call per ~32 000 words
once the generator is in use; a fresh generator serving one small release reads 4 KiB, not
256 KiB: ~10 µs instead of ~0.5 ms); the buffer is dropped after a ``fork`` (a child never
reuses its parent's bytes) and guarded by a lock. It has no seed and no
state to save: it cannot be reproduced, which is the point (seeded generators stay available for
tests and demos, :func:`dppca_dask.privacy.rng.as_rng`).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

__all__ = ["CryptoRng", "mul64"]

_BLOCK = 1 << 18  # bytes per os.urandom call, at most
_FIRST = 1 << 12  # the first call's: a generator often serves one small release
_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def mul64(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact 128-bit products a·b of uint64 arrays, as (high word, low word).

    Examples
    --------
    >>> hi, lo = mul64(np.array([2**63 + 5], dtype=np.uint64), np.array([6], dtype=np.uint64))
    >>> int(hi[0]) * 2**64 + int(lo[0]) == (2**63 + 5) * 6
    True
    """
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    a0, a1 = a & _M32, a >> _S32
    b0, b1 = b & _M32, b >> _S32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _S32) + (p01 & _M32) + (p10 & _M32)
    lo = (mid << _S32) | (p00 & _M32)
    hi = p11 + (p01 >> _S32) + (p10 >> _S32) + (mid >> _S32)
    return hi, lo


def _shape(size: Any) -> tuple[int, ...]:
    if size is None:
        return ()
    return (int(size),) if np.ndim(size) == 0 else tuple(int(s) for s in size)


class CryptoRng:
    """Random draws from the operating system's CSPRNG (see the module docstring).

    Examples
    --------
    >>> g = CryptoRng()
    >>> v = g.integers(0, 10, size=1000)
    >>> bool(v.min() >= 0 and v.max() < 10), v.dtype == np.int64
    (True, True)
    >>> bool(0.0 <= float(g.exponential(2.0)))
    True
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buf = b""
        self._pos = 0
        self._pid = os.getpid()
        self._block = _FIRST
        self.drawn_bytes = 0
        """How many random bytes were handed out (0: nothing drawn yet; the accountant's
        refund test reads it)."""

    def __repr__(self) -> str:
        return "CryptoRng(os.urandom)"

    def _bytes(self, n: int) -> bytes:
        with self._lock:
            if self._pid != os.getpid():  # forked: never share the parent's unread bytes
                self._buf, self._pos, self._pid = b"", 0, os.getpid()
            if self._pos + n > len(self._buf):
                self._buf = self._buf[self._pos:] + os.urandom(max(self._block, n))
                self._pos = 0
                self._block = min(2 * self._block, _BLOCK)  # 4 KiB, 8 KiB, ... 256 KiB
            out = self._buf[self._pos:self._pos + n]
            self._pos += n
            self.drawn_bytes += n
            return out

    def words(self, n: int) -> np.ndarray:
        """``n`` independent uniform 64-bit words (uint64)."""
        size = 8 * int(n)
        if size <= _BLOCK:
            return np.frombuffer(self._bytes(size), dtype="<u8").astype(np.uint64)
        out = np.empty(size, dtype=np.uint8)  # large: read into it, one copy per byte
        with self._lock:
            if self._pid != os.getpid():
                self._buf, self._pos, self._pid = b"", 0, os.getpid()
            have = min(len(self._buf) - self._pos, size)
            out[:have] = np.frombuffer(self._buf, dtype=np.uint8, count=have, offset=self._pos)
            self._pos += have
            for start in range(have, size, _BLOCK):  # the bytes that follow, in order
                chunk = os.urandom(min(_BLOCK, size - start))
                out[start:start + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
            self.drawn_bytes += size
        return out.view("<u8").astype(np.uint64, copy=False)

    def _below(self, m: np.ndarray) -> np.ndarray:
        """Exactly uniform uint64 values in [0, m) for uint64 m ≥ 1 (m = 0 stands for 2^64)."""
        m = np.asarray(m, dtype=np.uint64).ravel()
        if m.size and (m == m[0]).all() and not int(m[0]) & (int(m[0]) - 1):  # 2^k: top k bits
            bits = (int(m[0]) or 1 << 64).bit_length() - 1
            if bits == 0:
                return np.zeros(m.size, dtype=np.uint64)
            w = self.words(m.size)
            return w >> np.uint64(64 - bits) if bits < 64 else w
        out = np.empty(m.size, dtype=np.uint64)
        todo = np.arange(m.size)
        full = m == 0
        # Lemire (2019): hi(w·m) is uniform once w's low product part clears (2^64 − m) mod m
        limit = (np.uint64(0) - m) % np.where(full, np.uint64(1), m)  # 0 where m = 2^64
        while todo.size:
            w = self.words(todo.size)
            mt = m[todo]
            hi, lo = mul64(w, mt)
            value = np.where(full[todo], w, hi)
            ok = full[todo] | (lo >= limit[todo])
            out[todo[ok]] = value[ok]
            todo = todo[~ok]
        return out

    def integers(self, low: Any, high: Any = None, size: Any = None, dtype: Any = np.int64,
                 endpoint: bool = False) -> Any:
        """Uniform integers in [low, high) (``endpoint``: [low, high]) as
        :meth:`numpy.random.Generator.integers`; a range may be up to 2^64 wide."""
        if high is None:
            low, high = 0, low
        lo = np.asarray(low, dtype=object)
        hi = np.asarray(high, dtype=object)
        shape = np.broadcast_shapes(lo.shape, hi.shape) if size is None else _shape(size)
        extra = 1 if endpoint else 0
        if lo.ndim == 0 and hi.ndim == 0:  # the common case: one range for every draw
            span = [int(hi) - int(lo) + extra]
        else:
            lo, hi = np.broadcast_to(lo, shape).ravel(), np.broadcast_to(hi, shape).ravel()
            span = [int(b) - int(a) + extra for a, b in zip(lo, hi, strict=True)]
        if span and (min(span) < 1 or max(span) > 1 << 64):
            bad = min(span) if min(span) < 1 else max(span)
            raise ValueError(f"CryptoRng.integers needs 1 <= high - low <= 2^64; got a range "
                             f"of {bad}.")
        m = np.array([s & ((1 << 64) - 1) for s in span], dtype=np.uint64)
        n = int(np.prod(shape, dtype=np.int64))
        draws = self._below(np.broadcast_to(m, (n,)) if m.size == 1 else m)
        if lo.ndim == 0 and int(lo) == 0:
            vals: Any = draws
        elif lo.ndim == 0 and -(1 << 62) < int(lo) < 1 << 62 and span[0] < 1 << 62:
            vals = draws.astype(np.int64) + int(lo)
        else:
            base = np.broadcast_to(lo, (n,))
            vals = np.array([int(a) + int(d) for a, d in zip(base, draws.tolist(), strict=True)],
                            dtype=object)
        out = np.asarray(vals).astype(dtype).reshape(shape)
        return out[()] if out.ndim == 0 and size is None else out

    def _unit(self, size: Any) -> np.ndarray:
        """53-bit uniforms in the open interval (0, 1): (k + ½)·2^-53."""
        shape = _shape(size)
        k = self.words(int(np.prod(shape, dtype=np.int64))) >> np.uint64(11)
        return ((k.astype(np.float64) + 0.5) * 2.0 ** -53).reshape(shape)

    @staticmethod
    def _out(values: np.ndarray, size: Any) -> Any:
        return float(values) if size is None else values

    def random(self, size: Any = None) -> Any:
        """Uniform floats in [0, 1) (53 bits)."""
        shape = _shape(size)
        k = self.words(int(np.prod(shape, dtype=np.int64))) >> np.uint64(11)
        return self._out((k.astype(np.float64) * 2.0 ** -53).reshape(shape), size)

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None) -> Any:
        u = np.asarray(self.random(size))
        return self._out(low + (high - low) * u, size)

    def exponential(self, scale: float = 1.0, size: Any = None) -> Any:
        """Exp(1/scale) by inversion, −scale·log(U) with U in (0, 1)."""
        return self._out(-scale * np.log(self._unit(size)), size)

    def standard_normal(self, size: Any = None) -> Any:
        """N(0, 1) by Box–Muller on two open-interval uniforms."""
        shape = _shape(size)
        u1, u2 = self._unit(shape), self._unit(shape)
        return self._out(np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2), size)

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Any:
        return self._out(loc + scale * np.asarray(self.standard_normal(size)), size)

    def laplace(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Any:
        """Laplace(loc, scale) by inversion on U in (−½, ½)."""
        u = self._unit(size) - 0.5
        return self._out(loc - scale * np.sign(u) * np.log1p(-2.0 * np.abs(u)), size)
