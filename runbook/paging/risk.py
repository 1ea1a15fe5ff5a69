"""Which events are at risk of missing their deadline, and the pages that say so.

An event is at risk when its action budget (``act_by - now``) is within its policy's
page margin; it is pageable only while a step remains that someone could still take
(non-terminal, not yet past its expiry, next action not "expire"). A terminal SMS
failure with plenty of action budget left is not at risk: the fallback is routine. An
event whose worker step keeps raising (``Event.objects.failing``) is paged too, whatever
its action budget: it will not move until someone looks at it.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from django.conf import settings
from django.db.models import Case, DateTimeField, ExpressionWrapper, F, Max, Q, QuerySet, Value, When

from notify.models import Claim, Event
from notify.rules import machine
from notify.rules.vocabulary import Channel, NextAction
from policies.models import AlertMode, PolicyVersion
from runbook.models import Page, PageMode, PageReason, Surge
from runbook.paging import surges


@dataclass(frozen=True)
class Evaluation:
    opened: int  # new pages (either mode)
    not_pageable: int  # at risk by action budget, but nothing is left to do (expired or about to)
    resolved: int  # pages whose event reached a terminal state
    surges_opened: int = 0
    surges_resolved: int = 0


def at_risk_events(now: datetime) -> QuerySet[Event]:
    """Open events whose action budget is within their own policy's page margin.

    One range scan of event_open_act_by_idx up to the widest margin of any policy, then
    each row checked against its own policy's margin (a join to a table of a few rows).
    """
    widest = PolicyVersion.objects.aggregate(widest=Max("page_margin"))["widest"]
    if widest is None:
        return Event.objects.none()
    own_margin = ExpressionWrapper(Value(now) + F("policy__page_margin"), output_field=DateTimeField())
    return Event.objects.filter(act_by__isnull=False, act_by__lt=now + widest).filter(act_by__lt=own_margin)


class Scheduled(Protocol):
    """What ``pageable`` reads: an event's schedule as decided now (``Decided``), or a replayed event's."""

    @property
    def act_by(self) -> datetime | None: ...
    @property
    def expires_at(self) -> datetime: ...
    @property
    def next_action(self) -> str: ...


def pageable(event: Scheduled, now: datetime) -> bool:
    """Whether someone could still act: a step remains before the reset expires.

    ``pageable_events`` is the same test in SQL; the two are kept side by side on purpose.
    """
    return event.act_by is not None and now < event.expires_at and event.next_action != NextAction.EXPIRE


@dataclass(frozen=True)
class Decided:
    """An event's schedule as ``decide`` gives it now, not as its last write stored it.

    The stored ``next_action`` is only as recent as the worker's last write, and a dead
    worker writes nothing: its event still says ``poll_sms`` while ``claim_email`` is due.
    A page says what is true when it is opened and again when its trigger goes out.
    """

    act_by: datetime | None
    expires_at: datetime
    next_action: str
    state: str

    def action_budget_seconds(self, now: datetime) -> float:
        return (self.act_by - now).total_seconds() if self.act_by is not None else 0.0


def decide_now(events: Iterable[Event], now: datetime) -> dict[str, Decided]:
    """``decide`` for each event (its policy loaded with it), with all their claims in one query."""
    events = list(events)
    claims: defaultdict[str, dict[Channel, Claim]] = defaultdict(dict)
    for claim in Claim.objects.filter(event__in=[event.pk for event in events]).only(
        "event_id", "channel", "state", "next_attempt_at"
    ):
        claims[claim.event_id][Channel(claim.channel)] = claim
    decided = {}
    for event in events:
        decision = machine.decide(event, claims[event.pk], event.policy, now)
        decided[event.pk] = Decided(decision.act_by, event.expires_at, decision.action, event.state)
    return decided


def pageable_events(now: datetime) -> QuerySet[Event]:
    """The at-risk events ``pageable`` accepts, as one query (for counting them)."""
    return at_risk_events(now).filter(expires_at__gt=now).exclude(next_action=NextAction.EXPIRE)


def evaluate(now: datetime) -> Evaluation:
    """Open a page for each newly at-risk or failing, pageable event, and resolve pages whose event ended.

    Safe to run concurrently: the page's one-to-one key on the event makes a second
    insert for the same event a no-op, so two evaluators open one page between them.
    """
    # Surges first: a region over its threshold is covered before this evaluation's pages open.
    surged = surges.evaluate(now, pageable_events(now))
    covering = {surge.region: surge for surge in Surge.objects.filter(resolved_at__isnull=True)}
    at_risk = at_risk_events(now).filter(page__isnull=True).select_related("policy")
    failing = Event.objects.failing().filter(page__isnull=True).select_related("policy")  # event_step_failures_idx
    candidates = list({event.pk: event for event in [*failing, *at_risk]}.values())
    decided = decide_now(candidates, now)
    opened = not_pageable = 0
    for event in candidates:
        now_true = decided[event.pk]
        if not pageable(now_true, now):
            not_pageable += 1
            continue
        mode = PageMode.PAGE if event.policy.alert_mode == AlertMode.PAGE else PageMode.OBSERVE
        failing_now = event.step_failures >= settings.NOTIFY_FAILING_AFTER
        # A failing step is its own kind of trouble, not the surge's: it pages on its own.
        surge = covering.get(event.region)
        if failing_now or (surge is not None and surge.mode != mode):
            surge = None  # pages on its own: see surges.cover
        # get_or_create inserts, and on the unique key's IntegrityError (another evaluator's
        # insert won) returns that row: one page per event, whoever got there first.
        _, created = Page.objects.get_or_create(
            event=event,
            defaults={
                "region": event.region,
                "mode": mode,
                "reason": PageReason.STEP_FAILING if failing_now else PageReason.AT_RISK,
                "opened_at": now,
                "state": event.state,
                "next_action": now_true.next_action,
                "budget_seconds": now_true.action_budget_seconds(now),
                "surge": surge,
                "next_attempt_at": now if mode == PageMode.PAGE and surge is None else None,
            },
        )
        opened += created
    return Evaluation(opened, not_pageable, resolve(now), surged.opened, surged.resolved)


def resolve(now: datetime) -> int:
    """Mark the pages of events that reached a terminal state as resolved; say what each still owes.

    One statement, so every page is judged on one snapshot: two statements under read
    committed could see an event end between them and leave its page resolved but never due.
    A page whose trigger landed, or may have (an attempt went unanswered), owes a resolve: due
    now, unless a delivery holds it or it is backing off (that delivery sends the resolve
    after). A page that never sent anything owes nothing: it leaves the outbox at once (a
    trigger in flight that lands makes it due again for its resolve, see ``pager.record``).
    """
    owed_nothing = Q(trigger_sent_at__isnull=True, trigger_uncertain=False)
    return Page.objects.filter(resolved_at__isnull=True, event__act_by__isnull=True).update(
        resolved_at=now,
        next_attempt_at=Case(
            When(Q(mode=PageMode.OBSERVE) | owed_nothing, then=Value(None)),
            When(next_attempt_at__isnull=True, then=Value(now)),
            default=F("next_attempt_at"),
        ),
    )
