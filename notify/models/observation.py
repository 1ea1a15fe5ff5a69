from django.db import models

from notify.rules.vocabulary import Channel, Effect, Normalized, Source


class Observation(models.Model):
    """Append-only evidence about an event: a receipt, a submit outcome, a note."""

    # No index of its own: observation_event_time_idx leads with event.
    event = models.ForeignKey("notify.Event", on_delete=models.CASCADE, related_name="observations", db_index=False)
    channel = models.CharField(max_length=8, choices=Channel.choices)
    source = models.CharField(max_length=10, choices=Source.choices)
    raw_status = models.CharField(max_length=64, blank=True, help_text="The provider's own status word.")
    normalized = models.CharField(max_length=20, choices=Normalized.choices)
    provider_time = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField()
    # For a submit call's answer: when that call began, so history keeps each attempt's own
    # latency (replay's timing export); empty for every other kind of evidence.
    attempt_started_at = models.DateTimeField(null=True, blank=True)
    # What it did to the event (``Effect``): the console, the logs and the metrics say the same.
    effect = models.CharField(max_length=10, choices=Effect.choices, default=Effect.RECORDED)
    actor = models.CharField(max_length=128, blank=True)
    note = models.TextField(blank=True)
    # The provider's payload with everything but an allowlist of status fields removed
    # at the adapter boundary (no To, From or Body), as JSON text; purged with raw_status.
    raw_payload = models.TextField(blank=True)
    # Identifies a provider report that may arrive more than once (a retried or duplicated
    # webhook): the same (message, status) pair is stored once per event.
    dedup_key = models.CharField(max_length=100, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["event", "dedup_key"], condition=~models.Q(dedup_key=""), name="observation_dedup_unique"
            ),
        ]
        indexes = [
            # Consumer: the event page's timeline and "last observation".
            models.Index(fields=["event", "recorded_at"], name="observation_event_time_idx"),
            # Consumer: the retention purge, which ages observations out by recording time.
            models.Index(fields=["recorded_at"], name="observation_recorded_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} {self.channel} {self.normalized}"
