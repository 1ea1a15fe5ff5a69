"""One worker step: advance an event by the actions due now, holding its lease.

A worker never sleeps holding an event. ``step_event`` takes the lease, does what
``machine.decide`` says is due (calling providers only outside any DB
transaction), records each outcome through ``notify.transitions``, releases the
lease and returns when the next action is due, for the caller to schedule a
wake-up. A duplicate or early wake-up finds the lease held or nothing due: a no-op.
"""

import logging
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.urls import reverse

from notify import messages, rows, tallies, transitions, vault
from notify.models import Claim, Event, VaultEntry
from notify.rules import machine
from notify.rules.vocabulary import Cause, Channel, ClaimState, Effect, NextAction, Normalized, Source, State
from notify.transitions import Lease, ObservationInput, Written
from notify.transports import Transports, call_bound, lease_hold
from notify.transports.base import (
    ConfigurationError,
    Neighbours,
    PermanentError,
    Receipt,
    SmsMessage,
    TransientError,
    TransportError,
    UnknownOutcome,
)
from plumbing.clock import Clock
from policies.models import LONGEST_LIFETIME
from policies.segments import encode

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
    # poll interval (long ETAs are not relied on). None: someone else schedules it, or a
    # wake-up no later than this one is already pending.
    wake_after: timedelta | None = None
    # When the wake-up recorded on the event as the lease was given back is due (None: none was
    # recorded): the caller only sends it, and forgets it if it does not go (tasks.send_recorded).
    wake_at: datetime | None = None


def sms_callback_url(event_id: str) -> str:
    """Return the status callback URL Twilio is given, and that its signature is computed over."""
    return settings.PUBLIC_BASE_URL + reverse("sms-status-callback", args=[event_id])


