"""The intent to call a provider, committed before the call: a crash mid-call is then settled, never repeated blind."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction

from notify import tallies
from notify.rules import machine
from notify.rules.plan import Loaded
from notify.rules.vocabulary import Channel, ClaimState
from notify.writes.leases import Lease
from notify.writes.reads import load
from notify.writes.sql import database_time, set_clause, statement_cursor, values_of


def begin_submit(
    event_id: str,
    channel: Channel,
    *,
    now: datetime,
    at: datetime | None,
    lease: Lease,
    known: Loaded | None = None,
    hold: timedelta | None = None,
    settle_after: timedelta = timedelta(0),
    segments: int | None = None,
) -> Loaded | None:
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
    base = known if known is not None else load(event_id)
    settle_at = now + settle_after
    after = base._replace(
        claims={**base.claims, channel: machine.ClaimSnapshot(ClaimState.SUBMITTING.value, settle_at)}
    )
    # What is next if this call's outcome is never recorded: settle the claim at settle_at.
    decision = machine.decide(after.event, after.claims, after.policy, now)
    schedule: dict[str, object] = {
        "next_action": decision.action.value,
        "next_action_at": decision.due_at,
        "act_by": decision.act_by,
    }
    # The version check refuses an event changed under a stale read (say, expired by the sweeper meanwhile).
    intent = Intent(
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
    held, moved = _record(intent)
    if not held:
        return None
    if not moved:
        # The claim is already being submitted (or settled): a second submit is refused.
        tallies.add_for_event(tallies.SUPPRESSED_DUPLICATE_CLAIMS, event_id, channel)
        return None
    return after


@dataclass(frozen=True)
class Intent:
    """Move the claim on ``channel`` from claimed to submitting, and the event's schedule with it,
    only while the lease (``token``, unexpired) and the event's ``version`` still hold.

    The lease is extended by ``hold`` and the claim becomes due for settling ``settle_after``
    from now, both on the database's clock (or ``at``, a test's pinned time).
    """

    event_id: str
    channel: Channel
    token: int
    version: int
    at: datetime | None
    hold: timedelta
    settle_after: timedelta
    schedule: Mapping[str, object]
    segments: int | None = None  # an SMS's segment count, recorded on its claim


def _record(intent: Intent) -> tuple[bool, bool]:
    """Commit ``intent``; return (the lease and version held, the claim moved).

    On PostgreSQL one statement: the event row is locked while the lease is checked (a
    take-over waits until the intent is committed, and then finds the claim submitting),
    the claim moves only from claimed, and the schedule only if the claim moved.
    """
    now, now_params = database_time(intent.at)
    settle, settle_params = database_time(intent.at, intent.settle_after)
    expiry, expiry_params = database_time(intent.at, intent.hold)
    held_sql = (
        f"SELECT id FROM notify_event WHERE id = %s AND lease_token = %s AND lease_expires_at > {now} AND version = %s"
    )
    held = [intent.event_id, intent.token, *now_params, intent.version]
    claim_sql = (
        f"UPDATE notify_claim SET state = %s, attempts = attempts + 1, submitted_at = COALESCE(submitted_at, {now}),"
        f" attempt_started_at = {now}, next_attempt_at = {settle}, updated_at = {now},"
        " segments = COALESCE(%s, segments) WHERE channel = %s AND state = %s AND event_id"
    )
    claim = [
        ClaimState.SUBMITTING.value, *now_params, *now_params, *settle_params, *now_params, intent.segments,
        str(intent.channel), ClaimState.CLAIMED.value,
    ]  # fmt: skip
    schedule_sql = f"UPDATE notify_event SET {set_clause(intent.schedule)}, lease_expires_at = {expiry} WHERE id"
    schedule = [*values_of(intent.schedule), *expiry_params]
    if connection.vendor != "postgresql":
        with transaction.atomic(), statement_cursor() as cursor:
            cursor.execute(held_sql, held)
            if cursor.fetchone() is None:
                return False, False
            cursor.execute(f"{claim_sql} = %s", [*claim, intent.event_id])
            if cursor.rowcount != 1:
                return True, False
            cursor.execute(f"{schedule_sql} = %s", [*schedule, intent.event_id])
            return True, True
    sql = (
        f"WITH held AS ({held_sql} FOR UPDATE),"
        f" claimed AS ({claim_sql} IN (SELECT id FROM held) RETURNING event_id),"
        f" scheduled AS ({schedule_sql} IN (SELECT event_id FROM claimed) RETURNING id)"
        " SELECT (SELECT count(*) FROM held), (SELECT count(*) FROM scheduled)"
    )
    with statement_cursor() as cursor:
        cursor.execute(sql, [*held, *claim, *schedule])
        locked, moved = cursor.fetchone()
    return bool(locked), bool(moved)
