"""The one place that writes an event's workflow state, claims and leases.

Every write is a compare-and-set: ``UPDATE ... WHERE id = %s AND version = %s``
(plus ``lease_token`` for a lease holder). Zero rows updated means someone else
won: the loop in ``_apply`` reloads the event and decides again from what it now
is, or stops. Nothing here checks in Python and then writes unconditionally.
"""

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from notify import rows, tallies
from notify.models import claim_key
from notify.rules import machine
from notify.rules.machine import claim_state_of, plain, state_of
from notify.rules.vocabulary import Cause, Channel, ClaimState, Effect, Normalized, Source, State

log = logging.getLogger("notify.transitions")

# Each lost race means another writer moved the event along the table, whose longest
# path is four transitions; more losses than this mean something bypasses the table.
MAX_RACES = 8


@dataclass(frozen=True)
class Lease:
    owner: str
    token: int


@dataclass(frozen=True)
class HandBack:
    """Give the lease back in the write that leaves nothing due now, with the event's next wake-up.

    A worker's step ends with that write most of the time (a poll's receipt, a submit's
    answer): releasing in the same statement saves the step one more write and its commit.
    """

    pending_wake: datetime | None  # when the event's pending wake-up is due, as the step read it
    longest_wait: timedelta  # the wake-up is never further off than this (a poll interval)


@dataclass(frozen=True)
class Written:
    result: Effect
    # The event as this call left it: pass it as ``known`` to the caller's next write
    # to skip that write's read. It may be stale by then; the version guard catches it.
    after: rows.Loaded
    # With a ``HandBack``: whether the write gave the lease back, and the wake-up it recorded
    # for the caller to send (None: none needed, an earlier one is pending or nothing is left).
    handed_back: bool = False
    wake_at: datetime | None = None

    @property
    def applied(self) -> bool:
        return self.result == Effect.APPLIED


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


def _change(to_state: State, cause: Cause, claimed_channel: Channel | None = None) -> Change:
    # With tuple.__new__, as after_write builds its values: Change's own __new__ is Python code that
    # compiled callers (config.native) pay a frame for, and a replay plans millions.
    return tuple.__new__(Change, (to_state, cause, claimed_channel))


# What an operation wants, given the event as it is now: a change to attempt, or
# None for "nothing the table allows; keep the evidence only".
Plan = Callable[[rows.Loaded], Change | None]


# What each operation asks of the table. Pure: the writer below and the replay tool
# (runbook/replay) both decide with these, so a replayed event moves exactly as a live one.


def observation_change(loaded: rows.Loaded, observation: ObservationInput) -> Change | None:
    """The transition an observation asks for, if the table allows it from the event's state."""
    target = machine.observation_target(observation.channel, observation.normalized)
    event = loaded.event
    if target is None or target not in machine.allowed_targets(state_of(event.state), event.fallback_available):
        return None
    return _change(target, Cause.OBSERVATION)


def fallback_change(loaded: rows.Loaded, now: datetime, cause: Cause) -> Change | None:
    """The email claim, if the table allows it now (DESIGN rule 4)."""
    if not machine.may_claim_fallback(loaded.event, loaded.policy, now):
        return None
    return _change(State.EMAIL_CLAIMED, cause, Channel.EMAIL)


def expiry_change(loaded: rows.Loaded, now: datetime) -> Change | None:
    """Expiry, once the reset's lifetime is over and the event is not terminal."""
    event = loaded.event
    allowed = machine.allowed_targets(state_of(event.state), event.fallback_available)
    if now < event.expires_at or State.EXPIRED not in allowed:
        return None
    return _change(State.EXPIRED, Cause.DEADLINE)


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

    after: rows.Loaded
    decision: machine.Decision
    claim_move: rows.ClaimMove | None


