"""The pure rules: the next action per state, the action budget and the fallback deadline."""

from datetime import timedelta

import pytest

from notify.rules import machine
from notify.rules.machine import ClaimSnapshot, EventSnapshot
from notify.rules.vocabulary import Channel, ClaimState, NextAction, State
from tests.conftest import T0
from tests.factories import PolicyVersionFactory

POLICY = PolicyVersionFactory.build()  # budget 60s, reserve 120s, poll every 10s
EXPIRES = T0 + timedelta(seconds=600)
D = T0 + timedelta(seconds=60)
SMS = {Channel.SMS: ClaimSnapshot(ClaimState.CLAIMED)}


def snapshot(state=State.SMS_REQUESTED, **changes):
    base = EventSnapshot(
        state=state,
        created_at=T0,
        expires_at=EXPIRES,
        state_entered_at=T0,
        last_observation_at=None,
        fallback_available=True,
    )
    return base._replace(**changes)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def test_it_submits_a_requested_sms_before_the_fallback_deadline():
    decision = machine.decide(snapshot(), SMS, POLICY, at(1))
    assert decision == machine.Decision(NextAction.SUBMIT_SMS, T0, EXPIRES - timedelta(seconds=9))


def test_it_recovers_rather_than_resubmits_an_sms_left_submitting():
    claims = {Channel.SMS: ClaimSnapshot(ClaimState.SUBMITTING)}
    assert machine.decide(snapshot(), claims, POLICY, at(5)).action == NextAction.RECOVER_SMS


def test_it_waits_for_a_scheduled_sms_retry():
    claims = {Channel.SMS: ClaimSnapshot(ClaimState.CLAIMED, next_attempt_at=at(20))}
    assert machine.decide(snapshot(), claims, POLICY, at(5)).due_at == at(20)


def test_it_claims_the_fallback_when_an_sms_retry_would_fall_after_the_deadline():
    claims = {Channel.SMS: ClaimSnapshot(ClaimState.CLAIMED, next_attempt_at=at(70))}
    decision = machine.decide(snapshot(), claims, POLICY, at(5))
    assert (decision.action, decision.due_at) == (NextAction.CLAIM_EMAIL, D)


def test_it_claims_the_fallback_for_a_requested_sms_at_the_deadline():
    decision = machine.decide(snapshot(), SMS, POLICY, D)
    assert (decision.action, decision.due_at) == (NextAction.CLAIM_EMAIL, D)


def test_it_polls_a_pending_sms_one_interval_after_the_last_observation():
    event = snapshot(State.SMS_PENDING, state_entered_at=at(3), last_observation_at=at(12))
    decision = machine.decide(event, SMS, POLICY, at(13))
    assert decision == machine.Decision(NextAction.POLL_SMS, at(22), EXPIRES - timedelta(seconds=9))


def test_it_caps_the_next_poll_at_the_fallback_deadline():
    event = snapshot(State.SMS_PENDING, last_observation_at=at(55))
    decision = machine.decide(event, SMS, POLICY, at(56))
    assert (decision.action, decision.due_at) == (NextAction.CLAIM_EMAIL, D)


def test_it_claims_the_fallback_at_once_after_a_terminal_sms_failure():
    event = snapshot(State.SMS_FAILED, state_entered_at=at(7))
    decision = machine.decide(event, SMS, POLICY, at(7))
    assert decision == machine.Decision(NextAction.CLAIM_EMAIL, at(7), EXPIRES - timedelta(seconds=7))


def test_it_submits_a_claimed_email_when_its_attempt_is_due():
    claims = {**SMS, Channel.EMAIL: ClaimSnapshot(ClaimState.CLAIMED, next_attempt_at=at(90))}
    event = snapshot(State.EMAIL_CLAIMED, state_entered_at=at(60))
    decision = machine.decide(event, claims, POLICY, at(80))
    assert decision == machine.Decision(NextAction.SUBMIT_EMAIL, at(90), EXPIRES - timedelta(seconds=6))


@pytest.mark.parametrize("state", [State.SMS_DELIVERED, State.EMAIL_ACCEPTED, State.EMAIL_FAILED, State.EXPIRED])
def test_it_has_nothing_left_to_do_in_a_terminal_state(state):
    assert machine.decide(snapshot(state), SMS, POLICY, at(700)) == machine.NO_ACTION


def test_it_expires_any_open_event_once_expiry_has_passed():
    decision = machine.decide(snapshot(State.SMS_PENDING), SMS, POLICY, EXPIRES)
    assert (decision.action, decision.due_at) == (NextAction.EXPIRE, EXPIRES)


def test_it_schedules_expiry_when_the_next_step_would_come_too_late():
    event = snapshot(State.SMS_PENDING, fallback_available=False, last_observation_at=EXPIRES - timedelta(seconds=3))
    decision = machine.decide(event, SMS, POLICY, EXPIRES - timedelta(seconds=2))
    assert (decision.action, decision.due_at) == (NextAction.EXPIRE, EXPIRES)


def test_without_a_fallback_a_failed_sms_is_terminal():
    event = snapshot(State.SMS_FAILED, fallback_available=False)
    assert machine.decide(event, SMS, POLICY, at(10)) == machine.NO_ACTION
    assert machine.act_by(event, POLICY) is None


def test_without_a_fallback_the_sms_keeps_its_path_past_the_deadline():
    event = snapshot(fallback_available=False)
    decision = machine.decide(event, SMS, POLICY, at(100))
    # Only the SMS steps (poll + record) are reserved: there is no email to leave time for.
    assert decision == machine.Decision(NextAction.SUBMIT_SMS, T0, EXPIRES - timedelta(seconds=3))


def test_the_fallback_deadline_is_the_sms_budget_when_the_reset_lives_long():
    assert machine.fallback_deadline(snapshot(), POLICY) == D


def test_the_fallback_deadline_keeps_the_reserve_when_the_reset_is_short():
    short = snapshot(expires_at=at(150))
    assert machine.fallback_deadline(short, POLICY) == at(30)


def test_the_minimum_lifetime_covers_the_reserve_and_the_whole_path():
    assert machine.minimum_lifetime(POLICY, State.SMS_REQUESTED, True) == timedelta(seconds=120)
    cheap_reserve = PolicyVersionFactory.build(fallback_reserve=timedelta(seconds=6))
    assert machine.minimum_lifetime(cheap_reserve, State.SMS_REQUESTED, True) == timedelta(seconds=9)


def test_the_minimum_lifetime_of_a_single_channel_covers_only_its_own_steps():
    assert machine.minimum_lifetime(POLICY, State.SMS_REQUESTED, False) == timedelta(seconds=3)
    assert machine.minimum_lifetime(POLICY, State.EMAIL_CLAIMED, False) == timedelta(seconds=6)


def test_every_state_but_the_first_is_the_target_of_some_operation():
    # sms_requested is entered only at creation; nothing may lead back to it.
    targets = set(machine.OBSERVATION_TARGETS.values()) | {State.EMAIL_CLAIMED, State.EXPIRED}
    assert targets == set(State) - {State.SMS_REQUESTED}
    assert all(State.SMS_REQUESTED not in allowed for allowed in machine.ALLOWED_TRANSITIONS.values())


@pytest.mark.parametrize("member", [*State])
def test_a_stored_state_or_its_member_finds_the_member(member):
    assert machine.state_of(member.value) is member
    assert machine.state_of(member) is member


@pytest.mark.parametrize("member", [*ClaimState])
def test_a_stored_claim_state_finds_its_member(member):
    assert machine.claim_state_of(member.value) is member
