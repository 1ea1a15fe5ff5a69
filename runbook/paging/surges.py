"""Surges: one incident for a region while more of its events are at risk than its policy allows.

When a provider slows down or the workers fall behind, many events run out of action budget
at once, and one incident per event tells the responder nothing a count would not. Each
evaluation counts the region's pageable at-risk events (``risk.pageable_events``); above the
region's ``surge_threshold`` one ``Surge`` opens, and the region's pages whose trigger has not
gone out yet are covered by it (as are the pages opened while it stays open). Its count is
updated in place, at most once per evaluation interval; it resolves once the region has been
at or under the threshold for ``surge_quiet_period``, and the events still at risk then page
on their own.
"""

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, QuerySet, Value, When

from notify.models import Event
from policies.cache import published_version
from policies.models import AlertMode, PolicyVersion
from runbook.models import Page, PageMode, PageReason, Surge

# How many of the most urgent events a surge names: enough to start with, few enough to read.
MOST_URGENT = 5


@dataclass(frozen=True)
class Count:
    """A region's pageable at-risk events in one evaluation."""

    at_risk: int
    dominant_state: str
    dominant_next_action: str
    most_urgent: list[str]


@dataclass(frozen=True)
class Surges:
    opened: int
    resolved: int


def interval() -> timedelta:
    """The evaluation interval: how often a surge's count may change at the pager."""
    return timedelta(seconds=settings.NOTIFY_RISK_INTERVAL)


def count(pageable: QuerySet[Event]) -> dict[str, Count]:
    """Each region's pageable at-risk events (``risk.pageable_events``): how many, where most of them are,
    the most urgent."""
    rows = list(pageable.order_by("act_by", "id").values_list("id", "region", "state", "next_action"))
    by_region: dict[str, list[tuple[str, str, str]]] = {}
    for event_id, region, state, next_action in rows:
        by_region.setdefault(region, []).append((event_id, state, next_action))
    counts = {}
    for region, events in by_region.items():
        states = Counter(state for _, state, _ in events)
        actions = Counter(action for _, _, action in events)
        counts[region] = Count(
            at_risk=len(events),
            dominant_state=states.most_common(1)[0][0],
            dominant_next_action=actions.most_common(1)[0][0],
            most_urgent=[event_id for event_id, _, _ in events[:MOST_URGENT]],
        )
    return counts


def evaluate(now: datetime, pageable: QuerySet[Event]) -> Surges:
    """Open, update and resolve each region's surge from this evaluation's count of ``pageable`` events.

    Safe to run concurrently: the partial unique key on an open surge's region makes a second
    insert fail, and the loser updates the row the winner made.
    """
    counts = count(pageable)
    open_surges = {surge.region: surge for surge in Surge.objects.filter(resolved_at__isnull=True)}
    opened = resolved = 0
    for region in sorted(set(counts) | set(open_surges)):
        policy = published_version(region)
        if policy is None:
            # No policy says what a surge of this region is any more: its events page on their own.
            resolved += _resolve(open_surges[region], now) if region in open_surges else 0
            continue
        counted = counts.get(region, Count(0, "", "", []))
        surge = open_surges.get(region)
        if counted.at_risk > policy.surge_threshold:
            if surge is None:
                surge = _open(region, policy, counted, now)
                opened += surge is not None
            else:
                _recount(surge, counted, now, quiet=False)
            if surge is not None:
                cover(surge)
        elif surge is not None:
            _recount(surge, counted, now, quiet=True)
            if surge.quiet_since is not None and now - surge.quiet_since >= policy.surge_quiet_period:
                resolved += _resolve(surge, now)
    _uncover_orphans(now)
    return Surges(opened, resolved)


def open_surge(region: str) -> Surge | None:
    return Surge.objects.filter(region=region, resolved_at__isnull=True).first()


