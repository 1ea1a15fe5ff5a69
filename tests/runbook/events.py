"""Events put into a given state through the real transition functions (never by writing ``state``)."""

from notify.rules import plan
from notify.rules.vocabulary import Cause, Channel, Normalized, Source, State
from notify.writes import moves
from tests.factories import new_event
from tests.notify.helpers import submit

WORKER = "worker:host-1:42"


def observe(event_id, normalized, now, *, channel=Channel.SMS, source=Source.POLL, raw_status="", payload=""):
    observation = plan.ObservationInput(
        channel=channel, source=source, normalized=normalized, raw_status=raw_status, raw_payload=payload
    )
    return moves.record_observation(event_id, observation, now=now, actor=WORKER)


def record(event_id, observation: plan.ObservationInput, now):
    """Record an observation exactly as the worker built it (its own status word and note included)."""
    return moves.record_observation(event_id, observation, now=now, actor=WORKER)


def sms_submitting(clock, **fields):
    """Create an event whose SMS submit began and has no outcome yet (its claim is submitting)."""
    event = new_event(clock.now(), **fields)
    submit(event.id, Channel.SMS, clock.now())
    return event


def event_in(state: State, clock, **fields):
    """Create an event now and move it to ``state`` along the table (``expired`` excepted: that takes time)."""
    event = new_event(clock.now(), **fields)
    now = clock.now()
    if state in (State.SMS_PENDING, State.SMS_DELIVERED):
        observe(event.id, Normalized.ACCEPTED, now, source=Source.SUBMIT, raw_status="queued")
    if state == State.SMS_DELIVERED:
        observe(event.id, Normalized.DELIVERED, now, source=Source.CALLBACK, raw_status="delivered")
    email_states = (State.EMAIL_CLAIMED, State.EMAIL_ACCEPTED, State.EMAIL_FAILED)
    if state == State.SMS_FAILED or state in email_states:
        observe(event.id, Normalized.REJECTED, now, source=Source.SUBMIT, raw_status="21610")
    if state in email_states:
        moves.claim_email_fallback(event.id, now=now, actor=WORKER, cause=Cause.OBSERVATION)
    if state in (State.EMAIL_ACCEPTED, State.EMAIL_FAILED):
        outcome = Normalized.ACCEPTED if state == State.EMAIL_ACCEPTED else Normalized.REJECTED
        observe(event.id, outcome, now, channel=Channel.EMAIL, source=Source.SUBMIT, raw_status="250")
    event.refresh_from_db()
    assert event.state == state
    return event
