"""The release service's HTTP API (FastAPI; its OpenAPI description at ``/openapi.json``, pages
at ``/docs``). Every route but ``/api/v1/health`` needs ``Authorization: Bearer TOKEN``.

=======  =================================  ===============================================
GET      /api/v1/health                     the server answers (no authentication)
GET      /api/v1/datasets                   the catalogue: n, p, names, caps, spend, remaining
GET      /api/v1/datasets/{name}            one dataset
POST     /api/v1/plan                       ``{"config": YAML text or mapping}``: ``plan --json``
POST     /api/v1/jobs                       submit: planned, reserved, queued (202)
GET      /api/v1/jobs                       the analyst's jobs
GET      /api/v1/jobs/{id}                  state, data passes done of planned, message, files
POST     /api/v1/jobs/{id}/cancel           cancel (refunded before the first noise draw)
GET      /api/v1/jobs/{id}/files            the released files
GET      /api/v1/jobs/{id}/files/{name}     one file (a Zarr store: a zip of it)
GET      /api/v1/jobs/{id}/results.zip      every released file
=======  =================================  ===============================================

Every error is ``{"error": {"status", "type", "message"}}`` with one line of text and the status:
400 malformed JSON, 401 no or refused credentials (``WWW-Authenticate: Bearer``), 403 a dataset
the analyst may not use (or withheld outputs), 404 no such dataset, job or file (another
analyst's job is not found), 405, 409 past a cap / not finished / already finished, 413 a body
or config over the limits, 422 an invalid config, 429 too many queued jobs, 500 a bug (its
trace goes to the server's log only). Refused credentials and dataset refusals are written to
the server's audit log, never to the ledger.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dppca_dask.errors import DPPCAError
from dppca_dask.service.auth import Unauthenticated
from dppca_dask.service.core import Service
from dppca_dask.service.requests import status_of

__all__ = ["ConfigBody", "create_app"]

PREFIX = "/api/v1"


class ConfigBody(BaseModel):
    """A run config: the YAML text of a ``dppca-dask run`` config, or the same as a mapping.

    ``input.path`` names a dataset of the catalogue; ``cluster`` and ``output.directory`` are
    the server's."""

    config: str | dict[str, Any] = Field(
        description="The run config (YAML text, or a mapping).",
        examples=["input: {path: gau}\ntask: loading\nprivacy: {eps: 1, delta: 1e-6}\n"])


class _TooLarge(Exception):
    pass


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes (413), by ``Content-Length`` before reading
    and by counting while reading (a chunked body)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        message = (f"The request body is larger than this server takes ({self.limit} bytes, "
                   "limits.max_request_bytes).")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _error(413, "RequestTooLarge", message)(scope, receive, send)
            return
        seen = 0
        started = False

        async def limited() -> Message:
            nonlocal seen
            got = await receive()
            if got["type"] == "http.request":
                seen += len(got.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return got

        async def tracked(message_: Message) -> None:
            nonlocal started
            started = started or message_["type"] == "http.response.start"
            await send(message_)

        try:
            await self.app(scope, limited, tracked)
        except _TooLarge:
            if not started:
                await _error(413, "RequestTooLarge", message)(scope, receive, send)


def _error(status: int, kind: str, message: str,
           headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"status": status, "type": kind,
                                   "message": " ".join(message.split())}},
                        status_code=status, headers=headers)


def _message(exc: DPPCAError, task: str | None = None) -> str:
    from dppca_dask.pipeline.wording import cli_message

    return cli_message(exc, task)


