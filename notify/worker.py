"""One worker step: advance an event by the actions due now, holding its lease.

A worker never sleeps holding an event. ``advance`` takes the lease, does what
``machine.decide`` says is due (calling providers only outside any DB
transaction), records each outcome through ``notify.transitions``, releases the
lease and returns when the next action is due, for the caller to schedule a
wake-up. A duplicate or early wake-up finds the lease held or nothing due: a no-op.
"""

import dataclasses
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.urls import reverse

from notify import machine, messages, rows, transitions, vault
from notify.clock import Clock
from notify.models import Claim, VaultEntry
from notify.states import Cause, Channel, ClaimState, NextAction, Normalized, Source, State
from notify.transitions import Lease, ObservationInput, Outcome, Result
from notify.transports import Transports
from notify.transports.base import PermanentError, Receipt, SmsMessage, TransientError, TransportError, UnknownOutcome

log = logging.getLogger("notify.worker")

# Enough for the longest path one step can take when everything is due at once:
# recover (absent), resubmit, fail, claim the fallback, submit the email, give up.
MAX_ACTIONS_PER_STEP = 6


class Ended(Exception):
    """The step cannot go on: the lease was taken over or the claim moved under us."""


@dataclass(frozen=True)
class StepReport:
    event_id: str
    # "done"; "not_due"; "busy" (another worker holds the lease); "ended" (the lease was
    # taken over or the claim moved under us); "gone" (no such event).
    outcome: str
    actions: tuple[NextAction, ...]
    next_action: NextAction
    next_due: datetime | None
    # When to wake the event again: the next due time, but never further off than one
    # poll interval (long ETAs are not relied on). None: someone else schedules it.
    wake_after: timedelta | None = None


def sms_callback_url(event_id: str) -> str:
    """Return the status callback URL Twilio is given, and that its signature is computed over."""
    return settings.PUBLIC_BASE_URL + reverse("sms-status-callback", args=[event_id])


def advance(
    event_id: str, *, transports: Transports, clock: Clock, owner: str, max_actions: int = MAX_ACTIONS_PER_STEP
) -> StepReport:
    """Do every action due now for the event, then return when the next one is due.

    1. Read the event; if nothing is due, stop without touching the lease.
    2. Take the lease (a conditional UPDATE that bumps the fencing token); if another
       worker holds it, stop: that worker will schedule what comes next.
    3. Loop: decide, act (remote calls outside any transaction), record the outcome
       with a compare-and-set under the lease, until nothing more is due now.
    4. Release the lease.
    """
    started = time.monotonic()
    now = clock.now()
    try:
        loaded = rows.load(event_id)
    except LookupError:
        return StepReport(event_id, "gone", (), NextAction.NONE, None)
    decision = machine.decide(loaded.event, loaded.claims, loaded.policy, now)
    if not _due(decision, now):
        wake_after = _wake_after(decision, now, loaded.policy.poll_interval)
        return StepReport(event_id, "not_due", (), decision.action, decision.due_at, wake_after)
    lease = transitions.take_lease(event_id, owner, now=now, ttl=loaded.policy.lease_ttl)
    if lease is None:
        return StepReport(event_id, "busy", (), decision.action, decision.due_at)
    known = dataclasses.replace(loaded, lease_token=lease.token)
    ttl = loaded.policy.lease_ttl
    renew_after = now + ttl / 2
    done: list[NextAction] = []
    outcome = "done"
    try:
        for _ in range(max_actions):
            decision = machine.decide(known.event, known.claims, known.policy, now)
            if not _due(decision, now):
                break
            if now >= renew_after:
                # A step of several remote calls can outlast the lease; renew it before the next
                # call so that no other worker takes over (and recovers) an event still in hand.
                if not transitions.renew_lease(event_id, lease, now=now, ttl=ttl):
                    raise Ended
                renew_after = now + ttl / 2
            done.append(decision.action)
            known = _act(decision.action, event_id, known, lease, transports, now)
            now = clock.now()
        decision = machine.decide(known.event, known.claims, known.policy, now)
    except Ended:
        outcome = "ended"
        decision = machine.NO_ACTION
    finally:
        transitions.release_lease(event_id, lease)
    log.info(
        "step",
        extra={
            "event_id": event_id,
            "actions": [action.value for action in done],
            "outcome": outcome,
            "state": known.event.state,
            "version": known.version,
            "lease_owner": owner,
            "next_action": decision.action.value,
            "duration_ms": round((time.monotonic() - started) * 1000, 1),
        },
    )
    wake_after = _wake_after(decision, now, known.policy.poll_interval)
    return StepReport(event_id, outcome, tuple(done), decision.action, decision.due_at, wake_after)


