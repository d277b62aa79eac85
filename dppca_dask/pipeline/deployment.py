"""Deployment (data-custodian) settings that a run config cannot override.

They are read from the Dask configuration namespace ``dppca``, i.e. from the YAML files on Dask's
search path (``/etc/dask/*.yaml``, ``~/.config/dask/*.yaml``, ``$DASK_CONFIG``), from environment
variables (``DASK_DPPCA__LEDGER__REQUIRED=true``, ``DASK_DPPCA__LEDGER__PATH=/srv/ledger.jsonl``)
and from ``dask.config.set``:

* ``dppca.ledger.required`` (bool, default false): a run config with
  ``budget_ledger.enabled: false`` is refused before any work;
* ``dppca.ledger.path`` (optional): the ledger every run uses; a run config naming a different
  ``budget_ledger.path`` is refused, one naming none gets this one.

Files and environment variables are re-read at each run (not only when Dask was imported);
``required`` holds when any source sets it. This is deliberately small: caps still come from the
run config (a later change moves the ledger and the caps to the custodian).

Example ``/etc/dask/dppca.yaml``::

    dppca:
      ledger:
        required: true
        path: /srv/dppca/budget-ledger.jsonl
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from dppca_dask.errors import ConfigError

__all__ = ["DeploymentSettings", "apply_deployment", "deployment_settings"]


@dataclass(frozen=True)
class DeploymentSettings:
    """The custodian's ledger settings."""

    ledger_required: bool = False
    ledger_path: str | None = None


def _as_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no", "off", "0", ""):
        return False
    raise ConfigError(f"The deployment setting {key!r} (Dask config) must be true or false. "
                      f"Got {value!r} instead.")


def _ledger_section() -> dict[str, Any]:
    import dask.config

    fresh = dask.config.collect(paths=dask.config.paths, env=os.environ)
    merged: dict[str, Any] = {}
    for source in (fresh, dask.config.config):  # runtime dask.config.set wins for the path
        section = (source.get("dppca") or {}).get("ledger") or {}
        if not isinstance(section, dict):
            raise ConfigError("The deployment setting 'dppca.ledger' (Dask config) must be a "
                              f"mapping. Got {section!r} instead.")
        if "required" in section:
            merged["required"] = merged.get("required", False) or _as_bool(
                section["required"], "dppca.ledger.required")
        if section.get("path") not in (None, ""):
            merged["path"] = section["path"]
    return merged


def deployment_settings() -> DeploymentSettings:
    """The current deployment settings (see the module docstring).

    Examples
    --------
    >>> import dask
    >>> with dask.config.set({"dppca.ledger.required": True}):
    ...     deployment_settings().ledger_required
    True
    """
    section = _ledger_section()
    path = section.get("path")
    if path is not None and not isinstance(path, str | os.PathLike):
        raise ConfigError("The deployment setting 'dppca.ledger.path' (Dask config) must be a "
                          f"path. Got {path!r} instead.")
    return DeploymentSettings(bool(section.get("required", False)),
                              None if path is None else os.fspath(path))


def _same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def apply_deployment(config: Any) -> Any:
    """Check a :class:`~dppca_dask.pipeline.config.RunConfig` against the deployment; return the config
    the run must use (with the deployment's ledger path). Raises :class:`ConfigError`."""
    settings = deployment_settings()
    ledger = config.budget_ledger
    if settings.ledger_required and not ledger.enabled:
        raise ConfigError("The 'budget_ledger.enabled' config key must be true: this deployment "
                          "requires the persistent budget ledger (Dask config "
                          "dppca.ledger.required). Got false instead.")
    if settings.ledger_path is None:
        return config
    if ledger.path is not None and not _same_file(ledger.path, settings.ledger_path):
        raise ConfigError(f"The 'budget_ledger.path' config key must be left out or equal to the "
                          f"deployment's ledger {settings.ledger_path!r} (Dask config "
                          f"dppca.ledger.path). Got {ledger.path!r} instead.")
    return config.model_copy(update={
        "budget_ledger": ledger.model_copy(update={"path": settings.ledger_path})})
