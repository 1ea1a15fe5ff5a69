"""What the console says about an event: the four answers a responder needs, in words.

Pure functions of the rows and ``now``; the views load the rows, templates only
print. Who owns it, what was last observed, how much action budget remains, and
the one transition still allowed.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings
from django.db.models import Min, Q

from notify.models import Claim, Event, Observation
from notify.rules import machine
from notify.rules.vocabulary import Channel, NextAction, Normalized, State
from policies.models import PolicyVersion, Stage

# What ``decide``'s single next action means for the workflow, in the responder's words.
ALLOWED_TRANSITION: Mapping[NextAction, str] = {
    NextAction.SUBMIT_SMS: "Submit the SMS: sms_requested → sms_pending once the provider accepts it "
    "(→ sms_failed if it rejects it).",
    NextAction.RECOVER_SMS: "Look the SMS up at the provider before anything else: a submit may have reached it. "
    "Found → sms_pending; provably absent → submit again with the same key; never resent blind "
    "(still unresolved at the fallback deadline D, the email fallback, if any, is claimed instead).",
    NextAction.POLL_SMS: "Wait for the SMS receipt (poll or callback): sms_pending → sms_delivered, "
    "or → sms_failed on a terminal failure.",
    NextAction.CLAIM_EMAIL: "Claim the email fallback: → email_claimed (the one email this reset may get).",
    NextAction.SUBMIT_EMAIL: "Submit the email, same key and Message-ID on retry: "
    "email_claimed → email_accepted (→ email_failed when attempts run out).",
    NextAction.EXPIRE: "Expire: → expired. The reset link is dead; nothing can reach the subscriber in time.",
    NextAction.NONE: "None: the event is terminal.",
}


class Situation(StrEnum):
    """Which part of the runbook applies; each has a section in docs/runbook.md."""

    SLOW_RECEIPT = "slow-receipt"
    STUCK_WORKER = "stuck-worker"
    FALLBACK_DUE = "fallback-due"
    NO_FALLBACK_LEFT = "no-fallback-left"
    EMAIL_IN_FLIGHT = "email-in-flight"
    POSSIBLE_DUPLICATE_EMAIL = "possible-duplicate-email"
    PROVIDER_REFUSES_CREDENTIALS = "provider-refuses-credentials"
    STEP_FAILING = "step-failing"
    ON_TRACK = "on-track"
    DONE = "done"


@dataclass(frozen=True)
class Owner:
    holder: str
    expires_at: datetime | None
    live: bool
    # Nobody has acted although a step is long due, or the holder's lease ran out.
    stuck: bool
    # Why nobody holds a live lease, when nobody does.
    why: str


@dataclass(frozen=True)
class Timing:
    """The event's clocks, each its own question: how long in this state, how long left to act."""

    state_age: timedelta
    action_budget: timedelta | None
    due_in: timedelta | None
    at_risk: bool

    @property
    def overdue(self) -> bool:
        return self.due_in is not None and self.due_in < timedelta(0)


@dataclass(frozen=True)
class Fallback:
    possible: bool
    claimable_now: bool
    text: str


@dataclass(frozen=True)
class EventStatus:
    event: Event
    policy: PolicyVersion
    now: datetime
    terminal: bool
    timing: Timing
    # What the table allows now, decided afresh: the stored schedule is only as recent as
    # the last write, and a dead worker writes nothing (its event still says "poll" after D).
    decision: machine.Decision
    owner: Owner
    fallback: Fallback
    allowed_transition: str
    situation: Situation
    last_observation: Observation | None

    @property
    def failing(self) -> bool:
        return failing(self.event)

    @property
    def schedule_is_stale(self) -> bool:
        """Whether the worker's stored next action differs from what is allowed now."""
        return self.decision.action != self.event.next_action


def stuck_after() -> timedelta:
    """How long past due an unowned event may wait before it counts as stuck.

    One sweep interval plus the wake-up rest period: by then the sweeper should have
    re-enqueued it, so waiting longer means no worker is taking work.
    """
    return timedelta(seconds=settings.NOTIFY_SWEEP_INTERVAL) + settings.NOTIFY_SWEEP_REDELIVER_AFTER


def schedule_lag(now: datetime) -> timedelta:
    """How long the oldest due step that no worker holds has waited: how far behind the system is.

    Zero when every due step is in a worker's hands. Past capacity it grows before any event
    goes red: steps are served most urgent first, so the lag is borne by the events with
    action budget to spare, until it nears the smallest SMS budget and the fallbacks begin.
    """
    waiting = Event.objects.filter(next_action_at__lte=now).filter(  # event_open_due_idx
        Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now)
    )
    oldest = waiting.aggregate(oldest=Min("next_action_at"))["oldest"]
    return timedelta(0) if oldest is None else now - oldest


def smallest_sms_budget() -> timedelta | None:
    """The shortest SMS budget of any published policy: a lag that nears it costs SMS their chance."""
    published = PolicyVersion.objects.filter(status=Stage.PUBLISHED)
    smallest: timedelta | None = published.aggregate(smallest=Min("sms_budget"))["smallest"]
    return smallest


def at_risk(event: Event, policy: PolicyVersion, now: datetime) -> bool:
    """Whether the action budget is within the policy's page margin (the page's own test)."""
    return event.act_by is not None and event.act_by - now < policy.page_margin


