"""The YAML run configuration: frozen pydantic models mirroring the function signatures.

A config names the input, the task and its options, the privacy budget, the cluster, the outputs
and (optionally) an ``rng`` seed for reproducible demos. Unknown keys and bad values are errors
that name the key. :meth:`RunConfig.to_dict` gives the resolved config as written next to the
outputs, **with the seed removed** (only whether one was given is recorded in the release).

Relative paths are taken relative to the directory the command runs in.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar, cast, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from dppca_dask.errors import BudgetError, ConfigError
from dppca_dask.pipeline.cluster_config import (  # the cluster section's models live there
    AddressClusterConfig,
    ClusterConfig,
    KubernetesClusterConfig,
    LocalClusterConfig,
    SlurmClusterConfig,
)
from dppca_dask.privacy.budget import PrivacyControl, privacy_control

__all__ = [
    "AddressClusterConfig",
    "BudgetLedgerConfig",
    "CovarianceConfig",
    "InputConfig",
    "KubernetesClusterConfig",
    "LoadingConfig",
    "LocalClusterConfig",
    "OutputConfig",
    "PCAConfig",
    "PrivacyConfig",
    "RunConfig",
    "ScoreConfig",
    "ScreeConfig",
    "SlurmClusterConfig",
    "apply_overrides",
    "check_task_sections",
    "env_overrides",
    "load_config",
    "parse_set",
]

TASKS = ("loading", "scree", "score", "covariance", "pca")


_T = TypeVar("_T")


def _list_of(*items: _T) -> Callable[[], list[_T]]:
    """A ``default_factory`` making a new list of ``items`` (typed, unlike a bare lambda)."""
    return lambda: list(items)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputConfig(_Model):
    """Where the data live: a Zarr array or group (local path or fsspec URL)."""

    path: str = Field(min_length=1)
    array: str | None = None
    columns: list[str | int] | None = None
    storage_options: dict[str, Any] = Field(default_factory=dict)
    group: str | None = None
    """A group-label variable of the Zarr group (tasks that support groups: score)."""


class BudgetPair(_Model):
    eps: float
    delta: float


class PrivacyConfig(_Model):
    """Either total ``eps``/``delta`` (with an optional ``split``) or absolute component budgets."""

    eps: float | None = None
    delta: float | None = None
    split: dict[Literal["loading", "scree", "score"], float] | None = None
    loading: BudgetPair | None = None
    scree: BudgetPair | None = None
    score: BudgetPair | None = None

    _control: PrivacyControl | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _valid_control(self) -> PrivacyConfig:
        try:  # checked once, at load; to_control() hands out this object
            self._control = self._build_control()
        except BudgetError as exc:
            raise ValueError(str(exc)) from None
        return self

    def to_control(self) -> PrivacyControl:
        """The :func:`~dppca_dask.privacy_control` of this section (built when it was loaded)."""
        return self._control if self._control is not None else self._build_control()

    def _build_control(self) -> PrivacyControl:
        parts = {
            k: (v.model_dump() if isinstance(v, BudgetPair) else v)
            for k, v in (("loading", self.loading), ("scree", self.scree), ("score", self.score))
            if v is not None
        }
        # Mapping is invariant in its key type: widen the Literal keys of the split to str.
        split = cast("dict[str, float] | None", self.split)
        return privacy_control(eps=self.eps, delta=self.delta, split=split, **parts)


class _KendallOptions(_Model):
    """Options every estimator shares: how the loading (Kendall) release is computed and noised,
    and whether non-private references are stored."""

    cpp_option: bool = True
    non_private: bool = False
    calibration: Literal["classical", "analytic"] = "analytic"  # recommended; the seed: classical
    sensitivity: Literal["seed", "tight"] = "tight"  # recommended; the seed: seed (4/n)
    block_rows: PositiveInt | None = None
    pairs: Literal["all", "blocks", "auto"] = "auto"
    """Kendall pairs: ``auto`` (the CLI default) = all pairs while n(n-1)/2 * p is at most
    :data:`~dppca_dask.pca.loading.AUTO_MAX_WORK`, blocks above (decided from n and p only)."""
    pair_block: int = Field(default=4096, ge=2)
    preset: Literal["recommended", "seed"] = "recommended"
    """Where the keys this section leaves out come from: ``recommended`` (the defaults above)
    or ``seed`` -- the R package's configuration (``calibration: classical``, ``sensitivity:
    seed``, the ``add`` histogram, the ``durfee`` frame; :data:`~dppca_dask.pca.options.PRESETS`).
    A key given explicitly wins."""

    _SCORE_KEY: ClassVar[str | None] = None
    """This section's name for the score (histogram) methods, if it has them."""

    @model_validator(mode="before")
    @classmethod
    def _fill_from_preset(cls, data: Any) -> Any:
        if not (isinstance(data, Mapping) and data.get("preset") == "seed"):
            return data
        from dppca_dask.pca.options import PRESETS

        keys = {"calibration": "calibration", "sensitivity": "sensitivity", "frame": "frame",
                "score_methods": cls._SCORE_KEY}
        filled = {keys[name]: list(value) if isinstance(value, tuple) else value
                  for name, value in PRESETS["seed"].items()
                  if keys[name] is not None and keys[name] in cls.model_fields}
        return {**filled, **data}


