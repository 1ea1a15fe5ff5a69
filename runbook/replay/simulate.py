"""One historical reset, replayed on a simulated clock through the worker's own decisions.

Nothing here decides anything of its own: ``machine.decide`` says what is next and when,
``transitions.observation_change`` / ``fallback_change`` / ``expiry_change`` say what
the table allows, ``transitions.after_write`` moves the event (the in-memory half of the
writer the worker uses), ``transitions.not_listed`` says what a lookup that did not find
the SMS proves, and ``runbook.paging.risk.pageable`` says whether a page would go out. The record
supplies only what the providers did and how long it took.

The provider model, per the worker (``notify/worker.py``). Each call is answered as history
answered that attempt (``_answer``; a replay making more calls than history did gets the last
one's answer again):
- An SMS call refused (``transient``: nothing sent, tried again a poll interval after the answer;
  ``failed``: for good) is answered after its latency. An accepted one is answered after its
  latency, unless that is longer than the client timeout (``TWILIO_TIMEOUT``): then the outcome
  is unknown, and the claim is settled by lookups, as is a call whose message never appeared
  (``unknown``). A lookup finds the message once the provider has accepted it. Before that,
  "not found" proves absence only once our call's bound and the provider's processing horizon
  have passed since the attempt began; until then the lookup is repeated with backoff, and at
  D the event yields to the email: never a second SMS. The horizon is
  ``TWILIO_PROCESSING_HORIZON``, the one the production transport is given. A record accepted
  later than that breaks the provider's promise: the message is then resubmitted, as the
  worker would, and ``Replayed.sms_attempts`` shows it.
- The terminal receipt comes ``sms_terminal_s`` after the accepted call began. One that came by
  callback arrives then, whenever that is: before the submit's answer too (the callback needs no
  lease), in which case a delivery implies the acceptance, as ``record_receipt`` has it, and so
  it does for a submit still unresolved when the event moved on to the email. One whose
  callback was lost (``sms_receipt`` ``poll``) is found only by the first poll or lookup at or
  after that time. Polls before the receipt find the SMS pending.
- The email is not sent once the link has too little life left for it to be of use
  (``machine.email_has_useful_life``): the channel fails as ``no_useful_life``. Otherwise each
  call is answered after its latency: accepted, refused for good, deferred (``transient``) or
  lost (``unknown``), the last two tried again after the policy's backoff. An answer later than
  the whole exchange's deadline (``EMAIL_SEND_DEADLINE``) is cut there; the record does not say
  whether the final dot had gone, so the cut is taken as after it (an unknown outcome, the case
  that may cost a second copy), resent under the same Message-ID while the policy allows, as the
  worker does.
- Workers are not killed here: an email is never found mid-send by another worker.
"""

import gc
import heapq
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import NamedTuple

from django.conf import settings

from notify import rows, transitions
from notify.rules import machine
from notify.rules.machine import plain, state_of
from notify.rules.vocabulary import Cause, Channel, ClaimState, NextAction, Normalized, Source, State
from notify.transports import call_bound
from policies.models import PolicyVersion
from runbook.paging import risk
from runbook.replay.timings import DEFAULT_LOCALE, Call, Timing

# The simulated clock's zero, naive: replay's times are all UTC and all derived from this one, so
# nothing is lost, and a naive time hashes without the offset lookup an aware one makes on every
# hash (each shared step's key holds one). The decisions are the same arithmetic on either.
EPOCH = datetime(2000, 1, 1)  # noqa: DTZ001 (naive on purpose: see above)
# A record's event takes a handful of steps; more means the model and the table disagree.
MAX_STEPS = 10_000
Observation = transitions.ObservationInput


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

    loaded: rows.Loaded
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
    loaded = rows.Loaded(event, 1, 0, policy, MappingProxyType({channel: machine.NEW_CLAIM}))  # shared: read-only
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
Traced = tuple[rows.Loaded, machine.Decision, datetime]


class _Sim:
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


