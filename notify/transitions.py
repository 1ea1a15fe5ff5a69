"""The one place that writes an event's workflow state, claims and leases.

Every write is a compare-and-set: ``UPDATE ... WHERE id = %s AND version = %s``
(plus ``lease_token`` for a lease holder). Zero rows updated means someone else
won: the loop in ``_apply`` reloads the event and decides again from what it now
is, or stops. Nothing here checks in Python and then writes unconditionally.
"""

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from notify import machine
from notify.models import Claim, Event, Observation, Transition, claim_key
from notify.states import Cause, Channel, ClaimState, Normalized, Source, State

# Each lost race means another writer moved the event along the table, whose longest
# path is four transitions; more losses than this mean something bypasses the table.
MAX_RACES = 8


class Result(StrEnum):
    APPLIED = "applied"
    NOT_ALLOWED = "not_allowed"
    LOST_LEASE = "lost_lease"


@dataclass(frozen=True)
class Lease:
    owner: str
    token: int


@dataclass(frozen=True)
class Outcome:
    result: Result
    state: State
    version: int

    @property
    def applied(self) -> bool:
        return self.result == Result.APPLIED


@dataclass(frozen=True)
class ObservationInput:
    """One piece of evidence, already normalized by a transport adapter."""

    channel: Channel
    source: Source
    normalized: Normalized
    raw_status: str = ""
    provider_time: datetime | None = None
    provider_ref: str = ""
    note: str = ""


class TransitionRaceError(RuntimeError):
    """Raised when a write lost more races than the table allows: a bug, not contention."""


@dataclass(frozen=True)
class _Change:
    """A transition to attempt, with the claims as they will be once it lands."""

    to_state: State
    cause: Cause
    claims: Mapping[Channel, machine.ClaimFacts]


# What an operation wants, given the event and its claims as they are now: a change
# to attempt, or None for "nothing the table allows; keep the evidence only".
_Plan = Callable[[Event, Mapping[Channel, Claim]], _Change | None]


def record_observation(
    event_id: str, observation: ObservationInput, *, now: datetime, actor: str, lease: Lease | None = None
) -> Outcome:
    """Store an observation and apply the transition it asks for, if the table allows it.

    A duplicate, late or out-of-order observation is stored as evidence and moves
    nothing; the channel's claim still records what the provider said (a late SMS
    delivery after the fallback is a fact worth counting).
    """
    target = machine.observation_target(observation.channel, observation.normalized)

    def plan(event: Event, claims: Mapping[Channel, Claim]) -> _Change | None:
        if target is None or target not in machine.allowed_targets(State(event.state), event.fallback_available):
            return None
        return _Change(target, Cause.OBSERVATION, claims)

    with transaction.atomic():
        outcome = _apply(event_id, plan, now=now, actor=actor, lease=lease, observation=observation)
        claim_target = machine.OBSERVATION_CLAIM_STATES.get(observation.normalized)
        if claim_target is not None and outcome.result != Result.LOST_LEASE:
            _move_claim(event_id, observation.channel, claim_target, now, provider_ref=observation.provider_ref)
    return outcome


def claim_email_fallback(
    event_id: str, *, now: datetime, actor: str, cause: Cause, lease: Lease | None = None
) -> Outcome:
    """Move the event to ``email_claimed`` and insert the email claim, in one transaction.

    Allowed only from a terminal SMS failure or at/after the fallback deadline
    (``machine.may_claim_fallback``). The claim's unique constraint backs up the
    version guard: even a writer that bypassed the CAS could not insert a second one.
    """

    def plan(event: Event, claims: Mapping[Channel, Claim]) -> _Change | None:
        if not machine.may_claim_fallback(event, event.policy, now):
            return None
        return _Change(State.EMAIL_CLAIMED, cause, {**claims, Channel.EMAIL: machine.NEW_CLAIM})

    with transaction.atomic():
        outcome = _apply(event_id, plan, now=now, actor=actor, lease=lease)
        if outcome.applied:
            Claim.objects.create(
                event_id=event_id,
                channel=Channel.EMAIL,
                key=claim_key(Channel.EMAIL, event_id),
                created_at=now,
                updated_at=now,
            )
    return outcome


def expire(event_id: str, *, now: datetime, actor: str, lease: Lease | None = None) -> Outcome:
    """Move a non-terminal event past its ``expires_at`` to ``expired``."""

    def plan(event: Event, claims: Mapping[Channel, Claim]) -> _Change | None:
        allowed = machine.allowed_targets(State(event.state), event.fallback_available)
        if now < event.expires_at or State.EXPIRED not in allowed:
            return None
        return _Change(State.EXPIRED, Cause.DEADLINE, claims)

    with transaction.atomic():
        return _apply(event_id, plan, now=now, actor=actor, lease=lease)


def refresh_schedule(event_id: str, *, now: datetime, lease: Lease | None = None) -> Outcome:
    """Store the event's next action and ``act_by`` as ``decide`` sees them now."""
    with transaction.atomic():
        return _apply(event_id, lambda event, claims: None, now=now, actor="", lease=lease)


