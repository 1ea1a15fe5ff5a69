"""The workflow's rules as data and pure functions: no database, no clock.

``ALLOWED_TRANSITIONS`` is the one transition table. The worker, the callback
view, runbook actions and replay all reach it through ``notify.writes``
(which writes) or ``decide`` (which only reads).
"""

from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import Enum
from typing import NamedTuple, Protocol

from notify.rules.vocabulary import Channel, ClaimState, NextAction, Normalized, State
from policies.models import PolicyVersion

# ``State(value)`` and ``ClaimState(value)`` go through Enum's call machinery; every decision
# converts a stored state, and replay makes millions, so these look it up instead.
# Here, not in notify.rules.vocabulary, so that they are compiled with their callers (config.native):
# interpreted, each call cost the compiled decision code a Python frame.
# A member hashes and compares as its value, so a member or a stored string finds its member.
_STATES: dict[str, State] = {member.value: member for member in State}
_CLAIM_STATES: dict[str, ClaimState] = {member.value: member for member in ClaimState}


def state_of(value: str) -> State:
    """The ``State`` member for a stored state (a string or a member); KeyError if none."""
    return _STATES[value]


def claim_state_of(value: str) -> ClaimState:
    """The ``ClaimState`` member for a stored claim state (a string or a member); KeyError if none."""
    return _CLAIM_STATES[value]


ALLOWED_TRANSITIONS: Mapping[State, frozenset[State]] = {
    State.SMS_REQUESTED: frozenset({State.SMS_PENDING, State.SMS_FAILED, State.EMAIL_CLAIMED, State.EXPIRED}),
    State.SMS_PENDING: frozenset({State.SMS_DELIVERED, State.SMS_FAILED, State.EMAIL_CLAIMED, State.EXPIRED}),
    State.SMS_FAILED: frozenset({State.EMAIL_CLAIMED, State.EXPIRED}),
    State.EMAIL_CLAIMED: frozenset({State.EMAIL_ACCEPTED, State.EMAIL_FAILED, State.EXPIRED}),
    State.SMS_DELIVERED: frozenset(),
    State.EMAIL_ACCEPTED: frozenset(),
    State.EMAIL_FAILED: frozenset(),
    State.EXPIRED: frozenset(),
}

# The workflow state an observation asks for. Statuses absent here (transient errors,
# unknown outcomes, notes) are evidence only and never move the workflow.
OBSERVATION_TARGETS: Mapping[tuple[Channel, Normalized], State] = {
    (Channel.SMS, Normalized.ACCEPTED): State.SMS_PENDING,
    (Channel.SMS, Normalized.PENDING): State.SMS_PENDING,
    (Channel.SMS, Normalized.DELIVERED): State.SMS_DELIVERED,
    (Channel.SMS, Normalized.REJECTED): State.SMS_FAILED,
    (Channel.SMS, Normalized.TERMINAL_FAILURE): State.SMS_FAILED,
    (Channel.EMAIL, Normalized.ACCEPTED): State.EMAIL_ACCEPTED,
    (Channel.EMAIL, Normalized.REJECTED): State.EMAIL_FAILED,
    (Channel.EMAIL, Normalized.TERMINAL_FAILURE): State.EMAIL_FAILED,
    (Channel.EMAIL, Normalized.NO_USEFUL_LIFE): State.EMAIL_FAILED,
}

# A claim's own life, separate from the workflow: a claim is not an accepted message.
CLAIM_TRANSITIONS: Mapping[ClaimState, frozenset[ClaimState]] = {
    # FAILED straight from CLAIMED: the worker gave up (attempt limit) before another attempt.
    ClaimState.CLAIMED: frozenset({ClaimState.SUBMITTING, ClaimState.FAILED}),
    # Back to CLAIMED only when nothing was sent (a transient error, or a lookup that proved
    # the message absent), or when the policy resubmits an email after an unknown outcome.
    ClaimState.SUBMITTING: frozenset({ClaimState.ACCEPTED, ClaimState.FAILED, ClaimState.CLAIMED}),
    ClaimState.ACCEPTED: frozenset({ClaimState.DELIVERED, ClaimState.FAILED}),
    ClaimState.DELIVERED: frozenset(),
    ClaimState.FAILED: frozenset(),
}

