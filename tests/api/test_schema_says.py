"""The API's schema says exactly what the API does: unknown fields, one expiry, links to follow."""

from datetime import timedelta
from typing import Any

import jsonschema
import pytest

from notify.models import Event
from plumbing.clock import system_clock
from tests.api.payloads import body, post

pytestmark = pytest.mark.django_db


def served_schema(client) -> dict[str, Any]:
    document: dict[str, Any] = client.get("/api/v1/openapi.json").json()
    return document


def creation_schema(client) -> dict[str, Any]:
    document = served_schema(client)
    schema = document["components"]["schemas"]["CreateEvent"]
    return {**schema, "components": document["components"]}


@pytest.mark.parametrize("typo", ["ttl_second", "expiresAt", "callback_url"])
def test_an_unknown_field_is_refused_naming_it_and_nothing_is_created(api, typo):
    response = post(api, {**body(), typo: 600})

    assert response.status_code == 422
    answer = response.json()
    assert answer["error"] == "unknown_field"
    assert typo in answer["message"]
    assert {"field": typo, "message": "unknown field"} in answer["fields"]
    assert not Event.objects.exists()


def test_an_unknown_field_whose_name_is_not_a_name_is_refused_without_repeating_it(api):
    key = "+14155550123"  # a key is the caller's input: a phone number is never echoed back
    response = post(api, {**body(), key: "x"})

    assert response.status_code == 422
    assert response.json()["error"] == "unknown_field"
    assert key not in response.content.decode()


@pytest.mark.parametrize("field", ["expires_at", "ttl_seconds"])
def test_a_null_expiry_is_refused_as_the_schema_says(api, client, field):
    expiry = {"expires_at": (system_clock.now() + timedelta(minutes=15)).isoformat(), "ttl_seconds": 600}
    other = "ttl_seconds" if field == "expires_at" else "expires_at"
    sent = {**body(ttl_seconds=None), other: expiry[other], field: None}

    response = post(api, sent)

    assert response.status_code == 422
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(sent, creation_schema(client))


def test_the_schema_refuses_what_the_api_refuses_and_allows_what_it_allows(api, client, policy):
    schema = creation_schema(client)
    both = body(expires_at=(system_clock.now() + timedelta(minutes=15)).isoformat())
    typo = {**body(), "ttl_second": 600}
    for refused in (both, body(ttl_seconds=None), typo):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(refused, schema)
        assert post(api, refused).status_code == 422
    jsonschema.validate(body(), schema)
    assert post(api, body()).status_code == 201


def test_a_creation_links_to_its_follow_up_read(api, client, policy):
    document = served_schema(client)
    operations = {
        op["operationId"]: (path, method) for path, ops in document["paths"].items() for method, op in ops.items()
    }
    responses = document["paths"]["/api/v1/events"]["post"]["responses"]

    for status in ("200", "201"):
        link = responses[status]["links"]["FollowTheEvent"]
        assert operations[link["operationId"]] == ("/api/v1/events/{event_id}", "get")
        assert link["parameters"] == {"event_id": "$response.body#/event_id"}
    # Following the link from a real creation reads that event.
    created = post(api, body()).json()
    assert api.get(f"/api/v1/events/{created['event_id']}").json()["event_id"] == created["event_id"]


def test_every_operation_documents_the_400_django_may_answer_before_it(client):
    # A Host the service does not serve is refused before any view, on every path (handler400).
    paths = served_schema(client)["paths"]

    undocumented = [
        f"{method.upper()} {path}"
        for path, operations in paths.items()
        for method, operation in operations.items()
        if "400" not in operation["responses"]
    ]

    assert undocumented == []