def _open(region: str, policy: PolicyVersion, counted: Count, now: datetime) -> Surge | None:
    mode = PageMode.PAGE if policy.alert_mode == AlertMode.PAGE else PageMode.OBSERVE
    try:
        # A savepoint: a racing evaluator's insert refuses this one without aborting the caller's work.
        with transaction.atomic():
            return Surge.objects.create(
                region=region,
                mode=mode,
                opened_at=now,
                at_risk=counted.at_risk,
                most_at_risk=counted.at_risk,
                dominant_state=counted.dominant_state,
                dominant_next_action=counted.dominant_next_action,
                most_urgent=counted.most_urgent,
                counted_at=now,
                next_attempt_at=now if mode == PageMode.PAGE else None,
            )
    except IntegrityError:
        return open_surge(region)  # another evaluator opened it: this evaluation counts into that one


def _recount(surge: Surge, counted: Count, now: datetime, *, quiet: bool) -> None:
    """Store this evaluation's count; owe the pager an update when it changed, at most once per interval."""
    fields: dict[str, object] = {
        "at_risk": counted.at_risk,
        "most_at_risk": max(surge.most_at_risk, counted.at_risk),
        "counted_at": now,
        "quiet_since": (surge.quiet_since or now) if quiet else None,
    }
    if counted.at_risk:
        fields |= {
            "dominant_state": counted.dominant_state,
            "dominant_next_action": counted.dominant_next_action,
            "most_urgent": counted.most_urgent,
        }
    Surge.objects.filter(pk=surge.pk, resolved_at__isnull=True).update(**fields)
    owed = Q(mode=PageMode.PAGE, trigger_sent_at__isnull=False, next_attempt_at__isnull=True)
    if counted.at_risk != surge.sent_at_risk and surge.trigger_sent_at is not None:
        # The same dedup key again: the pager updates the open incident in place.
        due = max(now, surge.trigger_sent_at + interval())
        Surge.objects.filter(owed, pk=surge.pk, resolved_at__isnull=True).update(next_attempt_at=due)
    for name, value in fields.items():
        setattr(surge, name, value)


def cover(surge: Surge) -> int:
    """Cover the region's open at-risk pages of its mode that no delivery has taken up: the surge speaks for them.

    Never attempted (``attempts`` 0): a page a deliverer holds, or whose trigger failed and
    may have landed, keeps its own course (its outcome is recorded under its own fence). A
    failing step pages on its own; so does a page of the other mode (the region's policy
    changed mode while the surge was open).
    """
    return Page.objects.filter(
        region=surge.region,
        mode=surge.mode,
        reason=PageReason.AT_RISK,
        surge__isnull=True,
        resolved_at__isnull=True,
        attempts=0,
    ).update(surge=surge, next_attempt_at=None)


def _uncover_orphans(now: datetime) -> int:
    """Pages covered by a surge that resolved meanwhile (a racing evaluator resolved it between this
    one's read and its write) page on their own from now, as ``_resolve`` would have made them."""
    return Page.objects.filter(surge__resolved_at__isnull=False, resolved_at__isnull=True).update(
        surge=None, next_attempt_at=Case(When(mode=PageMode.PAGE, then=Value(now)), default=Value(None))
    )


def _resolve(surge: Surge, now: datetime) -> int:
    """Resolve the surge; the events it covered that are still at risk page on their own from now."""
    owed_nothing = Q(trigger_sent_at__isnull=True, trigger_uncertain=False)
    with transaction.atomic():
        # Due now unless a delivery holds it (a count update on its way): that delivery's record
        # makes it due for the resolve after, so the resolve never overtakes the trigger.
        done = Surge.objects.filter(pk=surge.pk, resolved_at__isnull=True).update(
            resolved_at=now,
            next_attempt_at=Case(
                When(Q(mode=PageMode.OBSERVE) | owed_nothing, then=Value(None)),
                When(next_attempt_at__isnull=True, then=Value(now)),
                default=F("next_attempt_at"),
            ),
        )
        Page.objects.filter(surge=surge, resolved_at__isnull=True).update(
            surge=None,
            next_attempt_at=Case(When(mode=PageMode.PAGE, then=Value(now)), default=Value(None)),
        )
    return done
