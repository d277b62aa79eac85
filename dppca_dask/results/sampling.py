"""Synthetic score points from a released histogram: ``sampling_control`` and the sampler.

Follows ``docs/spec/seeds/sampling_control.txt`` and docs/spec/SPEC_dppca.md §7. Sampling reads only released
probabilities and the public bin geometry, so it is post-processing: it spends no budget and may
use any generator. For each requested method, S cells are drawn J ~ Categorical(p); "center"
starts at the cell centre, "uniform" at a uniform point of the cell; then Gaussian jitter with
covariance c²·diag(Δx², Δy²) (c = ``bandwidth_scale``, Δ = bin widths) is added (none when c = 0).
Draw order per method: S uniforms for the categories, then (uniform) S x-offsets and S y-offsets,
then S x-jitters and S y-jitters.

Grouped fits split the total sample size over groups by the largest-remainder rule
(:func:`allocate_sizes`).
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, Union

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from dppca_dask._rformat import format_r_named, format_r_scalar
from dppca_dask._typing import RngLike
from dppca_dask._validation import bad_param, parse_int, parse_real
from dppca_dask.errors import InputError
from dppca_dask.privacy.rng import as_rng

__all__ = [
    "DEFAULT_BANDWIDTH",
    "SAMPLING_METHODS",
    "SamplingControl",
    "allocate_sizes",
    "as_sampling_control",
    "sample_histogram",
    "sampling_control",
]

SAMPLING_METHODS = ("center", "uniform")
DEFAULT_BANDWIDTH = {"center": 0.5, "uniform": 0.25}
EMPTY_MESSAGE = ("The private histogram contains no positive probability mass; no synthetic score "
                 "points were generated.")
ZERO_GROUP_MESSAGE = ("The requested total `sample_size` is small relative to the number of "
                      "groups; at least one group receives zero synthetic observations.")
_OWNER = "sampling_control"


def _r_strings(values: Sequence[str]) -> str:
    quoted = [f'"{v}"' for v in values]
    width = max(len(q) for q in quoted)
    return "[1] " + " ".join(q.ljust(width) for q in quoted)


SamplingLike: TypeAlias = Union["SamplingControl", Mapping[str, Any], None]
"""A :func:`~dppca_dask.sampling_control` object, a dict of its arguments, or None (defaults)."""


@dataclass(frozen=True)
class SamplingControl:
    """Resolved sampling settings: methods, total size (None: the number of rows), bandwidths."""

    method: tuple[str, ...]
    sample_size: int | None
    bandwidth_scale: tuple[tuple[str, float], ...]

    def __post_init__(self) -> None:
        """A hand-built control is checked as :func:`sampling_control` checks its arguments."""
        owner = "SamplingControl"
        methods = tuple(self.method) if isinstance(self.method, Sequence) and \
            not isinstance(self.method, str) else ()
        if not methods or any(m not in ("center", "uniform") for m in methods):
            raise bad_param("method", owner, "a non-empty tuple of 'center' and/or 'uniform'",
                            self.method)
        size = None if self.sample_size is None else parse_int(self.sample_size, "sample_size",
                                                               owner, low=1)
        try:
            scales = {str(k): float(v) for k, v in self.bandwidth_scale}
        except (TypeError, ValueError):
            raise bad_param("bandwidth_scale", owner, "(method, scale) pairs",
                            self.bandwidth_scale) from None
        for name, value in scales.items():
            parse_real(value, f"bandwidth_scale[{name!r}]", owner, low=0.0, low_open=False)
        if any(m not in scales for m in methods):
            raise bad_param("bandwidth_scale", owner, "a scale for every method",
                            self.bandwidth_scale)
        object.__setattr__(self, "method", methods)
        object.__setattr__(self, "sample_size", size)
        object.__setattr__(self, "bandwidth_scale", tuple(scales.items()))

    @property
    def bandwidth(self) -> dict[str, float]:
        """Bandwidth scale per requested method."""
        return dict(self.bandwidth_scale)

    def to_dict(self) -> dict[str, Any]:
        return {"method": list(self.method), "sample_size": self.sample_size,
                "bandwidth_scale": self.bandwidth}

    def __repr__(self) -> str:
        size = "NULL" if self.sample_size is None else "[1] " + format_r_scalar(self.sample_size)
        return "\n".join([
            "$method", _r_strings(self.method), "",
            "$sample_size", size, "",
            "$bandwidth_scale", format_r_named(self.bandwidth), "",
            'attr(,"class")', _r_strings(["dppca_sampling_control", "list"]),
        ])


def _match_method(item: Any, method: Any) -> str:
    rule = "a str or a non-empty sequence of str among {'center', 'uniform'} (unique prefixes allowed)"
    if not isinstance(item, str):
        raise bad_param("method", _OWNER, rule, method)
    if item in SAMPLING_METHODS:
        return item
    hits = [m for m in SAMPLING_METHODS if item and m.startswith(item)]
    if len(hits) != 1:
        raise bad_param("method", _OWNER, rule, method)
    return hits[0]


def _scale_value(value: Any, name: str) -> float:
    rule = "None, a finite number >= 0, or a dict of them keyed by sampling method"
    if (not isinstance(value, numbers.Real) or isinstance(value, bool | np.bool_)
            or not math.isfinite(float(value)) or float(value) < 0):
        raise bad_param(name, _OWNER, rule, value)
    return float(value)


def _resolve_bandwidth(value: Any, methods: tuple[str, ...]) -> dict[str, float]:
    name = "bandwidth_scale"
    if value is None:
        return {m: DEFAULT_BANDWIDTH[m] for m in methods}
    if isinstance(value, pd.Series):
        if value.index.has_duplicates:
            raise bad_param(name, _OWNER, "named without duplicated names", value.to_dict())
        value = value.to_dict()
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in SAMPLING_METHODS]
        if unknown:
            raise bad_param(name, _OWNER, "keyed only by 'center' and/or 'uniform'", value)
        missing = [m for m in methods if m not in value]
        if missing:
            raise bad_param(name, _OWNER, f"a dict covering every requested method {methods}",
                            value)
        return {m: _scale_value(value[m], f"{name}[{m}]") for m in methods}
    if isinstance(value, Sequence | np.ndarray) and not isinstance(value, str):
        items = list(np.asarray(value, dtype=object).ravel())
        if len(items) != 1:
            raise bad_param(name, _OWNER, "a single number or a dict keyed by method name "
                            "(several values must be named)", value)
        value = items[0]
    scale = _scale_value(value, name)
    return dict.fromkeys(methods, scale)


def sampling_control(
    method: str | Sequence[str] = "uniform",
    sample_size: int | None = None,
    bandwidth_scale: float | Mapping[str, float] | None = None,
) -> SamplingControl:
    """Control options for synthetic score sampling.

    Parameters
    ----------
    method
        ``"center"`` (a cell chosen by its probability, then Gaussian jitter around its centre),
        ``"uniform"`` (a uniform point in the chosen cell, then jitter), or both. Unique prefixes
        are accepted (``"unif"``); duplicates are dropped.
    sample_size
        Total number of synthetic points per method (across groups for a grouped fit). ``None``:
        the number of input rows, which assumes n is public.
    bandwidth_scale
        Jitter scale c, as a multiple of the bin widths. ``None``: 0.5 for "center" and 0.25 for
        "uniform"; one number ≥ 0 for every method; or a dict keyed by method covering every
        requested one (extra valid keys are ignored). 0 disables jitter.

    Returns
    -------
    SamplingControl
        ``bandwidth_scale`` resolved for the requested methods; ``sample_size`` left for the
        sampler to resolve.

    Examples
    --------
    >>> sampling_control()
    $method
    [1] "uniform"
    <BLANKLINE>
    $sample_size
    NULL
    <BLANKLINE>
    $bandwidth_scale
    uniform 
       0.25 
    <BLANKLINE>
    attr(,"class")
    [1] "dppca_sampling_control" "list"                  
    >>> sampling_control(["center", "uniform"], 1000, {"center": 0.5, "uniform": 0.2}).bandwidth
    {'center': 0.5, 'uniform': 0.2}
    """
    items = [method] if isinstance(method, str) else method
    if not isinstance(items, Sequence | np.ndarray) or len(items) == 0:
        raise bad_param("method", _OWNER, "a str or a non-empty sequence of str among "
                        "{'center', 'uniform'}", method)
    methods = tuple(dict.fromkeys(_match_method(m, method) for m in items))
    if sample_size is not None:
        sample_size = parse_int(sample_size, "sample_size", _OWNER, low=1)
    scales = _resolve_bandwidth(bandwidth_scale, methods)
    return SamplingControl(methods, sample_size, tuple(scales.items()))


def as_sampling_control(value: Any, owner: str) -> SamplingControl:
    """A :class:`SamplingControl` from ``value`` (None → defaults; a dict → checked and resolved)."""
    if value is None:
        return sampling_control()
    if isinstance(value, SamplingControl):
        return value
    if isinstance(value, Mapping):
        keys = ("method", "sample_size", "bandwidth_scale")
        missing = [k for k in keys if k not in value]
        extra = [k for k in value if k not in keys]
        if missing or extra:
            raise bad_param("sampling", owner, "a SamplingControl from sampling_control() or a "
                            f"dict with exactly the keys {keys}", dict(value))
        return sampling_control(**dict(value))
    raise bad_param("sampling", owner, "a SamplingControl made by sampling_control()", value)


def allocate_sizes(total: int, weights: ArrayLike, *, warn: bool = True) -> np.ndarray:
    """Split ``total`` over groups in proportion to ``weights`` (largest-remainder rule).

    raw = S·w_g/Σw; each group gets ⌊raw⌋, and the remainder goes one each to the largest
    fractional parts, ties broken by group order. Warns when a group gets zero.

    Examples
    --------
    >>> allocate_sizes(7, [1000] * 5).tolist()
    [2, 2, 1, 1, 1]
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0 or not np.isfinite(w).all() or (w < 0).any():
        raise bad_param("weights", "allocate_sizes", "a non-empty vector of finite numbers >= 0",
                        weights)
    total = parse_int(total, "total", "allocate_sizes", low=0)
    if w.sum() <= 0:
        out = np.zeros(w.size, dtype=np.int64)
    else:
        raw = total * w / w.sum()
        out = np.floor(raw).astype(np.int64)
        remainder = total - int(out.sum())
        order = np.argsort(-(raw - out), kind="stable")
        out[order[:remainder]] += 1
    if warn and total > 0 and (out == 0).any():
        warnings.warn(ZERO_GROUP_MESSAGE, UserWarning, stacklevel=2)
    return out


