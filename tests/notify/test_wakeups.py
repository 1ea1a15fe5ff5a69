"""Wake-up hints: at most one pending per event, the earliest, so duplicate chains die out."""

from datetime import timedelta

import pytest
import time_machine

from notify.models import Event
from notify.writes import sweeper, wake_ups
from plumbing.clock import current_clock
from tests.factories import new_event
from tests.notify.helpers import seconds


@pytest.fixture
def sent(monkeypatch):
    # The broker is the boundary: record what would be put on it.
    messages = []

    def send(event_id: str, countdown: float = 0.0) -> bool:
        messages.append((event_id, countdown))
        return True  # it went

    monkeypatch.setattr(wake_ups, "publish", send)
    return messages


@pytest.fixture
def event(policy, clock):
    with time_machine.travel(clock.now(), tick=False):
        yield new_event(clock.now())


def wake(event, countdown, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        wake_ups.send_after_commit(wake_ups.WakeUp(event.id, current_clock().now() + timedelta(seconds=countdown)))


def test_a_wake_up_is_sent_and_recorded_as_pending(event, clock, sent, django_capture_on_commit_callbacks):
    with time_machine.travel(clock.now(), tick=False):
        wake(event, 5, django_capture_on_commit_callbacks)

    assert sent == [(event.id, 5)]
    assert Event.objects.get(pk=event.id).wake_at == clock.now() + timedelta(seconds=5)


def test_a_later_wake_up_is_not_sent_while_an_earlier_one_is_pending(
    event, clock, sent, django_capture_on_commit_callbacks
):
    with time_machine.travel(clock.now(), tick=False):
        wake(event, 5, django_capture_on_commit_callbacks)
        wake(event, 8, django_capture_on_commit_callbacks)
        wake(event, 5, django_capture_on_commit_callbacks)

    assert sent == [(event.id, 5)]


def test_an_earlier_wake_up_is_sent_and_becomes_the_pending_one(event, clock, sent, django_capture_on_commit_callbacks):
    with time_machine.travel(clock.now(), tick=False):
        wake(event, 5, django_capture_on_commit_callbacks)
        wake(event, 0, django_capture_on_commit_callbacks)

    assert sent == [(event.id, 5), (event.id, 0)]
    assert Event.objects.get(pk=event.id).wake_at == clock.now()


def test_once_the_pending_wake_up_is_due_the_next_one_is_sent(event, clock, sent, django_capture_on_commit_callbacks):
    with time_machine.travel(clock.now(), tick=False):
        wake(event, 5, django_capture_on_commit_callbacks)
    with time_machine.travel(clock.now() + timedelta(seconds=5), tick=False):
        wake(event, 10, django_capture_on_commit_callbacks)

    assert sent == [(event.id, 5), (event.id, 10)]


def test_a_wake_up_recorded_and_not_sent_is_forgotten_for_the_sweeper(policy, clock):
    # Recorded as pending and never sent (the broker did not take it), a wake-up kept the sweeper
    # off the event until NOTIFY_SWEEP_REDELIVER_AFTER past it, with no hint on its way.
    event = new_event(clock.now())
    recorded = clock.now() + seconds(5)
    Event.objects.filter(pk=event.id).update(wake_at=recorded)

    wake_ups.forget([event.id], at=clock.now())  # not this one's: another, sent since, is kept
    kept = Event.objects.get(pk=event.id).wake_at
    wake_ups.forget([event.id], at=recorded)

    assert kept == recorded
    assert Event.objects.get(pk=event.id).wake_at is None
    swept = sweeper.sweep(
        clock.now(), enqueue=lambda _: True, forget=lambda _: None, batch=10, redeliver_after=seconds(10)
    )
    assert swept.enqueued == 1  # due again for the sweeper at once
