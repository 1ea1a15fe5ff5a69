from datetime import UTC, datetime, timedelta

import pytest

from simulator.messages import SmsMessage, StatusChange

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def message(**overrides) -> SmsMessage:
    fields = {
        "sid": "SM" + "0" * 32,
        "to": "+15551230001",
        "from_": "+15550000000",
        "body": "Reset link",
        "messaging_service_sid": None,
        "status_callback": "http://127.0.0.1:8000/callbacks/twilio/sms/evt_1",
        "created_at": T0,
        "timeline": (StatusChange("sent", 1.0), StatusChange("undelivered", 5.0)),
    } | overrides
    return SmsMessage(**fields)


def test_a_message_is_counted_under_the_last_segment_of_its_callback_url():
    assert message(status_callback="http://host/callbacks/twilio/sms/evt_42/").key == "evt_42"


def test_a_message_without_callback_is_counted_under_its_sid():
    assert message(status_callback=None).key == "SM" + "0" * 32


@pytest.mark.parametrize(
    ("seconds", "status", "error"),
    [(0.5, "queued", None), (1.0, "sent", None), (4.9, "sent", None), (5.0, "undelivered", 30003)],
)
def test_a_message_shows_the_latest_status_whose_time_has_come(seconds, status, error):
    current = message().current(T0 + timedelta(seconds=seconds))

    assert current.status == status
    assert (current.error or (None,))[0] == error


def test_a_message_sent_through_a_messaging_service_starts_accepted():
    assert message(messaging_service_sid="MG" + "0" * 32).current(T0).status == "accepted"


def test_a_message_has_no_date_sent_until_it_is_sent():
    assert message().date_sent(T0 + timedelta(seconds=0.5)) is None
    assert message().date_sent(T0 + timedelta(seconds=9)) == T0 + timedelta(seconds=1)


def test_a_message_that_failed_before_sending_has_no_date_sent():
    failed = message(timeline=(StatusChange("failed", 1.0),))

    assert failed.date_sent(T0 + timedelta(seconds=9)) is None


@pytest.mark.parametrize(
    ("body", "segments"),
    [("a" * 160, 1), ("a" * 161, 2), ("a" * 306, 2), ("a" * 307, 3), ("é" * 70, 1), ("é" * 71, 2)],
)
def test_a_body_is_split_into_sms_segments(body, segments):
    assert message(body=body).num_segments == segments
