import pytest
from django.core.cache import cache

from notify.api.throttle import limiter_for, pause_for
from notify.clock import system_clock
from notify.models import ServiceToken


@pytest.fixture(autouse=True)
def fresh_rate_limits():
    def forget() -> None:
        cache.clear()
        limiter_for.cache_clear()  # counts in memory start afresh (Redis's are each test's own services)
        pause_for.cache_clear()  # a store a test made fail is asked afresh by the next

    forget()
    yield
    forget()


@pytest.fixture
def token(db):
    return ServiceToken.issue("accounts", now=system_clock.now())[1]


@pytest.fixture
def api(client, token):
    """A client that speaks for the ``accounts`` service."""
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client