class LoadingConfig(_KendallOptions):
    """Options of :func:`~dppca_dask.dp_loading`."""


def _check_controls(controls: dict[Literal["clipped", "pmwm", "huber"], dict[str, Any]]
                    ) -> dict[str, Any]:
    """Check the given scree controls' values at load time (missing ones: at plan/run); the
    complete ones, built (the options object takes them as they are: checked once)."""
    from dppca_dask.errors import ParameterError
    from dppca_dask.pca.scree_controls import check_partial_control

    try:
        built = {name: check_partial_control(name, values) for name, values in controls.items()}
    except ParameterError as exc:
        raise ValueError(str(exc)) from None
    return {name: (control if control is not None else dict(controls[name]))
            for name, control in built.items()}


class ScreeConfig(_KendallOptions):
    """Options of :func:`~dppca_dask.dp_scree` and of its plots.

    ``controls`` holds each method's control parameters keyed by method name (the arguments of
    ``clipped_control``, ``pmwm_control``, ``huber_control``); they are checked by those
    constructors. ``directions`` optionally names a saved dp_loading result to use as ``V_dp``
    (its loading allocation is then recorded, not spent).
    """

    k: PositiveInt | None = None
    method: list[Literal["clipped", "pmwm", "huber"]] = Field(
        default_factory=_list_of("clipped"), min_length=1)
    controls: dict[Literal["clipped", "pmwm", "huber"], dict[str, Any]] = Field(
        default_factory=dict)
    center: Literal["private", "empirical"] | float | list[float] = "private"
    mono: bool = True
    directions: str | None = None
    plots: list[Literal["pve", "scree"]] = Field(default_factory=_list_of("pve", "scree"))
    plot_formats: list[Literal["png", "svg"]] = Field(default_factory=_list_of("png", "svg"))
    dpi: PositiveInt = 150

    _controls: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _valid_controls(self) -> ScreeConfig:
        """Check the given controls' values now; missing ones are reported by ``plan``/``run``."""
        self._controls = _check_controls(self.controls)
        return self

    def checked_controls(self) -> dict[str, Any]:
        """The controls as checked at load: complete ones built, partial ones as given."""
        return dict(self._controls)


class ScoreSamplingConfig(_Model):
    """:func:`~dppca_dask.sampling_control` for the synthetic samples of the score task."""

    method: list[Literal["center", "uniform"]] = Field(default_factory=_list_of("uniform"),
                                                       min_length=1)
    sample_size: PositiveInt | None = None
    bandwidth_scale: (NonNegativeFloat | dict[Literal["center", "uniform"], NonNegativeFloat]
                      | None) = None


