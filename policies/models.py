"""Versioned regional delivery policies.

A policy version holds every duration the decision code reads. Events store the
version they were created under, so a later version never changes how an event
already in flight is handled.
"""

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import models

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
)


class PolicyVersionQuerySet(models.QuerySet["PolicyVersion"]):
    def active_for(self, region: str) -> "PolicyVersion | None":
        """Return the region's newest published version: the one new events are created under."""
        return self.filter(region=region, published_at__isnull=False).order_by("-number").first()


class PolicyVersion(models.Model):
    region = models.CharField(max_length=8, help_text="Destination region this policy governs, e.g. US or EU.")
    number = models.PositiveIntegerField(help_text="Version number, increasing per region.")
    published_at = models.DateTimeField(null=True, blank=True)
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
    page_margin = models.DurationField(help_text="Page when the remaining action budget falls below this.")

    objects = PolicyVersionQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["region", "number"], name="policy_region_number_unique"),
        ]
        ordering = ["region", "-number"]

    def __str__(self) -> str:
        return f"{self.region} v{self.number}"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for name in DURATION_FIELDS:
            value = getattr(self, name)
            if value is not None and value <= timedelta(0):
                errors[name] = f"{name} must be positive"
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
        if errors:
            raise ValidationError(errors)
