"""Retention: vault, raw statuses and observations go when the policy says; timings stay."""

from datetime import timedelta

import time_machine

from notify.models import Event, Observation, Transition, VaultEntry
from notify.rules.plan import ObservationInput
from notify.rules.vocabulary import Channel, Normalized, Source, State
from notify.tasks import purge_retained_data
from notify.writes.moves import record_observation
from notify.writes.purge import Purged, purge
from tests.factories import PolicyVersionFactory, new_event
from tests.notify.helpers import submit

# The factory policy keeps the vault 1 h past expiry, raw statuses 2 days, observations 14 days.


def delivered_event(now):
    event = new_event(now)
    submit(event.id, Channel.SMS, now)
    for normalized, raw in ((Normalized.ACCEPTED, "queued"), (Normalized.DELIVERED, "delivered")):
        observation = ObservationInput(Channel.SMS, Source.CALLBACK, normalized, raw_status=raw)
        record_observation(event.id, observation, now=now + timedelta(seconds=5), actor="test")
    return Event.objects.get(pk=event.id)


def test_the_vault_goes_one_retention_period_after_expiry_and_not_before(db, policy, clock):
    event = delivered_event(clock.now())
    due = event.expires_at + timedelta(hours=1)

    early = purge(due - timedelta(seconds=1))
    on_time = purge(due)

    assert (early.vault_entries, on_time.vault_entries) == (0, 1)
    assert not VaultEntry.objects.filter(event=event).exists()


def test_raw_statuses_are_blanked_and_observations_deleted_but_timings_kept(db, policy, clock):
    event = delivered_event(clock.now())
    observed_at = clock.now() + timedelta(seconds=5)

    after_two_days = purge(observed_at + timedelta(days=2))
    raw_left = set(Observation.objects.filter(event=event).values_list("raw_status", flat=True))
    after_two_weeks = purge(observed_at + timedelta(days=14))

    assert after_two_days == Purged(vault_entries=1, raw_statuses=2, observations=0)
    assert raw_left == {""}
    assert after_two_weeks.observations == 2
    kept = Event.objects.get(pk=event.id)
    assert (kept.state, kept.created_at, kept.state_entered_at) == (
        State.SMS_DELIVERED,
        event.created_at,
        event.state_entered_at,
    )
    history = Transition.objects.filter(event=event).order_by("version")
    assert [(t.to_state, t.at) for t in history] == [
        (State.SMS_REQUESTED, clock.now()),
        (State.SMS_PENDING, observed_at),
        (State.SMS_DELIVERED, observed_at),
    ]


def test_each_event_follows_its_own_policy_version(db, policy, clock):
    long_kept = delivered_event(clock.now())
    policy.__class__.objects.filter(pk=policy.pk).update(status="retired")
    PolicyVersionFactory.create(number=policy.number + 1, vault_retention=timedelta(minutes=5))
    short_kept = delivered_event(clock.now())

    purge(short_kept.expires_at + timedelta(minutes=5))

    assert VaultEntry.objects.filter(event=long_kept).exists()
    assert not VaultEntry.objects.filter(event=short_kept).exists()


def test_the_periodic_task_purges_as_of_the_current_time(db, policy, clock):
    event = delivered_event(clock.now())

    with time_machine.travel(event.expires_at + timedelta(days=30), tick=False):
        result = purge_retained_data.apply().get()

    assert result == {"vault_entries": 1, "raw_statuses": 2, "observations": 2}
