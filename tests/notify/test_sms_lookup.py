"""Recovery lookups when the provider keeps no body: what survives redaction decides, and doubt never resends."""

from datetime import timedelta

import pytest
from django.conf import settings

from notify.models import Claim
from notify.rules.vocabulary import Channel, State
from notify.transports.base import Neighbours, SmsMessage, UnknownOutcome
from notify.transports.twilio_client import make_client
from notify.transports.twilio_sms import TwilioSms
from plumbing.clock import SystemClock
from tests.factories import PolicyVersionFactory, new_event
from tests.notify.workers import email_count, next_phone, run_until_settled, sms_count, step

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
    def make(*, phone_redaction=False, exclusive=False):
        """The adapter; ``exclusive``: the deployment declares that no one else sends from ``SENDER``."""
        client = make_client(
            settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, api_base=simulator.base_url, timeout=5
        )
        return TwilioSms(
            client,
            absence_horizon=timedelta(seconds=5),
            phone_redaction=phone_redaction,
            exclusive_senders=frozenset({SENDER} if exclusive else ()),
        )

    simulator.control.script_sms(TO, statuses=[["sent", 0]])
    return make


@pytest.fixture
def since():
    return SystemClock().now() - timedelta(seconds=1)


def test_a_discarded_body_is_found_by_sender_and_window_when_nothing_else_could_be_it(adapter, since):
    sms = adapter(exclusive=True)
    sent = sms.submit(message(discard=True))

    found = sms.find(message(discard=True), since, Neighbours())

    assert found is not None
    assert found.provider_ref == sent.provider_ref


def test_another_events_message_we_can_name_is_set_aside(adapter, since):
    sms = adapter(exclusive=True)
    theirs = sms.submit(message("https://accounts.example.org/reset/theirs", discard=True))
    ours = sms.submit(message(discard=True))

    found = sms.find(message(discard=True), since, Neighbours(sids=frozenset({theirs.provider_ref})))

    assert found is not None
    assert found.provider_ref == ours.provider_ref


def test_a_redacted_message_that_could_be_another_events_leaves_the_outcome_unknown(adapter, since):
    sms = adapter(exclusive=True)
    sms.submit(message(discard=True))

    with pytest.raises(UnknownOutcome, match="lookup_ambiguous"):
        sms.find(message(discard=True), since, Neighbours(unidentified=1))


def test_body_redaction_after_sending_falls_back_to_the_sender_declared_exclusive_and_window(simulator, adapter, since):
    simulator.control.redact(body=True)
    sms = adapter(exclusive=True)
    sent = sms.submit(message())

    found = sms.find(message(), since, Neighbours())

    assert found is not None
    assert found.provider_ref == sent.provider_ref


def test_without_bodies_a_strangers_message_from_a_sender_not_declared_exclusive_is_not_taken_for_ours(
    simulator, adapter, since
):
    simulator.control.redact(body=True)
    # Another product of the company sends from the same number to the same subscriber; ours never went.
    adapter().submit(message("https://shop.example.org/order/1234"))

    with pytest.raises(UnknownOutcome, match="lookup_ambiguous"):
        adapter().find(message(), since, Neighbours())


def test_phone_redaction_leaves_even_an_exclusive_senders_message_without_a_body_unproven(adapter, since):
    sms = adapter(phone_redaction=True, exclusive=True)
    sms.submit(message(discard=True))

    # Its destination masked, the list cannot show the message is to this subscriber at all.
    with pytest.raises(UnknownOutcome, match="lookup_ambiguous"):
        sms.find(message(discard=True), since, Neighbours())


def test_with_phone_redaction_an_empty_list_proves_nothing(adapter, since):
    with pytest.raises(UnknownOutcome, match="lookup_redacted"):
        adapter(phone_redaction=True).find(message(), since, Neighbours())


def test_a_readable_list_without_our_link_proves_absence(adapter, since):
    sms = adapter()
    sms.submit(message("https://accounts.example.org/reset/theirs"))

    assert sms.find(message(), since, Neighbours()) is None


@pytest.mark.django_db(transaction=True)
def test_an_unknown_submit_is_not_settled_by_a_strangers_message_and_yields_to_one_email_at_d(
    clock, simulator, transports
):
    policy = PolicyVersionFactory.create(sms_discard_content=True)
    phone = next_phone()
    # Ours is answered 500 (Twilio may have created it; it did not), the stranger's is accepted.
    simulator.control.script_sms(
        phone, create=["server_error", "accept"], statuses=[["sent", 0], ["delivered", 0]], callbacks="drop"
    )
    email = f"subscriber.{phone[1:]}@example.org"
    simulator.control.script_email(email, smtp=["accept"])
    event = new_event(clock.now(), phone=phone, email=email)
    step(event.id, transports, clock, max_actions=1)  # the submit: unknown outcome
    strangers = transports.sms.submit(
        SmsMessage(
            to=phone, sender=policy.sms_sender, body="Your order has shipped", status_callback="https://shop.example.org/cb",
            discard_content=True,
        )
    )  # fmt: skip

    settled = run_until_settled(event.id, transports, clock)

    sms = Claim.objects.get(event=event, channel=Channel.SMS)
    assert settled.state == State.EMAIL_ACCEPTED  # not "delivered" by the stranger's receipts
    assert sms.provider_ref != strangers.provider_ref
    assert sms.attempts == 1  # looked up again and again, never resubmitted
    assert (sms_count(simulator, event.id), email_count(simulator, event.id)) == (0, 1)
