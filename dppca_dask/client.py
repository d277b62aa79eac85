"""A small client of the release service (``dppca-dask serve``), for analysts.

The same run configs as ``dppca-dask run``, with ``input.path`` naming a dataset of the server's
catalogue; the server plans the release, reserves its budget, runs it on its cluster and hands
back only the private outputs.

Examples
--------
>>> from dppca_dask.client import Client
>>> client = Client("http://127.0.0.1:8000", token="dppca_...")  # doctest: +SKIP
>>> [d["name"] for d in client.datasets()]  # doctest: +SKIP
['gau']
>>> job, folder = client.run("loading.yaml", "out/loading")  # doctest: +SKIP

The server's address and the token may also come from the environment: ``DPPCA_SERVER`` and
``DPPCA_TOKEN``. Every refusal is a :class:`ServerError` with the HTTP status and the server's
one-line message. Needs httpx (the ``service`` extra).
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from dppca_dask.errors import DPPCAError, InputError

__all__ = ["FINISHED", "Client", "ServerError"]

FINISHED = ("released", "failed", "cancelled")
"""The states a job ends in."""


class ServerError(DPPCAError):
    """The server refused a request (``status``: its HTTP status; ``None``: unreachable)."""

    def __init__(self, message: str, status: int | None = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


def _config_payload(config: str | os.PathLike[str] | dict[str, Any]) -> str | dict[str, Any]:
    """A config file's text, YAML text as it is, or a mapping."""
    if isinstance(config, dict):
        return config
    if isinstance(config, os.PathLike) or ("\n" not in str(config) and Path(config).exists()):
        path = Path(config)
        if path.is_dir():
            raise InputError(f"Config file {str(path)!r} is a directory; give a YAML file.")
        return path.read_bytes().decode("utf-8-sig", errors="replace")
    text = str(config)
    if "\n" not in text and text.endswith((".yaml", ".yml")):
        raise InputError(f"Config file not found: {text!r}.")
    return text