def simulate(timing: Timing, policy: PolicyVersion, shared: Shared | None = None) -> Replayed:
    """Return what the worker would have done with this record under ``policy``.

    ``shared``: what records replayed together share; pass one ``Shared()`` when replaying many.
    """
    return _finish(_replayed(timing, policy, shared or Shared(), None))


def trace(timing: Timing, policy: PolicyVersion, shared: Shared | None = None) -> tuple[list[Traced], Replayed]:
    """Every step of the record's replay (the event after it, every time in it, the decision on
    it, when it was taken) and its outcome: two replays of a record compared step by step."""
    steps: list[Traced] = []
    return steps, _finish(_replayed(timing, policy, shared or Shared(), steps))


def _replayed(timing: Timing, policy: PolicyVersion, shared: Shared, trace: list[Traced] | None) -> _Sim:
    sim = _start(timing, policy, shared)
    sim.trace = trace
    for _ in range(MAX_STEPS):
        action, due = sim.decision.action, sim.decision.due_at
        idle = action == NextAction.NONE
        if idle and not sim.facts:
            break
        # Whatever fell due while nothing could act happens as soon as something can.
        due = max(due, sim.now) if due is not None and not idle else None
        if sim.facts and (due is None or sim.facts[0][0] <= due):
            # A provider fact due no later than the next step comes first, as the live
            # worker's callback or call answer would.
            at, _, observation = heapq.heappop(sim.facts)
            _fact(sim, max(at, sim.now), observation)
        elif due is not None:
            _act(sim, action, due)
    else:
        raise RuntimeError(f"replay of {timing} did not settle in {MAX_STEPS} steps")
    return sim


def _start(timing: Timing, policy: PolicyVersion, shared: Shared) -> _Sim:
    opening = shared.opening(timing, policy)
    sim = _Sim(timing, policy, shared, opening)
    state = opening.loaded.event.state
    sim.outcome.states.append(str(state))
    if state == State.EMAIL_CLAIMED:
        sim.outcome.claimed_at, sim.outcome.claim_remaining_s = 0.0, timing.lifetime_s
    return sim


# The observations that carry nothing of their own, built once: most records make each of them.
_SMS_ACCEPTED = Observation(Channel.SMS, Source.SUBMIT, Normalized.ACCEPTED)
_IMPLIED_ACCEPTANCE = Observation(Channel.SMS, Source.CALLBACK, Normalized.ACCEPTED)
_RECEIPT_STATUSES = (Normalized.DELIVERED, Normalized.TERMINAL_FAILURE)
_RECEIPTS = {status: Observation(Channel.SMS, Source.CALLBACK, status) for status in _RECEIPT_STATUSES}
_POLLED = {status: Observation(Channel.SMS, Source.POLL, status) for status in (Normalized.PENDING, *_RECEIPT_STATUSES)}
_SUBMITTING = plain(ClaimState.SUBMITTING)
# Compared as pairs, each member read once here: every read of an enum member costs compiled code
# CPython's slow attribute hook (Python 3.11's EnumType defines __getattr__), and these run per fact.
_CALLBACK_DELIVERY = (Source.CALLBACK, Normalized.DELIVERED)
_SMS_DELIVERY = (Channel.SMS, Normalized.DELIVERED)


def _answer(calls: tuple[Call, ...], index: int, latency_s: float, answer: str) -> tuple[float, str]:
    """The ``index``-th call (from 0) as history answered it: (latency in seconds, answer).

    From the record's own calls, in the order made; a replay making more calls than history did
    gets the last one's answer again. A record without them (version 1) made one call, summed up
    by ``latency_s`` and ``answer``. A plain tuple, which compiled code builds without the frame a
    NamedTuple's ``__new__`` costs.
    """
    if not calls:
        return latency_s, answer
    call = calls[min(index, len(calls) - 1)]
    return call.latency_s, call.answer


