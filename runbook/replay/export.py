"""Timings from this project's own history: what each event's providers did, and when.

Read from claims and observations (no vault, no destinations). Events are read in
chunks, one query per chunk for their observations, so a week of production streams.
"""

import random
import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from notify.models import Claim, Event, Observation
from notify.rules import machine
from notify.rules.vocabulary import Channel, ClaimState, Normalized, Source
from runbook.replay.timings import DEFAULT_LOCALE, Call, Timing

CHUNK = 1000
_SMS_TERMINAL = {"delivered": "delivered", "terminal_failure": "failed", "rejected": "failed"}
_EMAIL_FAILURES = ("rejected", "terminal_failure")
# Evidence that the provider had the message: whatever status it reported for it.
_SMS_FOUND = (Normalized.ACCEPTED, Normalized.PENDING, Normalized.DELIVERED, Normalized.TERMINAL_FAILURE)
# A call's answer in the timing format's words (timings.SMS_ANSWERS, EMAIL_ANSWERS), read off the
# claim table: what the answer did to the channel's claim is what the replay must make it do again.
_ANSWER_BY_CLAIM = {
    ClaimState.ACCEPTED: "accepted",
    ClaimState.DELIVERED: "accepted",
    ClaimState.FAILED: "failed",
    ClaimState.CLAIMED: "transient",  # nothing sent: tried again
    ClaimState.SUBMITTING: "unknown",  # an SMS whose answer was lost, left to lookups
}
# An email whose answer was lost also goes back to claimed, but it may have gone: the policy's
# resubmit_unknown_email decides whether it is sent again, so it keeps its own word.
_EMAIL_UNKNOWN = (Normalized.UNKNOWN_OUTCOME, Normalized.POSSIBLE_DUPLICATE)


def answer_word(channel: str, normalized: str) -> str:
    """The timing format's word for a call answered ``normalized`` on ``channel``."""
    if channel == Channel.EMAIL and normalized in _EMAIL_UNKNOWN:
        return "unknown"
    claim_state = machine.OBSERVATION_CLAIM_STATES.get((Channel(channel), Normalized(normalized)))
    return _ANSWER_BY_CLAIM.get(claim_state, "unknown") if claim_state is not None else "unknown"


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


@dataclass(frozen=True, slots=True)
class _Seen:
    """One piece of evidence as the export reads it."""

    channel: str
    source: str
    normalized: str
    at: datetime
    attempt_started_at: datetime | None  # set on a submit call's answer (since version 2)


def _facts(chunk: list[Event]) -> Iterator[tuple[Event, dict[str, object]]]:
    ids = [event.id for event in chunk]
    claims = Claim.objects.filter(event_id__in=ids).exclude(submitted_at=None)
    submitted = {(claim.event_id, claim.channel): claim.submitted_at for claim in claims}
    segments = {claim.event_id: claim.segments for claim in claims if claim.channel == Channel.SMS}
    # Each event's evidence in the order it came: one query for the chunk.
    evidence: dict[str, list[_Seen]] = defaultdict(list)
    observed = Observation.objects.filter(event_id__in=ids).order_by("recorded_at", "id")
    fields = ("event_id", "channel", "source", "normalized", "recorded_at", "attempt_started_at")
    for event_id, *seen in observed.values_list(*fields):
        evidence[event_id].append(_Seen(*seen))
    for event in chunk:
        sms_at = submitted.get((event.id, Channel.SMS))
        if sms_at is None:
            continue  # never submitted: nothing about the provider to learn
        seen = evidence[event.id]
        facts: dict[str, object] = {
            "lifetime_s": (event.expires_at - event.created_at).total_seconds(),
            "email_cost_s": event.policy.email_submit_cost.total_seconds(),
            "locale": event.message_locale or DEFAULT_LOCALE,
            "sms_segments": segments.get(event.id),
        }
        facts.update(_sms_facts(seen, sms_at))
        facts.update(_email_facts(seen, submitted.get((event.id, Channel.EMAIL))))
        yield event, facts


def _first(seen: list[_Seen], channel: str, statuses: Iterable[str], after: datetime | None = None) -> _Seen | None:
    return next(
        (s for s in seen if s.channel == channel and s.normalized in statuses and (after is None or s.at >= after)),
        None,
    )


