"""A policy version's projected effect: its region's recent history replayed against it and the published one.

Requested whenever a draft is saved (``request``) and computed in the background
(``tasks.project_policy`` calls ``compute``). The history is exported from this project's own
claims and observations (``replay.export``), the last ``PROJECTION_WINDOW_DAYS`` and never past
the observation retention; where that is too thin, a seeded generated set is replayed instead
and the projection says so. The figures are replay's own (``replay.report.Counts``).
"""

import logging
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from kombu.exceptions import OperationalError

from notify import broker
from policies.models import PolicyVersion, content_digest
from runbook.models import Projection
from runbook.replay import generate, report
from runbook.replay.export import export
from runbook.replay.report import Candidate, Counts, Target
from runbook.replay.simulate import Shared, collector_paused, simulate
from runbook.replay.timings import Timing

log = logging.getLogger("runbook.projections")

GENERATED_SEED = 1
# The figures shown, in order, with what an approver reads them as.
FIGURES = {
    "events": "events",
    "extra_messages": "extra messages",
    "useless_fallbacks": "useless fallbacks",
    "fallbacks_without_useful_life": "emails without useful life",
    "expired_without_outcome": "expired without outcome",
    "would_page": "would page",
    "pages_without_action": "pages without action",
    "claim_remaining_p5_s": "lifetime left at the claim, p5 (s)",
    "claim_remaining_p50_s": "lifetime left at the claim, p50 (s)",
    "claim_remaining_p95_s": "lifetime left at the claim, p95 (s)",
    "sms_segments_per_reset": "SMS segments per reset",
}


def targets(region: str) -> list[Target]:
    """The region's targets: ``POLICY_TARGETS`` entries, each for every region or (``EU:...``) one."""
    found = []
    for entry in settings.POLICY_TARGETS:
        scope, _, text = entry.rpartition(":")
        if scope in ("", region):
            found.append(Target.parse(text))
    return found


@dataclass(frozen=True)
class State:
    """Where a version's projection stands against its current content."""

    projection: Projection | None
    current: bool  # its figures describe the version as it is now
    pending: bool  # the version as it is now is being computed

    @property
    def stale(self) -> bool:
        return self.projection is not None and bool(self.projection.content_hash) and not self.current


def state_of(policy: PolicyVersion) -> State:
    projection = Projection.objects.filter(policy=policy).first()
    digest = content_digest(policy)
    if projection is None:
        return State(None, current=False, pending=False)
    current = projection.content_hash == digest
    return State(projection, current=current, pending=not current and projection.requested_hash == digest)


def request(policy: PolicyVersion, now: datetime) -> None:
    """Ask for a projection of the version as it is now, unless one is computed or on its way."""
    digest = content_digest(policy)
    known = state_of(policy)
    if known.current or known.pending:
        return
    Projection.objects.update_or_create(
        policy=policy, defaults={"requested_hash": digest, "requested_at": now, "failure": ""}
    )
    transaction.on_commit(lambda: _enqueue(policy.pk))


def _enqueue(policy_id: int) -> None:
    try:
        # By name: the task (runbook.tasks.project_policy) calls into this module. Bounded in
        # time: the admin's save waits on this publish.
        broker.send_task("runbook.project_policy", policy_id)
    except OperationalError:
        # The broker is away: the request stays pending, and the draft's page asks again.
        log.warning("projection_not_queued", extra={"policy_id": policy_id})


def compute(policy_id: int, now: datetime) -> Projection | None:
    """Replay the region's recent history against the version and the published one; store the figures.

    Nothing is stored if the version changed meanwhile (its newer content has its own request)
    or is gone.
    """
    policy = PolicyVersion.objects.filter(pk=policy_id).first()
    if policy is None:
        return None
    digest = content_digest(policy)
    published = PolicyVersion.objects.active_for(policy.region)
    compared = [("published", published)] if published is not None and published.pk != policy.pk else []
    window = _window(policy, published)
    records, generated, note = _records(policy.region, now - window, window)
    counts = {name: Counts() for name, _ in [*compared, ("draft", policy)]}
    shared = Shared()
    with collector_paused():
        for record in records:
            for name, candidate in [*compared, ("draft", policy)]:
                counts[name].add(simulate(record, candidate, shared))
    figures = {name: report.figures(found) for name, found in counts.items()}
    broken = [str(target) for target in targets(policy.region) if not target.met(counts["draft"])]
    labels = {"published": str(published) if published else "", "draft": str(policy)}
    plot = _tradeoff_png(policy.region, {labels[name]: found for name, found in counts.items()})
    stored = Projection.objects.filter(policy=policy, requested_hash=digest).update(
        content_hash=digest,
        computed_at=now,
        compared_with=str(published) if compared else "",
        window_start=now - window,
        window_end=now,
        records=len(records),
        generated=generated,
        note=note,
        figures=figures,
        broken_targets=broken,
        tradeoff_png=plot,
        failure="",
    )
    return Projection.objects.get(policy=policy) if stored else None


def record_failure(policy_id: int, failure: str) -> None:
    Projection.objects.filter(policy_id=policy_id).update(failure=failure[:2000])


def _window(policy: PolicyVersion, published: PolicyVersion | None) -> timedelta:
    # Never past the observation retention: older events have lost their receipts and would
    # replay as never confirmed.
    retention = min(p.observation_retention for p in (policy, published) if p is not None)
    return min(timedelta(days=settings.PROJECTION_WINDOW_DAYS), retention)


def _records(region: str, since: datetime, window: timedelta) -> tuple[list[Timing], bool, str]:
    history = export(since, region)
    days = window / timedelta(days=1)
    if len(history) >= settings.PROJECTION_MIN_RECORDS:
        return history, False, f"{len(history):,} resets of {region} in the last {days:g} days"
    count = settings.PROJECTION_GENERATED_RECORDS
    shape = region if region in generate.SHAPES else "US"
    generated = [_in_region(t, region) for t in generate.generate(count, GENERATED_SEED, regions=(shape,))]
    note = (
        f"history too thin: {len(history):,} resets of {region} in the last {days:g} days, fewer than "
        f"{settings.PROJECTION_MIN_RECORDS:,}; replayed {count:,} generated records (seed {GENERATED_SEED}, "
        f"{shape} shapes) instead: assumptions, not {region}'s history"
    )
    return generated, True, note


def _in_region(timing: Timing, region: str) -> Timing:
    return timing if timing.region == region else timing._replace(region=region)


def _tradeoff_png(region: str, counts: dict[str, Counts]) -> bytes:
    results = {region: {Candidate(label, ""): found for label, found in counts.items()}}
    with tempfile.TemporaryDirectory() as scratch:
        report.write_plots(Path(scratch), results)
        return (Path(scratch) / "tradeoff.png").read_bytes()
