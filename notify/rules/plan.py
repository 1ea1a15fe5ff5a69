"""What a write does to an event, decided in memory: the pure half of every write.

Each operation asks the transition table for a change (``observation_change``,
``fallback_change``, ``expiry_change``); ``after_write`` applies a change and an
observation to the event as it was read and decides what is next. The writer
(``notify.writes``) commits what this says; the replay (``runbook.replay``) runs the same
functions over history, so a replayed event moves exactly as a live one.
"""

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import NamedTuple

from notify.rules import machine
from notify.rules.machine import ClaimSnapshot, EventSnapshot, claim_state_of, state_of
from notify.rules.vocabulary import Cause, Channel, ClaimState, Effect, Normalized, Source, State
from policies.models import PolicyVersion


class Loaded(NamedTuple):
    """An event as one transition attempt sees it."""

    event: EventSnapshot
    version: int
    lease_token: int
    policy: PolicyVersion
    claims: Mapping[Channel, ClaimSnapshot]


class ClaimMove(NamedTuple):
    """Move the event's claim on ``channel`` to new values, only from one of ``predecessors``."""

    channel: Channel
    predecessors: list[str]
    fields: Mapping[str, object]


class ObservationInput(NamedTuple):
    """One piece of evidence, already normalized by a transport adapter."""

    channel: Channel
    source: Source
    normalized: Normalized
    raw_status: str = ""
    provider_time: datetime | None = None
    provider_ref: str = ""
    note: str = ""
    raw_payload: str = ""
    dedup_key: str = ""
    # When the channel's next attempt is due, for outcomes that leave one to make
    # (a transient error, an unknown outcome); None means "as soon as possible".
    retry_at: datetime | None = None
    # For a submit call's answer: when the call began (its latency is kept with the evidence).
    attempt_started_at: datetime | None = None


class Change(NamedTuple):
    """A transition to attempt, and the channel it claims, if any."""

    to_state: State
    cause: Cause
    claimed_channel: Channel | None = None


# What an operation wants, given the event as it is now: a change to attempt, or
# None for "nothing the table allows; keep the evidence only".
Plan = Callable[[Loaded], Change | None]


def observation_change(loaded: Loaded, observation: ObservationInput) -> Change | None:
    """The transition an observation asks for, if the table allows it from the event's state."""
    target = machine.observation_target(observation.channel, observation.normalized)
    event = loaded.event
    if target is None or target not in machine.allowed_targets(state_of(event.state), event.fallback_available):
        return None
    return Change(target, Cause.OBSERVATION)


def fallback_change(loaded: Loaded, now: datetime, cause: Cause) -> Change | None:
    """The email claim, if the table allows it now (DESIGN rule 4)."""
    if not machine.may_claim_fallback(loaded.event, loaded.policy, now):
        return None
    return Change(State.EMAIL_CLAIMED, cause, Channel.EMAIL)


def expiry_change(loaded: Loaded, now: datetime) -> Change | None:
    """Expiry, once the reset's lifetime is over and the event is not terminal."""
    event = loaded.event
    allowed = machine.allowed_targets(state_of(event.state), event.fallback_available)
    if now < event.expires_at or State.EXPIRED not in allowed:
        return None
    return Change(State.EXPIRED, Cause.DEADLINE)


def not_listed(started_at: datetime, looked_at: datetime, now: datetime, *, proof_after: timedelta,
               first_wait: timedelta, longest_wait: timedelta) -> ObservationInput:  # fmt: skip
    """What a lookup that did not list the SMS proves, for a submit that began at ``started_at``.

    A list shows what the provider had when it was read, as the lookup began (``looked_at``),
    not when its answer came (``now``): a message created while a slow answer was on its way
    is not in it. So absence is proven only if ``proof_after`` (our call's bound and the
    provider's processing horizon) had passed since the submit began when the list was read:
    the claim goes back to claimed and is sent again. Before that, nothing: the provider may
    still be creating the message, so the claim stays unresolved and is looked up again, at
    a backoff that grows with the time since the submit, the last look at the moment proof
    is possible (at once, if that moment passed while this answer was on its way). If that
    moment lies past the fallback deadline D, ``machine.decide`` claims the email at D
    instead: never a second SMS.
    """
    proven_at = started_at + proof_after
    if looked_at >= proven_at:
        return ObservationInput(Channel.SMS, Source.RECOVERY, Normalized.TRANSIENT_ERROR, "not_found")
    wait = min(longest_wait, max(first_wait, (now - started_at) / 2))
    note = f"absence provable from {proven_at.isoformat(timespec='seconds')}"
    return ObservationInput(
        Channel.SMS, Source.RECOVERY, Normalized.UNKNOWN_OUTCOME, "not_listed_yet", note=note,
        retry_at=max(now, min(proven_at, now + wait)),
    )  # fmt: skip


NO_USEFUL_LIFE = ObservationInput(
    Channel.EMAIL,
    Source.SUBMIT,
    Normalized.NO_USEFUL_LIFE,
    "no_useful_life",
    note="not sent: the link would expire before the email could be of use",
)


