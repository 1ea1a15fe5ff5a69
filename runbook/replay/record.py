"""A record's replay in progress, and what records replayed together share.

``Sim`` is one record's state on the simulated clock; ``move`` applies a step as the writer
does (``notify.rules.plan``), ``check_page`` asks whether the schedule a step ends would have
paged, ``finish`` says what came of the record. Records with the same opening share their
steps (``Shared``) until their histories part.
"""

import gc
import heapq
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import NamedTuple

from django.conf import settings

from notify.rules import machine, plan
from notify.rules.machine import state_of
from notify.rules.vocabulary import Channel, NextAction, Normalized, State
from notify.transports import call_bound
from policies.models import PolicyVersion
from runbook.paging import risk
from runbook.replay.timings import DEFAULT_LOCALE, Timing

# The simulated clock's zero, naive: replay's times are all UTC and all derived from this one, so
# nothing is lost, and a naive time hashes without the offset lookup an aware one makes on every
# hash (each shared step's key holds one). The decisions are the same arithmetic on either.
EPOCH = datetime(2000, 1, 1)  # noqa: DTZ001 (naive on purpose: see above)
# A record's event takes a handful of steps; more means the model and the table disagree.
Observation = plan.ObservationInput


@dataclass(frozen=True, slots=True)
class Provider:
    """The providers' and our clients' bounds, as the worker reads them from settings.

    Read once per replay (``Provider.configured()``), not on every call of every record:
    a lazy settings lookup costs about as much as a decision.
    """

    sms_timeout: timedelta  # our Twilio client's timeout (TWILIO_TIMEOUT)
    sms_bound: timedelta  # the longest an SMS call can take (call_bound)
    sms_lookup_delay: timedelta  # NOTIFY_SMS_LOOKUP_DELAY
    sms_proof_after: timedelta  # absence is proven this long after the attempt began
    email_bound: timedelta  # the whole email exchange's deadline (call_bound)

    @classmethod
    def configured(cls) -> "Provider":
        sms_bound = call_bound(Channel.SMS)
        return cls(
            sms_timeout=timedelta(seconds=settings.TWILIO_TIMEOUT),
            sms_bound=sms_bound,
            sms_lookup_delay=settings.NOTIFY_SMS_LOOKUP_DELAY,
            sms_proof_after=sms_bound + settings.TWILIO_PROCESSING_HORIZON,
            email_bound=call_bound(Channel.EMAIL),
        )


@dataclass(slots=True, eq=False)
class _Point:
    """Where a record's replay stands, shared by every record that got there by the same steps:
    the event as it then is, the worker's decision for it, and the steps taken from it so far."""

    loaded: plan.Loaded
    decision: machine.Decision
    # Keyed by what the step applied and when; everything a step does to the event is a function
    # of the point it starts from and that key, so a record taking it again takes it as it went.
    steps: dict[tuple[object, ...], "_Step"] = field(default_factory=dict)


class _Step(NamedTuple):
    to: _Point
    entered: str | None  # the state its change entered; None: no change
    # The outcome's page flags after the step: a function of the steps to here, as the rest is.
    paged: bool
    page_without_action: bool


# How many points a run keeps; past it, records are replayed step by step without sharing more.
# Bounds the memory (a point is about a kilobyte) whatever the history holds, and the garbage
# collector's work: it walks every point kept on each full pass. Measured on generated records
# (docs/replay.md, "Speed"), 2,000 to 30,000 gave the same speed; 60,000 was slower.
POINT_LIMIT = 10_000