class ScoreConfig(_KendallOptions):
    """Options of :func:`~dppca_dask.dp_score` and of its samples and plots."""

    _SCORE_KEY: ClassVar[str | None] = "method"

    axes: list[PositiveInt] = Field(default_factory=lambda: [1, 2], min_length=2, max_length=2)
    bins: list[PositiveInt] | PositiveInt | None = None
    method: list[Literal["add", "sparse", "geometric"]] = Field(
        default_factory=_list_of("geometric"), min_length=1)
    frame: Literal["auto", "ranged", "durfee", "capped", "smooth"] = "auto"
    sampling: ScoreSamplingConfig = Field(default_factory=ScoreSamplingConfig)
    group_weights: Literal["observed", "private"] = "observed"
    private_plot: list[Literal["histogram", "sample"]] = Field(
        default_factory=_list_of("histogram", "sample"), min_length=1)
    plots: bool = True
    samples_format: Literal["parquet", "csv"] = "parquet"
    show_group_legend: bool = True
    dpi: PositiveInt = 150


class PCAConfig(_KendallOptions):
    """Options of :func:`~dppca_dask.dp_pca` (task ``pca``) and of its samples and plots.

    ``scree_control`` holds each scree method's control parameters keyed by method name (the
    arguments of ``clipped_control``, ``pmwm_control``, ``huber_control``); ``sampling`` must
    name exactly one sampling method (the score and biplot panels share it).
    """

    _SCORE_KEY: ClassVar[str | None] = "score_method"

    k: PositiveInt | None = None
    scree_method: list[Literal["clipped", "pmwm", "huber"]] = Field(
        default_factory=_list_of("clipped"), min_length=1)
    scree_control: dict[Literal["clipped", "pmwm", "huber"], dict[str, Any]] = Field(
        default_factory=dict)
    center: Literal["private", "empirical"] | float | list[float] = "private"
    mono: bool = True
    bins: list[PositiveInt] | PositiveInt | None = None
    score_method: list[Literal["add", "sparse", "geometric"]] = Field(
        default_factory=_list_of("geometric"), min_length=1)
    axes: list[PositiveInt] = Field(default_factory=lambda: [1, 2], min_length=2, max_length=2)
    frame: Literal["auto", "ranged", "durfee", "capped", "smooth"] = "auto"
    sampling: ScoreSamplingConfig = Field(default_factory=ScoreSamplingConfig)
    group_weights: Literal["observed", "private"] = "observed"
    panels: list[Literal["score", "biplot"]] = Field(
        default_factory=_list_of("score", "biplot"), min_length=1)
    plots: bool = True
    samples_format: Literal["parquet", "csv"] = "parquet"
    show_group_legend: bool = True
    dpi: PositiveInt = 150

    _controls: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _valid(self) -> PCAConfig:
        if len(set(self.sampling.method)) != 1:
            raise ValueError("pca.sampling.method must name exactly one sampling method "
                             "(center or uniform)")
        self._controls = _check_controls(self.scree_control)
        return self

    def checked_controls(self) -> dict[str, Any]:
        """The controls as checked at load: complete ones built, partial ones as given."""
        return dict(self._controls)


