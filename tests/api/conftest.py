import pytest
from django.core.cache import cache

from notify.clock import system_clock
from notify.models import ServiceToken


@pytest.fixture(autouse=True)
def fresh_rate_limits():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def token(db):
    return ServiceToken.issue("accounts", now=system_clock.now())[1]


@pytest.fixture
def api(client, token):
    """A client that speaks for the ``accounts`` service."""
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client