@dataclass(slots=True)
class Shared:
    """What replaying many records against unchanging policies shares.

    The providers' bounds, read from settings once; and the points records reach. Every record
    with the same policy and lifetime is created the same way (its opening, keyed by the
    policy's id and the lifetime); from there, records that are applied the same thing at the
    same moment reach the same point: the worker's decisions for it are made once per run and
    shared (snapshots are immutable), not made again for every record. The first submit of
    every record is shared so, and so is what follows an answer that came at the same moment.
    """

    provider: Provider = field(default_factory=Provider.configured)
    # Each root point holds its policy (``loaded.policy``), so the id keying it is not reused.
    openings: dict[tuple[int, float], _Point] = field(default_factory=dict)
    points: int = 0  # kept beyond the openings
    point_limit: int = POINT_LIMIT

    def opening(self, timing: Timing, policy: PolicyVersion) -> _Point:
        key = (id(policy), timing.lifetime_s)
        found = self.openings.get(key)
        if found is None:
            found = self.openings[key] = _open(timing, policy)
        return found


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while many records replay (a ``Shared`` run).

    A replay allocates millions of short-lived tuples and makes no reference cycles (a point
    refers only to the points after it), so the collector finds nothing, yet every full pass
    walks each point the run keeps: 3-7% of a replay's time, measured (docs/benchmarks.md).
    Process-wide, so for the replay's own process or a worker of its own (the projections
    queue); anything cyclic another thread makes meanwhile is collected once it resumes.
    """
    was_enabled = gc.isenabled()  # paused already (a run inside a run): left so
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _open(timing: Timing, policy: PolicyVersion) -> _Point:
    expires = EPOCH + timedelta(seconds=timing.lifetime_s)
    state, channel = (State.SMS_REQUESTED, Channel.SMS) if policy.uses_sms else (State.EMAIL_CLAIMED, Channel.EMAIL)
    event = machine.EventSnapshot(state, EPOCH, expires, EPOCH, None, policy.uses_email and policy.uses_sms)
    loaded = plan.Loaded(event, 1, 0, policy, MappingProxyType({channel: machine.NEW_CLAIM}))  # shared: read-only
    return _Point(loaded, machine.decide(event, loaded.claims, policy, EPOCH))


@dataclass
class Replayed:
    final_state: State
    claimed_at: float | None = None  # seconds after creation
    claim_remaining_s: float | None = None  # reset lifetime left at the claim
    email_accepted: bool = False
    sms_attempts: int = 0  # SMS submits, a resubmit after proven absence included
    sms_delivered_at: float | None = None
    extra_message: bool = False
    useless_fallback: bool = False
    no_useful_life: bool = False  # an email not sent: the link had too little life left
    expired_without_outcome: bool = False
    paged: bool = False
    page_without_action: bool = False
    states: list[str] = field(default_factory=list)
    claims: dict[Channel, str] = field(default_factory=dict)  # each channel's final claim state
    locale: str = DEFAULT_LOCALE  # the template set the record's messages were worded from
    sms_segments: int = 0  # segments of the SMS the provider took (0: none); unrecorded ones count 1


# A step of a traced replay: the event after it, the decision on it, and when it was taken.
Traced = tuple[plan.Loaded, machine.Decision, datetime]


class Sim:
    """One record's replay in progress.

    A plain class with its own ``__init__``, not a dataclass: compiled (config.native), a
    dataclass's generated ``__init__`` stays interpreted, and this one runs once per record.
    """

    def __init__(self, timing: Timing, policy: PolicyVersion, shared: Shared, opening: _Point) -> None:
        self.timing = timing
        self.policy = policy
        self.shared = shared
        self.provider = shared.provider
        # The shared point the record is at; None once its steps leave what the run keeps.
        self.point: _Point | None = opening
        self.loaded = opening.loaded
        self.decision = opening.decision
        # The simulated clock: the time of the last thing that happened.
        self.now = EPOCH
        # When the stored schedule was last written: a page can fire from here on.
        self.segment_start = EPOCH
        # Provider-side facts waiting to happen: (time, order, observation).
        self.facts: list[tuple[datetime, int, Observation]] = []
        self.sms_accepted_at: datetime | None = None  # when the provider has the message
        self.sms_attempt_started_at = EPOCH  # when the current SMS submit began (the claim's)
        # When a channel first reached an outcome: an expiry is judged by whether this came by then.
        self.outcome_at: datetime | None = None
        # A terminal receipt whose callback was lost: (from when the provider's status shows it, status).
        self.polled_receipt: tuple[datetime, Normalized] | None = None
        self.email_attempts = 0
        self.scheduled = 0  # ties between facts at the same time go in the order they were made
        self.outcome = Replayed(State.SMS_REQUESTED)
        self.trace: list[Traced] | None = None  # every step, when traced (``simulate.trace``)

    def trace_step(self) -> None:
        if self.trace is not None:
            self.trace.append((self.loaded, self.decision, self.now))

    def schedule(self, at: datetime, observation: Observation) -> None:
        self.scheduled += 1
        heapq.heappush(self.facts, (at, self.scheduled, observation))


_SMS_DELIVERY = (Channel.SMS, Normalized.DELIVERED)  # compared as a pair: each member read once


def observe(sim: Sim, observation: Observation, now: datetime) -> None:
    move(sim, (observation, now), lambda loaded: plan.observation_change(loaded, observation), observation, now)
    evidence = (observation.channel, observation.normalized)
    if evidence == _SMS_DELIVERY and sim.outcome.sms_delivered_at is None:
        sim.outcome.sms_delivered_at = (now - EPOCH).total_seconds()
    if sim.outcome_at is None and evidence in machine.OUTCOME_EVIDENCE:
        sim.outcome_at = now  # as the live roll-up asks: evidence of an outcome had come


def move(sim: Sim, key: tuple[object, ...], planner: plan.Plan, observation: Observation | None, now: datetime) -> None:
    """Apply one step, as the writer does: the plan's change, if any, and the observation.

    Before it, check whether the schedule that ends here would have paged. ``key`` says what
    the step applies and when (the plan's change follows from it and the event).
    """
    if not shared_step(sim, key):
        check_page(sim, until=now)
        change = planner(sim.loaded)
        written = plan.after_write(sim.loaded, change, observation, now)
        entered = None if change is None else change.to_state.value
        if entered is not None:
            sim.outcome.states.append(entered)
        sim.loaded, sim.decision = written.after, written.decision
        keep(sim, key, entered)
    sim.segment_start = sim.now = now
    sim.trace_step()


def shared_step(sim: Sim, key: tuple[object, ...]) -> bool:
    """Take the step ``key`` as an earlier record took it from the same shared point, if one did."""
    point = sim.point
    step = point.steps.get(key) if point is not None else None
    if step is None:
        return False
    outcome = sim.outcome
    outcome.paged, outcome.page_without_action = step.paged, step.page_without_action
    if step.entered is not None:
        outcome.states.append(step.entered)
    sim.point, sim.loaded, sim.decision = step.to, step.to.loaded, step.to.decision
    return True


def keep(sim: Sim, key: tuple[object, ...], entered: str | None) -> None:
    """Keep the step just taken from the record's shared point, for the records that take it next.

    A terminal point is not kept (nothing is left to decide there), nor any past the limit:
    from there, the record's steps are its own.
    """
    shared, point = sim.shared, sim.point
    if point is None:
        return
    if shared.points >= shared.point_limit or sim.decision.action == NextAction.NONE:
        sim.point = None
        return
    # Read-only from here: other records take this point as it is, so none may change its claims.
    sim.loaded = sim.loaded._replace(claims=MappingProxyType(sim.loaded.claims))
    reached = _Point(sim.loaded, sim.decision)
    point.steps[key] = _Step(reached, entered, sim.outcome.paged, sim.outcome.page_without_action)
    shared.points += 1
    sim.point = reached


@dataclass(frozen=True, slots=True)
class _Stored:
    """What the at-risk evaluator reads off the event row: its stored schedule."""

    act_by: datetime | None
    expires_at: datetime
    next_action: str


# The first moment strictly inside the page margin (a constant: built once, not on every step).
_TICK = timedelta(microseconds=1)


def check_page(sim: Sim, *, until: datetime) -> None:
    """Would the evaluator have paged between the last write and ``until``?

    The budget only shrinks while nothing is written, so the first moment it is within
    the margin is the one to test: ``act_by - margin``, or the last write if already
    inside. An upper bound of the live evaluator, which looks every few seconds and can
    miss an event that is inside the margin for less than that.
    """
    if sim.outcome.paged or sim.decision.act_by is None:
        return
    first = max(sim.segment_start, sim.decision.act_by - sim.policy.page_margin + _TICK)
    if first >= until:
        return
    stored = _Stored(sim.decision.act_by, sim.loaded.event.expires_at, sim.decision.action.value)
    if not risk.pageable(stored, first):
        return
    sim.outcome.paged = True
    # The page is justified only if, deciding afresh at that moment, a step still remains.
    live = machine.decide(sim.loaded.event, sim.loaded.claims, sim.policy, first)
    sim.outcome.page_without_action = live.action in (NextAction.EXPIRE, NextAction.NONE)


def finish(sim: Sim) -> Replayed:
    outcome = sim.outcome
    outcome.final_state = state_of(sim.loaded.event.state)
    claimed, delivered = outcome.claimed_at, outcome.sms_delivered_at
    outcome.extra_message = (
        outcome.email_accepted
        and claimed is not None
        and delivered is not None
        and claimed < delivered <= sim.timing.lifetime_s
    )
    if outcome.claim_remaining_s is not None:
        email_step = machine.time_needed(State.EMAIL_CLAIMED, sim.policy, True).total_seconds()
        outcome.useless_fallback = outcome.claim_remaining_s < email_step
    outcome.claims = {channel: claim.state for channel, claim in sim.loaded.claims.items()}
    outcome.locale = sim.timing.locale
    if sim.sms_accepted_at is not None:
        outcome.sms_segments = sim.timing.sms_segments or 1
    # Judged at expiry, as the live roll-up does (machine.OUTCOME_EVIDENCE): a receipt after
    # the link expired, drained here long after, does not clear it.
    outcome.expired_without_outcome = outcome.final_state == State.EXPIRED and (
        sim.outcome_at is None or sim.outcome_at > sim.loaded.event.expires_at
    )
    return outcome
