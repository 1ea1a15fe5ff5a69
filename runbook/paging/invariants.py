"""Did the pager get what it should have: the paging invariants, read from the database and a pager's log.

Used by the chaos run and the paging proofs, with the log a PagerDuty stand-in kept of
every message it was sent (``Received``). Against the ``Page`` rows and their events:

- ``duplicate_trigger``: a trigger accepted more than once for one event (one page per event);
- ``trigger_after_end``: a trigger that reached the pager after its event had ended (in the
  database: see ``end_known_at``);
- ``undelivered_trigger``: a page of an event still open whose trigger never landed, nor that of
  the surge that covers it;
- ``unresolved_page``: an ended event whose trigger landed (or may have) without a resolve accepted;
- ``unresolved_surge``: a resolved surge whose trigger landed (or may have) without a resolve accepted.

A trigger sent while the pager timed out is not counted as accepted: the stand-in drops
it, as a load balancer in front of a pager that is down would.
"""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q

from notify.invariants import Violation
from runbook.models import Page, PageMode, Surge

ACCEPTED = 202


@dataclass(frozen=True)
class Received:
    """One message as the pager saw it: what, for which event, when it arrived, and the answer it got."""

    action: str
    dedup_key: str
    at: datetime
    status: int


def from_log(entries: Iterable[Mapping[str, Any]]) -> list[Received]:
    """A pager stand-in's log (``GET /simulator/pager-log``'s messages) as ``check`` reads it."""
    return [
        Received(entry["action"], entry["dedup_key"], datetime.fromisoformat(entry["at"]), entry["status"])
        for entry in entries
    ]


def outbox_drained() -> bool:
    """Whether the pager is owed nothing: no message due or retrying, no ended event's page left unresolved.

    One statement, so both are judged on one snapshot: asked one after the other, an
    evaluator's resolve committing in between (the ended event's page resolved, and its
    resolve made due) passed both, and a run stopped waiting with the resolve unsent.
    """
    due = Q(mode=PageMode.PAGE, next_attempt_at__isnull=False)
    ended_unresolved = Q(resolved_at__isnull=True, event__act_by__isnull=True)
    return not Page.objects.filter(due | ended_unresolved).exists() and not Surge.objects.filter(due).exists()


def end_known_at(
    observed_at: datetime, resolved_at: datetime | None, stalls: Sequence[tuple[datetime, datetime]], slack: timedelta
) -> datetime:
    """When the database could first have known that an event ended at ``observed_at`` (its ``state_entered_at``).

    An end is dated by when its outcome was observed, and its write lands milliseconds later:
    normally the same moment. Not when the worker that observed it was stopped in between
    (``stalls``: spans in which the step workers did not run at all, as in the chaos run's
    SIGSTOP backlog): its write lands only once the worker runs again, dated still by the
    observation, and until then the event is open in the database and past its budget, so
    the deliverer's trigger is right. An end observed in a stall, or within ``slack`` before
    it, counts from the stall's end; or from the page's resolve (``resolved_at``, stamped by
    the evaluator once it saw the end) if that came first, as when a writer that was not
    stopped (the sweeper, a callback) ended the event during the stall.
    """
    for start, end in stalls:
        if start - slack <= observed_at <= end:
            known = end if resolved_at is None else min(end, resolved_at)
            return max(observed_at, known)
    return observed_at


def check(
    received: Iterable[Received], *, in_flight: timedelta, stalls: Sequence[tuple[datetime, datetime]] = ()
) -> list[Violation]:
    """The paging invariants; ``in_flight`` is how long after its claim a trigger may still arrive.

    ``stalls``: spans in which the step workers were stopped (``end_known_at``).
    """
    received = list(received)
    accepted = Counter((message.action, message.dedup_key) for message in received if message.status == ACCEPTED)
    last_trigger: dict[str, datetime] = {}
    for message in sorted(received, key=lambda message: message.at):
        if message.action == "trigger":
            last_trigger[message.dedup_key] = message.at
    violations = []
    pages = Page.objects.filter(mode=PageMode.PAGE).select_related("event")
    fields = ["event_id", "region", "surge_id", "trigger_uncertain", "resolved_at"]
    fields += ["event__act_by", "event__state_entered_at"]
    for page in pages.only(*fields):
        event_id, event = page.event_id, page.event
        triggers = accepted["trigger", event_id]
        ended_at = (
            end_known_at(event.state_entered_at, page.resolved_at, stalls, in_flight) if event.act_by is None else None
        )
        if triggers > 1:
            violations.append(Violation("duplicate_trigger", event_id, f"{triggers} triggers accepted"))
        arrived = last_trigger.get(event_id)
        if ended_at is not None and arrived is not None and arrived > ended_at + in_flight:
            late = (arrived - ended_at).total_seconds()
            violations.append(Violation("trigger_after_end", event_id, f"trigger arrived {late:.1f}s after the end"))
        # A page a surge covers is told by the surge's trigger (runbook/paging/surges.py).
        covered = page.surge_id is not None and accepted["trigger", f"surge-{page.region}-{page.surge_id}"] > 0
        if ended_at is None and not triggers and not covered:
            violations.append(Violation("undelivered_trigger", event_id, "open event, no trigger accepted"))
        if ended_at is not None and (triggers or page.trigger_uncertain) and not accepted["resolve", event_id]:
            violations.append(Violation("unresolved_page", event_id, "ended, no resolve accepted"))
    for surge in Surge.objects.filter(mode=PageMode.PAGE, resolved_at__isnull=False):
        landed = accepted["trigger", surge.dedup_key] or surge.trigger_uncertain
        if landed and not accepted["resolve", surge.dedup_key]:
            violations.append(Violation("unresolved_surge", surge.dedup_key, "resolved, no resolve accepted"))
    return violations
