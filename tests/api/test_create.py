"""POST /api/v1/events: every answer a caller can get, each with its body."""

from datetime import timedelta

import pytest
import time_machine
from django.test import Client

from config.env import Rate
from notify.models import Claim, Event, ServiceToken
from notify.writes import wake_ups
from plumbing.clock import system_clock
from policies.models import LONGEST_LIFETIME
from tests.api.payloads import body, post
from tests.factories import PolicyVersionFactory


@pytest.fixture(autouse=True)
def published(policy):
    return policy


def test_a_new_request_creates_the_event_and_enqueues_its_first_step(
    api, django_capture_on_commit_callbacks, monkeypatch
):
    published = []

    def publish(event_id: str, countdown: float) -> bool:
        published.append(event_id)
        return True

    monkeypatch.setattr(wake_ups, "publish", publish)
    with django_capture_on_commit_callbacks(execute=False) as after_commit:
        response = post(api, body(client_key="k-1"))
    assert published == []  # nothing goes before the event is committed
    for callback in after_commit:
        callback()

    assert response.status_code == 201
    created = response.json()
    event = Event.objects.get(pk=created["event_id"])
    assert created == {
        "event_id": event.id,
        "state": "sms_requested",
        "region": "US",
        "policy_version": event.policy.number,
        "expires_at": created["expires_at"],
        "next_action": "submit_sms",
        "console_url": f"http://127.0.0.1:8000/events/{event.id}",
    }
    assert abs((event.expires_at - event.created_at) - timedelta(seconds=600)) < timedelta(seconds=1)
    assert (event.service, event.client_key) == ("accounts", "k-1")
    # The first wake-up is recorded as pending by the creating INSERT, and sent once it commits.
    assert event.wake_at == event.created_at
    assert published == [event.id]
    assert Event.objects.get(pk=event.id).wake_at == event.wake_at  # sent as recorded, not recorded again


def test_an_explicit_expiry_with_an_offset_is_kept(api):
    expires_at = (system_clock.now() + timedelta(minutes=15)).replace(microsecond=0)
    response = post(api, body(ttl_seconds=None, expires_at=expires_at.astimezone().isoformat()))

    assert response.status_code == 201
    assert Event.objects.get(pk=response.json()["event_id"]).expires_at == expires_at


def test_the_same_request_again_returns_the_same_event_and_sends_nothing_more(api, django_capture_on_commit_callbacks):
    first = post(api, body(client_key="k-2")).json()
    with django_capture_on_commit_callbacks(execute=False) as wakeups:
        again = post(api, body(client_key="k-2"))

    assert again.status_code == 200
    assert again.json()["event_id"] == first["event_id"]
    assert (Event.objects.count(), Claim.objects.count(), wakeups) == (1, 1, [])


def test_the_same_client_key_with_a_different_request_is_a_conflict(api):
    post(api, body(client_key="k-3"))

    response = post(api, body(client_key="k-3", ttl_seconds=900))

    assert response.status_code == 409
    assert response.json()["error"] == "idempotency_conflict"
    assert "client_key" in response.json()["message"]
    assert Event.objects.count() == 1


def test_the_same_client_key_from_another_service_is_another_event(api, client):
    other = ServiceToken.issue("billing", now=system_clock.now())[1]
    post(api, body(client_key="k-4"))

    response = post(Client(), body(client_key="k-4"), Authorization=f"Bearer {other}")

    assert response.status_code == 201
    assert Event.objects.count() == 2


def test_invalid_fields_are_listed_each_with_why(api):
    response = post(api, body(phone=None, ttl_seconds=-5, purpose="marketing", client_key="has space"))

    assert response.status_code == 422
    answer = response.json()
    assert answer["error"] == "invalid_request"
    assert {error["field"] for error in answer["fields"]} == {"phone", "ttl_seconds", "purpose", "client_key"}
    assert all(error["message"] for error in answer["fields"])


def test_both_or_neither_expiry_is_refused(api):
    both = post(api, body(expires_at=(system_clock.now() + timedelta(minutes=15)).isoformat()))
    neither = post(api, body(ttl_seconds=None))

    for response in (both, neither):
        assert response.status_code == 422
        assert "exactly one of expires_at and ttl_seconds" in response.json()["fields"][0]["message"]


def test_an_expiry_without_an_offset_is_refused(api):
    response = post(api, body(ttl_seconds=None, expires_at="2030-01-01T00:00:00"))

    assert response.status_code == 422
    assert response.json()["fields"][0]["field"] == "expires_at"


@pytest.mark.parametrize(
    ("overrides", "reason", "field"),
    [
        ({"phone": "+1415555"}, "invalid_phone", "phone"),
        ({"email": "not-an-address"}, "invalid_email", "email"),
        # https, as the schema requires, yet no URL: a rule the schema leaves to the server.
        ({"reset_url": "https://accounts example/reset x"}, "invalid_reset_url", "reset_url"),
        ({"reset_url": "http://accounts.example.org/reset/x"}, "invalid_request", "reset_url"),
        ({"ttl_seconds": 5}, "unusable_expiry", "expires_at"),
        ({"region": "XX"}, "unknown_region", "region"),
        ({"phone": "+4930901820"}, "destination_not_allowed", "phone"),
    ],
)
def test_a_request_the_policy_refuses_names_the_reason(api, overrides, reason, field):
    response = post(api, body(**overrides))

    assert response.status_code == 422
    answer = response.json()
    assert (answer["error"], answer["fields"][0]["field"]) == (reason, field)
    # The refused value is not echoed (a number like ttl_seconds is no personal data, and
    # its digits may well appear in the policy's version number).
    for value in overrides.values():
        if isinstance(value, str):
            assert value not in response.content.decode()
    assert Event.objects.count() == 0


