"""The form's values as a ``dppca-dask run`` config, checked by the CLI's own code.

:func:`run_settings` builds the mapping a run-config YAML file would hold (task ``pca``), and
:func:`check` validates it exactly as ``dppca-dask plan`` does: the pydantic
:class:`~dppca_dask.pipeline.config.RunConfig`, then :func:`~dppca_dask.pipeline.runner.plan_run`
(the deployment's settings, the output location, the budget plan and every option against the
input's public shape; metadata only, no data values). Messages go through the CLI's wording
(``cli_message``, handed in by the ``app`` command: this package does not import the CLI), so the
page says what the command line would say. No Panel here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dppca_dask.app.catalogue import AppConfig, DatasetChoice
from dppca_dask.errors import DPPCAError

__all__ = ["Checked", "FormValues", "Wording", "check", "run_settings"]

Wording = Callable[[DPPCAError, "str | None"], str]
"""``(error, task) -> message``: :func:`dppca_dask.pipeline.wording.cli_message` (the default)."""

SCREE_METHODS = ("clipped", "pmwm", "huber")
SCORE_METHODS = ("add", "sparse", "geometric")
CONTROL_FIELDS: dict[str, tuple[str, ...]] = {
    "clipped": ("C_clip",),
    "pmwm": ("a", "b", "trim_const", "eta", "beta", "split_mode"),
    "huber": ("k_min_m2", "k_max_m2", "m2_frac", "mu0", "eta0", "T", "M"),
}
"""The control parameters of each scree method, as ``pca.scree_control.<method>`` keys."""


@dataclass
class FormValues:
    """What the form holds; ``None`` leaves a setting at the run config's default."""

    columns: list[str] | None = None
    group: bool = True
    eps: float | None = 1.0
    delta: float | None = 1e-4
    split: dict[str, float] | None = None
    k: int | None = 4
    scree_methods: list[str] = field(default_factory=lambda: ["clipped"])
    controls: dict[str, dict[str, Any]] = field(default_factory=dict)
    mono: bool = True
    axes: list[int] = field(default_factory=lambda: [1, 2])
    score_methods: list[str] = field(default_factory=lambda: ["geometric"])
    bins: list[int] | None = None
    sampling_method: str = "uniform"
    sample_size: int | None = None
    panels: list[str] = field(default_factory=lambda: ["score", "biplot"])
    group_weights: str = "observed"
    calibration: str = "analytic"
    sensitivity: str = "tight"
    non_private: bool = False


def run_settings(values: FormValues, dataset: DatasetChoice, app: AppConfig,
                 output: str) -> dict[str, Any]:
    """The run config (as YAML data) of ``values`` on ``dataset``, written to ``output``.

    Only the controls of the chosen scree methods are passed; empty fields are left out (the
    CLI then names what is missing). Non-private references are asked for only where APP.yaml
    allows them (:func:`check` refuses them otherwise).
    """
    privacy: dict[str, Any] = {"eps": values.eps, "delta": values.delta}
    if values.split is not None:
        privacy["split"] = dict(values.split)
    controls = {m: {k: v for k, v in values.controls.get(m, {}).items() if v is not None}
                for m in values.scree_methods if m in CONTROL_FIELDS}
    pca: dict[str, Any] = {
        "k": values.k, "scree_method": list(values.scree_methods),
        "scree_control": {m: c for m, c in controls.items() if c},
        "mono": values.mono, "score_method": list(values.score_methods),
        "axes": list(values.axes), "panels": list(values.panels),
        "group_weights": values.group_weights,
        "sampling": {"method": [values.sampling_method],
                     **({"sample_size": values.sample_size}
                        if values.sample_size is not None else {})},
        "calibration": values.calibration, "sensitivity": values.sensitivity,
        "non_private": bool(values.non_private),
    }
    if values.bins is not None:
        pca["bins"] = list(values.bins)
    return {
        "input": {"path": dataset.path, "array": dataset.array,
                  "columns": list(values.columns) if values.columns else None,
                  "group": dataset.group if values.group else None},
        "task": "pca",
        "privacy": privacy,
        "pca": pca,
        "cluster": app.cluster.model_dump(mode="json"),
        "output": {"directory": output, "formats": ["zarr"]},
    }


@dataclass(frozen=True)
class Checked:
    """A checked form: the run config and its plan, or the CLI's error message."""

    config: Any = None
    plan: Any = None
    error: str | None = None
    warnings: tuple[str, ...] = ()


def check(settings: dict[str, Any], app: AppConfig,
          wording: Wording | None = None) -> Checked:
    """Validate ``settings`` as ``dppca-dask plan`` would (no data values are read)."""
    from dppca_dask.pipeline.config import RunConfig
    from dppca_dask.pipeline.runner import plan_run
    from dppca_dask.pipeline.wording import cli_message

    say = wording or cli_message
    if settings.get("pca", {}).get("non_private") and not app.allow_non_private:
        return Checked(error="Non-private reference panels are not allowed by this deployment "
                             "(allow_non_private: false in the app config).")
    try:
        config = RunConfig.from_dict(settings)
        plan = plan_run(config)
    except DPPCAError as exc:  # ConfigError included
        return Checked(error=say(exc, "pca"))
    return Checked(config, plan, None, tuple(plan.guarantees))
