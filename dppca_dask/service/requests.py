"""An analyst's run config, as the server runs it: the same YAML and models as ``dppca-dask
run``, with what belongs to the server taken out of the analyst's hands.

* ``input.path`` names a dataset of the catalogue (its name, or its path); the server fills in
  the path and array. ``input.storage_options`` is refused, ``input.array`` and ``input.group``
  must be the catalogue's (or left out);
* only private releases: ``rng`` (a seeded, reproducible release), ``non_private: true``,
  ``center: empirical``, ``covariance.report_clipping: true`` and ``scree.directions`` (a file
  on the server) are refused;
* ``cluster`` and ``output.directory``/``output.overwrite`` are the server's (the analyst's are
  ignored, and a note says so; ``dppca-dask submit`` downloads into ``output.directory``);
* ``budget_ledger``: the deployment's ledger, always on; ``cap`` may only lower the caps.

Then :func:`~dppca_dask.pipeline.runner.plan_run` plans it from the catalogue's metadata, as
``dppca-dask plan`` does. Errors are :class:`Refused` (an HTTP status and one line) or the
package's own errors (worded by :func:`~dppca_dask.pipeline.wording.cli_message`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dppca_dask.errors import ConfigError, DPPCAError
from dppca_dask.service.settings import DatasetConfig, ServiceConfig

__all__ = ["Refused", "Resolved", "parse_config", "resolve_config", "status_of"]


_KINDS = {403: "Forbidden", 404: "NotFound", 409: "Conflict", 413: "TooLarge",
          429: "TooManyJobs"}


class Refused(DPPCAError):
    """A request the server refuses, with its HTTP status (``kind``: the error's name in the
    response)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
        self.kind = _KINDS.get(status, "Refused")


@dataclass(frozen=True)
class Resolved:
    config: Any
    """The server's :class:`~dppca_dask.pipeline.config.RunConfig`."""
    dataset: DatasetConfig
    notes: tuple[str, ...]


def parse_config(text: str | dict[str, Any], limit: int) -> dict[str, Any]:
    """The analyst's config (YAML text or a mapping) as a mapping; at most ``limit`` bytes."""
    import json

    import yaml

    from dppca_dask.pipeline.config import safe_load_unique

    size = len(text.encode()) if isinstance(text, str) else len(json.dumps(text).encode())
    if size > limit:
        raise Refused(f"The config is {size} bytes; this server takes at most {limit} "
                      "(limits.max_config_bytes).", 413)
    if isinstance(text, dict):
        return text
    try:
        data = safe_load_unique(text)
    except ConfigError as exc:
        raise ConfigError(f"The config: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"The config is not valid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError("The config nests its values deeper than the parser can follow; a "
                          "run config needs a few levels.") from None
    if not isinstance(data, dict):
        raise ConfigError("The config must hold a mapping of settings (input, task, privacy, "
                          f"...). Got {type(data).__name__} instead.")
    return data


def _refuse_key(key: str, why: str, value: Any) -> ConfigError:
    return ConfigError(f"The {key!r} config key must be left out: {why}. Got {value!r} instead.")


def _section(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"Config key {name!r} must be a mapping of settings. Got "
                          f"{type(value).__name__} instead.")
    return dict(value)


def resolve_config(data: dict[str, Any], service: ServiceConfig, analyst: str,
                   output: str) -> Resolved:
    """The server's run config for ``analyst``'s ``data``, writing to ``output``."""
    from dppca_dask.pipeline.config import RunConfig, check_task_sections

    data = dict(data)
    notes: list[str] = []
    source = _section(data, "input")
    name = source.get("path")
    if not isinstance(name, str) or not name:
        raise ConfigError("The 'input.path' config key must name a dataset of this server's "
                          "catalogue (GET /api/v1/datasets lists them). Got "
                          f"{name!r} instead.")
    entry = service.dataset(name)
    if entry is None:
        raise Refused(f"No dataset {name!r} in this server's catalogue (GET /api/v1/datasets, "
                      "or `dppca-dask remote datasets`, lists them).", 404)
    if not entry.allows(analyst):
        raise Refused(f"Analyst {analyst!r} may not use dataset {entry.name!r} (the "
                      "custodian's catalogue lists who may).", 403)
    if source.get("storage_options"):
        raise _refuse_key("input.storage_options", "the server opens its own datasets",
                          source["storage_options"])
    for key, mine in (("array", entry.array), ("group", entry.group)):
        given = source.get(key)
        if given is not None and given != mine:
            raise ConfigError(f"The 'input.{key}' config key must be left out or be the "
                              f"catalogue's ({mine!r} for dataset {entry.name!r}). Got "
                              f"{given!r} instead.")
    source.update(path=entry.path, array=entry.array)
    data["input"] = source
    if data.get("rng") is not None:
        raise _refuse_key("rng", "the server makes private releases only, and a seeded "
                          "release is reproducible by anyone who knows the seed (NOT PRIVATE)",
                          data["rng"])
    task = data.get("task", "loading")
    section = _section(data, task) if isinstance(task, str) else {}
    if section.get("non_private"):
        raise _refuse_key(f"{task}.non_private", "the server makes private releases only (a "
                          "non-private reference is computed from the data without noise)",
                          True)
    if section.get("center") == "empirical":
        raise ConfigError(f"The '{task}.center' config key must not be 'empirical' on this "
                          "server: the empirical centre is outside the privacy guarantee. Use "
                          "'private' (the default) or a public value. Got 'empirical' instead.")
    if section.get("report_clipping"):
        raise _refuse_key(f"{task}.report_clipping", "clipping counts are not private", True)
    if section.get("directions") is not None:
        raise _refuse_key(f"{task}.directions", "the server does not read files named by a "
                          "config", section["directions"])
    if data.get("cluster") not in (None, {}):
        notes.append("the config's 'cluster' section is ignored: the server runs every "
                     "release on its own cluster")
    data["cluster"] = service.cluster.model_dump(mode="json")
    out = _section(data, "output")
    out.pop("overwrite", None)
    out["directory"] = output
    data["output"] = out
    ledger = _section(data, "budget_ledger")
    if ledger.get("enabled") is False:
        raise ConfigError("The 'budget_ledger.enabled' config key must be true on this server: "
                          "every release is recorded in its ledger. Got false instead.")
    for key in ("path", "url"):
        if ledger.get(key) is not None:
            raise _refuse_key(f"budget_ledger.{key}", "the server's ledger records every "
                              "release", ledger[key])
    data["budget_ledger"] = ledger
    check_task_sections(data)
    return Resolved(RunConfig.from_dict(data), entry, tuple(notes))


def status_of(error: BaseException) -> int:
    """The HTTP status of an error raised while reading or planning a request."""
    from dppca_dask.errors import BudgetError, OutputExistsError

    if isinstance(error, Refused):
        return error.status
    if isinstance(error, BudgetError):
        return 409
    if isinstance(error, OutputExistsError):
        return 409
    return 422
