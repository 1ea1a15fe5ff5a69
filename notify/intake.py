"""What a service asks for, checked and judged under the region's policy, as the rows a new event is.

Nothing here writes: ``notify.writes.create`` inserts the rows this builds.
"""

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple

import phonenumbers
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email
from django.db import models

from notify import vault
from notify.models import Claim, Event, Transition, VaultEntry, claim_key, new_event_id
from notify.rules import machine
from notify.rules.vocabulary import Cause, Channel, RequestPurpose, State
from policies import locales, rendering, segments
from policies.models import PolicyVersion


class Refusal(StrEnum):
    INVALID_PHONE = "invalid_phone"
    INVALID_EMAIL = "invalid_email"
    INVALID_RESET_URL = "invalid_reset_url"
    INVALID_EXPIRY = "invalid_expiry"
    UNUSABLE_EXPIRY = "unusable_expiry"
    LIFETIME_TOO_LONG = "lifetime_too_long"
    UNKNOWN_PURPOSE = "unknown_purpose"
    UNKNOWN_REGION = "unknown_region"
    DESTINATION_NOT_ALLOWED = "destination_not_allowed"
    CONSENT_REQUIRED = "consent_required"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    INVALID_LOCALE = "invalid_locale"
    INVALID_TIME_ZONE = "invalid_time_zone"
    RESET_URL_TOO_LONG = "reset_url_too_long"


