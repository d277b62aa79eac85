"""``dppca-dask serve``: the release service. Analysts submit run configs over HTTP; the
custodian's server holds the data, the ledger and the cluster, and only private outputs leave.

Modules: :mod:`~dppca_dask.service.settings` (the custodian's service file: catalogue, caps,
ledger, cluster, authentication, limits), :mod:`~dppca_dask.service.store` (the server's state:
hashed tokens, the durable job queue, the audit log), :mod:`~dppca_dask.service.auth` (bearer
tokens and OpenID Connect JWTs), :mod:`~dppca_dask.service.requests` (an analyst's config as the
server runs it), :mod:`~dppca_dask.service.core` (plans, submissions, the queue of worker
processes, restarts), :mod:`~dppca_dask.service.worker` (one job's process),
:mod:`~dppca_dask.service.api` (the HTTP API, FastAPI) and :mod:`~dppca_dask.service.server`
(uvicorn, the token commands). FastAPI and uvicorn are the ``service`` extra
(``pip install "dppca_dask[service]"``), imported only by the server; the analysts' client is
:mod:`dppca_dask.client`.
"""

from __future__ import annotations

import importlib.util

__all__ = ["MISSING_SERVICE", "service_available"]

MISSING_SERVICE = ('The release service needs FastAPI and uvicorn, which are not installed: '
                   'pip install "dppca_dask[service]".')


def service_available() -> bool:
    """Whether the server's packages can be imported (without importing them)."""
    return all(importlib.util.find_spec(name) is not None
               for name in ("fastapi", "uvicorn", "jwt"))
