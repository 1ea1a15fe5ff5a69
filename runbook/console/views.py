"""The console's pages. Each renders one template; an htmx refresh gets only its live partial."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Avg, Count, Q, QuerySet
from django.db.models.functions import TruncDate
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import patch_vary_headers

from notify.models import Event, is_event_id
from notify.rules import machine
from notify.rules.vocabulary import Channel, NextAction, State
from plumbing.clock import current_clock
from policies.cache import policy_version
from policies.models import PolicyVersion, Stage
from runbook.console import answers, audit, timeline
from runbook.console.access import ConsoleRequest, requires
from runbook.console.forms import NoteForm
from runbook.models import AuditAction, AuditEntry, Page, PageMode, Surge

PAGE_SIZE = 50
# The event page shows this many of the newest observations; a runaway event (a provider
# replaying callbacks) must not make the page, or its refresh every few seconds, unbounded.
HISTORY_LIMIT = 100
# The states an event can be open in (with a fallback; without one sms_failed is terminal).
OPEN_STATES = [state for state in State if not machine.is_terminal(state, fallback_available=True)]
FOLLOW_UP_PAGE_SIZE = 50


def _render(request: ConsoleRequest, template: str, partial: str, context: dict[str, object]) -> HttpResponse:
    """Render the page, or only its live partial for an htmx request (the same URL serves both)."""
    name = f"{template}#{partial}" if request.htmx else template
    response = render(request, name, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


@dataclass(frozen=True)
class Row:
    event: Event
    timing: answers.Timing
    follow_up: bool
    owner_live: bool  # answers.lease_live
    failing: bool  # answers.failing


@dataclass(frozen=True)
class Filters:
    region: str
    state: str
    page: int

    @classmethod
    def of(cls, request: ConsoleRequest, regions: list[str]) -> "Filters":
        region = request.GET.get("region", "")
        state = request.GET.get("state", "")
        try:
            page = max(1, int(request.GET.get("page", "1")))
        except ValueError:
            page = 1
        return cls(region if region in regions else "", state if state in OPEN_STATES else "", page)

    def query(self, **changes: object) -> str:
        """Return the query string of these filters with ``changes`` applied (empty values left out)."""
        values = {"region": self.region, "state": self.state, "page": self.page, **changes}
        if values["page"] == 1:
            values["page"] = ""
        return "&".join(f"{key}={value}" for key, value in values.items() if value)


def _follow_ups() -> QuerySet[AuditEntry]:
    return AuditEntry.objects.filter(action=AuditAction.FOLLOW_UP, applied=True)


def _marked_for_follow_up(event_ids: list[str]) -> set[str]:
    # One query for the page's rows (audit_event_time_idx leads with the event id). Not an
    # EXISTS per row: the planner may hash that over every follow-up ever written.
    return set(_follow_ups().filter(event_id__in=event_ids).values_list("event_id", flat=True).distinct())


@requires("runbook.view_console")
def event_list(request: ConsoleRequest) -> HttpResponse:
    """Open events, most urgent (least action budget) first.

    Open means "has an act_by": NULL exactly when terminal, so every query here walks
    the partial index event_open_act_by_idx, whose size is the open events, not all of them.
    """
    search = request.GET.get("q", "").strip()
    # Only an id shaped as ours is looked up: anything else (a NUL, which PostgreSQL refuses
    # with an error) finds nothing, and the list says so.
    if search and is_event_id(search) and Event.objects.filter(pk=search).exists():
        return redirect("runbook:event", event_id=search)
    regions = list(PolicyVersion.objects.order_by("region").values_list("region", flat=True).distinct())
    filters = Filters.of(request, regions)
    open_events: QuerySet[Event] = Event.objects.filter(act_by__isnull=False)
    if filters.region:
        open_events = open_events.filter(region=filters.region)
    # COUNT(*), not COUNT(id): an index-only scan of event_open_state_idx answers it.
    counts = dict(open_events.order_by().values_list("state").annotate(n=Count("*")))
    listed = open_events.filter(state=filters.state) if filters.state else open_events
    total = counts.get(filters.state, 0) if filters.state else sum(counts.values())
    pages = max(1, -(-total // PAGE_SIZE))
    page = min(filters.page, pages)
    offset = (page - 1) * PAGE_SIZE
    page_events = (
        listed.order_by("act_by", "id")
        .only(
            "id", "region", "state", "state_entered_at", "next_action", "next_action_at", "act_by",
            "lease_owner", "lease_expires_at", "policy_id", "step_failures",
        )
        [offset : offset + PAGE_SIZE]
    )  # fmt: skip
    now = current_clock().now()
    shown = [filters.region] if filters.region else regions
    events = list(page_events)
    follow_up = _marked_for_follow_up([event.id for event in events])
    rows = [_row(event, now, event.id in follow_up) for event in events]
    context = {
        "rows": rows,
        "filters": filters,
        "regions": regions,
        # Each state with its count and the query that lists it (keeping the region filter).
        "states": [(state, counts.get(state, 0), filters.query(state=state, page=1)) for state in OPEN_STATES],
        "total": total,
        "at_risk": sum(row.timing.at_risk for row in rows),
        "page": page,
        "pages": pages,
        "previous_query": filters.query(page=page - 1) if page > 1 else None,
        "next_query": filters.query(page=page + 1) if page < pages else None,
        "refresh_query": filters.query(page=page),
        "search_missed": bool(search),
        "now": now,
        "behind": _behind(now),
        # A region's open surge, above the list: what the responder was paged for.
        "surges": [surge for surge in Surge.objects.filter(resolved_at__isnull=True) if surge.region in shown],
    }
    return _render(request, "runbook/event_list.html", "results", context)


# A lag under this is the ordinary time between a step falling due and a worker taking it.
BEHIND_AFTER = timedelta(seconds=1)


def _behind(now: datetime) -> timedelta | None:
    """How long due steps have waited for a worker, when that says the system is behind (else None)."""
    lag = answers.schedule_lag(now)
    return lag if lag > BEHIND_AFTER else None


def _row(event: Event, now: datetime, follow_up: bool) -> Row:
    timing = answers.timing(event, policy_version(event.policy_id), now)
    return Row(event, timing, follow_up, answers.lease_live(event, now), answers.failing(event))


@requires("runbook.view_console")
def event_detail(request: ConsoleRequest, event_id: str) -> HttpResponse:
    """The page a responder lands on from a page: who owns it, what was seen, action budget, next step."""
    event = get_object_or_404(Event.objects.select_related("policy"), pk=event_id)
    claims = {Channel(claim.channel): claim for claim in event.claims.all()}
    newest_first = list(event.observations.order_by("-recorded_at", "-id")[:HISTORY_LIMIT])
    transitions = list(event.transitions.order_by("version"))
    now = current_clock().now()
    described = answers.describe(event, event.policy, claims, answers.last_real_observation(newest_first), now)
    met = answers.last_real_observation_per_channel(newest_first)
    user = request.user
    may_act = user.has_perm("runbook.act_on_events")
    context = {
        "status": described,
        "event": event,
        # Each claim with what it last met: its state alone hides an unresolved SMS or a lost email send.
        "claims": [(claims[channel], met.get(channel)) for channel in Channel if channel in claims],
        "observations": newest_first,
        "history_truncated": len(newest_first) == HISTORY_LIMIT,
        "transitions": transitions,
        "timelines": [
            timeline.build(event, event.policy, claims, list(reversed(newest_first)), transitions, now, layout)
            for layout in (timeline.WIDE, timeline.NARROW)
        ],
        "console_actions": AuditEntry.objects.filter(event_id=event.id)
        .exclude(action=AuditAction.VIEW_RAW_STATUS)
        .select_related("user")
        .order_by("-at")[:20],
        "may_act": may_act,
        # Only a lease that stops a worker: a terminal event's stale lease holds nothing back.
        "may_release": may_act and described.owner.holder != "" and described.owner.stuck,
        "may_claim": may_act and described.fallback.claimable_now,
        "may_view_raw": user.has_perm("runbook.view_raw_status"),
        "page": Page.objects.filter(event=event).first(),
        "note_form": NoteForm(),
        # The runbook panel sits outside the refreshed part (an open panel must stay open);
        # a refresh says so when the situation it describes has changed.
        "shown_situation": _situation(request.GET.get("shown", "")),
    }
    return _render(request, "runbook/event_detail.html", "live", context)


def _situation(value: str) -> str:
    return value if value in {situation.value for situation in answers.Situation} else ""


@requires("runbook.view_console")
def follow_ups(request: ConsoleRequest) -> HttpResponse:
    """Events marked for follow-up, newest mark first, whatever state their event is in now.

    The list of open events cannot carry this: an event is most often marked once it has
    ended (expired, no fallback left) and support has to reach the subscriber another way.
    """
    try:
        page = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        page = 1
    offset = (page - 1) * FOLLOW_UP_PAGE_SIZE
    # Walks audit_follow_up_idx newest first; one row more than shown tells whether there
    # is an older page without counting every follow-up ever written.
    marks = list(_follow_ups().select_related("user").order_by("-at", "-id")[offset : offset + FOLLOW_UP_PAGE_SIZE + 1])
    shown = marks[:FOLLOW_UP_PAGE_SIZE]
    states = dict(Event.objects.filter(pk__in={mark.event_id for mark in shown}).values_list("id", "state"))
    context = {
        "marks": [(mark, states.get(mark.event_id, "")) for mark in shown],
        "page": page,
        "previous_page": page - 1 if page > 1 else None,
        "next_page": page + 1 if len(marks) > FOLLOW_UP_PAGE_SIZE else None,
    }
    return render(request, "runbook/follow_ups.html", context)


REVIEW_DAYS = 14


@requires("runbook.view_console")
def page_review(request: ConsoleRequest) -> HttpResponse:
    """Would-have-paged (observe) and paged events by region and day, to review the threshold.

    Before a region's policy switches from observe to page, this is the evidence: how many
    pages the margin would have sent, for which states, with how much action budget left.
    """
    since = current_clock().now() - timedelta(days=REVIEW_DAYS)
    recent = Page.objects.filter(opened_at__gte=since)  # page_opened_idx
    days = (
        recent.annotate(day=TruncDate("opened_at"))
        .values("day", "region")
        .annotate(
            observed=Count("pk", filter=Q(mode=PageMode.OBSERVE)),
            paged=Count("pk", filter=Q(mode=PageMode.PAGE)),
            delivered=Count("pk", filter=Q(mode=PageMode.PAGE, trigger_sent_at__isnull=False)),
            covered=Count("pk", filter=Q(surge__isnull=False)),
            mean_action_budget=Avg("budget_seconds"),
        )
        .order_by("-day", "region")
    )
    surges = Surge.objects.filter(opened_at__gte=since)  # surge_opened_idx
    surges_by_day = {
        (row["day"], row["region"]): row["n"]
        for row in surges.annotate(day=TruncDate("opened_at")).values("day", "region").annotate(n=Count("pk"))
    }
    # Incidents with surges grouping a region's at-risk events, against one per event without.
    by_day = [
        day | {"surges": (n := surges_by_day.get((day["day"], day["region"]), 0)),
               "incidents": day["observed"] + day["paged"] - day["covered"] + n}
        for day in days
    ]  # fmt: skip
    context = {
        "days": by_day,
        "surges": surges.order_by("-opened_at", "-id")[:20],
        "regions": _regions_under_review(recent),
        "may_draft": request.user.is_staff and request.user.has_perm("policies.add_policyversion"),
        "review_days": REVIEW_DAYS,
        "latest": recent.order_by("-opened_at", "-id")[:50],
    }
    return render(request, "runbook/page_review.html", context)


# A page whose event had nothing left to do but expire told a responder nothing they could act on.
_NO_STEP_LEFT = Q(next_action__in=[NextAction.EXPIRE, NextAction.NONE])


def _regions_under_review(recent: QuerySet[Page]) -> list[dict[str, object]]:
    """Per region: its mode now, and its would-have-paged events with a step left and without one."""
    counted = {
        row["region"]: row
        for row in recent.filter(mode=PageMode.OBSERVE)
        .values("region")
        .annotate(actionable=Count("pk", filter=~_NO_STEP_LEFT), without_action=Count("pk", filter=_NO_STEP_LEFT))
    }
    published = PolicyVersion.objects.filter(status=Stage.PUBLISHED).order_by("region")
    return [
        {
            "region": policy.region,
            "version": str(policy),
            "mode": policy.alert_mode,
            "actionable": counted.get(policy.region, {}).get("actionable", 0),
            "without_action": counted.get(policy.region, {}).get("without_action", 0),
        }
        for policy in published
    ]


@requires("runbook.view_raw_status")
def raw_statuses(request: ConsoleRequest, event_id: str) -> HttpResponse:
    """The provider's own words for each observation: shown on purpose, and audited."""
    event = get_object_or_404(Event, pk=event_id)
    observations = list(event.observations.order_by("-recorded_at", "-id")[:HISTORY_LIMIT])
    audit.record(request.user, AuditAction.VIEW_RAW_STATUS, event.id, applied=True)
    return render(request, "runbook/raw_statuses.html", {"event": event, "observations": observations})