def _draw_cells(prob: np.ndarray, size: int, rng: Any) -> np.ndarray:
    """S categorical draws by inversion over the positive cells sorted by decreasing probability."""
    positive = np.flatnonzero(prob > 0)
    order = positive[np.argsort(-prob[positive], kind="stable")]
    cum = np.cumsum(prob[order])
    u = np.asarray(rng.uniform(0.0, 1.0, size=size), dtype=np.float64).reshape(-1)
    idx = np.minimum(np.searchsorted(cum, u * cum[-1], side="left"), order.size - 1)
    return order[idx]


def _jitter(rng: Any, scale: float, size: int) -> np.ndarray:
    if scale == 0:
        return np.zeros(size)
    return np.asarray(rng.normal(0.0, scale, size=size), dtype=np.float64).reshape(-1)


def sample_cells(
    probability: np.ndarray, x_breaks: np.ndarray, y_breaks: np.ndarray, *,
    methods: Sequence[str], bandwidth: Mapping[str, float], size: int, rng: Any,
) -> dict[str, pd.DataFrame]:
    """The sampler of SPEC §7.2 on a (m_y, m_x) probability array; ``rng`` is a generator."""
    prob = np.asarray(probability, dtype=np.float64).ravel()
    prob = np.where(np.isfinite(prob) & (prob > 0), prob, 0.0)
    empty = {m: pd.DataFrame({"pc_x": np.empty(0), "pc_y": np.empty(0)}) for m in methods}
    if prob.sum() <= 0:
        warnings.warn(EMPTY_MESSAGE, UserWarning, stacklevel=3)
        return empty
    prob = prob / prob.sum()
    xb, yb = np.asarray(x_breaks, dtype=np.float64), np.asarray(y_breaks, dtype=np.float64)
    wx, wy = np.diff(xb), np.diff(yb)
    if not (np.isfinite(wx).all() and np.isfinite(wy).all() and (wx > 0).all() and (wy > 0).all()):
        raise InputError("Histogram bin widths must be finite and positive.")
    dx, dy = float(np.median(wx)), float(np.median(wy))
    mx = wx.size
    out = {}
    for method in methods:
        if size == 0:
            out[method] = empty[method]
            continue
        cells = _draw_cells(prob, size, rng)
        jx, jy = cells % mx, cells // mx
        if method == "center":
            bx = (xb[jx] + xb[jx + 1]) / 2.0
            by = (yb[jy] + yb[jy + 1]) / 2.0
        else:
            ux = np.asarray(rng.uniform(0.0, 1.0, size=size), dtype=np.float64).reshape(-1)
            uy = np.asarray(rng.uniform(0.0, 1.0, size=size), dtype=np.float64).reshape(-1)
            bx = xb[jx] + (xb[jx + 1] - xb[jx]) * ux
            by = yb[jy] + (yb[jy + 1] - yb[jy]) * uy
        c = bandwidth[method]
        px = bx + _jitter(rng, c * dx, size)
        py = by + _jitter(rng, c * dy, size)
        out[method] = pd.DataFrame({"pc_x": px, "pc_y": py})
    return out


