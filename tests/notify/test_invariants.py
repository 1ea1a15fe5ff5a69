"""The invariant checker finds each kind of violation, and nothing in a clean history."""

import json
from datetime import timedelta

import pytest

from notify import invariants
from notify.messages import message_id
from notify.models import Claim, Event, Observation, Transition, claim_key
from notify.rules import plan
from notify.rules.vocabulary import Cause, Channel, Normalized, Source, State
from notify.writes import moves
from tests.factories import new_event

GRACE = timedelta(seconds=10)


def kinds(found):
    return sorted(violation.kind for violation in found)


def observe(event, normalized, now, channel=Channel.SMS):
    observation = plan.ObservationInput(channel, Source.CALLBACK, normalized)
    moves.record_observation(event.id, observation, now=now, actor="test")


def test_a_clean_history_has_no_violation(policy, clock):
    event = new_event(clock.now())
    observe(event, Normalized.ACCEPTED, clock.now())
    observe(event, Normalized.TERMINAL_FAILURE, clock.now())
    moves.claim_email_fallback(event.id, now=clock.now(), actor="test", cause=Cause.OBSERVATION)
    observe(event, Normalized.ACCEPTED, clock.now(), channel=Channel.EMAIL)
    provider = invariants.ProviderCounts(sms={event.id: 1}, email={message_id(event.id, policy.email_from): 1})
    assert invariants.check(now=clock.now(), grace=GRACE, provider=provider) == []


def test_it_finds_a_version_gap_and_a_state_without_its_transition(policy, clock):
    event = new_event(clock.now())
    Transition.objects.create(
        event=event, from_state=State.SMS_REQUESTED, to_state=State.SMS_PENDING, version=3, cause="observation",
        actor="bypass", at=clock.now(),
    )  # fmt: skip
    assert kinds(invariants.check(now=clock.now(), grace=GRACE)) == ["state_without_transition", "version_gap"]


def test_it_finds_a_move_outside_the_table_and_a_backward_one(policy, clock):
    event = new_event(clock.now())
    observe(event, Normalized.ACCEPTED, clock.now())
    observe(event, Normalized.DELIVERED, clock.now())
    Transition.objects.create(
        event=event, from_state=State.SMS_DELIVERED, to_state=State.SMS_PENDING, version=4, cause="observation",
        actor="bypass", at=clock.now(),
    )  # fmt: skip
    other = new_event(clock.now())
    Transition.objects.create(
        event=other, from_state=State.SMS_PENDING, to_state=State.SMS_REQUESTED, version=2, cause="observation",
        actor="bypass", at=clock.now(),
    )  # fmt: skip
    found = invariants.check(now=clock.now(), grace=GRACE)
    assert ("outside_table", event.id) in {(v.kind, v.event_id) for v in found}
    assert ("broken_chain", other.id) in {(v.kind, v.event_id) for v in found}


def test_it_finds_a_claim_without_its_transition(policy, clock):
    event = new_event(clock.now())
    Claim.objects.create(
        event=event, channel=Channel.EMAIL, key=claim_key(Channel.EMAIL, event.id), created_at=clock.now(),
        updated_at=clock.now(),
    )  # fmt: skip
    assert kinds(invariants.check(now=clock.now(), grace=GRACE)) == ["claim_without_transition"]


def test_it_finds_an_event_left_open_past_its_expiry(policy, clock):
    new_event(clock.now(), ttl=timedelta(seconds=600))
    assert invariants.check(now=clock.now() + timedelta(seconds=605), grace=GRACE) == []
    late = invariants.check(now=clock.now() + timedelta(seconds=611), grace=GRACE)
    assert kinds(late) == ["open_after_expiry"]


def test_it_finds_duplicate_sms_and_unexplained_emails(policy, clock):
    event = new_event(clock.now())
    email_key = message_id(event.id, policy.email_from)
    found = invariants.check(
        now=clock.now(), grace=GRACE, provider=invariants.ProviderCounts(sms={event.id: 2}, email={email_key: 2})
    )
    assert kinds(found) == ["duplicate_sms", "unexplained_email"]


def test_a_second_email_after_a_recorded_unknown_outcome_is_explained(policy, clock):
    event = new_event(clock.now())
    Observation.objects.create(
        event=event, channel=Channel.EMAIL, source=Source.SUBMIT, normalized=Normalized.UNKNOWN_OUTCOME,
        recorded_at=clock.now(),
    )  # fmt: skip
    email_key = message_id(event.id, policy.email_from)
    provider = invariants.ProviderCounts(sms={}, email={email_key: 2})
    assert invariants.check(now=clock.now(), grace=GRACE, provider=provider) == []


def test_a_second_email_after_a_lost_sender_is_reported_as_a_possible_duplicate_not_explained(policy, clock):
    event = new_event(clock.now())
    Observation.objects.create(
        event=event, channel=Channel.EMAIL, source=Source.RECOVERY, normalized=Normalized.POSSIBLE_DUPLICATE,
        raw_status="holder_lost", recorded_at=clock.now(),
    )  # fmt: skip
    email_key = message_id(event.id, policy.email_from)

    once = invariants.check(now=clock.now(), grace=GRACE, provider=invariants.ProviderCounts({}, {email_key: 1}))
    twice = invariants.check(now=clock.now(), grace=GRACE, provider=invariants.ProviderCounts({}, {email_key: 2}))
    thrice = invariants.check(now=clock.now(), grace=GRACE, provider=invariants.ProviderCounts({}, {email_key: 3}))

    assert once == []
    assert kinds(twice) == ["possible_duplicate_email"]
    assert invariants.failures(twice) == []
    assert kinds(invariants.failures(thrice)) == ["unexplained_email"]


@pytest.mark.parametrize("hours", [None, 1])
def test_the_command_prints_the_violations_and_fails(policy, hours, capsys):
    from django.core.management import call_command

    from plumbing.clock import system_clock

    event = new_event(system_clock.now())  # the command looks back from the real now
    Event.objects.filter(pk=event.id).update(state=State.SMS_DELIVERED)  # a write that bypassed the table
    args = ["check_invariants"] + ([f"--since-hours={hours}"] if hours else [])
    with pytest.raises(SystemExit) as exit_code:
        call_command(*args)
    assert exit_code.value.code == 1
    assert '"kind": "state_without_transition"' in capsys.readouterr().out


def test_the_command_reads_the_providers_counts_from_a_file(policy, capsys, tmp_path):
    from django.core.management import call_command

    from plumbing.clock import system_clock

    event = new_event(system_clock.now())
    counts = tmp_path / "counts.json"
    counts.write_text(json.dumps({"sms": {event.id: 2}, "email": {}}))
    with pytest.raises(SystemExit):
        call_command("check_invariants", f"--provider-counts={counts}")
    assert '"kind": "duplicate_sms"' in capsys.readouterr().out


def test_the_command_refuses_a_counts_file_it_cannot_read(policy, tmp_path):
    from django.core.management import CommandError, call_command

    counts = tmp_path / "counts.json"
    counts.write_text('{"sms": {}}')
    with pytest.raises(CommandError, match=r"--provider-counts .*counts\.json: 'email'"):
        call_command("check_invariants", f"--provider-counts={counts}")
