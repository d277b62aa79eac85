"""The custodian's service file (``dppca-dask serve SERVICE.yaml``): catalogue, caps, ledger,
cluster, authentication, limits and where the server keeps its state.

Every key but ``state_directory`` and ``datasets`` is optional::

    state_directory: /srv/dppca/service   # jobs, tokens, outputs, audit log: the custodian's
    ledger: sqlite:///srv/dppca/ledger.sqlite   # default: the deployment's dppca.ledger.url
    datasets:                              # the catalogue: what analysts may name
      - name: gau                          # input.path of an analyst's config
        path: /srv/data/gau.zarr
        array: X                           # default: the reader's pick
        group: group                       # a group variable; its group sizes are public
        description: Gaussian demo data
        cap: {eps: 10, delta: 1.0e-5}      # all analysts together (required)
        analyst_cap: {eps: 4, delta: 1.0e-5}   # each analyst's own (optional)
        analyst_caps: {alice: {eps: 6, delta: 1.0e-5}}   # per analyst, instead of analyst_cap
        analysts: [alice, bob]             # who may use it (default: every analyst)
        C_clip: 150                        # the app's default clipped-scree control (public)
    cluster: {kind: local, n_workers: 2}   # the run config's cluster models (default: local)
    auth:
      tokens: true                         # bearer tokens of `dppca-dask serve token add`
      oidc:                                # and/or JWTs of an OpenID Connect provider
        issuer: https://login.example.org/realms/dppca
        audience: dppca
        jwks_url: https://login.example.org/realms/dppca/protocol/openid-connect/certs
        claim: preferred_username          # the analyst's name (default: sub)
    limits:
      max_request_bytes: 1048576
      max_config_bytes: 65536
      max_queued_per_analyst: 4
      job_time_limit_s: 3600
    max_running: 1                         # jobs run at once (0: accept and queue only)
    listen: {host: 127.0.0.1, port: 8000}  # tls_cert/tls_key for HTTPS

Relative paths are taken from the file's folder. The caps are written into the ledger when the
server starts (a ``cap`` entry of the release log when one changed), so ``dppca-dask budget
show`` shows them; this file is their source. No Panel, no FastAPI here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from dppca_dask.errors import ConfigError
from dppca_dask.pipeline.budget_cap import Cap
from dppca_dask.pipeline.cluster_config import ClusterConfig, LocalClusterConfig

__all__ = ["AuthConfig", "CapConfig", "DatasetConfig", "LimitsConfig", "ListenConfig",
           "OIDCConfig", "ServiceConfig", "load_service_config"]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}$")
"""A dataset's or an analyst's name: letters, digits and ``_ . @ -``, at most 100."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _name(value: str, what: str) -> str:
    if not NAME.match(value):
        raise ValueError(f"{what} must be letters, digits and _ . @ - (at most 100, starting "
                         f"with a letter or digit); got {value!r}")
    return value


class CapConfig(_Model):
    """A cap: ``eps`` and ``delta`` together and/or ``rho`` (:class:`~dppca_dask.pipeline.
    budget_cap.Cap`)."""

    eps: float | None = None
    delta: float | None = None
    rho: float | None = None

    @model_validator(mode="after")
    def _valid(self) -> CapConfig:
        try:
            self.cap()
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return self

    def cap(self) -> Cap:
        return Cap(self.eps, self.delta, self.rho)


