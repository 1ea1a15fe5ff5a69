"""The delivery invariants, checked against what the database (and the provider) recorded.

DESIGN's rules as checks over the history: every transition on the table, versions
without gaps, no state without its transition, a claim with its transition, nothing
open past its expiry; and, given the provider's own counts, at most one SMS per event
and no email beyond the first that a recorded outcome does not account for. The chaos
run ends with these (``make chaos``); ``manage.py check_invariants`` runs them on any
database.

A second email is accounted for in one of two ways, reported apart:
- the sending worker's own unknown outcome (the connection was lost after the message's
  final dot, RFC 1047): resent under the same Message-ID, as the policy allows;
- a possible duplicate: the sending worker was lost mid-send (a takeover found the claim
  submitting), so nobody knows whether the relay took it. That is a duplicate the protocol
  cannot rule out, never explained away: reported as ``possible_duplicate_email``, which
  ``failures`` does not count as a broken invariant but every report shows.
"""

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from notify import messages
from notify.models import Claim, Event, Observation, Transition
from notify.rules import machine
from notify.rules.vocabulary import Channel, Normalized, State


@dataclass(frozen=True)
class Violation:
    kind: str
    event_id: str
    detail: str


# Findings that are reported, counted and shown, but are no broken invariant.
TOLERATED = frozenset({"possible_duplicate_email"})


def failures(found: list[Violation]) -> list[Violation]:
    """Return the findings that break an invariant (all but the tolerated, reported kinds)."""
    return [violation for violation in found if violation.kind not in TOLERATED]


@dataclass(frozen=True)
class ProviderCounts:
    """What the provider accepted: SMS per event id, emails per Message-ID."""

    sms: Mapping[str, int]
    email: Mapping[str, int]


def check(
    *, now: datetime, grace: timedelta, since: datetime | None = None, provider: ProviderCounts | None = None
) -> list[Violation]:
    """Return every violation among the events created since ``since`` (all by default).

    ``grace`` is how long past its expiry an event may stay open (the sweep interval and
    a little): longer, and it was lost.
    """
    events = Event.objects.all() if since is None else Event.objects.filter(created_at__gte=since)
    rows = {
        event_id: (state, expires_at, fallback, sender)
        for event_id, state, expires_at, fallback, sender in events.values_list(
            "id", "state", "expires_at", "fallback_available", "policy__email_from"
        )
    }
    history: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for event_id, version, from_state, to_state in (
        Transition.objects.filter(event_id__in=rows)
        .order_by("event_id", "version")
        .values_list("event_id", "version", "from_state", "to_state")
    ):
        history[event_id].append((version, from_state, to_state))
    claims: dict[str, set[str]] = defaultdict(set)
    for event_id, channel in Claim.objects.filter(event_id__in=rows).values_list("event_id", "channel"):
        claims[event_id].add(channel)
    doubts: dict[str, Counter[str]] = defaultdict(Counter)
    doubtful = Observation.objects.filter(
        event_id__in=rows,
        channel=Channel.EMAIL,
        normalized__in=(Normalized.UNKNOWN_OUTCOME, Normalized.POSSIBLE_DUPLICATE),
    )
    for event_id, normalized in doubtful.values_list("event_id", "normalized"):
        doubts[event_id][normalized] += 1

    found: list[Violation] = []
    for event_id, (state, expires_at, fallback, sender) in rows.items():
        found += _history(event_id, history[event_id], state, fallback)
        found += _claims(event_id, history[event_id], claims[event_id])
        if not machine.is_terminal(State(state), fallback) and now > expires_at + grace:
            found.append(Violation("open_after_expiry", event_id, f"{state}, expired {now - expires_at} ago"))
        if provider is not None:
            found += _provider(event_id, provider, sender, doubts[event_id])
    return found


def _history(event_id: str, steps: list[tuple[int, str, str]], state: str, fallback: bool) -> list[Violation]:
    if not steps:
        return [Violation("no_history", event_id, "no transition at all")]
    found = []
    previous = ""
    for expected, (version, from_state, to_state) in enumerate(steps, start=1):
        if version != expected:
            found.append(Violation("version_gap", event_id, f"version {version} where {expected} was due"))
        if from_state != previous:
            # A move that does not start where the last one ended: a backward or skipped step.
            found.append(Violation("broken_chain", event_id, f"v{version} from {from_state}, was in {previous}"))
        elif previous and State(to_state) not in machine.allowed_targets(State(from_state), fallback):
            found.append(Violation("outside_table", event_id, f"v{version} {from_state} -> {to_state}"))
        previous = to_state
    if previous != state:
        found.append(Violation("state_without_transition", event_id, f"state {state}, history ends in {previous}"))
    return found


def _claims(event_id: str, steps: list[tuple[int, str, str]], channels: set[str]) -> list[Violation]:
    reached = {to_state for _, _, to_state in steps}
    claimed_email = State.EMAIL_CLAIMED in reached
    if Channel.EMAIL in channels and not claimed_email:
        return [Violation("claim_without_transition", event_id, "an email claim, no move to email_claimed")]
    if claimed_email and Channel.EMAIL not in channels:
        return [Violation("transition_without_claim", event_id, "email_claimed without an email claim")]
    return []


def _provider(event_id: str, provider: ProviderCounts, sender: str, doubts: Counter[str]) -> list[Violation]:
    found = []
    sms = provider.sms.get(event_id, 0)
    if sms > 1:
        found.append(Violation("duplicate_sms", event_id, f"{sms} SMS accepted by the provider"))
    emails = provider.email.get(messages.message_id(event_id, sender), 0)
    unknown, lost = doubts[Normalized.UNKNOWN_OUTCOME], doubts[Normalized.POSSIBLE_DUPLICATE]
    if emails > 1 + unknown + lost:
        detail = f"{emails} emails accepted, {unknown} unknown outcome(s) and {lost} possible duplicate(s) recorded"
        found.append(Violation("unexplained_email", event_id, detail))
    elif emails > 1 + unknown:
        detail = f"{emails} emails accepted; sent again after {lost} send(s) whose worker was lost"
        found.append(Violation("possible_duplicate_email", event_id, detail))
    return found
