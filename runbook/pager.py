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
from datetime import timedelta
from typing import Any

import requests
from django.conf import settings
from django.db.models import Case, F, Value, When
from django.urls import reverse

from notify.clock import Clock, current_clock
from runbook.models import Page

log = logging.getLogger("runbook.pager")

SUMMARY = "reset_delivery_deadline_at_risk"
MAX_BACKOFF = timedelta(minutes=5)
BATCH = 50

Send = Callable[[dict[str, Any]], None]


class PagerError(Exception):
    """The pager did not accept the message, or did not say; it is retried.

    ``answered`` is False when no answer came (a timeout, a lost connection): the pager
    may have taken the message all the same.
    """

    def __init__(self, message: str, *, answered: bool) -> None:
        super().__init__(message)
        self.answered = answered


@dataclass(frozen=True)
class Delivered:
    sent: int
    failed: int


def post_to_pager(message: dict[str, Any]) -> None:
    """POST one message to the Events v2 endpoint; 202 is the only success."""
    try:
        response = requests.post(settings.PAGER_EVENTS_URL, json=message, timeout=settings.PAGER_TIMEOUT)
    except requests.RequestException as error:
        raise PagerError(f"{type(error).__name__} reaching the pager", answered=False) from error
    if response.status_code != 202:
        raise PagerError(f"pager answered {response.status_code}", answered=True)


def console_link(event_id: str) -> str:
    return settings.PUBLIC_BASE_URL + reverse("runbook:event", args=[event_id])


def message(page: Page, action: str) -> dict[str, Any]:
    """The Events v2 message for ``action`` ("trigger" or "resolve") of a page."""
    routing_key = settings.PAGER_ROUTING_KEYS.get(page.region)
    if not routing_key:
        raise PagerError(f"no routing key for region {page.region} (PAGER_ROUTING_KEYS)", answered=True)
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


def deliver_due(clock: Clock | None = None, *, send: Send = post_to_pager) -> Delivered:
    """Send every page message that is due; return how many landed and how many failed.

    The clock is read for each page, not once per batch: a batch of slow calls must not
    claim its last pages with holds that expired while the first ones were in flight.
    """
    clock = clock or current_clock()
    sent = failed = 0
    due = list(
        Page.objects.filter(next_attempt_at__lte=clock.now()).order_by("next_attempt_at").values_list("pk", flat=True)
    )
    for page_id in due[:BATCH]:
        now = clock.now()
        # Claim: only one deliverer moves next_attempt_at past now; the others see 0 rows.
        # The attempt count it bumps is the fencing token of this delivery's outcome.
        claimed = Page.objects.filter(pk=page_id, next_attempt_at__lte=now).update(
            next_attempt_at=now + claim_hold(), attempts=F("attempts") + 1
        )
        if not claimed:
            continue
        page = Page.objects.get(pk=page_id)
        landed = _deliver(page, clock, send)
        sent += landed
        failed += not landed
    return Delivered(sent, failed)


def claim_hold() -> timedelta:
    """Longer than one pager call can take, so no second deliverer takes a page mid-call."""
    return timedelta(seconds=2 * settings.PAGER_TIMEOUT + 5)


def _deliver(page: Page, clock: Clock, send: Send) -> bool:
    # Writes below are fenced by the attempt count this delivery claimed: a deliverer whose
    # hold ran out (and whose page another one has claimed since) records nothing.
    mine = Page.objects.filter(pk=page.pk, attempts=page.attempts)
    action = _pending_action(page)
    if action is None:
        mine.update(next_attempt_at=None, last_error="resolved before the trigger landed")
        return True
    try:
        send(message(page, action))
    except PagerError as error:
        wait = min(MAX_BACKOFF, timedelta(seconds=5 * 2 ** min(page.attempts - 1, 10)))
        uncertain = page.trigger_uncertain or (action == "trigger" and not error.answered)
        mine.update(next_attempt_at=clock.now() + wait, last_error=str(error)[:200], trigger_uncertain=uncertain)
        log.warning("page_failed", extra={"event_id": page.event_id, "action": action, "error": str(error)})
        return False
    now = clock.now()
    if action == "trigger":
        # Due again at once if the event ended while the trigger was on its way.
        mine.update(
            trigger_sent_at=now,
            last_error="",
            next_attempt_at=Case(When(resolved_at__isnull=False, then=Value(now)), default=None),
        )
    else:
        mine.update(resolve_sent_at=now, last_error="", next_attempt_at=None)
    log.info("page_sent", extra={"event_id": page.event_id, "action": action, "region": page.region})
    return True


def _pending_action(page: Page) -> str | None:
    """What this page still owes the pager: a trigger, a resolve, or nothing."""
    if page.resolved_at is None:
        return "trigger" if page.trigger_sent_at is None else None
    if page.trigger_sent_at is not None or page.trigger_uncertain:
        # After a trigger that landed, or one that may have (an attempt whose answer was lost):
        # resolve. With the same dedup_key a resolve of an incident never opened is harmless.
        return "resolve" if page.resolve_sent_at is None else None
    # The event ended before any trigger went out: waking someone now helps nobody.
    return None
