"""Each PCA estimator's options, parsed once into a frozen, validated object.

The public functions (``dp_loading``, ``dp_scree``, ``dp_score``, ``dp_pca``), the CLI tasks
(:mod:`dppca_dask.pipeline.tasks`), the scikit-learn estimator and the app build one options
object, then bind it to the input's public shape once:

1. ``XOptions.parse(owner, **values)`` checks every option by its declarative rule
   (:attr:`CONSTRAINTS`, as scikit-learn's ``_parameter_constraints``: one
   :class:`~dppca_dask._validation.Constraint` per field), in field order -- the checks that
   need no data;
2. :meth:`Options.bind` (n, p, the supplied directions) resolves and checks what needs the
   public shape -- ``pairs="auto"``, ``k``, the histogram grid, the axes against the number of
   directions, the scree checks -- and returns a :class:`Setup`.

The planning functions (``plan_*``) and the fits read a :class:`Setup` and check nothing again
(``tests/test_options.py`` counts the checker calls of one run).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Self, cast

import numpy as np

from dppca_dask._typing import Pairs
from dppca_dask._validation import (
    Bool,
    Choice,
    Constraint,
    Custom,
    Int,
    bad_param,
    check_axes_limit,
    count_check,
    parse_axes,
    parse_choice,
    parse_fields,
    parse_int,
)
from dppca_dask.errors import InputError, ParameterError
from dppca_dask.graph.kendall_layout import DEFAULT_PAIR_BLOCK
from dppca_dask.pca.frame import FRAME_METHODS
from dppca_dask.pca.histograms import check_cells, default_bins, parse_bins
from dppca_dask.pca.histograms import parse_methods as parse_score_methods
from dppca_dask.pca.scree_controls import Control, resolve_controls
from dppca_dask.pca.scree_controls import parse_methods as parse_scree_methods
from dppca_dask.privacy.accounting import CALIBRATIONS

__all__ = [
    "AUTO_MAX_WORK",
    "DEFAULT_MAX_K",
    "PAIRS",
    "PRESETS",
    "SENSITIVITIES",
    "LoadingOptions",
    "Options",
    "PCAOptions",
    "ScoreOptions",
    "ScreeOptions",
    "Setup",
    "check_scree_args",
    "parse_center",
    "resolve_k",
    "resolve_pairs",
]


# -- the rules the options share (one home: the estimators import them from here) ----------

PAIRS = ("all", "blocks", "auto")

AUTO_MAX_WORK = 5e11
"""``pairs="auto"`` uses all pairs while the all-pairs work n(n−1)/2·p (pair-coordinates) is at
most this, blocks above: about 2 core-minutes of the fused Kendall kernel at the ~4e9
pair-coordinates per second per core measured on this project's 2-core machine (Gaussian data;
docs/performance.md). p = 20: all pairs up to n ≈ 224 000; p = 50: up to n ≈ 141 000."""


SENSITIVITIES: tuple[str, ...] = ("seed", "tight")
"""Per-pair-term bounds: ``"seed"`` 2 (the R package's 4/n), ``"tight"`` √2 (2√2/n)."""


PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "recommended": MappingProxyType({
        "calibration": "analytic", "sensitivity": "tight", "score_methods": ("geometric",),
        "frame": "auto"}),
    "seed": MappingProxyType({
        "calibration": "classical", "sensitivity": "seed", "score_methods": ("add",),
        "frame": "durfee"}),
})
"""The values an option left at ``None`` takes, by ``preset``.

``"recommended"`` (the default): the analytic Gaussian calibration (Balle & Wang 2018), the
tight Kendall sensitivity 2√2/n, the geometric histogram and the ``"auto"`` frame (ranged where n·ε_frame ≥ 500) -- the
configuration the benchmarks recommend (docs/guide/getting-started.md, "Defaults"). ``"seed"``: the R package's
configuration (classical calibration, 4/n, the Gaussian ``"add"`` histogram, the Durfee frame),
which the R comparisons use. An option given explicitly always wins over the preset."""


def apply_preset(values: dict[str, Any], fields: Sequence[str], owner: str) -> dict[str, Any]:
    """``values`` with ``preset`` removed and each of its options that is absent or ``None`` (and
    one of ``fields``) set to the preset's value."""
    preset = parse_choice(values.pop("preset", "recommended"), "preset", owner, tuple(PRESETS))
    for name, value in PRESETS[preset].items():
        if name in fields and values.get(name) is None:
            values[name] = value
    return values


DEFAULT_MAX_K = 10
"""``k=None`` gives min(p, 10) components (all columns of a supplied V_dp matrix)."""


