"""/healthz and /readyz as a load balancer or Kubernetes asks them: over plain HTTP, by the pod's address,
without a login, and answered with a small JSON body whatever is down."""

import json
import socket
from typing import Any

import psycopg
import pytest
from django.db import connections

# A probe comes from the kubelet or the load balancer: plain HTTP to the pod's own address.
PROBE = {"HTTP_HOST": "10.1.2.3:8000", "secure": False}


@pytest.fixture(autouse=True)
def _production_transport(settings):
    # As production serves the console: HTTPS only, a redirect from HTTP, only its own host names.
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["reset.example.org"]


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _body(response) -> dict[str, Any]:
    assert response["Content-Type"] == "application/json"
    body: dict[str, Any] = json.loads(response.content)
    return body


def test_healthz_answers_a_probe_without_touching_any_dependency(client):
    # No `db` fixture: a query here would fail the test (pytest-django blocks the database).
    response = client.get("/healthz", **PROBE)

    assert response.status_code == 200
    assert _body(response) == {"status": "alive"}
    assert response["Cache-Control"] == "no-store"


def test_readyz_is_ready_with_the_database_migrated_and_the_broker_reachable(client, db):
    response = client.get("/readyz", **PROBE)

    assert response.status_code == 200
    assert _body(response) == {"status": "ready", "failing": [], "database": "ok", "broker": "ok"}


def test_readyz_names_the_database_when_it_is_unreachable(client, db, monkeypatch, closed_port):
    unreachable = {**connections.settings["default"], "PORT": str(closed_port), "PASSWORD": "db-s3cret"}
    # The probe's own connection is made from this entry; the test's open connection keeps its own.
    monkeypatch.setitem(connections.settings, "default", unreachable)

    response = client.get("/readyz", **PROBE)

    assert response.status_code == 503
    assert _body(response) == {
        "status": "not_ready",
        "failing": ["database"],
        "database": "unreachable",
        "broker": "ok",
    }
    assert b"s3cret" not in response.content


def test_readyz_names_the_broker_when_it_is_unreachable(client, db, monkeypatch, closed_port):
    # The broker wake-ups are published to (Celery reads the write URL from the environment).
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", f"redis://:broker-s3cret@127.0.0.1:{closed_port}/0")

    response = client.get("/readyz", **PROBE)

    assert response.status_code == 503
    assert _body(response) == {"status": "not_ready", "failing": ["broker"], "database": "ok", "broker": "unreachable"}
    assert b"s3cret" not in response.content


def test_readyz_gives_up_on_a_broker_that_accepts_connections_and_never_answers(client, db, monkeypatch, silent_server):
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", silent_server.url)

    response = client.get("/readyz", **PROBE)

    assert response.status_code == 503
    assert _body(response)["failing"] == ["broker"]
    assert len(silent_server.accepted) == 1  # asked once, and given up on at the publish bound


@pytest.fixture
def empty_database(db):
    """A database on the same server with no table at all: a deploy whose `migrate` has not run."""
    if connections["default"].vendor != "postgresql":
        pytest.skip("needs PostgreSQL")
    entry = connections.settings["default"]
    name = f"{entry['NAME']}_unmigrated"
    admin_url = f"postgres://{entry['USER']}@{entry['HOST']}:{entry['PORT']}/postgres"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    yield {**entry, "NAME": name}
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
def test_readyz_is_not_ready_while_migrations_are_pending(client, monkeypatch, empty_database):
    monkeypatch.setitem(connections.settings, "default", empty_database)

    response = client.get("/readyz", **PROBE)

    assert response.status_code == 503
    assert _body(response)["database"] == "migrations_pending"


def test_readyz_refuses_anything_but_reading(client):
    response = client.post("/readyz", **PROBE)

    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
