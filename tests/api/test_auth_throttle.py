"""Requests without a valid token are counted per address; past the limit they get 429 before any token lookup."""

from datetime import timedelta

import pytest
import time_machine
from django.test import Client

from config.env import Rate
from tests.conftest import T0

WHOAMI = "/api/v1/whoami"


@pytest.fixture(autouse=True)
def small_limit(settings):
    settings.API_AUTH_FAILURES_PER_CLIENT = Rate(3, 60)


@pytest.fixture(autouse=True)
def stopped_clock(counts_on_the_wall_clock):
    # Every request of a test at one instant: a window then ends its whole period after them.
    with time_machine.travel(T0 + timedelta(seconds=20), tick=False) as traveller:
        yield traveller


def call(address="10.0.0.1", token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client().get(WHOAMI, headers=headers, REMOTE_ADDR=address)


def test_an_address_over_its_limit_is_refused_without_a_database_query(db, django_assert_num_queries):
    assert [call(token="rdt_guess").status_code for _ in range(3)] == [401, 401, 401]

    with django_assert_num_queries(0):
        refused = call(token="rdt_another_guess")

    assert refused.status_code == 429
    assert refused.json() == {
        "error": "rate_limited",
        "message": "too many requests without a valid service token from this address; retry in 60 s",
        "fields": [],
    }
    assert refused["Retry-After"] == "60"


def test_requests_with_no_token_at_all_count_too(db):
    for _ in range(3):
        call()

    assert call().status_code == 429


def test_an_address_over_its_limit_is_refused_before_its_token_is_looked_up_even_a_valid_one(token):
    for _ in range(3):
        call(token="rdt_guess")

    assert call(token=token).status_code == 429


def test_other_addresses_are_not_refused(token):
    for _ in range(5):
        call(token="rdt_guess")

    assert call("10.0.0.2", token=token).status_code == 200
    assert call("10.0.0.3", token="rdt_guess").status_code == 401


def test_valid_requests_do_not_count(token):
    for _ in range(10):
        assert call(token=token).status_code == 200

    assert [call(token="rdt_guess").status_code for _ in range(3)] == [401, 401, 401]


def test_a_valid_request_still_costs_one_query(token, django_assert_num_queries):
    call(token=token)  # records "last used", which the next minute's requests skip

    with django_assert_num_queries(1):
        assert call(token=token).status_code == 200


def test_the_refusal_ends_with_the_window(token, stopped_clock):
    for _ in range(3):
        call(token="rdt_guess")
    assert call(token=token).status_code == 429

    stopped_clock.shift(timedelta(seconds=59))
    assert call(token=token).status_code == 429

    stopped_clock.shift(timedelta(seconds=1))
    assert call(token=token).status_code == 200


def test_the_address_is_the_one_our_proxy_saw_when_one_is_declared(db, settings):
    settings.PROXY_HOPS = 1
    for n in range(3):
        # The proxy (REMOTE_ADDR 10.9.9.9) appends what it saw; a client's own entries come first.
        Client().get(WHOAMI, HTTP_X_FORWARDED_FOR=f"spoofed-{n}, 203.0.113.7", REMOTE_ADDR="10.9.9.9")

    assert Client().get(WHOAMI, HTTP_X_FORWARDED_FOR="203.0.113.7", REMOTE_ADDR="10.9.9.9").status_code == 429
    assert Client().get(WHOAMI, HTTP_X_FORWARDED_FOR="203.0.113.8", REMOTE_ADDR="10.9.9.9").status_code == 401
