from datetime import UTC, datetime

import pytest
from django.db import connection

from notify.clock import FakeClock
from tests.factories import PolicyVersionFactory

pytest_plugins = ["tests.simulator_process"]

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def policy(db):
    return PolicyVersionFactory.create()


def pytest_collection_modifyitems(config, items):
    """Skip PostgreSQL-only proofs when the suite runs on the embedded SQLite default."""
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)
