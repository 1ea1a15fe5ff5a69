"""Outcomes with a name of their own: a fallback too late to help, refused credentials, a told-apart neighbour."""

from datetime import timedelta

import pytest
from django.conf import settings

from notify import tallies
from notify.models import Claim, Event, Observation, Tally
from notify.rules.vocabulary import Channel, ClaimState, Normalized, State
from notify.transports import Transports
from notify.transports.twilio_client import make_client
from notify.transports.twilio_sms import TwilioSms
from tests.factories import PolicyVersionFactory, new_event
from tests.notify.workers import email_count, next_phone, scripted_event, sms_count, step
from tests.providers import SIMULATOR_PROCESSING_HORIZON, simulated_transports

pytestmark = pytest.mark.django_db(transaction=True)


def tally(name, label=""):
    return sum(Tally.objects.filter(name=name, label=label).values_list("value", flat=True))


def test_a_fallback_claimed_too_late_to_be_of_use_is_recorded_and_not_sent(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=["reject"], smtp=["accept"])
    # The workers were down until 3 s before expiry; the email step needs 6 s (submit and record).
    clock.advance((event.expires_at - clock.now()).total_seconds() - 3)

    step(event.id, transports, clock)

    settled = Event.objects.get(pk=event.id)
    assert settled.state == State.EMAIL_FAILED
    assert email_count(simulator, event.id) == 0
    gave_up = Observation.objects.get(event=event, channel=Channel.EMAIL)
    assert (gave_up.normalized, gave_up.raw_status) == (Normalized.NO_USEFUL_LIFE, "no_useful_life")
    assert tally(tallies.FALLBACKS_WITHOUT_USEFUL_LIFE, "email") == 1


def test_an_email_retry_that_would_come_too_late_is_not_sent(clock, simulator, transports):
    PolicyVersionFactory.create(email_backoff=timedelta(seconds=10))
    event = scripted_event(simulator, clock, create=["reject"], smtp=["temp_fail", "accept"])
    clock.advance((event.expires_at - clock.now()).total_seconds() - 12)
    step(event.id, transports, clock)  # first attempt deferred; the retry is due 2 s before expiry
    clock.advance(10)

    step(event.id, transports, clock)

    assert Event.objects.get(pk=event.id).state == State.EMAIL_FAILED
    assert email_count(simulator, event.id) == 0
    assert Claim.objects.get(event=event, channel=Channel.EMAIL).attempts == 1


def test_refused_credentials_are_a_configuration_error_not_a_passing_one(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock)
    wrong = make_client(settings.TWILIO_ACCOUNT_SID, "not-our-token", api_base=simulator.base_url, timeout=5)
    misconfigured = Transports.guarded(TwilioSms(wrong, absence_horizon=SIMULATOR_PROCESSING_HORIZON), transports.email)

    step(event.id, misconfigured, clock)

    refused = Observation.objects.get(event=event, channel=Channel.SMS)
    assert (refused.normalized, refused.raw_status) == (Normalized.CONFIGURATION_ERROR, "http_401_20003")
    sms = Claim.objects.get(event=event, channel=Channel.SMS)
    # Nothing was sent: the claim waits to be sent, tried again at the next poll interval.
    assert (sms.state, sms.next_attempt_at) == (ClaimState.CLAIMED, clock.now() + policy.poll_interval)
    assert sms_count(simulator, event.id) == 0
    assert tally(tallies.CONFIGURATION_ERRORS, "sms") == 1


def test_another_events_message_to_the_same_number_is_told_apart_by_its_id(clock, simulator, settings):
    policy = PolicyVersionFactory.create(sms_discard_content=True)  # no bodies to match on
    # Only a sender no one else uses lets a message without a body be told to be ours at all.
    transports = simulated_transports(simulator, settings, exclusive_senders=frozenset({policy.sms_sender}))
    phone = next_phone()
    simulator.control.script_sms(phone, create=["accept", "accept_then_drop"], statuses=[], callbacks="drop")
    first = scripted_event_to(simulator, clock, phone)
    step(first.id, transports, clock, max_actions=1)  # accepted: its sid is on its claim
    second = scripted_event_to(simulator, clock, phone)
    step(second.id, transports, clock, max_actions=1)  # accepted, but the answer was lost
    clock.advance(settings.NOTIFY_SMS_LOOKUP_DELAY.total_seconds() + 25)

    step(second.id, transports, clock, max_actions=1)  # the lookup

    claims = {c.event_id: c for c in Claim.objects.filter(channel=Channel.SMS)}
    assert claims[second.id].state == ClaimState.ACCEPTED
    assert claims[second.id].provider_ref not in ("", claims[first.id].provider_ref)
    assert (sms_count(simulator, first.id), sms_count(simulator, second.id)) == (1, 1)


def scripted_event_to(simulator, clock, phone):
    return new_event(clock.now(), phone=phone, email=f"subscriber.{phone[1:]}@example.org")
