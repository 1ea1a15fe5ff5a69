"""Celery tasks. Arguments are event ids only, never personal data."""

import dataclasses
import logging
import os
import socket
from functools import partial

from celery import shared_task
from django.conf import settings

from notify import broker, tallies, worker
from notify.transports import configured
from notify.writes import purge, sweeper, wake_ups
from plumbing.clock import current_clock

log = logging.getLogger("notify.tasks")

_HOST = f"{socket.gethostname()}:{os.getpid()}"


@shared_task(name=broker.ADVANCE)
def take_turn(event_id: str) -> str:
    """Step the most urgent due event (this one, unless another is nearer its act_by); its next wake-up goes with it."""
    owner = f"{_HOST}:{take_turn.request.id or 'inline'}"
    return worker.step_most_urgent(event_id, transports=configured(), clock=current_clock(), owner=owner).result


@shared_task(name="notify.sweep")
def sweep() -> dict[str, int]:
    """Expire or re-enqueue due events whose wake-up was lost (run by beat)."""
    now = current_clock().now()
    swept = sweeper.sweep(
        now,
        enqueue=wake_ups.publish,
        forget=partial(wake_ups.forget, at=now),  # the sweeper marked them woken, now
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
    return dataclasses.asdict(purge.purge(current_clock().now()))
