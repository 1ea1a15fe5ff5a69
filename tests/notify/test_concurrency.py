"""Real concurrency on PostgreSQL: threads with their own connections race on the same rows."""

import itertools
import random
import threading
from collections import Counter
from datetime import timedelta

import pytest

from notify.models import Claim, Event, Transition
from notify.rules import machine
from notify.rules.vocabulary import Cause, Channel, Effect, Normalized, Source, State
from notify.writes import leases
from tests.concurrency import race
from tests.factories import new_event
from tests.notify.helpers import claim, drive_to, observe

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TTL = timedelta(seconds=30)


def test_racing_receipts_and_claims_end_with_exactly_one_email_claim_per_event(policy, clock):
    events = [drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now()) for _ in range(12)]
    after_deadline = clock.now() + timedelta(seconds=61)

    def worker(i):
        rng = random.Random(i)
        applied_claims = 0
        for event in rng.sample(events, len(events)):
            for action in rng.sample(["fail", "claim", "poll", "claim"], 4):
                if action == "fail":
                    observe(event.id, Channel.SMS, Normalized.TERMINAL_FAILURE, after_deadline)
                elif action == "poll":
                    observe(event.id, Channel.SMS, Normalized.PENDING, after_deadline, source=Source.POLL)
                else:
                    applied_claims += claim(event.id, after_deadline, actor=f"worker-{i}").applied
        return applied_claims

    claims_won = race(worker)

    assert sum(claims_won) == len(events)
    per_event = Counter(Claim.objects.filter(channel=Channel.EMAIL).values_list("event_id", flat=True))
    assert per_event == Counter({event.id: 1 for event in events})
    for event in Event.objects.all():
        assert event.state == State.EMAIL_CLAIMED
        versions = list(Transition.objects.filter(event=event).order_by("version").values_list("version", "to_state"))
        assert [v for v, _ in versions] == list(range(1, event.version + 1))
        assert [to for _, to in versions].count(State.EMAIL_CLAIMED) == 1


def test_racing_workers_take_a_lease_exactly_once(policy, clock):
    event = new_event(clock.now())

    taken = race(lambda i: leases.take(event.id, f"worker-{i}", at=clock.now(), ttl=TTL))

    winners = [lease for lease in taken if lease is not None]
    assert len(winners) == 1
    assert Event.objects.get(pk=event.id).lease_owner == winners[0].owner


def test_a_worker_cannot_commit_after_its_expired_lease_was_taken_over(policy, clock):
    event = new_event(clock.now())
    stale = leases.take(event.id, "worker-a", at=clock.now(), ttl=TTL)
    taken_over = threading.Event()
    later = clock.now() + TTL + timedelta(seconds=1)

    def worker(i):
        if i == 0:  # the new owner, on its own connection
            lease = leases.take(event.id, "worker-b", at=later, ttl=TTL)
            taken_over.set()
            return lease
        taken_over.wait(timeout=10)  # the slow old owner comes back after the take-over
        return observe(event.id, Channel.SMS, Normalized.TERMINAL_FAILURE, later, lease=stale)

    new_lease, stale_write = race(worker, count=2)

    assert new_lease is not None
    assert stale_write.effect == Effect.CONFLICT
    assert Event.objects.get(pk=event.id).state == State.SMS_REQUESTED


def test_racing_writers_on_one_event_never_skip_or_repeat_a_version(policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())
    statuses = [Normalized.PENDING, Normalized.DELIVERED, Normalized.TERMINAL_FAILURE]

    def worker(i):
        when = clock.now() + timedelta(seconds=5 + i)
        if i % 4 == 3:
            return claim(event.id, clock.now() + timedelta(seconds=70), cause=Cause.DEADLINE)
        return observe(event.id, Channel.SMS, statuses[i % 3], when)

    outcomes = race(worker)

    after = Event.objects.get(pk=event.id)
    history = list(Transition.objects.filter(event=after).order_by("version"))
    assert [t.version for t in history] == list(range(1, after.version + 1))
    for previous, step in itertools.pairwise(history):
        assert step.from_state == previous.to_state
        assert step.to_state in machine.ALLOWED_TRANSITIONS[State(step.from_state)]
    assert sum(outcome.applied for outcome in outcomes) == after.version - event.version


def test_racing_creations_with_one_client_key_make_one_event(policy, clock):
    from notify.writes.create import create_event
    from tests.factories import reset_request

    request = reset_request(client_key="same-key")

    created = race(lambda i: create_event(request, now=clock.now()))

    assert len({result.event.id for result in created}) == 1
    assert sum(result.created for result in created) == 1
    assert Event.objects.count() == 1
    assert Claim.objects.count() == 1