def create_app(service: Service, *, manage: bool = True) -> FastAPI:
    """The API over ``service``; ``manage``: start its queue on startup and stop it on
    shutdown (a test drives the queue itself with ``manage=False``)."""
    from dppca_dask._version import package_version

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if manage:
            service.start()
        try:
            yield
        finally:
            if manage:
                service.stop()

    app = FastAPI(title="dppca_dask release service", version=package_version(),
                  summary="Differentially private PCA and covariance releases of the "
                          "custodian's datasets: only private outputs leave.",
                  lifespan=lifespan)
    store = service.store

    def analyst(request: Request) -> str:
        try:
            return service.auth.analyst(request.headers.get("authorization"))
        except Unauthenticated as exc:
            client = request.client.host if request.client else None
            store.audit("unauthenticated", reason=exc.reason, method=request.method,
                        path=request.url.path, client=client)
            raise

    @app.exception_handler(Unauthenticated)
    async def _unauthenticated(_request: Request, exc: Unauthenticated) -> Response:
        return _error(401, "Unauthenticated", str(exc),
                      {"WWW-Authenticate": 'Bearer realm="dppca"'})

    @app.exception_handler(DPPCAError)
    async def _refused(request: Request, exc: DPPCAError) -> Response:
        status = status_of(exc)
        if status == 403:
            store.audit("forbidden", analyst=getattr(request.state, "analyst", None),
                        method=request.method, path=request.url.path, message=str(exc))
        return _error(status, getattr(exc, "kind", type(exc).__name__),
                      _message(exc, getattr(request.state, "task", None)))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return _error(400, "MalformedRequest", "The request body is not valid JSON: send "
                          '{"config": "<the YAML text of a run config>"}.')
        first = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return _error(422, "InvalidRequest", f"The request's {where or 'body'!r}: "
                      f"{first.get('msg', 'invalid')} (send "
                      '{"config": "<the YAML text of a run config>"}).')

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> Response:
        text = {404: "No such resource (the API is under /api/v1; /docs describes it).",
                405: "Method not allowed on this resource."}.get(exc.status_code,
                                                                 str(exc.detail))
        return _error(exc.status_code, "HTTPError", text, getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _bug(_request: Request, exc: Exception) -> Response:
        traceback.print_exception(exc, file=sys.stderr)
        return _error(500, "InternalError", f"internal error {type(exc).__name__} (a bug; the "
                      "server's log has the details).")

    def who(request: Request, name: str = Depends(analyst)) -> str:
        request.state.analyst = name
        return name

    @app.get(f"{PREFIX}/health", tags=["service"])
    def health() -> dict[str, Any]:
        """Whether the server answers (no authentication, no detail)."""
        return {"status": "ok"}

    @app.get(f"{PREFIX}/datasets", tags=["datasets"])
    def datasets(name: str = Depends(who)) -> list[dict[str, Any]]:
        """The datasets this analyst may use: public metadata (n, p, variable names, the group
        variable), the dataset's cap and cumulative spend (all analysts), this analyst's cap and
        spend, and what remains (tight ε at the cap's δ; indicative: spends do not add up
        linearly, a plan says whether a release fits)."""
        return [service.dataset_view(info, name) for info in service.visible(name)]

    @app.get(f"{PREFIX}/datasets/{{dataset}}", tags=["datasets"])
    def dataset(dataset: str, name: str = Depends(who)) -> dict[str, Any]:
        """One dataset (as in the list)."""
        return service.dataset_view(service.info(dataset, name), name)

    @app.post(f"{PREFIX}/plan", tags=["jobs"])
    def plan(body: ConfigBody, request: Request, name: str = Depends(who)) -> dict[str, Any]:
        """Validate and plan a config without reading data: ``dppca-dask plan --json``'s
        output (planned records, total, passes, the data's shape, expected widths), after the
        cap checks a submission makes (409 past a cap); nothing is recorded."""
        _note_task(request, body)
        return service.plan(name, body.config)

    @app.post(f"{PREFIX}/jobs", status_code=202, tags=["jobs"])
    def submit(body: ConfigBody, request: Request, response: Response,
               name: str = Depends(who)) -> dict[str, Any]:
        """Submit a config: planned, its spend reserved in the ledger (the dataset's cap and
        this analyst's) before any data is read, then queued. 202 with the job; 409 past a
        cap; 429 with too many queued jobs."""
        _note_task(request, body)
        job, notes = service.submit(name, body.config)
        response.headers["Location"] = f"{PREFIX}/jobs/{job.id}"
        return {**service.job_view(job), "notes": notes}

    @app.get(f"{PREFIX}/jobs", tags=["jobs"])
    def jobs(name: str = Depends(who)) -> list[dict[str, Any]]:
        """This analyst's jobs, oldest first."""
        return [service.job_view(j) for j in store.jobs(analyst=name)]

    @app.get(f"{PREFIX}/jobs/{{job_id}}", tags=["jobs"])
    def job(job_id: str, name: str = Depends(who)) -> dict[str, Any]:
        """A job: state (queued, running, released, failed, cancelled), its place in the queue,
        data passes done of the planned ones, the spend, a message, the released files."""
        return service.job_view(service.job(name, job_id))

    @app.post(f"{PREFIX}/jobs/{{job_id}}/cancel", tags=["jobs"])
    def cancel(job_id: str, name: str = Depends(who)) -> dict[str, Any]:
        """Cancel a queued job (refunded) or a running one (stopped: refunded before its first
        noise draw, spent after it). 409 when it has already ended."""
        return service.job_view(service.cancel(name, job_id))

    @app.get(f"{PREFIX}/jobs/{{job_id}}/files", tags=["results"])
    def files(job_id: str, name: str = Depends(who)) -> list[dict[str, Any]]:
        """The released outputs: stores, figures, report, summary, config."""
        found = service.job(name, job_id)
        service.released_output(found)
        return service.files(found)

    @app.get(f"{PREFIX}/jobs/{{job_id}}/files/{{file}}", tags=["results"],
             response_class=Response)
    def file(job_id: str, file: str, name: str = Depends(who)) -> Response:
        """One released output; a folder (a Zarr store) comes as a zip of it."""
        data, filename = service.file(service.job(name, job_id), file)
        return Response(data, media_type=_media(filename),
                        headers={"Content-Disposition": f'attachment; filename="{filename}"'})

    @app.get(f"{PREFIX}/jobs/{{job_id}}/results.zip", tags=["results"], response_class=Response)
    def results(job_id: str, name: str = Depends(who)) -> Response:
        """Every released output as one zip (under a folder named by the job)."""
        data = service.results_zip(service.job(name, job_id))
        return Response(data, media_type="application/zip",
                        headers={"Content-Disposition": f'attachment; filename="{job_id}.zip"'})

    app.add_middleware(BodyLimit, limit=service.limits.max_request_bytes)
    return app


def _note_task(request: Request, body: ConfigBody) -> None:
    """The config's task, for the wording of its errors (config keys of its section)."""
    task = body.config.get("task") if isinstance(body.config, dict) else None
    if task is None and isinstance(body.config, str):
        for line in body.config.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "task" and not line.startswith((" ", "\t")):
                task = value.split("#")[0].strip().strip("'\"")
    request.state.task = task if isinstance(task, str) and task else "loading"


def _media(filename: str) -> str:
    kinds = {".html": "text/html; charset=utf-8", ".txt": "text/plain; charset=utf-8",
             ".yaml": "text/yaml; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml",
             ".zip": "application/zip", ".nc": "application/x-netcdf",
             ".parquet": "application/vnd.apache.parquet", ".csv": "text/csv; charset=utf-8",
             ".json": "application/json"}
    return next((kind for suffix, kind in kinds.items() if filename.endswith(suffix)),
                "application/octet-stream")

