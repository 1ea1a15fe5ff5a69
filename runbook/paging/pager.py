"""Delivering pages to a PagerDuty Events v2 compatible endpoint, durably and politely.

``Page`` rows are the outbox: a trigger when the event went at risk, a resolve once it
is terminal. A delivery run works in three steps:

1. **grant**: the due pages, oldest first, as many per routing key as its rate-limit quota
   grants (``pager_quota``).
2. then in waves of ``PAGER_CONCURRENCY`` pages: **claim** each (database, this thread)
   with a conditional UPDATE, so two deliverers never send the same message at once, and
   re-check a trigger against its event: an event that ended gets no trigger, and the
   payload says what ``decide`` allows now, not the stored schedule; **call** (no
   database, side by side), each POST under one deadline of ``PAGER_TIMEOUT``
   (``pager_client``); **record** each outcome (database, this thread), fenced by the
   claim. A failure is retried with a backoff of its own per message, capped below the
   policy's page margin; a 429 pauses the routing key for its ``Retry-After``.

The payload carries the event id, region, state, remaining action budget and the console link:
never a phone number, address or reset link.
"""

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice, zip_longest
from typing import Any

from django.conf import settings
from django.db.models import Case, F, Value, When
from django.urls import reverse

from notify import tallies
from plumbing.clock import Clock, current_clock
from policies.cache import published_version
from runbook.models import Page, PageReason
from runbook.paging import pagerduty, quota, risk, surge_pager
from runbook.paging.pagerduty import PagerError

log = logging.getLogger("runbook.pager")

SUMMARY = "reset_delivery_deadline_at_risk"
FAILING_SUMMARY = "reset_delivery_step_failing"
BATCH = 50
FIRST_RETRY = timedelta(seconds=2)
TRIGGER, RESOLVE = "trigger", "resolve"
SENT, FAILED, SKIPPED = "sent", "failed", "skipped"

Send = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Delivered:
    sent: int
    failed: int
    skipped: int = 0  # claimed with nothing left to send (the event ended first)


@dataclass(frozen=True)
class Claimed:
    """A page this run holds, and what it owes the pager, built while the database was at hand.

    ``action`` None: nothing any more (``why_not`` says why, for a trigger). ``error``: the
    message could not even be built (no routing key for the region), so nothing is sent.
    """

    page: Page
    action: str | None
    message: dict[str, Any] | None = None
    error: PagerError | None = None
    why_not: str = ""


def post_to_pager(message: dict[str, Any]) -> None:
    pagerduty.post(settings.PAGER_EVENTS_URL, message, timedelta(seconds=settings.PAGER_TIMEOUT))


def deliver_due(clock: Clock | None = None, *, send: Send = post_to_pager) -> Delivered:
    """Send every page message that is due (within the quotas); count what landed, failed, or had nothing to send."""
    clock = clock or current_clock()
    outcomes: Counter[str] = Counter()
    # Routing keys that are out of quota, or that the pager answered 429 for, for the rest of this run.
    blocked: set[str] = set()
    # Surges first: each stands for many events (runbook/paging/surge_pager.py).
    outcomes += surge_pager.deliver_due(clock, send, hold=claim_hold(), backoff=_surge_backoff, blocked=blocked)
    # Up to PAGER_CONCURRENCY calls side by side, each under its own deadline: a run of BATCH
    # pages to a pager that times out lasts BATCH / PAGER_CONCURRENCY deadlines, not BATCH of
    # them. Claimed a wave at a time, each page just before its call, so a trigger's re-check
    # of its event is at most one deadline old when it goes out. The threads only call out:
    # every database read and write stays on this thread.
    with ThreadPoolExecutor(max_workers=settings.PAGER_CONCURRENCY, thread_name_prefix="pager") as pool:
        for wave in _waves(_due(clock.now()), settings.PAGER_CONCURRENCY):
            claims = [
                claimed
                for page_id, routing_key in wave
                if routing_key not in blocked and (claimed := claim(page_id, clock)) is not None
            ]
            claims = _within_quota(claims, blocked, clock.now())
            for claimed, error in zip(claims, pool.map(lambda claimed: _call(claimed, send), claims), strict=True):
                outcomes[record(claimed, error, clock)] += 1
                if error is not None and error.throttled:
                    blocked.add(_routing_key(claimed.page))
    return Delivered(outcomes[SENT], outcomes[FAILED], outcomes[SKIPPED])


