"""Celery tasks. Arguments are ids only, never personal data."""

import dataclasses

from celery import shared_task

from notify import retention
from notify.clock import system_clock


@shared_task(name="notify.purge_retained_data")
def purge_retained_data() -> dict[str, int]:
    """Apply the policies' retention periods (run periodically by beat)."""
    return dataclasses.asdict(retention.purge(system_clock.now()))