class CovarianceConfig(_Model):
    """Options of :func:`~dppca_dask.dp_covariance`; ``privacy`` eps/delta become ρ-zCDP.

    ``preset: recommended`` (default) makes ``method: auto, clip: row, radius: private`` the
    values of the keys left out; ``preset: seed`` makes them ``method: pace_ggm, clip: box`` (the R
    package's; give ``bounds``). Keys given always win; ``bounds`` alone selects ``clip: box``, a
    ``radius`` alone ``clip: row``. ``clip: box``: ``bounds`` (required) are public: one number
    for every variable, a list with one per variable, or a mapping from variable name to bound.
    ``clip: row``: rows are scaled to L2 norm at most ``radius`` (Analyze-Gauss; no
    ``bounds``): a public number, or ``private`` (the default: a private quantile of the row
    norms from 5 % of the budget). ``control`` holds the arguments of
    :func:`~dppca_dask.pace_ggm_control` (method ``pace_ggm``) or ``{psd: bool}`` (``ssp``).
    """

    preset: Literal["recommended", "seed"] = "recommended"
    method: Literal["pace_ggm", "ssp", "diagonal", "auto"] | None = None
    clip: Literal["box", "row"] | None = None
    bounds: (Annotated[float, Field(gt=0, allow_inf_nan=False)]
             | list[Annotated[float, Field(gt=0, allow_inf_nan=False)]]
             | dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]]
             | None) = None
    radius: Annotated[float, Field(gt=0, allow_inf_nan=False)] | Literal["private"] | None = None
    control: dict[str, Any] | None = None
    report_clipping: bool = False

    def resolved(self) -> tuple[str, str, float | str | None]:
        """``(method, clip, radius)`` with the preset's values for the keys left out."""
        from dppca_dask.covariance.estimator import resolve_preset

        method, clip, radius = resolve_preset(self.preset, method=self.method, clip=self.clip,
                                              bounds=self.bounds, radius=self.radius)
        return method, clip, radius

    @model_validator(mode="after")
    def _valid_control(self) -> CovarianceConfig:
        from dppca_dask.covariance.estimator import parse_control
        from dppca_dask.errors import ParameterError

        method, clip, radius = self.resolved()
        if clip == "box" and (self.bounds is None or radius is not None):
            raise ValueError("config key 'covariance.bounds' is required with clip: box (the "
                             "public bounds; preset: seed means clip: box), and "
                             "'covariance.radius' applies only to clip: row")
        if clip == "row" and self.bounds is not None:
            raise ValueError("config key 'covariance.bounds' applies only to clip: box; with "
                             "clip: row give 'covariance.radius' (a public number, or private)")
        try:
            parse_control(method, self.control)
        except ParameterError as exc:
            raise ValueError(str(exc)) from None
        return self


class OutputConfig(_Model):
    """Where results go; the directory is created and must not exist unless ``overwrite``."""

    directory: str = Field(min_length=1)
    formats: list[Literal["zarr", "netcdf"]] = Field(default_factory=_list_of("zarr"), min_length=1)
    overwrite: bool = False


class BudgetCapConfig(_Model):
    """A run's own cap: ``eps`` and ``delta`` together, and/or ``rho`` (zCDP)."""

    eps: NonNegativeFloat | None = None
    delta: Annotated[float, Field(ge=0, lt=1)] | None = None
    rho: NonNegativeFloat | None = None

    @model_validator(mode="after")
    def _complete(self) -> BudgetCapConfig:
        if (self.eps is None) != (self.delta is None):
            raise ValueError("give eps and delta together (and/or rho)")
        if self.eps is None and self.rho is None:
            raise ValueError("give eps and delta, or rho")
        return self


class BudgetLedgerConfig(_Model):
    """The run's use of the persistent budget ledger (see :mod:`dppca_dask.pipeline.ledger`).

    The ledger's location is the deployment's (Dask config ``dppca.ledger.url``, default a
    per-user data directory); ``path``/``url`` may name another only where the deployment allows
    it (``dppca.ledger.allow_run_config``). The dataset's cap is the custodian's, stored in the
    ledger (``dppca-dask budget cap``); ``cap`` here can only lower it for this run (a looser
    value is ignored with a warning). ``enabled: false`` skips the ledger unless the deployment
    requires it (:mod:`dppca_dask.pipeline.deployment`).
    """

    enabled: bool = True
    path: str | None = None
    url: str | None = None
    cap: BudgetCapConfig | None = None
    strict: bool = False
    """Refuse (instead of warn about) settings outside their guarantee: the classical
    calibration at eps >= 1, delta >= 1/n (:mod:`dppca_dask.privacy.guarantees`)."""

    @model_validator(mode="after")
    def _one_location(self) -> BudgetLedgerConfig:
        if self.path is not None and self.url is not None:
            raise ValueError("give path or url, not both")
        return self

    @property
    def location(self) -> str | None:
        """The ledger the run config names (``path`` or ``url``), if any."""
        return self.url if self.url is not None else self.path


