from django.conf import settings
from django.db import models


class AuditAction(models.TextChoices):
    RELEASE_LEASE = "release_lease", "released an expired lease"
    CLAIM_FALLBACK = "claim_fallback", "claimed the email fallback"
    FOLLOW_UP = "follow_up", "marked for follow-up"
    VIEW_RAW_STATUS = "view_raw_status", "viewed raw provider statuses"


class AuditEntry(models.Model):
    """Who did what to which event from the console, including what they only looked at.

    Kept apart from the event's own history: a refused action changes no event, yet who
    tried it, and why it was refused, is what a post-incident review asks first.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    action = models.CharField(max_length=20, choices=AuditAction.choices)
    # Not a foreign key: the audit trail outlives any clean-up of events.
    event_id = models.CharField(max_length=30)
    at = models.DateTimeField()
    applied = models.BooleanField(help_text="False when the action was refused (someone else won the race).")
    # Why a refused action was refused, whose lease was released, or the follow-up note.
    detail = models.CharField(max_length=500, blank=True)

    class Meta:
        verbose_name_plural = "audit entries"
        permissions = [
            ("view_console", "Can open the on-call console"),
            ("act_on_events", "Can take runbook actions on events"),
            ("view_raw_status", "Can see raw provider statuses"),
        ]
        indexes = [
            # Consumers: the event page's list of console actions taken on this event, and
            # the open-events list's follow-up badges for the events on its page.
            models.Index(fields=["event_id", "at"], name="audit_event_time_idx"),
            # Consumer: the console's follow-up list, newest first.
            models.Index(
                fields=["-at"], name="audit_follow_up_idx", condition=models.Q(action="follow_up", applied=True)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.user_id} {self.action} {self.event_id}"