def _due(now: datetime) -> list[tuple[int, str]]:
    """Up to ``BATCH`` due pages with their routing keys: from each key in turn, oldest first within it.

    A key paused by a 429 or out of quota holds back only its own pages, which are not even
    taken: taken oldest first across every key, eighty pages of a paused key filled each run
    while another region's trigger waited behind them for as long as the pause lasted.
    """
    due = Page.objects.filter(next_attempt_at__lte=now)  # page_outbox_idx
    regions_of: defaultdict[str, list[str]] = defaultdict(list)
    for region in due.order_by().values_list("region", flat=True).distinct():
        regions_of[_routing_key_of(region)].append(region)
    queues = [
        [
            (attempt_at, page_id, routing_key)
            for attempt_at, page_id in due.filter(region__in=regions)
            .order_by("next_attempt_at")
            .values_list("next_attempt_at", "pk")[:BATCH]
        ]
        for routing_key, regions in regions_of.items()
        # "": no routing key; its pages fail at once, spending nothing.
        if not routing_key or quota.may_send(routing_key, now)
    ]
    turns = zip_longest(*sorted(queues))  # the key whose oldest page is oldest goes first
    in_turn = ((page_id, routing_key) for turn in turns for _, page_id, routing_key in filter(None, turn))
    return list(islice(in_turn, BATCH))


def _waves(pages: list[tuple[int, str]], size: int) -> Iterator[list[tuple[int, str]]]:
    for start in range(0, len(pages), size):
        yield pages[start : start + size]


def _within_quota(claims: list[Claimed], blocked: set[str], now: datetime) -> list[Claimed]:
    """The claims that send nothing, and those that send within their key's quota; the rest are put back.

    Tokens are taken after the claim's re-check, for messages that will really go out: a
    page whose event ended spends none, so a backlog of dying pages cannot starve the
    triggers of events still open.
    """
    kept: list[Claimed] = []
    sending: defaultdict[str, list[Claimed]] = defaultdict(list)
    for claimed in claims:
        if claimed.message is None:  # nothing to send, or no routing key to send it with
            kept.append(claimed)
        else:
            sending[_routing_key(claimed.page)].append(claimed)
    for routing_key, group in sending.items():
        granted = quota.take(routing_key, len(group), now)
        kept += group[:granted]
        if granted < len(group):
            blocked.add(routing_key)
            for claimed in group[granted:]:
                # Due again, for the next run; fenced like any outcome of this claim.
                Page.objects.filter(pk=claimed.page.pk, attempts=claimed.page.attempts).update(next_attempt_at=now)
    return kept


def _routing_key(page: Page) -> str:
    return _routing_key_of(page.region)


def _routing_key_of(region: str) -> str:
    # "": the region has none (PAGER_ROUTING_KEYS); its message fails at once, spending no quota.
    return settings.PAGER_ROUTING_KEYS.get(region, "")


def claim_hold() -> timedelta:
    """Longer than one pager call can take, so no second deliverer takes a page mid-call."""
    return timedelta(seconds=settings.PAGER_TIMEOUT + 5)


def claim(page_id: int, clock: Clock) -> Claimed | None:
    # The clock is read for each page: a run that took long must not claim its last pages
    # with holds that are already running out.
    now = clock.now()
    # Only one deliverer moves next_attempt_at past now; the others see 0 rows. The attempt
    # count it bumps is the fencing token of this delivery's outcome.
    won = Page.objects.filter(pk=page_id, next_attempt_at__lte=now).update(
        next_attempt_at=now + claim_hold(), attempts=F("attempts") + 1
    )
    if not won:
        return None
    page = Page.objects.select_related("event__policy").get(pk=page_id)
    now_true = None
    if page.resolved_at is None and page.trigger_sent_at is None:
        # Re-checked now, not when the page opened: a retried trigger must not wake someone
        # for an event that has just ended, or that has nothing left to do before it expires.
        now_true = risk.decide_now([page.event], now)[page.event_id]
        if not risk.pageable(now_true, now):
            return Claimed(page, None, why_not=f"no trigger sent: the event is {now_true.state}, nothing left to do")
        action: str | None = TRIGGER
    else:
        action = _pending_action(page)
    if action is None:
        return Claimed(page, None)
    try:
        return Claimed(page, action, message(page, action, now_true, now))
    except PagerError as error:
        return Claimed(page, action, error=error)


def _call(claimed: Claimed, send: Send) -> PagerError | None:
    if claimed.error is not None or claimed.message is None:
        return claimed.error
    try:
        send(claimed.message)
    except PagerError as error:
        return error
    return None


def record(claimed: Claimed, error: PagerError | None, clock: Clock) -> str:
    """Record one delivery's outcome (``SENT``, ``FAILED``, ``SKIPPED``) unless another deliverer claimed it since."""
    page, action = claimed.page, claimed.action
    # Fenced by the attempt count this delivery claimed: a deliverer whose hold ran out
    # (and whose page another one has claimed since) records nothing.
    mine = Page.objects.filter(pk=page.pk, attempts=page.attempts)
    now = clock.now()
    if action is None:
        # Nothing owed now; due again at once only if the event ended while this run held
        # the page (a trigger that may have landed earlier is owed its resolve).
        due = _due_if_resolved(now) if page.resolved_at is None else None
        mine.update(next_attempt_at=due, last_error=claimed.why_not)
        return SKIPPED
    if error is not None:
        _failed(page, action, error, now, mine)
        return FAILED
    if action == TRIGGER:
        mine.update(trigger_sent_at=now, trigger_failures=0, last_error="", next_attempt_at=_due_if_resolved(now))
    else:
        mine.update(resolve_sent_at=now, resolve_failures=0, last_error="", next_attempt_at=None)
    log.info("page_sent", extra={"event_id": page.event_id, "action": action, "region": page.region})
    return SENT


