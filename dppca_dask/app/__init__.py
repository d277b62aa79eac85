"""``dppca-dask app``: a local web app (Panel) over the same pipeline and ledger as the CLI.

Modules: :mod:`~dppca_dask.app.catalogue` (APP.yaml, the datasets offered, uploads converted
with :mod:`dppca_dask.io.convert`), :mod:`~dppca_dask.app.settings` (the form's values as a run
config, checked by the CLI's own models and plan), :mod:`~dppca_dask.app.state` (the ledger
line, runs through :func:`~dppca_dask.pipeline.runner.execute`, the session's history) -- none
of them imports Panel -- and :mod:`~dppca_dask.app.form`, :mod:`~dppca_dask.app.view`,
:mod:`~dppca_dask.app.page` (the Panel widgets and page). Panel is the ``app`` extra
(``pip install -e ".[app]"``); it is imported only by :func:`serve`, so ``import dppca_dask``
and the CLI work without it.
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING

from dppca_dask.errors import DPPCAError

if TYPE_CHECKING:
    from dppca_dask.app.settings import Wording

__all__ = ["MISSING_PANEL", "AppUnavailableError", "panel_available", "serve"]

MISSING_PANEL = ('The app needs Panel, which is not installed: pip install -e ".[app]" '
                 '(or pip install "dppca_dask[app]").')


class AppUnavailableError(DPPCAError):
    """The ``app`` extra (Panel) is not installed."""


def panel_available() -> bool:
    """Whether Panel can be imported (without importing it)."""
    return importlib.util.find_spec("panel") is not None


def serve(config: str | os.PathLike[str] | None = None, *, port: int = 5006,
          address: str = "127.0.0.1", wording: Wording | None = None,
          server: str | None = None, token: str | None = None) -> None:
    """Serve the app until the process is stopped (``dppca-dask app``).

    ``config``: APP.yaml (:mod:`dppca_dask.app.catalogue`); ``wording``: how errors read
    (default :func:`~dppca_dask.pipeline.wording.cli_message`: as on the command line);
    ``server``/``token``: work against a release service (:mod:`dppca_dask.app.remote`: its
    catalogue, plans, runs and ledger) instead of this machine's data and ledger. Raises
    :class:`AppUnavailableError` when Panel is missing, a ConfigError for a bad APP.yaml.
    """
    from dppca_dask.app.catalogue import load_app_config

    app = load_app_config(config)
    if not panel_available():
        raise AppUnavailableError(MISSING_PANEL)
    from dppca_dask.app.page import serve_app

    remote = None
    if server is not None:
        from dppca_dask.app.remote import Remote

        remote = Remote(server, token)
        remote.choices()  # reachable, and the token accepted: one line now, not in the page
        app = app.model_copy(update={"uploads": False})  # the server's catalogue only
    serve_app(app, port=port, address=address, wording=wording, remote=remote)
