"""Replay and the live worker agree: the same timings, driven through the real worker, the provider
simulator and signed callbacks on a fake clock, end the same way as their replay."""

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client

from notify.models import Claim, Event, Transition
from notify.rules.vocabulary import Channel, ClaimState, State
from notify.transports import Transports
from runbook.replay.simulate import simulate
from runbook.replay.timings import Timing
from tests.factories import PolicyVersionFactory, new_event
from tests.notify.helpers import SID, post_status
from tests.notify.workers import SlowTwilio, next_phone, sms_count, step

pytestmark = pytest.mark.django_db(transaction=True)

# Provider calls take no time on a fake clock, so the records' call latencies are zero, except
# an SMS accepted after our client's timeout (10 s): see ``SlowTwilio``.
RECORDS = {
    "delivered quickly": Timing("US", 600, 0, 5, "delivered", 0, "accepted"),
    "never confirmed": Timing("US", 600, 0, None, "none", 0, "accepted"),
    "delivered after the fallback": Timing("US", 600, 0, 90, "delivered", 0, "accepted"),
    "failed, email accepted": Timing("US", 600, 0, 4, "failed", 0, "accepted"),
    "failed, email refused": Timing("US", 600, 0, 4, "failed", 0, "failed"),
    "delivered just before the deadline": Timing("US", 600, 0, 59.5, "delivered", 0, "accepted"),
    "receipt at the deadline": Timing("US", 600, 0, 60, "delivered", 0, "accepted"),
    "short lifetime": Timing("US", 150, 0, None, "none", 0, "accepted"),
    # Listed from 15 s, before absence could be proven (20 s call bound + 60 s horizon).
    "accepted after the timeout": Timing("US", 600, 15, 30, "delivered", 0, "accepted"),
    # Listed only from 70 s, past D (60 s): the email goes at D, the SMS is delivered after it.
    "accepted after the deadline": Timing("US", 600, 70, 90, "delivered", 0, "accepted"),
}


@dataclass(frozen=True)
class Ended:
    """How a record ended: what the agreement compares."""

    final_state: str
    claimed_at: float | None  # seconds after creation
    claims: dict[str, str]  # channel -> claim state
    sms_attempts: int


def live(record: Timing, simulator, transports, clock) -> Ended:
    """Drive one record through the real worker; the receipt arrives as a signed callback."""
    phone = next_phone()
    email = f"subscriber.{phone[1:]}@example.org"
    simulator.control.script_sms(phone, create=["accept"], statuses=[["sent", 0]], callbacks="drop")
    simulator.control.script_email(email, smtp=["accept" if record.email_outcome == "accepted" else "perm_fail"])
    slow = None
    if record.sms_accept_s > settings.TWILIO_TIMEOUT:
        slow = SlowTwilio(transports.sms, clock, accept_after=record.sms_accept_s, timeout=settings.TWILIO_TIMEOUT)
        transports = Transports(slow, transports.email)
    event = new_event(clock.now(), phone=phone, email=email, ttl=timedelta(seconds=record.lifetime_s))
    created = event.created_at
    receipt = created + timedelta(seconds=record.sms_terminal_s) if record.sms_terminal_s is not None else None
    callbacks = Client()
    for _ in range(200):
        current = Event.objects.get(pk=event.id)
        due = current.next_action_at
        if receipt is not None and (due is None or receipt <= due):
            clock.advance(max(0.0, (receipt - clock.now()).total_seconds()))
            sid = Claim.objects.get(event=event, channel=Channel.SMS).provider_ref
            if slow is not None:
                # The message's own callback, though the event may never have heard of it.
                slow.finish_processing()
                sid = slow.sids[0]
            status = "delivered" if record.sms_outcome == "delivered" else "undelivered"
            assert post_status(callbacks, event.id, status, sid=sid or SID).status_code == 204
            receipt = None
            continue
        if due is None:
            break
        clock.advance(max(0.0, (due - clock.now()).total_seconds()))
        step(event.id, transports, clock, max_actions=1)
    claimed = Transition.objects.filter(event=event, to_state=State.EMAIL_CLAIMED).first()
    claims = {claim.channel: claim for claim in Claim.objects.filter(event=event)}
    return Ended(
        final_state=Event.objects.get(pk=event.id).state,
        claimed_at=(claimed.at - created).total_seconds() if claimed else None,
        claims={channel: claim.state for channel, claim in claims.items()},
        sms_attempts=claims[Channel.SMS].attempts,
    )


def replayed(record: Timing, policy) -> Ended:
    outcome = simulate(record, policy)
    claims = {str(channel): state for channel, state in outcome.claims.items()}
    return Ended(outcome.final_state, outcome.claimed_at, claims, outcome.sms_attempts)


@pytest.mark.parametrize("name", list(RECORDS))
def test_replay_and_the_live_worker_end_each_record_the_same_way(name, policy, simulator, transports, clock):
    record = RECORDS[name]
    assert live(record, simulator, transports, clock) == replayed(record, policy)


def test_an_sms_accepted_after_the_timeout_is_one_message_found_by_a_later_lookup(policy, simulator, transports, clock):
    record = RECORDS["accepted after the timeout"]
    ended = live(record, simulator, transports, clock)

    assert ended == replayed(record, policy)
    assert (ended.final_state, ended.sms_attempts) == (State.SMS_DELIVERED, 1)
    assert sms_count(simulator, Event.objects.get().id) == 1


def test_an_sms_not_found_before_the_deadline_yields_to_the_email_and_is_never_resubmitted(
    policy, simulator, transports, clock
):
    record = RECORDS["accepted after the deadline"]
    ended = live(record, simulator, transports, clock)

    assert ended == replayed(record, policy)
    assert (ended.final_state, ended.claimed_at, ended.sms_attempts) == (State.EMAIL_ACCEPTED, 60.0, 1)
    # The late message's delivery settles the claim left submitting: evidence, and no second SMS.
    assert ended.claims == {Channel.SMS: ClaimState.DELIVERED, Channel.EMAIL: ClaimState.ACCEPTED}
    assert sms_count(simulator, Event.objects.get().id) == 1


def test_an_email_claimed_too_late_to_be_useful_is_not_sent(simulator, transports, clock):
    # A reserve shorter than the email step (6 s), which validation refuses and the factory does
    # not check: D = min(0 + 600, 100 - 3) = 97 s, with 3 s of the link left.
    policy = PolicyVersionFactory.create(sms_budget=timedelta(seconds=600), fallback_reserve=timedelta(seconds=3))
    record = Timing("US", 100, 0, None, "none", 0, "accepted")
    ended = live(record, simulator, transports, clock)

    assert ended == replayed(record, policy)
    assert (ended.final_state, ended.claimed_at) == (State.EMAIL_FAILED, 97.0)
    assert ended.claims[Channel.EMAIL] == ClaimState.FAILED
    assert simulator.control.counts()["email"] == {}