class RunConfig(_Model):
    """One run: input, task, privacy, task options, cluster, outputs and an optional rng seed."""

    input: InputConfig
    task: Literal["loading", "scree", "score", "covariance", "pca"] = "loading"
    privacy: PrivacyConfig
    loading: LoadingConfig = Field(default_factory=LoadingConfig)
    scree: ScreeConfig = Field(default_factory=ScreeConfig)
    score: ScoreConfig = Field(default_factory=ScoreConfig)
    pca: PCAConfig = Field(default_factory=PCAConfig)
    covariance: CovarianceConfig | None = None
    cluster: ClusterConfig = Field(default_factory=LocalClusterConfig)
    output: OutputConfig
    budget_ledger: BudgetLedgerConfig = Field(default_factory=BudgetLedgerConfig)
    rng: NonNegativeInt | None = None

    def to_dict(self) -> dict[str, Any]:
        """The resolved config as JSON-ready data, with the rng seed removed and without the
        sections of the other tasks (they do not apply, and a written config must replay even
        after their defaults change)."""
        data = self.model_dump(mode="json")
        data["rng"] = None
        for name in (*_SECTIONS, "covariance"):
            if name != self.task:
                data.pop(name, None)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_describe(exc)) from None


_UNION_TAG = re.compile(r"^(str|int|float|bool|none|list|dict|literal|json-or-python)$|[\[\-]")
"""A pydantic union member's tag in an error location (``constrained-float``, ``list[...]``):
an internal type name, not a config key; :func:`_describe` leaves it out."""
_TYPE_ERRORS = frozenset({"float_type", "float_parsing", "int_type", "int_parsing", "list_type",
                          "dict_type", "string_type", "bool_type", "bool_parsing", "model_type",
                          "none_required", "model_attributes_type"})
_PARAMETER = re.compile(r"^The '(\w+)' parameter of (\w+) (must .*)$", re.DOTALL)


def _config_key(section: str, param: str, function: str) -> str:
    """The config key of a library parameter named in a nested validator's message."""
    if function.endswith("_control") and function not in ("privacy_control", "pace_ggm_control"):
        method = function.removesuffix("_control")
        controls = "scree_control" if section == "pca" else "controls"
        return f"{section}.{controls}.{method}.{param}"
    if function == "pace_ggm_control":
        return f"{section}.control.{param}"
    return f"{section}.{param}" if section else param


def _describe(exc: ValidationError) -> str:
    """One line naming each bad key in config-key wording (no pydantic type names)."""
    grouped: dict[str, list[Any]] = {}
    for err in exc.errors():
        parts = [str(p) for p in err["loc"] if not (isinstance(p, str) and _UNION_TAG.search(p))]
        grouped.setdefault(".".join(parts) or "<root>", []).append(err)
    # a union member that matched the value's type says more than the members that did not
    specific = {k for k, errs in grouped.items() if any(e["type"] not in _TYPE_ERRORS
                                                        for e in errs)}
    problems = []
    for key, errs in grouped.items():
        if key not in specific and any(s.startswith(key + ".") for s in specific):
            continue  # e.g. bounds: [1, -2] -- the list member's message on bounds.1 is enough
        if key in specific:
            errs = [e for e in errs if e["type"] not in _TYPE_ERRORS]
        messages: list[str] = []
        for err in errs:
            if err["type"] == "extra_forbidden":
                messages.append(f"config key {key!r} is not a known setting")
                continue
            if err["type"] == "missing":
                messages.append(f"config key {key!r} is required")
                continue
            msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Input should be ")
            match = _PARAMETER.match(msg)
            if match:
                param, function, rule = match.groups()
                messages.append(f"config key {_config_key(key, param, function)!r} {rule}")
                continue
            if str(err["msg"]).startswith("Input should be "):
                messages.append(f"config key {key!r} must be {msg} (got {err.get('input')!r})")
            else:
                messages.append(f"config key {key!r}: {msg} (got {err.get('input')!r})")
        if len(messages) > 1 and all(e["type"] in _TYPE_ERRORS for e in errs):
            rules = [str(e["msg"]).removeprefix("Input should be ") for e in errs]
            messages = [f"config key {key!r} must be " + " or ".join(dict.fromkeys(rules))
                        + f" (got {errs[0].get('input')!r})"]
        problems += messages
    return "Invalid config: " + "; ".join(dict.fromkeys(m.rstrip(".") for m in problems)) + "."


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key given twice in one mapping (YAML 1.2 forbids it;
    PyYAML would silently keep the last value, e.g. ``eps: 1`` then ``eps: 100`` gives 100)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:  # the explicit keys (merged << keys may be overridden)
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                continue  # the base class reports unhashable keys
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise ConfigError(f"Duplicate key {key!r} at line {key_node.start_mark.line + 1} "
                                  f"(first given at line {first}); each setting may appear "
                                  "only once.")
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def safe_load_unique(text: str) -> Any:
    r"""``yaml.safe_load`` that raises :class:`ConfigError` on a duplicate mapping key.

    Examples
    --------
    >>> safe_load_unique("a: 1\nb: {c: 2}")
    {'a': 1, 'b': {'c': 2}}
    >>> safe_load_unique("privacy:\n  eps: 1\n  eps: 100\n")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dppca_dask.errors.ConfigError: Duplicate key 'eps' at line 3 (first given at line 2); ...
    """
    return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: safe


