"""The sweeper: the database's schedule is the truth, broker messages are only hints.

Every event stores when its next action is due (``next_action_at``). The sweeper
finds those that are due and not held by a live lease, expires the ones past their
reset expiry and re-enqueues the rest (those whose wake-up was lost), so a lost broker message, a killed worker
or a broker restart delays work but never loses it.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q

from notify.models import Event
from notify.writes import moves

SWEEPER = "sweeper"
# Batches per sweep: bounds one sweep's run time; the next sweep continues.
MAX_BATCHES = 20


@dataclass(frozen=True)
class Swept:
    enqueued: int
    expired: int


def sweep(
    now: datetime,
    *,
    enqueue: Callable[[str], bool],
    forget: Callable[[list[str]], None],
    batch: int,
    redeliver_after: timedelta,
) -> Swept:
    """Expire or re-enqueue every due event whose lease is free and whose wake-up was lost.

    ``enqueue`` sends an event's wake-up and says whether it went; ``forget`` clears this
    sweep's marks (``wake_at`` = ``now``) of the events given.

    1. Take a batch of due, unleased events without a wake-up hint due in the last
       ``redeliver_after`` (none was sent, or it is that overdue: lost), oldest due
       first, skipping rows another sweeper has locked (``FOR UPDATE SKIP LOCKED`` on
       PostgreSQL), and mark them woken now in the same transaction, so neither the
       next sweep nor a concurrent one enqueues them again while this hint is fresh.
    2. After commit: expire those past their reset expiry here (a backlog of wake-ups
       must not keep an expired event open), enqueue the others.
    3. At the end, forget the marks of those whose wake-up did not go (the broker hangs, or
       this process has paused its sends), for the next sweep to try again: marked, they
       would rest ``redeliver_after`` with no hint on its way. Not before the end: unmarked,
       they would be the next batch again, and the expiries behind them would wait.
    """
    enqueued = expired = 0
    unsent: list[str] = []
    try:
        for _ in range(MAX_BATCHES):
            due = _claim_batch(now, batch, redeliver_after)
            for event_id, expires_at in due:
                if expires_at <= now:
                    outcome = moves.expire(event_id, now=now, actor=SWEEPER)
                    expired += outcome.applied
                elif enqueue(event_id):
                    enqueued += 1
                else:
                    unsent.append(event_id)
            if len(due) < batch:
                break
    finally:
        if unsent:
            forget(unsent)
    return Swept(enqueued, expired)


def _claim_batch(now: datetime, batch: int, redeliver_after: timedelta) -> list[tuple[str, datetime]]:
    with transaction.atomic():
        # Uses event_open_due_idx (partial: next_action_at IS NOT NULL). Rows locked by a
        # concurrent sweeper are skipped, not waited for: two sweepers split the work.
        due = list(
            Event.objects.select_for_update(skip_locked=True)
            .filter(next_action_at__lte=now)
            .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now))
            .filter(Q(wake_at__isnull=True) | Q(wake_at__lte=now - redeliver_after))
            .order_by("next_action_at")
            .values_list("pk", "expires_at")[:batch]
        )
        Event.objects.filter(pk__in=[event_id for event_id, _ in due]).update(wake_at=now)
    return due
