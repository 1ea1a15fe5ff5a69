"""The compare-and-set every write of an event's workflow goes through.

Every write is ``UPDATE ... WHERE id = %s AND version = %s`` (plus ``lease_token`` for
a lease holder), with the rows that hang on it (the observation, the transition, the
claim) written only if it matched. Zero rows updated means someone else won: ``apply``
reloads the event and decides again from what it now is, or stops. Nothing here checks
in Python and then writes unconditionally.
"""

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction

from notify import tallies
from notify.models import claim_key
from notify.rules import machine
from notify.rules.plan import (
    AfterWrite,
    Change,
    ClaimMove,
    Loaded,
    ObservationInput,
    Plan,
    after_write,
    effect_of,
    late_sms,
)
from notify.rules.vocabulary import Channel, ClaimState, Effect
from notify.writes.leases import Lease
from notify.writes.reads import load
from notify.writes.sql import insert, insert_sql, set_clause, statement_cursor, values_of
from notify.writes.wake_ups import WakeUp, send_after_commit, wake_up_needed

log = logging.getLogger("notify.writes")

# Each lost race means another writer moved the event along the table, whose longest
# path is four transitions; more losses than this mean something bypasses the table.
MAX_RACES = 8


class TransitionRaceError(RuntimeError):
    """Raised when a write lost more races than the table allows: a bug, not contention."""


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
    """What a write did and what happens next: its effect, the event after it, and the wake-up sent."""

    effect: Effect
    # The event as this call left it: pass it as ``known`` to the caller's next write
    # to skip that write's read. It may be stale by then; the version guard catches it.
    after: Loaded
    decision: machine.Decision  # what is next for ``after`` (NO_ACTION after a conflict)
    # The wake-up this write sent (after commit): for a lease holder, the one its hand-back
    # recorded; for anyone else, one for now if the write moved the event to something due.
    wake_up: WakeUp | None = None
    handed_back: bool = False  # with a ``HandBack``: whether the write gave the lease back

    @property
    def applied(self) -> bool:
        return self.effect == Effect.APPLIED


@dataclass(frozen=True)
class Write:
    """Everything one transition attempt writes, conditional on its compare-and-set landing."""

    event_id: str
    version: int
    lease_token: int | None
    event_fields: Mapping[str, object]
    observation: Mapping[str, object] | None = None
    transition: Mapping[str, object] | None = None
    new_claim: Mapping[str, object] | None = None
    claim_move: ClaimMove | None = None


def commit(write: Write) -> bool:
    """Apply ``write`` if the event's version (and lease token, for a holder) is still what was read.

    Returns False, having written nothing, when another writer got there first.
    On PostgreSQL the compare-and-set and every dependent row go in one statement
    (data-modifying CTEs that run only if the UPDATE matched), so a transition is one
    round trip and atomic without an explicit transaction. SQLite runs the same
    steps one by one inside a transaction.

    A write refused by a constraint (a callback's retried report meets the observation's
    unique ``(event, dedup_key)``) raises IntegrityError having written nothing, on both
    databases, whether or not the caller holds a transaction: inside one, the statement
    gets a savepoint, so that the refusal does not abort the caller's work.
    """
    if connection.vendor == "postgresql":
        if not connection.in_atomic_block:
            return _commit_in_one_statement(write)
        with transaction.atomic():
            return _commit_in_one_statement(write)
    with transaction.atomic():
        return _commit_step_by_step(write)


def _event_update(write: Write) -> tuple[str, list[Any]]:
    sql = f"UPDATE notify_event SET {set_clause(write.event_fields)} WHERE id = %s AND version = %s"
    params = [*values_of(write.event_fields), write.event_id, write.version]
    if write.lease_token is not None:
        # Fencing: a holder whose lease was taken over (token bumped) must not write.
        sql += " AND lease_token = %s"
        params.append(write.lease_token)
    return sql, params


def _claim_update(write: Write, move: ClaimMove) -> tuple[str, list[Any]]:
    states = ", ".join(["%s"] * len(move.predecessors))
    sql = (
        f"UPDATE notify_claim SET {set_clause(move.fields)} "
        f"WHERE event_id = %s AND channel = %s AND state IN ({states})"
    )
    return sql, [*values_of(move.fields), write.event_id, move.channel.value, *move.predecessors]


def _commit_in_one_statement(write: Write) -> bool:
    update, params = _event_update(write)
    parts = [f"moved AS ({update} RETURNING id)"]

    def insert_if_moved(
        name: str, table: str, row: Mapping[str, object], *, link: str = "", returning: bool = False
    ) -> None:
        # Selecting the values FROM moved inserts the row only if the compare-and-set matched.
        # The observation's id exists only inside this statement: ``link`` ties the transition to it.
        tail = " RETURNING id" if returning else ""
        parts.append(f"{name} AS ({insert_sql(table, row, source='moved', link=link)}{tail})")
        params.extend(values_of(row))

    if write.observation is not None:
        insert_if_moved("evidence", "notify_observation", write.observation, returning=True)
    if write.transition is not None:
        link = "(SELECT id FROM evidence)" if write.observation is not None else ""
        insert_if_moved("history", "notify_transition", write.transition, link=link)
    if write.new_claim is not None:
        insert_if_moved("new_claim", "notify_claim", write.new_claim)
    if write.claim_move is not None:
        claim_sql, claim_params = _claim_update(write, write.claim_move)
        parts.append(f"claim_moved AS ({claim_sql} AND EXISTS (SELECT 1 FROM moved))")
        params += claim_params
    with statement_cursor() as cursor:
        cursor.execute(f"WITH {', '.join(parts)} SELECT count(*) FROM moved", params)
        (landed,) = cursor.fetchone()
    return bool(landed == 1)