# Where an observation puts the channel's claim. An unknown outcome differs per channel
# (DESIGN, "Unknown outcomes, per channel"): an SMS stays SUBMITTING until a lookup
# settles it; an email goes back to CLAIMED, to be resubmitted with the same Message-ID.
OBSERVATION_CLAIM_STATES: Mapping[tuple[Channel, Normalized], ClaimState] = {
    **{
        (channel, normalized): claim_state
        for channel in Channel
        for normalized, claim_state in (
            (Normalized.ACCEPTED, ClaimState.ACCEPTED),
            (Normalized.PENDING, ClaimState.ACCEPTED),
            (Normalized.DELIVERED, ClaimState.DELIVERED),
            (Normalized.REJECTED, ClaimState.FAILED),
            (Normalized.TERMINAL_FAILURE, ClaimState.FAILED),
            (Normalized.TRANSIENT_ERROR, ClaimState.CLAIMED),
        )
    },
    **{(channel, Normalized.CONFIGURATION_ERROR): ClaimState.CLAIMED for channel in Channel},
    (Channel.SMS, Normalized.UNKNOWN_OUTCOME): ClaimState.SUBMITTING,
    (Channel.EMAIL, Normalized.UNKNOWN_OUTCOME): ClaimState.CLAIMED,
    (Channel.EMAIL, Normalized.POSSIBLE_DUPLICATE): ClaimState.CLAIMED,
    (Channel.EMAIL, Normalized.NO_USEFUL_LIFE): ClaimState.FAILED,
}


# A channel has reached an outcome when its SMS was delivered or failed, or its email was
# accepted by the relay (the last thing SMTP says) or failed.
CHANNEL_OUTCOMES: Mapping[Channel, frozenset[ClaimState]] = {
    Channel.SMS: frozenset({ClaimState.DELIVERED, ClaimState.FAILED}),
    Channel.EMAIL: frozenset({ClaimState.ACCEPTED, ClaimState.DELIVERED, ClaimState.FAILED}),
}


# The evidence that gives its channel an outcome: the observations that put a claim in one of
# CHANNEL_OUTCOMES. "Expired without outcome" is judged at the link's expiry, by whether any
# such evidence had arrived by then; a receipt after expiry came too late for the subscriber,
# so neither the live roll-up (tallies) nor replay lets it clear the expiry, however soon they look.
OUTCOME_EVIDENCE: frozenset[tuple[Channel, Normalized]] = frozenset(
    pair for pair, claim_state in OBSERVATION_CLAIM_STATES.items() if claim_state in CHANNEL_OUTCOMES[pair[0]]
)


class Step(Enum):
    POLL = "poll_cost"
    SELECT = "select_cost"
    EMAIL_SUBMIT = "email_submit_cost"
    RECORD = "record_cost"


_FALLBACK_STEPS = frozenset({Step.SELECT, Step.EMAIL_SUBMIT})
_SMS_STATES = frozenset({State.SMS_REQUESTED, State.SMS_PENDING})

# What is still to be done from each open state before the reset can reach the
# subscriber by the last channel; the action budget reserves the policy's cost of each.
REMAINING_STEPS: Mapping[State, tuple[Step, ...]] = {
    State.SMS_REQUESTED: (Step.POLL, Step.SELECT, Step.EMAIL_SUBMIT, Step.RECORD),
    State.SMS_PENDING: (Step.POLL, Step.SELECT, Step.EMAIL_SUBMIT, Step.RECORD),
    State.SMS_FAILED: (Step.SELECT, Step.EMAIL_SUBMIT, Step.RECORD),
    State.EMAIL_CLAIMED: (Step.EMAIL_SUBMIT, Step.RECORD),
}


