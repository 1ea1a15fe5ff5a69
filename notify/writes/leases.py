"""Leases: who may step an event now. Each is one statement, fenced by the lease's token.

Every worker step takes, uses and gives back one lease, so each is a single statement
here (the ORM's compile and an explicit transaction's round trips cost more than the
statement itself). Expiry is judged on the database's clock, computed inside the
statements (``sql.database_time``): ``at`` is None in production, or a test's fake time,
which stands for the database's.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from notify.writes.reads import STEP_READ, StepRead, read_for_step, step_read
from notify.writes.sql import adapted, aware, database_time, statement_cursor
from notify.writes.wake_ups import WAKE_UP_NEEDED, WakeUp, send_after_commit


@dataclass(frozen=True)
class Lease:
    owner: str
    token: int  # the fencing token: bumped by every take, so a holder taken over can no longer write


def take(event_id: str, owner: str, *, at: datetime | None, ttl: timedelta) -> Lease | None:
    """Take the event if its lease is free or expired; return the lease, or None if another holds it."""
    # The condition, the token bump and the read of the new token are one statement: two
    # takers cannot both see the lease free, and the bump fences out whoever held it before.
    taken = _lease_update(
        "lease_owner = %s, lease_expires_at = {later}, lease_token = lease_token + 1",
        "(lease_expires_at IS NULL OR lease_expires_at <= {now}) RETURNING lease_token",
        event_id, at=at, ttl=ttl, before=[owner],
    )  # fmt: skip
    return None if taken is None else Lease(owner, int(taken[0]))


# The most urgent due event whose lease is free: the one whose ``act_by`` (the last moment its
# next step can start and still finish before expiry) comes first. Rows another worker is
# taking this instant are skipped, not waited for (PostgreSQL's SKIP LOCKED; SQLite has one
# writer at a time): two workers take the two most urgent instead of queueing on one.
_MOST_URGENT = {
    "postgresql": "SELECT id FROM notify_event WHERE act_by IS NOT NULL AND next_action_at <= {now} AND {free} "
    "ORDER BY act_by LIMIT 1 FOR UPDATE SKIP LOCKED",
    "sqlite": "SELECT id FROM notify_event WHERE act_by IS NOT NULL AND next_action_at <= {now} AND {free} "
    "ORDER BY act_by LIMIT 1",
}
_LEASE_FREE = "(lease_expires_at IS NULL OR lease_expires_at <= {now})"
# The lease runs for the event's own policy's ``lease_ttl``, added to the database's time.
_POLICY_LEASE_TTL = "(SELECT p.lease_ttl FROM policies_policyversion p WHERE p.id = notify_event.policy_id)"
_LATER_BY_POLICY = {
    "postgresql": "({now} + " + _POLICY_LEASE_TTL + ")",
    "sqlite": "strftime('%%Y-%%m-%%d %%H:%%M:%%f', {now}, (" + _POLICY_LEASE_TTL + " / 1000000.0) || ' seconds')",
}


# The taken event's version as the statement's snapshot has it (its other reads see that snapshot too).
_SNAPSHOT_VERSION = ", (SELECT s.version FROM notify_event s WHERE s.id = e.id)"


def take_most_urgent(owner: str, *, at: datetime | None) -> tuple[StepRead, Lease] | None:
    """Take the lease of the most urgent due event and read it for the step; None if none is due.

    Wake-ups are served in order of urgency, not of arrival: whichever wake-up a worker
    runs, it steps the due event closest to its ``act_by``. Choosing, taking and bumping
    the fencing token are one statement, so two workers never take the same event; the
    lease condition is repeated outside the choice because a row chosen by a concurrent
    statement's snapshot is re-checked there once it is locked. On PostgreSQL the step's
    read is the same statement (the taken row, joined); SQLite reads it after.
    """
    vendor = connection.vendor
    now, now_params = database_time(at)
    free = _LEASE_FREE.format(now=now)
    later = _LATER_BY_POLICY[vendor].format(now=now)
    choice = _MOST_URGENT[vendor].format(now=now, free=free)
    take = (
        f"UPDATE notify_event SET lease_owner = %s, lease_expires_at = {later}, lease_token = lease_token + 1 "
        f"WHERE id = ({choice}) AND {free} RETURNING "
    )
    params = [owner, *now_params, *now_params, *now_params, *now_params]
    with statement_cursor() as cursor:
        if vendor == "postgresql":
            read = STEP_READ.format(
                now=database_time(None)[0], source="taken", where="", snapshot_version=_SNAPSHOT_VERSION
            )
            cursor.execute(f"WITH taken AS ({take} *) {read}", params)
            rows = cursor.fetchall()
        else:
            cursor.execute(f"{take} id", params)
            taken = cursor.fetchone()
            return None if taken is None else _held(owner, read_for_step(str(taken[0])))
    if not rows:
        return None
    if rows[0][2] != rows[0][20]:
        # The event changed after this statement's snapshot was taken: the lock re-checked the
        # newest row, but the claims and vault joined to it were read in the snapshot (a fallback
        # an operator committed meanwhile would read as email_claimed without its claim). Read
        # it afresh, under the lease now held; anything later is caught by the version guard.
        return _held(owner, read_for_step(str(rows[0][15])))
    return _held(owner, step_read("", rows))


def _held(owner: str, read: StepRead) -> tuple[StepRead, Lease]:
    return read, Lease(owner, read.loaded.lease_token)


def renew(event_id: str, lease: Lease, *, at: datetime | None, ttl: timedelta) -> bool:
    """Extend a lease still held (not expired, not taken over) to ``ttl`` from now."""
    condition = "lease_token = %s AND lease_expires_at > {now} RETURNING id"
    renewed = _lease_update("lease_expires_at = {later}", condition, event_id, at=at, ttl=ttl, after=[lease.token])
    return renewed is not None


def release_expired(event_id: str, token: int, *, at: datetime | None) -> bool:
    """Free a lease whose holder let it expire; False if it was renewed, taken over or freed.

    ``token`` is the fencing token the caller saw: a lease taken over since then is
    someone else's live lease and stays. The token is bumped, so the stale holder,
    should it come back, can no longer write.
    """
    set_to = "lease_owner = '', lease_expires_at = NULL, lease_token = lease_token + 1"
    condition = "lease_token = %s AND lease_expires_at <= {now} RETURNING id"
    return _lease_update(set_to, condition, event_id, at=at, after=[token]) is not None


def _lease_update(
    assignments: str,
    condition: str,
    event_id: str,
    *,
    at: datetime | None,
    ttl: timedelta | None = None,
    before: list[Any] | None = None,
    after: list[Any] | None = None,
) -> tuple[Any, ...] | None:
    """Run ``UPDATE notify_event SET assignments WHERE id = %s AND condition`` with ``{now}`` and
    ``{later}`` (now + ``ttl``) as the database's time; ``before`` and ``after`` are the other
    parameters either side of the id. Return the row it returned, if any."""
    now, now_params = database_time(at)
    later, later_params = database_time(at, ttl) if ttl is not None else ("", [])
    sql = f"UPDATE notify_event SET {assignments} WHERE id = %s AND {condition}".format(now=now, later=later)
    params = [*(before or []), *later_params, event_id, *(after or []), *now_params]
    with statement_cursor() as cursor:
        cursor.execute(sql, params)
        row: tuple[Any, ...] | None = cursor.fetchone()
    return row


def give_back(event_id: str, lease: Lease) -> bool:
    """Give the event back, unless the lease was taken over (its token bumped) meanwhile; whether it was."""
    with statement_cursor() as cursor:
        cursor.execute(
            "UPDATE notify_event SET lease_owner = '', lease_expires_at = NULL WHERE id = %s AND lease_token = %s",
            [event_id, lease.token],
        )
        return bool(cursor.rowcount == 1)


def give_back_with_wake_up(event_id: str, lease: Lease, *, wake_at: datetime, now: datetime) -> WakeUp | None:
    """Give the event back as ``give_back`` does, with its next wake-up recorded in the same statement, and send it.

    Not recorded (nor sent) if one no later is pending, or the lease was taken over (its
    holder schedules). Returns the wake-up sent, if any.
    """
    sql = (
        "UPDATE notify_event SET lease_owner = '', lease_expires_at = NULL, "
        f"wake_at = CASE WHEN {WAKE_UP_NEEDED} THEN %s ELSE wake_at END "
        "WHERE id = %s AND lease_token = %s RETURNING wake_at"
    )
    with statement_cursor() as cursor:
        cursor.execute(sql, [adapted(now), adapted(wake_at), adapted(wake_at), event_id, lease.token])
        row = cursor.fetchone()
    # A pending wake-up due exactly then reads as new: one spare wake-up, which finds nothing due.
    return _sent(event_id, wake_at) if row is not None and aware(row[0]) == wake_at else None


def hold_back(event_id: str, lease: Lease, *, error: str, retry_at: datetime, now: datetime) -> WakeUp | None:
    """Count a step that raised on its event, hold its next action back to ``retry_at``, give the lease back.

    The schedule is pushed back, not left due: a due event with a free lease is the most urgent
    at every turn (``take_most_urgent``), so a step that raises at once would take every turn,
    whichever event the turn was for. A later schedule ``decide`` stored stays; an event with
    none (terminal) keeps none. Fenced by the lease's token: a holder taken over writes
    nothing. Returns the wake-up sent for ``retry_at``, as ``give_back_with_wake_up`` does.
    """
    sql = (
        "UPDATE notify_event SET step_failures = step_failures + 1, step_error = %s,"
        " next_action_at = CASE WHEN next_action_at IS NULL OR next_action_at > %s THEN next_action_at ELSE %s END,"
        " lease_owner = '', lease_expires_at = NULL,"
        f" wake_at = CASE WHEN next_action_at IS NOT NULL AND {WAKE_UP_NEEDED} THEN %s ELSE wake_at END"
        " WHERE id = %s AND lease_token = %s RETURNING wake_at"
    )
    retry = adapted(retry_at)
    with statement_cursor() as cursor:
        cursor.execute(sql, [error[:200], retry, retry, adapted(now), retry, retry, event_id, lease.token])
        row = cursor.fetchone()
    return _sent(event_id, retry_at) if row is not None and aware(row[0]) == retry_at else None


def clear_step_failures(event_id: str, lease: Lease) -> None:
    """Set the event's failures in a row back to none after a step that completed, under its ``lease``.

    After the lease went back with the step's last write: the token is bumped only by a take-over,
    so a step taken over since (whose count is its own) is left alone.
    """
    with statement_cursor() as cursor:
        cursor.execute(
            "UPDATE notify_event SET step_failures = 0, step_error = '' WHERE id = %s AND lease_token = %s",
            [event_id, lease.token],
        )


def _sent(event_id: str, at: datetime) -> WakeUp:
    wake_up = WakeUp(event_id, at, recorded=True)
    send_after_commit(wake_up)
    return wake_up