def _apply(
    event_id: str,
    plan: _Plan,
    *,
    now: datetime,
    actor: str,
    lease: Lease | None,
    observation: ObservationInput | None = None,
) -> Outcome:
    """Attempt ``plan`` against the current event until one compare-and-set lands.

    1. Load the event and its claims; a lease holder whose token was bumped stops.
    2. Ask ``plan`` for a change; with none, only the schedule (and the time of
       the last observation) is rewritten, still guarded by the version.
    3. Compare-and-set; on 0 rows another writer committed first: go to 1.
    4. Store the observation (always: it is evidence) and the transition row.
    """
    change: _Change | None = None
    for _ in range(MAX_RACES):
        event = Event.objects.select_related("policy").get(pk=event_id)
        if lease is not None and event.lease_token != lease.token:
            outcome = Outcome(Result.LOST_LEASE, State(event.state), event.version)
            break
        claims = {Channel(claim.channel): claim for claim in Claim.objects.filter(event_id=event_id)}
        change = plan(event, claims)
        if _compare_and_set(event, change, claims, now=now, lease=lease, observed=observation is not None):
            if change is None:
                outcome = Outcome(Result.NOT_ALLOWED, State(event.state), event.version)
            else:
                outcome = Outcome(Result.APPLIED, change.to_state, event.version + 1)
            break
    else:
        raise TransitionRaceError(f"{event_id}: lost {MAX_RACES} races in a row")

    evidence = None
    if observation is not None:
        evidence = Observation.objects.create(
            event_id=event_id,
            channel=observation.channel,
            source=observation.source,
            raw_status=observation.raw_status,
            normalized=observation.normalized,
            provider_time=observation.provider_time,
            recorded_at=now,
            caused_transition=outcome.applied,
            actor=actor,
            note=observation.note,
        )
    if outcome.applied and change is not None:
        Transition.objects.create(
            event_id=event_id,
            from_state=event.state,
            to_state=change.to_state,
            version=outcome.version,
            cause=change.cause,
            actor=actor,
            at=now,
            observation=evidence,
        )
    return outcome


def _compare_and_set(
    event: Event,
    change: _Change | None,
    claims: Mapping[Channel, machine.ClaimFacts],
    *,
    now: datetime,
    lease: Lease | None,
    observed: bool,
) -> bool:
    """Write the new state (if any) and the schedule, only if nobody wrote since ``event`` was read."""
    after = machine.EventSnapshot.of(event)
    fields: dict[str, object] = {}
    if change is not None:
        after = dataclasses.replace(after, state=change.to_state, state_entered_at=now)
        fields |= {"state": change.to_state, "version": event.version + 1, "state_entered_at": now}
        claims = change.claims
    if observed:
        after = dataclasses.replace(after, last_observation_at=now)
        fields["last_observation_at"] = now
    decision = machine.decide(after, claims, event.policy, now)
    fields |= {"next_action": decision.action, "next_action_at": decision.due_at, "act_by": decision.act_by}
    guard = Q(pk=event.pk, version=event.version)
    if lease is not None:
        # Fencing: a holder whose lease was taken over (token bumped) must not write.
        guard &= Q(lease_token=lease.token)
    return Event.objects.filter(guard).update(**fields) == 1


def _move_claim(event_id: str, channel: Channel, target: ClaimState, now: datetime, *, provider_ref: str = "") -> bool:
    """Move a claim to ``target`` if its own table allows it from the claim's current state.

    The predecessor set is in the WHERE clause, so two racing receipts cannot both
    move it and a late one cannot move it backwards.
    """
    predecessors = [state for state, targets in machine.CLAIM_TRANSITIONS.items() if target in targets]
    fields: dict[str, object] = {"state": target, "updated_at": now}
    if provider_ref:
        fields["provider_ref"] = provider_ref
    return Claim.objects.filter(event_id=event_id, channel=channel, state__in=predecessors).update(**fields) == 1


def begin_submit(event_id: str, channel: Channel, *, now: datetime, lease: Lease) -> bool:
    """Record the intent to call the provider (claim ``claimed -> submitting``) before calling it.

    Returns False when the lease was lost or the claim is not waiting to be sent; the
    caller must then not call the provider. Commit this before the remote call: a
    worker that dies mid-call leaves the claim SUBMITTING, and whoever comes next
    recovers (looks the message up) instead of sending it again.
    """
    with transaction.atomic():
        # Lock the event row for the lease check: a take-over waits until this intent
        # is committed, and then finds the claim SUBMITTING.
        held = Event.objects.select_for_update().filter(pk=event_id, lease_token=lease.token).values_list("pk")
        if not list(held):
            return False
        updated = Claim.objects.filter(event_id=event_id, channel=channel, state=ClaimState.CLAIMED).update(
            state=ClaimState.SUBMITTING,
            attempts=F("attempts") + 1,
            submitted_at=Coalesce(F("submitted_at"), Value(now)),
            next_attempt_at=None,
            updated_at=now,
        )
        return updated == 1


def take_lease(event_id: str, owner: str, *, now: datetime, ttl: timedelta) -> Lease | None:
    """Take the event if its lease is free or expired; return the lease, or None if another holds it."""
    with transaction.atomic():
        # The condition and the token bump are one statement: two takers cannot both see
        # the lease free, and the bump fences out whoever held it before.
        taken = (
            Event.objects.filter(pk=event_id)
            .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now))
            .update(lease_owner=owner, lease_expires_at=now + ttl, lease_token=F("lease_token") + 1)
        )
        if taken != 1:
            return None
        # Our UPDATE holds the row lock until commit, so the token we read is the one we wrote.
        token = Event.objects.filter(pk=event_id).values_list("lease_token", flat=True).get()
    return Lease(owner=owner, token=token)


def renew_lease(event_id: str, lease: Lease, *, now: datetime, ttl: timedelta) -> bool:
    """Extend a lease still held: not expired, not taken over."""
    held = Q(pk=event_id, lease_token=lease.token, lease_expires_at__gt=now)
    return Event.objects.filter(held).update(lease_expires_at=now + ttl) == 1


def release_lease(event_id: str, lease: Lease) -> bool:
    """Give the event back; a no-op if the lease was already taken over."""
    return Event.objects.filter(pk=event_id, lease_token=lease.token).update(lease_owner="", lease_expires_at=None) == 1
