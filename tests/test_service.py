"""The release service in process (issue 35): the service file, the analysts' configs as the
server runs them, tokens and JWTs, the API's statuses and one-line errors, submissions against
the caps. The queue does not run here (``max_running: 0`` or ``manage=False``); the real server
with real jobs is tests/test_service_server.py.
"""

from __future__ import annotations

import json
import sqlite3
import time
import warnings
from pathlib import Path

import jwt
import pytest
import yaml

with warnings.catch_warnings():  # starlette 1.x: "use httpx2" (the test client only)
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from dppca_dask.errors import ConfigError
from dppca_dask.io.datasets import write_demo_dataset
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.service.api import create_app
from dppca_dask.service.core import Service
from dppca_dask.service.requests import Refused, resolve_config
from dppca_dask.service.settings import load_service_config
from dppca_dask.service.store import ServiceStore

LOADING = "input: {path: gau}\ntask: loading\nprivacy: {eps: 1, delta: 1.0e-6}\n"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    """Two small stores (each its own dataset id): gau.zarr and other.zarr beside it."""
    path = tmp_path_factory.mktemp("data") / "gau.zarr"
    write_demo_dataset(path, n_per_group=8)
    write_demo_dataset(path.with_name("other.zarr"), n_per_group=8)
    return path


def admitting(data: Path, k: int, eps: float = 1.0) -> float:
    """A cap eps (at delta 1e-5) admitting exactly k loading releases of ``eps`` on ``data``:
    halfway between the tight figures of k and k + 1 of them."""
    from dppca_dask.pipeline.config import RunConfig
    from dppca_dask.pipeline.runner import plan_run
    from dppca_dask.privacy.composition import compose

    config = RunConfig.from_dict({"input": {"path": str(data), "array": "X"},
                                  "privacy": {"eps": eps, "delta": 1e-6},
                                  "output": {"directory": "unused"}})
    records = list(plan_run(config, cap_check=False).release.records)
    low, high = (compose(records * m).tight_eps(1e-5) for m in (k, k + 1))
    return (low + high) / 2


def service_file(tmp_path: Path, data: Path, **extra) -> Path:
    settings = {
        "state_directory": "state", "ledger": "ledger.sqlite",
        "datasets": [{"name": "gau", "path": str(data), "array": "X", "group": "group",
                      "cap": {"eps": admitting(data, 2), "delta": 1e-5},
                      "analyst_cap": {"eps": admitting(data, 1), "delta": 1e-5}},
                     {"name": "private-to-bob", "path": str(data.with_name("other.zarr")),
                      "array": "X",
                      "cap": {"eps": 5, "delta": 1e-5}, "analysts": ["bob"]}],
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "max_running": 0, **extra}
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


@pytest.fixture
def server(tmp_path, store_path):
    """An in-process API (no queue) and tokens for alice and bob."""
    service = Service(load_service_config(service_file(tmp_path, store_path,
                                                       limits={"max_queued_per_analyst": 2,
                                                               "max_config_bytes": 2000})))
    tokens = {name: service.store.add_token(name)[1] for name in ("alice", "bob")}
    client = TestClient(create_app(service, manage=False))
    return service, client, tokens


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _error(response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and "\n" not in body["error"]["message"], body
    assert "Traceback" not in response.text
    return body["error"]


# ------------------------------------------------------------------ the service file


def test_service_file__one_line_errors(tmp_path, store_path):
    path = service_file(tmp_path, store_path)
    config = load_service_config(path)
    assert config.state == tmp_path / "state" and config.ledger == str(tmp_path / "ledger.sqlite")
    assert config.dataset("gau").allows("anyone") and not config.dataset("private-to-bob"
                                                                         ).allows("alice")
    cases = [({"datasets": [{"name": "x y", "path": "p", "cap": {"eps": 1, "delta": 1e-5}}]},
              "a dataset's name must be letters"),
             ({"datasets": [{"name": "x", "path": "p"}]}, "'datasets.0.cap' key: Field required"),
             ({"datasets": [{"name": "x", "path": "p", "cap": {"eps": 1}}]},
              "must be given together"),
             ({"auth": {"tokens": False}}, "at least one way to authenticate"),
             ({"auth": {"oidc": {"issuer": "i", "audience": "a", "jwks_file": "f",
                                 "algorithms": ["HS256"]}}}, "a shared secret (HS*)"),
             ({"colour": "blue"}, "Extra inputs are not permitted")]
    for extra, found in cases:
        with pytest.raises(ConfigError) as info:
            load_service_config(service_file(tmp_path, store_path, **extra))
        assert found in str(info.value) and "\n" not in str(info.value), str(info.value)
    with pytest.raises(ConfigError, match="Service file not found"):
        load_service_config(tmp_path / "missing.yaml")


def test_service__refuses_a_dataset_it_cannot_describe(tmp_path, store_path):
    path = service_file(tmp_path, store_path)
    data = yaml.safe_load(path.read_text())
    data["datasets"][0]["group"] = "no-such-variable"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="Dataset 'gau' of the service file"):
        Service(load_service_config(path))


