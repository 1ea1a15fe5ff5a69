"""Delivering pages to a PagerDuty Events v2 compatible endpoint, durably.

``Page`` rows are the outbox: a trigger when the event went at risk, a resolve once it
is terminal. Each delivery claims its row with a conditional UPDATE (so two deliverers
never send the same message at once), calls the pager outside any transaction, and
records the outcome; a failure is retried with backoff until it lands. The payload
carries the event id, region, state, remaining budget and the console link: never a
phone number, address or reset link.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import requests
from django.conf import settings
from django.db.models import Case, F, Value, When

from runbook.models import Page

log = logging.getLogger("runbook.pager")

SUMMARY = "reset_delivery_deadline_at_risk"
# Longer than one pager call may take, so a deliverer that died mid-call is retried by the next.
CLAIM_HOLD = timedelta(seconds=30)
MAX_BACKOFF = timedelta(minutes=5)
BATCH = 50

Send = Callable[[dict[str, Any]], None]


class PagerError(Exception):
    """The pager did not accept the message; it is retried."""


@dataclass(frozen=True)
class Delivered:
    sent: int
    failed: int


def post_to_pager(message: dict[str, Any]) -> None:
    """POST one message to the Events v2 endpoint; 202 is the only success."""
    try:
        response = requests.post(settings.PAGER_EVENTS_URL, json=message, timeout=settings.PAGER_TIMEOUT)
    except requests.RequestException as error:
        raise PagerError(f"{type(error).__name__} reaching the pager") from error
    if response.status_code != 202:
        raise PagerError(f"pager answered {response.status_code}")


def console_link(event_id: str) -> str:
    return f"{settings.PUBLIC_BASE_URL}/events/{event_id}"


def message(page: Page, action: str) -> dict[str, Any]:
    """The Events v2 message for ``action`` ("trigger" or "resolve") of a page."""
    routing_key = settings.PAGER_ROUTING_KEYS.get(page.region)
    if not routing_key:
        raise PagerError(f"no routing key for region {page.region} (PAGER_ROUTING_KEYS)")
    body: dict[str, Any] = {"routing_key": routing_key, "event_action": action, "dedup_key": page.event_id}
    if action == "resolve":
        return body
    link = console_link(page.event_id)
    return body | {
        "payload": {
            "summary": f"{SUMMARY}: {page.region} {page.state}, {page.budget_seconds:.0f}s of action budget left",
            "source": "reset-delivery",
            "severity": "critical",
            "timestamp": page.opened_at.isoformat(),
            "component": "reset-delivery",
            "group": page.region,
            "class": SUMMARY,
            "custom_details": {
                "event_id": page.event_id,
                "region": page.region,
                "state": page.state,
                "next_action": page.next_action,
                "remaining_budget_seconds": round(page.budget_seconds, 1),
                "console": link,
                "runbook": f"{link}#runbook",
            },
        },
        "links": [{"href": link, "text": "Open the event in the on-call console"}],
        "client": "reset-delivery console",
        "client_url": link,
    }


def deliver_due(now: datetime, *, send: Send = post_to_pager) -> Delivered:
    """Send every page message that is due; return how many landed and how many failed."""
    sent = failed = 0
    due = list(Page.objects.filter(next_attempt_at__lte=now).order_by("next_attempt_at").values_list("pk", flat=True))
    for page_id in due[:BATCH]:
        # Claim: only one deliverer moves next_attempt_at past now; the others see 0 rows.
        claimed = Page.objects.filter(pk=page_id, next_attempt_at__lte=now).update(
            next_attempt_at=now + CLAIM_HOLD, attempts=F("attempts") + 1
        )
        if not claimed:
            continue
        page = Page.objects.get(pk=page_id)
        landed = _deliver(page, now, send)
        sent += landed
        failed += not landed
    return Delivered(sent, failed)


def _deliver(page: Page, now: datetime, send: Send) -> bool:
    if page.trigger_sent_at is None and page.resolved_at is not None:
        # The event ended before its trigger got through: waking someone now helps nobody.
        Page.objects.filter(pk=page.pk).update(next_attempt_at=None, last_error="resolved before the trigger landed")
        return True
    action = "trigger" if page.trigger_sent_at is None else "resolve"
    try:
        send(message(page, action))
    except PagerError as error:
        wait = min(MAX_BACKOFF, timedelta(seconds=5 * 2 ** min(page.attempts - 1, 10)))
        Page.objects.filter(pk=page.pk).update(next_attempt_at=now + wait, last_error=str(error)[:200])
        log.warning("page_failed", extra={"event_id": page.event_id, "action": action, "error": str(error)})
        return False
    if action == "trigger":
        # Due again at once if the event ended while the trigger was on its way.
        Page.objects.filter(pk=page.pk).update(
            trigger_sent_at=now,
            last_error="",
            next_attempt_at=Case(When(resolved_at__isnull=False, then=Value(now)), default=None),
        )
    else:
        Page.objects.filter(pk=page.pk).update(resolve_sent_at=now, last_error="", next_attempt_at=None)
    log.info("page_sent", extra={"event_id": page.event_id, "action": action, "region": page.region})
    return True
