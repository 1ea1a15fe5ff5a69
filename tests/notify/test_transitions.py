"""Applying observations, claims and expiry: evidence is kept, nothing moves backward."""

from notify.models import Claim, Event, Observation, Transition
from notify.rules.vocabulary import Cause, Channel, ClaimState, Effect, NextAction, Normalized, Source, State
from notify.writes.moves import refresh_schedule
from tests.factories import new_event
from tests.notify.helpers import claim, drive_to, observe, seconds


def sms_claim(event):
    return Claim.objects.get(event=event, channel=Channel.SMS)


def test_it_stores_a_duplicate_receipt_as_evidence_without_a_second_transition(db, policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())

    first = observe(event.id, Channel.SMS, Normalized.DELIVERED, clock.now() + seconds(3))
    second = observe(event.id, Channel.SMS, Normalized.DELIVERED, clock.now() + seconds(4))

    assert (first.effect, second.effect) == (Effect.APPLIED, Effect.LATE)
    delivered = Observation.objects.filter(event=event, normalized=Normalized.DELIVERED)
    assert [o.effect for o in delivered.order_by("id")] == [Effect.APPLIED, Effect.LATE]
    assert Transition.objects.filter(event=event, to_state=State.SMS_DELIVERED).count() == 1


def test_it_keeps_a_late_sms_delivery_after_the_email_claim_as_evidence_only(db, policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())
    assert claim(event.id, clock.now() + seconds(61)).applied

    late = observe(event.id, Channel.SMS, Normalized.DELIVERED, clock.now() + seconds(90))

    after = Event.objects.get(pk=event.id)
    assert late.effect == Effect.LATE
    assert after.state == State.EMAIL_CLAIMED
    assert Claim.objects.filter(event=event).count() == 2
    # The claim records the truth the provider reported, so "fallback then late SMS" can be counted.
    assert sms_claim(event).state == ClaimState.DELIVERED


def test_it_does_not_move_back_on_a_receipt_that_arrives_out_of_order(db, policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_DELIVERED, clock.now())

    outcome = observe(event.id, Channel.SMS, Normalized.PENDING, clock.now() + seconds(5))

    assert outcome.effect == Effect.LATE
    assert Event.objects.get(pk=event.id).state == State.SMS_DELIVERED
    assert sms_claim(event).state == ClaimState.DELIVERED


def test_it_refuses_the_fallback_for_a_pending_sms_before_the_deadline(db, policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())

    too_early = claim(event.id, clock.now() + seconds(59))
    at_deadline = claim(event.id, clock.now() + seconds(60))

    assert (too_early.applied, at_deadline.applied) == (False, True)
    transition = Transition.objects.get(event=event, to_state=State.EMAIL_CLAIMED)
    assert transition.cause == Cause.DEADLINE


def test_it_refuses_the_fallback_once_the_reset_has_expired(db, policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_FAILED, clock.now())

    assert not claim(event.id, event.expires_at).applied
    assert not Claim.objects.filter(event=event, channel=Channel.EMAIL).exists()


def test_the_email_claim_carries_its_stable_key(db, policy, clock):
    event = drive_to(new_event(clock.now()), State.EMAIL_CLAIMED, clock.now())

    email = Claim.objects.get(event=event, channel=Channel.EMAIL)

    assert (email.key, email.state, email.attempts) == (f"reset-email:{event.id}", ClaimState.CLAIMED, 0)


def test_it_refuses_to_expire_an_event_before_its_expiry(db, policy, clock):
    from notify.writes.moves import expire

    event = new_event(clock.now())

    assert not expire(event.id, now=event.expires_at - seconds(1), actor="test").applied
    assert expire(event.id, now=event.expires_at, actor="test").applied


def test_a_transition_stores_the_next_action_and_act_by_for_the_new_state(db, policy, clock):
    event = new_event(clock.now())

    observe(event.id, Channel.SMS, Normalized.TERMINAL_FAILURE, clock.now() + seconds(5))

    after = Event.objects.get(pk=event.id)
    assert after.next_action == NextAction.CLAIM_EMAIL
    assert after.next_action_at == clock.now() + seconds(5)
    # sms_failed reserves select (1s) + email submit (5s) + record (1s).
    assert after.act_by == after.expires_at - seconds(7)


def test_a_terminal_event_leaves_the_sweeper_and_at_risk_indexes(db, policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_DELIVERED, clock.now())

    assert (event.next_action, event.next_action_at, event.act_by) == (NextAction.NONE, None, None)


def test_a_pending_receipt_moves_the_next_poll_without_a_transition(db, policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())

    outcome = observe(event.id, Channel.SMS, Normalized.PENDING, clock.now() + seconds(4), source=Source.POLL)

    after = Event.objects.get(pk=event.id)
    assert outcome.effect == Effect.RECORDED  # evidence kept; the next poll moves, the event does not
    assert after.version == event.version
    assert after.last_observation_at == clock.now() + seconds(4)
    assert (after.next_action, after.next_action_at) == (NextAction.POLL_SMS, clock.now() + seconds(14))


def test_an_acceptance_for_a_claim_never_submitted_is_kept_as_evidence_only(db, policy, clock):
    from notify.rules.plan import ObservationInput
    from notify.writes.moves import record_observation

    event = new_event(clock.now())
    accepted = ObservationInput(Channel.SMS, Source.RECOVERY, Normalized.ACCEPTED, provider_ref="SM123")

    record_observation(event.id, accepted, now=clock.now(), actor="test")

    # CLAIMED -> ACCEPTED is not in the claim's table: only a submitted claim can be accepted.
    assert (sms_claim(event).state, sms_claim(event).provider_ref) == (ClaimState.CLAIMED, "")
    assert Observation.objects.get(event=event).normalized == Normalized.ACCEPTED


def test_refresh_schedule_reflects_the_passing_of_the_fallback_deadline(db, policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())

    refresh_schedule(event.id, now=clock.now() + seconds(61))

    assert Event.objects.get(pk=event.id).next_action == NextAction.CLAIM_EMAIL


def test_a_write_from_a_known_event_skips_the_read(db, policy, clock):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    event = drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())
    first = observe(event.id, Channel.SMS, Normalized.PENDING, clock.now() + seconds(2))

    with CaptureQueriesContext(connection) as queries:
        second = transitions_observe_known(event.id, Normalized.DELIVERED, clock.now() + seconds(3), first.after)

    assert second.applied
    assert not any("FROM notify_event e" in query["sql"] for query in queries.captured_queries)
    assert (second.after.version, second.after.event.state) == (event.version + 1, State.SMS_DELIVERED)


def test_a_stale_known_event_costs_one_retry_and_nothing_else(db, policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())
    seen = observe(event.id, Channel.SMS, Normalized.PENDING, clock.now() + seconds(2)).after
    # Someone else moves the event on after `seen` was taken.
    assert observe(event.id, Channel.SMS, Normalized.TERMINAL_FAILURE, clock.now() + seconds(3)).applied

    late = transitions_observe_known(event.id, Normalized.DELIVERED, clock.now() + seconds(4), seen)

    after = Event.objects.get(pk=event.id)
    assert late.effect == Effect.LATE
    assert (after.state, after.version) == (State.SMS_FAILED, event.version + 1)
    assert late.after.version == after.version


def transitions_observe_known(event_id, normalized, now, known):
    from notify.rules.plan import ObservationInput
    from notify.writes.moves import record_observation

    observation = ObservationInput(Channel.SMS, Source.CALLBACK, normalized)
    return record_observation(event_id, observation, now=now, actor="test", known=known)