def step_event(
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
    try:
        read = _read_and_sync(event_id, clock, started)
    except LookupError:
        return StepReport(event_id, "gone", (), NextAction.NONE, None)
    loaded = read.loaded
    now = clock.now()
    decision = machine.decide(loaded.event, loaded.claims, loaded.policy, now)
    if not machine.due_now(decision, now):
        wake_after = machine.wake_after(decision, now, loaded.policy.poll_interval)
        return StepReport(event_id, "not_due", (), decision.action, decision.due_at, wake_after)
    lease = transitions.take_lease(event_id, owner, at=clock.pinned(), ttl=loaded.policy.lease_ttl)
    if lease is None:
        return StepReport(event_id, "busy", (), decision.action, decision.due_at)
    return _leased_step(read, lease, transports, clock, started, max_actions)


def step_most_urgent(
    hint: str, *, transports: Transports, clock: Clock, owner: str, max_actions: int = MAX_ACTIONS_PER_STEP
) -> StepReport:
    """Step the most urgent due event, whichever event's wake-up brought the worker here.

    Wake-ups wait in the broker in the order they were sent; past capacity, serving each
    for its own event would make every event equally late. Each wake-up is therefore
    only a turn: it steps the due event nearest its ``act_by`` (``rows.take_most_urgent``).
    No event loses its turn: the one a wake-up was sent for is due, so until it is
    stepped every other due event that took a turn still has its own wake-up coming.
    With nothing due, the hinted event is looked at as ``step_event`` does: a wake-up that
    came early (its host's clock runs ahead) schedules the event's next one.
    """
    started = time.monotonic()
    taken = transitions.take_most_urgent(owner, at=clock.pinned())
    if taken is None:
        return step_event(hint, transports=transports, clock=clock, owner=owner, max_actions=max_actions)
    read, lease = taken
    clock.sync(read.database_time, started, time.monotonic())
    return _leased_step(read, lease, transports, clock, started, max_actions)


def _read_and_sync(event_id: str, clock: Clock, started: float) -> rows.StepRead:
    # The read carries the database's time: every step re-anchors the clock to it, so a
    # host whose wall clock is off still judges D, expiry and due times on the database's.
    read = rows.read_for_step(event_id)
    clock.sync(read.database_time, started, time.monotonic())
    return read


def _leased_step(
    read: rows.StepRead, lease: Lease, transports: Transports, clock: Clock, started: float, max_actions: int
) -> StepReport:
    """Act while actions are due, holding ``lease``; give the lease back with the next wake-up recorded."""
    event_id, loaded = read.event_id, read.loaded
    now = clock.now()
    step = _Step(event_id, lease, transports, clock, loaded._replace(lease_token=lease.token), read)
    ttl = loaded.policy.lease_ttl
    renew_after = now + ttl / 2
    done: list[NextAction] = []
    outcome = "done"
    wake_after: timedelta | None = None
    failure: Exception | None = None
    try:
        for _ in range(max_actions):
            decision = machine.decide(step.known.event, step.known.claims, step.known.policy, now)
            if not machine.due_now(decision, now):
                break
            needed = _lease_needed(decision.action)
            if now >= renew_after or step.lease_until - now < needed:
                # A step of several actions can outlast the lease, and a poll or a lookup can
                # take its call's whole bound: renew it between actions, and before such a call
                # for at least that call and the write after it, so that no other worker takes
                # over (and recovers, or polls again) an event still in hand.
                held_for = max(ttl, needed)
                if not transitions.renew_lease(event_id, lease, at=clock.pinned(), ttl=held_for):
                    raise Ended
                renew_after, step.lease_until = now + ttl / 2, now + held_for
            done.append(decision.action)
            step.act(decision.action, now)
            now = clock.now()
            if step.handed_back is not None:
                break  # its last write gave the lease back: nothing more is due now
        if not done:
            # Taken as due by the database's schedule, yet nothing is due: store what decide
            # says, or the event would be taken again by every wake-up until it is due.
            step.refresh_schedule(now)
        decision = machine.decide(step.known.event, step.known.claims, step.known.policy, now)
        wake_after = machine.wake_after(decision, now, loaded.policy.poll_interval)
    except Ended:
        # Whoever moved the event on schedules what follows; a re-check now costs one no-op.
        outcome, decision, wake_after = "ended", machine.NO_ACTION, timedelta(0)
    except (OperationalError, InterfaceError):
        raise  # the database failed the worker, not the event: the lease runs out, the sweeper goes on
    except Exception as error:
        # A fact about this event (a sealed entry that will not open, a template this worker
        # cannot render), not about the worker: contained on the event, not raised to the task.
        outcome, decision, failure = "failed", machine.NO_ACTION, error
    finally:
        handed = step.handed_back
        if failure is not None:
            wake_at, wake_after = _back_off(read, lease, failure, clock.now())
        elif handed is None:
            # The lease goes back with the next wake-up recorded on the event, in one statement.
            wake_up = None if wake_after is None else (now + wake_after, now)
            recorded = transitions.release_lease(event_id, lease, wake_up=wake_up)
            wake_at = wake_up[0] if wake_up is not None and recorded else None
            if wake_up is not None and not recorded:
                wake_after = None  # one no later is pending, or the lease was taken over: its holder schedules
        else:
            # The step's last write gave the lease back and recorded the wake-up (``transitions.HandBack``).
            wake_at = handed.wake_at
            wake_after = None if handed.wake_at is None else max(handed.wake_at - now, timedelta(0))
        if failure is None and read.step_failures:
            rows.clear_step_failures(event_id, lease.token)  # it completes again
    log.info(
        "step",
        extra={
            "event_id": event_id,
            "actions": [action.value for action in done],
            "outcome": outcome,
            "state": step.known.event.state,
            "version": step.known.version,
            "lease_owner": lease.owner,
            "next_action": decision.action.value,
            "duration_ms": round((time.monotonic() - started) * 1000, 1),
        },
    )
    return StepReport(event_id, outcome, tuple(done), decision.action, decision.due_at, wake_after, wake_at)


def _lease_needed(action: NextAction) -> timedelta:
    """How much lease a worker must hold before ``action``: a poll's or a lookup's whole call and a
    margin to record its answer. A submit extends its lease itself, with its intent (``_begin``)."""
    if action in (NextAction.POLL_SMS, NextAction.RECOVER_SMS):
        return call_bound(Channel.SMS) + settings.NOTIFY_LEASE_MARGIN
    return timedelta(0)


def step_backoff(failures: int) -> timedelta:
    """How long an event waits after ``failures`` steps in a row raised: doubling from
    NOTIFY_STEP_BACKOFF, at most NOTIFY_STEP_BACKOFF_MAX."""
    first: timedelta = settings.NOTIFY_STEP_BACKOFF
    longest: timedelta = settings.NOTIFY_STEP_BACKOFF_MAX
    return min(longest, first * (1 << min(failures - 1, 20)))


def _back_off(
    read: rows.StepRead, lease: Lease, error: Exception, now: datetime
) -> tuple[datetime | None, timedelta | None]:
    """Count a step that raised on its event and hold the event back; return the wake-up to send.

    Held at most until its expiry (expiring renders nothing); past it, the full backoff (never due at once).
    """
    failures, expires_at = read.step_failures + 1, read.loaded.event.expires_at
    retry_at = now + step_backoff(failures)
    retry_at = min(retry_at, expires_at) if now < expires_at else retry_at
    # The class and where it was raised, never the message: a message may quote personal data.
    where = traceback.extract_tb(error.__traceback__)[-1]
    log.error(
        "step_failed",
        extra={
            "event_id": read.event_id,
            "error": type(error).__name__,
            "where": f"{where.filename}:{where.lineno} in {where.name}",
            "failures": failures,
            "retry_at": retry_at.isoformat(),
        },
    )
    wake_at = rows.record_step_failure(
        read.event_id, lease.token, error=type(error).__name__, retry_at=retry_at, now=now
    )
    tallies.add_for_event(tallies.STEP_FAILURES, read.event_id)
    return wake_at, None if wake_at is None else max(retry_at - now, timedelta(0))


# Outcomes worth a counter of their own in /metrics (by channel).
_COUNTED = {
    Normalized.POSSIBLE_DUPLICATE: tallies.POSSIBLE_DUPLICATE_EMAILS,
    Normalized.CONFIGURATION_ERROR: tallies.CONFIGURATION_ERRORS,
    Normalized.NO_USEFUL_LIFE: tallies.FALLBACKS_WITHOUT_USEFUL_LIFE,
}


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
        ConfigurationError: Normalized.CONFIGURATION_ERROR,
        PermanentError: Normalized.REJECTED,
        UnknownOutcome: Normalized.UNKNOWN_OUTCOME,
    }[type(error)]
    return ObservationInput(channel, source, normalized, raw_status=error.raw_status, retry_at=retry_at)


