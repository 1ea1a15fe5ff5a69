"""Replay and the live worker agree: the same timings, driven through the real worker, the provider
simulator and signed callbacks on a fake clock, end the same way as their replay."""

from datetime import timedelta

import pytest
from django.test import Client

from notify.models import Claim, Event, Transition
from notify.states import Channel, State
from runbook.replay.simulate import simulate
from runbook.replay.timings import Timing
from tests.factories import new_event
from tests.notify.helpers import post_status
from tests.notify.workers import next_phone, step

pytestmark = pytest.mark.django_db(transaction=True)

# Provider calls take no time on a fake clock, so the records' call latencies are zero.
RECORDS = {
    "delivered quickly": Timing("US", 600, 0, 5, "delivered", 0, "accepted"),
    "never confirmed": Timing("US", 600, 0, None, "none", 0, "accepted"),
    "delivered after the fallback": Timing("US", 600, 0, 90, "delivered", 0, "accepted"),
    "failed, email accepted": Timing("US", 600, 0, 4, "failed", 0, "accepted"),
    "failed, email refused": Timing("US", 600, 0, 4, "failed", 0, "failed"),
    "delivered just before the deadline": Timing("US", 600, 0, 59.5, "delivered", 0, "accepted"),
    "receipt at the deadline": Timing("US", 600, 0, 60, "delivered", 0, "accepted"),
    "short lifetime": Timing("US", 150, 0, None, "none", 0, "accepted"),
}


def live(record: Timing, simulator, transports, clock) -> dict[str, object]:
    """Drive one record through the real worker; the receipt arrives as a signed callback."""
    phone = next_phone()
    email = f"subscriber.{phone[1:]}@example.org"
    simulator.control.script_sms(phone, create=["accept"], statuses=[["sent", 0]], callbacks="drop")
    simulator.control.script_email(email, smtp=["accept" if record.email_outcome == "accepted" else "perm_fail"])
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
            status = "delivered" if record.sms_outcome == "delivered" else "undelivered"
            assert post_status(callbacks, event.id, status, sid=sid).status_code == 204
            receipt = None
            continue
        if due is None:
            break
        clock.advance(max(0.0, (due - clock.now()).total_seconds()))
        step(event.id, transports, clock, max_actions=1)
    claim = Transition.objects.filter(event=event, to_state=State.EMAIL_CLAIMED).first()
    return {
        "final_state": Event.objects.get(pk=event.id).state,
        "claimed_at": (claim.at - created).total_seconds() if claim else None,
    }


@pytest.mark.parametrize("name", list(RECORDS))
def test_replay_and_the_live_worker_end_each_record_the_same_way(name, policy, simulator, transports, clock):
    record = RECORDS[name]
    replayed = simulate(record, policy)
    assert live(record, simulator, transports, clock) == {
        "final_state": replayed.final_state,
        "claimed_at": replayed.claimed_at,
    }
