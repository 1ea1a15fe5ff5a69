"""Celery tasks for paging: find at-risk events, deliver pages. No personal data in arguments."""

import logging

from celery import shared_task
from django.db import transaction
from kombu.exceptions import OperationalError

from notify import tallies
from notify.clock import current_clock
from runbook import pager, risk

log = logging.getLogger("runbook.tasks")


@shared_task(name="runbook.evaluate_risk")
def evaluate_risk() -> dict[str, int]:
    """Open pages for newly at-risk events, resolve ended ones, and send what that made due."""
    now = current_clock().now()
    evaluation = risk.evaluate(now)
    # The heartbeat an alert watches: an evaluator that stopped pages nobody, so its silence must.
    tallies.set_value(tallies.EVALUATOR_LAST_RUN, now.timestamp())
    if evaluation.opened or evaluation.resolved:
        log.info("risk_evaluated", extra=evaluation.__dict__)
        transaction.on_commit(_deliver_soon)
    return evaluation.__dict__


def _deliver_soon() -> None:
    # Only a shortcut: the beat runs deliver_pages every few seconds anyway.
    try:
        deliver_pages.delay()
    except OperationalError:
        log.warning("deliver_pages_not_enqueued")


@shared_task(name="runbook.deliver_pages")
def deliver_pages() -> dict[str, int]:
    """Send the pages that are due (new, resolved, or waiting for a retry)."""
    delivered = pager.deliver_due()
    # The outbox's heartbeat: a run that ended, whatever the pager answered.
    tallies.set_value(tallies.OUTBOX_LAST_RUN, current_clock().now().timestamp())
    return delivered.__dict__