def config_text(raw: bytes) -> str:
    r"""The text of a config file: UTF-8 (a UTF-8 byte-order mark is dropped) or UTF-16 with its
    byte-order mark, as YAML allows; any other encoding is a :class:`ConfigError` naming the
    first byte that is not UTF-8.

    Examples
    --------
    >>> config_text("task: pca\n".encode("utf-16"))
    'task: pca\n'
    >>> config_text(b"path: caf\xe9")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dppca_dask.errors.ConfigError: not UTF-8 text: byte 0xe9 at line 1, column 10 is not ...
    """
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError:
            pass  # reported as not UTF-8 below
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at line {line}, column {column} is "
            "not valid UTF-8 (save the file as UTF-8).") from None


ENV_PREFIX = "DPPCA_RUN__"
"""Environment variables ``DPPCA_RUN__<KEY>__<SUBKEY>=value`` override run-config keys (``__``
separates levels: ``DPPCA_RUN__PRIVACY__EPS=0.5`` sets ``privacy.eps``). The ``RUN`` level keeps
them apart from the deployment's ``DPPCA_LEDGER__*`` settings (Dask config ``dppca.ledger``,
:mod:`dppca_dask.pipeline.deployment`), which a run config cannot change."""

_SECTIONS: dict[str, type[_Model]] = {"loading": LoadingConfig, "scree": ScreeConfig,
                                      "score": ScoreConfig, "pca": PCAConfig}


@dataclass(frozen=True)
class Override:
    """One run-config override: the key path, its value (YAML-parsed) and where it came from."""

    key: tuple[str, ...]
    value: Any
    source: str
    """``--set privacy.eps=0.5`` or ``DPPCA_RUN__PRIVACY__EPS``: how messages name it."""

    @property
    def dotted(self) -> str:
        return ".".join(self.key)


_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _parse_value(text: str, where: str) -> Any:
    """A YAML value; ``1e-6`` (a string in YAML 1.1) is a number, as in YAML 1.2."""
    try:
        value = safe_load_unique(text) if text.strip() else None
    except (ConfigError, yaml.YAMLError) as exc:
        raise ConfigError(f"{where}: the value is not valid YAML "
                          f"({' '.join(str(exc).split())}).") from None
    return float(value) if isinstance(value, str) and _NUMBER.match(value) else value


