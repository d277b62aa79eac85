"""The one answer to "was noise drawn?": :func:`DrawTracker`, a transparent proxy of the
release's generator that notes its first use.

Every entry point asks it: :func:`~dppca_dask.privacy.accountant.account` (the Python API and the
scikit-learn estimators) hands the fit a tracked generator, and the CLI's runner
(:func:`~dppca_dask.pipeline.runner.execute`) tracks the run's generator the same way. A failure
before the first draw refunds the reservation; a failure after it keeps the spend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["DrawTracker"]


class _TrackerBase:
    """Shared part of the :class:`DrawTracker` classes (one per wrapped generator type)."""

    __slots__ = ("_dppca_drawn", "_dppca_on_first", "_dppca_target")

    def __init__(self, target: Any, on_first: Callable[[], None] | None = None) -> None:
        object.__setattr__(self, "_dppca_target", target)
        object.__setattr__(self, "_dppca_drawn", False)
        object.__setattr__(self, "_dppca_on_first", on_first)

    @property
    def drawn(self) -> bool:
        """Whether anything was drawn from (or taken out of) the generator yet."""
        return bool(object.__getattribute__(self, "_dppca_drawn"))

    def _dppca_mark(self) -> Any:
        if not object.__getattribute__(self, "_dppca_drawn"):
            first = object.__getattribute__(self, "_dppca_on_first")
            if first is not None:  # before the draw: a crash in between counts as drawn
                first()
            object.__setattr__(self, "_dppca_drawn", True)
        return object.__getattribute__(self, "_dppca_target")

    def __getattr__(self, name: str) -> Any:  # anything not mirrored on the class counts too
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._dppca_mark(), name)

    def __repr__(self) -> str:
        return f"DrawTracker({object.__getattribute__(self, '_dppca_target')!r})"

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(tracker, np.random.Generator) stays true
        return type(object.__getattribute__(self, "_dppca_target"))


def _mirror(name: str, target: Any) -> Any:
    if callable(getattr(target, name, None)):
        def method(self: _TrackerBase, *args: Any, **kwargs: Any) -> Any:
            return getattr(self._dppca_mark(), name)(*args, **kwargs)

        method.__name__ = name
        return method
    return property(lambda self: getattr(self._dppca_mark(), name))


_TRACKERS: dict[type, type] = {}


# a class factory, named like the classes it makes
def DrawTracker(generator: Any, on_first: Callable[[], None] | None = None) -> Any:
    """A transparent proxy of ``generator`` whose ``drawn`` notes the first draw of any kind.

    ``on_first`` is called once, just *before* the first draw is made (the release service
    notes it durably: a worker killed after it counts as having drawn noise).

    Every public method or attribute of the generator's type is mirrored on the proxy's class
    (so it satisfies :class:`dppca_dask.privacy.rng.Rng` and :func:`~dppca_dask.privacy.rng.as_rng`'s checks,
    and ``isinstance`` against the generator's type); calling or reading any of them -- normal,
    laplace, integers, bit_generator, spawn, ... -- counts as a draw.

    Examples
    --------
    >>> import numpy as np
    >>> tracked = DrawTracker(np.random.default_rng(0))
    >>> isinstance(tracked, np.random.Generator), tracked.drawn
    (True, False)
    >>> _ = tracked.normal(size=2)
    >>> tracked.drawn
    True
    """
    kind = type(generator)
    cls = _TRACKERS.get(kind)
    if cls is None:
        names = [n for n in dir(kind) if not n.startswith("_") and n != "drawn"]
        cls = type(f"Tracked{kind.__name__}", (_TrackerBase,),
                   {"__slots__": (), **{n: _mirror(n, generator) for n in names}})
        _TRACKERS[kind] = cls
    return cls(generator, on_first)