def _wake_after(decision: machine.Decision, now: datetime, longest: timedelta) -> timedelta | None:
    if decision.action == NextAction.NONE or decision.due_at is None:
        return None
    return min(max(decision.due_at - now, timedelta(0)), longest)


def _due(decision: machine.Decision, now: datetime) -> bool:
    return decision.action != NextAction.NONE and decision.due_at is not None and decision.due_at <= now


def _act(
    action: NextAction, event_id: str, known: rows.Loaded, lease: Lease, transports: Transports, now: datetime
) -> rows.Loaded:
    """Perform one action and return the event as the write that recorded it left it."""
    if action == NextAction.EXPIRE:
        return _landed(transitions.expire(event_id, now=now, actor=lease.owner, lease=lease, known=known))
    if action == NextAction.CLAIM_EMAIL:
        # From a terminal SMS failure the failure is the cause; otherwise the deadline D is.
        cause = Cause.OBSERVATION if known.event.state == State.SMS_FAILED else Cause.DEADLINE
        claimed = transitions.claim_email_fallback(
            event_id, now=now, actor=lease.owner, cause=cause, lease=lease, known=known
        )
        return _landed(claimed)
    if action == NextAction.SUBMIT_SMS:
        return _submit_sms(event_id, known, lease, transports, now)
    if action == NextAction.RECOVER_SMS:
        return _recover_sms(event_id, known, lease, transports, now)
    if action == NextAction.POLL_SMS:
        return _poll_sms(event_id, known, lease, transports, now)
    if action == NextAction.SUBMIT_EMAIL:
        return _submit_email(event_id, known, lease, transports, now)
    raise ValueError(f"no way to perform {action}")


def _landed(outcome: Outcome) -> rows.Loaded:
    if outcome.result == Result.LOST_LEASE:
        raise Ended
    return outcome.after


def _observe(
    event_id: str, observation: ObservationInput, known: rows.Loaded, lease: Lease, now: datetime
) -> rows.Loaded:
    return _landed(
        transitions.record_observation(event_id, observation, now=now, actor=lease.owner, lease=lease, known=known)
    )


def _from_receipt(channel: Channel, source: Source, receipt: Receipt) -> ObservationInput:
    return ObservationInput(
        channel=channel,
        source=source,
        normalized=receipt.normalized,
        raw_status=receipt.raw_status,
        provider_time=receipt.provider_time,
        provider_ref=receipt.provider_ref,
    )


def _from_error(channel: Channel, source: Source, error: TransportError, retry_at: datetime | None) -> ObservationInput:
    normalized = {
        TransientError: Normalized.TRANSIENT_ERROR,
        PermanentError: Normalized.REJECTED,
        UnknownOutcome: Normalized.UNKNOWN_OUTCOME,
    }[type(error)]
    return ObservationInput(channel, source, normalized, raw_status=error.raw_status, retry_at=retry_at)


def _sms_message(event_id: str, policy_loaded: rows.Loaded) -> SmsMessage:
    destinations = _destinations(event_id)
    event = policy_loaded.event
    return SmsMessage(
        to=destinations.phone,
        sender=policy_loaded.policy.sms_sender,
        body=messages.sms_text(policy_loaded.policy, destinations, event.expires_at),
        status_callback=sms_callback_url(event_id),
    )


def _destinations(event_id: str) -> vault.Destinations:
    return vault.unseal(VaultEntry.objects.values_list("ciphertext", flat=True).get(event_id=event_id))


def _claim(event_id: str, channel: Channel) -> Claim:
    return Claim.objects.get(event_id=event_id, channel=channel)


def _begin(event_id: str, channel: Channel, known: rows.Loaded, lease: Lease, now: datetime) -> rows.Loaded:
    # The intent is committed before the remote call: a crash from here on leaves the
    # claim SUBMITTING, and whoever comes next looks the message up before resending.
    begun = transitions.begin_submit(event_id, channel, now=now, lease=lease, known=known)
    if begun is None:
        raise Ended
    return begun


def _submit_sms(event_id: str, known: rows.Loaded, lease: Lease, transports: Transports, now: datetime) -> rows.Loaded:
    message = _sms_message(event_id, known)
    known = _begin(event_id, Channel.SMS, known, lease, now)
    try:
        observation = _from_receipt(Channel.SMS, Source.SUBMIT, transports.sms.submit(message))
    except TransportError as error:
        # Retry a refusal that sent nothing at the next poll interval. Look an unknown outcome
        # up soon (every second here comes out of the SMS budget), but not at once: a
        # message created a moment ago must have time to show up in the provider's list.
        delay = known.policy.poll_interval if isinstance(error, TransientError) else settings.NOTIFY_SMS_LOOKUP_DELAY
        retry_at = now + delay
        observation = _from_error(Channel.SMS, Source.SUBMIT, error, retry_at)
    return _observe(event_id, observation, known, lease, now)


