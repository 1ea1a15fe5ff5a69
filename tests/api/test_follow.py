"""GET /api/v1/events/<id>: a service follows its own events, and only those."""

from datetime import timedelta

import pytest
import time_machine
from django.test import Client

from notify.models import ServiceToken
from plumbing.clock import system_clock
from tests.api.payloads import body, post
from tests.notify.helpers import submit


def test_an_event_shows_its_state_channels_next_action_and_both_clocks(api, policy):
    start = system_clock.now().replace(microsecond=0)
    with time_machine.travel(start, tick=False):
        event_id = post(api, body()).json()["event_id"]
        submit(event_id, "sms", start)
    with time_machine.travel(start + timedelta(seconds=30), tick=False):
        answer = api.get(f"/api/v1/events/{event_id}")

    assert answer.status_code == 200
    shown = answer.json()
    assert shown["state"] == "sms_requested"
    assert shown["channels"] == [
        {"channel": "sms", "claim_state": "submitting", "attempts": 1, "last_observation_at": None}
    ]
    assert (shown["next_action"], shown["policy_version"]) == ("recover_sms", policy.number)
    # act_by for sms_requested = expires_at - (poll + select + email submit + record) = 600 - 9 s after creation.
    assert shown["remaining_budget_seconds"] == 600 - 9 - 30
    assert shown["state_age_seconds"] == 30


def test_another_services_event_is_not_found(api, policy):
    event_id = post(api, body()).json()["event_id"]
    other = ServiceToken.issue("billing", now=system_clock.now())[1]

    answer = Client().get(f"/api/v1/events/{event_id}", headers={"Authorization": f"Bearer {other}"})

    assert answer.status_code == 404
    assert answer.json()["error"] == "not_found"


def test_an_unknown_event_is_not_found(api, policy):
    answer = api.get("/api/v1/events/evt_01ARZ3NDEKTSV4RRFFQ69G5FAV")

    assert answer.status_code == 404


@pytest.mark.parametrize("event_id", ["%00", "evt_01ARZ3NDEKTSV4RRFFQ69G5F%00V"], ids=["nul", "nul-inside"])
def test_an_id_with_a_nul_byte_is_not_found_in_the_api_s_shape(api, policy, event_id):
    # PostgreSQL refuses a NUL in text: asked for one, it made an HTML 500 of this.
    answer = api.get(f"/api/v1/events/{event_id}")

    assert answer.status_code == 404
    assert answer.json()["error"] == "not_found"


def test_following_needs_a_token(client, policy):
    assert client.get("/api/v1/events/evt_01ARZ3NDEKTSV4RRFFQ69G5FAV").status_code == 401


def test_whoami_names_the_tokens_service(api):
    assert api.get("/api/v1/whoami").json() == {"service": "accounts"}


def test_the_openapi_document_describes_every_route_and_needs_no_token(client):
    answer = client.get("/api/v1/openapi.json")

    assert answer.status_code == 200
    document = answer.json()
    assert set(document["paths"]) == {"/api/v1/events", "/api/v1/events/{event_id}", "/api/v1/whoami"}
    create = document["paths"]["/api/v1/events"]["post"]
    assert {"200", "201", "400", "401", "409", "413", "422", "429"} <= set(create["responses"])
    assert set(document["components"]["schemas"]["CreateEvent"]["required"]) >= {
        "client_key",
        "purpose",
        "region",
        "phone",
        "email",
        "reset_url",
    }