class EventRefused(Exception):
    """The request cannot become an event. The message never contains the refused value."""

    def __init__(self, reason: Refusal, field: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ResetRequest:
    """What a service asks for. Exactly one of ``expires_at`` and ``ttl`` is given."""

    service: str
    client_key: str
    region: str
    purpose: str
    phone: str
    email: str
    reset_url: str
    expires_at: datetime | None = None
    ttl: timedelta | None = None
    consent: bool = False
    locale: str = ""
    time_zone: str = ""

    def __repr__(self) -> str:
        return f"ResetRequest(service={self.service!r}, client_key={self.client_key!r}, region={self.region!r})"


def new_event(
    request: ResetRequest,
    policy: PolicyVersion | None,
    checked: "Checked",
    audience: rendering.Audience,
    fingerprint: str,
    now: datetime,
    sends_wake_up: bool,
) -> tuple[Event, list[models.Model]]:
    """The rows of the event ``request`` asks for, if the region's policy allows it."""
    if policy is None:
        raise EventRefused(Refusal.UNKNOWN_REGION, "region", "no active delivery policy for this region")
    start = starting_point(policy, request, checked)
    # The policy's segment limit was checked with links up to this length: a longer one could
    # make the SMS cost (and risk) more than the policy was approved for.
    if (length := checked.link_length) > policy.reset_url_max_length:
        raise EventRefused(
            Refusal.RESET_URL_TOO_LONG,
            "reset_url",
            f"reset_url is {length} SMS characters long; policy {policy} accepts at most "
            f"{policy.reset_url_max_length} (a ~, [ or ] counts twice)",
        )
    expires_at = _expiry(request, now)
    shortest = machine.minimum_lifetime(policy, start.state, start.fallback_available)
    if expires_at - now <= shortest:
        raise EventRefused(
            Refusal.UNUSABLE_EXPIRY,
            "expires_at",
            f"the reset must live longer than {shortest.total_seconds():g}s "
            f"to leave an action budget under policy {policy}",
        )
    # The vault keeps the destinations and the link until expiry + vault_retention: the
    # policy, not the caller, decides how far away that may be.
    if expires_at - now > policy.max_lifetime:
        raise EventRefused(
            Refusal.LIFETIME_TOO_LONG,
            "expires_at",
            f"the reset may live at most {policy.max_lifetime.total_seconds():g}s under policy {policy}",
        )

    # Before any outbound request: the event, its first claim, the sealed destinations and
    # the first transition land together or not at all (``notify.writes.create`` inserts them).
    return new_rows(request, policy, start, checked.destinations, audience, fingerprint, expires_at, now, sends_wake_up)


def new_rows(
    request: ResetRequest,
    policy: PolicyVersion,
    start: "Start",
    destinations: vault.Destinations,
    audience: rendering.Audience,
    fingerprint: str,
    expires_at: datetime,
    now: datetime,
    sends_wake_up: bool,
) -> tuple[Event, list[models.Model]]:
    """The rows a new event is: the event, its first claim, its sealed destinations and its first transition."""
    event = Event(
        id=new_event_id(),
        service=request.service,
        client_key=request.client_key,
        request_fingerprint=fingerprint,
        purpose=request.purpose,
        region=request.region,
        policy=policy,
        fallback_available=start.fallback_available,
        sms_recipient_ref=vault.keyed_hash(destinations.phone) if destinations.phone else "",
        email_recipient_ref=vault.keyed_hash(destinations.email) if destinations.email else "",
        created_at=now,
        expires_at=expires_at,
        locale=audience.locale,
        time_zone=audience.time_zone,
        message_locale=rendering.set_key_for(policy.locale_templates, audience.locale),
        state=start.state,
        version=1,
        state_entered_at=now,
    )
    decision = machine.decide(event, {start.channel: machine.NEW_CLAIM}, policy, now)
    event.next_action, event.next_action_at, event.act_by = decision.action, decision.due_at, decision.act_by
    if sends_wake_up:
        # Recorded as pending in the same INSERT, sparing an UPDATE per creation; a hint
        # sent meanwhile by someone else is then not doubled (``notify.writes.wake_ups``).
        event.wake_at = now
    claim = Claim(
        event=event, channel=start.channel, key=claim_key(start.channel, event.id), created_at=now, updated_at=now
    )
    sealed = VaultEntry(event=event, ciphertext=vault.seal(destinations), created_at=now)
    created = Transition(
        event=event,
        from_state="",
        to_state=start.state,
        version=1,
        cause=Cause.CREATED,
        actor=f"service:{request.service}",
        at=now,
    )
    return event, [claim, sealed, created]


@dataclass(frozen=True)
class Start:
    state: State
    channel: Channel
    fallback_available: bool


def starting_point(policy: PolicyVersion, request: ResetRequest, checked: "Checked") -> Start:
    """Choose the first channel from the policy's channel plan and the destinations given.

    SMS first when the plan allows SMS; the email fallback only when the plan has one
    and there is an address; email alone when the plan forbids SMS for resets.
    """
    if policy.consent_required and not request.consent:
        raise EventRefused(
            Refusal.CONSENT_REQUIRED, "consent", f"policy {policy} requires the subscriber's consent to be asserted"
        )
    if not policy.uses_sms:
        if not checked.destinations.email:
            raise EventRefused(
                Refusal.INVALID_EMAIL, "email", f"policy {policy} delivers by email only: email is required"
            )
        return Start(State.EMAIL_CLAIMED, Channel.EMAIL, fallback_available=False)
    calling_code = checked.calling_code
    if calling_code is None:
        raise EventRefused(Refusal.INVALID_PHONE, "phone", f"policy {policy} delivers by SMS: phone is required")
    if calling_code not in policy.allowed_sms_country_codes:
        raise EventRefused(
            Refusal.DESTINATION_NOT_ALLOWED,
            "phone",
            f"policy {policy} does not allow SMS to country calling code +{calling_code}",
        )
    fallback_available = policy.uses_email and bool(checked.destinations.email)
    return Start(State.SMS_REQUESTED, Channel.SMS, fallback_available=fallback_available)


class Checked(NamedTuple):
    """A request's destinations, normalized, and what checking them measured on the way, so that
    nothing is parsed twice in a creation."""

    destinations: vault.Destinations
    calling_code: int | None  # the phone's country calling code; None without a phone
    link_length: int  # the link's length in an SMS: GSM-7 septets (an extension character counts twice)


# Built once: the validator's constructor costs a creation as much again as its check.
_HTTPS_URL = URLValidator(schemes=["https"])


def checked_destinations(request: ResetRequest) -> Checked:
    if request.purpose not in RequestPurpose.values:
        raise EventRefused(
            Refusal.UNKNOWN_PURPOSE, "purpose", f"purpose must be one of {', '.join(RequestPurpose.values)}"
        )
    phone, calling_code = "", None
    if request.phone:
        try:
            number = phonenumbers.parse(request.phone, None)
        except phonenumbers.NumberParseException:
            number = None
        if number is None or not phonenumbers.is_valid_number(number):
            raise EventRefused(
                Refusal.INVALID_PHONE, "phone", "phone must be a valid number in E.164 form (+ and country code)"
            )
        phone = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
        calling_code = number.country_code
    email = request.email.strip()
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise EventRefused(Refusal.INVALID_EMAIL, "email", "email is not a valid address") from None
    try:
        _HTTPS_URL(request.reset_url)
    except ValidationError:
        raise EventRefused(Refusal.INVALID_RESET_URL, "reset_url", "reset_url must be an https URL") from None
    link = segments.encode(request.reset_url)
    if link.encoding != segments.GSM_7:
        # The policy's segment check measured links of GSM-7 characters: one outside it (a
        # non-ASCII letter, a backtick) would turn the whole SMS into UCS-2, 70 characters a
        # segment instead of 160.
        raise EventRefused(
            Refusal.INVALID_RESET_URL,
            "reset_url",
            "reset_url must be characters an SMS carries in GSM-7: percent-encode its path "
            "(a backtick too) and write its host in punycode",
        )
    destinations = vault.Destinations(phone=phone, email=email.lower(), reset_url=request.reset_url)
    return Checked(destinations, calling_code, link.units)


def _expiry(request: ResetRequest, now: datetime) -> datetime:
    if request.expires_at is not None and request.ttl is None:
        if request.expires_at.tzinfo is None:
            raise EventRefused(Refusal.INVALID_EXPIRY, "expires_at", "expires_at must carry a UTC offset")
        return request.expires_at
    if request.ttl is not None and request.expires_at is None:
        return now + request.ttl
    raise EventRefused(Refusal.INVALID_EXPIRY, "expires_at", "give exactly one of expires_at and ttl_seconds")


def audience_of(request: ResetRequest) -> rendering.Audience:
    """The subscriber's locale and time zone, canonical, or a refusal naming the field."""
    try:
        locale = locales.canonical(request.locale) if request.locale else ""
    except locales.InvalidLocale as error:
        raise EventRefused(Refusal.INVALID_LOCALE, "locale", str(error)) from None
    if request.time_zone and not locales.valid_time_zone(request.time_zone):
        raise EventRefused(
            Refusal.INVALID_TIME_ZONE, "time_zone", "time_zone must be an IANA time zone, such as Europe/Vienna"
        )
    return rendering.Audience(locale, request.time_zone)


def request_fingerprint(request: ResetRequest, destinations: vault.Destinations, audience: rendering.Audience) -> str:
    """Return a keyed hash of everything that makes two requests "the same request"."""
    canonical = json.dumps(
        [
            request.region,
            request.purpose,
            destinations.phone,
            destinations.email,
            destinations.reset_url,
            request.expires_at.isoformat() if request.expires_at else None,
            request.ttl.total_seconds() if request.ttl else None,
            request.consent,
            # Only when given: a request without them hashes as it did before they existed, so
            # a client retrying across that deploy is answered with its event, not a conflict.
            *([audience.locale, audience.time_zone] if audience.locale or audience.time_zone else []),
        ]
    )
    return vault.keyed_hash(canonical)
