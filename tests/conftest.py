import socket
import threading
import time
from datetime import UTC, datetime
from typing import NamedTuple

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

from notify.writes import wake_ups
from plumbing import ratelimit
from plumbing.clock import FakeClock
from plumbing.ratelimit import InProcessWindow, limiter_for
from policies import cache as policy_cache
from tests.factories import PolicyVersionFactory
from tests.providers import simulated_transports

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="session", autouse=True)
def _static_files_without_collectstatic(tmp_path_factory):
    """Link the static files by their plain names, as Django's storage does by default.

    The production storage names each file by the hash collectstatic computed, which a test run
    does not do (Django's docs advise another storage for tests). An empty STATIC_ROOT of the
    run's own: nothing collected by an earlier deploy or demo in var/ is served instead. The
    tests of the production storage choose it back (tests/deploy/).
    """
    plain = {**settings.STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    with override_settings(STORAGES=plain, STATIC_ROOT=tmp_path_factory.mktemp("static")):
        yield


@pytest.fixture(autouse=True)
def _forget_cached_policies():
    # The caches rely on primary keys never being reused; a test's rolled-back transaction
    # (SQLite's sequence included) can reuse them, so each test starts with them empty.
    policy_cache.forget()


@pytest.fixture(autouse=True)
def _counts_afresh():
    # Rate limits and failed attempts counted in memory start empty in each test (those counted
    # in Redis are each test's own services and addresses, or its own Redis database).
    limiter_for.cache_clear()
    yield
    limiter_for.cache_clear()


@pytest.fixture
def counts_on_the_wall_clock(monkeypatch) -> InProcessWindow:
    """Failed attempts counted in memory and timed by the wall clock, which time_machine stops and
    moves (the monotonic clock, which they are timed by outside the tests, it cannot)."""
    window = InProcessWindow(clock=lambda: time.time())
    monkeypatch.setattr(ratelimit, "limiter_for", lambda storage: window)
    return window


@pytest.fixture(autouse=True)
def _wake_ups_sent_afresh():
    yield
    wake_ups.publish_pause.cache_clear()  # a broker a test made fail is tried afresh by the next


class SilentServer(NamedTuple):
    url: str
    accepted: list[socket.socket]  # every connection a client opened to it


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections and never answers: a Redis (or any server) that hangs."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:  # closed at teardown
                return

    threading.Thread(target=accept, daemon=True).start()
    yield SilentServer(f"redis://127.0.0.1:{listener.getsockname()[1]}/0", accepted)
    listener.close()
    for client in accepted:
        client.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def policy(db):
    return PolicyVersionFactory.create()


@pytest.fixture
def transports(simulator, settings):
    return simulated_transports(simulator, settings)


def pytest_collection_modifyitems(config, items):
    """Skip PostgreSQL-only proofs when the suite runs on the embedded SQLite default."""
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _this_hosts_clock(settings):
    # Tests freeze time with time-machine, which the database's clock does not follow: this
    # host's clock judges time here, and the tests of the database's clock choose it themselves.
    settings.NOTIFY_CLOCK = "system"
