"""The interval variables of a result, found generically, for the surfaces that show them.

Every interval variable carries an ``interval_level`` attribute (docs/intervals.md). A pair
``<name>_lower``/``<name>_upper`` is one two-sided interval, about the released variable
``<name>`` when the dataset has it (``scree``, ``pve``, ``covariance``, ``kendall_eigenvalue``,
...); any other variable with a level (``angle_upper``: a one-sided bound) is a bound of its own.
The notebook cards (:mod:`dppca_dask.results.html`) and the report's sections
(:mod:`dppca_dask.report.sections`) give the families they know their own tables and list every
other field found here, so that an interval variable added later shows up without a change to
them. Formatting helpers for an interval as text are here too. Reading only: no budget, no
randomness.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["COVERS", "NOISE", "IntervalField", "IntervalRow", "interval_fields", "interval_rows",
           "distinct_fields", "interval_text", "level_text", "noise_flags", "reaches_zero",
           "repeats"]

COVERS = ("They cover the mechanism's noise (the release's only randomness), not the sampling "
          "variability of the data: they say which released values are signal and which are "
          "indistinguishable from noise, not how far the population value may be.")
"""The sentence every surface says about what the intervals cover (docs/intervals.md)."""


@dataclass(frozen=True)
class IntervalField:
    """One interval family of a dataset: its variables' names and what it is about.

    ``value``: the released variable the interval is about (None when the dataset has no
    variable of the pair's name); ``lower``/``upper``: the bounds' variables (one of them None
    for a one-sided bound such as ``angle_upper``); ``level``: the stated level; ``description``:
    the bound's description without "lower end of the"."""

    key: str
    value: str | None
    lower: str | None
    upper: str | None
    level: float
    description: str

    @property
    def names(self) -> tuple[str, ...]:
        """The dataset variables of the field (value first when there is one)."""
        return tuple(n for n in (self.value, self.lower, self.upper) if n is not None)


def _describe(attrs: Any) -> str:
    text = str(attrs.get("long_name") or attrs.get("description") or "")
    for prefix in ("lower end of the ", "upper end of the "):
        text = text.removeprefix(prefix)
    return text[:1].upper() + text[1:]


def interval_fields(ds: Any) -> list[IntervalField]:
    """Every interval of ``ds`` (an xarray Dataset), in the order of their variables' names (a
    store does not keep the in-memory dataset's variable order; every surface must read the
    same from both)."""
    out: list[IntervalField] = []
    seen: set[str] = set()
    for name in sorted(str(n) for n in ds.data_vars):
        attrs = ds[name].attrs
        if name in seen or "interval_level" not in attrs:
            continue
        level = float(attrs["interval_level"])
        for side, other in (("_lower", "_upper"), ("_upper", "_lower")):
            base = name[: -len(side)] if name.endswith(side) else None
            if base is not None and base + other in ds.data_vars:
                lower, upper = (name, base + other) if side == "_lower" else (base + other, name)
                value = base if base in ds.data_vars else None
                out.append(IntervalField(base, value, lower, upper, level, _describe(attrs)))
                seen.update({lower, upper})
                break
        else:
            one: tuple[str | None, str | None] = ((name, None) if name.endswith("_lower")
                                                  else (None, name))
            out.append(IntervalField(name, None, *one, level, _describe(attrs)))
            seen.add(name)
    return out


def _fmt(value: float, digits: int) -> str:
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Inf" if value > 0 else "-Inf")
    text = f"{value:.{digits}g}"
    return "0" if text in ("-0", "0") else text


def interval_text(value: float | None, lower: float | None, upper: float | None, *,
                  digits: int = 3) -> str:
    """``"34 [22.6, 45.5]"``: a value and its interval (either end may be missing, ``[, 45.5]``
    style ends are shown as ``≤ 45.5``); a NaN interval leaves the value alone.

    Examples
    --------
    >>> interval_text(34.0, 22.63, 45.51), interval_text(8.6, -0.0, 20.0)
    ('34 [22.6, 45.5]', '8.6 [0, 20]')
    >>> interval_text(None, None, 35.2), interval_text(1.5, float("nan"), float("nan"))
    ('≤ 35.2', '1.5')
    """
    head = "" if value is None else _fmt(float(value), max(digits, 4))
    lo = None if lower is None or math.isnan(float(lower)) else float(lower)
    hi = None if upper is None or math.isnan(float(upper)) else float(upper)
    if lo is None and hi is None:
        return head
    if lo is None:
        tail = f"≤ {_fmt(hi, digits)}" if hi is not None else ""
    elif hi is None:
        tail = f"≥ {_fmt(lo, digits)}"
    else:
        tail = f"[{_fmt(lo, digits)}, {_fmt(hi, digits)}]"
    return f"{head} {tail}".strip()


def reaches_zero(lower: float | None, upper: float | None = None) -> bool:
    """The interval reaches 0 (the summaries' "indistinguishable from noise"): its lower end
    is at most 0 (and, with an upper end, that is at least 0)."""
    if lower is None or math.isnan(float(lower)):
        return False
    return float(lower) <= 0.0 and (upper is None or float(upper) >= 0.0)


def level_text(fields: Iterable[IntervalField]) -> str:
    """"95%" (the levels of the fields, joined when they differ)."""
    levels = sorted({f.level for f in fields})
    return " / ".join(f"{100 * v:g}%" for v in levels) or "95%"


NOISE = "indistinguishable from noise"
"""The marker of a value whose interval cannot tell it from noise (every surface's word)."""


@dataclass(frozen=True)
class IntervalRow:
    """One released value with its interval: ``where`` holds its coordinates (the field's
    dims, in order: ``("clipped", "PC2")``), ``noise`` whether it is indistinguishable from
    noise (:func:`noise_flags`); ``value`` None for a bound without a released variable."""

    where: tuple[str, ...]
    value: float | None
    lower: float | None
    upper: float | None
    noise: bool

    @property
    def text(self) -> str:
        """The interval as text (``"[0.15, 0.48]"``, ``"≤ 12.5°"``; "" when it is NaN)."""
        return interval_text(None, self.lower, self.upper)


def _array(ds: Any, name: str | None, like: Any) -> Any:
    import numpy as np

    if name is None:
        return None
    return np.asarray(ds[name].broadcast_like(like).transpose(*like.dims).values,
                      dtype=np.float64)


def noise_flags(ds: Any, field: IntervalField) -> Any:
    """A boolean array over the field's cells: indistinguishable from noise. A direction (its
    eigenvalue, its angle bounds) when ``direction_identifiable`` says it is not identifiable; a
    PVE value when its scree interval reaches 0, a histogram probability when its count interval
    does; otherwise when the field's own interval reaches 0 (``lower ≤ 0 ≤ upper``)."""
    import numpy as np

    like = ds[field.names[0]]
    if field.key in ("kendall_eigenvalue", "angle_upper", "angle_upper_guaranteed") \
            and "direction_identifiable" in ds:
        return _array(ds, "direction_identifiable", like) == 0
    if field.key == "angle_upper":
        return _array(ds, "angle_upper", like) >= 45.0
    source = {"pve": "scree", "probability": "count"}.get(field.key, field.key)
    lower = _array(ds, f"{source}_lower" if f"{source}_lower" in ds else field.lower, like)
    upper = _array(ds, f"{source}_upper" if f"{source}_upper" in ds else field.upper, like)
    if lower is None:
        return np.zeros(like.shape, dtype=bool)
    flags = lower <= 0.0
    if upper is not None:
        flags &= upper >= 0.0
    return flags & ~np.isnan(lower)


def _label(dim: str, value: Any) -> str:
    if dim.endswith("_bin"):
        return f"{dim[0]}{int(value) + 1}"
    return str(value)


def interval_rows(ds: Any, field: IntervalField) -> tuple[tuple[str, ...], list[IntervalRow]]:
    """The field's dims and one :class:`IntervalRow` per cell (in the variables' order), cells
    without an interval (NaN: a mechanism without one, such as huber's scree) left out."""
    import numpy as np

    like = ds[field.names[0]]
    dims = tuple(str(d) for d in like.dims)
    value, lower, upper = (_array(ds, n, like) for n in (field.value, field.lower, field.upper))
    noise = noise_flags(ds, field)
    coords = [[_label(d, v) for v in (ds[d].values if d in ds.coords
                                      else range(like.sizes[d]))] for d in dims]
    rows = []
    for index in np.ndindex(*like.shape):
        lo = None if lower is None else float(lower[index])
        hi = None if upper is None else float(upper[index])
        if all(x is None or math.isnan(x) for x in (lo, hi)):
            continue
        rows.append(IntervalRow(tuple(coords[a][i] for a, i in enumerate(index)),
                                None if value is None else float(value[index]), lo, hi,
                                bool(noise[index])))
    return dims, rows


def repeats(a: Any, b: Any) -> bool:
    """``b`` repeats ``a``: the same dims, and ``a``'s values at ``b``'s coordinates."""
    import numpy as np

    if a.dims != b.dims:
        return False
    try:
        a = a.sel({d: b[d].values for d in b.dims if d in a.coords and d in b.coords})
    except (KeyError, ValueError):
        return False
    return a.shape == b.shape and np.array_equal(np.asarray(a.values), np.asarray(b.values),
                                                 equal_nan=True)


def distinct_fields(parts: Iterable[tuple[str, Any]]) -> list[tuple[str, Any, IntervalField]]:
    """``(part, dataset, field)`` for every interval field of the ``(part, dataset)`` pairs, in
    order, but a field that :func:`repeats` one of an earlier part (dp_pca's scree part repeats
    the directions' angle bounds): every surface shows each interval once."""
    earlier: dict[str, Any] = {}  # key -> the first part's variable
    out = []
    for part, ds in parts:
        for f in interval_fields(ds):
            name = f.upper or f.lower or f.key
            if f.key in earlier and repeats(earlier[f.key], ds[name]):
                continue
            earlier.setdefault(f.key, ds[name])
            out.append((part, ds, f))
    return out
