"""Celery tasks. Arguments are event ids only, never personal data."""

import dataclasses
import logging
import os
import socket
from datetime import datetime, timedelta
from functools import partial

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError, transaction
from kombu.exceptions import OperationalError

from notify import broker, retention, rows, sweeper, tallies, worker
from notify.transports import configured
from plumbing.clock import current_clock
from plumbing.once import OncePerProcess
from plumbing.pause import Pause

log = logging.getLogger("notify.tasks")

_HOST = f"{socket.gethostname()}:{os.getpid()}"


@shared_task(name=broker.ADVANCE)
def take_turn(event_id: str) -> str:
    """Step the most urgent due event (this one, unless another is nearer its act_by); schedule its next."""
    owner = f"{_HOST}:{take_turn.request.id or 'inline'}"
    report = worker.step_most_urgent(event_id, transports=configured(), clock=current_clock(), owner=owner)
    if report.wake_after is not None:
        countdown = report.wake_after.total_seconds()
        if report.wake_at is not None:  # recorded as the lease went back
            send_recorded(report.event_id, at=report.wake_at, countdown=countdown)
        else:
            wake(report.event_id, countdown=countdown)
    return report.outcome


def wake(event_id: str, *, countdown: float = 0.0) -> None:
    """Enqueue a wake-up for the event once the current transaction (if any) commits.

    At most one hint per event is pending: if one is already due no later than this
    one, it will do (its step schedules what follows), and sending another would start
    a second chain of wake-ups that lives as long as the event.
    """

    def send_unless_pending() -> None:
        now = current_clock().now()
        at = now + timedelta(seconds=countdown)
        if rows.record_wake_up(event_id, at=at, now=now):
            send_recorded(event_id, at=at, countdown=countdown)

    transaction.on_commit(send_unless_pending)


def send(event_id: str, *, countdown: float = 0.0) -> bool:
    """Put one wake-up on the broker; return whether it went.

    Only a hint: if the broker is unreachable the event is still due in the database
    and the sweeper enqueues it later, so a failed send is logged, not raised. After one
    failure this process sends none for NOTIFY_BROKER_RETRY_SECONDS (logged as ``paused``),
    then tries again: each attempt at a broker that does not answer costs its caller (a
    creation's request, a worker's step) NOTIFY_BROKER_PUBLISH_TIMEOUT.
    """
    pause = _publish_pause()
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


def send_recorded(event_id: str, *, at: datetime, countdown: float = 0.0) -> None:
    """Send a wake-up already recorded on the event as pending (``wake_at`` = ``at``).

    One that did not go is forgotten: left recorded, it would keep the sweeper off the event
    until NOTIFY_SWEEP_REDELIVER_AFTER past ``at``, with no hint on its way.
    """
    if not send(event_id, countdown=countdown):
        forget_wake_ups([event_id], at=at)


def forget_wake_ups(event_ids: list[str], *, at: datetime) -> None:
    """``rows.forget_wake_ups``, at best: a database that fails it leaves the records (the sweeper
    takes the events after NOTIFY_SWEEP_REDELIVER_AFTER, as before), never fails the caller: a
    creation that committed, or a sweep half done."""
    try:
        rows.forget_wake_ups(event_ids, at=at)
    except DatabaseError as error:
        log.warning("wake_up_not_forgotten", extra={"events": len(event_ids), "error": type(error).__name__})


@OncePerProcess
def _publish_pause() -> Pause:
    return Pause(settings.NOTIFY_BROKER_RETRY_SECONDS)


@shared_task(name="notify.sweep")
def sweep() -> dict[str, int]:
    """Expire or re-enqueue due events whose wake-up was lost (run by beat)."""
    now = current_clock().now()
    swept = sweeper.sweep(
        now,
        enqueue=send,
        forget=partial(forget_wake_ups, at=now),  # the sweeper marked them woken, now
        batch=settings.NOTIFY_SWEEP_BATCH,
        redeliver_after=settings.NOTIFY_SWEEP_REDELIVER_AFTER,
    )
    # The heartbeat an alert watches: a sweeper that stopped is found by its silence.
    tallies.set_value(tallies.SWEEPER_LAST_RUN, now.timestamp())
    if swept.enqueued or swept.expired:
        log.info("sweep", extra=dataclasses.asdict(swept))
    return dataclasses.asdict(swept)


@shared_task(name="notify.roll_up_metrics")
def roll_up_metrics() -> dict[str, int]:
    """Count what the history gained since the last roll-up, for /metrics."""
    return dataclasses.asdict(tallies.roll_up(current_clock().now()))


@shared_task(name="notify.purge_retained_data")
def purge_retained_data() -> dict[str, int]:
    """Apply the policies' retention periods (run periodically by beat)."""
    return dataclasses.asdict(retention.purge(current_clock().now()))
