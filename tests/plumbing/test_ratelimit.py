"""Rates parse like API_RATE_LIMIT and name their variable; the client address trusts only declared proxies."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import RequestFactory

from config.env import Rate, env_rate
from plumbing.ratelimit import client_address


@pytest.mark.parametrize(
    ("raw", "rate"),
    [("10/min", Rate(10, 60)), ("20/15min", Rate(20, 900)), ("5/s", Rate(5, 1)), ("1000/d", Rate(1000, 86400))],
)
def test_a_rate_reads_as_a_count_per_period(monkeypatch, raw, rate):
    monkeypatch.setenv("NOTIFY_SOME_RATE", raw)

    assert env_rate("NOTIFY_SOME_RATE", "1/s") == rate


def test_an_unset_rate_takes_its_default(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOME_RATE", raising=False)

    assert env_rate("NOTIFY_SOME_RATE", "10/15min") == Rate(10, 900)


@pytest.mark.parametrize("raw", ["ten/min", "10", "10/fortnight", "0/min", "10/0min", "-1/min"])
def test_a_malformed_rate_names_its_variable(monkeypatch, raw):
    monkeypatch.setenv("NOTIFY_SOME_RATE", raw)

    with pytest.raises(ImproperlyConfigured, match="NOTIFY_SOME_RATE must be a rate"):
        env_rate("NOTIFY_SOME_RATE", "1/s")


def _request(**meta):
    return RequestFactory().get("/", REMOTE_ADDR="10.9.9.9", **meta)


def test_without_declared_proxies_the_forwarded_header_is_ignored(settings):
    settings.PROXY_HOPS = 0

    assert client_address(_request(HTTP_X_FORWARDED_FOR="203.0.113.7")) == "10.9.9.9"


def test_with_one_proxy_the_address_it_appended_is_the_client(settings):
    settings.PROXY_HOPS = 1

    assert client_address(_request(HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.7")) == "203.0.113.7"


def test_with_two_proxies_the_outer_ones_entry_is_the_client(settings):
    settings.PROXY_HOPS = 2

    assert client_address(_request(HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.7, 10.0.0.5")) == "203.0.113.7"


def test_a_request_that_bypassed_the_proxy_falls_back_to_its_own_address(settings):
    settings.PROXY_HOPS = 1

    assert client_address(_request()) == "10.9.9.9"