class Client:
    """The release service at ``url`` with an analyst's bearer ``token``.

    ``url`` and ``token`` default to the ``DPPCA_SERVER`` and ``DPPCA_TOKEN`` environment
    variables; ``connect_wait``: how long a refused connection is tried again (a server that is
    starting or restarting; nothing was sent, so a submission is never sent twice);
    ``transport``: an httpx transport (tests).
    """

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 timeout: float = 60.0, connect_wait: float = 20.0,
                 transport: Any = None) -> None:
        import httpx

        self.connect_wait = connect_wait
        url = url or os.environ.get("DPPCA_SERVER")
        if not url:
            raise InputError("No server given: pass the release service's URL (--server URL, "
                             "or the DPPCA_SERVER environment variable).")
        self.url = url.rstrip("/")
        token = token if token is not None else os.environ.get("DPPCA_TOKEN")
        headers = {"Authorization": f"Bearer {token.strip()}"} if token else {}
        self._http = httpx.Client(base_url=f"{self.url}/api/v1", headers=headers,
                                  timeout=timeout, transport=transport, follow_redirects=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        deadline = time.monotonic() + self.connect_wait
        while True:
            try:
                response = self._http.request(method, path, **kwargs)
                break
            except httpx.ConnectError as exc:  # nothing was sent: safe to try again
                if time.monotonic() > deadline:
                    raise ServerError(f"Cannot reach the release service at {self.url}: {exc} "
                                      "(is it running? DPPCA_SERVER / --server).") from None
                time.sleep(0.5)
            except httpx.HTTPError as exc:
                raise ServerError(f"Cannot reach the release service at {self.url}: "
                                  f"{type(exc).__name__}: {exc}.") from None
        if response.status_code >= 400:
            try:
                body = response.json()["error"]
                message, kind = str(body["message"]), str(body.get("type"))
            except (ValueError, KeyError, TypeError):
                message, kind = response.text.strip()[:300] or response.reason_phrase, None
            raise ServerError(f"{message} (HTTP {response.status_code})", response.status_code,
                              kind)
        return response

    # -- the API ---------------------------------------------------------------------------------

    def datasets(self) -> list[dict[str, Any]]:
        """The datasets this analyst may use: n, p, names, caps, spend, what remains."""
        result: list[dict[str, Any]] = self._request("GET", "/datasets").json()
        return result

    def dataset(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/datasets/{name}").json()
        return result

    def plan(self, config: str | os.PathLike[str] | dict[str, Any]) -> dict[str, Any]:
        """``plan --json`` of ``config`` on the server (a path, YAML text or a mapping);
        nothing is recorded. A release past a cap is a :class:`ServerError` (409)."""
        result: dict[str, Any] = self._request(
            "POST", "/plan", json={"config": _config_payload(config)}).json()
        return result

    def submit(self, config: str | os.PathLike[str] | dict[str, Any]) -> dict[str, Any]:
        """Submit ``config``: its spend is reserved, the job queued; returns the job."""
        result: dict[str, Any] = self._request(
            "POST", "/jobs", json={"config": _config_payload(config)}).json()
        return result

    def jobs(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._request("GET", "/jobs").json()
        return result

    def job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/jobs/{job_id}").json()
        return result

    def cancel(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("POST", f"/jobs/{job_id}/cancel").json()
        return result

    def files(self, job_id: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._request("GET", f"/jobs/{job_id}/files").json()
        return result

    def file(self, job_id: str, name: str) -> bytes:
        """One released file's bytes (a Zarr store: a zip of it)."""
        content: bytes = self._request("GET", f"/jobs/{job_id}/files/{quote(name, safe='')}"
                                       ).content
        return content

    def wait(self, job_id: str, *, poll: float = 1.0, timeout: float | None = None,
             on_update: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Poll the job until it ends; ``on_update`` sees every new state or pass count."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seen: tuple[Any, ...] | None = None
        while True:
            job = self.job(job_id)
            key = (job["state"], job["passes"]["done"], job.get("position"),
                   job.get("cancelling"))
            if key != seen and on_update is not None:
                on_update(job)
            seen = key
            if job["state"] in FINISHED:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"Job {job_id} is still {job['state']} after {timeout} s.")
            time.sleep(poll)

    def download(self, job_id: str, directory: str | os.PathLike[str], *,
                 overwrite: bool = False) -> Path:
        """The job's released outputs into ``directory`` (written whole, or not at all)."""
        target = Path(directory)
        if target.exists() and not overwrite:
            raise InputError(f"Output directory {str(target)!r} already exists; choose another "
                             "(--output) or allow replacing it (--overwrite).")
        data = self._request("GET", f"/jobs/{job_id}/results.zip").content
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for member in archive.infolist():
                    name = Path(member.filename)
                    if name.is_absolute() or ".." in name.parts or name.parts[:1] != (job_id,):
                        raise ServerError(f"The server's archive holds an unexpected path "
                                          f"{member.filename!r}; nothing was written.")
                archive.extractall(tmp)
            if target.exists():
                shutil.rmtree(target)
            (tmp / job_id).rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return target

    def run(self, config: str | os.PathLike[str] | dict[str, Any],
            directory: str | os.PathLike[str], *, overwrite: bool = False, poll: float = 1.0,
            on_update: Callable[[dict[str, Any]], None] | None = None
            ) -> tuple[dict[str, Any], Path | None]:
        """Submit ``config``, wait for it and download a release into ``directory``: returns
        the final job and the folder (``None`` when the job failed or was cancelled)."""
        target = Path(directory)
        if target.exists() and not overwrite:  # before any budget is reserved
            raise InputError(f"Output directory {str(target)!r} already exists; choose another "
                             "or allow replacing it.")
        job = self.submit(config)
        if on_update is not None:
            on_update(job)
        job = self.wait(job["id"], poll=poll, on_update=on_update)
        if job["state"] != "released":
            return job, None
        return job, self.download(job["id"], target, overwrite=overwrite)
