"""Deployment (data-custodian) settings: where the budget ledger lives, and what a run may change.

They are read from the Dask configuration namespace ``dppca``: the YAML files on Dask's search
path (``/etc/dask/*.yaml``, ``~/.config/dask/*.yaml``, ``$DASK_CONFIG``), environment variables
in Dask's convention (``DASK_DPPCA__LEDGER__URL=/srv/ledger.sqlite``, or without the ``DASK_``
prefix: ``DPPCA_LEDGER__URL=...``; ``__`` separates levels) and ``dask.config.set``. Files and
environment variables are re-read at each call (not only when Dask was imported). Precedence for
a value: YAML files < ``DASK_DPPCA__*`` < ``DPPCA_*`` < ``dask.config.set``. The switches
combine so that the stricter setting of any source wins.

* ``dppca.ledger.url`` -- the ledger (a SQLite database, :mod:`dppca_dask.pipeline.ledger`): a
  plain path (``~`` expanded, relative paths taken from the working directory) or
  ``sqlite:///abs/path`` (``file:///abs/path`` too). Default: a per-user data directory,
  ``$XDG_DATA_HOME/dppca_dask/ledger.sqlite``, else ``~/.local/share/dppca_dask/ledger.sqlite``.
  (``dppca.ledger.path`` is the older name of the same setting.)
* ``dppca.ledger.allow_run_config`` (bool, default false): whether a run config's
  ``budget_ledger.path``/``url`` may name another ledger. Without it, a run config naming a
  ledger other than the deployment's is a :class:`ConfigError`. False in any source wins.
* ``dppca.ledger.required`` (bool, default false): a run config with ``budget_ledger.enabled:
  false`` is refused before any work. True in any source wins.
* ``dppca.ledger.require_cap`` (bool, default false): a run on a dataset for which the custodian
  has set no cap (``dppca-dask budget cap``) is refused. True in any source wins.
* ``dppca.ledger.allow_seeded`` (bool, default false): where the ledger is required, a run config
  with an ``rng`` seed (a reproducible, NOT PRIVATE release) is refused unless this is true.
  False in any source wins.
* ``dppca.ledger.accountant`` (``tight``, default, or ``pld``): how a dataset's spends compose
  for its cap. ``tight`` (zCDP + CKS, Gaussian DP, basic) is valid however releases are chosen
  after seeing earlier ones. ``pld`` also admits by the privacy-loss-distribution composition
  (:mod:`~dppca_dask.privacy.pld`, up to ~10 % more releases on mixed Gaussian/Laplace
  ledgers), which is a valid bound only when every release's mechanism and parameters are fixed
  before any of them is released (a pre-registered batch): interactive use can under-count.
  ``tight`` in any source wins.
* ``dppca.ledger.journal_mode`` (``wal``, default, or ``delete``): SQLite's journal. WAL is the
  right choice on a local file system; a ledger on a network file system that several driver
  hosts share needs ``delete`` (and working POSIX locks on that file system).

* ``dppca.ledger.caps_url`` (path or ``sqlite:///`` URL, default none): the custodian's caps
  database. With it, every cap is read from that file and ``budget cap`` writes there; the
  ledger's own cap columns are ignored. Make it readable by the analysts and writable by the
  custodian only (the ledger itself must stay writable by every user who runs releases).

Caps are set by the custodian with ``dppca-dask budget cap`` (in the caps database, else in the
ledger), never here and never in the run config (which may only lower them for one run).

**The custodian's file.** When :data:`SYSTEM_FILE` (``/etc/dppca_dask/deployment.yaml``, a
system path, owned by the custodian and readable by all) exists, its ``dppca.ledger`` section
is the whole deployment: Dask's YAML files, ``DASK_DPPCA__*``/``DPPCA_*`` variables and
``dask.config.set`` -- all of which an analyst controls -- are not read, so an analyst can
neither point the runs at a fresh ledger nor switch ``required`` off. Whoever can write that
file holds the custodian's authority (:func:`custodian_refusal`): ``budget cap``, ``budget
release`` and ``budget import`` refuse everyone else. Without the file (a personal
installation) the settings come from the Dask configuration as above and every user is their
own custodian.

Example ``/etc/dask/dppca.yaml``::

    dppca:
      ledger:
        url: sqlite:///srv/dppca/ledger.sqlite
        required: true
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dppca_dask.errors import ConfigError

__all__ = ["SYSTEM_FILE", "DeploymentSettings", "apply_deployment", "custodian_refusal",
           "default_ledger_path", "deployment_settings", "ledger_location", "open_deployment_ledger",
           "parse_ledger_url", "seeded_refusal"]

_JOURNAL_MODES = ("wal", "delete")

SYSTEM_FILE = Path("/etc/dppca_dask/deployment.yaml")
"""The custodian's deployment file (see the module docstring); a system path only."""


