"""The list and event pages cost the same number of queries for one event or many, one observation or many."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from notify.rules.vocabulary import Normalized, State
from tests.factories import new_event
from tests.runbook.events import event_in, observe

# Session, user, permissions, and the page's own queries; a loop over rows would blow through it.
MAX_QUERIES = 12


def _queries(client, url, **headers) -> int:
    client.get(url, **headers)  # warm per-process caches (policy versions)
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url, **headers).status_code == 200
    return len(captured)


@pytest.fixture
def client_(console, responder):
    return console(responder)


@pytest.mark.parametrize("headers", [{}, {"HTTP_HX_REQUEST": "true"}])
def test_the_list_runs_a_bounded_number_of_queries_whatever_the_number_of_events(client_, policy, clock, headers):
    event_in(State.SMS_PENDING, clock)
    one = _queries(client_, "/", **headers)
    for _ in range(30):
        event_in(State.SMS_PENDING, clock)
        new_event(clock.now())
    many = _queries(client_, "/", **headers)
    assert one == many
    assert many <= MAX_QUERIES


@pytest.mark.parametrize("headers", [{}, {"HTTP_HX_REQUEST": "true"}])
def test_the_event_page_runs_a_bounded_number_of_queries_whatever_the_number_of_observations(
    client_, policy, clock, headers
):
    event = event_in(State.EMAIL_CLAIMED, clock)
    url = reverse("runbook:event", args=[event.id])
    one = _queries(client_, url, **headers)
    for _ in range(60):
        clock.advance(1)
        observe(event.id, Normalized.PENDING, clock.now(), raw_status="sent")
    many = _queries(client_, url, **headers)
    assert one == many
    assert many <= MAX_QUERIES