def after_write(
    loaded: rows.Loaded, change: Change | None, observation: ObservationInput | None, now: datetime
) -> AfterWrite:
    """Apply a change and an observation to the event in memory, and decide what is next."""
    event = loaded.event
    claims: dict[Channel, machine.ClaimSnapshot] = dict(loaded.claims)
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
            moved = (str(claim_move.fields["state"]), claim_move.fields.get("next_attempt_at"))
            claims[observation.channel] = tuple.__new__(machine.ClaimSnapshot, moved)  # as the event below
    # Built with tuple.__new__, the fields in their order: a NamedTuple's own __new__ is a Python
    # function (collections makes it with eval) that compiled code (config.native) pays a frame
    # for, and this runs on every step of the worker and of every replayed record.
    fields = (state, event.created_at, event.expires_at, entered, observed, event.fallback_available)
    after = tuple.__new__(machine.EventSnapshot, fields)
    decision = machine.decide(after, claims, loaded.policy, now)
    loaded_after = tuple.__new__(rows.Loaded, (after, version, loaded.lease_token, loaded.policy, claims))
    return tuple.__new__(AfterWrite, (loaded_after, decision, claim_move))


def record_observation(
    event_id: str,
    observation: ObservationInput,
    *,
    now: datetime,
    actor: str,
    lease: Lease | None = None,
    known: rows.Loaded | None = None,
    hand_back: HandBack | None = None,
) -> Written:
    """Store an observation and apply the transition it asks for, if the table allows it.

    A duplicate, late or out-of-order observation is stored as evidence and moves
    nothing; the channel's claim still records what the provider said (a late SMS
    delivery after the fallback is a fact worth counting).
    """

    def plan(loaded: rows.Loaded) -> Change | None:
        return observation_change(loaded, observation)

    return _apply(
        event_id, plan, now=now, actor=actor, lease=lease, known=known, observation=observation, hand_back=hand_back
    )


def delivery_proves_acceptance(loaded: rows.Loaded) -> bool:
    """Whether an SMS delivery reported now must first be recorded as the acceptance it proves.

    So while the SMS waits for its submit's answer, or for proof either way after an unknown
    outcome (the event may have moved on to the email meanwhile): the delivery settles it.
    """
    sms = loaded.claims.get(Channel.SMS)
    return loaded.event.state == State.SMS_REQUESTED or (sms is not None and sms.state == ClaimState.SUBMITTING)


def record_receipt(
    event_id: str,
    observation: ObservationInput,
    *,
    now: datetime,
    actor: str,
    lease: Lease | None = None,
    known: rows.Loaded | None = None,
    hand_back: HandBack | None = None,
) -> Written:
    """Record a provider's report on a message, as ``record_observation`` does.

    A delivery reported while the SMS still waits for its submit's answer (a receipt
    faster than the response, or a submit whose response was lost) proves the
    acceptance too: that is recorded first, so the delivery then applies (or, if the
    event moved on to the email meanwhile, the claim records both) instead of being
    kept as evidence only.
    """
    if observation.channel == Channel.SMS and observation.normalized == Normalized.DELIVERED:
        # Read once: the delivery's own write below starts from this read too (``known``).
        loaded = known = known if known is not None else rows.load(event_id)
        if delivery_proves_acceptance(loaded):
            implied = observation._replace(
                normalized=Normalized.ACCEPTED,
                note="acceptance implied by a delivery receipt",
                raw_payload="",
                dedup_key="",
            )
            accepted = record_observation(event_id, implied, now=now, actor=actor, lease=lease, known=loaded)
            if accepted.result == Effect.CONFLICT:
                return accepted
            known = accepted.after
    return record_observation(
        event_id, observation, now=now, actor=actor, lease=lease, known=known, hand_back=hand_back
    )


def claim_email_fallback(
    event_id: str,
    *,
    now: datetime,
    actor: str,
    cause: Cause,
    lease: Lease | None = None,
    known: rows.Loaded | None = None,
    seen_version: int | None = None,
) -> Written:
    """Move the event to ``email_claimed`` and insert the email claim, atomically.

    Allowed only from a terminal SMS failure or at/after the fallback deadline
    (``machine.may_claim_fallback``). The claim's unique constraint backs up the
    version guard: even a writer that bypassed the CAS could not insert a second one.
    An operator passes the ``seen_version`` their decision was based on: if the event
    moved since, nothing is claimed and they decide again from what it now is.
    """

    def plan(loaded: rows.Loaded) -> Change | None:
        if seen_version is not None and loaded.version != seen_version:
            return None
        return fallback_change(loaded, now, cause)

    outcome = _apply(event_id, plan, now=now, actor=actor, lease=lease, known=known)
    if not outcome.applied and Channel.EMAIL in outcome.after.claims:
        # Someone asked for a second email claim (a racing worker or responder): refused.
        tallies.add_for_event(tallies.SUPPRESSED_DUPLICATE_CLAIMS, event_id, Channel.EMAIL)
    return outcome


