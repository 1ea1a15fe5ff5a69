"""The moves every writer asks of the transition table: record evidence, claim the email, expire.

Each plans with ``notify.rules.plan`` and commits through ``cas.apply``; the worker
passes its lease (and, on its last write, a ``HandBack``), everyone else writes without.
Each returns the ``Written``: its effect, the event after it, what is next and the
wake-up it sent.
"""

from datetime import datetime

from notify import tallies
from notify.rules.plan import (
    Change,
    Loaded,
    ObservationInput,
    delivery_proves_acceptance,
    expiry_change,
    fallback_change,
    observation_change,
)
from notify.rules.vocabulary import Cause, Channel, Effect, Normalized
from notify.writes.cas import HandBack, Written, apply
from notify.writes.leases import Lease
from notify.writes.reads import load


def record_observation(
    event_id: str,
    observation: ObservationInput,
    *,
    now: datetime,
    actor: str,
    lease: Lease | None = None,
    known: Loaded | None = None,
    hand_back: HandBack | None = None,
    wakes: bool = True,
) -> Written:
    """Store an observation and apply the transition it asks for, if the table allows it.

    A duplicate, late or out-of-order observation is stored as evidence and moves
    nothing; the channel's claim still records what the provider said (a late SMS
    delivery after the fallback is a fact worth counting).
    """

    def plan(loaded: Loaded) -> Change | None:
        return observation_change(loaded, observation)

    return apply(
        event_id,
        plan,
        now=now,
        actor=actor,
        lease=lease,
        known=known,
        observation=observation,
        hand_back=hand_back,
        wakes=wakes,
    )


def record_receipt(
    event_id: str,
    observation: ObservationInput,
    *,
    now: datetime,
    actor: str,
    lease: Lease | None = None,
    known: Loaded | None = None,
    hand_back: HandBack | None = None,
) -> Written:
    """Record a provider's report on a message, as ``record_observation`` does.

    A delivery reported while the SMS still waits for its submit's answer (a receipt
    faster than the response, or a submit whose response was lost) proves the
    acceptance too: that is recorded first, so the delivery then applies (or, if the
    event moved on to the email meanwhile, the claim records both) instead of being
    kept as evidence only.
    """
    if observation.channel == Channel.SMS and observation.normalized == Normalized.DELIVERED:
        # Read once: the delivery's own write below starts from this read too (``known``).
        loaded = known = known if known is not None else load(event_id)
        if delivery_proves_acceptance(loaded):
            implied = observation._replace(
                normalized=Normalized.ACCEPTED,
                note="acceptance implied by a delivery receipt",
                raw_payload="",
                dedup_key="",
            )
            # No wake-up of its own: the delivery written next decides what is due (a claim of the
            # fallback woken between the two would race the delivery it is about to meet).
            accepted = record_observation(
                event_id, implied, now=now, actor=actor, lease=lease, known=loaded, wakes=False
            )
            if accepted.effect == Effect.CONFLICT:
                return accepted
            known = accepted.after
    return record_observation(
        event_id, observation, now=now, actor=actor, lease=lease, known=known, hand_back=hand_back
    )


def claim_email_fallback(
    event_id: str,
    *,
    now: datetime,
    actor: str,
    cause: Cause,
    lease: Lease | None = None,
    known: Loaded | None = None,
    seen_version: int | None = None,
) -> Written:
    """Move the event to ``email_claimed`` and insert the email claim, atomically.

    Allowed only from a terminal SMS failure or at/after the fallback deadline
    (``machine.may_claim_fallback``). The claim's unique constraint backs up the
    version guard: even a writer that bypassed the CAS could not insert a second one.
    An operator passes the ``seen_version`` their decision was based on: if the event
    moved since, nothing is claimed and they decide again from what it now is.
    """

    def plan(loaded: Loaded) -> Change | None:
        if seen_version is not None and loaded.version != seen_version:
            return None
        return fallback_change(loaded, now, cause)

    written = apply(event_id, plan, now=now, actor=actor, lease=lease, known=known)
    if not written.applied and Channel.EMAIL in written.after.claims:
        # Someone asked for a second email claim (a racing worker or responder): refused.
        tallies.add_for_event(tallies.SUPPRESSED_DUPLICATE_CLAIMS, event_id, Channel.EMAIL)
    return written


def expire(
    event_id: str, *, now: datetime, actor: str, lease: Lease | None = None, known: Loaded | None = None
) -> Written:
    """Move a non-terminal event past its ``expires_at`` to ``expired``."""

    def plan(loaded: Loaded) -> Change | None:
        return expiry_change(loaded, now)

    return apply(event_id, plan, now=now, actor=actor, lease=lease, known=known)


def refresh_schedule(event_id: str, *, now: datetime, lease: Lease | None = None) -> Written:
    """Store the event's next action and ``act_by`` as ``decide`` sees them now."""
    return apply(event_id, lambda loaded: None, now=now, actor="", lease=lease)
