"""Versioned regional delivery policies.

A policy version holds every rule the delivery code reads for one region. It is
drafted, approved as it was shown by someone who wrote none of it (neither its
author nor any editor), and published; from then on it is immutable (a change is a
new version). Events store the version they were created under, so a later version
never changes how an event in flight is handled.
There is no ``if region == ...`` anywhere: regions differ only by these records.
"""

import hashlib
import json
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction

from policies import sms_check
from policies.checks import channel_errors

if TYPE_CHECKING:
    from django.contrib.auth.models import User

DURATION_FIELDS = (
    "poll_interval",
    "sms_budget",
    "fallback_reserve",
    "poll_cost",
    "select_cost",
    "email_submit_cost",
    "record_cost",
    "lease_ttl",
    "email_backoff",
    "page_margin",
    "surge_quiet_period",
    "vault_retention",
    "raw_payload_retention",
    "observation_retention",
    "max_lifetime",
)

# No policy may let a reset live longer than this, whatever its version says: a reset link
# is meant for minutes, and the vault keeps the phone, email and link until expiry plus
# vault_retention, so an unbounded expiry would make it hold personal data for years.
LONGEST_LIFETIME = timedelta(hours=24)

# The loosest an SMS and a link may be: what the API always accepted (a link of 2,048
# characters is 14 GSM-7 segments with no text around it; 16 leaves room for the text).
SMS_MAX_SEGMENTS = 16
RESET_URL_MAX_LENGTH = 2048

# Everything a version decides; frozen once the version leaves DRAFT.
CONTENT_FIELDS = (
    "region",
    *DURATION_FIELDS,
    "email_attempt_limit",
    "resubmit_unknown_email",
    "alert_mode",
    "surge_threshold",
    "channel_plan",
    "allowed_sms_country_codes",
    "consent_required",
    "sms_sender",
    "sms_discard_content",
    "email_from",
    "sms_template",
    "email_subject_template",
    "email_body_template",
    "default_locale",
    "locale_templates",
    "sms_max_segments",
    "reset_url_max_length",
    "purpose",
)


class Stage(models.TextChoices):
    DRAFT = "draft"
    APPROVED = "approved"
    PUBLISHED = "published"
    RETIRED = "retired", "retired (superseded by a newer version)"


class AlertMode(models.TextChoices):
    OBSERVE = "observe", "observe (record would-have-paged)"
    PAGE = "page", "page"


class ChannelPlan(models.TextChoices):
    SMS_THEN_EMAIL = "sms_then_email", "SMS, then one email fallback"
    SMS_ONLY = "sms_only", "SMS only"
    EMAIL_ONLY = "email_only", "email only (SMS not allowed for account recovery)"


class MessageCategory(models.TextChoices):
    TRANSACTIONAL = "transactional"
    MARKETING = "marketing"


class PolicyVersionQuerySet(models.QuerySet["PolicyVersion"]):
    def active_for(self, region: str) -> "PolicyVersion | None":
        """Return the region's published version: the one new events are created under."""
        return self.filter(region=region, status=Stage.PUBLISHED).first()


