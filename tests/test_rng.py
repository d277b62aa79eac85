"""The default generator (rng=None): the OS CSPRNG behind the Rng protocol (dppca_dask.privacy.csprng)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from scipy import stats

from dppca_dask.privacy.csprng import CryptoRng, mul64
from dppca_dask.privacy.rng import Rng, as_rng

ALPHA = 1e-6


def _chi2_uniform(x: np.ndarray, m: int) -> float:
    counts = np.bincount(np.asarray(x, dtype=np.int64), minlength=m)
    assert counts.size == m
    return float(stats.chisquare(counts).pvalue)


def test_as_rng__none_is_the_csprng_unseeded():
    state = as_rng(None)
    assert isinstance(state.generator, CryptoRng) and isinstance(state.generator, Rng)
    assert not state.seeded and state.source == "csprng (os entropy)"
    assert not as_rng(CryptoRng()).seeded
    assert as_rng(3).seeded and as_rng(3).source == "caller-seeded"


def test_as_rng__seeded_generators_unchanged():
    a = as_rng(42).generator.integers(0, 2**64, size=4, dtype=np.uint64)
    b = np.random.default_rng(42).integers(0, 2**64, size=4, dtype=np.uint64)
    assert a.tolist() == b.tolist()


def test_mul64__exact_128_bit_products():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**64, size=2000, dtype=np.uint64)
    b = rng.integers(0, 2**64, size=2000, dtype=np.uint64)
    a[0] = b[0] = 2**64 - 1
    hi, lo = mul64(a, b)
    assert all((int(h) << 64) | int(l) == int(x) * int(y)
               for h, l, x, y in zip(hi, lo, a, b, strict=True))


@pytest.mark.parametrize("m", [2, 7, 1000, 3 * 2**61 + 5])
def test_integers__exactly_uniform(m):
    g = CryptoRng()
    x = g.integers(0, m, size=60000)
    assert x.dtype == np.int64 and x.min() >= 0 and x.max() < m
    cells = 7 if m > 1000 else m  # a non-power-of-two range: thirds-like cells of [0, m)
    binned = x if m <= 1000 else np.array([int(v) * cells // m for v in x])
    assert _chi2_uniform(binned, cells) > ALPHA


def test_integers__numpy_conventions():
    g = CryptoRng()
    w = g.integers(0, 2**64, size=50000, dtype=np.uint64)
    assert w.dtype == np.uint64
    assert _chi2_uniform((w >> np.uint64(60)).astype(np.int64), 16) > ALPHA
    assert isinstance(g.integers(5), np.int64) and 0 <= g.integers(5) < 5
    v = g.integers(-3, 3, size=20000, endpoint=True)
    assert _chi2_uniform(v + 3, 7) > ALPHA
    per = g.integers(0, np.array([1, 3, 2**40]), dtype=np.int64)
    assert per.shape == (3,) and per[0] == 0 and 0 <= per[1] < 3 and 0 <= per[2] < 2**40
    assert g.integers(0, 2, size=(2, 3)).shape == (2, 3)
    with pytest.raises(ValueError, match="high - low"):
        g.integers(0, 2**64 + 1)
    with pytest.raises(ValueError, match="high - low"):
        g.integers(3, 3)


def test_continuous_draws__distributions():
    g = CryptoRng()
    n = 50000
    assert stats.kstest(g.exponential(2.0, size=n), stats.expon(scale=2.0).cdf).pvalue > ALPHA
    assert stats.kstest(g.normal(1.0, 3.0, size=n), stats.norm(1.0, 3.0).cdf).pvalue > ALPHA
    assert stats.kstest(g.laplace(0.0, 2.0, size=n), stats.laplace(0.0, 2.0).cdf).pvalue > ALPHA
    assert stats.kstest(g.uniform(-1.0, 1.0, size=n), stats.uniform(-1.0, 2.0).cdf).pvalue > ALPHA
    assert stats.kstest(g.random(n), stats.uniform().cdf).pvalue > ALPHA
    assert isinstance(g.exponential(1.0), float) and g.standard_normal((2, 2)).shape == (2, 2)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_buffer__never_shared_with_a_forked_child():
    g = CryptoRng()
    g.words(1)  # fill the buffer
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report its next words, then exit at once
        os.write(write, g.words(4).tobytes())
        os._exit(0)
    os.waitpid(pid, 0)
    child = np.frombuffer(os.read(read, 32), dtype="<u8")
    os.close(read)
    os.close(write)
    assert child.tolist() != g.words(4).tolist()


def test_words__one_stream_whatever_the_read_sizes(monkeypatch):
    # small reads come from the buffer (4 KiB first, doubling), large ones go straight into the
    # array: either way the words are the OS bytes in order, none skipped or repeated
    stream = np.arange(1 << 22, dtype=np.uint64).view(np.uint8)
    pos = {"at": 0}

    def urandom(n: int) -> bytes:
        out = stream[pos["at"]:pos["at"] + n].tobytes()
        pos["at"] += n
        return out

    monkeypatch.setattr(os, "urandom", urandom)
    g = CryptoRng()
    sizes = [3, 700, 100_000, 5, 40_000, 1, 300_000, 9]
    got = np.concatenate([g.words(k) for k in sizes])
    assert (got == np.arange(got.size, dtype=np.uint64)).all()
    assert g.drawn_bytes == 8 * sum(sizes)
