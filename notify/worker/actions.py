"""The actions a worker step performs on an event it holds: submit, look up, poll, send the email.

Each calls a provider outside any transaction and records its outcome through
``notify.writes`` under the step's lease, leaving ``known`` as its write left the event.
"""

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from notify import messages, tallies, vault
from notify.models import Claim, Event, VaultEntry
from notify.rules import machine
from notify.rules.plan import NO_USEFUL_LIFE, Loaded, ObservationInput, not_listed
from notify.rules.vocabulary import Cause, Channel, ClaimState, Effect, NextAction, Normalized, Source, State
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
from notify.writes import intent, moves
from notify.writes.cas import HandBack, Written
from notify.writes.leases import Lease
from notify.writes.reads import StepRead
from plumbing.clock import Clock
from policies.models import LONGEST_LIFETIME
from policies.segments import encode

log = logging.getLogger("notify.worker")


class Ended(Exception):
    """The step cannot go on: the lease was taken over or the claim moved under us."""


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


class Actions:
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
        known: Loaded,
        read: StepRead,
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
            self._landed(moves.expire(self.event_id, now=now, **self._as_holder()))
        elif action == NextAction.CLAIM_EMAIL:
            # From a terminal SMS failure the failure is the cause; otherwise the deadline D is.
            cause = Cause.OBSERVATION if self.known.event.state == State.SMS_FAILED else Cause.DEADLINE
            self._landed(moves.claim_email_fallback(self.event_id, now=now, cause=cause, **self._as_holder()))
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
        self._landed(moves.refresh_schedule(self.event_id, now=now, lease=self.lease))

    def _destinations(self) -> vault.Destinations:
        if self.sealed is None:
            # Read with the event, so absent only once retention purged it: no message can go out.
            raise VaultEntry.DoesNotExist(f"no sealed destinations for {self.event_id}")
        return vault.unseal(self.sealed)

    def _as_holder(self) -> dict[str, Any]:
        return {"actor": self.lease.owner, "lease": self.lease, "known": self.known}

    def _landed(self, written: Written) -> None:
        if written.effect == Effect.CONFLICT:
            raise Ended
        self.known = written.after

    def _observe(self, observation: ObservationInput, *, last: bool = False) -> None:
        """Record an outcome under the lease. ``last``: the action writes nothing after it, so if
        nothing more is due now the same write gives the lease back (``HandBack``)."""
        now = self.clock.now()
        hand_back = HandBack(self.pending_wake, self.known.policy.poll_interval) if last else None
        written = moves.record_receipt(self.event_id, observation, now=now, hand_back=hand_back, **self._as_holder())
        self._landed(written)
        if written.handed_back:
            self.handed_back = written
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
        begun = intent.begin_submit(
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
            status_callback=messages.sms_callback_url(self.event_id),
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
        provider's processing horizon since the submit began (``plan.not_listed``);
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
                not_listed(
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
            self._observe(NO_USEFUL_LIFE)
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
