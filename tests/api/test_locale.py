"""POST /api/v1/events with the subscriber's locale and time zone, and a link the policy's SMS can carry."""

import pytest

from notify.models import Event
from tests.api.payloads import body, post
from tests.factories import PolicyVersionFactory

SETS = {"de": {"sms": "Link: {{ reset_url }}", "email_subject": "Link", "email_body": "{{ reset_url }}"}}


@pytest.fixture(autouse=True)
def published(db):
    return PolicyVersionFactory(locale_templates=SETS, reset_url_max_length=80)


def test_the_locale_and_time_zone_are_stored_canonical_with_the_set_they_chose_and_shown_to_the_caller(api):
    created = post(api, body(locale="DE-at", time_zone="Europe/Vienna")).json()

    event = Event.objects.get(pk=created["event_id"])
    assert (event.locale, event.time_zone, event.message_locale) == ("de-AT", "Europe/Vienna", "de")
    followed = api.get(f"/api/v1/events/{event.id}").json()
    assert (followed["locale"], followed["time_zone"], followed["rendered_in"]) == ("de-AT", "Europe/Vienna", "de")


def test_without_a_locale_the_default_set_is_used(api):
    created = post(api, body()).json()

    followed = api.get(f"/api/v1/events/{created['event_id']}").json()
    assert (followed["locale"], followed["time_zone"], followed["rendered_in"]) == ("", "", "default")


def test_the_same_request_in_another_locale_is_another_request(api):
    post(api, body(client_key="k-1", locale="de"))

    response = post(api, body(client_key="k-1", locale="fr"))

    assert response.status_code == 409


@pytest.mark.parametrize(
    ("overrides", "reason", "field", "message"),
    [
        ({"locale": "klingonese"}, "invalid_locale", "locale", "not a BCP 47 tag"),
        ({"locale": "und"}, "invalid_locale", "locale", "unknown language subtag"),
        ({"locale": "de.UTF-8"}, "invalid_locale", "locale", "not a BCP 47 tag"),
        ({"locale": "de-XQ"}, "invalid_locale", "locale", "unknown region subtag"),
        ({"time_zone": "Mars/Olympus_Mons"}, "invalid_time_zone", "time_zone", "IANA time zone"),
        (
            {"reset_url": "https://accounts.example.org/" + "r" * 53},
            "reset_url_too_long",
            "reset_url",
            "reset_url is 82 SMS characters long; policy US v",
        ),
        (
            {"reset_url": "https://accounts.example.org/~" + "r" * 50},
            "reset_url_too_long",
            "reset_url",
            "(a ~, [ or ] counts twice)",
        ),
        (
            {"reset_url": "https://пример.example/reset/x"},
            "invalid_reset_url",
            "reset_url",
            "must be characters an SMS carries in GSM-7",
        ),
        (
            {"reset_url": "https://accounts.example.org/reset/`x`"},
            "invalid_reset_url",
            "reset_url",
            "percent-encode its path (a backtick too)",
        ),
        ({"time_zone": "localtime"}, "invalid_time_zone", "time_zone", "IANA time zone"),
    ],
)
def test_a_wording_the_policy_cannot_honour_is_refused_naming_the_field_and_nothing_is_created(
    api, overrides, reason, field, message
):
    response = post(api, body(**overrides))

    assert response.status_code == 422
    answer = response.json()
    assert (answer["error"], answer["fields"][0]["field"]) == (reason, field)
    assert message in answer["message"]
    for value in overrides.values():
        assert value not in response.content.decode()
    assert Event.objects.count() == 0


def test_a_link_at_the_policys_maximum_is_accepted(api):
    response = post(api, body(reset_url="https://accounts.example.org/" + "r" * 51))

    assert response.status_code == 201


def test_a_request_without_locale_or_time_zone_is_the_same_request_it_was_before_they_existed(api):
    """A client retrying across the deploy that added them is answered with its event, not a conflict."""
    import json

    from notify import vault
    from notify.intake import audience_of, checked_destinations, request_fingerprint
    from tests.factories import reset_request

    request = reset_request()
    destinations = checked_destinations(request).destinations
    before = vault.keyed_hash(
        json.dumps(
            [request.region, request.purpose, destinations.phone, destinations.email, destinations.reset_url,
             None, request.ttl.total_seconds(), request.consent]
        )
    )  # fmt: skip

    assert request_fingerprint(request, destinations, audience_of(request)) == before