def _fact(sim: _Sim, at: datetime, observation: Observation) -> None:
    # A delivery before the submit is settled proves the acceptance (record_receipt).
    delivery = (observation.source, observation.normalized) == _CALLBACK_DELIVERY
    if delivery and transitions.delivery_proves_acceptance(sim.loaded):
        _observe(sim, _IMPLIED_ACCEPTANCE, at)
    _observe(sim, observation, at)
    if observation.channel == Channel.EMAIL:
        _after_email_answer(sim, observation, at)


def _act(sim: _Sim, action: NextAction, now: datetime) -> None:
    act = _ACTIONS.get(action)
    if act is None:
        raise ValueError(f"replay cannot perform {action}")
    act(sim, now)


def _expire(sim: _Sim, now: datetime) -> None:
    _move(sim, (NextAction.EXPIRE, now), lambda loaded: transitions.expiry_change(loaded, now), None, now)


def _claim_email(sim: _Sim, now: datetime) -> None:
    cause = Cause.OBSERVATION if sim.loaded.event.state == State.SMS_FAILED else Cause.DEADLINE
    _move(sim, (NextAction.CLAIM_EMAIL, now), lambda loaded: transitions.fallback_change(loaded, now, cause), None, now)
    if sim.loaded.event.state == State.EMAIL_CLAIMED:
        claimed = (now - EPOCH).total_seconds()
        sim.outcome.claimed_at, sim.outcome.claim_remaining_s = claimed, sim.timing.lifetime_s - claimed


def _poll_sms(sim: _Sim, now: datetime) -> None:
    # A receipt by callback would have been taken first; one that came by poll is found here.
    _observe(sim, _POLLED[_polled_status(sim, now)], now)


def _submit_sms(sim: _Sim, now: datetime) -> None:
    """As ``worker._submit_sms``, answered as history answered this attempt (``_answer``)."""
    timing, provider = sim.timing, sim.provider
    _submitting(sim, Channel.SMS, settle_at=now + provider.sms_bound + provider.sms_lookup_delay, now=now)
    sim.sms_attempt_started_at = now
    latency_s, answer = _answer(timing.sms_calls, sim.outcome.sms_attempts, timing.sms_accept_s, "accepted")
    sim.outcome.sms_attempts += 1
    latency, timeout = timedelta(seconds=latency_s), provider.sms_timeout
    if answer in ("transient", "failed") and latency <= timeout:
        # Refused, nothing sent: for good, or (transient) tried again a poll interval after the answer.
        transient = answer == "transient"
        retry_at = now + latency + sim.policy.poll_interval if transient else None
        status = Normalized.TRANSIENT_ERROR if transient else Normalized.REJECTED
        sim.schedule(now + latency, Observation(Channel.SMS, Source.SUBMIT, status, retry_at=retry_at))
        return
    if answer == "accepted" and sim.sms_accepted_at is None:
        # The message exists from its acceptance on; its receipt is timed from this submit.
        sim.sms_accepted_at = now + latency
        if timing.sms_terminal_s is not None:
            status = Normalized.DELIVERED if timing.sms_outcome == "delivered" else Normalized.TERMINAL_FAILURE
            receipt_at = max(sim.sms_accepted_at, now + timedelta(seconds=timing.sms_terminal_s))
            if timing.sms_receipt == "poll":
                sim.polled_receipt = (receipt_at, status)  # its callback was lost: only a poll finds it
            else:
                sim.schedule(receipt_at, _RECEIPTS[status])
    if answer == "accepted" and latency <= timeout:
        sim.schedule(now + latency, _SMS_ACCEPTED)
    else:
        # Our client gave up waiting; whether a message exists is for lookups to settle.
        lookup = now + timeout + provider.sms_lookup_delay
        sim.schedule(
            now + timeout, Observation(Channel.SMS, Source.SUBMIT, Normalized.UNKNOWN_OUTCOME, retry_at=lookup)
        )


