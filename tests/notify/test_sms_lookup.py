"""Recovery lookups when the provider keeps no body: what survives redaction decides, and doubt never resends."""

from datetime import timedelta

import pytest
from django.conf import settings

from notify.clock import SystemClock
from notify.transports.base import Neighbours, SmsMessage, UnknownOutcome
from notify.transports.twilio_client import make_client
from notify.transports.twilio_sms import TwilioSms

TO = "+14155550142"
SENDER = "+15005550006"
LINK = "https://accounts.example.org/reset/ours"


def message(link=LINK, *, discard=False):
    return SmsMessage(
        to=TO, sender=SENDER, body=f"Reset: {link}", status_callback="https://example.org/cb", reference=link,
        discard_content=discard,
    )  # fmt: skip


@pytest.fixture
def adapter(simulator):
    def make(*, phone_redaction=False):
        client = make_client(
            settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, api_base=simulator.base_url, timeout=5
        )
        return TwilioSms(client, absence_horizon=timedelta(seconds=5), phone_redaction=phone_redaction)

    simulator.control.script_sms(TO, statuses=[["sent", 0]])
    return make


@pytest.fixture
def since():
    return SystemClock().now() - timedelta(seconds=1)


def test_a_discarded_body_is_found_by_sender_and_window_when_nothing_else_could_be_it(adapter, since):
    sms = adapter()
    sent = sms.submit(message(discard=True))

    found = sms.find(message(discard=True), since, Neighbours())

    assert found is not None
    assert found.provider_ref == sent.provider_ref


def test_another_events_message_we_can_name_is_set_aside(adapter, since):
    sms = adapter()
    theirs = sms.submit(message("https://accounts.example.org/reset/theirs", discard=True))
    ours = sms.submit(message(discard=True))

    found = sms.find(message(discard=True), since, Neighbours(sids=frozenset({theirs.provider_ref})))

    assert found is not None
    assert found.provider_ref == ours.provider_ref


def test_a_redacted_message_that_could_be_another_events_leaves_the_outcome_unknown(adapter, since):
    sms = adapter()
    sms.submit(message(discard=True))

    with pytest.raises(UnknownOutcome, match="lookup_ambiguous"):
        sms.find(message(discard=True), since, Neighbours(unidentified=1))


def test_body_redaction_after_sending_falls_back_to_the_sender_and_window(simulator, adapter, since):
    simulator.control.redact(body=True)
    sms = adapter()
    sent = sms.submit(message())

    found = sms.find(message(), since, Neighbours())

    assert found is not None
    assert found.provider_ref == sent.provider_ref


def test_with_phone_redaction_an_empty_list_proves_nothing(adapter, since):
    with pytest.raises(UnknownOutcome, match="lookup_redacted"):
        adapter(phone_redaction=True).find(message(), since, Neighbours())


def test_a_readable_list_without_our_link_proves_absence(adapter, since):
    sms = adapter()
    sms.submit(message("https://accounts.example.org/reset/theirs"))

    assert sms.find(message(), since, Neighbours()) is None
