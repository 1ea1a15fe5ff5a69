"""The simulator's slow provider and privacy settings: late acceptance, redaction, discarded bodies, a paced relay."""

import smtplib
import time

import pytest
import requests
from django.conf import settings

from notify.transports.twilio_client import make_client
from simulator.control import SimulatorControlError
from simulator.resources import mask_number

TO = "+14155550111"
SENDER = "+15005550006"


def send(twilio, **extra):
    return twilio.messages.create(to=TO, from_=SENDER, body="Reset: https://example.org/r/1", **extra)


def test_a_late_acceptance_is_invisible_until_its_hold_ends_and_then_listed(simulator, twilio):
    simulator.control.script_sms(TO, create=["accept_late"], statuses=[], hang_seconds=1.0)
    impatient = make_client(
        settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, api_base=simulator.base_url, timeout=0.3
    )

    with pytest.raises(requests.RequestException):
        send(impatient)
    listed_during = twilio.messages.list(to=TO)
    time.sleep(1.0)
    listed_after = twilio.messages.list(to=TO)

    assert listed_during == []
    assert len(listed_after) == 1
    assert simulator.control.counts()["sms_accepted_late"] == 1


def test_a_message_sent_with_content_retention_discard_shows_no_body(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[])

    sent = send(twilio, content_retention="discard")

    assert twilio.messages(sent.sid).fetch().body == ""
    assert twilio.messages.list(to=TO)[0].body == ""


def test_body_redaction_hides_a_body_once_the_message_is_sent(simulator, twilio):
    simulator.control.redact(body=True)
    simulator.control.script_sms(TO, statuses=[["sent", 0.5]])

    sent = send(twilio)
    queued = twilio.messages(sent.sid).fetch()
    time.sleep(0.6)
    gone_out = twilio.messages(sent.sid).fetch()

    assert queued.body.startswith("Reset:")
    assert gone_out.body == ""


def test_phone_redaction_masks_the_destinations_last_four_digits(simulator, twilio):
    simulator.control.redact(phone=True)
    simulator.control.script_sms(TO, statuses=[])

    send(twilio)

    assert twilio.messages.list(to=TO)[0].to == "+1415555XXXX" == mask_number(TO)


def test_reset_turns_redaction_off(simulator, twilio):
    simulator.control.redact(body=True, phone=True)
    simulator.control.reset()
    simulator.control.script_sms(TO, statuses=[["sent", 0]])

    sent = send(twilio)

    assert (twilio.messages(sent.sid).fetch().to, twilio.messages(sent.sid).fetch().body[:6]) == (TO, "Reset:")


def test_a_paced_connection_waits_before_every_reply_and_only_as_many_as_asked(simulator):
    simulator.control.pace_smtp(connections=1, reply_delay=0.3)

    def exchange() -> float:
        started = time.monotonic()
        with smtplib.SMTP("127.0.0.1", simulator.smtp_port, timeout=5) as client:
            client.ehlo()
            client.noop()
        return time.monotonic() - started

    paced = exchange()
    exchange()

    assert paced >= 4 * 0.3  # greeting, EHLO, NOOP, QUIT
    assert simulator.control.counts()["smtp_paced_connections"] == 1  # the second was not paced


@pytest.mark.parametrize(
    ("endpoint", "body", "complaint"),
    [
        ("redact", {"body": "yes"}, "body: must be true or false"),
        ("pace_smtp", {"connections": -1, "reply_delay": 0.1}, "connections: must not be negative"),
    ],
)
def test_bad_settings_are_refused_with_the_field_named(simulator, endpoint, body, complaint):
    with pytest.raises(SimulatorControlError, match=complaint):
        getattr(simulator.control, endpoint)(**body)