def _commit_step_by_step(write: Write) -> bool:
    update, params = _event_update(write)
    with statement_cursor() as cursor:
        cursor.execute(update, params)
        if cursor.rowcount != 1:
            return False
    observation_id = insert("notify_observation", write.observation) if write.observation is not None else None
    if write.transition is not None:
        insert("notify_transition", {**write.transition, "observation_id": observation_id})
    if write.new_claim is not None:
        insert("notify_claim", write.new_claim)
    if write.claim_move is not None:
        claim_sql, claim_params = _claim_update(write, write.claim_move)
        with statement_cursor() as cursor:
            cursor.execute(claim_sql, claim_params)
    return True


def apply(
    event_id: str,
    plan: Plan,
    *,
    now: datetime,
    actor: str,
    lease: Lease | None,
    known: Loaded | None = None,
    observation: ObservationInput | None = None,
    hand_back: HandBack | None = None,
    wakes: bool = True,
) -> Written:
    """Attempt ``plan`` against the current event until one compare-and-set lands.

    ``wakes`` False: a write that the caller follows with another at once (a delivery's implied
    acceptance) sends no wake-up of its own; the last write decides, as a worker would.

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
            loaded = load(event_id)
            if lease is not None and loaded.lease_token != lease.token:
                if observation is not None:
                    evidence = _observation_row(event_id, observation, now, actor, Effect.CONFLICT)
                    insert("notify_observation", evidence)
                return Written(Effect.CONFLICT, loaded, machine.NO_ACTION)
        change = plan(loaded)
        write, planned = _write(event_id, loaded, change, now=now, actor=actor, lease=lease, observation=observation)
        write, wake_up = _hand_back(write, planned, now, hand_back)
        if commit(write):
            if observation is not None and late_sms(loaded, observation):
                tallies.add_for_event(tallies.LATE_SMS_ACCEPTANCES, event_id)
            if change is not None:
                log.info(
                    "transition",
                    extra={
                        "event_id": event_id,
                        "from_state": loaded.event.state,
                        "to_state": change.to_state.value,
                        "version": planned.after.version,
                        "cause": change.cause.value,
                        "actor": actor,
                    },
                )
                if lease is None and wakes and machine.due_now(planned.decision, now):
                    # e.g. a terminal SMS failure reported by callback, or a responder's claim:
                    # the next action is due now, not at the next poll.
                    wake_up = WakeUp(event_id, now)
            send_after_commit(wake_up)
            effect = effect_of(loaded, change, observation)
            handed_back = hand_back is not None and "lease_owner" in write.event_fields
            return Written(effect, planned.after, planned.decision, wake_up, handed_back)
        loaded = None
    raise TransitionRaceError(f"{event_id}: lost {MAX_RACES} races in a row")


def _hand_back(
    write: Write, planned: AfterWrite, now: datetime, hand_back: HandBack | None
) -> tuple[Write, WakeUp | None]:
    """Add the lease's release and the next wake-up to ``write`` if it leaves nothing due now."""
    decision = planned.decision
    if hand_back is None or machine.due_now(decision, now):
        return write, None  # the holder goes on with the next action
    fields = dict(write.event_fields, lease_owner="", lease_expires_at=None)
    wait = machine.wake_after(decision, now, hand_back.longest_wait)
    wake_up = None
    if wait is not None and wake_up_needed(hand_back.pending_wake, at=now + wait, now=now):
        fields["wake_at"] = now + wait
        wake_up = WakeUp(write.event_id, now + wait, recorded=True)
    return dataclasses.replace(write, event_fields=fields), wake_up


def _write(
    event_id: str,
    loaded: Loaded,
    change: Change | None,
    *,
    now: datetime,
    actor: str,
    lease: Lease | None,
    observation: ObservationInput | None,
) -> tuple[Write, AfterWrite]:
    """Describe what one attempt writes (the event's state and schedule, and the rows that
    hang on it), and the event as it will be once that lands with what is next for it."""
    written = after_write(loaded, change, observation, now)
    after, decision = written.after, written.decision
    fields: dict[str, object] = {}
    transition = None
    if change is not None:
        fields |= {"state": change.to_state.value, "version": after.version, "state_entered_at": now}
        transition = {
            "event_id": event_id,
            "from_state": loaded.event.state,
            "to_state": change.to_state.value,
            "version": after.version,
            "cause": change.cause.value,
            "actor": actor,
            "at": now,
        }
    if after.event.last_observation_at != loaded.event.last_observation_at:
        fields["last_observation_at"] = now
    fields |= {"next_action": decision.action.value, "next_action_at": decision.due_at, "act_by": decision.act_by}
    write = Write(
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
    return write, written


def _claim_row(event_id: str, channel: Channel, now: datetime) -> dict[str, object]:
    return {
        "event_id": event_id,
        "channel": channel.value,
        "key": claim_key(channel, event_id),
        "state": ClaimState.CLAIMED.value,
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
        "channel": observation.channel.value,
        "source": observation.source.value,
        "raw_status": observation.raw_status,
        "normalized": observation.normalized.value,
        "provider_time": observation.provider_time,
        "recorded_at": now,
        "attempt_started_at": observation.attempt_started_at,
        "effect": effect.value,
        "actor": actor,
        "note": observation.note,
        "raw_payload": observation.raw_payload,
        "dedup_key": observation.dedup_key,
    }