def lifetime(seconds, given_as):
    """The request fields that ask for a reset living ``seconds`` from now, as ``ttl_seconds`` or ``expires_at``."""
    if given_as == "ttl_seconds":
        return {"ttl_seconds": seconds}
    return {"ttl_seconds": None, "expires_at": (system_clock.now() + timedelta(seconds=seconds)).isoformat()}


@pytest.fixture
def day_long_region(db):
    """A region whose policy allows the longest lifetime any policy may: a day."""
    return PolicyVersionFactory.create(region="EU", max_lifetime=LONGEST_LIFETIME).region


GIVEN_AS = ["ttl_seconds", "expires_at"]


@pytest.mark.parametrize("given_as", GIVEN_AS)
def test_a_lifetime_of_exactly_the_policy_maximum_is_accepted(api, published, given_as):
    assert published.max_lifetime == timedelta(hours=1)
    with time_machine.travel(system_clock.now(), tick=False):
        response = post(api, body(**lifetime(3600, given_as)))

    assert response.status_code == 201
    event = Event.objects.get(pk=response.json()["event_id"])
    assert event.expires_at - event.created_at == timedelta(hours=1)


@pytest.mark.parametrize("given_as", GIVEN_AS)
def test_a_lifetime_past_the_policy_maximum_is_refused_naming_the_limit(api, published, given_as):
    with time_machine.travel(system_clock.now(), tick=False):
        response = post(api, body(**lifetime(3601, given_as)))

    assert response.status_code == 422
    answer = response.json()
    assert (answer["error"], answer["fields"][0]["field"]) == ("lifetime_too_long", "expires_at")
    assert answer["message"] == f"the reset may live at most 3600s under policy {published}"
    assert Event.objects.count() == 0


@pytest.mark.parametrize("given_as", GIVEN_AS)
def test_a_lifetime_of_a_day_is_accepted_where_the_policy_allows_it(api, day_long_region, given_as):
    with time_machine.travel(system_clock.now(), tick=False):
        response = post(api, body(region=day_long_region, **lifetime(86_400, given_as)))

    assert response.status_code == 201
    event = Event.objects.get(pk=response.json()["event_id"])
    assert event.expires_at - event.created_at == timedelta(days=1)


@pytest.mark.parametrize("given_as", GIVEN_AS)
def test_a_lifetime_past_a_day_is_invalid_whatever_the_policy(api, day_long_region, given_as):
    with time_machine.travel(system_clock.now(), tick=False):
        response = post(api, body(region=day_long_region, **lifetime(86_401, given_as)))

    assert_invalid_beyond_a_day(response, given_as)


def test_an_expiry_decades_away_is_invalid(api, day_long_region):
    response = post(api, body(region=day_long_region, ttl_seconds=None, expires_at="2080-01-01T00:00:00+00:00"))

    assert_invalid_beyond_a_day(response, "expires_at")


def assert_invalid_beyond_a_day(response, field):
    # ttl_seconds' bound is in the schema (maximum: 86400), so breaking it is an invalid request;
    # an expires_at's bound depends on the time of the request, which no schema can state, so it
    # is the documented refusal every policy's max_lifetime (at most a day) gives.
    assert response.status_code == 422
    answer = response.json()
    assert answer["error"] == ("invalid_request" if field == "ttl_seconds" else "lifetime_too_long")
    [error] = answer["fields"]
    assert error["field"] == field
    assert "86400" in error["message"]
    assert Event.objects.count() == 0


def test_malformed_json_is_a_bad_request(api):
    response = api.post("/api/v1/events", "{not json", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["error"] == "malformed_request"


@pytest.mark.parametrize("path", ["/api/v1/whoami", "/api/v1/events"])
def test_a_host_this_service_does_not_serve_is_refused_in_the_api_s_error_shape(api, path):
    # Django refuses it before any view; the fuzzer sent one ("Host: k Key") and got an HTML page.
    response = api.get(path, HTTP_HOST="k Key")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == "malformed_request"
    assert b"k Key" not in response.content


def test_the_console_keeps_django_s_own_page_for_a_host_it_does_not_serve(client):
    response = client.get("/", HTTP_HOST="k Key")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


def test_a_body_over_the_limit_is_refused_and_nothing_is_stored(api, settings):
    response = post(api, body(reset_url="https://example.org/" + "x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE))

    assert response.status_code == 413
    assert response.json()["error"] == "too_large"
    assert Event.objects.count() == 0


@pytest.mark.parametrize("authorization", [None, "Bearer rdt_not-a-real-token", "Basic YWxhZGRpbjpvcGVuc2VzYW1l"])
def test_a_missing_or_unknown_token_is_unauthorized(client, authorization):
    headers = {"Authorization": authorization} if authorization else {}

    response = post(client, body(), **headers)

    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_revoked_token_is_unauthorized(api, token):
    ServiceToken.objects.update(revoked_at=system_clock.now())

    response = post(api, body())

    assert response.status_code == 401


def test_a_service_over_its_rate_is_told_when_to_retry(api, settings):
    settings.API_RATE_LIMIT = Rate(2, 60)
    with time_machine.travel(system_clock.now(), tick=False):
        answers = [post(api, body()) for _ in range(3)]

    assert [answer.status_code for answer in answers] == [201, 201, 429]
    assert answers[2].json()["error"] == "rate_limited"
    assert int(answers[2]["Retry-After"]) == 60


def test_a_token_records_when_it_was_last_used(api):
    post(api, body())

    assert ServiceToken.objects.get().last_used_at is not None