def _due_if_resolved(now: datetime) -> Case:
    return Case(When(resolved_at__isnull=False, then=Value(now)), default=None)


def _failed(page: Page, action: str, error: PagerError, now: datetime, mine: Any) -> None:
    failures = (page.trigger_failures if action == TRIGGER else page.resolve_failures) + 1
    wait = error.retry_after or retry_wait(failures, page.event.policy.page_margin)
    if error.throttled:
        # The pager's limit is per routing key: every page of the key waits, not only this one.
        quota.pause(_routing_key(page), now + wait)
    uncertain = page.trigger_uncertain or (action == TRIGGER and not error.answered)
    mine.update(
        next_attempt_at=now + wait,
        last_error=str(error)[:200],
        trigger_uncertain=uncertain,
        **{f"{action}_failures": failures},
    )
    tallies.add_for_event(tallies.PAGE_DELIVERY_FAILURES, page.event_id, label=action)
    log.warning("page_failed", extra={"event_id": page.event_id, "action": action, "error": str(error)})


def retry_wait(failures: int, page_margin: timedelta) -> timedelta:
    """How long a message waits after ``failures`` failures in a row: 2 s doubling, at most a quarter of the margin.

    A page opens with at most ``page_margin`` of action budget left; a trigger that waited
    longer than that between tries would land after the budget it warns about was spent.
    A quarter leaves room for several tries inside the margin; a resolve gets the same cap,
    so a responder is not left chasing an event that ended minutes ago.
    """
    cap: timedelta = max(page_margin / 4, FIRST_RETRY)
    doubled: timedelta = FIRST_RETRY * 2 ** min(failures - 1, 10)
    return min(cap, doubled)


def _surge_backoff(failures: int, region: str) -> timedelta:
    policy = published_version(region)
    return retry_wait(failures, policy.page_margin if policy is not None else FIRST_RETRY)


def console_link(event_id: str) -> str:
    return settings.PUBLIC_BASE_URL + reverse("runbook:event", args=[event_id])


def message(
    page: Page, action: str, now_true: risk.Decided | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """The Events v2 message for ``action`` of a page; a trigger describes the event as ``now_true`` has it."""
    routing_key = _routing_key(page)
    if not routing_key:
        raise PagerError(f"no routing key for region {page.region} (PAGER_ROUTING_KEYS)", answered=True)
    body: dict[str, Any] = {"routing_key": routing_key, "event_action": action, "dedup_key": page.event_id}
    if action == RESOLVE:
        return body
    state = now_true.state if now_true else page.state
    next_action = now_true.next_action if now_true else page.next_action
    action_budget = now_true.action_budget_seconds(now) if now_true and now else page.budget_seconds
    link = console_link(page.event_id)
    details = {
        "event_id": page.event_id,
        "region": page.region,
        "state": state,
        "next_action": next_action,
        "remaining_budget_seconds": round(action_budget, 1),
        "console": link,
        "runbook": f"{link}#runbook",
    }
    if page.reason == PageReason.STEP_FAILING:
        error = page.event.step_error or "an error"
        kind = FAILING_SUMMARY
        summary = f"{kind}: {page.region} {state}, its step raises {error}"
        details["look_at"] = (
            f"the worker's step for this event raises {error}: the step_failed log lines for this event id "
            "say where; the event backs off and still expires on time"
        )
    else:
        kind = SUMMARY
        summary = f"{kind}: {page.region} {state}, {action_budget:.0f}s of action budget left"
    return body | {
        "payload": {
            "summary": summary,
            "source": "reset-delivery",
            "severity": "critical",
            "timestamp": page.opened_at.isoformat(),
            "component": "reset-delivery",
            "group": page.region,
            "class": kind,
            "custom_details": details,
        },
        "links": [{"href": link, "text": "Open the event in the on-call console"}],
        "client": "reset-delivery console",
        "client_url": link,
    }


def _pending_action(page: Page) -> str | None:
    """What a page whose trigger was sent, or whose event ended, still owes the pager."""
    if page.resolved_at is None:
        return None  # its trigger landed; the resolve waits for the event to end
    if page.trigger_sent_at is not None or page.trigger_uncertain:
        # After a trigger that landed, or one that may have (an attempt whose answer was lost):
        # resolve. With the same dedup_key a resolve of an incident never opened is harmless.
        return RESOLVE if page.resolve_sent_at is None else None
    # The event ended before any trigger went out: waking someone now helps nobody.
    return None
