"""``dppca-dask serve``: start the release service, and the custodian's token commands.

:func:`serve` reads the service file, opens the ledger and refuses to start on a broken release
log, writes the file's caps into the ledger, reads each dataset's public metadata, settles the
jobs a stopped server left, then serves the API (:mod:`dppca_dask.service.api`) with uvicorn
until SIGINT/SIGTERM, when the running jobs are stopped (refunded, or kept as spent once noise
was drawn; a job stopped before its first draw is queued again for the next start).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dppca_dask.service.settings import load_service_config
from dppca_dask.service.store import ServiceStore

__all__ = ["add_token", "list_tokens", "revoke_token", "serve"]


def _socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        from dppca_dask.errors import ConfigError

        raise ConfigError(f"Cannot listen on {host}:{port}: {exc.strerror or exc} (listen.host "
                          "and listen.port of the service file, or --host/--port).") from None
    sock.set_inheritable(True)
    return sock


def serve(config_path: str | os.PathLike[str], *, host: str | None = None,
          port: int | None = None, say: Callable[[str], Any] = print) -> None:
    """Run the server of ``config_path`` until it is stopped (``say``: its start-up lines)."""
    import uvicorn

    from dppca_dask.pipeline.cluster_config import is_loopback
    from dppca_dask.service.api import create_app
    from dppca_dask.service.core import Service

    config = load_service_config(config_path)
    listen = config.listen
    host = listen.host if host is None else host
    port = listen.port if port is None else port
    tls = listen.tls_cert is not None
    service = Service(config)
    service.hold_state()  # before the port: a second server is refused in one line
    sock = _socket(host, port)
    actual = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"{'https' if tls else 'http'}://{shown}:{actual}/"
    if not is_loopback(host) and not tls:
        say(f"Warning: listening on {host} without TLS: bearer tokens cross the network in "
            "clear text. Set listen.tls_cert and listen.tls_key, or put a TLS proxy in front.")
    names = ", ".join(service.datasets)
    say(f"dppca-dask serve: {url} (API {url}api/v1, OpenAPI {url}docs); datasets: {names}; "
        f"ledger {service.ledger.path}; state {config.state}; pid {os.getpid()}. "
        "Ctrl-C or SIGTERM stops it.")
    app = create_app(service)
    server = uvicorn.Server(uvicorn.Config(
        app, log_level="warning", ssl_certfile=listen.tls_cert, ssl_keyfile=listen.tls_key,
        timeout_graceful_shutdown=int(config.limits.cancel_grace_s) + 5,
        proxy_headers=False, server_header=False, date_header=False))
    server.run(sockets=[sock])


def _store(config_path: str | os.PathLike[str]) -> ServiceStore:
    return ServiceStore(load_service_config(config_path).state)


def add_token(config_path: str | os.PathLike[str], analyst: str, note: str = "") -> tuple[str, str,
                                                                                           Path]:
    """A new bearer token for ``analyst``: (its id, the token, the database it is kept in,
    hashed)."""
    store = _store(config_path)
    token_id, token = store.add_token(analyst, note)
    return token_id, token, store.path


def revoke_token(config_path: str | os.PathLike[str], which: str) -> list[Any]:
    """Revoke the token ``which`` (its id) or every token of the analyst ``which``."""
    return _store(config_path).revoke(which)


def list_tokens(config_path: str | os.PathLike[str]) -> list[Any]:
    return _store(config_path).tokens()
