"""Small parsers for public parameters, all raising one message format.

The format follows scikit-learn's parameter validation: *The 'eps' parameter of dp_loading must
be a float in the range (0, inf). Got -1 instead.*
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, overload

import numpy as np

from dppca_dask.errors import DPPCAError, Fix, ParameterError

__all__ = [
    "Bool",
    "Choice",
    "Constraint",
    "Custom",
    "Int",
    "Real",
    "bad_param",
    "check_axes_limit",
    "count_check",
    "counting_checks",
    "parse_fields",
    "parse_bool",
    "parse_choice",
    "parse_int",
    "parse_real",
]


_E = TypeVar("_E", bound=DPPCAError)


@overload
def bad_param(name: str, owner: str, rule: str, value: Any, *, hint: str | None = None,
              fix: Fix | None = None) -> ParameterError: ...
@overload
def bad_param(name: str, owner: str, rule: str, value: Any, *, cls: type[_E],
              hint: str | None = None, fix: Fix | None = None) -> _E: ...
def bad_param(
    name: str, owner: str, rule: str, value: Any, *, cls: type[DPPCAError] = ParameterError,
    hint: str | None = None, fix: Fix | None = None,
) -> DPPCAError:
    """The standard error for parameter ``name`` of ``owner`` breaking ``rule`` (``"a float in
    the range (0, inf)"``: what the value must be), with its fields
    (:class:`~dppca_dask.errors.DPPCAError`)."""
    return cls(owner=owner, parameter=name, rule=f"must be {rule}", value=value, hint=hint,
               fix=fix)


_CHECKS: ContextVar[Counter[tuple[str, str, str]] | None] = ContextVar("dppca_checks",
                                                                      default=None)


@contextmanager
def counting_checks() -> Iterator[Counter[tuple[str, str, str]]]:
    """Count every option checker call ``(checker, owner, parameter)`` made inside the block
    (``tests/test_options.py``: no checker runs twice in one run)."""
    counter: Counter[tuple[str, str, str]] = Counter()
    token = _CHECKS.set(counter)
    try:
        yield counter
    finally:
        _CHECKS.reset(token)


def count_check(checker: str, owner: str, parameter: str = "") -> None:
    """Note one call of an option checker (a no-op outside :func:`counting_checks`)."""
    counter = _CHECKS.get()
    if counter is not None:
        counter[(checker, owner, parameter)] += 1


class Constraint(Protocol):
    """A declarative rule for one option (as scikit-learn's ``_parameter_constraints``):
    ``parse(value, name, owner)`` returns the value in canonical form or raises the standard
    :class:`~dppca_dask.errors.ParameterError` (with its fields)."""

    def parse(self, value: Any, name: str, owner: str) -> Any: ...


@dataclass(frozen=True)
class Choice:
    """One of ``choices`` (str)."""

    choices: tuple[str, ...]

    def parse(self, value: Any, name: str, owner: str) -> str:
        return parse_choice(value, name, owner, self.choices)


@dataclass(frozen=True)
class Bool:
    """A single bool."""

    def parse(self, value: Any, name: str, owner: str) -> bool:
        return parse_bool(value, name, owner)


@dataclass(frozen=True)
class Int:
    """An int in ``[low, high]``; ``optional``: ``None`` passes as ``None``."""

    low: int | None = None
    high: int | None = None
    optional: bool = False

    def parse(self, value: Any, name: str, owner: str) -> int | None:
        if value is None and self.optional:
            return None
        return parse_int(value, name, owner, low=self.low, high=self.high)


@dataclass(frozen=True)
class Real:
    """A float in an interval (open ends by default)."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = True
    high_open: bool = True

    def parse(self, value: Any, name: str, owner: str) -> float:
        return parse_real(value, name, owner, low=self.low, high=self.high,
                          low_open=self.low_open, high_open=self.high_open)


@dataclass(frozen=True)
class Custom:
    """A rule of its own: ``fn(value, owner)`` parses (and counts itself as a checker)."""

    fn: Callable[[Any, str], Any]

    def parse(self, value: Any, name: str, owner: str) -> Any:
        return self.fn(value, owner)


def parse_fields(constraints: Mapping[str, Constraint], values: Mapping[str, Any],
                 owner: str) -> dict[str, Any]:
    """Each of ``values`` parsed by its constraint, in the constraints' order (the first
    broken rule raises)."""
    unknown = [name for name in values if name not in constraints]
    if unknown:  # a bug in the caller, not a user error
        raise TypeError(f"{owner}: no constraint for {unknown}")
    return {name: rule.parse(values[name], name, owner) for name, rule in constraints.items()
            if name in values}


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def parse_real(
    value: Any,
    name: str,
    owner: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = True,
    high_open: bool = True,
    cls: type[DPPCAError] = ParameterError,
) -> float:
    """Return ``value`` as a finite-or-bounded float in the stated interval, else raise."""
    count_check("parse_real", owner, name)
    lb = "(" if low_open else "["
    rb = ")" if high_open else "]"
    lo = "-inf" if low == -math.inf else f"{low:g}"
    hi = "inf" if high == math.inf else f"{high:g}"
    rule = f"a float in the range {lb}{lo}, {hi}{rb}"
    if not _is_real(value):
        raise bad_param(name, owner, rule, value, cls=cls)
    x = float(value)
    if math.isnan(x):
        raise bad_param(name, owner, rule, value, cls=cls)
    below = x <= low if low_open else x < low
    above = x >= high if high_open else x > high
    if below or above:
        raise bad_param(name, owner, rule, value, cls=cls)
    return x


def parse_int(
    value: Any,
    name: str,
    owner: str,
    *,
    low: int | None = None,
    high: int | None = None,
    cls: type[DPPCAError] = ParameterError,
) -> int:
    """Return ``value`` as an int in ``[low, high]`` (integer-valued floats are accepted)."""
    count_check("parse_int", owner, name)
    lo = "-inf" if low is None else str(low)
    hi = "inf" if high is None else str(high)
    rule = f"an int in the range [{lo}, {hi}]"
    if isinstance(value, bool | np.bool_):
        raise bad_param(name, owner, rule, value, cls=cls)
    if isinstance(value, numbers.Integral) or (_is_real(value) and float(value).is_integer()):
        x = int(value)
    else:
        raise bad_param(name, owner, rule, value, cls=cls)
    if (low is not None and x < low) or (high is not None and x > high):
        raise bad_param(name, owner, rule, value, cls=cls)
    return x


def parse_bool(
    value: Any, name: str, owner: str, *, cls: type[DPPCAError] = ParameterError
) -> bool:
    """Return ``value`` if it is a single bool, else raise."""
    count_check("parse_bool", owner, name)
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise bad_param(name, owner, "a bool (True or False)", value, cls=cls)


def parse_choice(
    value: Any,
    name: str,
    owner: str,
    choices: Collection[str],
    *,
    cls: type[DPPCAError] = ParameterError,
) -> str:
    """Return ``value`` if it is one of ``choices``, else raise."""
    count_check("parse_choice", owner, name)
    if isinstance(value, str) and value in choices:
        return value
    rule = "a str among {" + ", ".join(repr(c) for c in choices) + "}"
    raise bad_param(name, owner, rule, value, cls=cls)


_AXES_RULE = "a pair (a, b) of two different positive ints"


def parse_axes(axes: Any, owner: str, limit: int | None = None) -> tuple[int, int]:
    """Validate ``axes`` (1-based, two different components, at most ``limit``)."""
    count_check("parse_axes", owner, "axes")
    items = list(axes) if isinstance(axes, Sequence | np.ndarray) and not isinstance(
        axes, str) else None
    if items is None or len(items) != 2:
        raise bad_param("axes", owner, _AXES_RULE, axes)
    out = []
    for v in items:
        if (isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer | float)
                or not float(v).is_integer() or v < 1):
            raise bad_param("axes", owner, "a pair of positive ints (1-based component numbers)",
                            axes)
        out.append(int(v))
    if out[0] == out[1]:
        raise bad_param("axes", owner, "a pair of two different components", axes)
    if limit is not None:
        check_axes_limit((out[0], out[1]), owner, limit)
    return out[0], out[1]


def check_axes_limit(axes: tuple[int, int], owner: str, limit: int) -> None:
    """Parsed ``axes`` (:func:`parse_axes`) against the number of directions ``limit``."""
    count_check("check_axes_limit", owner, "axes")
    if max(axes) > limit:
        raise bad_param("axes", owner, f"a pair of ints not exceeding the number of directions "
                        f"({limit})", axes)
