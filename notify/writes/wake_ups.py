"""Wake-ups: the hint a write leaves for a worker, and the one function that sends it.

A write that leaves something due returns the ``WakeUp`` to send (``Written.wake_up``)
and hands it to ``send_after_commit``: no caller decides again whether to wake the
event, or sends one itself. A wake-up is only a hint: the database's schedule is the
truth, and one that never went is found by the sweeper (``notify.writes.sweep``).
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.conf import settings
from django.db import DatabaseError, transaction
from kombu.exceptions import OperationalError

from notify import broker
from notify.writes.sql import adapted, statement_cursor
from plumbing.clock import current_clock
from plumbing.once import OncePerProcess
from plumbing.pause import Pause

log = logging.getLogger("notify.wake_ups")


@dataclass(frozen=True)
class WakeUp:
    """Step ``event_id`` at ``at``. ``recorded``: the write itself recorded it as the event's pending
    wake-up (``wake_at`` = ``at``), so it is only sent; otherwise it is recorded as it is sent."""

    event_id: str
    at: datetime
    recorded: bool = False


# At most one wake-up per event is pending: a new one is sent only if none is, or the pending
# one is due later than the new one (a duplicate would start a second chain of wake-ups
# that lives as long as the event). One due by now counts as spent.
WAKE_UP_NEEDED = "(wake_at IS NULL OR wake_at <= %s OR wake_at > %s)"


def wake_up_needed(pending: datetime | None, *, at: datetime, now: datetime) -> bool:
    """``WAKE_UP_NEEDED`` for a pending wake-up the caller read: for a lease holder's own write."""
    return pending is None or pending <= now or pending > at


def send_after_commit(wake_up: WakeUp | None) -> None:
    """Send ``wake_up`` once the caller's transaction commits (at once outside one): the one sender.

    One not yet recorded is recorded first, unless a wake-up no later is pending: a second
    hint would start a second chain of wake-ups that lives as long as the event. One that
    does not go is forgotten, for the sweeper to find the event again.
    """
    if wake_up is not None:
        transaction.on_commit(partial(_send, wake_up))


def _send(wake_up: WakeUp) -> None:
    now = current_clock().now()
    at = max(wake_up.at, now)
    if not wake_up.recorded and not _record(wake_up.event_id, at=at, now=now):
        return  # one no later is pending: its step schedules what follows
    if not publish(wake_up.event_id, countdown=(at - now).total_seconds()):
        forget([wake_up.event_id], at=wake_up.at if wake_up.recorded else at)


def _record(event_id: str, *, at: datetime, now: datetime) -> bool:
    """Record a wake-up due ``at`` unless an earlier one is pending; True if it is to be sent."""
    with statement_cursor() as cursor:
        cursor.execute(
            f"UPDATE notify_event SET wake_at = %s WHERE id = %s AND {WAKE_UP_NEEDED}",
            [adapted(at), event_id, adapted(now), adapted(at)],
        )
        return bool(cursor.rowcount == 1)


def publish(event_id: str, *, countdown: float = 0.0) -> bool:
    """Put one wake-up on the broker; return whether it went.

    Only a hint: if the broker is unreachable the event is still due in the database
    and the sweeper enqueues it later, so a failed send is logged, not raised. After one
    failure this process sends none for NOTIFY_BROKER_RETRY_SECONDS (logged as ``paused``),
    then tries again: each attempt at a broker that does not answer costs its caller (a
    creation's request, a worker's step) NOTIFY_BROKER_PUBLISH_TIMEOUT.
    """
    pause = publish_pause()
    if pause.active():
        log.warning("wake_up_not_sent", extra={"event_id": event_id, "error": "paused"})
        return False
    try:
        broker.publish_advance(event_id, countdown=countdown)
    except OperationalError as error:
        pause.start()
        log.warning("wake_up_not_sent", extra={"event_id": event_id, "error": type(error).__name__})
        return False
    return True


@OncePerProcess
def publish_pause() -> Pause:
    return Pause(settings.NOTIFY_BROKER_RETRY_SECONDS)


def forget(event_ids: list[str], *, at: datetime) -> None:
    """Forget the wake-ups recorded as pending at ``at`` that did not go (the broker did not take them).

    Only where the record is still ``at``: one made since belongs to a hint that went. At best:
    a database that fails it leaves the records (the sweeper takes the events after
    NOTIFY_SWEEP_REDELIVER_AFTER), never fails the caller (a creation that committed, a sweep
    half done).
    """
    marks = ", ".join(["%s"] * len(event_ids))
    try:
        with statement_cursor() as cursor:
            cursor.execute(
                f"UPDATE notify_event SET wake_at = NULL WHERE id IN ({marks}) AND wake_at = %s",
                [*event_ids, adapted(at)],
            )
    except DatabaseError as error:
        log.warning("wake_up_not_forgotten", extra={"events": len(event_ids), "error": type(error).__name__})
