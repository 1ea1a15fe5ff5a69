"""A step that raises is a fact about its event, not about the worker.

One event whose step raises before its submit (here: a time zone this worker cannot load, as
after a version skew) is counted on the event and backs off; it never takes another due
event's turn while it backs off, and healthy events go on at their own pace.
"""

import pytest
from django.conf import settings

from notify import worker
from notify.models import Event
from notify.rules.vocabulary import NextAction, State
from tests.notify.helpers import seconds
from tests.notify.workers import run_until_settled, scripted_event, step

pytestmark = pytest.mark.django_db(transaction=True)

UNKNOWN_ZONE = "Mars/Olympus_Mons"


def poisoned(simulator, clock):
    """An event whose messages cannot be rendered on this worker: its time zone is unknown here."""
    event = scripted_event(simulator, clock)
    Event.objects.filter(pk=event.id).update(time_zone=UNKNOWN_ZONE)
    return event


def turn(hint, transports, clock):
    return worker.step_most_urgent(hint, transports=transports, clock=clock, owner="worker-1")


def test_a_poisoned_event_does_not_take_the_turns_of_healthy_events(policy, clock, simulator, transports):
    bad = poisoned(simulator, clock)  # created first: the most urgent of all
    healthy = [scripted_event(simulator, clock) for _ in range(3)]

    reports = [turn(healthy[n % 3].id, transports, clock) for n in range(9)]

    assert {Event.objects.get(pk=event.id).state for event in healthy} == {State.SMS_PENDING}
    assert [report.result for report in reports].count("failed") == 1
    stored = Event.objects.get(pk=bad.id)
    assert (stored.state, stored.step_failures, stored.step_error) == (
        State.SMS_REQUESTED,
        1,
        "ZoneInfoNotFoundError",
    )
    assert stored.next_action_at > clock.now()  # backing off
    assert stored.lease_owner == ""  # the lease went back


def test_a_failed_step_is_woken_again_after_its_backoff(policy, clock, simulator, transports):
    bad = poisoned(simulator, clock)

    report = step(bad.id, transports, clock)

    stored = Event.objects.get(pk=bad.id)
    assert report.result == "failed"
    assert report.wake_after == settings.NOTIFY_STEP_BACKOFF
    assert stored.next_action_at == clock.now() + settings.NOTIFY_STEP_BACKOFF
    assert stored.wake_at == stored.next_action_at  # recorded, for the task to send


def test_each_failure_in_a_row_doubles_the_backoff_up_to_its_cap(policy, clock, simulator, transports):
    bad = poisoned(simulator, clock)
    waits = []
    for _ in range(8):
        waits.append(step(bad.id, transports, clock).wake_after)
        clock.advance(waits[-1].total_seconds())

    first, cap = settings.NOTIFY_STEP_BACKOFF, settings.NOTIFY_STEP_BACKOFF_MAX
    assert waits == [min(cap, first * 2**n) for n in range(8)]
    assert Event.objects.get(pk=bad.id).step_failures == 8


def test_a_poisoned_event_still_expires_on_time(policy, clock, simulator, transports):
    bad = poisoned(simulator, clock)

    settled = run_until_settled(bad.id, transports, clock)

    assert settled.state == State.EXPIRED
    assert clock.now() == settled.expires_at  # the backoff never carried it past its expiry


def test_a_step_that_succeeds_again_clears_the_count(policy, clock, simulator, transports):
    bad = poisoned(simulator, clock)
    step(bad.id, transports, clock)
    Event.objects.filter(pk=bad.id).update(time_zone="Europe/Paris")  # the worker that knows it
    clock.advance(settings.NOTIFY_STEP_BACKOFF.total_seconds())

    report = step(bad.id, transports, clock)

    stored = Event.objects.get(pk=bad.id)
    assert report.actions == (NextAction.SUBMIT_SMS,)
    assert (stored.state, stored.step_failures) == (State.SMS_PENDING, 0)


def test_failures_past_the_threshold_mark_the_event_failing(policy, clock, simulator, transports):
    bad = poisoned(simulator, clock)
    for _ in range(settings.NOTIFY_FAILING_AFTER):
        report = step(bad.id, transports, clock)
        clock.advance(report.wake_after.total_seconds())

    assert Event.objects.failing().filter(pk=bad.id).exists()
    assert seconds(0) < report.wake_after
