"""``/api/v1/events``: services create reset deliveries and follow them."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Max
from django.http import Http404, HttpRequest
from ninja import Router, Status

from notify.api.errors import error_body
from notify.api.schemas import ChannelStatus, CreatedEvent, CreateEvent, Error, EventStatus, Service
from notify.intake import EventRefused, Refusal, ResetRequest
from notify.models import Event, Observation, ServiceToken, is_event_id
from notify.rules.vocabulary import Channel, ClaimState, NextAction, State
from notify.writes.create import create_event
from plumbing.clock import current_clock

log = logging.getLogger("notify.api")

router = Router(tags=["events"])

# 400 on every operation: a body that is not JSON, and a request Django refuses before any view
# (a Host header not in DJANGO_ALLOWED_HOSTS: config/urls.py's handler400).
REFUSED = {400: Error, 401: Error, 404: Error, 409: Error, 413: Error, 422: Error, 429: Error}


def console_url(event_id: str) -> str:
    return f"{settings.PUBLIC_BASE_URL}/events/{event_id}"


def _service(request: HttpRequest) -> str:
    token = request.auth  # type: ignore[attr-defined]
    assert isinstance(token, ServiceToken)
    return token.service


def reset_request(service: str, payload: CreateEvent) -> ResetRequest:
    """What ``service`` asks for in a creation's validated body."""
    return ResetRequest(
        service=service,
        client_key=payload.client_key,
        region=payload.region,
        purpose=payload.purpose,
        phone=payload.phone,
        email=payload.email,
        reset_url=payload.reset_url,
        expires_at=payload.expires_at,
        ttl=timedelta(seconds=payload.ttl_seconds) if payload.ttl_seconds is not None else None,
        consent=payload.consent,
        locale=payload.locale,
        time_zone=payload.time_zone,
    )


@router.post("/events", response={200: CreatedEvent, 201: CreatedEvent, **REFUSED})
def create(request: HttpRequest, payload: CreateEvent) -> Status[object]:
    """Ask for a reset to be delivered. Repeating a request with the same client_key is safe.

    201: created, and the first worker step is on its way. 200: this client_key was seen
    before with the same request; nothing is sent twice. 409: it was seen with a
    different request. 422: a field is invalid, or the region's policy refuses the
    request (unknown region or purpose, destination not allowed, consent missing, an
    expiry that leaves no usable time, a link longer than its SMS allows, a locale or time
    zone that is not one); ``error`` names the reason.
    """
    service = _service(request)
    reset = reset_request(service, payload)
    try:
        outcome = create_event(reset, now=current_clock().now(), sends_wake_up=True)
    except EventRefused as refused:
        http_status = 409 if refused.reason == Refusal.IDEMPOTENCY_CONFLICT else 422
        log.info("api_create", extra={"service": service, "status": http_status, "error": refused.reason.value})
        fields = [{"field": refused.field, "message": refused.message}] if refused.field else []
        return Status(http_status, error_body(refused.reason.value, refused.message, fields))
    event = outcome.event  # a new one's first wake-up is on its way (create_event sends it)
    http_status = 201 if outcome.created else 200
    log.info("api_create", extra={"service": service, "status": http_status, "event_id": event.id})
    # The schema's own instance, built from the values: ninja then only dumps it, where a dict
    # would be validated again through its attribute-reading wrapper.
    created = CreatedEvent(
        event_id=event.id,
        state=State(event.state),
        region=event.region,
        policy_version=event.policy.number,
        expires_at=event.expires_at,
        next_action=NextAction(event.next_action),
        console_url=console_url(event.id),
    )
    return Status(http_status, created)


@router.get("/events/{event_id}", response={200: EventStatus, **REFUSED})
def follow(request: HttpRequest, event_id: str) -> EventStatus:
    """Follow an event: its state, each channel's claim, the next action and the time left for it."""
    if not is_event_id(event_id):
        raise Http404  # an id the API never issues: answered as an unknown one, unasked of the database
    event = Event.objects.select_related("policy").filter(pk=event_id, service=_service(request)).first()
    if event is None:
        raise Http404
    now = current_clock().now()
    last_seen = dict(
        Observation.objects.filter(event=event)
        .values("channel")
        .annotate(last=Max("recorded_at"))
        .values_list("channel", "last")
    )
    channels = [
        ChannelStatus(
            channel=Channel(claim.channel),
            claim_state=ClaimState(claim.state),
            attempts=claim.attempts,
            last_observation_at=last_seen.get(claim.channel),
        )
        for claim in event.claims.order_by("created_at")
    ]
    # act_by is stored at every write, as decide computed it: the action budget is its distance from now.
    deadline = event.act_by
    return EventStatus(
        event_id=event.id,
        state=State(event.state),
        region=event.region,
        policy_version=event.policy.number,
        created_at=event.created_at,
        expires_at=event.expires_at,
        locale=event.locale,
        time_zone=event.time_zone,
        rendered_in=event.message_locale or "default",
        channels=channels,
        next_action=NextAction(event.next_action),
        next_action_at=event.next_action_at,
        remaining_budget_seconds=(deadline - now).total_seconds() if deadline is not None else None,
        state_age_seconds=(now - event.state_entered_at).total_seconds(),
    )


@router.get("/whoami", response={200: Service, **REFUSED})
def whoami(request: HttpRequest) -> Service:
    """Return the service your token belongs to: a cheap way to check a token."""
    return Service(service=_service(request))