def expire(
    event_id: str, *, now: datetime, actor: str, lease: Lease | None = None, known: rows.Loaded | None = None
) -> Written:
    """Move a non-terminal event past its ``expires_at`` to ``expired``."""

    def plan(loaded: rows.Loaded) -> Change | None:
        return expiry_change(loaded, now)

    return _apply(event_id, plan, now=now, actor=actor, lease=lease, known=known)


def refresh_schedule(event_id: str, *, now: datetime, lease: Lease | None = None) -> Written:
    """Store the event's next action and ``act_by`` as ``decide`` sees them now."""
    return _apply(event_id, lambda loaded: None, now=now, actor="", lease=lease)


def _apply(
    event_id: str,
    plan: Plan,
    *,
    now: datetime,
    actor: str,
    lease: Lease | None,
    known: rows.Loaded | None = None,
    observation: ObservationInput | None = None,
    hand_back: HandBack | None = None,
) -> Written:
    """Attempt ``plan`` against the current event until one compare-and-set lands.

    1. Take the event as the caller last saw it (``known``) or load it with its
       claims; a lease holder whose token was bumped stops (its observation is
       still kept: it is evidence).
    2. Ask ``plan`` for a change; with none, only the schedule (and the time of
       the last observation) is rewritten, still guarded by the version.
    3. Commit the compare-and-set with the observation, the transition row and
       the claim rows that depend on it. If another writer committed since the
       event was read, nothing was written: load it afresh and go to 1. A stale
       ``known`` costs exactly that one retry.
    """
    loaded = known
    for _ in range(MAX_RACES):
        if loaded is None:
            loaded = rows.load(event_id)
            if lease is not None and loaded.lease_token != lease.token:
                if observation is not None:
                    evidence = _observation_row(event_id, observation, now, actor, Effect.CONFLICT)
                    rows.insert("notify_observation", evidence)
                return Written(Effect.CONFLICT, loaded)
        change: Change | None = plan(loaded)  # annotated: mypyc (config.native) cannot infer it
        write, after = _write(event_id, loaded, change, now=now, actor=actor, lease=lease, observation=observation)
        write, handed_back, wake_at = _hand_back(write, after, now, hand_back)
        if rows.commit(write):
            if observation is not None and _late_sms(loaded, observation):
                tallies.add_for_event(tallies.LATE_SMS_ACCEPTANCES, event_id)
            if change is None:
                return Written(effect_of(loaded, change, observation), after, handed_back, wake_at)
            log.info(
                "transition",
                extra={
                    "event_id": event_id,
                    "from_state": loaded.event.state,
                    "to_state": plain(change.to_state),
                    "version": after.version,
                    "cause": plain(change.cause),
                    "actor": actor,
                },
            )
            return Written(Effect.APPLIED, after, handed_back, wake_at)
        loaded = None
    raise rows.TransitionRaceError(f"{event_id}: lost {MAX_RACES} races in a row")


def _hand_back(
    write: rows.Write, after: rows.Loaded, now: datetime, hand_back: HandBack | None
) -> tuple[rows.Write, bool, datetime | None]:
    """Add the lease's release and the next wake-up to ``write`` if it leaves nothing due now."""
    if hand_back is None:
        return write, False, None
    decision = machine.decide(after.event, after.claims, after.policy, now)
    if machine.due_now(decision, now):
        return write, False, None  # the holder goes on with the next action
    fields = dict(write.event_fields, lease_owner="", lease_expires_at=None)
    wait = machine.wake_after(decision, now, hand_back.longest_wait)
    wake_at = None if wait is None else now + wait
    if wake_at is not None and rows.wake_up_needed(hand_back.pending_wake, at=wake_at, now=now):
        fields["wake_at"] = wake_at
    else:
        wake_at = None
    return dataclasses.replace(write, event_fields=fields), True, wake_at