def _recover_sms(event_id: str, known: rows.Loaded, lease: Lease, transports: Transports, now: datetime) -> rows.Loaded:
    """Settle an SMS submit whose outcome is unknown by asking the provider, never by resending blind."""
    claim = _claim(event_id, Channel.SMS)
    message = _sms_message(event_id, known)
    since = claim.submitted_at or claim.created_at
    try:
        found = transports.sms.find(message, since)
    except UnknownOutcome as error:
        retry_at = now + known.policy.poll_interval
        return _observe(event_id, _from_error(Channel.SMS, Source.RECOVERY, error, retry_at), known, lease, now)
    if found is None:
        # Provably absent: back to CLAIMED, due now, and the same key is submitted again.
        absent = ObservationInput(Channel.SMS, Source.RECOVERY, Normalized.TRANSIENT_ERROR, raw_status="not_found")
        return _observe(event_id, absent, known, lease, now)
    # The provider has it: first its acceptance (the claim and workflow move on from
    # submitting), then, if it has gone further, what it says now.
    accepted = dataclasses.replace(_from_receipt(Channel.SMS, Source.RECOVERY, found), normalized=Normalized.ACCEPTED)
    known = _observe(event_id, accepted, known, lease, now)
    if found.normalized != Normalized.PENDING:
        known = _observe(event_id, _from_receipt(Channel.SMS, Source.RECOVERY, found), known, lease, now)
    return known


def _poll_sms(event_id: str, known: rows.Loaded, lease: Lease, transports: Transports, now: datetime) -> rows.Loaded:
    claim = _claim(event_id, Channel.SMS)
    try:
        observation = _from_receipt(Channel.SMS, Source.POLL, transports.sms.fetch(claim.provider_ref))
    except TransientError as error:
        # Recorded all the same: it paces the next poll one interval later.
        observation = _from_error(Channel.SMS, Source.POLL, error, None)
    return _observe(event_id, observation, known, lease, now)


def _submit_email(
    event_id: str, known: rows.Loaded, lease: Lease, transports: Transports, now: datetime
) -> rows.Loaded:
    """Send the fallback email; retry under the same Message-ID until the attempt policy stops it."""
    policy = known.policy
    if known.claims[Channel.EMAIL].state == ClaimState.SUBMITTING:
        # A worker died mid-send. SMTP has no lookup: record the outcome as unknown
        # (which puts the claim back to CLAIMED) before anything is sent again.
        interrupted = ObservationInput(
            Channel.EMAIL, Source.RECOVERY, Normalized.UNKNOWN_OUTCOME, raw_status="interrupted", retry_at=now
        )
        return _unless_exhausted(event_id, interrupted, known, lease, now)
    message = messages.reset_email(event_id, policy, _destinations(event_id), known.event.expires_at)
    known = _begin(event_id, Channel.EMAIL, known, lease, now)
    try:
        observation = _from_receipt(Channel.EMAIL, Source.SUBMIT, transports.email.send(message))
    except TransportError as error:
        observation = _from_error(Channel.EMAIL, Source.SUBMIT, error, now + policy.email_backoff)
    return _unless_exhausted(event_id, observation, known, lease, now)


def _unless_exhausted(
    event_id: str, observation: ObservationInput, known: rows.Loaded, lease: Lease, now: datetime
) -> rows.Loaded:
    """Record an email outcome as it was, then fail the channel if the policy allows no further attempt.

    The outcome (an unknown one included) is on record before any give-up, so every
    physical email beyond the first is explained by a recorded unknown outcome.
    """
    known = _observe(event_id, observation, known, lease, now)
    if known.claims[Channel.EMAIL].state != ClaimState.CLAIMED:
        return known
    policy = known.policy
    attempts = _claim(event_id, Channel.EMAIL).attempts
    if observation.normalized == Normalized.UNKNOWN_OUTCOME and not policy.resubmit_unknown_email:
        reason = "unknown_not_resubmitted"
    elif attempts >= policy.email_attempt_limit:
        reason = "attempt_limit_reached"
    else:
        return known
    give_up = ObservationInput(
        Channel.EMAIL,
        Source.SUBMIT,
        Normalized.TERMINAL_FAILURE,
        raw_status=reason,
        note=f"gave up after {attempts} attempt(s)",
    )
    return _observe(event_id, give_up, known, lease, now)
