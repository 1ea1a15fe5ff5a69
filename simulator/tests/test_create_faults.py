"""Scripted create faults, as the real ``twilio`` client meets them, and how each is counted."""

import pytest
import requests
from django.conf import settings
from twilio.base.exceptions import TwilioRestException

from notify.transports.twilio_client import make_client

TO = "+15551230001"
EVENT = "evt_create_fault"


def send(twilio, receiver_url="http://127.0.0.1:9/callbacks/twilio/sms/" + EVENT):
    return twilio.messages.create(to=TO, from_="+15550000000", body="Your reset link", status_callback=receiver_url)


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [("reject", 400, 21211), ("rate_limited", 429, 20429), ("server_error", 500, 20500)],
)
def test_a_refusing_fault_raises_and_accepts_nothing(simulator, twilio, fault, status, code):
    simulator.control.script_sms(TO, create=[fault])

    with pytest.raises(TwilioRestException) as refused:
        send(twilio)

    assert (refused.value.status, refused.value.code) == (status, code)
    counts = simulator.control.counts()
    assert (counts["sms"], counts["sms_rejected"]) == ({}, 1)
    assert twilio.messages.list(to=TO) == []


def test_accept_then_500_raises_but_the_message_was_accepted(simulator, twilio):
    simulator.control.script_sms(TO, create=["accept_then_500"], statuses=[])

    with pytest.raises(TwilioRestException) as failed:
        send(twilio)

    assert failed.value.status == 500
    assert simulator.control.counts()["sms"] == {EVENT: 1}
    assert len(twilio.messages.list(to=TO)) == 1


def test_accept_then_drop_leaves_the_client_without_an_answer_but_the_message_accepted(simulator, twilio):
    simulator.control.script_sms(TO, create=["accept_then_drop"], statuses=[])

    with pytest.raises(requests.ConnectionError):
        send(twilio)

    assert simulator.control.counts()["sms"] == {EVENT: 1}
    assert len(twilio.messages.list(to=TO)) == 1


def test_hang_lets_the_client_time_out_after_the_message_was_accepted(simulator):
    impatient = make_client(
        settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, api_base=simulator.base_url, timeout=0.3
    )
    simulator.control.script_sms(TO, create=["hang"], statuses=[], hang_seconds=3)

    with pytest.raises(requests.Timeout):
        send(impatient)

    assert simulator.control.counts()["sms"] == {EVENT: 1}


def test_hang_answers_201_once_the_hang_is_over(simulator, twilio):
    simulator.control.script_sms(TO, create=["hang"], statuses=[], hang_seconds=0.2)

    assert send(twilio).status == "queued"


def test_create_faults_are_consumed_one_per_call_and_the_last_repeats(simulator, twilio):
    simulator.control.script_sms(TO, create=["rate_limited", "accept"], statuses=[])

    with pytest.raises(TwilioRestException):
        send(twilio)
    send(twilio)
    send(twilio)

    counts = simulator.control.counts()
    assert (counts["sms"], counts["sms_rejected"]) == ({EVENT: 2}, 1)


def test_a_message_without_status_callback_is_counted_under_its_sid(simulator, twilio):
    simulator.control.script_sms(TO, statuses=[])

    sid = twilio.messages.create(to=TO, from_="+15550000000", body="Your reset link").sid

    assert simulator.control.counts()["sms"] == {sid: 1}
