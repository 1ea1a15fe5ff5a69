"""A callback and a poll racing on real PostgreSQL connections: the version guard absorbs it."""

from datetime import UTC, datetime

import pytest
from django.test import Client

from notify.models import Claim, Event, Observation, Transition
from notify.rules.vocabulary import Channel, Effect, Source, State
from plumbing.clock import FakeClock
from tests.concurrency import race
from tests.notify.helpers import post_status
from tests.notify.workers import scripted_event, sms_count, step

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_delivery_seen_by_poll_and_by_callbacks_at_once_moves_the_event_once(policy, simulator, transports):
    # The callback view reads the system clock: keep the worker's clock beside it.
    clock = FakeClock(datetime.now(UTC))
    event = scripted_event(simulator, clock)
    step(event.id, transports, clock)
    sid = Claim.objects.get(event=event, channel=Channel.SMS).provider_ref
    clock.advance(policy.poll_interval.total_seconds())

    def poll_or_callback(i):
        if i == 0:
            return step(event.id, transports, clock).actions
        return post_status(Client(), event.id, "delivered", sid=sid).status_code

    results = race(poll_or_callback)

    assert results[1:] == [204] * 7
    assert Event.objects.get(pk=event.id).state == State.SMS_DELIVERED
    history = list(Transition.objects.filter(event=event).order_by("version").values_list("version", "to_state"))
    assert history == [(1, State.SMS_REQUESTED), (2, State.SMS_PENDING), (3, State.SMS_DELIVERED)]
    # Seven copies of one callback are one piece of evidence. The poll, if it ran before the
    # callbacks landed, is kept beside it; if after, it found nothing left to do.
    assert Observation.objects.filter(event=event, source=Source.CALLBACK).count() == 1
    assert Observation.objects.filter(event=event, source=Source.POLL).count() <= 1
    assert Observation.objects.filter(event=event, effect=Effect.APPLIED, raw_status="delivered").count() == 1
    assert sms_count(simulator, event.id) == 1