def _sms_facts(seen: list[_Seen], sms_at: datetime) -> dict[str, object]:
    """The SMS's calls, acceptance and terminal receipt. Latencies run from the start of the call the
    provider accepted (the first submit, for history recorded before calls were)."""
    calls, accepted_start = _sms_calls(seen)
    start = accepted_start or sms_at
    facts: dict[str, object] = {"sms_calls": calls}
    accepted = _first(seen, Channel.SMS, (Normalized.ACCEPTED,), after=start)
    facts["sms_accept_s"] = max(0.0, (accepted.at - start).total_seconds()) if accepted else 0.0
    terminal = _first(seen, Channel.SMS, _SMS_TERMINAL)
    if terminal is None:
        facts["sms_terminal_s"], facts["sms_outcome"], facts["sms_receipt"] = None, "none", "callback"
    else:
        facts["sms_terminal_s"] = max(0.0, (terminal.at - start).total_seconds())
        facts["sms_outcome"] = _SMS_TERMINAL[terminal.normalized]
        # Found by asking (a poll or a lookup): its callback was lost. A submit's own refusal
        # and a callback come at their time, whatever the polling.
        polled = terminal.source in (Source.POLL, Source.RECOVERY)
        facts["sms_receipt"] = "poll" if polled else "callback"
    return facts


def _sms_calls(seen: list[_Seen]) -> tuple[tuple[Call, ...], datetime | None]:
    """Each SMS submit call and its answer, and when the call the provider accepted began.

    A call that timed out counts as accepted after the time the provider was first found to
    have the message (before the next call began), as a lookup found it; never found, it is
    a call whose message never existed (``unknown``).
    """
    answers = [s for s in seen if s.channel == Channel.SMS and s.source == Source.SUBMIT and s.attempt_started_at]
    calls: list[Call] = []
    accepted_start: datetime | None = None
    for index, answer in enumerate(answers):
        started = answer.attempt_started_at
        assert started is not None
        latency = max(0.0, (answer.at - started).total_seconds())
        kind = answer_word(Channel.SMS, answer.normalized)
        if answer.normalized == Normalized.UNKNOWN_OUTCOME:
            following = answers[index + 1].attempt_started_at if index + 1 < len(answers) else None
            found = _first(seen, Channel.SMS, _SMS_FOUND, after=started)
            if found is not None and (following is None or found.at < following):
                kind, latency = "accepted", (found.at - started).total_seconds()
        if kind == "accepted" and accepted_start is None:
            accepted_start = started
        calls.append(Call(latency, kind))
    return tuple(calls), accepted_start


def _email_facts(seen: list[_Seen], email_at: datetime | None) -> dict[str, object]:
    """The email's calls and final answer; nothing when no email was sent (the latency is imputed)."""
    calls = tuple(
        Call(max(0.0, (s.at - s.attempt_started_at).total_seconds()), answer_word(Channel.EMAIL, s.normalized))
        for s in seen
        if s.channel == Channel.EMAIL and s.source == Source.SUBMIT and s.attempt_started_at
    )
    accepted = _first(seen, Channel.EMAIL, (Normalized.ACCEPTED,))
    failed = _first(seen, Channel.EMAIL, _EMAIL_FAILURES)
    outcome = "accepted" if accepted else "failed"
    if calls:
        return {"email_calls": calls, "email_accept_s": calls[-1].latency_s, "email_outcome": outcome}
    end = accepted or failed
    if email_at is None or end is None:
        return {}
    # History from before calls were recorded: from the first attempt to the final answer.
    return {"email_accept_s": max(0.0, (end.at - email_at).total_seconds()), "email_outcome": outcome}


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
            sms_receipt=str(facts["sms_receipt"]),
            sms_calls=facts["sms_calls"],  # type: ignore[arg-type]
            email_calls=facts.get("email_calls", ()),  # type: ignore[arg-type]
            locale=str(facts["locale"]),
            sms_segments=facts["sms_segments"],  # type: ignore[arg-type]
        )
    pending[:] = keep