def _polled_status(sim: _Sim, now: datetime) -> Normalized:
    """What the provider's status says at ``now``: a receipt whose callback was lost shows there
    from its time on (a receipt that came by callback was taken when it came)."""
    if sim.polled_receipt is not None and sim.polled_receipt[0] <= now:
        return sim.polled_receipt[1]
    return Normalized.PENDING


def _recover_sms(sim: _Sim, now: datetime) -> None:
    """As ``worker._recover_sms``: found once the provider has the message; not listed before it,
    which proves absence only past our call's bound and the processing horizon since the attempt began."""
    if sim.sms_accepted_at is not None and sim.sms_accepted_at <= now:
        # Found: its acceptance first, then what it says now if it has gone further.
        _observe(sim, Observation(Channel.SMS, Source.RECOVERY, Normalized.ACCEPTED), now)
        status = _polled_status(sim, now)
        if status != Normalized.PENDING:
            _observe(sim, Observation(Channel.SMS, Source.RECOVERY, status), now)
        return
    not_listed = transitions.not_listed(
        sim.sms_attempt_started_at,
        now,  # a replayed lookup answers at once: its list is read when its answer comes
        now,
        proof_after=sim.provider.sms_proof_after,
        first_wait=sim.provider.sms_lookup_delay,
        longest_wait=sim.policy.poll_interval,
    )
    _observe(sim, not_listed, now)


def _submit_email(sim: _Sim, now: datetime) -> None:
    """As ``worker._submit_email``: never once the link has too little life left for the email."""
    if not machine.email_has_useful_life(sim.loaded.event, sim.policy, now):
        sim.outcome.no_useful_life = True
        _observe(sim, transitions.NO_USEFUL_LIFE, now)
        return
    timing = sim.timing
    latency_s, answer = _answer(timing.email_calls, sim.email_attempts, timing.email_accept_s, timing.email_outcome)
    sim.email_attempts += 1
    deadline = sim.provider.email_bound  # the whole exchange's, as the transport enforces it
    _submitting(sim, Channel.EMAIL, settle_at=now + deadline, now=now)
    answer_after = timedelta(seconds=latency_s)
    if answer_after <= deadline:
        status = _EMAIL_ANSWERS[answer]
        # A deferral or a lost answer leaves the claim to be tried again after the policy's backoff.
        retry_at = now + answer_after + sim.policy.email_backoff if status in _EMAIL_RETRIED else None
        sim.schedule(now + answer_after, Observation(Channel.EMAIL, Source.SUBMIT, status, retry_at=retry_at))
    else:
        retry_at = now + deadline + sim.policy.email_backoff
        unknown = Observation(Channel.EMAIL, Source.SUBMIT, Normalized.UNKNOWN_OUTCOME, retry_at=retry_at)
        sim.schedule(now + deadline, unknown)


_EMAIL_ANSWERS = {
    "accepted": Normalized.ACCEPTED,
    "failed": Normalized.REJECTED,
    "transient": Normalized.TRANSIENT_ERROR,
    "unknown": Normalized.UNKNOWN_OUTCOME,
}
_EMAIL_RETRIED = (Normalized.TRANSIENT_ERROR, Normalized.UNKNOWN_OUTCOME)


# What the worker does for each next action, as replay does it: looked up rather than compared in
# turn, which read an enum member per comparison (the attribute hook above) on every step.
_ACTIONS: dict[NextAction, Callable[[_Sim, datetime], None]] = {
    NextAction.EXPIRE: _expire,
    NextAction.CLAIM_EMAIL: _claim_email,
    NextAction.SUBMIT_SMS: _submit_sms,
    NextAction.RECOVER_SMS: _recover_sms,
    NextAction.POLL_SMS: _poll_sms,
    NextAction.SUBMIT_EMAIL: _submit_email,
}


