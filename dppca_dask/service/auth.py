"""Who is asking: the custodian's bearer tokens (stored hashed, :class:`~dppca_dask.service.
store.ServiceStore`) and, as the second way, an OpenID Connect provider's JWTs checked by
signature, issuer, audience and expiry (PyJWT; the provider's JWKS from a URL or a file).

:meth:`Authenticator.analyst` returns the analyst's name or raises :class:`Unauthenticated`
(HTTP 401); the reason is for the server's audit log, the response says only that the
credentials were refused.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from dppca_dask.errors import DPPCAError
from dppca_dask.service.settings import NAME, AuthConfig, OIDCConfig
from dppca_dask.service.store import TOKEN_PREFIX, ServiceStore

__all__ = ["Authenticator", "Unauthenticated"]


class Unauthenticated(DPPCAError):
    """No credentials, or credentials the server does not accept (HTTP 401)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class _OIDC:
    def __init__(self, config: OIDCConfig) -> None:
        import jwt

        self.config = config
        self._lock = threading.Lock()
        self._client: Any = None
        self._keys: Any = None
        if config.jwks_file is not None:
            self._keys = jwt.PyJWKSet.from_json(Path(config.jwks_file).read_text())
        else:
            self._client = jwt.PyJWKClient(config.jwks_url or "", cache_keys=True, timeout=10)

    def _key(self, token: str) -> Any:
        import jwt

        if self._client is not None:
            with self._lock:
                return self._client.get_signing_key_from_jwt(token).key
        kid = jwt.get_unverified_header(token).get("kid")
        keys = [k for k in self._keys.keys if kid is None or k.key_id == kid]
        if not keys:
            raise jwt.InvalidTokenError(f"no key with kid {kid!r} in the JWKS")
        return keys[0].key

    def analyst(self, token: str) -> str:
        import jwt

        try:
            claims = jwt.decode(token, self._key(token), algorithms=list(self.config.algorithms),
                                audience=self.config.audience, issuer=self.config.issuer,
                                leeway=self.config.leeway_s,
                                options={"require": ["exp", "iss", "aud"]})
        except (jwt.PyJWTError, ValueError, KeyError) as exc:
            raise Unauthenticated("The bearer token was refused.",
                                  f"JWT refused: {type(exc).__name__}: {exc}") from None
        name = claims.get(self.config.claim)
        if not isinstance(name, str) or not NAME.match(name):
            raise Unauthenticated("The bearer token was refused.",
                                  f"JWT claim {self.config.claim!r} is not an analyst name: "
                                  f"{json.dumps(name)[:80]}")
        return name


class Authenticator:
    """The service's ways to authenticate analysts (``auth`` of the service file)."""

    def __init__(self, config: AuthConfig, store: ServiceStore) -> None:
        self.config, self.store = config, store
        self.oidc = None if config.oidc is None else _OIDC(config.oidc)

    def analyst(self, authorization: str | None) -> str:
        """The analyst named by an ``Authorization`` header's value."""
        if not authorization:
            raise Unauthenticated("Authentication required: send 'Authorization: Bearer "
                                  "TOKEN' (a token from the custodian).", "no credentials")
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("Authentication required: send 'Authorization: Bearer "
                                  "TOKEN' (a token from the custodian).",
                                  f"scheme {scheme[:20]!r}")
        if token.startswith(TOKEN_PREFIX) and self.config.tokens:
            name = self.store.analyst_of(token)
            if name is None:
                raise Unauthenticated("The bearer token was refused (unknown or revoked).",
                                      "unknown or revoked token")
            return name
        if self.oidc is not None and token.count(".") == 2:
            return self.oidc.analyst(token)
        raise Unauthenticated("The bearer token was refused.", "not a token of this server")
