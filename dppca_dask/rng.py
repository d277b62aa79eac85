"""One randomness policy (NumPy SPEC 7): public functions take ``rng=None``, normalised here once.

* ``None`` -- a fresh :class:`numpy.random.Generator` seeded from the operating system's
  cryptographic entropy source (``numpy.random.SeedSequence()`` draws 128 bits through Python's
  ``secrets`` module). The release is marked *unseeded*.
* an ``int`` or :class:`~numpy.random.SeedSequence` -- a reproducible generator; the release is
  marked *seeded*. The seed itself is never stored anywhere by this package.
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
        return "caller-seeded" if self.seeded else "os-entropy"


def as_rng(rng: Any, *, owner: str = "dppca_dask") -> RngState:
    """Normalise the public ``rng`` argument.

    Examples
    --------
    >>> as_rng(None).seeded
    False
    >>> as_rng(7).seeded
    True
    """
    if rng is None:
        return RngState(np.random.default_rng(np.random.SeedSequence()), seeded=False)
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
