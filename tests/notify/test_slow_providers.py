"""Exactly one message per channel when a provider is slower than our timeouts.

Twilio may still be creating a message our client gave up on; an SMTP relay may answer
every step just inside its read timeout. Neither may cost the subscriber a second message.
"""

import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.mail import EmailMessage
from django.db import connection
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from notify import tallies, worker
from notify.models import Claim, Event, Observation, Tally
from notify.rules import plan
from notify.rules.vocabulary import Channel, ClaimState, NextAction, Normalized, State
from notify.transports import Transports, call_bound, lease_hold
from notify.transports.base import TransientError
from notify.transports.smtp_email import SmtpEmail
from plumbing.clock import SystemClock
from tests.conftest import T0
from tests.factories import PolicyVersionFactory
from tests.notify.helpers import post_status
from tests.notify.workers import SlowTwilio, email_count, run_until_settled, scripted_event, sms_count

pytestmark = pytest.mark.django_db(transaction=True)


def slow_sms(transports, clock, after):
    slow = SlowTwilio(transports.sms, clock, accept_after=after)
    return slow, Transports(slow, transports.email)


def test_an_sms_accepted_after_our_timeout_is_found_by_lookup_and_never_sent_twice(
    policy, clock, simulator, transports
):
    event = scripted_event(simulator, clock)
    slow, slow_transports = slow_sms(transports, clock, after=15)  # listed 15 s after the submit, before D

    settled = run_until_settled(event.id, slow_transports, clock)
    clock.advance(120)
    slow.finish_processing()  # whatever Twilio still had in hand is created now

    assert settled.state == State.SMS_DELIVERED
    assert (sms_count(simulator, event.id), email_count(simulator, event.id)) == (1, 0)
    lookups = Observation.objects.filter(event=event, raw_status="not_listed_yet")
    # Looked up again and again while absence could not be proven, never resubmitted.
    assert lookups.count() >= 2
    assert Claim.objects.get(event=event, channel=Channel.SMS).attempts == 1


def test_an_sms_whose_absence_cannot_be_proven_before_d_yields_to_one_email(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, smtp=["accept"])
    slow, slow_transports = slow_sms(transports, clock, after=70)  # listed only after D (60 s)

    settled = run_until_settled(event.id, slow_transports, clock)
    claim_at = Event.objects.get(pk=event.id).state_entered_at

    assert settled.state == State.EMAIL_ACCEPTED
    assert sms_count(simulator, event.id) == 0
    assert Claim.objects.get(event=event, channel=Channel.SMS).attempts == 1
    assert claim_at < event.created_at + policy.sms_budget + timedelta(seconds=5)

    # Twilio finishes the first create after all, and tells the event's own callback URL.
    clock.advance(70)
    slow.finish_processing()
    return_late_receipt(event, slow.sids[0])

    assert (sms_count(simulator, event.id), email_count(simulator, event.id)) == (1, 1)
    assert Claim.objects.get(event=event, channel=Channel.SMS).state == ClaimState.DELIVERED
    assert Event.objects.get(pk=event.id).state == State.EMAIL_ACCEPTED
    assert tally(tallies.LATE_SMS_ACCEPTANCES) == 1


class ListedAtTheStart:
    """Twilio lookups that take ``takes`` seconds (within our call's bound) and list the messages
    as they were when the call came in. The message still being created is finished half a second
    after the list was read by the lookup that straddles ``proven_at``, the moment absence becomes
    provable: legal for a provider (within the horizon), and missing from that lookup's answer."""

    def __init__(self, slow, clock, *, takes, proven_at):
        self._slow, self._clock, self._takes, self._proven_at = slow, clock, takes, proven_at
        self.absence_horizon = slow.absence_horizon
        self.straddled = False

    def submit(self, message):
        return self._slow.submit(message)

    def fetch(self, provider_ref):
        return self._slow.fetch(provider_ref)

    def find(self, message, since, neighbours):
        started = self._clock.now()
        found = self._slow.find(message, since, neighbours)
        self._clock.advance(0.5)
        if started < self._proven_at < started + timedelta(seconds=self._takes):
            self.straddled = True
            self._slow.finish_now()
        self._clock.advance(self._takes - 0.5)
        return found


@pytest.mark.parametrize("takes", [9, 13, 15])
def test_a_lookup_that_straddles_the_horizon_proves_nothing_it_did_not_see(policy, clock, simulator, transports, takes):
    event = scripted_event(simulator, clock)
    horizon = timedelta(seconds=5)
    # Our submit gives up after 18 s; Twilio creates the message only while the lookup answers.
    slow = SlowTwilio(transports.sms, clock, accept_after=10_000, timeout=18, horizon=horizon)
    proven_at = event.created_at + call_bound(Channel.SMS) + horizon
    lookups = ListedAtTheStart(slow, clock, takes=takes, proven_at=proven_at)
    assert takes < call_bound(Channel.SMS).total_seconds()

    run_until_settled(event.id, Transports(lookups, transports.email), clock)
    slow.finish_now()  # whatever Twilio still had in hand is created now

    assert lookups.straddled
    assert sms_count(simulator, event.id) == 1  # the one created while the lookup was answering
    assert Claim.objects.get(event=event, channel=Channel.SMS).attempts == 1