def _claim(event_id: str, channel: Channel) -> Claim:
    return Claim.objects.get(event_id=event_id, channel=channel)


# How far back a lookup's neighbours are sought: past the adapter's own window (a few
# minutes before the first submit) and the processing horizon of any neighbour's submit.
_NEIGHBOUR_WINDOW = timedelta(hours=1)


def _neighbours(event_id: str, since: datetime) -> Neighbours:
    """Our other SMS to the same destination around ``since``: their known ids, and how many we sent blind.

    A claim submitting without a provider id may have created a message we cannot name;
    one back to claimed or failed without an id sent nothing (absence was proven, or the
    provider refused it).
    """
    recipient = Event.objects.filter(pk=event_id).values_list("sms_recipient_ref", flat=True)
    others = (
        Claim.objects.filter(
            channel=Channel.SMS,
            event__sms_recipient_ref__in=recipient,
            event__created_at__gte=since - _NEIGHBOUR_WINDOW - LONGEST_LIFETIME,
            attempt_started_at__gte=since - _NEIGHBOUR_WINDOW,
        )
        .exclude(event_id=event_id)
        .values_list("provider_ref", "state")
    )
    sids = frozenset(ref for ref, _ in others if ref)
    unidentified = sum(1 for ref, state in others if not ref and state == ClaimState.SUBMITTING)
    return Neighbours(sids, unidentified)


