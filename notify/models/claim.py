from django.db import models

from notify.rules.vocabulary import Channel, ClaimState


def claim_key(channel: str, event_id: str) -> str:
    """Return the stable idempotency key for using ``channel`` on an event."""
    return f"reset-{channel}:{event_id}"


class Claim(models.Model):
    """The durable intent to use one channel for one event.

    The unique constraint on (event, channel) is the "at most one intent per
    channel" guarantee; retries reuse ``key``.
    """

    # No index of its own: the (event, channel) unique constraint leads with event.
    event = models.ForeignKey("notify.Event", on_delete=models.CASCADE, related_name="claims", db_index=False)
    channel = models.CharField(max_length=8, choices=Channel.choices)
    key = models.CharField(max_length=64, unique=True)
    state = models.CharField(max_length=12, choices=ClaimState.choices, default=ClaimState.CLAIMED)
    attempts = models.PositiveSmallIntegerField(default=0)
    provider_ref = models.CharField(max_length=64, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True, help_text="First submit; recovery looks from here.")
    # When the latest submit began, on the database's clock: a lookup's "not found" proves
    # the message absent only once the provider's processing horizon has passed since then.
    attempt_started_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    segments = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="SMS segments the message went out as (what it is billed as)."
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["event", "channel"], name="claim_one_per_channel"),
        ]

    def __str__(self) -> str:
        return self.key
