"""Creating an event: the one write a reset enters the system by."""

from dataclasses import dataclass
from datetime import datetime

from notify.intake import (
    EventRefused,
    Refusal,
    ResetRequest,
    audience_of,
    checked_destinations,
    new_event,
    request_fingerprint,
)
from notify.models import Event
from notify.writes.sql import insert_together
from notify.writes.wake_ups import WakeUp, send_after_commit
from policies.cache import presumed_published, published_version, still_published
from policies.models import PolicyVersion


@dataclass(frozen=True)
class Created:
    event: Event
    created: bool


def create_event(request: ResetRequest, *, now: datetime, sends_wake_up: bool = False) -> Created:
    """Persist a new event and its SMS intent, or return the one this request already made.

    ``sends_wake_up``: the new event's first wake-up is recorded with it and sent as soon as
    this commits (``wake_ups.send_after_commit``). Otherwise the event waits for the sweeper.

    1. Validate and normalize the request (nothing is stored for a refused one).
    2. Resolve the region's active policy; refuse what it does not allow (missing
       consent, a destination outside its countries), an expiry that leaves no
       usable action budget, and one past the policy's longest lifetime.
    3. In one statement, before any outbound request: the event, the claim on its
       first channel, the sealed destinations and the first transition.
    4. A (service, client key) seen before returns its event if the request is the
       same, and is refused as a conflict if it differs. It is looked up only where
       the INSERT found the key taken or the policy refused: a first request, the
       common case, pays for no lookup. A replay is answered with its event even
       where the policy would refuse the request today (it changed, or time ran on).

    The policy is the version this process last saw published in the region: asking which
    one is would cost every creation a round trip, and publishing is rare. The INSERT is
    written only if that version is still the published one when it runs; where it was
    not, or where the version refused the request, the region's version is read afresh
    and, if another is published now, the request is judged again under that one.
    """
    checked = checked_destinations(request)
    audience = audience_of(request)
    fingerprint = request_fingerprint(request, checked.destinations, audience)
    policy = presumed_published(request.region)
    while True:
        refusal: EventRefused | None = None
        try:
            event, dependents = new_event(request, policy, checked, audience, fingerprint, now, sends_wake_up)
        except EventRefused as refused:
            refusal = refused
        else:
            if insert_together(event, ("service", "client_key"), dependents, only_if=still_published(event.policy)):
                if event.wake_at is not None:
                    send_after_commit(WakeUp(event.id, event.wake_at, recorded=True))
                return Created(event, created=True)
        # Refused, or nothing written: the version may no longer be the published one (judge
        # again under the one that is); else the client key is taken (an earlier request, or a
        # concurrent twin that committed first), and that event answers.
        policy, changed = _published_now(request.region, policy)
        if changed:
            continue
        existing = existing_event(request, fingerprint)
        if existing is not None:
            return Created(existing, created=False)
        if refusal is not None:
            raise refusal
        raise RuntimeError(f"client key of service {request.service!r} taken, yet no event holds it")


def _published_now(region: str, presumed: PolicyVersion | None) -> tuple[PolicyVersion | None, bool]:
    """The region's published version read afresh, and whether it differs from ``presumed``.

    Each retry follows a publication that committed since the last read, so the loop in
    ``create_event`` ends as soon as publishing stops for the moment one takes."""
    version = published_version(region)
    return version, getattr(version, "pk", None) != getattr(presumed, "pk", None)


def existing_event(request: ResetRequest, fingerprint: str) -> Event | None:
    # Raw SQL: every creation asks, and compiling the ORM query cost more CPU than the lookup.
    found = Event.objects.raw(_BY_CLIENT_KEY, [request.service, request.client_key])
    event = next(iter(found), None)
    if event is not None and event.request_fingerprint != fingerprint:
        raise EventRefused(
            Refusal.IDEMPOTENCY_CONFLICT,
            "client_key",
            "this client_key was already used with a different request",
        )
    return event


_BY_CLIENT_KEY = "SELECT * FROM notify_event WHERE service = %s AND client_key = %s"