def parse_set(item: str) -> Override:
    """``key.path=value`` (``--set``) as an :class:`Override`; the value is parsed as YAML.

    Examples
    --------
    >>> parse_set("privacy.eps=0.5")
    Override(key=('privacy', 'eps'), value=0.5, source='--set privacy.eps=0.5')
    >>> parse_set("scree.method=[clipped, pmwm]").value
    ['clipped', 'pmwm']
    >>> parse_set("eps")
    Traceback (most recent call last):
    ...
    dppca_dask.errors.ConfigError: --set 'eps': give key.path=value (e.g. --set privacy.eps=0.5).
    """
    key, sep, text = item.partition("=")
    parts = tuple(p.strip() for p in key.strip().split("."))
    if not sep or not all(parts):
        raise ConfigError(f"--set {item!r}: give key.path=value (e.g. --set privacy.eps=0.5).")
    return Override(parts, _parse_value(text, f"--set {item!r}"), f"--set {item}")


def env_overrides(environ: Mapping[str, str] | None = None) -> list[Override]:
    """The ``DPPCA_RUN__*`` variables of ``environ`` (default ``os.environ``), sorted by name.

    Key names are matched case-insensitively against the config's keys (see
    :func:`apply_overrides`); values are parsed as YAML, as ``--set`` values are.

    Examples
    --------
    >>> [(o.key, o.value) for o in env_overrides({"DPPCA_RUN__PRIVACY__EPS": "0.5",
    ...                                          "DPPCA_LEDGER__URL": "/x"})]
    [(('PRIVACY', 'EPS'), 0.5)]
    """
    environ = os.environ if environ is None else environ
    out = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        parts = tuple(name[len(ENV_PREFIX):].split("__"))
        if not all(parts):
            raise ConfigError(f"Environment variable {name!r}: give DPPCA_RUN__<KEY>__<SUBKEY> "
                              "(e.g. DPPCA_RUN__PRIVACY__EPS=0.5).")
        out.append(Override(parts, _parse_value(environ[name], f"Environment variable {name!r}"),
                            name))
    return out


def _known_keys(node: Any, path: tuple[str, ...]) -> list[str]:
    """Keys a mapping at ``path`` may hold: those present plus the model's field names."""
    keys = [str(k) for k in node] if isinstance(node, dict) else []
    model: Any = RunConfig
    for part in path:
        field = getattr(model, "model_fields", {}).get(part)
        model = getattr(field, "annotation", None) if field is not None else None
        if model is not None and not isinstance(model, type):  # X | None: the model member
            model = next((a for a in get_args(model) if isinstance(a, type)
                          and issubclass(a, BaseModel)), None)
    keys += list(getattr(model, "model_fields", {}) if isinstance(model, type) else {})
    return keys + _control_parameters(path)


def _control_parameters(path: tuple[str, ...]) -> list[str]:
    """The parameter names of the control a mapping at ``path`` holds (``C_clip``, ...)."""
    import inspect

    from dppca_dask.pca import scree_controls

    factory: Any = None
    if len(path) == 3 and path[:2] in (("scree", "controls"), ("pca", "scree_control")):
        factory = getattr(scree_controls, f"{path[2]}_control", None)
    elif path == ("covariance", "control"):
        from dppca_dask.covariance.pace_ggm import pace_ggm_control

        factory = pace_ggm_control
    return list(inspect.signature(factory).parameters) if callable(factory) else []


def apply_overrides(data: dict[str, Any], overrides: Sequence[Override]) -> dict[str, Any]:
    """``data`` (a config mapping) with ``overrides`` applied in order (a later one wins).

    An environment variable's key parts match existing keys and known setting names
    case-insensitively (``C_clip`` from ``..._C_CLIP``); other parts are lower-cased.

    Examples
    --------
    >>> apply_overrides({"privacy": {"eps": 1}}, [parse_set("privacy.delta=1e-6")])
    {'privacy': {'eps': 1, 'delta': 1e-06}}
    """
    out = copy.deepcopy(data)
    for item in overrides:
        node: Any = out
        path: tuple[str, ...] = ()
        env = not item.source.startswith("--set")
        for i, raw in enumerate(item.key):
            if not isinstance(node, dict):
                raise ConfigError(f"{item.source}: config key {'.'.join(path)!r} is a value, "
                                  f"not a section, so it has no key {raw!r}.")
            part = raw
            if env:
                match = [k for k in _known_keys(node, path) if k.lower() == raw.lower()]
                part = match[0] if match else raw.lower()
            path += (part,)
            if i == len(item.key) - 1:
                node[part] = copy.deepcopy(item.value)
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
    return out


