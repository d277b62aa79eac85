"""The YAML run configuration: frozen pydantic models mirroring the function signatures.

A config names the input, the task and its options, the privacy budget, the cluster, the outputs
and (optionally) an ``rng`` seed for reproducible demos. Unknown keys and bad values are errors
that name the key. :meth:`RunConfig.to_dict` gives the resolved config as written next to the
outputs, **with the seed removed** (only whether one was given is recorded in the release).

Relative paths are taken relative to the directory the command runs in.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
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
    "load_config",
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

    @model_validator(mode="after")
    def _valid_control(self) -> PrivacyConfig:
        try:
            self.to_control()
        except BudgetError as exc:
            raise ValueError(str(exc)) from None
        return self

    def to_control(self) -> PrivacyControl:
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
    calibration: Literal["classical", "analytic"] = "classical"
    sensitivity: Literal["seed", "tight"] = "seed"
    block_rows: PositiveInt | None = None
    pairs: Literal["all", "blocks", "auto"] = "auto"
    """Kendall pairs: ``auto`` (the CLI default) = all pairs while n(n-1)/2 * p is at most
    :data:`~dppca_dask.pca.loading.AUTO_MAX_WORK`, blocks above (decided from n and p only)."""
    pair_block: int = Field(default=4096, ge=2)


class LoadingConfig(_KendallOptions):
    """Options of :func:`~dppca_dask.dp_loading`."""


def _check_controls(controls: dict[Literal["clipped", "pmwm", "huber"], dict[str, Any]]) -> None:
    """Check the given scree controls' values at load time (missing ones: at plan/run)."""
    from dppca_dask.errors import ParameterError
    from dppca_dask.pca.scree_controls import check_partial_control

    try:
        for name, values in controls.items():
            check_partial_control(name, values)
    except ParameterError as exc:
        raise ValueError(str(exc)) from None


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

    @model_validator(mode="after")
    def _valid_controls(self) -> ScreeConfig:
        """Check the given controls' values now; missing ones are reported by ``plan``/``run``."""
        _check_controls(self.controls)
        return self


class ScoreSamplingConfig(_Model):
    """:func:`~dppca_dask.sampling_control` for the synthetic samples of the score task."""

    method: list[Literal["center", "uniform"]] = Field(default_factory=_list_of("uniform"),
                                                       min_length=1)
    sample_size: PositiveInt | None = None
    bandwidth_scale: (NonNegativeFloat | dict[Literal["center", "uniform"], NonNegativeFloat]
                      | None) = None


class ScoreConfig(_KendallOptions):
    """Options of :func:`~dppca_dask.dp_score` and of its samples and plots."""

    axes: list[PositiveInt] = Field(default_factory=lambda: [1, 2], min_length=2, max_length=2)
    bins: list[PositiveInt] | PositiveInt | None = None
    method: list[Literal["add", "sparse"]] = Field(default_factory=_list_of("add"), min_length=1)
    frame: Literal["durfee", "smooth"] = "durfee"
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

    k: PositiveInt | None = None
    scree_method: list[Literal["clipped", "pmwm", "huber"]] = Field(
        default_factory=_list_of("clipped"), min_length=1)
    scree_control: dict[Literal["clipped", "pmwm", "huber"], dict[str, Any]] = Field(
        default_factory=dict)
    center: Literal["private", "empirical"] | float | list[float] = "private"
    mono: bool = True
    bins: list[PositiveInt] | PositiveInt | None = None
    score_method: list[Literal["add", "sparse"]] = Field(default_factory=_list_of("add"),
                                                         min_length=1)
    axes: list[PositiveInt] = Field(default_factory=lambda: [1, 2], min_length=2, max_length=2)
    frame: Literal["durfee", "smooth"] = "durfee"
    sampling: ScoreSamplingConfig = Field(default_factory=ScoreSamplingConfig)
    group_weights: Literal["observed", "private"] = "observed"
    panels: list[Literal["score", "biplot"]] = Field(
        default_factory=_list_of("score", "biplot"), min_length=1)
    plots: bool = True
    samples_format: Literal["parquet", "csv"] = "parquet"
    show_group_legend: bool = True
    dpi: PositiveInt = 150

    @model_validator(mode="after")
    def _valid(self) -> PCAConfig:
        if len(set(self.sampling.method)) != 1:
            raise ValueError("pca.sampling.method must name exactly one sampling method "
                             "(center or uniform)")
        _check_controls(self.scree_control)
        return self


class CovarianceConfig(_Model):
    """Options of :func:`~dppca_dask.dp_covariance`; ``privacy`` eps/delta become ρ-zCDP.

    ``bounds`` (required) are public: one number for every variable, a list with one per
    variable, or a mapping from variable name to bound. ``control`` holds the arguments of
    :func:`~dppca_dask.pace_ggm_control` (method ``pace_ggm``) or ``{psd: bool}`` (``ssp``).
    """

    method: Literal["pace_ggm", "ssp", "diagonal"] = "pace_ggm"
    bounds: (Annotated[float, Field(gt=0, allow_inf_nan=False)]
             | list[Annotated[float, Field(gt=0, allow_inf_nan=False)]]
             | dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]])
    control: dict[str, Any] | None = None
    report_clipping: bool = False

    @model_validator(mode="after")
    def _valid_control(self) -> CovarianceConfig:
        from dppca_dask.covariance.estimator import parse_control
        from dppca_dask.errors import ParameterError

        try:
            parse_control(self.method, self.control)
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
        """The resolved config as JSON-ready data, with the rng seed removed."""
        data = self.model_dump(mode="json")
        data["rng"] = None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        key = ".".join(str(part) for part in err["loc"]) or "<root>"
        if err["type"] == "extra_forbidden":
            problems.append(f"config key {key!r} is not a known setting")
        elif err["type"] == "missing":
            problems.append(f"config key {key!r} is required")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"config key {key!r}: {msg} (got {err.get('input')!r})")
    return "Invalid config: " + "; ".join(problems)


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


def load_config(path: str | os.PathLike[str]) -> RunConfig:
    """Read and validate a YAML run config; every problem is a :class:`ConfigError`."""
    source = Path(path)
    if not source.is_file():
        raise ConfigError(f"Config file not found: {str(source)!r}.")
    try:
        data = safe_load_unique(source.read_text())
    except ConfigError as exc:
        raise ConfigError(f"Config file {str(source)!r}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"Config file {str(source)!r} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"Config file {str(source)!r} must hold a mapping of settings.")
    return RunConfig.from_dict(data)


def dump_config(config: RunConfig) -> str:
    """YAML of the resolved config (seed removed), for the output directory and ``plan``."""
    header = "# dppca_dask resolved run config. A seed, if one was given, is never recorded.\n"
    return header + yaml.safe_dump(config.to_dict(), sort_keys=False)
