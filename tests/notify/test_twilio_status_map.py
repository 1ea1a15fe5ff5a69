"""The raw Twilio status -> internal status map, at the adapter boundary."""

import pytest

from notify.rules.vocabulary import Normalized
from notify.transports.twilio_sms import normalize

DOCUMENTED = {
    "queued": Normalized.PENDING,
    "accepted": Normalized.PENDING,
    "scheduled": Normalized.PENDING,
    "sending": Normalized.PENDING,
    "sent": Normalized.PENDING,
    "delivered": Normalized.DELIVERED,
    "read": Normalized.DELIVERED,
    "undelivered": Normalized.TERMINAL_FAILURE,
    "failed": Normalized.TERMINAL_FAILURE,
    "canceled": Normalized.TERMINAL_FAILURE,
}


@pytest.mark.parametrize(("raw", "expected"), DOCUMENTED.items())
def test_every_documented_twilio_status_maps_as_designed(raw, expected):
    assert normalize(raw) == expected


@pytest.mark.parametrize("raw", ["receiving", "partially_delivered", "", "DELIVERED"])
def test_an_unknown_status_is_treated_as_pending(raw):
    assert normalize(raw) == Normalized.PENDING