def _numbers(value: Any, name: str, owner: str) -> np.ndarray:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise bad_param(name, owner, "an array of numbers", value) from None


def sample_histogram(
    probability: Any,
    x_breaks: Any,
    y_breaks: Any,
    *,
    sampling: SamplingControl | Mapping[str, Any] | None = None,
    size: int | None = None,
    rng: RngLike = None,
) -> dict[str, pd.DataFrame]:
    """Draw synthetic points from one 2-D histogram (post-processing; docs/spec/SPEC_dppca.md §7.2).

    Parameters
    ----------
    probability
        Cell probabilities, shape (m_y, m_x) (x fastest); negative or non-finite values count as 0
        and the rest are renormalised. An all-zero histogram warns and gives empty frames.
    x_breaks, y_breaks
        The m_x + 1 and m_y + 1 bin edges.
    sampling
        A :func:`sampling_control` (default: "uniform", bandwidth 0.25).
    size
        Points per method; default ``sampling.sample_size`` (required if that is None too).
    rng
        ``None``, a seed or a generator (sampling needs no privacy budget).

    Returns
    -------
    dict
        ``{method: DataFrame(pc_x, pc_y)}`` in the order of ``sampling.method``.

    Examples
    --------
    >>> prob = np.array([[0.0, 1.0], [0.0, 0.0]])
    >>> out = sample_histogram(prob, [0, 1, 2], [0, 1, 2], size=4, rng=0,
    ...                        sampling=sampling_control(bandwidth_scale=0))
    >>> bool(out["uniform"]["pc_x"].between(1, 2).all() and out["uniform"]["pc_y"].lt(1).all())
    True
    """
    owner = "sample_histogram"
    control = as_sampling_control(sampling, owner)
    n_points = size if size is not None else control.sample_size
    if n_points is None:
        raise bad_param("size", owner, "an int >= 0 (or set sampling_control(sample_size=...))",
                        size)
    n_points = parse_int(n_points, "size", owner, low=0)
    prob = _numbers(probability, "probability", owner)
    xb = _numbers(x_breaks, "x_breaks", owner).ravel()
    yb = _numbers(y_breaks, "y_breaks", owner).ravel()
    if prob.ndim != 2 or prob.shape != (yb.size - 1, xb.size - 1):
        raise bad_param("probability", owner, "a 2-D array of shape (len(y_breaks) - 1, "
                        "len(x_breaks) - 1)", f"shape {prob.shape}")
    gen = as_rng(rng, owner=owner).generator
    return sample_cells(prob, xb, yb, methods=control.method, bandwidth=control.bandwidth,
                         size=n_points, rng=gen)
