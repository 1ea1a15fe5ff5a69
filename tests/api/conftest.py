import pytest

from notify.api.throttle import pause_for
from notify.models import ServiceToken
from plumbing.clock import system_clock


@pytest.fixture(autouse=True)
def fresh_rate_limits():
    pause_for.cache_clear()  # a store a test made fail is asked afresh by the next
    yield
    pause_for.cache_clear()


@pytest.fixture
def token(db):
    return ServiceToken.issue("accounts", now=system_clock.now())[1]


@pytest.fixture
def api(client, token):
    """A client that speaks for the ``accounts`` service."""
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client