def check_task_sections(data: Mapping[str, Any]) -> None:
    """Refuse settings in the sections of tasks other than ``task`` (they would be ignored).

    A section equal to its defaults (as in a config written by ``to_dict``) is accepted.

    Examples
    --------
    >>> check_task_sections({"task": "pca", "scree": {"k": 3}, "loading": {}})
    Traceback (most recent call last):
    ...
    dppca_dask.errors.ConfigError: Config section 'scree' does not apply to task 'pca' and would be ignored; remove it, or move its settings to the 'pca' section (or set task: scree).
    """
    task = data.get("task", "loading")
    others = []
    for name in (*_SECTIONS, "covariance"):
        section = data.get(name)
        if name == task or section is None or section == {}:
            continue
        model = _SECTIONS.get(name)
        if model is not None and isinstance(section, dict):
            try:
                if model.model_validate(section) == model():
                    continue
            except ValidationError:
                pass
        others.append(name)
    if others:
        listed = ", ".join(repr(n) for n in others)
        what = "section" if len(others) == 1 else "sections"
        does = "does" if len(others) == 1 else "do"
        it = "it" if len(others) == 1 else "them"
        its = "its" if len(others) == 1 else "their"
        hint = f" (or set task: {others[0]})" if len(others) == 1 else ""
        raise ConfigError(f"Config {what} {listed} {does} not apply to task {task!r} and would "
                          f"be ignored; remove {it}, or move {its} settings to the {task!r} "
                          f"section{hint}.")


def load_config(path: str | os.PathLike[str], *, overrides: Sequence[str] = (),
                environ: Mapping[str, str] | None = None) -> RunConfig:
    """Read and validate a YAML run config; every problem is a :class:`ConfigError`.

    Precedence, lowest first: the file, then ``DPPCA_RUN__*`` environment variables
    (:data:`ENV_PREFIX`; ``environ`` defaults to ``os.environ``), then ``overrides`` (the CLI's
    ``--set key.path=value``, in order). The result is validated once, by the same models; a
    bad value names its key and the override that set it. Settings in another task's section
    are refused (:func:`check_task_sections`).
    """
    source = Path(path)
    if source.is_dir():
        raise ConfigError(f"Config file {str(source)!r} is a directory; give the path of a "
                          "YAML file (e.g. configs/quickstart.yaml).")
    if not source.is_file():
        raise ConfigError(f"Config file not found: {str(source)!r}.")
    try:
        data = safe_load_unique(config_text(source.read_bytes()))
    except ConfigError as exc:
        raise ConfigError(f"Config file {str(source)!r}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"Config file {str(source)!r} is not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"Config file {str(source)!r} nests its values deeper than the "
                          "parser can follow; a run config needs a few levels.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"Config file {str(source)!r} must hold a mapping of settings.")
    changes = [*env_overrides(environ), *(parse_set(item) for item in overrides)]
    data = apply_overrides(data, changes)
    try:
        check_task_sections(data)
        return RunConfig.from_dict(data)
    except ConfigError as exc:
        text = str(exc).lower()
        named = [c.source for c in changes
                 if f"'{c.dotted.lower()}" in text or f"'{c.key[0].lower()}'" in text]
        if not named:
            raise
        raise ConfigError(f"{str(exc).rstrip('.')} (set by {', '.join(dict.fromkeys(named))})."
                          ) from None


def dump_config(config: RunConfig, *, task_only: bool = False) -> str:
    """YAML of the resolved config (seed removed), for the output directory and ``plan``.

    ``task_only`` is kept for callers: :meth:`RunConfig.to_dict` always leaves out the sections
    of the other tasks.
    """
    header = "# dppca_dask resolved run config. A seed, if one was given, is never recorded.\n"
    return header + yaml.safe_dump(config.to_dict(), sort_keys=False)