class DatasetConfig(_Model):
    """One dataset of the catalogue."""

    name: str
    path: str = Field(min_length=1)
    array: str | None = None
    group: str | None = None
    """A group-label variable of the store: naming it declares its group sizes public (grouped
    releases store them)."""
    description: str = ""
    C_clip: PositiveFloat | None = None
    """A public default of the clipped scree control, offered by the app (as APP.yaml's)."""
    cap: CapConfig
    analyst_cap: CapConfig | None = None
    analyst_caps: dict[str, CapConfig] = Field(default_factory=dict)
    analysts: list[str] | None = None

    @field_validator("name")
    @classmethod
    def _dataset_name(cls, value: str) -> str:
        return _name(value, "a dataset's name")

    @field_validator("analysts")
    @classmethod
    def _analyst_names(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [_name(v, "an analyst's name") for v in value]

    @field_validator("analyst_caps")
    @classmethod
    def _cap_names(cls, value: dict[str, CapConfig]) -> dict[str, CapConfig]:
        for name in value:
            _name(name, "an analyst's name")
        return value

    def allows(self, analyst: str) -> bool:
        """Whether ``analyst`` may use this dataset."""
        return self.analysts is None or analyst in self.analysts


class OIDCConfig(_Model):
    """JWTs of an OpenID Connect provider: the signature (the provider's JWKS: ``jwks_url``, or
    a file ``jwks_file``), ``iss`` = ``issuer``, ``aud`` holds ``audience``, ``exp`` in the
    future; the analyst is the ``claim`` (default ``sub``)."""

    issuer: str = Field(min_length=1)
    audience: str = Field(min_length=1)
    jwks_url: str | None = None
    jwks_file: str | None = None
    claim: str = "sub"
    algorithms: list[str] = Field(default_factory=lambda: ["RS256"], min_length=1)
    leeway_s: NonNegativeInt = 30

    @model_validator(mode="after")
    def _one_source(self) -> OIDCConfig:
        if (self.jwks_url is None) == (self.jwks_file is None):
            raise ValueError("give exactly one of jwks_url and jwks_file")
        if any(a.upper().startswith("HS") or a.lower() == "none" for a in self.algorithms):
            raise ValueError("algorithms must be public-key ones (RS256, ES256, ...): a shared "
                             "secret (HS*) or none is refused")
        return self


class AuthConfig(_Model):
    tokens: bool = True
    oidc: OIDCConfig | None = None

    @model_validator(mode="after")
    def _some(self) -> AuthConfig:
        if not self.tokens and self.oidc is None:
            raise ValueError("at least one way to authenticate analysts is needed (tokens: true "
                             "or an oidc section)")
        return self


class LimitsConfig(_Model):
    max_request_bytes: PositiveInt = 1 << 20
    max_config_bytes: PositiveInt = 64 << 10
    max_queued_per_analyst: PositiveInt = 4
    job_time_limit_s: PositiveFloat = 3600.0
    cancel_grace_s: PositiveFloat = 30.0
    """After SIGTERM (a cancel, the time limit, a shutdown), how long a job's process has to
    refund or keep its reservation before it is killed."""


class ListenConfig(_Model):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    tls_cert: str | None = None
    tls_key: str | None = None

    @model_validator(mode="after")
    def _pair(self) -> ListenConfig:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        return self


class ServiceConfig(_Model):
    """The service file (see the module docstring)."""

    state_directory: str = Field(min_length=1)
    ledger: str | None = None
    datasets: list[DatasetConfig] = Field(min_length=1)
    cluster: ClusterConfig = Field(default_factory=LocalClusterConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    max_running: NonNegativeInt = 1
    listen: ListenConfig = Field(default_factory=ListenConfig)

    @model_validator(mode="after")
    def _unique(self) -> ServiceConfig:
        names = [d.name for d in self.datasets]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"dataset names must be unique; {twice} appear twice")
        return self

    def dataset(self, name: str) -> DatasetConfig | None:
        """The catalogue's dataset called ``name``, or whose path is ``name``."""
        for entry in self.datasets:
            if name in (entry.name, entry.path):
                return entry
        return None

    @property
    def state(self) -> Path:
        return Path(self.state_directory)


def _resolve(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """Relative paths of the file taken from its folder."""
    def at(value: Any) -> Any:
        if isinstance(value, str) and value and "://" not in value and not os.path.isabs(value):
            return str(base / os.path.expanduser(value))
        return value

    out = dict(data)
    for key in ("state_directory", "ledger"):
        out[key] = at(out.get(key))
    if isinstance(out.get("datasets"), list):
        out["datasets"] = [{**d, "path": at(d.get("path"))} if isinstance(d, dict) else d
                           for d in out["datasets"]]
    auth = out.get("auth")
    if isinstance(auth, dict) and isinstance(auth.get("oidc"), dict):
        oidc = auth["oidc"]
        out["auth"] = {**auth, "oidc": {**oidc, "jwks_file": at(oidc.get("jwks_file"))}}
    listen = out.get("listen")
    if isinstance(listen, dict):
        out["listen"] = {**listen, **{k: at(listen.get(k)) for k in ("tls_cert", "tls_key")}}
    return {k: v for k, v in out.items() if v is not None or k in data}


def load_service_config(path: str | os.PathLike[str]) -> ServiceConfig:
    """Read and validate the service file; every problem is one :class:`ConfigError`."""
    import yaml

    from dppca_dask.pipeline.config import config_text, safe_load_unique

    source = Path(path)
    if not source.is_file():
        raise ConfigError(f"Service file not found: {str(source)!r} (dppca-dask serve "
                          "SERVICE.yaml; docs/guide/deployment.md shows one).")
    try:
        data = safe_load_unique(config_text(source.read_bytes()))
    except ConfigError as exc:
        raise ConfigError(f"Service file {str(source)!r}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"Service file {str(source)!r} is not valid YAML: "
                          f"{' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"Service file {str(source)!r} must hold a mapping of settings.")
    try:
        return ServiceConfig.model_validate(_resolve(data, source.resolve().parent))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if not str(p).startswith(("function-",)))
        message = str(first["msg"]).removeprefix("Value error, ")
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ConfigError(f"Service file {str(source)!r}: the {where or 'file'!r} key: "
                          f"{message}{more}.") from None
