"""One randomness policy (NumPy SPEC 7): public functions take ``rng=None``, normalised here once.

* ``None`` -- a fresh :class:`~dppca_dask.privacy.csprng.CryptoRng`: every draw comes from the
  operating system's cryptographically secure generator (``os.urandom``, read in buffered
  blocks), not from a statistical PRNG. The release is marked *unseeded*.
* an ``int`` or :class:`~numpy.random.SeedSequence` -- a reproducible generator; the release is
  marked *seeded*. The seed itself is never stored anywhere by this package.
* a :class:`~dppca_dask.privacy.csprng.CryptoRng` -- used as is, marked *unseeded*.
* a :class:`~numpy.random.Generator`, or any object with the methods of :class:`Rng` (for example
  the R random-number emulator in :mod:`dppca_dask.testing`) -- used as is and marked *seeded*
  (the caller controls its state).

Only :mod:`dppca_dask.privacy.mechanisms` and post-processing samplers draw from the generator, and only on
the driver process.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from dppca_dask._validation import bad_param
from dppca_dask.privacy.csprng import CryptoRng

__all__ = ["Rng", "RngState", "as_rng"]


@runtime_checkable
class Rng(Protocol):
    """The draws the mechanisms use; a :class:`numpy.random.Generator` satisfies it."""

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Any: ...

    def laplace(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Any: ...

    def exponential(self, scale: float = 1.0, size: Any = None) -> Any: ...

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None) -> Any: ...

    def integers(self, low: Any, high: Any = None, size: Any = None, dtype: Any = np.int64,
                 endpoint: bool = False) -> Any:
        """Uniform integers in [low, high) as :meth:`numpy.random.Generator.integers` (the exact
        samplers of :mod:`dppca_dask.privacy.exact_noise` draw all their randomness through it)."""
        ...


@runtime_checkable
class _ContinuousRng(Protocol):
    """The older four-method protocol: still accepted by :func:`as_rng` (for samplers outside the
    mechanisms, e.g. synthetic data); the mechanisms also need ``integers``."""

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Any: ...

    def laplace(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Any: ...

    def exponential(self, scale: float = 1.0, size: Any = None) -> Any: ...

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None) -> Any: ...


@dataclass(frozen=True)
class RngState:
    """A normalised generator and whether the caller fixed its state (never the seed itself)."""

    generator: Any
    seeded: bool

    @property
    def source(self) -> str:
        """Where the draws come from: ``"caller-seeded"`` or ``"csprng (os entropy)"``."""
        return "caller-seeded" if self.seeded else "csprng (os entropy)"


def as_rng(rng: Any, *, owner: str = "dppca_dask") -> RngState:
    """Normalise the public ``rng`` argument.

    Examples
    --------
    >>> as_rng(None).seeded
    False
    >>> as_rng(7).seeded
    True
    >>> type(as_rng(None).generator).__name__, as_rng(None).source
    ('CryptoRng', 'csprng (os entropy)')
    """
    if rng is None:
        return RngState(CryptoRng(), seeded=False)
    if isinstance(rng, CryptoRng):  # no state to fix: as unseeded as None
        return RngState(rng, seeded=False)
    if isinstance(rng, bool | np.bool_):
        raise bad_param("rng", owner, "None, an int, a SeedSequence or a Generator", rng)
    if isinstance(rng, numbers.Integral | np.random.SeedSequence):
        if isinstance(rng, numbers.Integral) and int(rng) < 0:
            raise bad_param("rng", owner, "None, a non-negative int, a SeedSequence or a Generator",
                            rng)
        # numpy's stubs list int and np.integer, not numbers.Integral (which it accepts alike).
        seed = cast("int | np.integer[Any] | np.random.SeedSequence", rng)
        return RngState(np.random.default_rng(seed), seeded=True)
    if isinstance(rng, np.random.Generator | Rng | _ContinuousRng):
        return RngState(rng, seeded=True)
    raise bad_param("rng", owner, "None, an int, a SeedSequence or a Generator", rng)