def effect_of(loaded: rows.Loaded, change: Change | None, observation: ObservationInput | None) -> Effect:
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


def _late_sms(loaded: rows.Loaded, observation: ObservationInput) -> bool:
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


def _write(
    event_id: str,
    loaded: rows.Loaded,
    change: Change | None,
    *,
    now: datetime,
    actor: str,
    lease: Lease | None,
    observation: ObservationInput | None,
) -> tuple[rows.Write, rows.Loaded]:
    """Describe what one attempt writes (the event's state and schedule, and the rows that
    hang on it) and the event as it will be once that lands."""
    written = after_write(loaded, change, observation, now)
    after, decision = written.after, written.decision
    fields: dict[str, object] = {}
    transition = None
    if change is not None:
        fields |= {"state": plain(change.to_state), "version": after.version, "state_entered_at": now}
        transition = {
            "event_id": event_id,
            "from_state": loaded.event.state,
            "to_state": plain(change.to_state),
            "version": after.version,
            "cause": plain(change.cause),
            "actor": actor,
            "at": now,
        }
    if after.event.last_observation_at != loaded.event.last_observation_at:
        fields["last_observation_at"] = now
    fields |= {"next_action": plain(decision.action), "next_action_at": decision.due_at, "act_by": decision.act_by}
    write = rows.Write(
        event_id=event_id,
        version=loaded.version,
        lease_token=lease.token if lease is not None else None,
        event_fields=fields,
        observation=(
            _observation_row(event_id, observation, now, actor, effect_of(loaded, change, observation))
            if observation is not None
            else None
        ),
        transition=transition,
        new_claim=(
            _claim_row(event_id, change.claimed_channel, now)
            if change is not None and change.claimed_channel is not None
            else None
        ),
        claim_move=written.claim_move,
    )
    return write, after


def _claim_row(event_id: str, channel: Channel, now: datetime) -> dict[str, object]:
    return {
        "event_id": event_id,
        "channel": plain(channel),
        "key": claim_key(channel, event_id),
        "state": plain(ClaimState.CLAIMED),
        "attempts": 0,
        "provider_ref": "",
        "created_at": now,
        "updated_at": now,
    }


def _observation_row(
    event_id: str, observation: ObservationInput, now: datetime, actor: str, effect: Effect
) -> dict[str, object]:
    return {
        "event_id": event_id,
        "channel": plain(observation.channel),
        "source": plain(observation.source),
        "raw_status": observation.raw_status,
        "normalized": plain(observation.normalized),
        "provider_time": observation.provider_time,
        "recorded_at": now,
        "attempt_started_at": observation.attempt_started_at,
        "effect": plain(effect),
        "actor": actor,
        "note": observation.note,
        "raw_payload": observation.raw_payload,
        "dedup_key": observation.dedup_key,
    }


# The claim states each claim state may be reached from (the claim table read backwards).
_CLAIM_PREDECESSORS: Mapping[ClaimState, tuple[str, ...]] = {
    target: tuple(state.value for state, targets in machine.CLAIM_TRANSITIONS.items() if target in targets)
    for target in ClaimState
}


def _claim_move(loaded: rows.Loaded, observation: ObservationInput, now: datetime) -> rows.ClaimMove | None:
    """Return the claim's move to what the provider reported, if its own table allows one.

    The predecessor set goes into the WHERE clause, so two racing receipts cannot
    both move it and a late one cannot move it backwards. An outcome that leaves the
    claim where it is (an SMS still unknown) only reschedules its next attempt.
    """
    target = machine.OBSERVATION_CLAIM_STATES.get((observation.channel, observation.normalized))
    current = loaded.claims.get(observation.channel)
    if target is None or current is None:
        return None
    fields: dict[str, object] = {"state": plain(target), "updated_at": now}
    if target in (ClaimState.CLAIMED, ClaimState.SUBMITTING):
        fields["next_attempt_at"] = observation.retry_at
    if current.state == target:
        if "next_attempt_at" not in fields:
            return None
        predecessors = [plain(target)]
    elif target in machine.CLAIM_TRANSITIONS[claim_state_of(current.state)]:
        predecessors = list(_CLAIM_PREDECESSORS[target])
    else:
        return None
    if observation.provider_ref:
        fields["provider_ref"] = observation.provider_ref
    return tuple.__new__(rows.ClaimMove, (observation.channel, predecessors, fields))  # as _change