class EventFacts(Protocol):
    """What the decision needs to know about an event (a model row or a replay record)."""

    @property
    def state(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def expires_at(self) -> datetime: ...
    @property
    def state_entered_at(self) -> datetime: ...
    @property
    def last_observation_at(self) -> datetime | None: ...
    @property
    def fallback_available(self) -> bool: ...


class ClaimFacts(Protocol):
    @property
    def state(self) -> str: ...
    @property
    def next_attempt_at(self) -> datetime | None: ...


# The decision's values (these, and transitions' observations and changes, rows' loaded events)
# are NamedTuples: immutable like frozen dataclasses, and two to four times cheaper to build,
# which a worker's step and above all a replay, making millions of them, pay on every decision.
class EventSnapshot(NamedTuple):
    """The decision-relevant facts of an event, as a value that can be changed and re-decided."""

    state: str
    created_at: datetime
    expires_at: datetime
    state_entered_at: datetime
    last_observation_at: datetime | None
    fallback_available: bool

    @classmethod
    def of(cls, event: EventFacts) -> "EventSnapshot":
        return cls(
            state=event.state,
            created_at=event.created_at,
            expires_at=event.expires_at,
            state_entered_at=event.state_entered_at,
            last_observation_at=event.last_observation_at,
            fallback_available=event.fallback_available,
        )


class ClaimSnapshot(NamedTuple):
    state: str
    next_attempt_at: datetime | None = None


NEW_CLAIM = ClaimSnapshot(ClaimState.CLAIMED)


class Decision(NamedTuple):
    """The single next action, when it is due, and the action-budget deadline."""

    action: NextAction
    due_at: datetime | None
    act_by: datetime | None


NO_ACTION = Decision(NextAction.NONE, None, None)


def due_now(decision: Decision, now: datetime) -> bool:
    """Whether the decision's action is to be taken now."""
    return decision.action != NextAction.NONE and decision.due_at is not None and decision.due_at <= now


def wake_after(decision: Decision, now: datetime, longest: timedelta) -> timedelta | None:
    """How soon to wake the event for its next action: when it is due, never further off than ``longest``
    (long ETAs are not relied on); None with nothing left to do."""
    if decision.action == NextAction.NONE or decision.due_at is None:
        return None
    return min(max(decision.due_at - now, timedelta(0)), longest)


# The table for an event with no fallback channel: no email claim, and ``sms_failed`` is terminal.
# Derived once (every decision asks), never written by hand.
_WITHOUT_FALLBACK: Mapping[State, frozenset[State]] = {
    state: frozenset() if state == State.SMS_FAILED else targets - {State.EMAIL_CLAIMED}
    for state, targets in ALLOWED_TRANSITIONS.items()
}


def allowed_targets(state: State, fallback_available: bool) -> frozenset[State]:
    """Return the states ``state`` may move to; without a fallback ``sms_failed`` is terminal."""
    return (ALLOWED_TRANSITIONS if fallback_available else _WITHOUT_FALLBACK)[state]


def is_terminal(state: State, fallback_available: bool) -> bool:
    return not allowed_targets(state, fallback_available)


def evidence_is_late(state: State, fallback_available: bool, channel: Channel) -> bool:
    """Whether evidence about ``channel`` arrives after the event moved past it: the event is
    terminal, or the SMS is heard of once the fallback has taken over."""
    return is_terminal(state, fallback_available) or (channel == Channel.SMS and state not in _SMS_STATES)


def is_final_claim(state: ClaimState) -> bool:
    return not CLAIM_TRANSITIONS[state]


# The policy fields the remaining steps from each open state cost, with a fallback and without
# one (nothing to fall back to: the SMS path needs no time kept for an email). Derived once from
# REMAINING_STEPS: every decision asks.
_STEP_COSTS: Mapping[tuple[State, bool], tuple[str, ...]] = {
    (state, fallback): tuple(
        step.value for step in steps if fallback or state not in _SMS_STATES or step not in _FALLBACK_STEPS
    )
    for state, steps in REMAINING_STEPS.items()
    for fallback in (True, False)
}


def time_needed(state: State, policy: PolicyVersion, fallback_available: bool) -> timedelta:
    """Return the configured time the remaining steps from ``state`` take."""
    total = timedelta(0)
    for cost in _STEP_COSTS[(state, fallback_available)]:
        total += getattr(policy, cost)
    return total


def act_by(event: EventFacts, policy: PolicyVersion) -> datetime | None:
    """Return the last moment the next step can start and still finish before expiry."""
    return _act_by(state_of(event.state), event, policy)


def _act_by(state: State, event: EventFacts, policy: PolicyVersion) -> datetime | None:
    if is_terminal(state, event.fallback_available):
        return None
    return event.expires_at - time_needed(state, policy, event.fallback_available)


def fallback_deadline(event: EventFacts, policy: PolicyVersion) -> datetime:
    """Return D, the moment a still-unresolved SMS gives way to the email fallback.

    The SMS gets its budget from the intent (the event's creation), but never so
    long that the email would start with less than the fallback reserve left.
    """
    return min(event.created_at + policy.sms_budget, event.expires_at - policy.fallback_reserve)


def minimum_lifetime(policy: PolicyVersion, state: State, fallback_available: bool) -> timedelta:
    """Return the shortest reset lifetime an event starting in ``state`` may be created with.

    Shorter, and the event would be born at risk: no action budget for its whole
    path, or (when an email fallback follows the SMS) a fallback deadline already
    in the past.
    """
    needed = time_needed(state, policy, fallback_available)
    if state == State.SMS_REQUESTED and fallback_available:
        needed = max(needed, policy.fallback_reserve)
    return needed


def email_has_useful_life(event: EventFacts, policy: PolicyVersion, now: datetime) -> bool:
    """Return whether an email started now can still reach the subscriber before the link expires.

    The email step's configured cost (submit and record) must fit before expiry: later, the
    message would arrive with a dead link, or with too little life to act on it.
    """
    return now < event.expires_at - time_needed(State.EMAIL_CLAIMED, policy, True)


def observation_target(channel: Channel, normalized: Normalized) -> State | None:
    return OBSERVATION_TARGETS.get((channel, normalized))


def may_claim_fallback(event: EventFacts, policy: PolicyVersion, now: datetime) -> bool:
    """Return whether the email fallback may be claimed now (DESIGN rule 4).

    Only from a terminal SMS failure, or from an unresolved SMS once the fallback
    deadline has passed; never after expiry, never without a fallback channel.
    """
    state = state_of(event.state)
    if State.EMAIL_CLAIMED not in allowed_targets(state, event.fallback_available) or now >= event.expires_at:
        return False
    return state == State.SMS_FAILED or now >= fallback_deadline(event, policy)


def decide(event: EventFacts, claims: Mapping[Channel, ClaimFacts], policy: PolicyVersion, now: datetime) -> Decision:
    """Return the single next action for the event, when it is due, and its ``act_by``."""
    state = state_of(event.state)
    if is_terminal(state, event.fallback_available):
        return NO_ACTION
    deadline = event.expires_at - time_needed(state, policy, event.fallback_available)
    if now >= event.expires_at:
        return Decision(NextAction.EXPIRE, event.expires_at, deadline)
    action, due = _next_step(state, event, claims, policy, now)
    if due >= event.expires_at:
        # Nothing scheduled can still happen in time: the next thing to happen is expiry.
        return Decision(NextAction.EXPIRE, event.expires_at, deadline)
    return Decision(action, due, deadline)


def _next_step(
    state: State,
    event: EventFacts,
    claims: Mapping[Channel, ClaimFacts],
    policy: PolicyVersion,
    now: datetime,
) -> tuple[NextAction, datetime]:
    if state == State.SMS_FAILED:
        return NextAction.CLAIM_EMAIL, event.state_entered_at
    if state == State.EMAIL_CLAIMED:
        return NextAction.SUBMIT_EMAIL, claims[Channel.EMAIL].next_attempt_at or event.state_entered_at
    if state == State.SMS_REQUESTED:
        sms = claims[Channel.SMS]
        # A claim left in SUBMITTING may have reached the provider: look it up, never resubmit blind.
        action = NextAction.RECOVER_SMS if sms.state == ClaimState.SUBMITTING else NextAction.SUBMIT_SMS
        due = sms.next_attempt_at or event.state_entered_at
    else:
        action = NextAction.POLL_SMS
        due = (event.last_observation_at or event.state_entered_at) + policy.poll_interval
    if event.fallback_available:
        deadline = fallback_deadline(event, policy)
        # At D the SMS gets no more of the reset's lifetime, whatever it was about to do.
        if max(due, now) >= deadline:
            return NextAction.CLAIM_EMAIL, deadline
    return action, due
