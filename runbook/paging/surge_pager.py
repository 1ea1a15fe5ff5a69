"""Delivering surges to the pager: a trigger when one opens, the same trigger again when its count
changes (same dedup key: the incident is updated in place), a resolve once it is over.

As pages are delivered (``runbook.paging.pager``): claimed with a conditional UPDATE that bumps
the attempt count (the fence of the outcome), sent within the routing key's quota, retried with
a backoff, a 429 pausing the key. Surges go before pages: a handful of them stand for many events.
"""

import logging
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Case, F, Value, When
from django.urls import reverse

from plumbing.clock import Clock
from runbook.models import Surge
from runbook.paging import quota
from runbook.paging.pagerduty import PagerError

log = logging.getLogger("runbook.pager")

SURGE_SUMMARY = "reset_delivery_surge"
TRIGGER, RESOLVE = "trigger", "resolve"
SENT, FAILED, SKIPPED = "sent", "failed", "skipped"

Send = Callable[[dict[str, Any]], None]
Backoff = Callable[[int, str], timedelta]  # (failures in a row, region) -> the wait


def deliver_due(clock: Clock, send: Send, *, hold: timedelta, backoff: Backoff, blocked: set[str]) -> Counter[str]:
    """Send every surge message that is due (within its key's quota); count what landed, failed, or had nothing to send.

    ``hold``: how long a claim keeps a surge from other deliverers; ``backoff(failures)``: the wait
    after failures in a row; ``blocked``: routing keys out of quota or throttled for this run.
    """
    outcomes: Counter[str] = Counter()
    for surge_id, region in Surge.objects.filter(next_attempt_at__lte=clock.now()).values_list("pk", "region")[:20]:
        routing_key = settings.PAGER_ROUTING_KEYS.get(region, "")
        if routing_key in blocked:
            continue
        now = clock.now()
        # Only one deliverer moves next_attempt_at past now; the attempt count it bumps fences the outcome.
        if not Surge.objects.filter(pk=surge_id, next_attempt_at__lte=now).update(
            next_attempt_at=now + hold, attempts=F("attempts") + 1
        ):
            continue
        surge = Surge.objects.get(pk=surge_id)
        mine = Surge.objects.filter(pk=surge.pk, attempts=surge.attempts)
        action = _owed(surge)
        if action is None:
            mine.update(next_attempt_at=None)
            outcomes[SKIPPED] += 1
            continue
        if routing_key and not quota.take(routing_key, 1, now):
            blocked.add(routing_key)
            mine.update(next_attempt_at=now)
            continue
        error = _send(surge, action, routing_key, send)
        outcomes[_record(surge, action, error, clock.now(), mine, backoff)] += 1
        if error is not None and error.throttled:
            blocked.add(routing_key)
    return outcomes


def _owed(surge: Surge) -> str | None:
    """What a claimed surge owes the pager now: its trigger (first, or with a new count), its resolve, or nothing."""
    if surge.resolved_at is not None:
        if surge.trigger_sent_at is None and not surge.trigger_uncertain:
            return None  # it ended before anyone was told: nothing to take back
        return RESOLVE if surge.resolve_sent_at is None else None
    if surge.trigger_sent_at is None or surge.sent_at_risk != surge.at_risk:
        return TRIGGER
    return None


def _send(surge: Surge, action: str, routing_key: str, send: Send) -> PagerError | None:
    if not routing_key:
        return PagerError(f"no routing key for region {surge.region} (PAGER_ROUTING_KEYS)", answered=True)
    try:
        send(message(surge, action, routing_key))
    except PagerError as error:
        return error
    return None


def _record(surge: Surge, action: str, error: PagerError | None, now: datetime, mine: Any, backoff: Backoff) -> str:
    if error is not None:
        failures = surge.failures + 1
        wait = error.retry_after or backoff(failures, surge.region)
        if error.throttled:
            quota.pause(settings.PAGER_ROUTING_KEYS.get(surge.region, ""), now + wait)
        uncertain = surge.trigger_uncertain or (action == TRIGGER and not error.answered)
        mine.update(
            next_attempt_at=now + wait, failures=failures, last_error=str(error)[:200], trigger_uncertain=uncertain
        )
        log.warning("surge_page_failed", extra={"region": surge.region, "action": action, "error": str(error)})
        return FAILED
    if action == TRIGGER:
        # The count it carried; a later evaluation owes an update if the count moved on since.
        # Due again at once if it resolved while the trigger was on its way: it owes its resolve.
        due = Case(When(resolved_at__isnull=False, then=Value(now)), default=None)
        mine.update(trigger_sent_at=now, sent_at_risk=surge.at_risk, failures=0, last_error="", next_attempt_at=due)
    else:
        mine.update(resolve_sent_at=now, failures=0, last_error="", next_attempt_at=None)
    log.info("surge_page_sent", extra={"region": surge.region, "action": action, "at_risk": surge.at_risk})
    return SENT


def console_link(region: str) -> str:
    """The console's list of the region's open events, at-risk ones first."""
    return f"{settings.PUBLIC_BASE_URL}{reverse('runbook:events')}?region={region}"


def message(surge: Surge, action: str, routing_key: str) -> dict[str, Any]:
    """The Events v2 message for a surge: its count, where most of its events are, the most urgent few."""
    body: dict[str, Any] = {"routing_key": routing_key, "event_action": action, "dedup_key": surge.dedup_key}
    if action == RESOLVE:
        return body
    link = console_link(surge.region)
    summary = (
        f"{SURGE_SUMMARY}: {surge.region}: {surge.at_risk} resets at risk since {surge.opened_at:%H:%M} UTC, "
        f"most in {surge.dominant_state} (next: {surge.dominant_next_action})"
    )
    return body | {
        "payload": {
            "summary": summary,
            "source": "reset-delivery",
            "severity": "critical",
            "timestamp": surge.opened_at.isoformat(),
            "component": "reset-delivery",
            "group": surge.region,
            "class": SURGE_SUMMARY,
            "custom_details": {
                "region": surge.region,
                "at_risk": surge.at_risk,
                "most_at_risk": surge.most_at_risk,
                "dominant_state": surge.dominant_state,
                "dominant_next_action": surge.dominant_next_action,
                "most_urgent": list(surge.most_urgent),
                "console": link,
                "runbook": f"{link}#runbook",
            },
        },
        "links": [{"href": link, "text": "Open the region's at-risk events in the on-call console"}],
        "client": "reset-delivery console",
        "client_url": link,
    }