class AfterWrite(NamedTuple):
    """The event after one change and/or observation, before anything is written."""

    after: Loaded
    decision: machine.Decision
    claim_move: ClaimMove | None


def after_write(
    loaded: Loaded, change: Change | None, observation: ObservationInput | None, now: datetime
) -> AfterWrite:
    """Apply a change and an observation to the event in memory, and decide what is next."""
    event = loaded.event
    claims: dict[Channel, ClaimSnapshot] = dict(loaded.claims)
    version, state, entered, observed = loaded.version, event.state, event.state_entered_at, event.last_observation_at
    if change is not None:
        version, state, entered = version + 1, change.to_state, now
        if change.claimed_channel is not None:
            claims[change.claimed_channel] = machine.NEW_CLAIM
    claim_move = None
    if observation is not None:
        if observation.normalized != Normalized.NOTE:
            # An operator's note says nothing about the provider: it must not push back
            # the next poll, which counts from the last real observation.
            observed = now
        claim_move = _claim_move(loaded, observation, now)
        if claim_move is not None:
            next_attempt = claim_move.fields.get("next_attempt_at")
            due = next_attempt if isinstance(next_attempt, datetime) else None
            claims[observation.channel] = ClaimSnapshot(str(claim_move.fields["state"]), due)
    after = EventSnapshot(state, event.created_at, event.expires_at, entered, observed, event.fallback_available)
    decision = machine.decide(after, claims, loaded.policy, now)
    return AfterWrite(Loaded(after, version, loaded.lease_token, loaded.policy, claims), decision, claim_move)


def delivery_proves_acceptance(loaded: Loaded) -> bool:
    """Whether an SMS delivery reported now must first be recorded as the acceptance it proves.

    So while the SMS waits for its submit's answer, or for proof either way after an unknown
    outcome (the event may have moved on to the email meanwhile): the delivery settles it.
    """
    sms = loaded.claims.get(Channel.SMS)
    return loaded.event.state == State.SMS_REQUESTED or (sms is not None and sms.state == ClaimState.SUBMITTING)


def effect_of(loaded: Loaded, change: Change | None, observation: ObservationInput | None) -> Effect:
    """What a write does to the event: moves it, or keeps its evidence (late if the event had moved past it)."""
    if change is not None:
        return Effect.APPLIED
    event = loaded.event
    if observation is not None and machine.evidence_is_late(
        state_of(event.state), event.fallback_available, observation.channel
    ):
        return Effect.LATE
    return Effect.RECORDED


_PROVIDER_HAS_IT = frozenset(
    {Normalized.ACCEPTED, Normalized.PENDING, Normalized.DELIVERED, Normalized.TERMINAL_FAILURE}
)


def late_sms(loaded: Loaded, observation: ObservationInput) -> bool:
    """Whether this report shows an SMS to exist that the event stopped waiting for.

    The submit's outcome was never settled (no proof of presence or absence by D) and the
    event moved on to the email: the message turning up now is evidence, and counted. The
    version guard lets one such report per event be the first, so none is counted twice.
    """
    sms = loaded.claims.get(Channel.SMS)
    return (
        observation.channel == Channel.SMS
        and observation.normalized in _PROVIDER_HAS_IT
        and sms is not None
        and sms.state == ClaimState.SUBMITTING
        and loaded.event.state != State.SMS_REQUESTED
    )


# The claim states each claim state may be reached from (the claim table read backwards).
_CLAIM_PREDECESSORS: Mapping[ClaimState, tuple[str, ...]] = {
    target: tuple(state.value for state, targets in machine.CLAIM_TRANSITIONS.items() if target in targets)
    for target in ClaimState
}


def _claim_move(loaded: Loaded, observation: ObservationInput, now: datetime) -> ClaimMove | None:
    """Return the claim's move to what the provider reported, if its own table allows one.

    The predecessor set goes into the WHERE clause, so two racing receipts cannot
    both move it and a late one cannot move it backwards. An outcome that leaves the
    claim where it is (an SMS still unknown) only reschedules its next attempt.
    """
    target = machine.OBSERVATION_CLAIM_STATES.get((observation.channel, observation.normalized))
    current = loaded.claims.get(observation.channel)
    if target is None or current is None:
        return None
    fields: dict[str, object] = {"state": target.value, "updated_at": now}
    if target in (ClaimState.CLAIMED, ClaimState.SUBMITTING):
        fields["next_attempt_at"] = observation.retry_at
    if current.state == target:
        if "next_attempt_at" not in fields:
            return None
        predecessors = [target.value]
    elif target in machine.CLAIM_TRANSITIONS[claim_state_of(current.state)]:
        predecessors = list(_CLAIM_PREDECESSORS[target])
    else:
        return None
    if observation.provider_ref:
        fields["provider_ref"] = observation.provider_ref
    return ClaimMove(observation.channel, predecessors, fields)