class _Step:
    """One leased pass over an event: each action reads ``known`` and leaves it as its write did.

    Times of outcomes are read from the clock after the remote call, not before: a call
    that took its full timeout must not schedule its retry in the past.
    """

    def __init__(
        self,
        event_id: str,
        lease: Lease,
        transports: Transports,
        clock: Clock,
        known: rows.Loaded,
        read: rows.StepRead,
    ) -> None:
        self.event_id = event_id
        self.lease = lease
        self.transports = transports
        self.clock = clock
        self.known = known
        # Read with the event as the step began. A provider's message id never changes once known.
        self.sealed = read.sealed
        self.provider_refs = read.provider_refs
        self.audience = read.audience
        self.pending_wake = read.wake_at
        # Set by the write that gave the lease back (``_observe(..., last=True)``).
        self.handed_back: Written | None = None
        # When the lease runs out: a TTL after it was taken, a moment before this reading (the
        # margin each call is held for covers that moment).
        self.lease_until = clock.now() + known.policy.lease_ttl

    def act(self, action: NextAction, now: datetime) -> None:
        if action == NextAction.EXPIRE:
            self._landed(transitions.expire(self.event_id, now=now, **self._as_holder()))
        elif action == NextAction.CLAIM_EMAIL:
            # From a terminal SMS failure the failure is the cause; otherwise the deadline D is.
            cause = Cause.OBSERVATION if self.known.event.state == State.SMS_FAILED else Cause.DEADLINE
            self._landed(transitions.claim_email_fallback(self.event_id, now=now, cause=cause, **self._as_holder()))
        elif action == NextAction.SUBMIT_SMS:
            self._submit_sms(now)
        elif action == NextAction.RECOVER_SMS:
            self._recover_sms()
        elif action == NextAction.POLL_SMS:
            self._poll_sms()
        elif action == NextAction.SUBMIT_EMAIL:
            self._submit_email(now)
        else:
            raise ValueError(f"no way to perform {action}")

    def refresh_schedule(self, now: datetime) -> None:
        self._landed(transitions.refresh_schedule(self.event_id, now=now, lease=self.lease))

    def _destinations(self) -> vault.Destinations:
        if self.sealed is None:
            # Read with the event, so absent only once retention purged it: no message can go out.
            raise VaultEntry.DoesNotExist(f"no sealed destinations for {self.event_id}")
        return vault.unseal(self.sealed)

    def _as_holder(self) -> dict[str, Any]:
        return {"actor": self.lease.owner, "lease": self.lease, "known": self.known}

    def _landed(self, outcome: Written) -> None:
        if outcome.result == Effect.CONFLICT:
            raise Ended
        self.known = outcome.after

    def _observe(self, observation: ObservationInput, *, last: bool = False) -> None:
        """Record an outcome under the lease. ``last``: the action writes nothing after it, so if
        nothing more is due now the same write gives the lease back (``transitions.HandBack``)."""
        now = self.clock.now()
        hand_back = transitions.HandBack(self.pending_wake, self.known.policy.poll_interval) if last else None
        outcome = transitions.record_receipt(
            self.event_id, observation, now=now, hand_back=hand_back, **self._as_holder()
        )
        self._landed(outcome)
        if outcome.handed_back:
            self.handed_back = outcome
        counted = _COUNTED.get(observation.normalized)
        if counted is not None:
            tallies.add_for_event(counted, self.event_id, observation.channel)

    def _begin(self, channel: Channel, now: datetime, segments: int | None = None) -> None:
        """Commit the intent (claim ``submitting``) before the remote call, holding the lease through it.

        A crash from here on leaves the claim SUBMITTING; the next worker settles it (SMS:
        lookup; email: a recorded possible duplicate), but not before the call could have
        finished: the lease outlasts the call's bound by a margin (a takeover means the
        holder is gone, never that it is slow), and the claim's next attempt is no earlier.
        """
        bound = call_bound(channel)
        settle_after = bound + (settings.NOTIFY_SMS_LOOKUP_DELAY if channel == Channel.SMS else timedelta(0))
        hold = lease_hold(channel, self.known.policy.lease_ttl)
        begun = transitions.begin_submit(
            self.event_id,
            channel,
            now=now,
            at=self.clock.pinned(),
            lease=self.lease,
            known=self.known,
            hold=hold,
            settle_after=settle_after,
            segments=segments,
        )
        if begun is None:
            raise Ended
        self.known, self.lease_until = begun, now + hold

    def _sms_message(self) -> SmsMessage:
        destinations = self._destinations()
        policy = self.known.policy
        return SmsMessage(
            to=destinations.phone,
            sender=policy.sms_sender,
            body=messages.sms_text(policy, destinations, self.audience, self.known.event.expires_at),
            status_callback=sms_callback_url(self.event_id),
            reference=destinations.reset_url,
            discard_content=policy.sms_discard_content,
        )

    def _submit_sms(self, now: datetime) -> None:
        message = self._sms_message()
        # What it is billed as, kept on the claim for /metrics and replay (never the text).
        self._begin(Channel.SMS, now, segments=encode(message.body).segments)
        try:
            observation = _from_receipt(Channel.SMS, Source.SUBMIT, self.transports.sms.submit(message))
        except TransportError as error:
            # Retry a refusal that sent nothing at the next poll interval. Look an unknown
            # outcome up soon (every second here comes out of the SMS budget), but not at
            # once: a message created a moment ago must have time to show up in the list.
            unsent = isinstance(error, TransientError | ConfigurationError)
            delay = self.known.policy.poll_interval if unsent else settings.NOTIFY_SMS_LOOKUP_DELAY
            observation = _from_error(Channel.SMS, Source.SUBMIT, error, self.clock.now() + delay)
        self._observe(observation._replace(attempt_started_at=now), last=True)

    def _recover_sms(self) -> None:
        """Settle an SMS submit whose outcome is unknown by asking the provider, never by resending blind.

        Found: its acceptance (and what it says now). Not listed: absent only past the
        provider's processing horizon since the submit began (``transitions.not_listed``);
        a lookup that cannot tell (it failed, or redacted bodies leave it ambiguous) proves
        nothing either. Unproven, the claim stays unresolved and the event yields to the
        email fallback at D: never a second SMS.
        """
        claim = _claim(self.event_id, Channel.SMS)
        since = claim.submitted_at or claim.created_at
        message, neighbours = self._sms_message(), _neighbours(self.event_id, since)
        # The list is read as the call begins: what it shows, and so what its silence proves,
        # dates from then, however long the answer takes to come back.
        looked_at = self.clock.now()
        try:
            found = self.transports.sms.find(message, since, neighbours)
        except UnknownOutcome as error:
            retry_at = self.clock.now() + self.known.policy.poll_interval
            self._observe(_from_error(Channel.SMS, Source.RECOVERY, error, retry_at))
            return
        if found is None:
            started = claim.attempt_started_at or since
            proof_after = call_bound(Channel.SMS) + self.transports.sms.absence_horizon
            self._observe(
                transitions.not_listed(
                    started,
                    looked_at,
                    self.clock.now(),
                    proof_after=proof_after,
                    first_wait=settings.NOTIFY_SMS_LOOKUP_DELAY,
                    longest_wait=self.known.policy.poll_interval,
                )
            )
            return
        # The provider has it: its acceptance first (the claim and the workflow move on
        # from submitting), then, if it has gone further, what it says now.
        accepted = _from_receipt(Channel.SMS, Source.RECOVERY, found)
        self._observe(accepted._replace(normalized=Normalized.ACCEPTED))
        if found.normalized != Normalized.PENDING:
            self._observe(accepted)

    def _poll_sms(self) -> None:
        ref = self.provider_refs.get(Channel.SMS) or _claim(self.event_id, Channel.SMS).provider_ref
        try:
            observation = _from_receipt(Channel.SMS, Source.POLL, self.transports.sms.fetch(ref))
        except TransientError as error:
            # Recorded all the same: it paces the next poll one interval later.
            observation = _from_error(Channel.SMS, Source.POLL, error, None)
        self._observe(observation, last=True)

    def _submit_email(self, now: datetime) -> None:
        """Send the fallback email; retry under the same Message-ID until the attempt policy stops it.

        Never once the link has too little life left for the email to be of use: that is
        recorded (a fallback without useful life) and the channel fails, unsent.
        """
        policy = self.known.policy
        if self.known.claims[Channel.EMAIL].state == ClaimState.SUBMITTING:
            # The worker sending it was lost mid-send: its lease ran out with the call's whole
            # deadline, so it is gone, not slow. SMTP has no lookup, so whether the relay took
            # the message cannot be known: record that as its own kind (a resend may be a second
            # copy, under the same Message-ID) before anything is sent again.
            lost = ObservationInput(
                Channel.EMAIL, Source.RECOVERY, Normalized.POSSIBLE_DUPLICATE, raw_status="holder_lost", retry_at=now
            )
            self._unless_exhausted(lost)
            return
        if not machine.email_has_useful_life(self.known.event, policy, now):
            self._observe(transitions.NO_USEFUL_LIFE)
            return
        message = messages.reset_email(
            self.event_id, policy, self._destinations(), self.audience, self.known.event.expires_at
        )
        self._begin(Channel.EMAIL, now)
        try:
            receipt = self.transports.email.send(message, within=call_bound(Channel.EMAIL))
            observation = _from_receipt(Channel.EMAIL, Source.SUBMIT, receipt)
        except TransportError as error:
            observation = _from_error(Channel.EMAIL, Source.SUBMIT, error, self.clock.now() + policy.email_backoff)
        self._unless_exhausted(observation._replace(attempt_started_at=now))

    def _unless_exhausted(self, observation: ObservationInput) -> None:
        """Record an email outcome as it was, then fail the channel if the policy allows no further attempt.

        The outcome (an unknown one included) is on record before any give-up, so every
        physical email beyond the first is explained by a recorded unknown outcome.
        """
        # Only an acceptance is sure to be this action's last write: after any other outcome
        # the attempt count decides whether a give-up follows.
        self._observe(observation, last=observation.normalized == Normalized.ACCEPTED)
        if self.known.claims[Channel.EMAIL].state != ClaimState.CLAIMED:
            return
        policy = self.known.policy
        attempts = _claim(self.event_id, Channel.EMAIL).attempts
        unknown = observation.normalized in (Normalized.UNKNOWN_OUTCOME, Normalized.POSSIBLE_DUPLICATE)
        if unknown and not policy.resubmit_unknown_email:
            reason = "unknown_not_resubmitted"
        elif attempts >= policy.email_attempt_limit:
            reason = "attempt_limit_reached"
        else:
            return
        note = f"gave up after {attempts} attempt(s)"
        self._observe(ObservationInput(Channel.EMAIL, Source.SUBMIT, Normalized.TERMINAL_FAILURE, reason, note=note))
