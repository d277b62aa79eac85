"""Small parsers for public parameters, all raising one message format.

The format follows scikit-learn's parameter validation: *The 'eps' parameter of dp_loading must
be a float in the range (0, inf). Got -1 instead.*
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Sequence
from typing import Any, TypeVar, overload

import numpy as np

from dppca_dask.errors import DPPCAError, Fix, ParameterError

__all__ = [
    "bad_param",
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
    if isinstance(value, str) and value in choices:
        return value
    rule = "a str among {" + ", ".join(repr(c) for c in choices) + "}"
    raise bad_param(name, owner, rule, value, cls=cls)


_AXES_RULE = "a pair (a, b) of two different positive ints"


def parse_axes(axes: Any, owner: str, limit: int | None = None) -> tuple[int, int]:
    """Validate ``axes`` (1-based, two different components, at most ``limit``)."""
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
    if limit is not None and max(out) > limit:
        raise bad_param("axes", owner, f"a pair of ints not exceeding the number of directions "
                        f"({limit})", axes)
    return out[0], out[1]
