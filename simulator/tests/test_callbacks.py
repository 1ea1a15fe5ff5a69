"""Status callbacks as a receiver on loopback sees them: signed, faulted as scripted, retried."""

import socket
import time

import pytest
from django.conf import settings
from twilio.request_validator import RequestValidator

from simulator.tests.helpers import wait_until

TO = "+15551230001"
FROM = "+15550000000"
EVENT = "evt_callbacks"
QUICK = [("sent", 0.02), ("delivered", 0.06)]


def send(twilio, status_callback):
    return twilio.messages.create(to=TO, from_=FROM, body="Your reset link", status_callback=status_callback)


def settle():
    """Give callbacks that should not come time to show up anyway."""
    time.sleep(0.3)


def test_callbacks_are_signed_with_the_auth_token(simulator, twilio, receiver):
    simulator.control.script_sms(TO, statuses=QUICK)
    send(twilio, receiver.url(EVENT))

    received = receiver.wait_for(2)

    validator = RequestValidator(settings.TWILIO_AUTH_TOKEN)
    assert all(validator.validate(r.url, r.params, r.headers["X-Twilio-Signature"]) for r in received)


def test_a_callback_carries_twilios_fields(simulator, twilio, receiver):
    simulator.control.script_sms(TO, statuses=[("sent", 0.02)])
    sid = send(twilio, receiver.url(EVENT)).sid

    (callback,) = receiver.wait_for(1)

    assert callback.params == {
        "MessageSid": sid,
        "SmsSid": sid,
        "MessageStatus": "sent",
        "SmsStatus": "sent",
        "AccountSid": settings.TWILIO_ACCOUNT_SID,
        "From": FROM,
        "To": TO,
        "ApiVersion": "2010-04-01",
    }
    assert callback.headers["I-Twilio-Idempotency-Token"]


def test_a_failed_message_callback_carries_its_error_code(simulator, twilio, receiver):
    simulator.control.script_sms(TO, statuses=[("failed", 0.02)])
    send(twilio, receiver.url(EVENT))

    (callback,) = receiver.wait_for(1)

    assert (callback.params["MessageStatus"], callback.params["ErrorCode"]) == ("failed", "30008")


def test_normal_callbacks_follow_the_timeline(simulator, twilio, receiver):
    simulator.control.script_sms(TO, statuses=QUICK, callbacks="normal")
    send(twilio, receiver.url(EVENT))

    receiver.wait_for(2)
    settle()

    assert receiver.statuses() == ["sent", "delivered"]
    assert simulator.control.counts()["callbacks_sent"] == 2


def test_dropped_callbacks_never_arrive_but_polling_sees_the_status(simulator, twilio, receiver):
    simulator.control.script_sms(TO, statuses=QUICK, callbacks="drop")
    sid = send(twilio, receiver.url(EVENT)).sid

    wait_until(lambda: twilio.messages(sid).fetch().status == "delivered")
    settle()

    assert receiver.received == []


def test_duplicated_callbacks_repeat_each_status_under_one_token(simulator, twilio, receiver):
    simulator.control.script_sms(TO, statuses=QUICK, callbacks="duplicate")
    send(twilio, receiver.url(EVENT))

    wait_until(lambda: "delivered" in receiver.statuses())
    settle()

    tokens: dict[str, set[str]] = {}
    for callback in receiver.received:
        tokens.setdefault(callback.params["MessageStatus"], set()).add(callback.headers["I-Twilio-Idempotency-Token"])
    assert receiver.statuses().count("sent") >= 2
    assert receiver.statuses().count("delivered") >= 2
    assert [len(status_tokens) for status_tokens in tokens.values()] == [1, 1]
    assert tokens["sent"] != tokens["delivered"]


def test_reordered_callbacks_send_the_terminal_status_first(simulator, twilio, receiver):
    simulator.control.script_sms(TO, statuses=QUICK, callbacks="reorder")
    send(twilio, receiver.url(EVENT))

    receiver.wait_for(2)

    assert receiver.statuses() == ["delivered", "sent"]


def test_delayed_callbacks_arrive_late_by_the_delay(simulator, twilio, receiver):
    simulator.control.script_sms(TO, statuses=[("sent", 0.0)], callbacks="delay", callback_delay=0.5)
    started = time.monotonic()
    send(twilio, receiver.url(EVENT))

    (callback,) = receiver.wait_for(1)

    assert callback.at - started >= 0.5


def test_a_callback_answered_with_5xx_is_retried_under_the_same_token(simulator, twilio, receiver):
    receiver.failures = 1
    simulator.control.script_sms(TO, statuses=[("sent", 0.0)])
    send(twilio, receiver.url(EVENT))

    first, retry = receiver.wait_for(2)

    assert first.headers["I-Twilio-Idempotency-Token"] == retry.headers["I-Twilio-Idempotency-Token"]
    assert first.params == retry.params


def test_a_callback_is_retried_at_most_twice(simulator, twilio, receiver):
    receiver.failures = 10
    simulator.control.script_sms(TO, statuses=[("sent", 0.0)])
    send(twilio, receiver.url(EVENT))

    receiver.wait_for(3)
    time.sleep(1.0)  # longer than every retry pause together

    assert len(receiver.received) == 3


@pytest.fixture
def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_callback_target_does_not_disturb_the_simulator(simulator, twilio, closed_port):
    simulator.control.script_sms(TO, statuses=[("sent", 0.0), ("delivered", 0.01)])
    sid = send(twilio, f"http://127.0.0.1:{closed_port}/callbacks/twilio/sms/{EVENT}").sid

    wait_until(lambda: "callback gave up sid=" + sid in simulator.log_text())

    assert twilio.messages(sid).fetch().status == "delivered"
    assert simulator.control.counts()["sms"] == {EVENT: 1}


def test_reset_stops_pending_callbacks(simulator, twilio, receiver):
    simulator.control.script_sms(TO, statuses=[("sent", 0.3)])
    send(twilio, receiver.url(EVENT))

    simulator.control.reset()
    time.sleep(0.6)

    assert receiver.received == []