def begin_submit(
    event_id: str,
    channel: Channel,
    *,
    now: datetime,
    at: datetime | None,
    lease: Lease,
    known: rows.Loaded | None = None,
    hold: timedelta | None = None,
    settle_after: timedelta = timedelta(0),
    segments: int | None = None,
) -> rows.Loaded | None:
    """Record the intent to call the provider (claim ``claimed -> submitting``) before calling it.

    Returns the event as it now is, or None when the lease is no longer held, the event
    moved since ``known`` was read, or the claim is not waiting to be sent; the caller
    must then not call the provider. Commit this before the remote call: a worker that
    dies mid-call leaves the claim SUBMITTING, and whoever comes next settles it
    (looks the message up) instead of sending it again.

    ``hold`` (default: the policy's lease) is how long the lease is kept from now, to
    cover the call, and ``settle_after`` when the claim becomes due for settling: no later
    worker may act on the claim while the call could still be in flight. Both are counted
    on the database's clock (``at`` pins it in tests); ``now`` is the caller's reading of
    it, for the schedule. ``segments``: the SMS's segment count, kept on the claim.
    """
    base = known if known is not None else rows.load(event_id)
    settle_at = now + settle_after
    after = base._replace(
        claims={**base.claims, channel: machine.ClaimSnapshot(plain(ClaimState.SUBMITTING), settle_at)}
    )
    # What is next if this call's outcome is never recorded: settle the claim at settle_at.
    decision = machine.decide(after.event, after.claims, after.policy, now)
    schedule: dict[str, object] = {
        "next_action": plain(decision.action),
        "next_action_at": decision.due_at,
        "act_by": decision.act_by,
    }
    # The version check refuses an event changed under a stale read (say, expired by the sweeper meanwhile).
    intent = rows.Intent(
        event_id,
        channel,
        lease.token,
        base.version,
        at,
        hold or base.policy.lease_ttl,
        settle_after,
        schedule,
        segments,
    )
    held, moved = rows.record_intent(intent)
    if not held:
        return None
    if not moved:
        # The claim is already being submitted (or settled): a second submit is refused.
        tallies.add_for_event(tallies.SUPPRESSED_DUPLICATE_CLAIMS, event_id, channel)
        return None
    return after


# The lease functions judge expiry on the database's clock (see ``notify.rows``): ``at`` is
# None in production, or a test's fake time, which stands for the database's.


def take_lease(event_id: str, owner: str, *, at: datetime | None, ttl: timedelta) -> Lease | None:
    """Take the event if its lease is free or expired; return the lease, or None if another holds it."""
    token = rows.take_lease(event_id, owner, ttl=ttl, at=at)
    return None if token is None else Lease(owner=owner, token=token)


def take_most_urgent(owner: str, *, at: datetime | None) -> tuple[rows.StepRead, Lease] | None:
    """Take the most urgent due event whose lease is free (``rows.take_most_urgent``); None if none is due."""
    taken = rows.take_most_urgent(owner, at=at)
    if taken is None:
        return None
    return taken, Lease(owner=owner, token=taken.loaded.lease_token)


def renew_lease(event_id: str, lease: Lease, *, at: datetime | None, ttl: timedelta) -> bool:
    """Extend a lease still held: not expired, not taken over."""
    return rows.renew_lease(event_id, lease.token, ttl=ttl, at=at)


def release_expired_lease(event_id: str, token: int, *, at: datetime | None) -> bool:
    """Free a lease whose holder let it expire; False if it was renewed, taken over or freed.

    ``token`` is the fencing token the caller saw: a lease taken over since then is
    someone else's live lease and stays. The token is bumped, so the stale holder,
    should it come back, can no longer write.
    """
    return rows.release_expired_lease(event_id, token, at=at)


def release_lease(event_id: str, lease: Lease, *, wake_up: tuple[datetime, datetime] | None = None) -> bool:
    """Give the event back; a no-op if the lease was already taken over (see ``rows.release_lease``)."""
    return rows.release_lease(event_id, lease.token, wake_up=wake_up)
