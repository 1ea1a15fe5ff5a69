"""Celery tasks for paging: find at-risk events, deliver pages. No personal data in arguments."""

import logging
from datetime import datetime

from celery import shared_task
from django.conf import settings
from django.db import transaction
from kombu.exceptions import OperationalError

from notify import broker, tallies
from plumbing.clock import current_clock
from runbook.evidence import projections
from runbook.paging import pager, risk

log = logging.getLogger("runbook.tasks")


@shared_task(name="runbook.evaluate_risk")
def evaluate_risk() -> dict[str, int]:
    """Open pages for newly at-risk events, resolve ended ones, and send what that made due.

    Beat's runs carry no expiry, so none is discarded unseen: after a stall (its lane's
    worker down or busy), the queued runs arrive one after another. The first evaluates
    everything as it is now and catches up; the rest find a fresh heartbeat and stop there.
    """
    now = current_clock().now()
    silent_for = _seconds_since_last_evaluation(now)
    if silent_for is not None and silent_for < settings.NOTIFY_RISK_INTERVAL / 2:
        return {"coalesced": 1}
    if silent_for is not None and silent_for > 2 * settings.NOTIFY_RISK_INTERVAL:
        log.warning("risk_evaluation_caught_up", extra={"silent_seconds": round(silent_for, 1)})
    evaluation = risk.evaluate(now)
    # The heartbeat an alert watches: an evaluator that stopped pages nobody, so its silence must.
    tallies.set_value(tallies.EVALUATOR_LAST_RUN, now.timestamp())
    if evaluation.opened or evaluation.resolved or evaluation.surges_opened or evaluation.surges_resolved:
        log.info("risk_evaluated", extra=evaluation.__dict__)
        transaction.on_commit(_deliver_soon)
    return evaluation.__dict__


def _seconds_since_last_evaluation(now: datetime) -> float | None:
    last = tallies.value_of(tallies.EVALUATOR_LAST_RUN)
    return None if last is None else now.timestamp() - last


def _deliver_soon() -> None:
    # Only a shortcut: the beat runs deliver_pages every few seconds anyway.
    try:
        broker.send_task(deliver_pages.name)  # bounded in time: the evaluation waits on this publish
    except OperationalError:
        log.warning("deliver_pages_not_enqueued")


@shared_task(name="runbook.deliver_pages")
def deliver_pages() -> dict[str, int]:
    """Send the pages that are due (new, resolved, or waiting for a retry)."""
    delivered = pager.deliver_due()
    # The outbox's heartbeat: a run that ended, whatever the pager answered.
    tallies.set_value(tallies.OUTBOX_LAST_RUN, current_clock().now().timestamp())
    return delivered.__dict__


@shared_task(name="runbook.project_policy")
def project_policy(policy_id: int) -> dict[str, object]:
    """Compute a policy version's projection (runbook.projections); on a lane of its own."""
    try:
        projection = projections.compute(policy_id, current_clock().now())
    except Exception as error:
        # Said on the draft's page (no figures means no approval), not only in a log.
        projections.record_failure(policy_id, f"{type(error).__name__}: {error}")
        raise
    if projection is None:
        return {"stored": False}
    log.info(
        "policy_projected",
        extra={"policy": str(projection.policy), "records": projection.records, "generated": projection.generated},
    )
    return {"stored": True, "records": projection.records}