class PolicyVersion(models.Model):
    region = models.CharField(max_length=8, help_text="Destination region this policy governs, e.g. US or EU.")
    number = models.PositiveIntegerField(help_text="Version number, increasing per region.")
    status = models.CharField(max_length=10, choices=Stage.choices, default=Stage.DRAFT)
    reason = models.TextField(blank=True, help_text="Why this version exists: what changed and why.")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    editors = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        related_name="+",
        blank=True,
        editable=False,
        help_text="Everyone who changed the draft's content after it was drafted; none of them may approve it.",
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    published_at = models.DateTimeField(null=True, blank=True)
    source_file = models.CharField(max_length=200, blank=True, help_text="Data file this version was loaded from.")
    source_hash = models.CharField(max_length=64, blank=True, help_text="SHA-256 of that file's content.")
    created_at = models.DateTimeField(auto_now_add=True)

    poll_interval = models.DurationField(help_text="How often a pending SMS is polled when no callback arrives.")
    sms_budget = models.DurationField(help_text="How long the SMS may stay unresolved before the email fallback.")
    fallback_reserve = models.DurationField(
        help_text="Reset lifetime kept back for the email fallback; must cover email submit + record."
    )
    poll_cost = models.DurationField(help_text="Time one receipt poll needs, for the action budget.")
    select_cost = models.DurationField(help_text="Time to select and claim the fallback channel.")
    email_submit_cost = models.DurationField(help_text="Time to submit the email to the SMTP relay.")
    record_cost = models.DurationField(help_text="Time to record an outcome durably.")
    lease_ttl = models.DurationField(help_text="How long a worker owns an event before another may take over.")
    email_attempt_limit = models.PositiveSmallIntegerField(help_text="Email submit attempts before giving up.")
    email_backoff = models.DurationField(help_text="Wait between email submit attempts.")
    resubmit_unknown_email = models.BooleanField(
        default=True,
        help_text="Resubmit (same Message-ID) after an unknown SMTP outcome: twice beats never.",
    )
    alert_mode = models.CharField(max_length=8, choices=AlertMode.choices, default=AlertMode.OBSERVE)
    page_margin = models.DurationField(help_text="Page when the remaining action budget falls below this.")
    # Database defaults as well: code from before these columns (a rolling deploy) inserts without them.
    surge_threshold = models.PositiveIntegerField(
        default=10,
        db_default=10,
        help_text="More events of the region at risk than this in one evaluation open one incident for the "
        "region (a surge) instead of one page each; its at-risk events page on their own again once it resolves.",
    )
    surge_quiet_period = models.DurationField(
        default=timedelta(minutes=2),
        db_default=timedelta(minutes=2),
        help_text="A surge resolves once the region has been at or under the threshold this long.",
    )
    channel_plan = models.CharField(max_length=16, choices=ChannelPlan.choices, default=ChannelPlan.SMS_THEN_EMAIL)
    allowed_sms_country_codes = models.JSONField(
        default=list, blank=True, help_text="Country calling codes an SMS may go to, e.g. [1]."
    )
    consent_required = models.BooleanField(
        default=False, help_text="Refuse events whose caller does not assert the subscriber's consent."
    )
    sms_sender = models.CharField(max_length=64, blank=True, help_text="Sender number or messaging service id.")
    sms_discard_content = models.BooleanField(
        default=False,
        help_text="Send with ContentRetention=discard, so the provider keeps no copy of the reset link "
        "(needs an account that allows it). Lookups then match on sender and time, not the body.",
    )
    email_from = models.CharField(max_length=254, blank=True, help_text="From address of the reset email.")
    sms_template = models.TextField(blank=True, help_text="Django template; context: reset_url, expires_at.")
    email_subject_template = models.CharField(max_length=200, blank=True)
    email_body_template = models.TextField(blank=True, help_text="Django template; context: reset_url, expires_at.")
    # Versions made before locales existed wrote their templates in English; their SMS limit
    # (set by the migration) and link length are the loosest, so nothing they sent is refused
    # for it; reviewed versions set their own, or get the default limit when they are saved.
    # Database defaults as well: code from before these columns (a rolling deploy) inserts without them.
    default_locale = models.CharField(
        max_length=35,
        default="en",
        db_default="en",
        help_text="BCP 47 tag of the language the default templates are written in.",
    )
    locale_templates = models.JSONField(
        default=dict,
        db_default={},
        blank=True,
        help_text="Template sets by locale (BCP 47), each with sms, email_subject and email_body. A subscriber "
        "gets the first set of their locale's lookup chain (de-AT, de), else the default templates.",
    )
    sms_max_segments = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Most SMS segments any locale's message may take with the longest link and expiry. "
        "Left empty: 1 where every locale's SMS fits one segment, else 2.",
    )
    reset_url_max_length = models.PositiveSmallIntegerField(
        default=RESET_URL_MAX_LENGTH,
        db_default=RESET_URL_MAX_LENGTH,
        help_text="Longest reset link accepted, in SMS characters (a ~ counts twice); longer is refused with 422.",
    )
    purpose = models.CharField(max_length=16, choices=MessageCategory.choices, default=MessageCategory.TRANSACTIONAL)
    vault_retention = models.DurationField(help_text="Keep destinations and the link this long after expiry.")
    raw_payload_retention = models.DurationField(help_text="Keep raw provider statuses this long.")
    observation_retention = models.DurationField(help_text="Keep observations this long; timings stay.")
    # Versions made before this field existed get the bound ttl_seconds always had (a day), so
    # they are held to nothing tighter than the hard bound; reviewed versions set their own.
    max_lifetime = models.DurationField(
        default=LONGEST_LIFETIME,
        help_text="Longest reset lifetime an event may be created with (at most 24 h): "
        "the vault keeps destinations and the link until expiry + vault_retention.",
    )

    objects = PolicyVersionQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["region", "number"], name="policy_region_number_unique"),
            # Exactly one version per region is the one new events are created under.
            models.UniqueConstraint(
                fields=["region"], condition=models.Q(status="published"), name="policy_one_published_per_region"
            ),
        ]
        ordering = ["region", "-number"]
        permissions = [
            ("approve_policyversion", "Can approve a policy version (privacy and legal owners)"),
            ("publish_policyversion", "Can publish an approved policy version"),
        ]

    def __str__(self) -> str:
        return f"{self.region} v{self.number}"

    def save(self, *args: object, editor: "User | None" = None, **kwargs: object) -> None:
        """Insert a new version, or change a draft as ``editor``; a version that left DRAFT is immutable.

        A change of content records its editor, who may then not approve it (a change of
        the reason alone is no change of what the version decides). The change and its
        editor commit together under the row's lock, which approval takes too
        (``lifecycle.approve``): an edit never lands after the approval, and an approval
        sees either neither or both.
        """
        self.settle_segment_limit()
        if self._state.adding:
            super().save(*args, **kwargs)  # type: ignore[arg-type]
            return
        with transaction.atomic():
            # Locked until the edit commits: an approval deciding at this moment waits, then
            # finds the new content and its editor; an edit waiting on an approval finds the
            # version no longer a draft.
            stored = type(self).objects.select_for_update().filter(pk=self.pk, status=Stage.DRAFT).first()
            if stored is None:
                raise ValidationError(f"{self} is no longer a draft: a policy version is immutable once approved")
            if content_digest(stored) != content_digest(self):
                if editor is None:
                    raise ValidationError(f"a change to {self}'s content must name its editor, who may not approve it")
                self.editors.add(editor)
            type(self).objects.filter(pk=self.pk).update(
                **{name: getattr(self, name) for name in (*CONTENT_FIELDS, "reason")}
            )

    def settle_segment_limit(self) -> None:
        """ "1 where the link fits, else 2": where no limit was set, the one the templates earn."""
        if self.sms_max_segments is None:
            self.sms_max_segments = sms_check.fitting_limit(self)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for name in DURATION_FIELDS:
            value = getattr(self, name)
            if value is not None and value <= timedelta(0):
                errors[name] = f"{name} must be positive"
        if self.max_lifetime is not None and self.max_lifetime > LONGEST_LIFETIME:
            errors["max_lifetime"] = f"max_lifetime must be at most {LONGEST_LIFETIME // timedelta(hours=1)} hours"
        if self.sms_max_segments is not None and not 1 <= self.sms_max_segments <= SMS_MAX_SEGMENTS:
            errors["sms_max_segments"] = f"sms_max_segments must be between 1 and {SMS_MAX_SEGMENTS}"
        if self.reset_url_max_length is not None and not 20 <= self.reset_url_max_length <= RESET_URL_MAX_LENGTH:
            errors["reset_url_max_length"] = f"reset_url_max_length must be between 20 and {RESET_URL_MAX_LENGTH}"
        if self.email_attempt_limit is not None and self.email_attempt_limit < 1:
            errors["email_attempt_limit"] = "email_attempt_limit must be at least 1"
        if "fallback_reserve" not in errors and None not in (
            self.fallback_reserve,
            self.email_submit_cost,
            self.record_cost,
        ):
            needed = self.email_submit_cost + self.record_cost
            if self.fallback_reserve < needed:
                errors["fallback_reserve"] = (
                    f"fallback_reserve ({self.fallback_reserve}) must cover email submit + record ({needed})"
                )
        if self.purpose != MessageCategory.TRANSACTIONAL:
            errors["purpose"] = "password resets are transactional messages; a marketing purpose is refused"
        if not errors.keys() & {"sms_max_segments", "reset_url_max_length"}:
            # Templates are measured with these limits: only once they are sound.
            self.settle_segment_limit()
            errors |= channel_errors(self)
        if errors:
            raise ValidationError(errors)

    @property
    def uses_sms(self) -> bool:
        return self.channel_plan != ChannelPlan.EMAIL_ONLY

    @property
    def uses_email(self) -> bool:
        return self.channel_plan != ChannelPlan.SMS_ONLY


def content_digest(version: PolicyVersion) -> str:
    """Return the SHA-256 of everything ``version`` decides: an approval and a projection are of exactly this."""
    content = {name: getattr(version, name) for name in CONTENT_FIELDS}
    # Sorted at every level: a JSON field (locale_templates) reads back from the database in
    # its own key order, and the same content must hash the same wherever it was read.
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()