# ------------------------------------------------------------------ analysts' configs


@pytest.mark.parametrize(("change", "found"), [
    ({"rng": 3}, "The 'rng' config key must be left out"),
    ({"loading": {"non_private": True}}, "'loading.non_private' config key must be left out"),
    ({"task": "pca", "pca": {"center": "empirical"}}, "'pca.center' config key must not be"),
    ({"task": "covariance", "covariance": {"report_clipping": True}},
     "'covariance.report_clipping' config key must be left out"),
    ({"task": "scree", "scree": {"directions": "/etc/passwd"}},
     "'scree.directions' config key must be left out"),
    ({"input": {"path": "gau", "storage_options": {"anon": True}}},
     "'input.storage_options' config key must be left out"),
    ({"input": {"path": "gau", "array": "Y"}}, "'input.array' config key must be left out or"),
    ({"budget_ledger": {"enabled": False}}, "'budget_ledger.enabled' config key must be true"),
    ({"budget_ledger": {"url": "sqlite:///tmp/mine.sqlite"}}, "'budget_ledger.url'"),
    ({"input": {"path": None}}, "'input.path' config key must name a dataset"),
])
def test_requests__the_server_keeps_what_is_its_own(tmp_path, store_path, change, found):
    config = load_service_config(service_file(tmp_path, store_path))
    data = {"input": {"path": "gau"}, "privacy": {"eps": 1, "delta": 1e-6}, **change}
    with pytest.raises(ConfigError) as info:
        resolve_config(data, config, "alice", str(tmp_path / "out"))
    assert found in str(info.value)


def test_requests__catalogue_names_and_server_sections(tmp_path, store_path):
    config = load_service_config(service_file(tmp_path, store_path))
    data = {"input": {"path": "gau", "group": "group"}, "privacy": {"eps": 1, "delta": 1e-6},
            "cluster": {"kind": "address", "address": "tcp://10.0.0.1:8786"},
            "output": {"directory": "mine", "overwrite": True, "formats": ["netcdf"]}}
    resolved = resolve_config(data, config, "alice", str(tmp_path / "out"))
    assert resolved.config.input.path == str(store_path) and resolved.config.input.array == "X"
    assert resolved.config.cluster.kind == "local" and resolved.notes  # ignored, with a note
    assert resolved.config.output.directory == str(tmp_path / "out")
    assert resolved.config.output.formats == ["netcdf"] and not resolved.config.output.overwrite
    by_path = resolve_config({**data, "input": {"path": str(store_path)}}, config, "bob", "o")
    assert by_path.dataset.name == "gau"  # a written config.yaml names the path: it replays
    with pytest.raises(Refused) as info:
        resolve_config({**data, "input": {"path": "nope"}}, config, "alice", "o")
    assert info.value.status == 404
    with pytest.raises(Refused) as info:
        resolve_config({**data, "input": {"path": "private-to-bob"}}, config, "alice", "o")
    assert info.value.status == 403


# ------------------------------------------------------------------ authentication


def test_tokens__stored_hashed_and_revocable(tmp_path):
    store = ServiceStore(tmp_path / "state")
    token_id, token = store.add_token("alice", note="laptop")
    assert store.analyst_of(token) == "alice" and store.analyst_of(token + "x") is None
    assert token not in (tmp_path / "state" / "service.sqlite").read_bytes().decode("latin-1")
    assert [t.id for t in store.tokens()] == [token_id]
    assert [t.analyst for t in store.revoke("alice")] == ["alice"]
    assert store.analyst_of(token) is None and store.tokens()[0].revoked is not None
    assert (tmp_path / "state").stat().st_mode & 0o077 == 0


def _rsa() -> tuple[bytes, dict]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return pem, {**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}


