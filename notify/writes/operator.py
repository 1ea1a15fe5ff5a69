"""What a responder's actions write: each through the same table and compare-and-set as the worker's.

The console (``runbook.console.actions``) calls these inside its own transaction with its
audit entry; any wake-up they send goes once that commits.
"""

from datetime import datetime

from notify.models import Claim
from notify.rules.plan import ObservationInput
from notify.rules.vocabulary import Cause, Channel, Normalized, Source
from notify.writes import leases, moves
from notify.writes.cas import Written
from notify.writes.wake_ups import WakeUp, send_after_commit


def release_expired_lease(
    event_id: str, token: int, *, holder: str, actor: str, at: datetime | None, now: datetime
) -> bool:
    """Free the lease ``holder`` let expire (fencing ``token``, as the responder saw it), note it, wake the event.

    Expiry is judged by the database's clock inside the statement (``at`` pins it in
    tests), not the web host's: a web host running ahead must not let a responder fence a
    worker mid-call. False, with nothing written, if it was renewed, taken over or freed.
    """
    if not leases.release_expired(event_id, token, at=at):
        return False
    note(event_id, f"released the expired lease of {holder}", actor=actor, now=now)
    # The next worker takes it now instead of at the sweeper's next pass.
    send_after_commit(WakeUp(event_id, now))
    return True


def claim_fallback(event_id: str, *, seen_version: int, actor: str, now: datetime) -> Written:
    """Claim the email fallback now, if the table allows it and the event is still at ``seen_version``."""
    return moves.claim_email_fallback(event_id, now=now, actor=actor, cause=Cause.OPERATOR, seen_version=seen_version)


def note(event_id: str, text: str, *, actor: str, now: datetime) -> Written:
    """Record a responder's note: evidence only, on the channel the event is working on now."""
    email = Claim.objects.filter(event_id=event_id, channel=Channel.EMAIL).exists()
    channel = Channel.EMAIL if email else Channel.SMS
    observation = ObservationInput(channel=channel, source=Source.OPERATOR, normalized=Normalized.NOTE, note=text)
    return moves.record_observation(event_id, observation, now=now, actor=actor)
