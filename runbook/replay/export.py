"""Timings from this project's own history: what each event's providers did, and when.

Read from claims and observations (no vault, no destinations). Events are read in
chunks, one query per chunk for their observations, so a week of production streams.
"""

import random
import statistics
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime

from notify.models import Claim, Event, Observation
from notify.states import Channel, Normalized
from runbook.replay.timings import Timing

CHUNK = 1000
_SMS_TERMINAL = {"delivered": "delivered", "terminal_failure": "failed", "rejected": "failed"}
_EMAIL_FAILURES = ("rejected", "terminal_failure")


def export(since: datetime, region: str | None = None, *, seed: int = 0) -> list[Timing]:
    """Return a record per event created since ``since`` whose SMS was submitted, shuffled.

    Shuffled (from ``seed``) because creation order would let a row's position point back
    at the reset it came from; the format carries no time for the same reason.
    """
    records = list(_export(since, region))
    random.Random(seed).shuffle(records)
    return records


def _export(since: datetime, region: str | None) -> Iterator[Timing]:
    """Yield a record per event created since ``since`` whose SMS was submitted.

    An event that never sent an email gets its region's median email latency (or the
    policy's email submit cost, without any) and ``accepted``: the replay must be able
    to send the email a different threshold would have sent.
    """
    events = Event.objects.filter(created_at__gte=since).order_by("created_at", "id")
    if region is not None:
        events = events.filter(region=region)
    pending: list[tuple[Event, dict[str, object]]] = []
    email_latencies: dict[str, list[float]] = defaultdict(list)
    for chunk in _chunks(events.select_related("policy").iterator(chunk_size=CHUNK)):
        for event, facts in _facts(chunk):
            if facts.get("email_accept_s") is not None:
                email_latencies[event.region].append(float(facts["email_accept_s"]))  # type: ignore[arg-type]
            pending.append((event, facts))
        yield from _records(pending, email_latencies, final=False)
    yield from _records(pending, email_latencies, final=True)


def _chunks(events: Iterator[Event]) -> Iterator[list[Event]]:
    chunk: list[Event] = []
    for event in events:
        chunk.append(event)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _facts(chunk: list[Event]) -> Iterator[tuple[Event, dict[str, object]]]:
    ids = [event.id for event in chunk]
    submitted = {
        (claim.event_id, claim.channel): claim.submitted_at
        for claim in Claim.objects.filter(event_id__in=ids).exclude(submitted_at=None)
    }
    # The first time each event saw each (channel, status): one query for the chunk.
    firsts: dict[str, dict[tuple[str, str], datetime]] = defaultdict(dict)
    observed = Observation.objects.filter(event_id__in=ids).order_by("recorded_at", "id")
    for event_id, channel, normalized, at in observed.values_list("event_id", "channel", "normalized", "recorded_at"):
        firsts[event_id].setdefault((channel, normalized), at)
    for event in chunk:
        sms_at = submitted.get((event.id, Channel.SMS))
        if sms_at is None:
            continue  # never submitted: nothing about the provider to learn
        seen = firsts[event.id]
        facts: dict[str, object] = {
            "lifetime_s": (event.expires_at - event.created_at).total_seconds(),
            "email_cost_s": event.policy.email_submit_cost.total_seconds(),
        }
        accepted = seen.get((Channel.SMS, Normalized.ACCEPTED))
        facts["sms_accept_s"] = (accepted - sms_at).total_seconds() if accepted else 0.0
        terminals = sorted(
            (at, _SMS_TERMINAL[normalized]) for (channel, normalized), at in seen.items()
            if channel == Channel.SMS and normalized in _SMS_TERMINAL
        )  # fmt: skip
        if terminals:
            at, outcome = terminals[0]
            facts["sms_terminal_s"], facts["sms_outcome"] = max(0.0, (at - sms_at).total_seconds()), outcome
        else:
            facts["sms_terminal_s"], facts["sms_outcome"] = None, "none"
        email_at = submitted.get((event.id, Channel.EMAIL))
        email_accepted = seen.get((Channel.EMAIL, Normalized.ACCEPTED))
        email_failed = min(
            (seen[(Channel.EMAIL, n)] for n in _EMAIL_FAILURES if (Channel.EMAIL, n) in seen), default=None
        )
        email_end = email_accepted or email_failed
        if email_at is not None and email_end is not None:
            facts["email_accept_s"] = max(0.0, (email_end - email_at).total_seconds())
            facts["email_outcome"] = "accepted" if email_accepted else "failed"
        yield event, facts


def _records(
    pending: list[tuple[Event, dict[str, object]]], email_latencies: dict[str, list[float]], *, final: bool
) -> Iterator[Timing]:
    # Records waiting for an imputed email latency are held until the region has a median
    # (or the end); the rest go out at once.
    keep = []
    for event, facts in pending:
        latency = facts.get("email_accept_s")
        if latency is None:
            if email_latencies[event.region]:
                latency = statistics.median(email_latencies[event.region])
            elif final:
                latency = facts["email_cost_s"]
            else:
                keep.append((event, facts))
                continue
        yield Timing(
            region=event.region,
            lifetime_s=float(facts["lifetime_s"]),  # type: ignore[arg-type]
            sms_accept_s=max(0.0, float(facts["sms_accept_s"])),  # type: ignore[arg-type]
            sms_terminal_s=facts["sms_terminal_s"],  # type: ignore[arg-type]
            sms_outcome=str(facts["sms_outcome"]),
            email_accept_s=float(latency),  # type: ignore[arg-type]
            email_outcome=str(facts.get("email_outcome", "accepted")),
        )
    pending[:] = keep
