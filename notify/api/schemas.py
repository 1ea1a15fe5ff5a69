"""The API's request and response shapes: they validate requests and generate the OpenAPI schema."""

from datetime import datetime
from typing import Literal

from ninja import Schema
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import JsonDict  # type: ignore[attr-defined]  # re-exported from pydantic_core

from notify.rules.vocabulary import Channel, ClaimState, NextAction, State
from policies.locales import MAX_TAG_LENGTH, MAX_TIME_ZONE_LENGTH
from policies.models import LONGEST_LIFETIME, RESET_URL_MAX_LENGTH

# E.164: a plus, a country code that does not start with 0, at most 15 digits in all.
E164_PATTERN = r"^\+[1-9][0-9]{1,14}$"
# Printable ASCII without spaces: safe in logs and URLs, and what idempotency keys look like.
CLIENT_KEY_PATTERN = r"^[!-~]+$"
# The hard bound on a reset's lifetime in any region: a request past it is invalid before any
# policy is read. Each region's own, shorter maximum is checked at creation.
LONGEST_LIFETIME_S = int(LONGEST_LIFETIME.total_seconds())


def _never_null(schema: JsonDict) -> None:
    """A field that may be left out but is never null, as the schema shows it: its one non-null type."""
    alternatives = schema.pop("anyOf")
    assert isinstance(alternatives, list)
    for alternative in alternatives:
        if isinstance(alternative, dict) and alternative.get("type") != "null":
            schema.update(alternative)


# The two shapes of a creation are pydantic's own models, not ninja's Schema: Schema's wrapping
# validator (there to read Django model instances by attribute) validated a request twice, once
# as the dict and once through its attribute-reading wrapper, where the model forbids extra
# fields, and a response once more through the wrapper. A body and a response are plain values.
class CreateEvent(BaseModel):
    """A password-reset delivery request. Phone, email and link go to the vault and are never returned."""

    # A field the API does not know is refused (422, unknown_field), not ignored: a typo such as
    # ttl_second must not leave the caller believing its expiry was set. The schema says the same
    # (additionalProperties: false), and that exactly one of the two expiries is given (oneOf).
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"oneOf": [{"required": ["expires_at"]}, {"required": ["ttl_seconds"]}]},
    )

    client_key: str = Field(
        min_length=1, max_length=128, pattern=CLIENT_KEY_PATTERN, description="Your idempotency key for this reset."
    )
    purpose: Literal["password_reset"] = Field(description="What the message is for.")
    region: str = Field(min_length=2, max_length=8, pattern=r"^[A-Z]+$", description="Policy region, e.g. US or EU.")
    phone: str = Field(
        pattern=E164_PATTERN,
        description="The subscriber's phone number, E.164 (+14155550123). It must also be a valid number in its "
        "country's numbering plan (422 invalid_phone) and one the region's policy may send to.",
    )
    # No "format": "email": JSON Schema's email format and Django's address validator disagree at
    # the edges (schemathesis found addresses one takes and the other refuses), so the rule stays
    # the server's, documented: 422 invalid_email.
    email: str = Field(
        min_length=3,
        max_length=254,
        description="The subscriber's verified email address (422 invalid_email when it is not one).",
    )
    reset_url: str = Field(
        min_length=9,
        max_length=RESET_URL_MAX_LENGTH,
        pattern=r"^https://",
        description="The https reset link to deliver (422 invalid_reset_url when it is not a valid URL, or not "
        "ASCII: percent-encode the path, punycode the host). The region's policy sets a shorter maximum, so "
        "that its SMS fits the segments it allows (422 reset_url_too_long).",
    )
    # Optional, never null: the schema's oneOf reads "given" as "present", so null is refused too.
    expires_at: AwareDatetime | None = Field(
        json_schema_extra=_never_null,
        default=None,
        description=f"When the link expires (ISO 8601 with offset): at most {LONGEST_LIFETIME_S} s from now, "
        "and within the region policy's maximum lifetime. Give this or ttl_seconds.",
    )
    ttl_seconds: int | None = Field(
        json_schema_extra=_never_null,
        default=None,
        ge=1,
        le=LONGEST_LIFETIME_S,
        description=f"The link's lifetime from now, in seconds: at most {LONGEST_LIFETIME_S}, and within the "
        "region policy's maximum lifetime. Give this or expires_at.",
    )
    consent: bool = Field(default=False, description="The subscriber consented to SMS (required by some regions).")
    locale: str = Field(
        default="",
        max_length=MAX_TAG_LENGTH,
        description="The subscriber's language, a BCP 47 tag such as de-AT (422 invalid_locale when it is not one). "
        "The messages use the policy's templates for its lookup chain (de-AT, de), else the policy's default.",
    )
    time_zone: str = Field(
        default="",
        max_length=MAX_TIME_ZONE_LENGTH,
        description="The subscriber's IANA time zone, such as Europe/Vienna, to show the expiry in (422 "
        "invalid_time_zone when it is not one); without it the expiry is shown in UTC.",
    )

    @field_validator("expires_at", "ttl_seconds", mode="before")
    @classmethod
    def left_out_not_null(cls, value: object) -> object:
        # Runs only on a value sent (never on the default): an explicit null is refused.
        if value is None:
            raise ValueError("leave the field out instead of sending null")
        return value

    @model_validator(mode="after")
    def one_expiry(self) -> "CreateEvent":
        if (self.expires_at is None) == (self.ttl_seconds is None):
            raise ValueError("give exactly one of expires_at and ttl_seconds")
        return self


class CreatedEvent(BaseModel):
    event_id: str
    state: State
    region: str
    policy_version: int = Field(description="The number of the region's policy version the event is held to.")
    expires_at: datetime
    next_action: NextAction
    console_url: str = Field(description="The event's page in the on-call console.")


class ChannelStatus(Schema):
    channel: Channel
    claim_state: ClaimState
    attempts: int
    last_observation_at: datetime | None


class EventStatus(Schema):
    event_id: str
    state: State
    region: str
    policy_version: int
    created_at: datetime
    expires_at: datetime
    locale: str = Field(description="The subscriber's locale as given ('' if none).")
    time_zone: str = Field(description="The time zone the expiry is shown in ('' if none: UTC).")
    rendered_in: str = Field(description="The policy's template set the messages use: a locale, or 'default'.")
    channels: list[ChannelStatus]
    next_action: NextAction
    next_action_at: datetime | None
    remaining_budget_seconds: float | None = Field(
        description="Seconds until act_by, the last moment the next step can start and still finish before expiry "
        "(negative: overdue; null: nothing left to do)."
    )
    state_age_seconds: float = Field(description="Seconds since the event entered its current state.")


class FieldError(Schema):
    field: str
    message: str


class Error(Schema):
    error: str = Field(description="A stable code: unauthorized, not_found, invalid_request, a refusal reason, ...")
    message: str
    fields: list[FieldError] = Field(default_factory=list)


class Service(Schema):
    service: str
