"""One historical reset, replayed on a simulated clock through the worker's own decisions.

Nothing here decides anything of its own: ``machine.decide`` says what is next and when,
``transitions.observation_change`` / ``fallback_change`` / ``expiry_change`` say what
the table allows, ``transitions.advance`` moves the event (the in-memory half of the
writer the worker uses), and ``runbook.risk.pageable`` says whether a page would go
out. The record supplies only what the providers did and how long it took.

The provider model: the SMS submit call returns after ``sms_accept_s`` (the provider
accepted it), its terminal receipt arrives by callback ``sms_terminal_s`` after the
submit (never, for ``none``); polls in between find it pending. The email submit
returns ``email_accept_s`` after it started, accepted or permanently refused.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from notify import machine, rows, transitions
from notify.states import Cause, Channel, ClaimState, NextAction, Normalized, Source, State
from policies.models import PolicyVersion
from runbook import risk
from runbook.replay.timings import Timing

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
# A record's event takes a handful of steps; more means the model and the table disagree.
MAX_STEPS = 10_000


@dataclass
class Outcome:
    final_state: State
    claimed_at: float | None = None  # seconds after creation
    claim_remaining_s: float | None = None  # reset lifetime left at the claim
    email_accepted: bool = False
    sms_delivered_at: float | None = None
    extra_message: bool = False
    useless_fallback: bool = False
    expired_without_outcome: bool = False
    paged: bool = False
    page_without_action: bool = False
    states: list[str] = field(default_factory=list)


@dataclass
class _Sim:
    timing: Timing
    policy: PolicyVersion
    loaded: rows.Loaded
    decision: machine.Decision
    # The simulated clock: the time of the last thing that happened.
    now: datetime = EPOCH
    # When the current state (and stored schedule) began: a page can fire from here on.
    segment_start: datetime = EPOCH
    sms_submitted_at: datetime | None = None
    receipt_applied: bool = False
    outcome: Outcome = field(default_factory=lambda: Outcome(State.SMS_REQUESTED))


def simulate(timing: Timing, policy: PolicyVersion) -> Outcome:
    """Return what the worker would have done with this record under ``policy``."""
    sim = _start(timing, policy)
    for _ in range(MAX_STEPS):
        receipt_at = _receipt_time(sim)
        action, due = sim.decision.action, sim.decision.due_at
        if action == NextAction.NONE and receipt_at is None:
            break
        # Whatever fell due while a provider call was in flight happens when it returns.
        receipt_at = max(receipt_at, sim.now) if receipt_at is not None else None
        due = max(due, sim.now) if due is not None and action != NextAction.NONE else None
        # A receipt due no later than the next step is in before it (the live worker would
        # have taken the callback first).
        if receipt_at is not None and (due is None or receipt_at <= due):
            _receive(sim, receipt_at)
        elif due is not None:
            _act(sim, action, due)
    else:
        raise RuntimeError(f"replay of {timing} did not settle in {MAX_STEPS} steps")
    return _finish(sim)


def _start(timing: Timing, policy: PolicyVersion) -> _Sim:
    expires = EPOCH + timedelta(seconds=timing.lifetime_s)
    if policy.uses_sms:
        state, channel = State.SMS_REQUESTED, Channel.SMS
    else:
        state, channel = State.EMAIL_CLAIMED, Channel.EMAIL
    event = machine.EventSnapshot(state, EPOCH, expires, EPOCH, None, policy.uses_email and policy.uses_sms)
    loaded = rows.Loaded(event, 1, 0, policy, {channel: machine.NEW_CLAIM})
    decision = machine.decide(event, loaded.claims, policy, EPOCH)
    sim = _Sim(timing, policy, loaded, decision)
    sim.outcome.states.append(state.value)
    if state == State.EMAIL_CLAIMED:
        sim.outcome.claimed_at, sim.outcome.claim_remaining_s = 0.0, timing.lifetime_s
    return sim


def _receipt_time(sim: _Sim) -> datetime | None:
    timing = sim.timing
    if sim.receipt_applied or sim.sms_submitted_at is None or timing.sms_terminal_s is None:
        return None
    accepted = sim.sms_submitted_at + timedelta(seconds=timing.sms_accept_s)
    # A receipt cannot be taken before the submit's own answer: the lease holds the event.
    return max(accepted, sim.sms_submitted_at + timedelta(seconds=timing.sms_terminal_s))


def _receive(sim: _Sim, at: datetime) -> None:
    sim.receipt_applied = True
    delivered = sim.timing.sms_outcome == "delivered"
    normalized = Normalized.DELIVERED if delivered else Normalized.TERMINAL_FAILURE
    if delivered:
        sim.outcome.sms_delivered_at = (at - EPOCH).total_seconds()
    _observe(sim, transitions.ObservationInput(Channel.SMS, Source.CALLBACK, normalized), at)


def _act(sim: _Sim, action: NextAction, now: datetime) -> None:
    loaded = sim.loaded
    if action == NextAction.EXPIRE:
        _move(sim, transitions.expiry_change(loaded, now), None, now)
    elif action == NextAction.CLAIM_EMAIL:
        cause = Cause.OBSERVATION if loaded.event.state == State.SMS_FAILED else Cause.DEADLINE
        _move(sim, transitions.fallback_change(loaded, now, cause), None, now)
        if sim.loaded.event.state == State.EMAIL_CLAIMED:
            claimed = (now - EPOCH).total_seconds()
            sim.outcome.claimed_at, sim.outcome.claim_remaining_s = claimed, sim.timing.lifetime_s - claimed
    elif action in (NextAction.SUBMIT_SMS, NextAction.RECOVER_SMS):
        sim.sms_submitted_at = now
        _submitting(sim, Channel.SMS)
        answered = now + timedelta(seconds=sim.timing.sms_accept_s)
        _observe(sim, transitions.ObservationInput(Channel.SMS, Source.SUBMIT, Normalized.ACCEPTED), answered)
    elif action == NextAction.POLL_SMS:
        # The receipt is not in yet (it would have been taken first): the provider says pending.
        _observe(sim, transitions.ObservationInput(Channel.SMS, Source.POLL, Normalized.PENDING), now)
    elif action == NextAction.SUBMIT_EMAIL:
        _submitting(sim, Channel.EMAIL)
        answered = now + timedelta(seconds=sim.timing.email_accept_s)
        accepted = sim.timing.email_outcome == "accepted"
        normalized = Normalized.ACCEPTED if accepted else Normalized.REJECTED
        _observe(sim, transitions.ObservationInput(Channel.EMAIL, Source.SUBMIT, normalized), answered)
        sim.outcome.email_accepted = accepted and sim.loaded.event.state == State.EMAIL_ACCEPTED
    else:
        raise ValueError(f"replay cannot perform {action}")


def _submitting(sim: _Sim, channel: Channel) -> None:
    # As begin_submit records before the call: the claim is being submitted.
    claims = {**sim.loaded.claims, channel: machine.ClaimSnapshot(ClaimState.SUBMITTING.value)}
    sim.loaded = rows.Loaded(sim.loaded.event, sim.loaded.version, 0, sim.loaded.policy, claims)


def _observe(sim: _Sim, observation: transitions.ObservationInput, now: datetime) -> None:
    _move(sim, transitions.observation_change(sim.loaded, observation), observation, now)


def _move(
    sim: _Sim, change: transitions.Change | None, observation: transitions.ObservationInput | None, now: datetime
) -> None:
    """Apply one step; before it, check whether the state that ends here would have paged."""
    _check_page(sim, until=now)
    advanced = transitions.advance(sim.loaded, change, observation, now)
    if change is not None:
        sim.segment_start = now
        sim.outcome.states.append(change.to_state.value)
    elif observation is not None and advanced.decision != sim.decision:
        sim.segment_start = now  # the stored schedule changed (a poll moved the next one)
    sim.loaded, sim.decision, sim.now = advanced.after, advanced.decision, now


@dataclass(frozen=True)
class _Stored:
    """What the at-risk evaluator reads off the event row: its stored schedule."""

    act_by: datetime | None
    expires_at: datetime
    next_action: str


def _check_page(sim: _Sim, *, until: datetime) -> None:
    """Would the periodic evaluator have paged between the last write and ``until``?

    The budget only shrinks while nothing is written, so the first moment it is within
    the margin is the one to test: ``act_by - margin``, or the last write if already inside.
    """
    if sim.outcome.paged or sim.decision.act_by is None:
        return
    first = max(sim.segment_start, sim.decision.act_by - sim.policy.page_margin + timedelta(microseconds=1))
    if first >= until:
        return
    stored = _Stored(sim.decision.act_by, sim.loaded.event.expires_at, sim.decision.action.value)
    if not risk.pageable(stored, first):
        return
    sim.outcome.paged = True
    # The page is justified only if, deciding afresh at that moment, a step still remains.
    live = machine.decide(sim.loaded.event, sim.loaded.claims, sim.policy, first)
    sim.outcome.page_without_action = live.action in (NextAction.EXPIRE, NextAction.NONE)


def _finish(sim: _Sim) -> Outcome:
    outcome = sim.outcome
    outcome.final_state = State(sim.loaded.event.state)
    expires_s = sim.timing.lifetime_s
    claimed = outcome.claimed_at
    delivered = outcome.sms_delivered_at
    outcome.extra_message = (
        outcome.email_accepted and claimed is not None and delivered is not None and claimed < delivered <= expires_s
    )
    if outcome.claim_remaining_s is not None:
        email_step = (sim.policy.email_submit_cost + sim.policy.record_cost).total_seconds()
        outcome.useless_fallback = outcome.claim_remaining_s < email_step
    claims = sim.loaded.claims
    settled_sms = claims.get(Channel.SMS, machine.NEW_CLAIM).state in (ClaimState.DELIVERED, ClaimState.FAILED)
    settled_email = claims.get(Channel.EMAIL, machine.NEW_CLAIM).state in (
        ClaimState.ACCEPTED,
        ClaimState.DELIVERED,
        ClaimState.FAILED,
    )
    outcome.expired_without_outcome = outcome.final_state == State.EXPIRED and not (settled_sms or settled_email)
    return outcome
