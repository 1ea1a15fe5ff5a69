"""The chaos run's paging: its settings, the pager outage it injects, and the paging verdict.

The run's policy pages (alert mode ``page``) with a margin on the run's seconds scale, and
pages go to the simulator's PagerDuty Events v2 stand-in. The verdict turns the stand-in's
log of every message that arrived into ``runbook.paging.invariants.Received`` and checks the paging
invariants over it, counts what the stand-in refused and why, and measures how late the
pages opened while the step workers were paused were: a page is only worth something if it
comes while the backlog is on.
"""

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from bench.stats import spread
from simulator.pager_state import PagerLogEntry

if TYPE_CHECKING:
    from runbook.paging.invariants import Received

RISK_INTERVAL_SECONDS = 1.0
PAGER_TIMEOUT_SECONDS = 1.0
# An event goes at risk this long before its act_by, and stays pageable until its expiry,
# 1.1 to 1.4 s of steps after act_by: 5 s or more in all. A page opened as late as the
# ``page_late`` bound (4 s) is still opened, so lateness shows up as lateness, never as a
# page silently missed.
PAGE_MARGIN = timedelta(seconds=4)
# Beat's tick, the evaluation's own run and its commit, on top of one evaluation interval, on
# two cores shared with the web server, the simulator, three step workers and PostgreSQL: the
# integration proof holds the interval + 1 s on a quiet machine; chaos allows 3 s on top.
LATE_AFTER_SECONDS = RISK_INTERVAL_SECONDS + 3.0
# 32 characters, like PagerDuty's integration keys. A credential: the run searches every log for it.
ROUTING_KEY = "chaos0routing0key0not0a0real0one"
# The order of a pager going down and coming back: requests held past the client's deadline
# (the messages dropped), then 429 with Retry-After, then 5xx, then recovery. Each phase is
# long enough for the quota-paced outbox (about 100 messages a minute) to meet it several times.
OUTAGE_PHASES: tuple[dict[str, str | float], ...] = (
    {"mode": "timeout", "seconds": 4, "hang_seconds": 5},
    {"mode": "throttle", "seconds": 4, "retry_after": 2},
    {"mode": "error", "seconds": 4, "status": 503},
)
OUTAGE_SECONDS = sum(float(phase["seconds"]) for phase in OUTAGE_PHASES)
# The outage starts this long before the backlog ends: at-risk events' triggers meet it, and
# the resolves of the events the resumed workers then finish meet its later phases.
OUTAGE_BEFORE_BACKLOG_ENDS = 5.0
_REFUSED_BY = {"timeout": "timeout", "throttle": "429", "error": "5xx"}


def environment(simulator_url: str, region: str) -> dict[str, str]:
    """The paging settings of every process: evaluation every second, pages to the stand-in."""
    return {
        "NOTIFY_RISK_INTERVAL": str(RISK_INTERVAL_SECONDS),
        "PAGER_EVENTS_URL": f"{simulator_url}/v2/enqueue",
        "PAGER_ROUTING_KEYS": f"{region}={ROUTING_KEY}",
        "PAGER_TIMEOUT": str(PAGER_TIMEOUT_SECONDS),
    }


@dataclass
class Backlog:
    """When the step workers were paused, on the database's clock; ``ended`` None while they still are."""

    started: datetime
    ended: datetime | None = None

    def holds(self, moment: datetime) -> bool:
        return self.started <= moment and (self.ended is None or moment <= self.ended)

    def span(self) -> tuple[datetime, datetime]:
        """The stall as the paging audit takes it: a backlog never resumed lasts for ever."""
        return self.started, self.ended or datetime.max.replace(tzinfo=UTC)


def received(log: Iterable[PagerLogEntry]) -> list["Received"]:
    # Imported here: Django is set up only once the run has chosen its database.
    from runbook.paging.invariants import from_log

    return from_log(log)