def resolve_pairs(pairs: str, n: int, p: int) -> tuple[Pairs, str]:
    """The Kendall mode for ``pairs``, decided from the public n and p only, and why.

    Examples
    --------
    >>> resolve_pairs("auto", 5000, 20)[0], resolve_pairs("auto", 10**6, 50)[0]
    ('all', 'blocks')
    """
    count_check("resolve_pairs", "pairs", "pairs")
    if pairs != "auto":
        return cast(Pairs, pairs), f"pairs={pairs!r} as given"
    work = n * (n - 1) / 2 * p
    mode: Pairs = "all" if work <= AUTO_MAX_WORK else "blocks"
    rel = "<=" if mode == "all" else ">"
    return mode, (f"pairs='auto' -> {mode}: all-pairs work n(n-1)/2 * p = {work:.3g} "
                  f"{rel} {AUTO_MAX_WORK:.3g} pair-coordinates (about 2 core-minutes)")


def parse_center(center: Any, owner: str = "dp_scree") -> str | np.ndarray:
    """``center``: "private", "empirical" or finite public constants (an array)."""
    count_check("parse_center", owner, "center")
    rule = ("'private', 'empirical', or finite public constants (a number or one per "
            "variable)")
    if isinstance(center, str):
        return parse_choice(center, "center", owner, ("private", "empirical"))
    if isinstance(center, bool | np.bool_):  # R's center=TRUE means something else
        raise bad_param("center", owner, rule, center)
    try:
        values = np.asarray(center, dtype=np.float64)
    except (TypeError, ValueError):
        values = None
    if values is None or values.ndim > 1 or not np.isfinite(values).all() or values.size == 0:
        raise bad_param("center", owner, rule, center)
    return values


def resolve_k(k: Any, p: int, supplied: tuple[np.ndarray, str] | None, owner: str) -> int:
    """The number of scree components: 1 ≤ k ≤ p (≤ the columns of supplied directions).

    Default: every column of a supplied matrix, else min(p, :data:`DEFAULT_MAX_K`).
    """
    count_check("resolve_k", owner, "k")
    k_max = p if supplied is None else supplied[0].shape[1]
    if k is None:
        matrix = supplied is not None and supplied[1] == "supplied matrix"
        k = k_max if matrix else min(k_max, DEFAULT_MAX_K)
    return parse_int(k, "k", owner, low=1, high=k_max)


def check_scree_args(n: int, p: int, methods: Sequence[str], center: str | np.ndarray,
                     owner: str) -> None:
    """The scree checks that need n and p (public), made before any data pass."""
    count_check("check_scree_args", owner, "method, center")
    if "huber" in methods and n < 4:
        raise ParameterError(f"Method 'huber' of {owner} needs at least 4 observations "
                             f"(consecutive pairs for m2). Got n = {n} instead.")
    if isinstance(center, np.ndarray) and center.size not in (1, p):
        raise bad_param("center", owner, f"a number or {p} constants (one per variable)",
                        f"{center.size} values")


@dataclass(frozen=True)
class Options:
    """The options every estimator with a loading (Kendall) stage shares."""

    owner: str = "dp_loading"
    cpp_option: bool = True
    non_private: bool = False
    calibration: str = "analytic"
    sensitivity: str = "tight"
    pairs: str = "all"
    """As requested: ``"all"``, ``"blocks"`` or ``"auto"`` (resolved by :meth:`bind`)."""
    pair_block: int = DEFAULT_PAIR_BLOCK
    block_rows: int | None = None

    CONSTRAINTS: ClassVar[dict[str, Constraint]] = {
        "cpp_option": Bool(), "non_private": Bool(), "calibration": Choice(CALIBRATIONS),
        "sensitivity": Choice(SENSITIVITIES), "pairs": Choice(PAIRS),
        "pair_block": Int(low=2), "block_rows": Int(low=1, optional=True),
    }

    @classmethod
    def parse(cls, owner: str, **values: Any) -> Self:
        """The options of ``owner`` from keyword values, each checked by its constraint once
        (``preset`` fills those absent or ``None``: :data:`PRESETS`; the rest take the
        defaults, unchecked: they are valid)."""
        values = apply_preset(values, tuple(cls.CONSTRAINTS), owner)
        return cls(owner=owner, **parse_fields(cls.CONSTRAINTS, values, owner))

    def bind(self, n: int, p: int,
             supplied: tuple[np.ndarray, str] | None = None) -> Setup:
        """The options on an input of n rows and p columns (public): see :class:`Setup`."""
        pairs, why = resolve_pairs(self.pairs, n, p)
        return Setup(self, n, p, pairs, why, supplied, *self._bind(n, p, supplied))

    def _bind(self, n: int, p: int, supplied: tuple[np.ndarray, str] | None
              ) -> tuple[int | None, tuple[int, int] | None]:
        return None, None


LoadingOptions = Options
"""``dp_loading``'s options are the shared ones."""