def timing(event: Event, policy: PolicyVersion, now: datetime) -> Timing:
    return Timing(
        state_age=now - event.state_entered_at,
        action_budget=event.act_by - now if event.act_by is not None else None,
        due_in=event.next_action_at - now if event.next_action_at is not None else None,
        at_risk=at_risk(event, policy, now),
    )


def describe(
    event: Event,
    policy: PolicyVersion,
    claims: Mapping[Channel, Claim],
    last_observation: Observation | None,
    now: datetime,
) -> EventStatus:
    terminal = machine.is_terminal(State(event.state), event.fallback_available)
    clocks = timing(event, policy, now)
    decision = machine.decide(event, claims, policy, now)
    owner = _owner(event, now, terminal, clocks.due_in)
    fallback = _fallback(event, policy, claims, now, terminal)
    return EventStatus(
        event=event,
        policy=policy,
        now=now,
        terminal=terminal,
        timing=clocks,
        decision=decision,
        owner=owner,
        fallback=fallback,
        allowed_transition=ALLOWED_TRANSITION[decision.action],
        situation=_situation(event, owner, fallback, terminal, last_observation),
        last_observation=last_observation,
    )


def failing(event: Event) -> bool:
    """Whether the event's worker step raised often enough in a row to be failing (``Event.objects.failing``)."""
    return event.act_by is not None and event.step_failures >= settings.NOTIFY_FAILING_AFTER


def lease_live(event: Event, now: datetime) -> bool:
    """Whether the event's lease holder still holds it: a dead worker's name is no owner."""
    return bool(event.lease_owner) and event.lease_expires_at is not None and event.lease_expires_at > now


def _owner(event: Event, now: datetime, terminal: bool, due_in: timedelta | None) -> Owner:
    expires = event.lease_expires_at
    if lease_live(event, now):
        return Owner(event.lease_owner, expires, live=True, stuck=False, why="")
    if event.lease_owner and not terminal:
        why = "its lease expired: the worker holding it died or stalled; any worker may take it over"
        return Owner(event.lease_owner, expires, live=False, stuck=True, why=why)
    overdue = due_in is not None and -due_in > stuck_after()
    if terminal:
        why = "the event is terminal: nothing is left to do"
    elif due_in is not None and due_in > timedelta(0):
        why = "between steps: no step is due yet"
    elif overdue:
        why = "its step is overdue and no worker has taken it: are the workers and the sweeper running?"
    else:
        why = "its step is due: a worker should take it within seconds"
    return Owner("", None, live=False, stuck=overdue and not terminal, why=why)


def _fallback(
    event: Event, policy: PolicyVersion, claims: Mapping[Channel, Claim], now: datetime, terminal: bool
) -> Fallback:
    email = claims.get(Channel.EMAIL)
    if email is not None:
        return Fallback(False, False, f"Already claimed at {email.created_at:%H:%M:%S} UTC: one email per reset.")
    if not event.fallback_available:
        return Fallback(False, False, "No fallback: this reset has no email channel (policy or request).")
    if terminal or now >= event.expires_at:
        return Fallback(False, False, f"No longer possible: the event is {event.state}.")
    if machine.may_claim_fallback(event, policy, now):
        return Fallback(True, True, "Allowed now.")
    deadline = machine.fallback_deadline(event, policy)
    return Fallback(
        True, False, f"Allowed from {deadline:%H:%M:%S} UTC (the policy deadline), or earlier if the SMS fails."
    )


def _situation(
    event: Event, owner: Owner, fallback: Fallback, terminal: bool, last_observation: Observation | None
) -> Situation:
    last = last_observation.normalized if last_observation is not None else None
    if terminal:
        return Situation.DONE
    # Ahead of the rest: whatever else holds, the step will not move until someone fixes
    # what makes it raise (it backs off, so it is neither stuck nor taken).
    if failing(event):
        return Situation.STEP_FAILING
    if owner.stuck:
        return Situation.STUCK_WORKER
    # Ahead of fallback-due: only an operator's fix ends a refusal of our credentials, and it
    # meets every event of the region alike (the worker claims the fallback by itself).
    if last == Normalized.CONFIGURATION_ERROR:
        return Situation.PROVIDER_REFUSES_CREDENTIALS
    if fallback.claimable_now:
        return Situation.FALLBACK_DUE
    if event.state == State.EMAIL_CLAIMED:
        if last == Normalized.POSSIBLE_DUPLICATE:
            return Situation.POSSIBLE_DUPLICATE_EMAIL
        return Situation.EMAIL_IN_FLIGHT
    if not fallback.possible:
        return Situation.NO_FALLBACK_LEFT
    if event.state == State.SMS_PENDING:
        return Situation.SLOW_RECEIPT
    return Situation.ON_TRACK


def last_real_observation(observations: Sequence[Observation]) -> Observation | None:
    """Return the newest observation from a provider or the worker (not an operator note)."""
    return next((obs for obs in observations if obs.normalized != Normalized.NOTE), None)


def last_real_observation_per_channel(observations: Sequence[Observation]) -> dict[Channel, Observation]:
    """Return each channel's newest real observation, from ``observations`` newest first: what its claim last met."""
    newest: dict[Channel, Observation] = {}
    for obs in observations:
        if obs.normalized != Normalized.NOTE:
            newest.setdefault(Channel(obs.channel), obs)
    return newest