def _after_email_answer(sim: _Sim, observation: Observation, at: datetime) -> None:
    """As ``worker._unless_exhausted``: give the channel up once the policy allows no more attempts."""
    if observation.normalized == Normalized.ACCEPTED:
        sim.outcome.email_accepted = sim.loaded.event.state == State.EMAIL_ACCEPTED
        return
    if sim.loaded.claims[Channel.EMAIL].state != ClaimState.CLAIMED:
        return
    policy = sim.policy
    if (observation.normalized == Normalized.UNKNOWN_OUTCOME and not policy.resubmit_unknown_email) or (
        sim.email_attempts >= policy.email_attempt_limit
    ):
        _observe(sim, Observation(Channel.EMAIL, Source.SUBMIT, Normalized.TERMINAL_FAILURE), at)


def _submitting(sim: _Sim, channel: Channel, *, settle_at: datetime, now: datetime) -> None:
    # As begin_submit records before the call: the claim is being submitted, and is due for
    # settling (an SMS lookup) only once the call can no longer be in flight.
    key = (channel, settle_at, now)
    if not _shared_step(sim, key):
        # Built with tuple.__new__, as transitions.after_write builds its values: a NamedTuple's own
        # __new__ is Python code that this compiled module pays a frame for.
        claim = tuple.__new__(machine.ClaimSnapshot, (_SUBMITTING, settle_at))
        claims = {**sim.loaded.claims, channel: claim}
        sim.loaded = tuple.__new__(rows.Loaded, (sim.loaded.event, sim.loaded.version, 0, sim.loaded.policy, claims))
        sim.decision = machine.decide(sim.loaded.event, claims, sim.policy, now)
        _keep(sim, key, None)
    sim.now = now
    sim.trace_step()


def _observe(sim: _Sim, observation: Observation, now: datetime) -> None:
    _move(sim, (observation, now), lambda loaded: transitions.observation_change(loaded, observation), observation, now)
    evidence = (observation.channel, observation.normalized)
    if evidence == _SMS_DELIVERY and sim.outcome.sms_delivered_at is None:
        sim.outcome.sms_delivered_at = (now - EPOCH).total_seconds()
    if sim.outcome_at is None and evidence in machine.OUTCOME_EVIDENCE:
        sim.outcome_at = now  # as the live roll-up asks: evidence of an outcome had come


def _move(
    sim: _Sim, key: tuple[object, ...], plan: transitions.Plan, observation: Observation | None, now: datetime
) -> None:
    """Apply one step, as the writer does: the plan's change, if any, and the observation.

    Before it, check whether the schedule that ends here would have paged. ``key`` says what
    the step applies and when (the plan's change follows from it and the event).
    """
    if not _shared_step(sim, key):
        _check_page(sim, until=now)
        change = plan(sim.loaded)
        written = transitions.after_write(sim.loaded, change, observation, now)
        entered = None if change is None else plain(change.to_state)
        if entered is not None:
            sim.outcome.states.append(entered)
        sim.loaded, sim.decision = written.after, written.decision
        _keep(sim, key, entered)
    sim.segment_start = sim.now = now
    sim.trace_step()


def _shared_step(sim: _Sim, key: tuple[object, ...]) -> bool:
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


def _keep(sim: _Sim, key: tuple[object, ...], entered: str | None) -> None:
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
    # (Built with tuple.__new__ rather than _replace, which is interpreted Python even here: config.native.)
    loaded = sim.loaded
    claims = MappingProxyType(loaded.claims)
    sim.loaded = tuple.__new__(rows.Loaded, (loaded.event, loaded.version, loaded.lease_token, loaded.policy, claims))
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


def _check_page(sim: _Sim, *, until: datetime) -> None:
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
    stored = _Stored(sim.decision.act_by, sim.loaded.event.expires_at, plain(sim.decision.action))
    if not risk.pageable(stored, first):
        return
    sim.outcome.paged = True
    # The page is justified only if, deciding afresh at that moment, a step still remains.
    live = machine.decide(sim.loaded.event, sim.loaded.claims, sim.policy, first)
    sim.outcome.page_without_action = live.action in (NextAction.EXPIRE, NextAction.NONE)


def _finish(sim: _Sim) -> Replayed:
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