def verdict(
    created: Sequence[str], log: Sequence[PagerLogEntry], backlogs: Sequence[Backlog]
) -> tuple[dict[str, object], list[dict[str, str]]]:
    """The summary's ``paging`` block, and the paging violations."""
    from runbook.models import Page, PageMode
    from runbook.paging import invariants

    pages = list(Page.objects.filter(event_id__in=created, mode=PageMode.PAGE).select_related("event__policy"))
    # At risk at act_by - margin, and act_by was opened_at + budget_seconds when the page opened
    # (the event's own act_by is gone once it ends).
    lateness = {
        page.event_id: page.event.policy.page_margin.total_seconds() - page.budget_seconds
        for page in pages
        if any(backlog.holds(page.opened_at) for backlog in backlogs)
    }
    outcomes = Counter(entry["outcome"] for entry in log)
    accepted = Counter(entry["action"] for entry in log if entry["outcome"] == "accepted")
    first_trigger: dict[str, datetime] = {}
    for message in received(entry for entry in log if entry["action"] == "trigger" and entry["outcome"] == "accepted"):
        first_trigger.setdefault(message.dedup_key, message.at)
    block = {
        "pages_opened": len(pages),
        "pages_opened_during_backlog": len(lateness),
        "triggers_accepted": accepted["trigger"],
        # Events that ended before their page's trigger reached the pager: nobody was woken for them.
        "pages_ended_untriggered": sum(
            page.event.act_by is None and page.event_id not in first_trigger for page in pages
        ),
        "resolves_accepted": accepted["resolve"],
        # What the outage refused, by its phases; 429s of the stand-in's own rate limit apart.
        "refused": {label: outcomes[mode] for mode, label in _REFUSED_BY.items()},
        "rate_limited": outcomes["rate_limited"],
        "invalid": outcomes["invalid"],
        "lateness_seconds": _spread(list(lateness.values())),
        # From the page's opening to its trigger's arrival: the outage, backoff and quota at work.
        "trigger_delay_seconds": _spread(
            [
                (first_trigger[page.event_id] - page.opened_at).total_seconds()
                for page in pages
                if page.event_id in first_trigger
            ]
        ),
    }
    in_flight = timedelta(seconds=PAGER_TIMEOUT_SECONDS + 1)
    # An outcome a paused step had observed lands only when the backlog ends: the audit dates that end so.
    stalls = [backlog.span() for backlog in backlogs]
    checked = invariants.check(received(log), in_flight=in_flight, stalls=stalls)
    violations = [violation.__dict__ for violation in checked]
    violations += _proof_violations(block, lateness)
    return block, violations


def _proof_violations(block: dict[str, object], lateness: dict[str, float]) -> list[dict[str, str]]:
    """Pages late, and a paging proof that proved nothing (no page in a backlog, an outage that met no message)."""
    found = []
    latest = max(lateness, key=lateness.__getitem__, default=None)
    if latest is not None and lateness[latest] > LATE_AFTER_SECONDS:
        detail = f"opened {lateness[latest]:.1f}s after the event went at risk (bound {LATE_AFTER_SECONDS:g}s)"
        found.append({"kind": "page_late", "event_id": latest, "detail": detail})
    if not lateness:
        found.append(
            {"kind": "no_page_during_backlog", "event_id": "", "detail": "no page opened while steps were paused"}
        )
    refused = block["refused"]
    assert isinstance(refused, dict)
    for label, count in refused.items():
        if not count:
            detail = f"no page message reached the pager during the outage's {label} phase: the outage proved nothing"
            found.append({"kind": "pager_outage_unmet", "event_id": "", "detail": detail})
    if block["invalid"]:
        detail = f"{block['invalid']} messages refused by the pager as invalid"
        found.append({"kind": "invalid_page_message", "event_id": "", "detail": detail})
    return found


def _spread(values: list[float]) -> dict[str, float | int] | None:
    if not values:
        return None
    p50, _, top = spread(values)
    return {"count": len(values), "p50": round(p50, 2), "max": round(top, 2)}
