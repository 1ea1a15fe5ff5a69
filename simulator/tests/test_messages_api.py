"""The Twilio-compatible Messages API, through the real ``twilio`` client."""

import re
from datetime import timedelta

import pytest
import requests
from django.conf import settings
from twilio.base.exceptions import TwilioRestException

from notify.transports.twilio_client import make_client
from simulator.tests.helpers import wait_for

TO = "+15551230001"
FROM = "+15550000000"
NEVER = 3600.0  # seconds: a status that will not come during the test


def send(twilio, to=TO, **extra):
    return twilio.messages.create(to=to, from_=FROM, body="Your reset link", **extra)


def fetch_once(twilio, sid, status):
    """Return the message as fetched once it shows ``status``."""
    return wait_for(lambda: message if (message := twilio.messages(sid).fetch()).status == status else None)


def test_it_creates_a_queued_message_with_a_full_resource(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", NEVER)])

    message = send(twilio)

    assert re.fullmatch(r"SM[0-9a-f]{32}", message.sid)
    assert (message.status, message.to, message.from_, message.body) == ("queued", TO, FROM, "Your reset link")
    assert (message.account_sid, message.api_version, message.direction) == (
        settings.TWILIO_ACCOUNT_SID,
        "2010-04-01",
        "outbound-api",
    )
    assert message.date_created is not None
    assert message.date_updated == message.date_created
    assert (message.date_sent, message.error_code, message.error_message, message.price) == (None, None, None, None)
    assert message.num_segments == "1"
    assert message.uri == f"/2010-04-01/Accounts/{settings.TWILIO_ACCOUNT_SID}/Messages/{message.sid}.json"


def test_it_answers_a_create_with_the_initial_status_even_when_the_next_is_due_at_once(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", 0.0), ("failed", 0.0)])

    message = send(twilio)

    assert (message.status, message.date_sent, message.error_code) == ("queued", None, None)
    assert twilio.messages(message.sid).fetch().status == "failed"


def test_it_accepts_a_message_sent_through_a_messaging_service(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", NEVER)])

    message = twilio.messages.create(to=TO, messaging_service_sid="MG" + "1" * 32, body="Your reset link")

    assert (message.status, message.messaging_service_sid) == ("accepted", "MG" + "1" * 32)


def test_it_fetches_a_message_by_sid(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", NEVER)])
    created = send(twilio)

    fetched = twilio.messages(created.sid).fetch()

    assert (fetched.sid, fetched.status, fetched.to) == (created.sid, "queued", TO)


def test_it_keeps_a_message_queued_until_its_first_status_is_due(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", NEVER)])

    sid = send(twilio).sid

    assert twilio.messages(sid).fetch().status == "queued"


def test_it_shows_sent_once_due_and_stays_there_without_a_receipt(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", 0.05)])
    sid = send(twilio).sid

    sent = fetch_once(twilio, sid, "sent")

    assert sent.date_sent is not None


def test_it_shows_the_terminal_status_once_due(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", 0.02), ("delivered", 0.1)])
    sid = send(twilio).sid

    fetch_once(twilio, sid, "delivered")


def test_it_reports_the_error_code_of_an_undelivered_message(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", 0.02), ("undelivered", 0.05)])
    sid = send(twilio).sid

    message = fetch_once(twilio, sid, "undelivered")

    assert (message.error_code, message.error_message) == (30003, "Unreachable destination handset")


def test_it_lists_messages_to_one_destination_newest_first(simulator, twilio):
    other = "+447700900123"
    for to in (TO, other):
        simulator.control.script_sms(to, statuses=[("sent", NEVER)])
    sids = [send(twilio, to=to).sid for to in (TO, other, TO)]

    listed = twilio.messages.list(to=TO, limit=20)

    assert [message.sid for message in listed] == [sids[2], sids[0]]


def test_it_pages_through_a_long_list(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", NEVER)])
    sids = [send(twilio).sid for _ in range(5)]

    listed = twilio.messages.list(to=TO, page_size=2)

    assert [message.sid for message in listed] == sids[::-1]


def test_it_stops_a_list_at_the_limit(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", NEVER)])
    sids = [send(twilio).sid for _ in range(3)]

    assert [message.sid for message in twilio.messages.list(to=TO, limit=2)] == sids[:0:-1]


def test_it_filters_by_date_sent_and_leaves_unsent_messages_out(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", 0.0)])
    sent = send(twilio)
    simulator.control.script_sms(TO, statuses=[("sent", NEVER)])
    send(twilio)
    since = sent.date_created - timedelta(seconds=1)

    listed = twilio.messages.list(to=TO, date_sent_after=since)

    assert [message.sid for message in listed] == [sent.sid]


def test_it_lists_nothing_sent_after_a_future_date(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[("sent", 0.0)])
    sent = send(twilio)

    assert twilio.messages.list(to=TO, date_sent_after=sent.date_created + timedelta(hours=1)) == []


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"from_": FROM, "body": "Your reset link"}, 21604),
        ({"to": TO, "body": "Your reset link"}, 21603),
        ({"to": TO, "from_": FROM}, 21602),
    ],
)
def test_it_refuses_a_message_missing_a_required_field(simulator, twilio, fields, code):
    # The client insists on a `to` argument; an empty one is the same as none to the API.
    with pytest.raises(TwilioRestException) as refused:
        twilio.messages.create(**({"to": ""} | fields))

    assert (refused.value.status, refused.value.code) == (400, code)
    assert simulator.control.counts()["sms"] == {}
    assert simulator.control.counts()["sms_rejected"] == 1


def test_it_answers_404_for_an_unknown_sid(simulator, twilio):
    with pytest.raises(TwilioRestException) as missing:
        twilio.messages("SM" + "0" * 32).fetch()

    assert (missing.value.status, missing.value.code) == (404, 20404)


def test_it_refuses_a_wrong_auth_token_with_401(simulator):
    intruder = make_client(settings.TWILIO_ACCOUNT_SID, "wrong-token", api_base=simulator.base_url, timeout=5.0)

    with pytest.raises(TwilioRestException) as refused:
        intruder.messages.create(to=TO, from_=FROM, body="Your reset link")

    assert (refused.value.status, refused.value.code) == (401, 20003)
    assert simulator.control.counts()["sms"] == {}


def test_it_refuses_a_request_without_credentials_with_401(simulator):
    response = requests.get(f"{simulator.base_url}/2010-04-01/Accounts/{settings.TWILIO_ACCOUNT_SID}/Messages.json")

    assert response.status_code == 401
    assert response.json()["code"] == 20003