def return_late_receipt(event, sid):
    assert post_status(Client(), event.id, "delivered", sid=sid).status_code == 204


def tally(name):
    return sum(Tally.objects.filter(name=name).values_list("value", flat=True))


@given(
    started=st.integers(min_value=0, max_value=600),
    elapsed=st.floats(min_value=20, max_value=600),
    took=st.floats(min_value=0, max_value=20),
    proof_after=st.integers(min_value=1, max_value=120),
)
def test_not_listed_proves_absence_only_if_the_list_was_read_past_the_horizon(started, elapsed, took, proof_after):
    begun = T0 + timedelta(seconds=started)
    now = begun + timedelta(seconds=elapsed)
    horizon = timedelta(seconds=proof_after)

    looked = now - timedelta(seconds=took)  # the list was read when the lookup began

    seen = plan.not_listed(
        begun, looked, now, proof_after=horizon, first_wait=timedelta(seconds=2), longest_wait=timedelta(seconds=10)
    )

    if looked >= begun + horizon:
        assert seen.normalized == Normalized.TRANSIENT_ERROR  # absent: the claim may be sent again
    else:
        assert seen.normalized == Normalized.UNKNOWN_OUTCOME  # unresolved: never sent again
        assert seen.retry_at is not None
        assert now <= seen.retry_at <= max(now, begun + horizon)  # at once if provable by now
        assert seen.retry_at - now <= timedelta(seconds=10)


# A relay slower than the lease at every step, each reply inside the read timeout.
REPLY_DELAY = 0.4
READ_TIMEOUT = 0.5
DEADLINE = 3.0


@pytest.fixture
def slow_relay(simulator, transports, settings):
    # After ``transports``, which sets the SMTP settings of its own.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", simulator.smtp_port, False
    settings.EMAIL_TIMEOUT, settings.EMAIL_SEND_DEADLINE = READ_TIMEOUT, DEADLINE
    settings.NOTIFY_LEASE_MARGIN = timedelta(seconds=1)
    simulator.control.pace_smtp(connections=1, reply_delay=REPLY_DELAY)
    return simulator


def test_an_smtp_exchange_is_cut_at_its_deadline_though_every_reply_beats_the_read_timeout(slow_relay):
    message = EmailMessage("subject", "body", "from@example.org", ["to@example.org"])
    started = time.monotonic()

    with pytest.raises(TransientError) as cut:
        SmtpEmail().send(message, within=timedelta(seconds=1.0))
    took = time.monotonic() - started

    # Without the deadline: greeting, EHLO, MAIL, RCPT, DATA, the dot and QUIT at 0.4 s each,
    # 2.8 s at least; the margin over the 1 s deadline is for a loaded machine, not a target.
    assert took < 2.0
    assert cut.value.raw_status.endswith("_before_data")  # cut before the final dot: nothing handed over
    assert slow_relay.control.counts()["email"] == {}


def test_an_email_to_a_relay_slower_than_the_lease_is_sent_once_though_another_worker_tries_meanwhile(
    slow_relay, transports
):
    # Real time, a one-second lease: the relay's exchange (over 3 s without a deadline) outlasts
    # it and four read timeouts, which is all the lease used to be held for.
    policy = PolicyVersionFactory.create(lease_ttl=timedelta(seconds=1), email_backoff=timedelta(seconds=0.5))
    clock = SystemClock()
    event = scripted_event(slow_relay, clock, create=["reject"], smtp=["accept"])
    rival_reports = []

    def rival():
        # Another worker, woken while the first is still inside its slow call.
        try:
            rival_reports.append(worker.step_event(event.id, transports=transports, clock=clock, owner="rival"))
        finally:
            connection.close()

    timer = threading.Timer(2.2, rival)
    timer.start()
    first = worker.step_event(event.id, transports=transports, clock=clock, owner="first")
    timer.join()
    settled = run_until_settled_in_real_time(event.id, transports, clock)

    assert REPLY_DELAY < settings.EMAIL_TIMEOUT  # no read timeout ever fires
    assert lease_hold(Channel.EMAIL, policy.lease_ttl) >= call_bound(Channel.EMAIL) + settings.NOTIFY_LEASE_MARGIN
    # Neither the claim's settle time nor the lease had run out: slow is not gone.
    assert (rival_reports[0].result, rival_reports[0].actions) in (("not_due", ()), ("busy", ()))
    assert first.actions[:2] == (NextAction.SUBMIT_SMS, NextAction.CLAIM_EMAIL)
    assert settled.state == State.EMAIL_ACCEPTED
    assert email_count(slow_relay, event.id) == 1
    assert not Observation.objects.filter(event=event, normalized=Normalized.POSSIBLE_DUPLICATE).exists()


def run_until_settled_in_real_time(event_id, transports, clock, *, limit=10.0):
    ends = time.monotonic() + limit
    while time.monotonic() < ends:
        worker.step_event(event_id, transports=transports, clock=clock, owner="first")
        event = Event.objects.get(pk=event_id)
        if event.next_action == NextAction.NONE:
            return event
        time.sleep(0.1)
    raise AssertionError(f"{event_id} still open: {event.state}")