def _controls(owner: str, methods: tuple[str, ...], control: Any) -> Mapping[str, Control]:
    return MappingProxyType(resolve_controls(methods, control, owner=owner))


@dataclass(frozen=True)
class ScreeOptions(Options):
    """``dp_scree``'s options (and the scree part of ``dp_pca``'s)."""

    owner: str = "dp_scree"
    scree_methods: tuple[str, ...] = ("clipped",)
    controls: Mapping[str, Control] = field(default_factory=dict)
    k: int | None = None
    """As requested (``None``: the default; resolved by :meth:`bind`)."""
    mono: bool = True
    center: str | np.ndarray = "private"

    CONSTRAINTS: ClassVar[dict[str, Constraint]] = {
        **Options.CONSTRAINTS, "scree_methods": Custom(parse_scree_methods),
        "mono": Bool(), "center": Custom(parse_center),
    }

    @classmethod
    def parse(cls, owner: str, **values: Any) -> Self:
        """As :meth:`Options.parse`; ``control`` (the controls of the methods) is resolved
        against the parsed methods."""
        control = values.pop("control", None)
        k = values.pop("k", None)
        values = apply_preset(values, tuple(cls.CONSTRAINTS), owner)
        parsed = parse_fields(cls.CONSTRAINTS, values, owner)
        methods = parsed.setdefault("scree_methods", ("clipped",))
        return cls(owner=owner, controls=_controls(owner, methods, control), k=k, **parsed)

    def _bind(self, n: int, p: int, supplied: tuple[np.ndarray, str] | None
              ) -> tuple[int | None, tuple[int, int] | None]:
        k = resolve_k(self.k, p, supplied, self.owner)
        check_scree_args(n, p, self.scree_methods, self.center, self.owner)
        return k, None


def _bins(value: Any, owner: str) -> Any:
    return None if value is None else parse_bins(value, 2, owner)  # the form; cells at bind


@dataclass(frozen=True)
class ScoreOptions(Options):
    """``dp_score``'s options (and the score part of ``dp_pca``'s)."""

    owner: str = "dp_score"
    score_methods: tuple[str, ...] = ("geometric",)
    bins: tuple[int, int] | None = None
    """As requested (``None``: the J rule for n; the cell limit is checked by :meth:`bind`)."""
    axes: tuple[int, int] = (1, 2)
    frame: str = "auto"

    CONSTRAINTS: ClassVar[dict[str, Constraint]] = {
        **Options.CONSTRAINTS, "score_methods": Custom(parse_score_methods),
        "bins": Custom(_bins), "axes": Custom(parse_axes), "frame": Choice(FRAME_METHODS),
    }

    def _bind(self, n: int, p: int, supplied: tuple[np.ndarray, str] | None
              ) -> tuple[int | None, tuple[int, int] | None]:
        return None, _score_bind(self, n, p, supplied)


def _score_bind(options: ScoreOptions | PCAOptions, n: int, p: int,
                supplied: tuple[np.ndarray, str] | None) -> tuple[int, int]:
    if p < 2:
        raise InputError(owner=options.owner, parameter="X",
                         rule="must have at least two columns", value=p)
    check_axes_limit(options.axes, options.owner, p if supplied is None else
                     supplied[0].shape[1])
    if options.bins is None:
        return default_bins(n), default_bins(n)
    check_cells(options.bins, n, options.owner)
    return options.bins


@dataclass(frozen=True)
class PCAOptions(ScreeOptions, ScoreOptions):
    """``dp_pca``'s options: the scree and the score parts on shared directions."""

    owner: str = "dp_pca"

    CONSTRAINTS: ClassVar[dict[str, Constraint]] = {
        **ScreeOptions.CONSTRAINTS, **ScoreOptions.CONSTRAINTS}

    def _bind(self, n: int, p: int, supplied: tuple[np.ndarray, str] | None
              ) -> tuple[int | None, tuple[int, int] | None]:
        m_bins = _score_bind(self, n, p, supplied)
        k, _ = ScreeOptions._bind(self, n, p, supplied)
        return k, m_bins


@dataclass(frozen=True)
class Setup:
    """Options bound to the input's public shape: what the plan and the fit read.

    ``pairs``: the Kendall mode (``"auto"`` resolved from n and p, ``pairs_why`` says how);
    ``supplied``: the parsed ``V_dp`` (the directions and how they were given) or ``None``;
    ``k``: the scree components; ``m_bins``: the histogram grid (m_x, m_y).
    """

    options: Any
    n: int
    p: int
    pairs: Any
    pairs_why: str
    supplied: tuple[np.ndarray, str] | None = None
    k: int | None = None
    m_bins: tuple[int, int] | None = None

    @property
    def private_center(self) -> bool:
        """Whether the scree centre is the private estimate."""
        center = getattr(self.options, "center", None)
        return isinstance(center, str) and center == "private"
