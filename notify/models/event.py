import re

from django.conf import settings
from django.db import models
from ulid import ULID

from notify.rules.vocabulary import NextAction, RequestPurpose, State
from policies.models import PolicyVersion


def new_event_id() -> str:
    """Return an opaque, time-ordered event id; never derived from personal data."""
    return f"evt_{ULID()}"


# The shape of new_event_id's ids: a ULID is 26 characters of Crockford's base32, in upper case.
EVENT_ID_PATTERN = "evt_[0-9A-HJKMNP-TV-Z]{26}"


def is_event_id(value: str) -> bool:
    """Tell whether ``value`` is shaped as ``new_event_id`` makes ids; anything else names no event.

    Checked where an id comes in from outside, before it is looked up: PostgreSQL answers a
    NUL byte in text with an error, not with a miss.
    """
    return re.fullmatch(EVENT_ID_PATTERN, value) is not None


class EventQuerySet(models.QuerySet["Event"]):
    def failing(self) -> "EventQuerySet":
        """Open events whose steps raised NOTIFY_FAILING_AFTER times in a row: one bad row, paged."""
        return self.filter(step_failures__gte=settings.NOTIFY_FAILING_AFTER, act_by__isnull=False)


class Event(models.Model):
    """One reset-delivery workflow.

    ``state`` and ``version`` are written only by ``notify.writes``; every
    write there is a compare-and-set on ``version`` (and on ``lease_token`` for
    a lease holder).
    """

    id = models.CharField(primary_key=True, max_length=30, default=new_event_id, editable=False)
    service = models.CharField(max_length=64, help_text="The internal service that asked for the reset.")
    client_key = models.CharField(max_length=128, help_text="The caller's idempotency key.")
    request_fingerprint = models.CharField(max_length=64, help_text="Keyed hash of the creating request.")
    purpose = models.CharField(max_length=32, choices=RequestPurpose.choices)
    region = models.CharField(max_length=8)
    policy = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="events")
    fallback_available = models.BooleanField(
        help_text="Whether an email fallback may be claimed (a verified email and a policy that allows it)."
    )
    sms_recipient_ref = models.CharField(max_length=64, help_text="Keyed hash of the normalized phone number.")
    email_recipient_ref = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    # How the messages are worded, none of it personal: the subscriber's locale and time zone as
    # the caller gave them (canonical), and the policy's template set they chose ("" the default).
    # Defaults in the database too: a process still running the code from before these columns
    # (a rolling deploy) inserts events without them.
    locale = models.CharField(
        max_length=35, blank=True, default="", db_default="", help_text="The subscriber's BCP 47 locale, if given."
    )
    time_zone = models.CharField(
        max_length=64, blank=True, default="", db_default="", help_text="IANA time zone the expiry is shown in."
    )
    message_locale = models.CharField(
        max_length=35,
        blank=True,
        default="",
        db_default="",
        help_text="The policy's template set the messages are rendered from ('': default).",
    )

    state = models.CharField(max_length=20, choices=State.choices, default=State.SMS_REQUESTED)
    version = models.PositiveIntegerField(default=1)
    state_entered_at = models.DateTimeField()
    last_observation_at = models.DateTimeField(null=True, blank=True)

    # Derived by ``machine.decide`` and stored at every write, so the sweeper and the
    # at-risk query are indexed range scans. NULL exactly when the event is terminal.
    next_action = models.CharField(max_length=20, choices=NextAction.choices)
    next_action_at = models.DateTimeField(null=True, blank=True)
    act_by = models.DateTimeField(null=True, blank=True)

    # When the earliest wake-up hint still in the broker is due; bookkeeping for
    # ``notify.writes.wake_ups`` (one pending hint per event) and the sweeper (a hint
    # overdue by more than the rest period was lost). Never a decision input.
    wake_at = models.DateTimeField(null=True, blank=True)

    lease_owner = models.CharField(max_length=128, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.PositiveBigIntegerField(
        default=0, help_text="Fencing token: bumped on every lease take-over; a stale holder cannot write."
    )

    # Steps that raised in a row (a sealed entry that will not open, a template that will not
    # render): the event backs off and, past NOTIFY_FAILING_AFTER, is failing. A step that
    # completes sets it back to 0. ``step_error`` names the last error's class and where it
    # was raised, never its message (which may quote personal data).
    step_failures = models.PositiveSmallIntegerField(default=0, db_default=0)
    step_error = models.CharField(max_length=200, blank=True, default="", db_default="")

    objects = EventQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["service", "client_key"], name="event_service_client_key_unique"),
        ]
        indexes = [
            # Consumer: the sweeper, which re-enqueues open events whose next action is due.
            models.Index(
                fields=["next_action_at"],
                name="event_open_due_idx",
                condition=models.Q(next_action_at__isnull=False),
            ),
            # Consumers: the at-risk evaluator (act_by < now + page margin) and the console's
            # open-events list, ordered by remaining action budget.
            models.Index(fields=["act_by"], name="event_open_act_by_idx", condition=models.Q(act_by__isnull=False)),
            # Consumer: the console's open-events list filtered by state, and its counts per
            # state, an index-only scan (region, which the counts may be filtered by, is in it).
            models.Index(
                fields=["state", "act_by", "region"],
                name="event_open_state_idx",
                condition=models.Q(act_by__isnull=False),
            ),
            # Consumer: the console's open-events list filtered by region; without it a region
            # with few open events is found by walking every open event in act_by order.
            models.Index(
                fields=["region", "act_by"],
                name="event_open_region_idx",
                condition=models.Q(act_by__isnull=False),
            ),
            # Consumer: SMS recovery where bodies are redacted (worker._neighbours): our other
            # messages to the same destination, sent around the same time.
            models.Index(fields=["sms_recipient_ref", "created_at"], name="event_recipient_idx"),
            # Consumers: the evaluator's failing events and the failing gauge in /metrics; few rows.
            models.Index(fields=["act_by"], name="event_step_failures_idx", condition=models.Q(step_failures__gt=0)),
        ]

    def __str__(self) -> str:
        return self.id