@dataclass(frozen=True)
class DeploymentSettings:
    """The custodian's ledger settings (see the module docstring)."""

    ledger_required: bool = False
    ledger_url: str | None = None
    """The configured ``dppca.ledger.url`` (``None``: the per-user default)."""
    allow_run_config: bool = False
    require_cap: bool = False
    journal_mode: str = "wal"
    allow_seeded: bool = False
    """Whether a required ledger admits seeded (reproducible, NOT PRIVATE) releases."""
    caps_url: str | None = None
    """The custodian's caps database (``None``: caps live in the ledger)."""
    accountant: str = "tight"
    """How spends compose for a cap: ``tight`` or ``pld`` (see the module docstring)."""
    system_file: str | None = None
    """The custodian's file the settings came from (``None``: the Dask configuration)."""

    @property
    def caps_path(self) -> Path | None:
        """The caps database file, if the deployment has one."""
        return None if self.caps_url is None else parse_ledger_url(self.caps_url,
                                                                   "dppca.ledger.caps_url")

    @property
    def ledger_path(self) -> Path:
        """The ledger file every run uses (the configured url, else the per-user default)."""
        if self.ledger_url is None:
            return default_ledger_path()
        return parse_ledger_url(self.ledger_url, "dppca.ledger.url")


def default_ledger_path() -> Path:
    """``$XDG_DATA_HOME/dppca_dask/ledger.sqlite``, else ``~/.local/share/dppca_dask/...``."""
    base = os.environ.get("XDG_DATA_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "share"
    return root / "dppca_dask" / "ledger.sqlite"


def parse_ledger_url(url: Any, key: str) -> Path:
    """The file a ledger url names: a plain path, ``sqlite:///abs/path`` or ``file:///abs/path``.

    Examples
    --------
    >>> str(parse_ledger_url("sqlite:///srv/dppca/ledger.sqlite", "dppca.ledger.url"))
    '/srv/dppca/ledger.sqlite'
    >>> parse_ledger_url("postgres://db/ledger", "dppca.ledger.url")
    Traceback (most recent call last):
    ...
    dppca_dask.errors.ConfigError: The 'dppca.ledger.url' setting must be a path or a \
sqlite:///path URL (a SQLite file). Got 'postgres://db/ledger' instead.
    """
    if not isinstance(url, str | os.PathLike) or not os.fspath(url).strip():
        raise ConfigError(f"The {key!r} setting must be a path or a sqlite:///path URL (a SQLite "
                          f"file). Got {url!r} instead.")
    text = os.fspath(url).strip()
    lower = text.lower()
    for scheme in ("sqlite://", "file://"):
        if lower.startswith(scheme):
            rest = text[len(scheme):]
            if not rest.startswith("/") or rest.startswith("/:memory:"):
                raise ConfigError(f"The {key!r} setting must be a path or a sqlite:///path URL "
                                  f"with an absolute path (three slashes, then the path). Got "
                                  f"{text!r} instead.")
            return Path("/" + rest.lstrip("/"))
    if "://" in text:
        raise ConfigError(f"The {key!r} setting must be a path or a sqlite:///path URL (a SQLite "
                          f"file). Got {text!r} instead.")
    return Path(os.path.abspath(os.path.expanduser(text)))


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


def _prefixed_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """``DPPCA_LEDGER__URL=...`` etc. as ``{"dppca": {"ledger": {"url": ...}}}`` (Dask's rules:
    ``__`` nests, keys lower-cased, values parsed as Python literals when they are one)."""
    out: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith("DPPCA_"):
            continue
        parts = name[len("DPPCA_"):].lower().split("__")
        try:
            value: Any = ast.literal_eval(raw)
        except (SyntaxError, ValueError):
            value = raw
        node = out.setdefault("dppca", {})
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node[parts[-1]] = value
    return out


def _system_source() -> dict[str, Any] | None:
    """The custodian's file as a mapping, or ``None`` when there is none."""
    import yaml

    if not SYSTEM_FILE.is_file():
        return None
    try:
        loaded = yaml.safe_load(SYSTEM_FILE.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"The custodian's deployment file {str(SYSTEM_FILE)!r} cannot be read "
                          f"as YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"The custodian's deployment file {str(SYSTEM_FILE)!r} must hold a "
                          f"mapping (dppca: ledger: ...). Got {type(loaded).__name__} instead.")
    return loaded


def _sections() -> list[dict[str, Any]]:
    """The ``dppca.ledger`` mapping of each source, lowest precedence first (only the
    custodian's file when it exists)."""
    import dask.config

    system = _system_source()
    sources = ([system] if system is not None else
               [dask.config.collect(paths=dask.config.paths, env=os.environ),
                _prefixed_env(os.environ), dask.config.config])
    out = []
    for source in sources:
        section = (source.get("dppca") or {}).get("ledger") or {}
        if not isinstance(section, dict):
            raise ConfigError("The deployment setting 'dppca.ledger' (Dask config) must be a "
                              f"mapping. Got {section!r} instead.")
        out.append(section)
    return out


def deployment_settings() -> DeploymentSettings:
    """The current deployment settings (see the module docstring).

    Examples
    --------
    >>> import dask
    >>> with dask.config.set({"dppca.ledger.required": True}):
    ...     deployment_settings().ledger_required
    True
    """
    required = require_cap = False
    allow: bool | None = None
    seeded_ok: bool | None = None
    url: Any = None
    journal = "wal"
    caps: Any = None
    accountant: str | None = None
    for section in _sections():
        if section.get("accountant") not in (None, ""):
            chosen = str(section["accountant"]).strip().lower()
            if chosen not in ("tight", "pld"):
                raise ConfigError("The deployment setting 'dppca.ledger.accountant' must be one "
                                  f"of ['tight', 'pld']. Got {section['accountant']!r} instead.")
            accountant = chosen if accountant in (None, "pld") else accountant
        if section.get("caps_url") not in (None, ""):
            caps = section["caps_url"]
        if "required" in section:
            required = _as_bool(section["required"], "dppca.ledger.required") or required
        if "require_cap" in section:
            require_cap = _as_bool(section["require_cap"], "dppca.ledger.require_cap") \
                or require_cap
        if "allow_run_config" in section:
            value = _as_bool(section["allow_run_config"], "dppca.ledger.allow_run_config")
            allow = value if allow is None else (allow and value)
        if "allow_seeded" in section:
            value = _as_bool(section["allow_seeded"], "dppca.ledger.allow_seeded")
            seeded_ok = value if seeded_ok is None else (seeded_ok and value)
        for name in ("path", "url"):  # url wins over the older name within one source
            if section.get(name) not in (None, ""):
                url = section[name]
        if section.get("journal_mode") not in (None, ""):
            journal = str(section["journal_mode"]).strip().lower()
            if journal not in _JOURNAL_MODES:
                raise ConfigError("The deployment setting 'dppca.ledger.journal_mode' (Dask "
                                  f"config) must be one of {list(_JOURNAL_MODES)}. Got "
                                  f"{section['journal_mode']!r} instead.")
    if url is not None:
        parse_ledger_url(url, "dppca.ledger.url")  # a bad url is an error now, not at the run
    if caps is not None:
        parse_ledger_url(caps, "dppca.ledger.caps_url")
    system = str(SYSTEM_FILE) if SYSTEM_FILE.is_file() else None
    return DeploymentSettings(required, None if url is None else os.fspath(url), bool(allow),
                              require_cap, journal, bool(seeded_ok),
                              None if caps is None else os.fspath(caps), accountant or "tight",
                              system)


def custodian_refusal(command: str, settings: DeploymentSettings | None = None) -> str | None:
    """Why this user may not run the custodian's ``command`` (``None``: they may).

    The custodian is whoever can write the custodian's file (:data:`SYSTEM_FILE`) -- and the
    caps database, when there is one. Without that file every user is their own custodian."""
    settings = settings or deployment_settings()
    if settings.system_file is None:
        return None
    needed = [Path(settings.system_file)]
    if settings.caps_path is not None:
        caps = settings.caps_path
        needed.append(caps if caps.exists() else caps.parent)
    for path in needed:
        if not os.access(path, os.W_OK):
            return (f"Refused: `dppca-dask budget {command}` is the data custodian's, and this "
                    f"user (uid {os.getuid()}) cannot write {str(path)!r} (the custodian's "
                    "deployment settings). Ask the custodian. Nothing was changed.")
    return None


def ledger_location(config: Any, settings: DeploymentSettings | None = None) -> Path:
    """The ledger a run of ``config`` (a :class:`~dppca_dask.pipeline.config.RunConfig`) uses.

    The deployment's, unless the run config names one and the deployment allows that
    (``dppca.ledger.allow_run_config``); a run config naming the deployment's own ledger is fine.
    Raises :class:`ConfigError`.
    """
    settings = settings or deployment_settings()
    ledger = config.budget_ledger
    deployed = settings.ledger_path
    named = ledger.location
    if named is None:
        return deployed
    key = "budget_ledger.url" if ledger.url is not None else "budget_ledger.path"
    path = parse_ledger_url(named, key)
    if _same_file(path, deployed) or settings.allow_run_config:
        return path
    raise ConfigError(f"The {key!r} config key must be left out: the budget ledger is the "
                      f"deployment's ({str(deployed)!r}, Dask config dppca.ledger.url), and this "
                      "deployment does not let a run config name another one "
                      f"(dppca.ledger.allow_run_config is not true). Got {named!r} instead.")


def _same_file(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def apply_deployment(config: Any) -> Any:
    """Check a :class:`~dppca_dask.pipeline.config.RunConfig` against the deployment: a required
    ledger cannot be disabled nor take a seeded run (unless ``allow_seeded``), a ledger named by
    the run must be allowed. Returns ``config``
    unchanged (the ledger's location is :func:`ledger_location`). Raises :class:`ConfigError`."""
    settings = deployment_settings()
    ledger = config.budget_ledger
    if settings.ledger_required and not ledger.enabled:
        raise ConfigError("The 'budget_ledger.enabled' config key must be true: this deployment "
                          "requires the persistent budget ledger (Dask config "
                          "dppca.ledger.required). Got false instead.")
    if settings.ledger_required and config.rng is not None and not settings.allow_seeded:
        raise ConfigError(seeded_refusal("The 'rng' config key must be left out", config.rng))
    if ledger.enabled:
        ledger_location(config, settings)
    return config


def seeded_refusal(what: str, value: Any) -> str:
    """The message refusing a seeded release where the deployment requires the ledger."""
    return (f"{what}: this deployment requires the budget ledger (dppca.ledger.required), and a "
            "release whose noise generator is seeded is reproducible by anyone who knows the "
            "seed (NOT PRIVATE); the custodian allows such test releases with "
            f"dppca.ledger.allow_seeded. Got {value!r} instead.")


def open_deployment_ledger(path: Path, settings: DeploymentSettings | None = None, *,
                           create: bool = True) -> Any:
    """The :class:`~dppca_dask.pipeline.ledger.Ledger` at ``path`` with the deployment's journal
    mode and caps database."""
    from dppca_dask.pipeline.ledger import Ledger

    settings = settings or deployment_settings()
    return Ledger(path, create=create, journal_mode=settings.journal_mode,
                  caps=settings.caps_path, accountant=settings.accountant)
