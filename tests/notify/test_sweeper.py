"""The sweeper: due events are found again whatever happened to their wake-up."""

from datetime import timedelta
from functools import partial

import pytest

from notify.models import Event, Transition
from notify.rules.vocabulary import State
from notify.writes import leases, sweeper, wake_ups
from tests.concurrency import race
from tests.factories import new_event
from tests.notify.helpers import drive_to, seconds

REDELIVER = timedelta(seconds=10)


def sweep(now, *, batch=100, sent: bool = True):
    enqueued: list[str] = []

    def enqueue(event_id: str) -> bool:
        enqueued.append(event_id)
        return sent

    forget = partial(wake_ups.forget, at=now)  # as tasks.sweep forgets
    swept = sweeper.sweep(now, enqueue=enqueue, forget=forget, batch=batch, redeliver_after=REDELIVER)
    return swept, enqueued


def test_a_due_event_is_enqueued_and_rests_before_it_can_be_enqueued_again(policy, clock):
    event = new_event(clock.now())

    swept, enqueued = sweep(clock.now())
    _, enqueued_again = sweep(clock.now() + seconds(1))

    assert (swept.enqueued, enqueued) == (1, [event.id])
    swept_event = Event.objects.get(pk=event.id)
    # The schedule is left as decided; only the wake-up bookkeeping moves.
    assert (swept_event.wake_at, swept_event.next_action_at) == (clock.now(), event.next_action_at)
    assert enqueued_again == []


def test_an_event_with_a_wake_up_on_its_way_is_left_to_it(policy, clock):
    event = new_event(clock.now())
    Event.objects.filter(pk=event.id).update(wake_at=clock.now() - REDELIVER + seconds(1))

    _, enqueued = sweep(clock.now())

    assert enqueued == []


def test_an_event_whose_wake_up_was_lost_is_enqueued_again_after_the_rest(policy, clock):
    event = new_event(clock.now())
    sweep(clock.now())

    _, enqueued = sweep(clock.now() + REDELIVER)

    assert enqueued == [event.id]


def test_events_whose_wake_up_did_not_go_are_forgotten_once_the_sweep_is_through(policy, clock):
    # The broker hung, or this process paused its sends after a failure. Forgotten at once, they
    # would be the next batch again; forgotten at the end, the next sweep tries them again.
    events = [new_event(clock.now()) for _ in range(3)]

    swept, tried = sweep(clock.now(), batch=1, sent=False)
    _, enqueued = sweep(clock.now() + seconds(2))

    assert (swept.enqueued, sorted(tried)) == (0, sorted(event.id for event in events))  # each tried once
    assert sorted(enqueued) == sorted(event.id for event in events)


def test_expiries_behind_events_whose_wake_up_did_not_go_are_not_held_up(policy, clock):
    # Found in review: a sweep that stopped at the first batch whose wake-up did not go left the
    # events behind it, those past their expiry included, open for as long as the broker failed.
    unsendable = new_event(clock.now())
    expiring = new_event(clock.now() + seconds(1), ttl=seconds(300))

    swept, tried = sweep(expiring.expires_at, batch=1, sent=False)

    assert (tried, swept.expired) == ([unsendable.id], 1)
    assert Event.objects.get(pk=expiring.id).state == State.EXPIRED


def test_an_event_not_yet_due_is_left_alone(policy, clock):
    drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())

    _, enqueued = sweep(clock.now() + policy.poll_interval - seconds(1))

    assert enqueued == []


def test_an_event_held_by_a_live_lease_is_skipped_until_the_lease_expires(policy, clock):
    event = new_event(clock.now())
    leases.take(event.id, "busy-worker", at=clock.now(), ttl=seconds(30))

    _, while_held = sweep(clock.now() + seconds(29))
    _, after_expiry = sweep(clock.now() + seconds(30))

    assert (while_held, after_expiry) == ([], [event.id])


def test_an_event_past_its_expiry_is_expired_by_the_sweeper_itself(policy, clock):
    event = new_event(clock.now())

    swept, enqueued = sweep(event.expires_at)

    assert (swept.expired, enqueued) == (1, [])
    expired = Event.objects.get(pk=event.id)
    assert (expired.state, expired.next_action_at) == (State.EXPIRED, None)
    last = Transition.objects.filter(event=event).latest("version")
    assert (last.to_state, last.actor) == (State.EXPIRED, sweeper.SWEEPER)


def test_terminal_events_are_never_swept(policy, clock):
    drive_to(new_event(clock.now()), State.SMS_DELIVERED, clock.now())

    _, enqueued = sweep(clock.now() + timedelta(days=1))

    assert enqueued == []


def test_a_backlog_larger_than_one_batch_is_swept_in_one_pass(policy, clock):
    events = {new_event(clock.now()).id for _ in range(7)}

    swept, enqueued = sweep(clock.now(), batch=3)

    assert swept.enqueued == 7
    assert set(enqueued) == events


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_sweepers_split_the_due_events_without_overlap(policy, clock):
    events = {new_event(clock.now()).id for _ in range(40)}

    results = race(lambda i: sweep(clock.now(), batch=5)[1])

    swept = [event_id for result in results for event_id in result]
    assert sorted(swept) == sorted(events)