def test_oidc__jwts_checked_by_signature_issuer_audience_and_expiry(tmp_path, store_path):
    pem, jwk = _rsa()
    other, _ = _rsa()
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    path = service_file(tmp_path, store_path, auth={"tokens": False, "oidc": {
        "issuer": "https://login.example.org", "audience": "dppca", "jwks_file": "jwks.json",
        "claim": "preferred_username", "leeway_s": 0}})
    service = Service(load_service_config(path))
    client = TestClient(create_app(service, manage=False))
    claims = {"iss": "https://login.example.org", "aud": "dppca", "sub": "u-1",
              "preferred_username": "alice", "exp": int(time.time()) + 300}

    def sign(key=pem, alg="RS256", **change):
        return jwt.encode({**claims, **change}, key, algorithm=alg, headers={"kid": "k1"})

    ok = client.get("/api/v1/datasets", headers=_auth(sign()))
    assert ok.status_code == 200 and ok.json()[0]["analyst"]["name"] == "alice"
    refused = [sign(exp=int(time.time()) - 60), sign(aud="other"), sign(iss="https://evil"),
               sign(key=other), sign(preferred_username="bad name"), "a.b.c",
               "dppca_not-a-token"]
    for token in refused:
        response = client.get("/api/v1/datasets", headers=_auth(token))
        assert response.status_code == 401, (token, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert _error(response)["type"] == "Unauthenticated"
    audit = [json.loads(line) for line in (service.store.root / "audit.log").read_text()
             .splitlines()]
    assert len(audit) == len(refused) and {a["event"] for a in audit} == {"unauthenticated"}
    assert any("ExpiredSignature" in a["reason"] for a in audit)


# ------------------------------------------------------------------ the API


def test_api__statuses_and_one_line_errors(server):
    service, client, tokens = server
    alice, bob = _auth(tokens["alice"]), _auth(tokens["bob"])
    events_before = Ledger(service.ledger.path).events()
    assert client.get("/api/v1/health").json() == {"status": "ok"}
    openapi = client.get("/openapi.json").json()
    assert "/api/v1/jobs/{job_id}/results.zip" in openapi["paths"]
    for response in (client.get("/api/v1/datasets"),
                     client.get("/api/v1/datasets", headers={"Authorization": "Basic eDp5"}),
                     client.post("/api/v1/jobs", json={"config": LOADING},
                                 headers=_auth("dppca_forged"))):
        assert response.status_code == 401 and _error(response)["type"] == "Unauthenticated"
    forbidden = client.get("/api/v1/datasets/private-to-bob", headers=alice)
    assert forbidden.status_code == 403 and _error(forbidden)["type"] == "Forbidden"
    assert client.post("/api/v1/plan", headers=alice, json={"config": LOADING.replace(
        "gau", "private-to-bob")}).status_code == 403
    # 401 and 403 leave the ledger as it was: only audit lines
    assert Ledger(service.ledger.path).events() == events_before
    audit = (service.store.root / "audit.log").read_text().splitlines()
    assert [json.loads(a)["event"] for a in audit] == ["unauthenticated"] * 3 + ["forbidden"] * 2
    assert [d["name"] for d in client.get("/api/v1/datasets", headers=alice).json()] == ["gau"]
    assert len(client.get("/api/v1/datasets", headers=bob).json()) == 2
    statuses = {
        400: client.post("/api/v1/plan", headers={**alice, "content-type": "application/json"},
                         content=b"{not json"),
        404: client.get("/api/v1/jobs/0123", headers=alice),
        405: client.delete("/api/v1/datasets", headers=alice),
        413: client.post("/api/v1/plan", headers=alice, json={"config": LOADING + "#" * 3000}),
        422: client.post("/api/v1/plan", headers=alice, json={"config": "input: [1, 2"}),
    }
    for status, response in statuses.items():
        assert response.status_code == status, (status, response.text)
        _error(response)
    assert "413" not in client.post("/api/v1/plan", headers=alice,
                                    json={"config": LOADING}).text
    huge = client.post("/api/v1/jobs", headers={**alice, "content-type": "application/json"},
                       content=b'{"config": "' + b"x" * (2 << 20) + b'"}')
    assert huge.status_code == 413 and "limits.max_request_bytes" in _error(huge)["message"]
    invalid = client.post("/api/v1/plan", headers=alice, json={"config": LOADING.replace(
        "eps: 1", "eps: -1")})
    assert invalid.status_code == 422
    assert _error(invalid)["message"].startswith("Invalid config: config key 'privacy.eps'")
    assert client.post("/api/v1/plan", headers=alice, json={"config": 5}).status_code == 422


def test_api__plan_submit_cancel_and_the_caps(server):
    service, client, tokens = server
    alice, bob = _auth(tokens["alice"]), _auth(tokens["bob"])
    plan = client.post("/api/v1/plan", headers=alice, json={"config": LOADING})
    assert plan.status_code == 200, plan.text
    planned = plan.json()
    assert planned["dataset"] == "gau" and planned["data"]["n"] == 40
    assert {"records", "total", "passes"} <= set(planned)
    first = client.post("/api/v1/jobs", headers=alice, json={"config": LOADING})
    assert first.status_code == 202, first.text
    job = first.json()
    assert first.headers["location"] == f"/api/v1/jobs/{job['id']}"
    assert job["state"] == "queued" and job["position"] == 1 and job["files"] is None
    assert job["passes"] == {"done": 0, "planned": 1} and "started" not in job
    # each analyst's cap admits one release of eps = 1; bob's is his own
    again = client.post("/api/v1/jobs", headers=alice, json={"config": LOADING})
    assert again.status_code == 409 and "past the analyst's cap" in _error(again)["message"]
    assert client.post("/api/v1/plan", headers=alice, json={"config": LOADING}
                       ).status_code == 409
    second = client.post("/api/v1/jobs", headers=bob, json={"config": LOADING})
    assert second.status_code == 202
    # the dataset's cap (all analysts) is full after two
    third = client.post("/api/v1/jobs", headers=bob, json={"config": LOADING})
    assert third.status_code == 409 and "past the custodian's cap" in _error(third)["message"]
    assert client.get(f"/api/v1/jobs/{job['id']}", headers=bob).status_code == 404
    assert client.get(f"/api/v1/jobs/{job['id']}/results.zip", headers=alice).status_code == 409
    cancelled = client.post(f"/api/v1/jobs/{job['id']}/cancel", headers=alice)
    assert cancelled.json()["state"] == "cancelled" and "refunded" in cancelled.json()["message"]
    assert client.post(f"/api/v1/jobs/{job['id']}/cancel", headers=alice).status_code == 409
    ledger = Ledger(service.ledger.path)
    assert [(r.analyst, r.status) for r in ledger.reservations()] == [
        ("alice", "cancelled"), ("bob", "reserved")]
    assert [e["kind"] for e in ledger.events() if e["kind"] in ("reserve", "refuse", "cancel")
            ] == ["reserve", "refuse", "reserve", "refuse", "cancel"]
    assert ledger.verify().ok
    view = client.get("/api/v1/datasets/gau", headers=bob).json()
    assert view["spent"]["basic"]["eps"] == 1.0 and view["analyst"]["spent"]["basic"]["eps"] == 1
    assert 0 < view["remaining"]["eps"] < view["cap"]["eps"] and view["n"] == 40
    # the queue limit (2 queued per analyst): bob on his other dataset
    other = LOADING.replace("gau", "private-to-bob").replace("eps: 1,", "eps: 0.5,")
    assert client.post("/api/v1/jobs", headers=bob, json={"config": other}).status_code == 202
    many = client.post("/api/v1/jobs", headers=bob, json={"config": other})
    assert many.status_code == 429 and _error(many)["type"] == "TooManyJobs"


def test_service__refuses_to_start_on_a_broken_release_log(tmp_path, store_path):
    path = service_file(tmp_path, store_path)
    Service(load_service_config(path))  # writes the caps: two entries
    con = sqlite3.connect(tmp_path / "ledger.sqlite")
    con.execute("UPDATE events SET note = 'eps = 1000' WHERE seq = 1")
    con.commit()
    con.close()
    with pytest.raises(Exception, match="Refused to start: the release log of the ledger"):
        Service(load_service_config(path))


@pytest.mark.slow
def test_runner__a_reservation_made_before_and_the_first_draw_noted(tmp_path, store_path):
    """execute(reservation=...) takes over the server's reservation; on_first_draw runs once,
    before the first draw; a reservation that no longer matches the plan is refunded."""
    import numpy as np

    from dppca_dask.io.identity import resolve_dataset
    from dppca_dask.pipeline.config import RunConfig
    from dppca_dask.pipeline.runner import Reserved, execute, plan_run
    from dppca_dask.privacy.draws import DrawTracker

    calls = []
    tracked = DrawTracker(np.random.default_rng(0), lambda: calls.append(tracked.drawn))
    tracked.normal(size=2)
    tracked.normal(size=2)
    assert calls == [False] and tracked.drawn

    config = RunConfig.from_dict({"input": {"path": str(store_path), "array": "X"},
                                  "privacy": {"eps": 1, "delta": 1e-6},
                                  "cluster": {"kind": "local", "n_workers": 1,
                                              "processes": False},
                                  "output": {"directory": str(tmp_path / "out")}})
    plan = plan_run(config, cap_check=False)
    ledger = Ledger(tmp_path / "l.sqlite")
    identity = resolve_dataset(str(store_path), "X")
    wrong = ledger.reserve(identity, [{"component": "x", "eps": 1.0, "delta": 0.0}],
                           plan.spend, analyst="alice")
    with pytest.raises(Exception, match="holds other planned records"):
        execute(config, progress=False, reservation=Reserved(ledger, wrong))
    assert ledger.reservation(wrong).status == "cancelled"
    rid = ledger.reserve(identity, [r.as_dict() for r in plan.release.records], plan.spend,
                         analyst="alice")
    drawn = []
    outcome = execute(config, progress=False, reservation=Reserved(ledger, rid),
                      on_first_draw=lambda: drawn.append(1))
    assert drawn == [1] and Path(outcome.directory).is_dir()
    held = ledger.reservation(rid)
    assert held.status == "released" and held.analyst == "alice" and held.records
    assert len(ledger.reservations()) == 2 and ledger.verify().ok
