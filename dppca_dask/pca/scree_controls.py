"""Control objects of the three private scree mechanisms and their validation (docs/spec/SPEC_dppca.md §5.2–5.4).

``clipped_control``, ``pmwm_control`` and ``huber_control`` keep the R package's names and rules.
The parameters without defaults are data-scale choices the user must make deliberately (they are
public: never derived from the data). Every breach is one :class:`~dppca_dask.ParameterError`
line naming the parameter, the rule and the value. :func:`resolve_controls` turns the ``control``
argument of :func:`~dppca_dask.dp_scree` (or a config section) into one control per method.

Invariants: controls are frozen; ``to_dict`` round-trips through the constructor; a control given
as a plain dict is validated by the same constructor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, TypeAlias, Union

from dppca_dask._validation import bad_param, count_check, parse_bool, parse_int, parse_real
from dppca_dask.errors import Fix, ParameterError

__all__ = [
    "METHODS",
    "ClippedControl",
    "HuberControl",
    "PMWMControl",
    "check_partial_control",
    "clipped_control",
    "huber_control",
    "parse_methods",
    "pmwm_control",
    "resolve_controls",
]

METHODS: tuple[str, ...] = ("clipped", "pmwm", "huber")
K_RANGE = (-1074, 1023)
"""Dyadic exponents of the positive finite doubles: the widest meaningful m₂ histogram range."""


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()

_REQUIRED = {
    "clipped": ("C_clip",),
    "pmwm": ("a", "b", "trim_const", "eta"),
    "huber": ("k_min_m2", "k_max_m2", "m2_frac"),
}
_OPTIONAL = {
    "clipped": (),
    "pmwm": ("beta", "split_mode"),
    "huber": ("mu0", "eta0", "T", "M"),
}


def _missing_error(method: str, names: Sequence[str], owner: str) -> ParameterError:
    listed = ", ".join(repr(n) for n in names)
    parameter = "scree_control" if owner in ("dp_pca", "DPPCA") else "control"
    return ParameterError(f"Missing required control parameter(s): {listed}.", owner=owner,
                          fix=Fix(tuple((parameter, method, n) for n in _REQUIRED[method])))


def _check_required(method: str, values: Mapping[str, Any], owner: str = "dp_scree") -> None:
    missing = [n for n in _REQUIRED[method] if values.get(n, _MISSING) is _MISSING
               or values.get(n) is None]
    if missing:
        raise _missing_error(method, missing, owner)


MAX_CLIP = 1e100
"""The largest ``C_clip``: above it the noise sd (∝ C_clip) and ρ overflow float64; such a clip
level releases noise only."""


@dataclass(frozen=True)
class ClippedControl:
    """Control of ``method="clipped"``: the clip level ``C_clip`` of the squared centred scores."""

    C_clip: float
    method: ClassVar[str] = "clipped"

    def __post_init__(self) -> None:  # the invariant holds however the control is built
        object.__setattr__(self, "C_clip", parse_real(self.C_clip, "C_clip", "clipped_control",
                                                      low=0.0, high=MAX_CLIP, high_open=False))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PMWMControl:
    """Control of ``method="pmwm"`` (private modified winsorized mean)."""

    a: float
    b: float
    trim_const: float
    eta: float
    beta: float = 1.01
    split_mode: bool = True
    method: ClassVar[str] = "pmwm"

    def __post_init__(self) -> None:  # the invariants hold however the control is built
        owner = "pmwm_control"
        a = parse_real(self.a, "a", owner)
        b = parse_real(self.b, "b", owner)
        if not math.isfinite(a):
            raise bad_param("a", owner, "a finite float", self.a)
        if not (math.isfinite(b) and b > a):
            raise bad_param("b", owner, f"a finite float greater than a ({a!r})", self.b)
        values = {
            "a": a, "b": b,
            "trim_const": parse_real(self.trim_const, "trim_const", owner, low=0.0),
            "eta": parse_real(self.eta, "eta", owner, low=0.0, high=0.5, low_open=False),
            "beta": parse_real(self.beta, "beta", owner, low=1.0),
            "split_mode": parse_bool(self.split_mode, "split_mode", owner),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HuberControl:
    """Control of ``method="huber"`` (noisy gradient descent on the Huber loss)."""

    k_min_m2: int
    k_max_m2: int
    m2_frac: float
    mu0: float = 0.0
    eta0: float = 1.0
    T: int | None = None
    M: int | None = None
    method: ClassVar[str] = "huber"

    def __post_init__(self) -> None:  # the invariants hold however the control is built
        owner = "huber_control"
        k_min = parse_int(self.k_min_m2, "k_min_m2", owner, low=K_RANGE[0], high=K_RANGE[1])
        k_max = parse_int(self.k_max_m2, "k_max_m2", owner, low=K_RANGE[0], high=K_RANGE[1])
        if k_max <= k_min:
            raise bad_param("k_max_m2", owner, f"an int greater than k_min_m2 ({k_min})",
                            self.k_max_m2)
        mu0 = parse_real(self.mu0, "mu0", owner)
        if not math.isfinite(mu0):
            raise bad_param("mu0", owner, "a finite float", self.mu0)
        eta0 = parse_real(self.eta0, "eta0", owner, low=0.0)
        if not math.isfinite(eta0):
            raise bad_param("eta0", owner, "a finite float in the range (0, inf)", self.eta0)
        values = {
            "k_min_m2": k_min, "k_max_m2": k_max,
            "m2_frac": parse_real(self.m2_frac, "m2_frac", owner, low=0.0, high=1.0),
            "mu0": mu0, "eta0": eta0,
            "T": None if self.T is None else parse_int(self.T, "T", owner, low=1),
            "M": None if self.M is None else parse_int(self.M, "M", owner, low=1),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Control = ClippedControl | PMWMControl | HuberControl

ScreeControl: TypeAlias = Union["ClippedControl", "PMWMControl", "HuberControl"]
ScreeControlLike: TypeAlias = Union[  # noqa: UP007
    Control, Mapping[str, Any], Mapping[str, "Control | Mapping[str, Any]"], None,
]
"""A scree control (or a dict of its parameters), or for several methods a dict keyed by method."""
_TYPES: dict[str, type[Control]] = {"clipped": ClippedControl, "pmwm": PMWMControl,
                                    "huber": HuberControl}


def clipped_control(C_clip: float = _MISSING) -> ClippedControl:
    """Control options for clipped scree estimation (Gaussian mechanism on clipped squared scores).

    Parameters
    ----------
    C_clip
        Positive finite clip level of the squared centred scores w = (y − c)². No default: choose
        it on the scale of the data (larger values clip less but add more noise, sd ∝ C_clip).

    Examples
    --------
    >>> clipped_control(C_clip=3)
    ClippedControl(C_clip=3.0)
    """
    _check_required("clipped", {"C_clip": C_clip})
    return ClippedControl(C_clip)  # validated by the type itself


def pmwm_control(
    a: float = _MISSING,
    b: float = _MISSING,
    trim_const: float = _MISSING,
    eta: float = _MISSING,
    beta: float = 1.01,
    split_mode: bool = True,
) -> PMWMControl:
    """Control options for the private modified winsorized mean (Ramsay & Spicker 2025).

    Parameters
    ----------
    a, b
        Finite public bounds with a < b: the private winsorization cut-offs are clamped to
        [a, b] (post-processing), on the scale of the squared centred scores.
    trim_const, eta
        Trim proportion p = min(max(trim_const/n_q, eta), 0.49): ``trim_const`` > 0 and
        ``eta`` in [0, 0.5).
    beta
        Base (> 1) of the geometric grid of the Durfee quantile search (default 1.01).
    split_mode
        ``True``: quantiles from rows 1..⌊n/2⌋, mean from the other rows (by row order).

    Examples
    --------
    >>> pmwm_control(a=0, b=20, trim_const=10, eta=0.01).beta
    1.01
    """
    _check_required("pmwm", {"a": a, "b": b, "trim_const": trim_const, "eta": eta})
    return PMWMControl(a, b, trim_const, eta, beta, split_mode)  # validated by the type itself


def huber_control(
    k_min_m2: int = _MISSING,
    k_max_m2: int = _MISSING,
    m2_frac: float = _MISSING,
    mu0: float = 0.0,
    eta0: float = 1.0,
    T: int | None = None,
    M: int | None = None,
) -> HuberControl:
    """Control options for the Huber noisy-gradient-descent scree estimator (Yu, Ren & Zhou 2024).

    Parameters
    ----------
    k_min_m2, k_max_m2
        Integers, k_min_m2 < k_max_m2, both in [-1074, 1023]: the dyadic bins 2^κ of the private
        m₂ histogram (on the scale of squared differences of squared scores).
    m2_frac
        Share in (0, 1) of the Huber budget spent on the m₂ step.
    mu0, eta0
        Finite starting value and positive step size of the gradient descent.
    T, M
        ``None`` or positive ints: steps (default ⌈ln n⌉) and m₂ blocks (default ⌊√n/2⌋).

    Examples
    --------
    >>> huber_control(k_min_m2=-10, k_max_m2=10, m2_frac=0.25).T is None
    True
    """
    _check_required("huber", {"k_min_m2": k_min_m2, "k_max_m2": k_max_m2, "m2_frac": m2_frac})
    return HuberControl(k_min_m2, k_max_m2, m2_frac, mu0, eta0, T, M)  # validated by the type


_CONSTRUCTORS: dict[str, Callable[..., Control]] = {
    "clipped": clipped_control, "pmwm": pmwm_control, "huber": huber_control}


def parse_methods(method: Any, owner: str = "dp_scree") -> tuple[str, ...]:
    """``method`` as a tuple of distinct names from :data:`METHODS` (order kept); a name given
    twice is an error (it would be one release described twice).

    Examples
    --------
    >>> parse_methods(["huber", "clipped"])
    ('huber', 'clipped')
    """
    count_check("parse_scree_methods", owner, "method")
    rule = "a str among {'clipped', 'pmwm', 'huber'} or a non-empty list of them"
    items = [method] if isinstance(method, str) else method
    if not isinstance(items, Sequence) or isinstance(items, bytes) or not items:
        raise bad_param("method", owner, rule, method)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or item not in METHODS:
            raise bad_param("method", owner, rule, method)
        if item in out:
            raise bad_param("method", owner, "a list of distinct method names (each at most once)",
                            method)
        out.append(item)
    return tuple(out)


def _coerce(method: str, value: Any, owner: str) -> Control:
    cls = _TYPES[method]
    if isinstance(value, cls):
        return value
    if value is None:
        value = {}
    if isinstance(value, ClippedControl | PMWMControl | HuberControl):
        raise ParameterError(
            f"The control for method {method!r} of {owner} must be made by {method}_control(). "
            f"Got a {type(value).__name__} instead."
        )
    if not isinstance(value, Mapping):
        raise bad_param(
            "control", owner,
            f"a control made by {method}_control() or a dict of its parameters", value,
        )
    known = _REQUIRED[method] + _OPTIONAL[method]
    unknown = [key for key in value if key not in known]
    if unknown:
        raise ParameterError(
            f"{unknown[0]!r} is not a parameter of {method}_control (its parameters are "
            f"{', '.join(known)})."
        )
    _check_required(method, value, owner)
    return _CONSTRUCTORS[method](**dict(value))


def resolve_controls(
    methods: Sequence[str], control: Any, *, owner: str = "dp_scree"
) -> dict[str, Control]:
    """One validated control per method.

    ``control`` is ``None``, one control object or dict of parameters (one method only), or a dict
    keyed by method name whose values are control objects or dicts. Entries for methods not
    requested are ignored.

    Examples
    --------
    >>> resolve_controls(["clipped"], {"C_clip": 2})
    {'clipped': ClippedControl(C_clip=2.0)}
    >>> ctl = resolve_controls(["clipped", "huber"],
    ...     {"clipped": clipped_control(3), "huber": {"k_min_m2": -5, "k_max_m2": 5,
    ...                                               "m2_frac": 0.25}})
    >>> sorted(ctl)
    ['clipped', 'huber']
    """
    count_check("resolve_controls", owner, "control")
    keyed = isinstance(control, Mapping) and bool(control) and all(
        isinstance(key, str) and key in METHODS for key in control
    )
    if isinstance(control, Mapping) and not keyed and any(k in METHODS for k in control):
        raise ParameterError(
            f"The 'control' parameter of {owner} mixes method names and control parameters: "
            f"{sorted(map(str, control))}. Key it by method name only."
        )
    if keyed:
        return {m: _coerce(m, control.get(m), owner) for m in methods}
    if len(methods) > 1 and control is not None:
        raise ParameterError(
            f"With several methods ({', '.join(methods)}), the 'control' parameter of {owner} "
            "must be a dict keyed by method name, e.g. {'clipped': clipped_control(C_clip=...), "
            f"'pmwm': pmwm_control(...)}}. Got {control!r} instead."
        )
    return {m: _coerce(m, control, owner) for m in methods}


def check_partial_control(method: str, values: Mapping[str, Any]) -> Control | None:
    """Validate the parameters given for ``method`` (for configs, where some may come later).

    Unknown names and bad values raise; missing required parameters do not (the fit reports them).
    Returns the control when ``values`` are complete (a config keeps it, so the options object
    does not check the values again), else ``None``.

    Examples
    --------
    >>> check_partial_control("pmwm", {"eta": 0.01})
    """
    known = _REQUIRED[method] + _OPTIONAL[method]
    unknown = [key for key in values if key not in known]
    if unknown:
        raise ParameterError(
            f"{unknown[0]!r} is not a parameter of {method}_control (its parameters are "
            f"{', '.join(known)})."
        )
    if all(name in values for name in _REQUIRED[method]):
        return _CONSTRUCTORS[method](**dict(values))
    stand_in: dict[str, Any] = {
        "clipped": {"C_clip": 1.0},
        "pmwm": {"a": 0.0, "b": 1.0, "trim_const": 1.0, "eta": 0.0},
        "huber": {"k_min_m2": 0, "k_max_m2": 1, "m2_frac": 0.5},
    }[method]
    given = dict(values)
    pair = {"pmwm": ("a", "b"), "huber": ("k_min_m2", "k_max_m2")}.get(method)
    if pair and (pair[0] in given) != (pair[1] in given):  # check the one given against a fit
        lo_name, hi_name = pair
        if lo_name in given:
            x = _number(given[lo_name])
            stand_in[hi_name] = math.floor(x) + 1 if x is not None else stand_in[hi_name]
        else:
            x = _number(given[hi_name])
            low = K_RANGE[0] if method == "huber" else -math.inf
            stand_in[lo_name] = max(math.ceil(x) - 1, low) if x is not None else 0
    _CONSTRUCTORS[method](**{**stand_in, **given})
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
