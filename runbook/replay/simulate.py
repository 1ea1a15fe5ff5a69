"""One historical reset, replayed on a simulated clock through the worker's own decisions.

Nothing here decides anything of its own: ``machine.decide`` says what is next and when,
``plan.observation_change`` / ``fallback_change`` / ``expiry_change`` say what
the table allows, ``plan.after_write`` moves the event (the in-memory half of the
writer the worker uses), ``plan.not_listed`` says what a lookup that did not find
the SMS proves, and ``runbook.paging.risk.pageable`` says whether a page would go out. The record
supplies only what the providers did and how long it took.

The provider model, per the worker (``notify/worker/actions.py``). Each call is answered as history
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

import heapq
from collections.abc import Callable
from datetime import datetime, timedelta

from notify.rules import machine, plan
from notify.rules.vocabulary import Cause, Channel, ClaimState, NextAction, Normalized, Source, State
from policies.models import PolicyVersion
from runbook.replay.record import (
    EPOCH,
    POINT_LIMIT,
    Observation,
    Replayed,
    Shared,
    Sim,
    Traced,
    collector_paused,
    finish,
    keep,
    move,
    observe,
    shared_step,
)
from runbook.replay.timings import Call, Timing

__all__ = ["EPOCH", "POINT_LIMIT", "Replayed", "Shared", "collector_paused", "simulate", "trace"]

MAX_STEPS = 10_000


def simulate(timing: Timing, policy: PolicyVersion, shared: Shared | None = None) -> Replayed:
    """Return what the worker would have done with this record under ``policy``.

    ``shared``: what records replayed together share; pass one ``Shared()`` when replaying many.
    """
    return finish(_replayed(timing, policy, shared or Shared(), None))


def trace(timing: Timing, policy: PolicyVersion, shared: Shared | None = None) -> tuple[list[Traced], Replayed]:
    """Every step of the record's replay (the event after it, every time in it, the decision on
    it, when it was taken) and its outcome: two replays of a record compared step by step."""
    steps: list[Traced] = []
    return steps, finish(_replayed(timing, policy, shared or Shared(), steps))


def _replayed(timing: Timing, policy: PolicyVersion, shared: Shared, trace: list[Traced] | None) -> Sim:
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


def _start(timing: Timing, policy: PolicyVersion, shared: Shared) -> Sim:
    opening = shared.opening(timing, policy)
    sim = Sim(timing, policy, shared, opening)
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
_SUBMITTING = ClaimState.SUBMITTING.value
# Compared as pairs, each member read once here: every read of an enum member costs compiled code
# CPython's slow attribute hook (Python 3.11's EnumType defines __getattr__), and these run per fact.
_CALLBACK_DELIVERY = (Source.CALLBACK, Normalized.DELIVERED)


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


def _fact(sim: Sim, at: datetime, observation: Observation) -> None:
    # A delivery before the submit is settled proves the acceptance (record_receipt).
    delivery = (observation.source, observation.normalized) == _CALLBACK_DELIVERY
    if delivery and plan.delivery_proves_acceptance(sim.loaded):
        observe(sim, _IMPLIED_ACCEPTANCE, at)
    observe(sim, observation, at)
    if observation.channel == Channel.EMAIL:
        _after_email_answer(sim, observation, at)


def _act(sim: Sim, action: NextAction, now: datetime) -> None:
    act = _ACTIONS.get(action)
    if act is None:
        raise ValueError(f"replay cannot perform {action}")
    act(sim, now)


def _expire(sim: Sim, now: datetime) -> None:
    move(sim, (NextAction.EXPIRE, now), lambda loaded: plan.expiry_change(loaded, now), None, now)


def _claim_email(sim: Sim, now: datetime) -> None:
    cause = Cause.OBSERVATION if sim.loaded.event.state == State.SMS_FAILED else Cause.DEADLINE
    move(sim, (NextAction.CLAIM_EMAIL, now), lambda loaded: plan.fallback_change(loaded, now, cause), None, now)
    if sim.loaded.event.state == State.EMAIL_CLAIMED:
        claimed = (now - EPOCH).total_seconds()
        sim.outcome.claimed_at, sim.outcome.claim_remaining_s = claimed, sim.timing.lifetime_s - claimed


def _poll_sms(sim: Sim, now: datetime) -> None:
    # A receipt by callback would have been taken first; one that came by poll is found here.
    observe(sim, _POLLED[_polled_status(sim, now)], now)


def _submit_sms(sim: Sim, now: datetime) -> None:
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


def _polled_status(sim: Sim, now: datetime) -> Normalized:
    """What the provider's status says at ``now``: a receipt whose callback was lost shows there
    from its time on (a receipt that came by callback was taken when it came)."""
    if sim.polled_receipt is not None and sim.polled_receipt[0] <= now:
        return sim.polled_receipt[1]
    return Normalized.PENDING


def _recover_sms(sim: Sim, now: datetime) -> None:
    """As ``worker._recover_sms``: found once the provider has the message; not listed before it,
    which proves absence only past our call's bound and the processing horizon since the attempt began."""
    if sim.sms_accepted_at is not None and sim.sms_accepted_at <= now:
        # Found: its acceptance first, then what it says now if it has gone further.
        observe(sim, Observation(Channel.SMS, Source.RECOVERY, Normalized.ACCEPTED), now)
        status = _polled_status(sim, now)
        if status != Normalized.PENDING:
            observe(sim, Observation(Channel.SMS, Source.RECOVERY, status), now)
        return
    not_listed = plan.not_listed(
        sim.sms_attempt_started_at,
        now,  # a replayed lookup answers at once: its list is read when its answer comes
        now,
        proof_after=sim.provider.sms_proof_after,
        first_wait=sim.provider.sms_lookup_delay,
        longest_wait=sim.policy.poll_interval,
    )
    observe(sim, not_listed, now)


def _submit_email(sim: Sim, now: datetime) -> None:
    """As ``worker._submit_email``: never once the link has too little life left for the email."""
    if not machine.email_has_useful_life(sim.loaded.event, sim.policy, now):
        sim.outcome.no_useful_life = True
        observe(sim, plan.NO_USEFUL_LIFE, now)
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
_ACTIONS: dict[NextAction, Callable[[Sim, datetime], None]] = {
    NextAction.EXPIRE: _expire,
    NextAction.CLAIM_EMAIL: _claim_email,
    NextAction.SUBMIT_SMS: _submit_sms,
    NextAction.RECOVER_SMS: _recover_sms,
    NextAction.POLL_SMS: _poll_sms,
    NextAction.SUBMIT_EMAIL: _submit_email,
}


def _after_email_answer(sim: Sim, observation: Observation, at: datetime) -> None:
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
        observe(sim, Observation(Channel.EMAIL, Source.SUBMIT, Normalized.TERMINAL_FAILURE), at)


def _submitting(sim: Sim, channel: Channel, *, settle_at: datetime, now: datetime) -> None:
    # As begin_submit records before the call: the claim is being submitted, and is due for
    # settling (an SMS lookup) only once the call can no longer be in flight.
    key = (channel, settle_at, now)
    if not shared_step(sim, key):
        claims = {**sim.loaded.claims, channel: machine.ClaimSnapshot(_SUBMITTING, settle_at)}
        sim.loaded = sim.loaded._replace(lease_token=0, claims=claims)
        sim.decision = machine.decide(sim.loaded.event, claims, sim.policy, now)
        keep(sim, key, None)
    sim.now = now
    sim.trace_step()
